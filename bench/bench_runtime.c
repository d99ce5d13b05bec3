/*
 * bench_runtime.c - end-to-end benchmark of the nx_vulkan runtime: options,
 * the latency suite, the legacy large add/copy test, and main. The other
 * suites live in bench_bandwidth.c, bench_matmul.c and bench_internals.c;
 * bench.h has what they share. bench/README.md describes every figure.
 *
 * Runs on any Vulkan device the runtime accepts (lavapipe included) and
 * measures, in one run (--suite picks a subset):
 *
 * latency
 * 1. chain: N dependent tiny ops. x = x + 1 on a 16-element f32 tensor,
 *    each op consuming the previous result (intermediates are released as
 *    soon as the next op is enqueued). Timed from the first enqueue to the
 *    final download returning; "enqueue" is the time until the last enqueue
 *    returned (the producer-side cost), "e2e" is end to end. Run on a device
 *    opened with the default batching config ("batched") and on a second
 *    context opened with max_batch_nodes = 1 ("1/op": one queue submission
 *    per op, the reference mode).
 * 2. independent: N tiny ops y_i = x + 1 all reading the same input
 *    tensor, each result released right after its enqueue (the first and
 *    last are kept and checked), timed up to a final
 *    nxv_device_synchronize returning. Same two devices.
 * 3. submit_wait: the chain with an nxv_device_synchronize after every op
 *    (one submission and one host wait per op), batched device.
 * 4. to_number: y = x + 1 on a 1-element f32 tensor, then y downloaded to
 *    the host; each round trip timed alone, median of 1000, in blocks of
 *    100 alternating with to_number_staged: the same on a second context
 *    with unmapped_small, whose downloads copy through staging.
 *
 * bandwidth
 * 5. legacy large add vs copy: a large f32 elementwise add c = a + b (two
 *    inputs of --mb MiB, one output) against a device copy of one --mb MiB
 *    tensor, both nxv_tensor_copy and a copy kernel (nxv_unary NXV_COPY), on
 *    the batched device. One timed run enqueues the op R times (8, fewer
 *    when memory is short), then synchronizes, so per-op host overhead is
 *    amortised; bytes counted are read + written (add: 3x the size, copy:
 *    2x). Best and median over --reps runs. --mb defaults to 256, 16 on CPU
 *    devices (lavapipe), and is reduced to the device's buffer limits and
 *    heap.
 * 6. the schema's bandwidth tests on --side x --side operands of f32, f16
 *    and f64 (bench_bandwidth.c).
 *
 * matmul, pool, pipeline: bench_matmul.c and bench_internals.c.
 *
 * Reading the ratios
 * - "1/op / batched" (chain, independent) is the reference e2e time divided
 *   by the batched e2e time: how many times faster batching makes a stream
 *   of tiny ops. Above 1 means batching helps; the chain is the harder case
 *   because every op depends on the one before (a barrier per op).
 * - "add / device copy" is the add's bandwidth as a percentage of the
 *   faster device copy's bandwidth: how close the elementwise kernel gets
 *   to the memory speed a copy reaches. Near 100% is good.
 * Tiny-op figures are medians over --reps runs (best e2e also in --csv).
 * Each measurement is warmed up first (pipelines created, pool filled).
 * Results are checked (chain: x0[i] + N exactly; independent: x0[i] + 1;
 * add and copy: 64 elements spot-checked across the whole tensor) and every
 * nxv call's status too, so a broken runtime fails loudly (exit status 1)
 * instead of reporting fast garbage.
 *
 * Usage: nxv_bench [--device N] [--ops N] [--mb N] [--reps N] [--side N]
 *                  [--mm-max N] [--warm-ms N] [--kick-nodes N]
 *                  [--max-batch-cost N]
 *                  [--suite LIST] [--csv]
 *                  [--csv-out FILE]
 *                  [--quick]
 * --csv prints rows test,mode,metric,value,unit; --csv-out FILE writes the
 * shared schema (impl,test,dtype,shape,metric,value); --quick is a smoke
 * run for CI (every suite, tiny sizes). See bench/README.md.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"

#define TINY_ELEMS 16        /* elements of the tiny-op tensors */
#define INNER_MAX 8          /* large ops enqueued per timed run (R) */
#define INNER_MIN 2
#define SPOT_CHECKS 64       /* elements checked in a large result */
/* Keeps every chain value (x0[i] + N, x0[i] < 16) an exact f32 integer. */
#define MAX_OPS ((1u << 24) - TINY_ELEMS)

static const char *type_name(nxv_device_type t) {
  switch (t) {
    case NXV_DEVICE_INTEGRATED_GPU: return "integrated GPU";
    case NXV_DEVICE_DISCRETE_GPU: return "discrete GPU";
    case NXV_DEVICE_VIRTUAL_GPU: return "virtual GPU";
    case NXV_DEVICE_CPU: return "CPU";
    default: return "other";
  }
}

/* ------------------------------------------------------------------ */
/* Options                                                             */
/* ------------------------------------------------------------------ */

static void usage(FILE *f) {
  fputs(
      "usage: nxv_bench [options]\n"
      "  --device N      Vulkan device index (default: the runtime's choice,\n"
      "                  NX_VULKAN_DEVICE or the first usable GPU)\n"
      "  --suite LIST    comma-separated suites among latency, bandwidth,\n"
      "                  matmul, pool, pipeline (default: all)\n"
      "  --ops N         tiny ops per chain / independent / submit_wait run\n"
      "                  (default 10000)\n"
      "  --mb N          MiB per legacy large tensor (default 256, 16 on CPU\n"
      "                  devices such as lavapipe; capped by the device)\n"
      "  --side N        side of the bandwidth suite's square operands\n"
      "                  (default 8192, 1024 on CPU devices, from --mb when\n"
      "                  only --mb is given; capped by the device)\n"
      "  --mm-max N      largest matmul dimension (default 8192; on CPU\n"
      "                  devices 1024 and at most 2^31 FLOPs per product)\n"
      "  --reps N        timed runs per measurement (default 5)\n"
      "  --warm-ms N     GPU work before each dtype's timed runs of the\n"
      "                  bandwidth, matmul and large-op tests and each\n"
      "                  product of 2^34 FLOPs or more, so they run\n"
      "                  at the GPU's working clocks (default 500, 0 with\n"
      "                  --quick; never on CPU devices)\n"
      "  --dtypes LIST   bandwidth and matmul suites: comma-separated among\n"
      "                  f32, f16, f64, bf16 (matmul only), run in the\n"
      "                  suites' order (default: all)\n"
      "  --no-gpu-timestamps  the devices' no_gpu_timestamps option (no\n"
      "                  batch timestamps: no GPU time)\n"
      "  --no-spirv-prune  the devices' no_spirv_prune option (pipelines\n"
      "                  from whole modules, not pruned ones)\n"
      "  --pipeline-threads N|auto|off  the devices' pipeline_threads\n"
      "                  option (threads creating pipelines in the\n"
      "                  background; auto: half the CPUs; off, the\n"
      "                  runtime's default: on the thread that queues\n"
      "                  the op)\n"
      "  --defer         the devices' defer_elementwise option (basic\n"
      "                  elementwise ops return deferred results)\n"
      "  --kick-nodes N  the devices' kick_nodes option (submit at N nodes\n"
      "                  when the GPU is idle; default: the runtime's)\n"
      "  --max-batch-cost N  the devices' max_batch_cost option (submit\n"
      "                  once a batch's estimated work reaches N\n"
      "                  elements; default: the runtime's)\n"
      "  --csv           machine-readable stdout: test,mode,metric,value,unit\n"
      "  --csv-out FILE  also write every figure to FILE in the shared schema\n"
      "                  impl,test,dtype,shape,metric,value\n"
      "  --quick         fast smoke run of every suite (ops 200, mb 1,\n"
      "                  reps 2, side 256, small matmuls) unless given\n"
      "  --help          this text\n",
      f);
}

