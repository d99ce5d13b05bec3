/*
 * bench_matmul.c - the matmul suite of the shared benchmark schema, through
 * nxv_matmul alone (transposed operands are strides, never copies):
 *
 * - matmul: C[M,N] = A[M,K] B[K,N], both row-major; squares 256 .. 8192 and
 *   the MLP and CNN shapes 128x784x512, 128x512x512, 128x512x10, 128x2704x10
 *   (shape MxKxN).
 * - matmul_tn: C = A^T B with A stored [K,M] row-major: 2704x128x10,
 *   784x128x512, the training steps' weight gradients 512x128x784,
 *   10x128x512 and 10x128x2704, and 4096x4096x4096 (MxKxN).
 * - matmul_nt: C = A B^T with B stored [N,K]: 128x512x784, 4096^3.
 * - matmul_tt: C = A^T B^T, A stored [K,M] and B [N,K]: 4096^3.
 * - matmul_batched: BxMxKxN = 32x256x256x256 and 8x1024x1024x1024.
 *
 * dtypes f32, f16 and bf16 (results in the input type), and f64 for the
 * 1024 and 4096 squares, 128x784x512 and the transposed 784x128x512.
 * TFLOP/s = 2*M*N*K*batch / time per product, best (and median) of --reps
 * timed runs after one checked warm-up product; one
 * timed run enqueues the product R times, then synchronizes, with R derived
 * from the FLOP count so that a run is about 20 ms of work at 100 TFLOP/s
 * on a GPU, between 1 and 1024 (1 on CPU devices, where one product takes
 * milliseconds). CPU devices (lavapipe) run dimensions up to 1024 and at
 * most 2^28 FLOPs per product unless --mm-max is given.
 *
 * Operand values are multiples of 1/64 in [-0.25, 0.75) (exact in every
 * dtype, products exact in f32); 8 output elements of the last product of
 * each measurement (corners and random ones) are compared with a CPU dot
 * product in double, within a tolerance relative to sum |a||b| of the dtype.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

/* A timed run on a GPU: about 20 ms of work at 100 TFLOP/s, as R products
 * (1 <= R <= MM_R_MAX). CPU devices take milliseconds per product: R = 1. */
#define MM_GPU_RUN_FLOPS 2e12
#define MM_R_MAX 1024
/* Default size limits besides --mm-max: FLOPs per product on CPU devices
 * and in --quick runs. */
#define MM_CPU_FLOPS 0x1p28
#define MM_QUICK_FLOPS 0x1p25
#define MM_CHECKS 8
/* Products of at most this many FLOPs also run alone (one per
 * submission), MM_ALONE_RUNS times, for their GPU time. */
#define MM_ALONE_FLOPS 0x1p34
#define MM_ALONE_RUNS 9
/* Products of at least this many FLOPs keep the GPU busy for --warm-ms
 * again just before their timed runs: the smaller products before them,
 * and the download and checks of their own warm-up product, leave the GPU
 * idle or lightly loaded long enough to lower its clock (on an H200 an
 * f16 4096^3 product with B transposed ran at 175 TFLOP/s at 1140-1440
 * MHz right after the MLP shapes, 295 at 1980 MHz in the next process). */
#define MM_WARM_FLOPS 0x1p34
#define MM_SEED_A 1
#define MM_SEED_B 2

typedef enum mm_layout { MM_NN, MM_TN, MM_NT, MM_TT } mm_layout;

typedef struct mm_case {
  const char *test;
  uint64_t batch, m, k, n;
  mm_layout layout;
  bool f64;          /* also run in f64 */
  bool quick_only;   /* a small smoke case of --quick, not in the schema */
} mm_case;

