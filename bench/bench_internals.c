/*
 * bench_internals.c - the runtime-internals suites of the shared benchmark
 * schema:
 *
 * pool
 * - pool_alloc (shape "pool"): one allocation served from the device's
 *   buffer pool, timed on the pool itself (nxv_pool_alloc of a warm
 *   256-byte size class, through the internal header sched/device.h), in
 *   batches of 1000 allocations followed by their 1000 releases.
 * - tensor_new (shape "16"): the public-API cost of a new tensor, one
 *   nxv_tensor_empty of 16 f32 plus its nxv_tensor_release (the allocation
 *   inside every op that creates a result).
 * - tensor_new (shape "16/upload"): nxv_tensor_upload of 16 f32 plus its
 *   release, N per run, timed to a final synchronize.
 *
 * pipeline
 * - pipeline_cold / pipeline_warm: this executable started again as a child
 *   (hidden option --pipeline-child DIR) that opens the device with its
 *   on-disk pipeline cache in DIR, runs one tiny op of each of a fixed list
 *   of kernel families and dtypes, and synchronizes; the figure is the time
 *   from before nxv_device_open to the synchronize returning. Cold: DIR is
 *   a new empty temporary directory; warm: a second child on the DIR the
 *   first one filled. The children run with __GL_SHADER_DISK_CACHE=0 and
 *   MESA_SHADER_CACHE_DISABLE=true so that only the runtime's cache counts,
 *   and with --no-spirv-prune when this run has it (pipelines from whole
 *   modules: the cold figure with and without pruning), and with this
 *   run's --pipeline-threads.
 * - pipeline_cold_sync, pipeline_cold_threads: the cold child without
 *   pipeline threads (each pipeline created by the thread that queues its
 *   op) and with them (auto, or this run's), one of them the cold child
 *   above and the other a third child in another new directory; the
 *   per-op times of the one without (pipeline_cold_op, shape = the op) are
 *   each op's pipeline creation.
 */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"
#include "sched/device.h" /* the pool of a device, for pool_alloc */

#define POOL_BATCH 1000
#define POOL_BYTES 64 /* served by the smallest size class */

/* ------------------------------------------------------------------ */
/* pool                                                                */
/* ------------------------------------------------------------------ */

typedef struct pair_times {
  double alloc_s, release_s; /* per op */
} pair_times;

/* iters nxv_pool_alloc + nxv_buffer_release in batches. */
static pair_times time_pool(nxv_pool *pool, uint64_t iters) {
  nxv_buffer *bufs[POOL_BATCH];
  double ta = 0, tr = 0;
  for (uint64_t done = 0; done < iters; done += POOL_BATCH) {
    double t0 = now_s();
    for (int i = 0; i < POOL_BATCH; i++)
      NXV_CHECK(nxv_pool_alloc(pool, POOL_BYTES, &bufs[i]));
    double t1 = now_s();
    for (int i = 0; i < POOL_BATCH; i++) nxv_buffer_release(bufs[i]);
    double t2 = now_s();
    ta += t1 - t0;
    tr += t2 - t1;
  }
  pair_times p = {ta / (double)iters, tr / (double)iters};
  return p;
}

/* iters nxv_tensor_empty + nxv_tensor_release in batches. */
static pair_times time_tensor_empty(nxv_device *dev, uint64_t iters) {
  nxv_tensor *ts[POOL_BATCH];
  double ta = 0, tr = 0;
  for (uint64_t done = 0; done < iters; done += POOL_BATCH) {
    double t0 = now_s();
    for (int i = 0; i < POOL_BATCH; i++)
      NXV_CHECK(nxv_tensor_empty(dev, NXV_F32, 16, &ts[i]));
    double t1 = now_s();
    for (int i = 0; i < POOL_BATCH; i++) nxv_tensor_release(ts[i]);
    double t2 = now_s();
    ta += t1 - t0;
    tr += t2 - t1;
  }
  pair_times p = {ta / (double)iters, tr / (double)iters};
  return p;
}