static uint64_t parse_u64(const char *opt, const char *s, uint64_t lo,
                          uint64_t hi) {
  if (!s) die("%s needs a value", opt);
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (!s[0] || *end || s[0] == '-' || v < lo || v > hi)
    die("%s: '%s' is not an integer in [%" PRIu64 ", %" PRIu64 "]", opt, s,
        lo, hi);
  return (uint64_t)v;
}

static uint32_t parse_suites(const char *s) {
  static const struct {
    const char *name;
    uint32_t bit;
  } kSuites[] = {{"latency", SUITE_LATENCY},   {"bandwidth", SUITE_BANDWIDTH},
                 {"matmul", SUITE_MATMUL},     {"pool", SUITE_POOL},
                 {"pipeline", SUITE_PIPELINE}, {"all", SUITE_ALL}};
  if (!s) die("--suite needs a value");
  uint32_t bits = 0;
  const char *p = s;
  for (;;) {
    size_t len = strcspn(p, ",");
    bool found = false;
    for (size_t i = 0; i < sizeof kSuites / sizeof kSuites[0]; i++)
      if (strlen(kSuites[i].name) == len && !strncmp(p, kSuites[i].name, len)) {
        bits |= kSuites[i].bit;
        found = true;
      }
    if (!found)
      die("--suite: unknown suite '%.*s' in '%s' (latency, bandwidth, "
          "matmul, pool, pipeline, all)", (int)len, p, s);
    if (!p[len]) break;
    p += len + 1;
  }
  return bits;
}

/* --dtypes: bit i for dtype i of BENCH_DTYPE_NAMES (f32, f16, f64, bf16). */
static uint32_t parse_dtypes(const char *s) {
  static const char *const kNames[4] = {"f32", "f16", "f64", "bf16"};
  if (!s || !s[0]) die("--dtypes needs a value");
  uint32_t bits = 0;
  const char *p = s;
  for (;;) {
    size_t len = strcspn(p, ",");
    bool found = false;
    for (uint32_t i = 0; i < 4; i++)
      if (strlen(kNames[i]) == len && !strncmp(p, kNames[i], len)) {
        bits |= 1u << i;
        found = true;
      }
    if (!found)
      die("--dtypes: unknown dtype '%.*s' in '%s' (f32, f16, f64, bf16)", (int)len,
          p, s);
    if (!p[len]) break;
    p += len + 1;
  }
  return bits;
}

static options parse_options(int argc, char **argv) {
  options o = {.device = -1, .ops = 10000, .mb = 256, .reps = 5,
               .side = 8192, .mm_max = 8192, .warm_ms = 500, .suites = SUITE_ALL};
  bool warm_set = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--device")) {
      o.device = (int32_t)parse_u64(a, v, 0, INT32_MAX);
      i++;
    } else if (!strcmp(a, "--ops")) {
      o.ops = parse_u64(a, v, 1, MAX_OPS);
      o.ops_set = true;
      i++;
    } else if (!strcmp(a, "--mb")) {
      o.mb = parse_u64(a, v, 1, 1u << 20);
      o.mb_set = true;
      i++;
    } else if (!strcmp(a, "--reps")) {
      o.reps = (uint32_t)parse_u64(a, v, 1, 1000);
      o.reps_set = true;
      i++;
    } else if (!strcmp(a, "--side")) {
      o.side = parse_u64(a, v, 2, 65535);
      o.side_set = true;
      i++;
    } else if (!strcmp(a, "--mm-max")) {
      o.mm_max = parse_u64(a, v, 1, 65536);
      o.mm_max_set = true;
      i++;
    } else if (!strcmp(a, "--warm-ms")) {
      o.warm_ms = (uint32_t)parse_u64(a, v, 0, 60000);
      warm_set = true;
      i++;
    } else if (!strcmp(a, "--dtypes")) {
      o.dtypes = parse_dtypes(v);
      i++;
    } else if (!strcmp(a, "--no-gpu-timestamps")) {
      g_no_gpu_timestamps = true;
    } else if (!strcmp(a, "--no-spirv-prune")) {
      g_no_spirv_prune = true;
    } else if (!strcmp(a, "--pipeline-threads")) {
      if (v && !strcmp(v, "off")) g_pipeline_threads = NXV_PIPELINE_THREADS_NONE;
      else if (v && !strcmp(v, "auto")) g_pipeline_threads = NXV_PIPELINE_THREADS_AUTO;
      else g_pipeline_threads = (int32_t)parse_u64(a, v, 1, NXV_PIPELINE_THREADS_MAX);
      i++;
    } else if (!strcmp(a, "--defer")) {
      g_defer_elementwise = true;
    } else if (!strcmp(a, "--kick-nodes")) {
      g_kick_nodes = (uint32_t)parse_u64(a, v, 1, 1u << 20);
      i++;
    } else if (!strcmp(a, "--max-batch-cost")) {
      g_max_batch_cost = parse_u64(a, v, 1, UINT64_MAX);
      i++;
    } else if (!strcmp(a, "--suite")) {
      o.suites = parse_suites(v);
      i++;
    } else if (!strcmp(a, "--csv-out")) {
      if (!v || !v[0]) die("--csv-out needs a file name");
      o.csv_out = v;
      i++;
    } else if (!strcmp(a, "--pipeline-child")) { /* hidden: see suite_pipeline */
      if (!v || !v[0]) die("--pipeline-child needs a directory");
      o.child_dir = v;
      i++;
    } else if (!strcmp(a, "--csv")) {
      o.csv = true;
    } else if (!strcmp(a, "--quick")) {
      o.quick = true;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      exit(EXIT_SUCCESS);
    } else {
      usage(stderr);
      die("unknown option '%s'", a);
    }
  }
  if (o.quick) {
    if (!warm_set) o.warm_ms = 0;
    if (!o.ops_set) o.ops = 200;
    if (!o.mb_set) o.mb = 1;
    if (!o.reps_set) o.reps = 2;
  }
  if (o.csv_out) { /* fail now rather than after the run */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", o.csv_out);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    if (access(dir, W_OK | X_OK) != 0 ||
        (access(o.csv_out, F_OK) == 0 && access(o.csv_out, W_OK) != 0))
      die("--csv-out: cannot write '%s'", o.csv_out);
  }
  /* The children of the pipeline suite are this very executable. */
  ssize_t n = readlink("/proc/self/exe", o.self, sizeof o.self - 1);
  if (n > 0) {
    o.self[n] = 0;
  } else if (argc > 0 && strlen(argv[0]) < sizeof o.self) {
    memcpy(o.self, argv[0], strlen(argv[0]) + 1);
  } else {
    o.self[0] = 0;
  }
  return o;
}

/* ------------------------------------------------------------------ */
/* Tiny ops: chain and independent                                     */
/* ------------------------------------------------------------------ */