static const mm_case kCases[] = {
    {"matmul", 1, 256, 256, 256, MM_NN, false, false},
    {"matmul", 1, 512, 512, 512, MM_NN, false, false},
    {"matmul", 1, 1024, 1024, 1024, MM_NN, true, false},
    {"matmul", 1, 2048, 2048, 2048, MM_NN, false, false},
    {"matmul", 1, 4096, 4096, 4096, MM_NN, true, false},
    {"matmul", 1, 8192, 8192, 8192, MM_NN, false, false},
    {"matmul", 1, 128, 784, 512, MM_NN, true, false},
    {"matmul", 1, 128, 512, 512, MM_NN, false, false},
    {"matmul", 1, 128, 512, 10, MM_NN, false, false},
    {"matmul", 1, 128, 2704, 10, MM_NN, false, false},
    {"matmul_tn", 1, 2704, 128, 10, MM_TN, false, false},
    {"matmul_tn", 1, 784, 128, 512, MM_TN, true, false},
    /* The training steps' weight gradients, as Nx's gradient of a dot
     * issues them (g^T x: few output rows, k = the batch). */
    {"matmul_tn", 1, 512, 128, 784, MM_TN, false, false},
    {"matmul_tn", 1, 10, 128, 512, MM_TN, false, false},
    {"matmul_tn", 1, 10, 128, 2704, MM_TN, false, false},
    {"matmul_tn", 1, 4096, 4096, 4096, MM_TN, false, false},
    {"matmul_nt", 1, 128, 512, 784, MM_NT, false, false},
    {"matmul_nt", 1, 4096, 4096, 4096, MM_NT, false, false},
    {"matmul_tt", 1, 4096, 4096, 4096, MM_TT, false, false},
    {"matmul_batched", 32, 256, 256, 256, MM_NN, false, false},
    {"matmul_batched", 8, 1024, 1024, 1024, MM_NN, false, false},
    /* --quick runs the canonical cases of at most 2^25 FLOPs and these,
     * so that every layout is exercised (edges not multiples of 64). */
    {"matmul_tn", 1, 96, 64, 80, MM_TN, false, true},
    {"matmul_nt", 1, 80, 64, 96, MM_NT, false, true},
    {"matmul_tt", 1, 72, 64, 88, MM_TT, false, true},
    {"matmul_batched", 4, 64, 48, 80, MM_NN, false, true},
};
#define MM_CASES (sizeof kCases / sizeof kCases[0])

static const nxv_dtype kTypes[4] = {NXV_F32, NXV_F16, NXV_BF16, NXV_F64};
/* Each of kTypes' bit in options.dtypes (f32, f16, f64, bf16). */
static const uint32_t kTypeBits[4] = {1u << 0, 1u << 1, 1u << 3, 1u << 2};
#define MM_TYPES 4

static double flops_of(const mm_case *c) {
  return 2.0 * (double)c->batch * (double)c->m * (double)c->n * (double)c->k;
}

static void shape_of(const mm_case *c, char *buf, size_t cap) {
  if (!strcmp(c->test, "matmul_batched"))
    snprintf(buf, cap, "%" PRIu64 "x%" PRIu64 "x%" PRIu64 "x%" PRIu64,
             c->batch, c->m, c->k, c->n);
  else
    snprintf(buf, cap, "%" PRIu64 "x%" PRIu64 "x%" PRIu64, c->m, c->k, c->n);
}

/* Operand values: multiples of 1/64 in [-0.25, 0.75). */
static double mm_value(uint64_t seed, uint64_t index) {
  return ((double)(hash64(seed, index) % 64) - 16.0) / 64.0;
}

/* Position in the A tensor of operand element A[b][i][p] (and likewise
 * for B[b][p][j]), per layout; the strides passed to nxv_matmul say the
 * same. */
static void a_strides(const mm_case *c, int64_t s[3]) {
  s[0] = (int64_t)(c->m * c->k);
  if (c->layout == MM_TN || c->layout == MM_TT) { /* stored [K, M] */
    s[1] = 1;
    s[2] = (int64_t)c->m;
  } else { /* stored [M, K] */
    s[1] = (int64_t)c->k;
    s[2] = 1;
  }
}

static void b_strides(const mm_case *c, int64_t s[3]) {
  s[0] = (int64_t)(c->k * c->n);
  if (c->layout == MM_NT || c->layout == MM_TT) { /* stored [N, K] */
    s[1] = 1;
    s[2] = (int64_t)c->k;
  } else { /* stored [K, N] */
    s[1] = (int64_t)c->n;
    s[2] = 1;
  }
}

typedef struct mm_ctx {
  nxv_device *dev;
  nxv_dtype t;
  nxv_tensor *a, *b;   /* large enough for every case */
} mm_ctx;

static nxv_tensor *mm_enqueue(const mm_ctx *x, const mm_case *c) {
  nxv_matmul_desc d = {.batch = c->batch, .m = c->m, .n = c->n, .k = c->k,
                       .a = x->a, .a_offset = 0, .b = x->b, .b_offset = 0};
  a_strides(c, d.a_strides);
  b_strides(c, d.b_strides);
  nxv_tensor *y;
  NXV_CHECK(nxv_matmul(x->dev, &d, &y));
  return y;
}