/* n uploads of 16 f32 + release, then a synchronize; seconds per upload. */
static double time_upload(nxv_device *dev, uint64_t n) {
  float v[16];
  for (int i = 0; i < 16; i++) v[i] = (float)i;
  double t0 = now_s();
  for (uint64_t i = 0; i < n; i++) {
    nxv_tensor *t;
    NXV_CHECK(nxv_tensor_upload(dev, NXV_F32, 16, v, &t));
    nxv_tensor_release(t);
  }
  NXV_CHECK(nxv_device_synchronize(dev));
  return (now_s() - t0) / (double)n;
}

void suite_pool(const options *o, nxv_device *dev) {
  const uint64_t iters = o->quick ? 100000 : 1000000;
  nxv_pool *pool = dev->pool;
  NXV_CHECK(nxv_device_synchronize(dev));
  (void)time_pool(pool, POOL_BATCH); /* warm-up: the class's slab carved */
  (void)time_tensor_empty(dev, POOL_BATCH);
  (void)time_upload(dev, o->ops);
  nxv_stats s0 = stats_of(dev);
  double *pa = xcalloc(o->reps, sizeof *pa), *pr = xcalloc(o->reps, sizeof *pr);
  double *ea = xcalloc(o->reps, sizeof *ea), *er = xcalloc(o->reps, sizeof *er);
  double *ep = xcalloc(o->reps, sizeof *ep), *up = xcalloc(o->reps, sizeof *up);
  for (uint32_t r = 0; r < o->reps; r++) {
    pair_times p = time_pool(pool, iters);
    pa[r] = p.alloc_s;
    pr[r] = p.release_s;
    pair_times e = time_tensor_empty(dev, iters);
    ea[r] = e.alloc_s;
    er[r] = e.release_s;
    ep[r] = e.alloc_s + e.release_s;
  }
  nxv_stats s1 = stats_of(dev);
  /* Every allocation must have been served from the free lists. */
  uint64_t expect = 2 * (uint64_t)o->reps * ((iters + POOL_BATCH - 1) / POOL_BATCH) * POOL_BATCH;
  if (s1.pool_allocations != s0.pool_allocations ||
      s1.pool_misses != s0.pool_misses ||
      s1.pool_hits - s0.pool_hits != expect)
    die("pool: %" PRIu64 " hits, %" PRIu64 " misses and %" PRIu64
        " device allocations during the timed loops; expected %" PRIu64
        " hits and none of the others", s1.pool_hits - s0.pool_hits,
        s1.pool_misses - s0.pool_misses,
        s1.pool_allocations - s0.pool_allocations, expect);
  for (uint32_t r = 0; r < o->reps; r++) up[r] = time_upload(dev, o->ops);
  /* Uploads released at once stay live until their transfer retires, so
   * how many are live at a time (and whether the pool must grow) depends
   * on how far the producer runs ahead of the device: reported, not
   * checked. */
  const uint64_t upload_allocs = stats_of(dev).pool_allocations - s1.pool_allocations;
  { /* the uploads deliver their data */
    float v[16], back[16];
    for (int i = 0; i < 16; i++) v[i] = (float)i * 0.5f;
    nxv_tensor *t;
    NXV_CHECK(nxv_tensor_upload(dev, NXV_F32, 16, v, &t));
    NXV_CHECK(nxv_tensor_download(t, 0, 16, back));
    nxv_tensor_release(t);
    if (memcmp(v, back, sizeof v) != 0) die("pool: an upload read back wrong");
  }
  const double pool_alloc = min_of(pa, o->reps), pool_rel = min_of(pr, o->reps);
  const double new_alloc = min_of(ea, o->reps), new_rel = min_of(er, o->reps);
  const double new_pair = min_of(ep, o->reps), upload = min_of(up, o->reps);
  free(pa);
  free(pr);
  free(ea);
  free(er);
  free(ep);
  free(up);
  emit("pool_alloc", "-", "pool", "us", pool_alloc * 1e6);
  emit("tensor_new", "f32", "16", "us_per_op", new_pair * 1e6);
  emit("tensor_new", "f32", "16/upload", "us_per_op", upload * 1e6);
  if (o->csv) return;
  printf("Pool and tensor creation, best of %u runs of %" PRIu64
         " (uploads: %" PRIu64 " per run, timed to a synchronize); ns per "
         "op\n", o->reps, iters, o->ops);
  printf("%-40s %10s %10s %10s\n", "what", "create", "release", "both");
  printf("%-40s %10.1f %10.1f %10.1f\n",
         "pool_alloc: nxv_pool_alloc (warm class)", pool_alloc * 1e9,
         pool_rel * 1e9, (pool_alloc + pool_rel) * 1e9);
  printf("%-40s %10.1f %10.1f %10.1f\n", "tensor_new: nxv_tensor_empty 16 f32",
         new_alloc * 1e9, new_rel * 1e9, new_pair * 1e9);
  printf("%-40s %10s %10s %10.1f\n", "tensor_new: nxv_tensor_upload 16 f32",
         "-", "-", upload * 1e9);
  printf("ratio tensor_new (empty + release) / pool alloc + release: "
         "%.2fx\ndevice allocations during the timed loops: pool and "
         "tensor_empty 0 (checked), uploads %" PRIu64 "\n\n",
         new_pair / (pool_alloc + pool_rel), upload_allocs);
  fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* pipeline: the child                                                 */
/* ------------------------------------------------------------------ */

typedef struct child_ctx {
  nxv_device *d;
  nxv_tensor *keep[64];
  double op_ms[64];         /* per kept tensor: its op's time */
  const char *label[64];    /* and what made it */
  double mark;              /* when the previous op returned */
  int nkeep;
  unsigned ops, skipped;
} child_ctx;

/* Keeps t (released at the end) and records the time since the previous
 * keep as what the op labelled label took: its pipeline's creation, where
 * it needed one. */
static nxv_tensor *keep(child_ctx *c, nxv_tensor *t, const char *label) {
  if (c->nkeep == (int)(sizeof c->keep / sizeof c->keep[0]))
    die("pipeline child: too many tensors");
  double now = now_s();
  c->op_ms[c->nkeep] = (now - c->mark) * 1e3;
  c->label[c->nkeep] = label;
  c->mark = now;
  c->keep[c->nkeep++] = t;
  c->ops++;
  return t;
}

/* One tiny op of each kernel family and dtype of the fixed list (those
 * the device has no kernel for are skipped and counted); quick: the first
 * three only (f32 sum, add, matmul). Returns the f32 input and the sum of
 * all its elements. */
static void child_ops(child_ctx *c, bool quick, nxv_tensor **out_x,
                      nxv_tensor **out_sum) {
  nxv_device *d = c->d;
  const int64_t n64[1] = {64}, sq[2] = {8, 8}, tr[2] = {1, 8};
  float h[64];
  for (int i = 0; i < 64; i++) h[i] = (float)i * 0.25f;
  nxv_tensor *x, *y, *f16 = NULL, *mask = NULL;
  NXV_CHECK(nxv_tensor_upload(d, NXV_F32, 64, h, &x));
  keep(c, x, "upload:f32");
  c->ops--; /* an upload is a transfer, not a kernel */
  nxv_view vx = {x, 0, NULL}, vxt = {x, 0, tr};
  nxv_tensor *sum;
  NXV_CHECK(nxv_reduce(d, NXV_REDUCE_SUM, 1, n64, &vx, 0x1u, &sum));
  keep(c, sum, "reduce:sum:f32");
  NXV_CHECK(nxv_binary(d, NXV_ADD, 1, n64, &vx, &vx, &y));
  keep(c, y, "binary:add:f32");
  nxv_matmul_desc md = {.batch = 1, .m = 8, .n = 8, .k = 8, .a = x,
                        .a_strides = {64, 8, 1}, .b = x,
                        .b_strides = {64, 8, 1}};
  NXV_CHECK(nxv_matmul(d, &md, &y));
  keep(c, y, "matmul:f32");
  *out_x = x;
  *out_sum = sum;
  if (quick) return; /* the short list of --quick */
  /* elementwise f32: strided, transcendental, plain unary */
  NXV_CHECK(nxv_binary(d, NXV_MUL, 2, sq, &vxt, &vx, &y));
  keep(c, y, "binary:mul:f32:strided");
  NXV_CHECK(nxv_unary(d, NXV_EXP, 1, n64, &vx, &y));
  keep(c, y, "unary:exp:f32");
  NXV_CHECK(nxv_unary(d, NXV_NEG, 1, n64, &vx, &y));
  keep(c, y, "unary:neg:f32");
  {
    /* a fused program: log(exp(x) + x) */
    const uint32_t prog[3] = {NXV_FUSED_INSTR(NXV_FUSED_UNARY, NXV_EXP, 0, 0, 0),
                              NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_ADD, 1, 0, 0),
                              NXV_FUSED_INSTR(NXV_FUSED_UNARY, NXV_LOG, 2, 0, 0)};
    NXV_CHECK(nxv_fused(d, NXV_F32, 1, n64, 1, &vx, 3, prog, &y));
    keep(c, y, "fused:f32:exp-add-log");
  }
  NXV_CHECK(nxv_tensor_copy(x, &y));
  keep(c, y, "tensor_copy:f32");
  NXV_CHECK(nxv_transpose(d, 2, sq, x, (const uint32_t[]){1, 0}, &y));
  keep(c, y, "transpose:f32");
  NXV_CHECK(nxv_iota(d, NXV_S32, 1, n64, 0, &y));
  keep(c, y, "iota:s32");
  /* reductions: thread variant (k = 8; the sum above is the workgroup
   * one), argmax */
  NXV_CHECK(nxv_reduce(d, NXV_REDUCE_MAX, 2, sq, &vx, 0x2u, &y));
  keep(c, y, "reduce:max:f32");
  NXV_CHECK(nxv_argreduce(d, true, false, 2, sq, &vx, 0x2u, &y));
  keep(c, y, "argreduce:f32");
  /* 16-bit types: conversions both ways, add, matmul */
  if (nxv_convert_supported(d, NXV_F16)) {
    NXV_CHECK(nxv_convert(d, NXV_F16, 1, n64, &vx, &f16));
    keep(c, f16, "convert:f16");
    nxv_view vh = {f16, 0, NULL};
    NXV_CHECK(nxv_binary(d, NXV_ADD, 1, n64, &vh, &vh, &y));
    keep(c, y, "binary:add:f16");
    NXV_CHECK(nxv_convert(d, NXV_F32, 1, n64, &vh, &y));
    keep(c, y, "convert:f32");
    md.a = md.b = f16;
    NXV_CHECK(nxv_matmul(d, &md, &y));
    keep(c, y, "matmul:f16");
  } else {
    c->skipped += 4;
  }
  if (nxv_convert_supported(d, NXV_BF16)) {
    nxv_tensor *bf;
    NXV_CHECK(nxv_convert(d, NXV_BF16, 1, n64, &vx, &bf));
    keep(c, bf, "convert:bf16");
    md.a = md.b = bf;
    NXV_CHECK(nxv_matmul(d, &md, &y));
    keep(c, y, "matmul:bf16");
  } else {
    c->skipped += 2;
  }
  /* f64: conversion, add, fill kernel (8-byte pattern) */
  if (nxv_convert_supported(d, NXV_F64)) {
    nxv_tensor *x64;
    double one = 1.0;
    NXV_CHECK(nxv_convert(d, NXV_F64, 1, n64, &vx, &x64));
    keep(c, x64, "convert:f64");
    nxv_view v64 = {x64, 0, NULL};
    NXV_CHECK(nxv_binary(d, NXV_ADD, 1, n64, &v64, &v64, &y));
    keep(c, y, "binary:add:f64");
    NXV_CHECK(nxv_fill(d, NXV_F64, 64, &one, &y));
    keep(c, y, "fill:f64");
  } else {
    c->skipped += 3;
  }
  /* masks: compare and select */
  if (nxv_compare_supported(d, NXV_LESS, NXV_F32) &&
      nxv_mask_type_supported(d, NXV_F32)) {
    NXV_CHECK(nxv_compare(d, NXV_LESS, 2, sq, &vxt, &vx, &mask));
    keep(c, mask, "compare:less:f32");
    nxv_view vm = {mask, 0, NULL};
    NXV_CHECK(nxv_select(d, 2, sq, &vm, &vx, &vxt, &y));
    keep(c, y, "select:f32");
  } else {
    c->skipped += 2;
  }
  /* gather rows {0, 3, 5, 7} of the 8x8 x */
  {
    const int64_t idx[4] = {0, 3, 5, 7};
    nxv_tensor *ti;
    NXV_CHECK(nxv_tensor_upload(d, NXV_S64, 4, idx, &ti));
    keep(c, ti, "upload:s64");
    c->ops--;
    const int64_t shape[2] = {4, 8}, src_st[2] = {0, 1}, idx_st[2] = {1, 0},
                  dims[1] = {8}, ast[1] = {8};
    nxv_gather_desc g = {.src = x, .indices = ti, .rank = 2, .shape = shape,
                         .src_strides = src_st, .index_strides = idx_st,
                         .depth = 1, .axis_dims = dims, .axis_strides = ast};
    NXV_CHECK(nxv_gather(d, &g, &y));
    keep(c, y, "gather:f32");
  }
  /* sort, window reduction, convolution */
  NXV_CHECK(nxv_sort(d, x, 8, 8, false, &y, NULL));
  keep(c, y, "sort:f32");
  {
    const int64_t out[2] = {4, 4}, win[2] = {2, 2}, st[2] = {2, 2},
                  dil[2] = {1, 1}, pad[2] = {0, 0};
    nxv_window_desc w = {.a = x, .rank = 2, .in_shape = sq, .out_shape = out,
                         .window = win, .strides = st, .dilations = dil,
                         .pad_lo = pad};
    NXV_CHECK(nxv_window_reduce(d, NXV_REDUCE_MAX, &w, &y));
    keep(c, y, "window_reduce:max:f32");
  }
  {
    const float kv[9] = {1, 0, -1, 2, 0, -2, 1, 0, -1};
    nxv_tensor *k;
    NXV_CHECK(nxv_tensor_upload(d, NXV_F32, 9, kv, &k));
    keep(c, k, "upload:f32");
    c->ops--;
    const int64_t in_shape[4] = {1, 1, 8, 8}, k_shape[4] = {1, 1, 3, 3},
                  out_shape[4] = {1, 1, 6, 6}, one[2] = {1, 1}, zero[2] = {0, 0};
    nxv_conv_desc cd = {.input = x, .kernel = k, .rank = 4,
                        .in_shape = in_shape, .kernel_shape = k_shape,
                        .out_shape = out_shape, .strides = one,
                        .pad_lo = zero, .pad_hi = zero, .input_dilation = one,
                        .kernel_dilation = one, .feature_groups = 1,
                        .batch_groups = 1};
    NXV_CHECK(nxv_conv(d, &cd, &y));
    keep(c, y, "conv:f32");
  }
  /* complex: conversion and FFT */
  if (nxv_convert_supported(d, NXV_C64)) {
    nxv_tensor *xc;
    NXV_CHECK(nxv_convert(d, NXV_C64, 1, n64, &vx, &xc));
    keep(c, xc, "convert:c64");
    NXV_CHECK(nxv_fft(d, xc, 8, 8, false, 0.0, &y));
    keep(c, y, "fft:c64");
  } else {
    c->skipped += 2;
  }
}