typedef struct tiny_ctx {
  const char *mode;   /* "batched" or "1/op" */
  nxv_device *dev;
  nxv_tensor *x0;     /* TINY_ELEMS f32: 0, 1, ..., 15 */
  nxv_tensor *one;    /* TINY_ELEMS f32 ones */
} tiny_ctx;

/* One timed run. */
typedef struct sample {
  double enqueue_s;   /* first enqueue until the last enqueue returned */
  double total_s;     /* first enqueue until the result is on the host */
  uint64_t submits;   /* queue submissions during the run */
  uint64_t barriers;  /* pipeline barriers recorded during the run */
} sample;

static void tiny_setup(tiny_ctx *t, const char *mode, nxv_device *d) {
  float init[TINY_ELEMS];
  for (int i = 0; i < TINY_ELEMS; i++) init[i] = (float)i;
  float one = 1.0f;
  t->mode = mode;
  t->dev = d;
  NXV_CHECK(nxv_tensor_upload(d, NXV_F32, TINY_ELEMS, init, &t->x0));
  NXV_CHECK(nxv_fill(d, NXV_F32, TINY_ELEMS, &one, &t->one));
  NXV_CHECK(nxv_device_synchronize(d));
}

static void tiny_teardown(tiny_ctx *t) {
  nxv_tensor_release(t->x0);
  nxv_tensor_release(t->one);
  t->x0 = t->one = NULL;
}

/* Downloads a tiny tensor and checks element i == i + add. */
static void tiny_verify(const tiny_ctx *t, const char *what, nxv_tensor *x,
                        uint64_t add) {
  float out[TINY_ELEMS];
  NXV_CHECK(nxv_tensor_download(x, 0, TINY_ELEMS, out));
  for (int i = 0; i < TINY_ELEMS; i++) {
    float want = (float)((uint64_t)i + add);
    if (out[i] != want)
      die("%s (%s): element %d is %.9g, expected %.9g", what, t->mode, i,
          (double)out[i], (double)want);
  }
}

/* x = x + 1, n times, each op consuming the previous result; ends with the
 * download of the final x (timed). */
static sample run_chain(const tiny_ctx *t, uint64_t n) {
  const int64_t shape[1] = {TINY_ELEMS};
  nxv_stats s0 = stats_of(t->dev);
  sample r;
  double t0 = now_s();
  nxv_tensor *x = t->x0;
  for (uint64_t i = 0; i < n; i++) {
    nxv_view vx = {x, 0, NULL}, vone = {t->one, 0, NULL};
    nxv_tensor *y;
    NXV_CHECK(nxv_binary(t->dev, NXV_ADD, 1, shape, &vx, &vone, &y));
    if (x != t->x0) nxv_tensor_release(x);
    x = y;
  }
  double t1 = now_s();
  float out[TINY_ELEMS];
  NXV_CHECK(nxv_tensor_download(x, 0, TINY_ELEMS, out));
  double t2 = now_s();
  nxv_stats s1 = stats_of(t->dev);
  for (int i = 0; i < TINY_ELEMS; i++) {
    float want = (float)((uint64_t)i + n);
    if (out[i] != want)
      die("chain (%s): element %d is %.9g after %" PRIu64
          " ops, expected %.9g", t->mode, i, (double)out[i], n,
          (double)want);
  }
  nxv_tensor_release(x);
  r.enqueue_s = t1 - t0;
  r.total_s = t2 - t0;
  r.submits = s1.submits - s0.submits;
  r.barriers = s1.barriers - s0.barriers;
  return r;
}

/* y_i = x0 + 1 for i < n, all independent; results are released at once
 * except the first and the last, checked after the (timed) synchronize. */
static sample run_independent(const tiny_ctx *t, uint64_t n) {
  const int64_t shape[1] = {TINY_ELEMS};
  nxv_view vx = {t->x0, 0, NULL}, vone = {t->one, 0, NULL};
  nxv_tensor *first = NULL, *last = NULL;
  nxv_stats s0 = stats_of(t->dev);
  sample r;
  double t0 = now_s();
  for (uint64_t i = 0; i < n; i++) {
    nxv_tensor *y;
    NXV_CHECK(nxv_binary(t->dev, NXV_ADD, 1, shape, &vx, &vone, &y));
    if (i == 0) {
      first = y;
    } else {
      if (last) nxv_tensor_release(last);
      last = y;
    }
  }
  double t1 = now_s();
  NXV_CHECK(nxv_device_synchronize(t->dev));
  double t2 = now_s();
  nxv_stats s1 = stats_of(t->dev);
  tiny_verify(t, "independent, first result", first, 1);
  nxv_tensor_release(first);
  if (last) {
    tiny_verify(t, "independent, last result", last, 1);
    nxv_tensor_release(last);
  }
  r.enqueue_s = t1 - t0;
  r.total_s = t2 - t0;
  r.submits = s1.submits - s0.submits;
  r.barriers = s1.barriers - s0.barriers;
  return r;
}

/* Median figures of a series of samples. */
typedef struct summary {
  double enqueue_s, total_s, best_total_s, submits, barriers;
} summary;

static summary summarize(const sample *s, uint32_t n) {
  double *v = xcalloc(n, sizeof *v);
  summary r;
  for (uint32_t i = 0; i < n; i++) v[i] = s[i].enqueue_s;
  r.enqueue_s = median_of(v, n);
  for (uint32_t i = 0; i < n; i++) v[i] = s[i].total_s;
  r.total_s = median_of(v, n);
  r.best_total_s = min_of(v, n);
  for (uint32_t i = 0; i < n; i++) v[i] = (double)s[i].submits;
  r.submits = median_of(v, n);
  for (uint32_t i = 0; i < n; i++) v[i] = (double)s[i].barriers;
  r.barriers = median_of(v, n);
  free(v);
  return r;
}

/* ------------------------------------------------------------------ */
/* Large ops: elementwise add versus device copy                        */
/* ------------------------------------------------------------------ */

typedef struct big_ctx {
  nxv_device *dev;
  uint64_t count;      /* f32 elements per tensor */
  uint32_t inner;      /* ops enqueued per timed run */
  nxv_tensor *a;       /* a[i] = i */
  nxv_tensor *b;       /* b[i] = 0.5 */
} big_ctx;

/* Enqueues the op inner times, then synchronizes; returns the seconds from
 * the first enqueue to the synchronize returning. The last result is handed
 * to *out_last (the others are released as soon as they are enqueued). */
typedef enum big_mode { BIG_ADD, BIG_COPY, BIG_COPY_KERNEL } big_mode;

static double run_big(const big_ctx *b, big_mode mode, nxv_tensor **out_last) {
  const int64_t shape[1] = {(int64_t)b->count};
  nxv_view va = {b->a, 0, NULL}, vb = {b->b, 0, NULL};
  nxv_tensor *last = NULL;
  NXV_CHECK(nxv_device_synchronize(b->dev));
  double t0 = now_s();
  for (uint32_t r = 0; r < b->inner; r++) {
    nxv_tensor *y;
    if (mode == BIG_ADD)
      NXV_CHECK(nxv_binary(b->dev, NXV_ADD, 1, shape, &va, &vb, &y));
    else if (mode == BIG_COPY)
      NXV_CHECK(nxv_tensor_copy(b->a, &y));
    else
      NXV_CHECK(nxv_unary(b->dev, NXV_COPY, 1, shape, &va, &y));
    if (last) nxv_tensor_release(last);
    last = y;
  }
  NXV_CHECK(nxv_device_synchronize(b->dev));
  double t1 = now_s();
  *out_last = last;
  return t1 - t0;
}