/* Enqueues the product r times, then synchronizes; returns the seconds
 * from the first enqueue to the synchronize returning, the last result in
 * *out_last and the GPU time of the batches that ran them in *out_gpu_s
 * (nxv_stats' gpu_busy_ns; 0 where the queue has no timestamps). Batch
 * records are kept meanwhile, so that every batch is timed from its start,
 * a small product alone in one included. */
static double mm_run(const mm_ctx *x, const mm_case *c, uint32_t r,
                     nxv_tensor **out_last, double *out_gpu_s) {
  nxv_tensor *last = NULL;
  nxv_stats st0, st1;
  NXV_CHECK(nxv_device_record_batches(x->dev, true));
  NXV_CHECK(nxv_device_synchronize(x->dev));
  NXV_CHECK(nxv_device_stats(x->dev, &st0));
  double t0 = now_s();
  for (uint32_t i = 0; i < r; i++) {
    nxv_tensor *y = mm_enqueue(x, c);
    if (last) nxv_tensor_release(last);
    last = y;
  }
  NXV_CHECK(nxv_device_synchronize(x->dev));
  double t1 = now_s();
  NXV_CHECK(nxv_device_stats(x->dev, &st1));
  NXV_CHECK(nxv_device_record_batches(x->dev, false));
  *out_last = last;
  *out_gpu_s = (double)(st1.gpu_busy_ns - st0.gpu_busy_ns) * 1e-9;
  return t1 - t0;
}

/* Tolerance on |got - ref| relative to sum |a||b|: accumulation in the
 * compute type plus the rounding of the result to the dtype. */
static double mm_tol(nxv_dtype t) {
  switch (t) {
    case NXV_F64: return 1e-12;
    case NXV_F32: return 1e-4;
    case NXV_F16: return 4e-3;
    case NXV_BF16: return 1.6e-2;
    default: return 0;
  }
}

static void mm_verify(const mm_ctx *x, const mm_case *c, nxv_tensor *y) {
  char shape[64];
  shape_of(c, shape, sizeof shape);
  const char *dt = nxv_dtype_name(x->t);
  if (nxv_tensor_dtype(y) != x->t ||
      nxv_tensor_count(y) != c->batch * c->m * c->n)
    die("%s %s %s: result is %" PRIu64 " x %s, expected %" PRIu64 " x %s",
        c->test, dt, shape, nxv_tensor_count(y),
        nxv_dtype_name(nxv_tensor_dtype(y)), c->batch * c->m * c->n, dt);
  int64_t as[3], bs[3];
  a_strides(c, as);
  b_strides(c, bs);
  uint64_t seed = 4242;
  for (int q = 0; q < MM_CHECKS; q++) {
    uint64_t b, i, j;
    switch (q) {
      case 0: b = 0, i = 0, j = 0; break;
      case 1: b = c->batch - 1, i = c->m - 1, j = c->n - 1; break;
      case 2: b = 0, i = 0, j = c->n - 1; break;
      case 3: b = c->batch - 1, i = c->m - 1, j = 0; break;
      default:
        b = splitmix64(&seed) % c->batch;
        i = splitmix64(&seed) % c->m;
        j = splitmix64(&seed) % c->n;
    }
    double ref = 0, sabs = 0;
    for (uint64_t p = 0; p < c->k; p++) {
      uint64_t ai = b * (uint64_t)as[0] + i * (uint64_t)as[1] + p * (uint64_t)as[2];
      uint64_t bi = b * (uint64_t)bs[0] + p * (uint64_t)bs[1] + j * (uint64_t)bs[2];
      double prod = mm_value(MM_SEED_A, ai) * mm_value(MM_SEED_B, bi);
      ref += prod;
      sabs += fabs(prod);
    }
    double got = download_elem(y, (b * c->m + i) * c->n + j);
    double tol = mm_tol(x->t) * sabs + 1e-300;
    if (!(fabs(got - ref) <= tol))
      die("%s %s %s: C[%" PRIu64 "][%" PRIu64 "][%" PRIu64 "] is %.9g, "
          "CPU reference %.9g (|diff| %.3g > tolerance %.3g = %.1e * sum "
          "|a||b|)", c->test, dt, shape, b, i, j, got, ref, fabs(got - ref),
          tol, mm_tol(x->t));
  }
}