int pipeline_child_main(const options *o) {
  if (o->device < 0) die("--pipeline-child needs --device");
  nxv_device_config config;
  memset(&config, 0, sizeof config);
  config.cache_dir = o->child_dir;
  config.no_spirv_prune = g_no_spirv_prune;
  config.pipeline_threads = g_pipeline_threads;
  child_ctx c = {0};
  double t0 = now_s();
  NXV_CHECK(nxv_device_open(o->device, &config, &c.d));
  double t1 = now_s();
  c.mark = t1;
  nxv_tensor *x, *sum;
  child_ops(&c, o->quick, &x, &sum);
  NXV_CHECK(nxv_device_synchronize(c.d));
  double t2 = now_s();
  nxv_stats st = stats_of(c.d);
  float got;
  NXV_CHECK(nxv_tensor_download(sum, 0, 1, &got));
  if (got != 504.0f) /* 0.25 * (0 + 1 + ... + 63) */
    die("pipeline child: sum of the input is %.9g, expected 504", (double)got);
  NXV_CHECK(nxv_device_save_pipeline_cache(c.d));
  struct stat sb;
  long long cache_bytes = stat(st.cache_path, &sb) == 0 ? (long long)sb.st_size : -1;
  (void)x;
  for (int i = 0; i < c.nkeep; i++) nxv_tensor_release(c.keep[i]);
  nxv_device_release(c.d);
  for (int i = 0; i < c.nkeep; i++)
    printf("pipeline_op ms=%.3f %s\n", c.op_ms[i], c.label[i]);
  printf("pipeline_child open_ms=%.6f total_ms=%.6f pipelines=%" PRIu64
         " disk_hits=%" PRIu64 " loaded=%d ops=%u skipped=%u cache_bytes=%lld"
         " reject=%s\n", (t1 - t0) * 1e3, (t2 - t0) * 1e3, st.pipelines,
         st.pipeline_disk_hits, st.cache_file_loaded ? 1 : 0, c.ops,
         c.skipped, cache_bytes, st.cache_reject_reason);
  return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* ------------------------------------------------------------------ */
/* pipeline: the parent                                                */
/* ------------------------------------------------------------------ */

typedef struct child_result {
  double open_ms, total_ms;
  uint64_t pipelines, disk_hits;
  int loaded;
  unsigned ops, skipped;
  long long cache_bytes;
  char reject[160];
  int nops;                 /* the child's ops, in order: */
  double op_ms[64];         /* time of each (its pipeline's creation) */
  char op_label[64][40];    /* and its label */
} child_result;

static bool has_prefix(const char *s, const char *p) {
  return strncmp(s, p, strlen(p)) == 0;
}

/* Runs `self --pipeline-child dir --device index` with the driver caches
 * disabled, and parses its result line. threads: the child's
 * --pipeline-threads (0: none given; NXV_PIPELINE_THREADS_NONE: off,
 * NXV_PIPELINE_THREADS_AUTO: auto). */
static child_result run_child(const options *o, uint32_t index,
                              const char *dir, int32_t threads) {
  /* Everything the child needs is built before fork: between fork and exec
   * only async-signal-safe calls. */
  size_t n = 0;
  while (environ[n]) n++;
  char **envp = xcalloc(n + 3, sizeof *envp);
  size_t e = 0;
  for (size_t i = 0; i < n; i++)
    if (!has_prefix(environ[i], "__GL_SHADER_DISK_CACHE=") &&
        !has_prefix(environ[i], "MESA_SHADER_CACHE_DISABLE="))
      envp[e++] = environ[i];
  envp[e++] = (char *)"__GL_SHADER_DISK_CACHE=0";
  envp[e++] = (char *)"MESA_SHADER_CACHE_DISABLE=true";
  envp[e] = NULL;
  char idx[16];
  snprintf(idx, sizeof idx, "%u", index);
  char nthreads[16];
  if (threads == NXV_PIPELINE_THREADS_AUTO) snprintf(nthreads, sizeof nthreads, "auto");
  else if (threads < 0) snprintf(nthreads, sizeof nthreads, "off");
  else snprintf(nthreads, sizeof nthreads, "%d", threads);
  char *argv[10] = {(char *)o->self, (char *)"--pipeline-child", (char *)dir,
                    (char *)"--device", idx, NULL, NULL, NULL, NULL, NULL};
  int na = 5;
  if (o->quick) argv[na++] = (char *)"--quick";
  if (g_no_spirv_prune) argv[na++] = (char *)"--no-spirv-prune";
  if (threads) {
    argv[na++] = (char *)"--pipeline-threads";
    argv[na++] = nthreads;
  }
  if (!o->self[0]) die("pipeline: cannot find this executable's path");
  int fds[2];
  if (pipe(fds) != 0) die("pipeline: pipe: %s", strerror(errno));
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) die("pipeline: fork: %s", strerror(errno));
  if (pid == 0) {
    close(fds[0]);
    if (dup2(fds[1], STDOUT_FILENO) < 0) _exit(126);
    close(fds[1]);
    execve(o->self, argv, envp);
    _exit(127);
  }
  close(fds[1]);
  free(envp);
  char buf[8192];
  size_t len = 0;
  for (;;) {
    ssize_t r = read(fds[0], buf + len, sizeof buf - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
    if (len == sizeof buf - 1) break;
  }
  buf[len] = 0;
  close(fds[0]);
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) die("pipeline: waitpid: %s", strerror(errno));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    die("pipeline: the child (%s --pipeline-child %s) %s %d", o->self, dir,
        WIFEXITED(status) ? "exited with status" : "was killed by signal",
        WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  child_result c;
  memset(&c, 0, sizeof c);
  for (const char *op = strstr(buf, "pipeline_op "); op && c.nops < 64;
       op = strstr(op + 1, "pipeline_op ")) {
    int used = 0;
    if (sscanf(op, "pipeline_op ms=%lf %n", &c.op_ms[c.nops], &used) != 1 || !used) break;
    size_t l = strcspn(op + used, "\n");
    if (l >= sizeof c.op_label[0]) l = sizeof c.op_label[0] - 1;
    memcpy(c.op_label[c.nops], op + used, l);
    c.op_label[c.nops][l] = 0;
    c.nops++;
  }
  const char *line = strstr(buf, "pipeline_child ");
  if (!line ||
      sscanf(line, "pipeline_child open_ms=%lf total_ms=%lf pipelines=%" SCNu64
             " disk_hits=%" SCNu64 " loaded=%d ops=%u skipped=%u "
             "cache_bytes=%lld", &c.open_ms, &c.total_ms, &c.pipelines,
             &c.disk_hits, &c.loaded, &c.ops, &c.skipped,
             &c.cache_bytes) != 8)
    die("pipeline: unexpected output from the child: '%s'", buf);
  const char *rj = strstr(line, " reject=");
  if (rj) {
    rj += strlen(" reject=");
    size_t l = strcspn(rj, "\n");
    if (l >= sizeof c.reject) l = sizeof c.reject - 1;
    memcpy(c.reject, rj, l);
    c.reject[l] = 0;
  }
  return c;
}

static int rm_entry(const char *path, const struct stat *sb, int flag,
                    struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  if (remove(path) != 0) die("pipeline: removing %s: %s", path, strerror(errno));
  return 0;
}

/* The temporary cache directory, removed at exit if a check fails. */
static char g_cache_dir[1024];

static void remove_cache_dir(void) {
  if (!g_cache_dir[0]) return;
  char dir[sizeof g_cache_dir];
  memcpy(dir, g_cache_dir, sizeof dir);
  g_cache_dir[0] = 0; /* once, even if removing fails and dies */
  if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
    die("pipeline: removing %s failed", dir);
}

/* A new empty temporary directory in dir (g_cache_dir names it until
 * remove_cache_dir). */
static void make_cache_dir(char dir[sizeof g_cache_dir]) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof g_cache_dir, "%s/nxv_bench_pcache.XXXXXX",
           tmp && tmp[0] ? tmp : "/tmp");
  if (!mkdtemp(dir)) die("pipeline: mkdtemp %s: %s", dir, strerror(errno));
  memcpy(g_cache_dir, dir, sizeof g_cache_dir);
  static bool registered;
  if (!registered && atexit(remove_cache_dir) == 0) registered = true;
}