/* Checks SPOT_CHECKS elements (both ends and random ones) of an add result
 * (c[i] = i + 0.5) or a copy result (bitwise equal to a[i]). */
static void big_verify(const big_ctx *b, bool add, nxv_tensor *c) {
  uint64_t seed = 12345;
  for (uint32_t k = 0; k < SPOT_CHECKS; k++) {
    uint64_t i = k == 0 ? 0
               : k == 1 ? b->count - 1
                        : splitmix64(&seed) % b->count;
    float got, ref;
    NXV_CHECK(nxv_tensor_download(c, i, 1, &got));
    NXV_CHECK(nxv_tensor_download(b->a, i, 1, &ref));
    if (add) {
      float want = (float)i + 0.5f;
      /* a[i] = (float)i may be rounded for i >= 2^24; allow two ulps. */
      if (!(fabsf(got - want) <= fmaxf(1.0f, fabsf(want)) * 2.4e-7f))
        die("large add: c[%" PRIu64 "] is %.9g, expected %.9g (a[i] = %.9g)",
            i, (double)got, (double)want, (double)ref);
    } else if (memcmp(&got, &ref, sizeof got) != 0) {
      die("device copy: element %" PRIu64 " is %.9g, source has %.9g", i,
          (double)got, (double)ref);
    }
  }
}

/* ------------------------------------------------------------------ */
/* The three benchmarks                                                */
/* ------------------------------------------------------------------ */

/* Size of the large tensors and ops per timed run. */
typedef struct large_plan {
  uint64_t req_bytes;  /* what --mb (or the default) asked for */
  uint64_t bytes;      /* what is used */
  uint32_t inner;      /* ops enqueued per timed run (R) */
  const char *note;    /* why bytes is what it is */
} large_plan;

/* The request (a smaller default on CPU devices), capped by the per-buffer
 * limits and by half the device-local heap holding both inputs plus
 * `inner` outputs in flight (inner is reduced first, down to INNER_MIN). */
static large_plan plan_large(const options *o, const nxv_device_info *info) {
  const bool cpu = info->type == NXV_DEVICE_CPU;
  const bool cpu_default = !o->mb_set && !o->quick && cpu;
  large_plan p = {.inner = INNER_MAX};
  p.req_bytes = (cpu_default ? 16 : o->mb) << 20;
  uint64_t lim = buffer_limit(info);
  uint64_t bytes = p.req_bytes;
  if (bytes > lim) bytes = lim >= (1u << 20) ? lim & ~((1ull << 20) - 1) : lim;
  uint64_t heap = info->device_local_heap_size / 2;
  if (heap) {
    while (p.inner > INNER_MIN && (2 + (uint64_t)p.inner) * bytes > heap)
      p.inner--;
    if ((2 + (uint64_t)p.inner) * bytes > heap) {
      bytes = heap / (2 + p.inner);
      if (bytes >= (1u << 20)) bytes &= ~((1ull << 20) - 1);
    }
  }
  bytes &= ~(uint64_t)15; /* whole 4-wide vectors */
  if (bytes < 16) die("device limits leave no room for the large tensors");
  p.bytes = bytes;
  p.note = bytes < p.req_bytes ? "reduced to the device's limits"
           : cpu_default       ? "CPU-device default"
                               : "as requested";
  return p;
}

static void print_header(const options *o, const nxv_device_info *info,
                         const large_plan *lp) {
  char suites[64] = "";
  static const char *const kNames[] = {"latency", "bandwidth", "matmul",
                                       "pool", "pipeline"};
  for (unsigned i = 0; i < 5; i++)
    if (o->suites & (1u << i)) {
      if (suites[0]) strcat(suites, " ");
      strcat(suites, kNames[i]);
    }
  unsigned api_major = (info->api_version >> 22) & 0x7Fu,
           api_minor = (info->api_version >> 12) & 0x3FFu,
           api_patch = info->api_version & 0xFFFu;
  if (o->csv) {
    char buf[64];
    csv_row("test", "mode", "metric", "value", "unit");
    snprintf(buf, sizeof buf, "%u", info->index);
    csv_row("info", "", "device_index", buf, "");
    csv_row("info", "", "device_name", info->name, "");
    csv_row("info", "", "device_type", type_name(info->type), "");
    csv_row("info", "", "driver_name", info->driver_name, "");
    csv_row("info", "", "driver_info", info->driver_info, "");
    snprintf(buf, sizeof buf, "%u.%u.%u", api_major, api_minor, api_patch);
    csv_row("info", "", "vulkan_api", buf, "");
    csv_num("info", "", "max_storage_buffer_range",
            (double)info->max_storage_buffer_range, "B");
    csv_num("info", "", "device_local_heap",
            (double)info->device_local_heap_size, "B");
    csv_row("config", "batched", "max_batch_nodes", "default", "");
    csv_row("config", "1/op", "max_batch_nodes", "1", "");
    csv_num("config", "", "ops", (double)o->ops, "");
    csv_num("config", "", "tiny_elems", TINY_ELEMS, "");
    csv_num("config", "", "reps", o->reps, "");
    csv_num("config", "", "large_bytes", (double)lp->bytes, "B");
    csv_num("config", "", "large_requested_bytes", (double)lp->req_bytes,
            "B");
    csv_num("config", "", "large_ops_per_run", lp->inner, "");
    csv_row("config", "", "suites", suites, "");
    return;
  }
  printf("nx_vulkan runtime benchmark\n");
  printf("device   [%u] %s (%s, vendor 0x%04x, device 0x%04x)\n",
         info->index, info->name, type_name(info->type), info->vendor_id,
         info->device_id);
  printf("driver   %s: %s (driver version 0x%x, Vulkan %u.%u.%u)\n",
         info->driver_name, info->driver_info, info->driver_version,
         api_major, api_minor, api_patch);
  printf("limits   max_storage_buffer_range %.0f MiB, max allocation %.0f "
         "MiB, device-local heap %.1f GiB, subgroup %u\n",
         (double)info->max_storage_buffer_range / MIB,
         (double)info->max_memory_allocation_size / MIB,
         (double)info->device_local_heap_size / (MIB * 1024),
         info->subgroup_size);
  printf("config   batched: zero-initialised nxv_device_config (runtime "
         "defaults, see include/nxv.h); 1/op: max_batch_nodes = 1 (one "
         "submit per op), otherwise the same; both: disk pipeline cache "
         "off\n");
  printf("suites   %s%s\n", suites, o->quick ? " (--quick)" : "");
  printf("run      ops %" PRIu64 " (tiny tensors of %d f32), reps %u",
         o->ops, TINY_ELEMS, o->reps);
  if (o->suites & SUITE_BANDWIDTH)
    printf(", large tensors %.2f MiB f32 (%s), %u ops per timed large run",
           (double)lp->bytes / MIB, lp->note, lp->inner);
  printf("\n\n");
  fflush(stdout);
}

/* Benchmarks 1 and 2 on dev (default config), untimed (the default config
 * without the per-op clock read of the op_latency histogram) and ref (one
 * submit per op). Returns the batched chain's median e2e time per op (s). */