static nxv_tensor *upload_values(nxv_device *dev, nxv_dtype t, uint64_t seed,
                                 uint64_t n) {
  void *h = xmalloc_bytes(n * nxv_dtype_size(t));
  for (uint64_t i = 0; i < n; i++) store_elem(t, h, i, mm_value(seed, i));
  nxv_tensor *x;
  NXV_CHECK(nxv_tensor_upload(dev, t, n, h, &x));
  free(h);
  return x;
}

/* ------------------------------------------------------------------ */
/* The suite                                                           */
/* ------------------------------------------------------------------ */

typedef struct mm_result {
  bool ran;
  uint32_t r;
  double best, med;  /* TFLOP/s */
  double ms;         /* best ms per product */
  double gpu_us;     /* GPU time per product in the best run of R, µs */
  double alone_us;   /* GPU time of one product alone, median, µs; 0: not run */
} mm_result;

/* The rate of the same M, K, N as a plain row-major matmul, if measured. */
static const mm_result *nn_of(const mm_result res[][MM_TYPES], size_t ci,
                              int ti) {
  const mm_case *c = &kCases[ci];
  for (size_t i = 0; i < MM_CASES; i++) {
    const mm_case *d = &kCases[i];
    if (!strcmp(d->test, "matmul") && d->m == c->m && d->k == c->k &&
        d->n == c->n && res[i][ti].ran)
      return &res[i][ti];
  }
  return NULL;
}