void suite_pipeline(const options *o, const nxv_device_info *info) {
  char dir[sizeof g_cache_dir];
  make_cache_dir(dir);
  child_result cold = run_child(o, info->index, dir, g_pipeline_threads);
  if (cold.loaded)
    die("pipeline: the cold child loaded a cache file from the new empty "
        "directory %s", dir);
  if (cold.cache_bytes <= 0)
    die("pipeline: the cold child wrote no pipeline cache file in %s", dir);
  child_result warm = run_child(o, info->index, dir, g_pipeline_threads);
  remove_cache_dir();
  if (!warm.loaded)
    die("pipeline: the warm child did not load the cache file the cold one "
        "wrote (%lld bytes): %s", cold.cache_bytes,
        warm.reject[0] ? warm.reject : "no reason recorded");
  if (warm.pipelines != cold.pipelines)
    die("pipeline: the cold child created %" PRIu64 " pipelines, the warm "
        "one %" PRIu64, cold.pipelines, warm.pipelines);
  /* The cold run again with the other setting of pipeline threads (auto
   * when this run has none, off when it has some): without them the time
   * of each op is its pipeline's creation; the two totals say what
   * creating pipelines in the background saves. */
  bool threads = g_pipeline_threads > 0 || g_pipeline_threads == NXV_PIPELINE_THREADS_AUTO;
  make_cache_dir(dir);
  child_result alt = run_child(o, info->index, dir,
                               threads ? NXV_PIPELINE_THREADS_NONE : NXV_PIPELINE_THREADS_AUTO);
  remove_cache_dir();
  if (alt.pipelines != cold.pipelines)
    die("pipeline: the cold child created %" PRIu64 " pipelines, the one %s "
        "pipeline threads %" PRIu64, cold.pipelines, threads ? "without" : "with",
        alt.pipelines);
  const child_result *sync = threads ? &alt : &cold, *with = threads ? &cold : &alt;
  emit("pipeline_cold", "-", "-", "ms", cold.total_ms);
  emit("pipeline_warm", "-", "-", "ms", warm.total_ms);
  emit("pipeline_cold_sync", "-", "-", "ms", sync->total_ms);
  emit("pipeline_cold_threads", "-", "-", "ms", with->total_ms);
  /* The same without the device's opening: the first ops and the
   * synchronize, where the pipelines are created. */
  emit("pipeline_cold", "-", "ops", "ms", cold.total_ms - cold.open_ms);
  emit("pipeline_warm", "-", "ops", "ms", warm.total_ms - warm.open_ms);
  emit("pipeline_cold_sync", "-", "ops", "ms", sync->total_ms - sync->open_ms);
  emit("pipeline_cold_threads", "-", "ops", "ms", with->total_ms - with->open_ms);
  emit("pipeline_cold", "-", "-", "count", (double)cold.pipelines);
  emit("pipeline_warm", "-", "-", "count", (double)warm.pipelines);
  for (int i = 0; i < sync->nops; i++)
    emit("pipeline_cold_op", "-", sync->op_label[i], "ms", sync->op_ms[i]);
  if (o->csv) return;
  printf("Pipeline cache: device open + %u tiny ops of the %s list "
         "(%u skipped: no kernel on this device) + synchronize, in a fresh "
         "child process each; driver shader caches off "
         "(__GL_SHADER_DISK_CACHE=0, MESA_SHADER_CACHE_DISABLE=true); cold "
         "= empty cache directory, warm = the file the cold run wrote (%lld "
         "bytes); pipeline threads: %s\n", cold.ops, o->quick ? "short (--quick)" : "fixed",
         cold.skipped, cold.cache_bytes,
         g_pipeline_threads == NXV_PIPELINE_THREADS_AUTO ? "auto"
         : g_pipeline_threads > 0                       ? "as given"
                                                        : "none (the default)");
  printf("%-26s %10s %10s %12s %10s %10s\n", "run", "total ms", "open ms",
         "ops+sync ms", "pipelines", "disk hits");
  const child_result *rs[3] = {&cold, &warm, &alt};
  const char *names[3] = {"cold", "warm",
                          threads ? "cold, threads off" : "cold, threads auto"};
  for (int i = 0; i < 3; i++)
    printf("%-26s %10.2f %10.2f %12.2f %10" PRIu64 " %10" PRIu64 "\n",
           names[i], rs[i]->total_ms, rs[i]->open_ms,
           rs[i]->total_ms - rs[i]->open_ms, rs[i]->pipelines,
           rs[i]->disk_hits);
  printf("ratio warm / cold: %.3f (total), %.3f (ops+sync only)\n",
         warm.total_ms / cold.total_ms,
         (warm.total_ms - warm.open_ms) / (cold.total_ms - cold.open_ms));
  printf("ratio with pipeline threads / without: %.3f (total), %.3f (ops+sync only)\n",
         with->total_ms / sync->total_ms,
         (with->total_ms - with->open_ms) / (sync->total_ms - sync->open_ms));
  printf("per op, pipeline threads off (its pipeline's creation where it "
         "needed one)%s:\n", g_no_spirv_prune ? ", whole modules (--no-spirv-prune)" : "");
  printf("%-28s %10s\n", "op", "cold ms");
  for (int i = 0; i < sync->nops; i++)
    printf("%-28s %10.2f\n", sync->op_label[i], sync->op_ms[i]);
  printf("\n");
  fflush(stdout);
}