enum { TINY_MODES = 3, TINY_REF = 2 };
static double bench_tiny(const options *o, nxv_device *dev, nxv_device *untimed,
                         nxv_device *ref) {
  tiny_ctx tiny[TINY_MODES];
  tiny_setup(&tiny[0], "batched", dev);
  tiny_setup(&tiny[1], "untimed", untimed);
  tiny_setup(&tiny[TINY_REF], "1/op", ref);
  for (int m = 0; m < TINY_MODES; m++) { /* warm-up: pipelines, pool, threads */
    (void)run_chain(&tiny[m], o->ops);
    (void)run_independent(&tiny[m], o->ops);
  }
  sample *chain[TINY_MODES], *indep[TINY_MODES];
  for (int m = 0; m < TINY_MODES; m++) {
    chain[m] = xcalloc(o->reps, sizeof(sample));
    indep[m] = xcalloc(o->reps, sizeof(sample));
  }
  for (uint32_t r = 0; r < o->reps; r++) { /* interleaved against drift */
    for (int m = 0; m < TINY_MODES; m++) chain[m][r] = run_chain(&tiny[m], o->ops);
    for (int m = 0; m < TINY_MODES; m++) indep[m][r] = run_independent(&tiny[m], o->ops);
  }
  summary sum[2][TINY_MODES]; /* [chain, independent][mode] */
  uint64_t ring_full[TINY_MODES];
  for (int m = 0; m < TINY_MODES; m++) {
    sum[0][m] = summarize(chain[m], o->reps);
    sum[1][m] = summarize(indep[m], o->reps);
    free(chain[m]);
    free(indep[m]);
    ring_full[m] = stats_of(tiny[m].dev).ring_full_waits;
  }
  for (int m = 0; m < TINY_MODES; m++) tiny_teardown(&tiny[m]);

  const char *tests[2] = {"chain", "independent"};
  const double n = (double)o->ops;
  double ratio[2], timing[2][2]; /* timing[test][enqueue, e2e] */
  for (int t = 0; t < 2; t++) {
    ratio[t] = sum[t][TINY_REF].total_s / sum[t][0].total_s;
    timing[t][0] = sum[t][0].enqueue_s / sum[t][1].enqueue_s;
    timing[t][1] = sum[t][0].total_s / sum[t][1].total_s;
  }
  /* The schema's figures: the default (batched) context, median e2e. */
  for (int t = 0; t < 2; t++)
    record(tests[t], "f32", "16", "us_per_op", sum[t][0].total_s / n * 1e6);
  if (o->csv) {
    for (int t = 0; t < 2; t++) {
      for (int m = 0; m < TINY_MODES; m++) {
        const summary *s = &sum[t][m];
        const char *mode = tiny[m].mode;
        csv_num(tests[t], mode, "enqueue_us_per_op", s->enqueue_s / n * 1e6,
                "us");
        csv_num(tests[t], mode, "e2e_us_per_op", s->total_s / n * 1e6, "us");
        csv_num(tests[t], mode, "e2e_us_per_op_best",
                s->best_total_s / n * 1e6, "us");
        csv_num(tests[t], mode, "ops_per_s", n / s->total_s, "1/s");
        csv_num(tests[t], mode, "submits", s->submits, "");
        csv_num(tests[t], mode, "barriers", s->barriers, "");
      }
      csv_num(tests[t], "ratio", "ref_over_batched_e2e", ratio[t], "x");
      csv_num(tests[t], "ratio", "timed_over_untimed_enqueue", timing[t][0], "x");
      csv_num(tests[t], "ratio", "timed_over_untimed_e2e", timing[t][1], "x");
    }
    for (int m = 0; m < TINY_MODES; m++)
      csv_num("stats", tiny[m].mode, "ring_full_waits", (double)ring_full[m],
              "");
    return sum[0][0].total_s / n;
  }
  printf("Tiny ops, %" PRIu64 " per run, median of %u runs "
         "(enqueue = producer side, e2e = to result on host; untimed = "
         "batched without the per-op clock read of the op_latency histogram)\n",
         o->ops, o->reps);
  printf("%-12s %-8s %14s %12s %12s %9s %9s\n", "test", "mode",
         "enqueue us/op", "e2e us/op", "ops/s", "submits", "barriers");
  for (int t = 0; t < 2; t++)
    for (int m = 0; m < TINY_MODES; m++) {
      const summary *s = &sum[t][m];
      printf("%-12s %-8s %14.3f %12.3f %12.0f %9.0f %9.0f\n", tests[t],
             tiny[m].mode, s->enqueue_s / n * 1e6, s->total_s / n * 1e6,
             n / s->total_s, s->submits, s->barriers);
    }
  printf("ratio 1/op / batched (e2e time): chain %.2fx, independent %.2fx\n",
         ratio[0], ratio[1]);
  printf("ratio batched / untimed (per-op timing cost): chain enqueue %.3fx e2e %.3fx, "
         "independent enqueue %.3fx e2e %.3fx\n",
         timing[0][0], timing[0][1], timing[1][0], timing[1][1]);
  printf("ring-full waits (producer outran the scheduler, all runs): "
         "batched %" PRIu64 ", untimed %" PRIu64 ", 1/op %" PRIu64 "\n\n",
         ring_full[0], ring_full[1], ring_full[TINY_REF]);
  fflush(stdout);
  return sum[0][0].total_s / n;
}

/* submit_wait: x = x + 1, n times, with a synchronize (one submission and
 * one host wait) after every op; returns the seconds from the first enqueue
 * to the last synchronize returning. The final x is checked. */
static double run_submit_wait(const tiny_ctx *t, uint64_t n) {
  const int64_t shape[1] = {TINY_ELEMS};
  nxv_tensor *x = t->x0;
  double t0 = now_s();
  for (uint64_t i = 0; i < n; i++) {
    nxv_view vx = {x, 0, NULL}, vone = {t->one, 0, NULL};
    nxv_tensor *y;
    NXV_CHECK(nxv_binary(t->dev, NXV_ADD, 1, shape, &vx, &vone, &y));
    if (x != t->x0) nxv_tensor_release(x);
    x = y;
    NXV_CHECK(nxv_device_synchronize(t->dev));
  }
  double t1 = now_s();
  tiny_verify(t, "submit_wait", x, n);
  if (x != t->x0) nxv_tensor_release(x);
  return t1 - t0;
}

/* The operands of a to_number round trip on dev: x = 41 and c1 = 1, one
 * f32 each, ready on the device. */
static void to_number_operands(nxv_device *dev, nxv_tensor **x, nxv_tensor **c1) {
  float x0 = 41.0f, one = 1.0f;
  NXV_CHECK(nxv_tensor_upload(dev, NXV_F32, 1, &x0, x));
  NXV_CHECK(nxv_fill(dev, NXV_F32, 1, &one, c1));
  NXV_CHECK(nxv_device_synchronize(dev));
}

/* to_number: y = x + 1 on one f32 element, then y read on the host; each
 * round trip timed alone. Fills secs[0..n). */