void suite_matmul(const options *o, nxv_device *dev,
                  const nxv_device_info *info) {
  const bool cpu = info->type == NXV_DEVICE_CPU;
  const uint64_t mm_max = o->mm_max_set ? o->mm_max
                          : o->quick || cpu ? 1024 : 8192;
  const double flop_max = o->mm_max_set ? INFINITY
                          : o->quick ? MM_QUICK_FLOPS
                          : cpu ? MM_CPU_FLOPS : INFINITY;
  const uint64_t lim = buffer_limit(info);
  const uint64_t budget = info->device_local_heap_size / 2;
  mm_result res[MM_CASES][MM_TYPES];
  memset(res, 0, sizeof res);
  bool printed_header = false;

  for (int ti = 0; ti < MM_TYPES; ti++) {
    nxv_dtype t = kTypes[ti];
    if (o->dtypes && !(o->dtypes & kTypeBits[ti])) continue;
    const size_t es = nxv_dtype_size(t);
    /* The cases of this dtype, and operand tensors large enough for all. */
    bool run[MM_CASES];
    uint64_t a_n = 0, b_n = 0;
    for (size_t ci = 0; ci < MM_CASES; ci++) {
      const mm_case *c = &kCases[ci];
      uint64_t an = c->batch * c->m * c->k, bn = c->batch * c->k * c->n,
               cn = c->batch * c->m * c->n;
      run[ci] = (t != NXV_F64 || c->f64) && (!c->quick_only || o->quick) &&
                c->m <= mm_max &&
                c->k <= mm_max && c->n <= mm_max && flops_of(c) <= flop_max &&
                an * es <= lim && bn * es <= lim && cn * es <= lim &&
                (!budget || (an + bn + cn) * es <= budget);
      if (!run[ci]) continue;
      if (an > a_n) a_n = an;
      if (bn > b_n) b_n = bn;
    }
    if (!a_n) continue;
    if (!nxv_convert_supported(dev, t)) {
      if (!o->csv)
        printf("matmul %s: skipped (the device lacks %s)\n",
               nxv_dtype_name(t),
               t == NXV_F64 ? "shaderFloat64" : "16-bit storage");
      continue;
    }
    mm_ctx x = {.dev = dev, .t = t};
    x.a = upload_values(dev, t, MM_SEED_A, a_n);
    x.b = upload_values(dev, t, MM_SEED_B, b_n);
    NXV_CHECK(nxv_device_synchronize(dev));
    gpu_warm(o, dev, info);
    for (size_t ci = 0; ci < MM_CASES; ci++) {
      if (!run[ci]) continue;
      const mm_case *c = &kCases[ci];
      const double fl = flops_of(c);
      uint64_t out_bytes = c->batch * c->m * c->n * es;
      uint64_t r = o->quick || cpu ? 1 : (uint64_t)ceil(MM_GPU_RUN_FLOPS / fl);
      if (r < 1) r = 1;
      if (r > MM_R_MAX) r = MM_R_MAX;
      if (budget) {
        uint64_t used = (a_n + b_n) * es;
        uint64_t room = budget > used ? (budget - used) / out_bytes : 1;
        if (room < 1) room = 1;
        if (r > room) r = room;
      }
      nxv_tensor *y;
      double gpu_s;
      (void)mm_run(&x, c, 1, &y, &gpu_s); /* warm-up, checked */
      mm_verify(&x, c, y);
      nxv_tensor_release(y);
      if (fl >= MM_WARM_FLOPS) gpu_warm(o, dev, info);
      double *secs = xcalloc(o->reps, sizeof *secs);
      double *gpus = xcalloc(o->reps, sizeof *gpus);
      for (uint32_t k = 0; k < o->reps; k++) {
        secs[k] = mm_run(&x, c, (uint32_t)r, &y, &gpus[k]);
        if (k + 1 == o->reps) mm_verify(&x, c, y);
        nxv_tensor_release(y);
      }
      mm_result *m = &res[ci][ti];
      m->ran = true;
      m->r = (uint32_t)r;
      m->best = fl * (double)r / min_of(secs, o->reps) / 1e12;
      m->med = fl * (double)r / median_of(secs, o->reps) / 1e12;
      m->ms = min_of(secs, o->reps) / (double)r * 1e3;
      m->gpu_us = min_of(gpus, o->reps) / (double)r * 1e6;
      /* One product per submission (what a chain of dependent ops sees:
       * nothing to overlap with), GPU time, median of MM_ALONE_RUNS. */
      m->alone_us = 0;
      if (!cpu && fl <= MM_ALONE_FLOPS) {
        double alone[MM_ALONE_RUNS];
        for (int k = 0; k < MM_ALONE_RUNS; k++) {
          (void)mm_run(&x, c, 1, &y, &alone[k]);
          nxv_tensor_release(y);
        }
        m->alone_us = median_of(alone, MM_ALONE_RUNS) * 1e6;
      }
      free(secs);
      free(gpus);
      char shape[64];
      shape_of(c, shape, sizeof shape);
      emit(c->test, nxv_dtype_name(t), shape, "TFLOP_s", m->best);
      if (o->csv) continue;
      if (!printed_header) {
        printf("Matmul (nxv_matmul, transposes as strides), best of %u runs "
               "of R products each (enqueue all, then synchronize); TFLOP/s "
               "= 2*M*N*K*batch / time; vs f32 = rate / the f32 rate of the "
               "same test and shape; vs matmul = rate / the plain matmul "
               "rate of the same MxKxN and dtype; GPU us = GPU time per "
               "product in the best run (products overlap where "
               "independent); alone us = GPU time of one product per "
               "submission, median of %d (GPUs only, up to 2^34 FLOPs)\n",
               o->reps, MM_ALONE_RUNS);
        printf("%-15s %-5s %-18s %5s %11s %12s %13s %7s %10s %9s %9s\n", "test",
               "dtype", "shape", "R", "best ms", "best TFLOP/s",
               "median TFLOP/s", "vs f32", "vs matmul", "GPU us", "alone us");
        printed_header = true;
      }
      char vs32[16] = "-", vsnn[16] = "-";
      if (ti > 0 && res[ci][0].ran)
        snprintf(vs32, sizeof vs32, "%.2fx", m->best / res[ci][0].best);
      const mm_result *nn = strcmp(c->test, "matmul") ? nn_of(res, ci, ti) : NULL;
      if (nn) snprintf(vsnn, sizeof vsnn, "%.2fx", m->best / nn->best);
      printf("%-15s %-5s %-18s %5u %11.3f %12.4f %13.4f %7s %10s %9.2f %9.2f\n",
             c->test, nxv_dtype_name(t), shape, m->r, m->ms, m->best, m->med, vs32,
             vsnn, m->gpu_us, m->alone_us);
      fflush(stdout);
    }
    nxv_tensor_release(x.a);
    nxv_tensor_release(x.b);
    NXV_CHECK(nxv_device_synchronize(dev));
    NXV_CHECK(nxv_device_trim(dev));
  }
  if (o->csv) return;
  if (!printed_header) printf("Matmul: no case fits the limits\n");
  printf("limits: dimensions <= %" PRIu64, mm_max);
  if (!isinf(flop_max)) printf(", FLOPs per product <= 2^%d", (int)log2(flop_max));
  printf("%s\n\n", o->quick ? "; plus small smoke cases of each layout" : "");
  fflush(stdout);
}