static void run_to_number(nxv_device *dev, uint32_t n, double *secs) {
  const int64_t shape[1] = {1};
  nxv_tensor *x, *c1;
  to_number_operands(dev, &x, &c1);
  nxv_view vx = {x, 0, NULL}, vone = {c1, 0, NULL};
  for (uint32_t i = 0; i < n; i++) {
    double t0 = now_s();
    nxv_tensor *y;
    float got;
    NXV_CHECK(nxv_binary(dev, NXV_ADD, 1, shape, &vx, &vone, &y));
    NXV_CHECK(nxv_tensor_download(y, 0, 1, &got));
    secs[i] = now_s() - t0;
    nxv_tensor_release(y);
    if (got != 42.0f)
      die("to_number: round %u read %.9g, expected 42", i, (double)got);
  }
  nxv_tensor_release(x);
  nxv_tensor_release(c1);
}

/* read_completed: the same one-element result read again once its write
 * has completed (after a synchronize), each read timed alone. Fills
 * secs[0..n). */
static void run_read_completed(nxv_device *dev, uint32_t n, double *secs) {
  const int64_t shape[1] = {1};
  nxv_tensor *x, *c1, *y;
  to_number_operands(dev, &x, &c1);
  nxv_view vx = {x, 0, NULL}, vone = {c1, 0, NULL};
  NXV_CHECK(nxv_binary(dev, NXV_ADD, 1, shape, &vx, &vone, &y));
  NXV_CHECK(nxv_device_synchronize(dev));
  for (uint32_t i = 0; i < n; i++) {
    float got = 0.0f;
    double t0 = now_s();
    NXV_CHECK(nxv_tensor_download(y, 0, 1, &got));
    secs[i] = now_s() - t0;
    if (got != 42.0f) die("read_completed: round %u read %.9g, expected 42", i, (double)got);
  }
  nxv_tensor_release(y);
  nxv_tensor_release(x);
  nxv_tensor_release(c1);
}

/* upload_round_trip: TINY_ELEMS f32 uploaded, added to a resident tensor
 * of ones, and the sum's first element read back; each round timed alone.
 * Fills secs[0..n). */
static void run_upload_round_trip(nxv_device *dev, uint32_t n, double *secs) {
  const int64_t shape[1] = {TINY_ELEMS};
  float v[TINY_ELEMS];
  for (int j = 0; j < TINY_ELEMS; j++) v[j] = 1.0f;
  nxv_tensor *ones;
  NXV_CHECK(nxv_tensor_upload(dev, NXV_F32, TINY_ELEMS, v, &ones));
  NXV_CHECK(nxv_device_synchronize(dev));
  nxv_view vo = {ones, 0, NULL};
  for (uint32_t i = 0; i < n; i++) {
    for (int j = 0; j < TINY_ELEMS; j++) v[j] = (float)((i + (uint32_t)j) % 1024u);
    double t0 = now_s();
    nxv_tensor *u, *y;
    float got;
    NXV_CHECK(nxv_tensor_upload(dev, NXV_F32, TINY_ELEMS, v, &u));
    nxv_view vu = {u, 0, NULL};
    NXV_CHECK(nxv_binary(dev, NXV_ADD, 1, shape, &vu, &vo, &y));
    NXV_CHECK(nxv_tensor_download(y, 0, 1, &got));
    secs[i] = now_s() - t0;
    nxv_tensor_release(u);
    nxv_tensor_release(y);
    if (got != v[0] + 1.0f)
      die("upload_round_trip: round %u read %.9g, expected %.9g", i, (double)got,
          (double)(v[0] + 1.0f));
  }
  nxv_tensor_release(ones);
}

/* Where a to_number round trip spends its time: n more rounds of
 * run_to_number's y = x + 1 and download on dev (the download through
 * nxv_download_start, _wait and _read, which nxv_tensor_download calls)
 * with batch records on, each matched with the batch submitted between
 * its start and its end. Fills ph[0..7] with the medians, in seconds, of:
 * start -> the batch's first op taken off the queue by the scheduler,
 * -> the batch's vkQueueSubmit call, that call -> the batch's first
 * timestamp on the GPU, the GPU's start -> end timestamps, the end
 * timestamp -> the value read on the host (the last three through
 * VK_EXT_calibrated_timestamps); then on the host's side: the nxv_binary
 * call, the nxv_download_start call, and its return -> the vkQueueSubmit
 * call (the download's flush reaching the queue). Returns the rounds
 * matched, 0 where the device cannot place its timestamps on the host's
 * clock. */
enum { PHASES = 8 };
static uint32_t run_to_number_phases(nxv_device *dev, uint32_t n, double ph[PHASES]) {
  const int64_t shape[1] = {1};
  nxv_tensor *x, *c1;
  to_number_operands(dev, &x, &c1);
  NXV_CHECK(nxv_device_record_batches(dev, true));
  uint64_t *t0 = xcalloc(n, sizeof *t0), *t1 = xcalloc(n, sizeof *t1);
  uint64_t *top = xcalloc(n, sizeof *top), *tdl = xcalloc(n, sizeof *tdl);
  nxv_view vx = {x, 0, NULL}, vone = {c1, 0, NULL};
  for (uint32_t i = 0; i < n; i++) {
    nxv_tensor *y;
    nxv_download *dl;
    float got;
    t0[i] = nxv_clock_ns();
    NXV_CHECK(nxv_binary(dev, NXV_ADD, 1, shape, &vx, &vone, &y));
    top[i] = nxv_clock_ns();
    NXV_CHECK(nxv_download_start(y, 0, 1, &dl));
    tdl[i] = nxv_clock_ns();
    NXV_CHECK(nxv_download_wait(dl));
    NXV_CHECK(nxv_download_read(dl, &got));
    t1[i] = nxv_clock_ns();
    nxv_download_release(dl);
    nxv_tensor_release(y);
    if (got != 42.0f) die("to_number phases: round %u read %.9g, expected 42", i, (double)got);
  }
  NXV_CHECK(nxv_device_synchronize(dev));
  nxv_batch_record *rec = xcalloc(NXV_BATCH_RECORDS, sizeof *rec);
  uint32_t nrec = 0;
  uint64_t dropped = 0;
  NXV_CHECK(nxv_device_take_batches(dev, rec, NXV_BATCH_RECORDS, &nrec, &dropped));
  NXV_CHECK(nxv_device_record_batches(dev, false));
  double *v[PHASES];
  for (int k = 0; k < PHASES; k++) v[k] = xcalloc(n, sizeof *v[k]);
  uint32_t m = 0, j = 0;
  for (uint32_t i = 0; i < n; i++) {
    while (j < nrec && rec[j].submit_time_ns < t0[i]) j++;
    if (j == nrec) break;
    const nxv_batch_record *b = &rec[j];
    if (b->submit_time_ns > t1[i] || !b->gpu_start_time_ns || !b->gpu_end_time_ns) continue;
    v[0][m] = ((double)b->record_time_ns - (double)t0[i]) * 1e-9;
    v[1][m] = (double)(b->submit_time_ns - b->record_time_ns) * 1e-9;
    v[2][m] = ((double)b->gpu_start_time_ns - (double)b->submit_time_ns) * 1e-9;
    v[3][m] = ((double)b->gpu_end_time_ns - (double)b->gpu_start_time_ns) * 1e-9;
    v[4][m] = ((double)t1[i] - (double)b->gpu_end_time_ns) * 1e-9;
    v[5][m] = (double)(top[i] - t0[i]) * 1e-9;
    v[6][m] = (double)(tdl[i] - top[i]) * 1e-9;
    v[7][m] = ((double)b->submit_time_ns - (double)tdl[i]) * 1e-9;
    m++;
  }
  for (int k = 0; k < PHASES; k++) {
    ph[k] = m ? median_of(v[k], m) : 0;
    free(v[k]);
  }
  free(rec);
  free(t0);
  free(t1);
  free(top);
  free(tdl);
  nxv_tensor_release(x);
  nxv_tensor_release(c1);
  return m;
}

/* Benchmarks 3 and 4 on dev (default config). chain_s: the batched chain's
 * median e2e time per op, for the ratio (0 when not measured). to_number
 * runs in blocks alternating between dev and a second context on the same
 * device with unmapped_small (every download staged through a copy), so
 * both see the same machine state. */
/* burst: BURST_OPS independent adds enqueued at once after the scheduler
 * thread has gone to sleep (an idle pause past idle_spin_us), as the first
 * ops of a step or of an interactive call find it. Fills out[i] with each
 * burst's enqueue time per op (s); *wakeups gets the scheduler wake-ups
 * the bursts cost in all (one per burst at best). */
enum { BURST_OPS = 64 };
static void run_bursts(const tiny_ctx *t, uint32_t n, double *out, uint64_t *wakeups) {
  const int64_t shape[1] = {TINY_ELEMS};
  nxv_view vx = {t->x0, 0, NULL}, vone = {t->one, 0, NULL};
  nxv_tensor *ys[BURST_OPS];
  nxv_stats st0, st1;
  NXV_CHECK(nxv_device_stats(t->dev, &st0));
  for (uint32_t r = 0; r < n; r++) {
    NXV_CHECK(nxv_device_synchronize(t->dev));
    usleep(1000); /* past the default idle_spin_us (200): asleep */
    double t0 = now_s();
    for (int i = 0; i < BURST_OPS; i++)
      NXV_CHECK(nxv_binary(t->dev, NXV_ADD, 1, shape, &vx, &vone, &ys[i]));
    out[r] = (now_s() - t0) / BURST_OPS;
    NXV_CHECK(nxv_device_synchronize(t->dev));
    if (r + 1 == n) tiny_verify(t, "burst", ys[BURST_OPS - 1], 1);
    for (int i = 0; i < BURST_OPS; i++) nxv_tensor_release(ys[i]);
  }
  NXV_CHECK(nxv_device_stats(t->dev, &st1));
  *wakeups = st1.scheduler_wakeups - st0.scheduler_wakeups;
}

static void bench_roundtrip(const options *o, nxv_device *dev, double chain_s) {
  tiny_ctx t;
  tiny_setup(&t, "batched", dev);
  nxv_device_info info;
  NXV_CHECK(nxv_device_info_get(dev, &info));
  nxv_device_config sc = {.disable_disk_cache = true, .unmapped_small = true,
                          .defer_elementwise = g_defer_elementwise};
  nxv_device *staged;
  NXV_CHECK(nxv_device_open((int32_t)info.index, &sc, &staged));
  const uint32_t blocks = 10, per = o->quick ? 10 : 100;
  const uint32_t tn_count = blocks * per;
  double *sw = xcalloc(o->reps, sizeof *sw);
  double *tn = xcalloc(tn_count, sizeof *tn);
  double *ts = xcalloc(tn_count, sizeof *ts);
  (void)run_submit_wait(&t, o->ops < 100 ? o->ops : 100); /* warm-up */
  run_to_number(dev, per, tn);                            /* warm-up */
  run_to_number(staged, per, ts);
  const uint32_t nbursts = o->quick ? 20 : 200;
  double *bu = xcalloc(nbursts, sizeof *bu);
  uint64_t bwake = 0;
  run_bursts(&t, nbursts, bu, &bwake);
  for (uint32_t r = 0; r < o->reps; r++) sw[r] = run_submit_wait(&t, o->ops);
  nxv_stats st0, st1;
  NXV_CHECK(nxv_device_stats(dev, &st0));
  for (uint32_t b = 0; b < blocks; b++) {
    run_to_number(dev, per, tn + b * per);
    run_to_number(staged, per, ts + b * per);
  }
  NXV_CHECK(nxv_device_stats(dev, &st1));
  double *rc = xcalloc(tn_count, sizeof *rc);
  run_read_completed(dev, tn_count, rc);
  double rc_med = median_of(rc, tn_count), rc_best = min_of(rc, tn_count);
  run_upload_round_trip(dev, tn_count, rc);
  double up_med = median_of(rc, tn_count), up_best = min_of(rc, tn_count);
  free(rc);
  double ph[PHASES];
  uint32_t nph = o->quick ? 20 : 300;
  uint32_t ph_matched = run_to_number_phases(dev, nph, ph);
  nxv_device_release(staged);
  tiny_teardown(&t);
  const double n = (double)o->ops;
  double sw_med = median_of(sw, o->reps) / n, sw_best = min_of(sw, o->reps) / n;
  double tn_med = median_of(tn, tn_count), tn_best = min_of(tn, tn_count);
  double ts_med = median_of(ts, tn_count), ts_best = min_of(ts, tn_count);
  double bu_med = median_of(bu, nbursts), bu_best = min_of(bu, nbursts);
  free(sw);
  free(tn);
  free(ts);
  free(bu);
  emit("submit_wait", "f32", "16", "us_per_op", sw_med * 1e6);
  emit("burst_after_idle", "f32", "16", "us_per_op", bu_med * 1e6);
  if (o->csv)
    csv_num("burst_after_idle", "batched", "wakeups_per_burst", (double)bwake / nbursts, "");
  emit("to_number", "f32", "1", "us", tn_med * 1e6);
  emit("to_number_staged", "f32", "1", "us", ts_med * 1e6);
  emit("read_completed", "f32", "1", "us", rc_med * 1e6);
  emit("upload_round_trip", "f32", "16", "us", up_med * 1e6);
  static const char *const ph_names[PHASES] = {
      "to_number_to_record",  "to_number_record",  "to_number_submit_to_gpu",
      "to_number_gpu",        "to_number_gpu_to_host", "to_number_op_call",
      "to_number_download_call", "to_number_download_to_submit"};
  if (ph_matched)
    for (int k = 0; k < PHASES; k++) emit(ph_names[k], "f32", "1", "us", ph[k] * 1e6);
  if (o->csv) return;
  printf("Round trips (batched context): submit_wait = x = x + 1 then "
         "nxv_device_synchronize, %" PRIu64 " per run, median of %u runs; "
         "to_number = y = x + 1 on 1 f32 then download, each timed, median "
         "of %u in %u blocks alternating with to_number_staged (a context "
         "with unmapped_small: the download copies)\n",
         o->ops, o->reps, tn_count, blocks);
  printf("%-16s %12s %12s\n", "test", "median us", "best us");
  printf("%-16s %12.3f %12.3f\n", "submit_wait", sw_med * 1e6, sw_best * 1e6);
  printf("%-16s %12.3f %12.3f\n", "to_number", tn_med * 1e6, tn_best * 1e6);
  printf("%-16s %12.3f %12.3f\n", "to_number_staged", ts_med * 1e6,
         ts_best * 1e6);
  printf("%-16s %12.3f %12.3f   (the result read again after a synchronize)\n",
         "read_completed", rc_med * 1e6, rc_best * 1e6);
  printf("%-16s %12.3f %12.3f   (16 f32 uploaded, added to a resident tensor, one "
         "element read)\n",
         "upload_round_trip", up_med * 1e6, up_best * 1e6);
  printf("%-16s %12.3f %12.3f   (enqueue us/op of %d independent adds after "
         "a 1 ms pause, %u bursts; %.2f scheduler wake-ups per burst)\n",
         "burst_after_idle", bu_med * 1e6, bu_best * 1e6, BURST_OPS, nbursts,
         (double)bwake / nbursts);
  printf("to_number reads in place (mapped memory, no copy): %" PRIu64
         " of %u; %" PRIu64 " submits\n",
         st1.reads_in_place - st0.reads_in_place, tn_count,
         st1.submits - st0.submits);
  if (ph_matched)
    printf("to_number phases, median of %u rounds (us): start -> first op off the queue "
           "%.2f, -> vkQueueSubmit %.2f, -> GPU start %.2f, GPU start -> end %.2f, GPU end "
           "-> value on the host %.2f; on the host: nxv_binary %.2f, nxv_download_start "
           "%.2f, its return -> vkQueueSubmit %.2f\n",
           ph_matched, ph[0] * 1e6, ph[1] * 1e6, ph[2] * 1e6, ph[3] * 1e6, ph[4] * 1e6,
           ph[5] * 1e6, ph[6] * 1e6, ph[7] * 1e6);
  else
    printf("to_number phases: not measured (no calibrated GPU timestamps)\n");
  if (chain_s > 0)
    printf("ratio submit_wait / batched chain (per op): %.2fx\n",
           sw_med / chain_s);
  printf("\n");
  fflush(stdout);
}

/* Benchmark 3 on dev. */
static void bench_large(const options *o, nxv_device *dev,
                        const nxv_device_info *info, const large_plan *lp) {
  big_ctx big = {.dev = dev, .count = lp->bytes / 4, .inner = lp->inner};
  const int64_t shape[1] = {(int64_t)big.count};
  float half = 0.5f;
  NXV_CHECK(nxv_iota(dev, NXV_F32, 1, shape, 0, &big.a));
  NXV_CHECK(nxv_fill(dev, NXV_F32, big.count, &half, &big.b));
  NXV_CHECK(nxv_device_synchronize(dev));
  gpu_warm(o, dev, info);
  nxv_tensor *res;
  for (int k = 0; k < 3; k++) { /* warm-up, checked */
    (void)run_big(&big, (big_mode)k, &res);
    big_verify(&big, k == BIG_ADD, res);
    nxv_tensor_release(res);
  }
  static const char *const names[3] = {"add (a+b)", "copy", "copy kernel"};
  static const char *const keys[3] = {"add", "copy", "copy_kernel"};
  const double moved[3] = {3.0, 2.0, 2.0}; /* tensor sizes read + written */
  double *t[3];
  nxv_tensor *last[3] = {NULL, NULL, NULL};
  for (int k = 0; k < 3; k++) t[k] = xcalloc(o->reps, sizeof(double));
  for (uint32_t r = 0; r < o->reps; r++) /* interleaved against drift */
    for (int k = 0; k < 3; k++) {
      if (last[k]) nxv_tensor_release(last[k]);
      t[k][r] = run_big(&big, (big_mode)k, &last[k]);
    }
  for (int k = 0; k < 3; k++) {
    big_verify(&big, k == BIG_ADD, last[k]);
    nxv_tensor_release(last[k]);
  }
  nxv_tensor_release(big.a);
  nxv_tensor_release(big.b);

  const double size = (double)lp->bytes;
  double best[3], med[3], ms[3];
  for (int k = 0; k < 3; k++) {
    double bytes = moved[k] * size * lp->inner;
    best[k] = bytes / min_of(t[k], o->reps) / 1e9;
    med[k] = bytes / median_of(t[k], o->reps) / 1e9;
    ms[k] = moved[k] * size / (best[k] * 1e9) * 1e3;
    free(t[k]);
  }
  /* The device copy reference is the faster of the driver's copy and a
   * plain copy kernel. */
  int ref = best[BIG_COPY_KERNEL] > best[BIG_COPY] ? BIG_COPY_KERNEL : BIG_COPY;
  if (o->csv) {
    for (int k = 0; k < 3; k++) {
      csv_num(keys[k], "batched", "gbps_best", best[k], "GB/s");
      csv_num(keys[k], "batched", "gbps_median", med[k], "GB/s");
      csv_num(keys[k], "batched", "ms_per_op_best", ms[k], "ms");
    }
    csv_num("add_vs_copy", "ratio", "percent_best",
            100.0 * best[BIG_ADD] / best[ref], "%");
    csv_num("add_vs_copy", "ratio", "percent_median",
            100.0 * med[BIG_ADD] / med[ref], "%");
    return;
  }
  printf("Large ops, %.2f MiB f32 tensors, %u ops per timed run (enqueue "
         "all, then synchronize), %u runs; GB/s = 1e9 bytes read + written "
         "per second\n", size / MIB, lp->inner, o->reps);
  printf("%-12s %12s %12s %12s %12s\n", "test", "MiB moved/op", "best GB/s",
         "median GB/s", "best ms/op");
  for (int k = 0; k < 3; k++)
    printf("%-12s %12.2f %12.3f %12.3f %12.3f\n", names[k],
           moved[k] * size / MIB, best[k], med[k], ms[k]);
  printf("ratio add / device copy (%s) bandwidth: %.1f%% (best), %.1f%% "
         "(median)\n\n", names[ref], 100.0 * best[BIG_ADD] / best[ref],
         100.0 * med[BIG_ADD] / med[ref]);
  fflush(stdout);
}

int main(int argc, char **argv) {
  options o = parse_options(argc, argv);
  if (o.child_dir) return pipeline_child_main(&o);
  set_legacy_csv(o.csv);
  nxv_device *dev = open_device(o.device, 0);
  nxv_device_info info;
  NXV_CHECK(nxv_device_info_get(dev, &info));
  large_plan lp = plan_large(&o, &info);
  print_header(&o, &info, &lp);
  if (o.suites & SUITE_LATENCY) {
    /* The reference context runs on the very device the first one got. */
    nxv_device *ref = open_device((int32_t)info.index, 1);
    nxv_device *untimed = open_device_timing((int32_t)info.index, 0, true);
    double chain_s = bench_tiny(&o, dev, untimed, ref);
    nxv_device_release(untimed);
    nxv_device_release(ref);
    bench_roundtrip(&o, dev, chain_s);
  }
  if (o.suites & SUITE_BANDWIDTH) {
    bench_large(&o, dev, &info, &lp);
    NXV_CHECK(nxv_device_trim(dev));
    suite_bandwidth(&o, dev, &info);
    NXV_CHECK(nxv_device_trim(dev));
  }
  if (o.suites & SUITE_MATMUL) {
    suite_matmul(&o, dev, &info);
    NXV_CHECK(nxv_device_trim(dev));
  }
  if (o.suites & SUITE_POOL) suite_pool(&o, dev);
  nxv_device_release(dev);
  /* Last, with no device of this process open: fresh child processes. */
  if (o.suites & SUITE_PIPELINE) suite_pipeline(&o, &info);
  if (o.csv_out) {
    results_write(o.csv_out, info.name);
    if (!o.csv) printf("wrote %s\n", o.csv_out);
  }
  results_free();
  return EXIT_SUCCESS;
}
