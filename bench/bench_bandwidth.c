/*
 * bench_bandwidth.c - the bandwidth suite of the shared benchmark schema:
 * copy, add, add_bcast, add_strided, transpose, sum_all, sum_rows,
 * sum_cols, mul_u8, mul_u8_two_step, convert_u8, compare, select and divide
 * on S x S operands (S = --side, 8192 by default) of f32, f16 and f64, and
 * of bf16 when --dtypes names it.
 *
 * - copy: the faster of nxv_tensor_copy and nxv_unary(NXV_COPY).
 * - add: c = a + b, all S x S (nxv_binary, dense views).
 * - add_bcast: c = a + row, row a 1 x S tensor broadcast through a stride
 *   of 0 (nxv_broadcast_strides).
 * - add_strided: c = transpose(a) + b, a read through strides {1, S}.
 * - transpose: c = transpose(a) made dense (nxv_unary copy of a read
 *   through strides {1, S}): what materializing Nx.transpose/1 costs.
 * - sum_all, sum_rows, sum_cols: nxv_reduce sum with axes masks 0x3, 0x2
 *   (the last axis: S results) and 0x1 (the first axis: S results).
 * - mul_u8: c = a * mask, mask an S x S u8 tensor of zeros and ones read
 *   and converted by the multiply itself (a mixed-type nxv_binary), as Nx
 *   multiplies a float tensor by a comparison's result; mul_u8_two_step:
 *   the mask converted to a's dtype first (nxv_convert), then multiplied,
 *   the two ops such a product took before.
 * - convert_u8: the u8 mask converted to the dtype (nxv_convert): what
 *   Nx.as_type/2 of a u8 tensor (an image, a comparison's result) costs.
 * - compare: c = a > b, c u8 (nxv_compare): a mask, as Nx.greater/2 makes
 *   one.
 * - select: c = mask ? a : b (nxv_select, the u8 mask above): Nx.select/3,
 *   as a gradient of max or a masked update uses it.
 * - divide: c = a / b (nxv_binary NXV_DIV): the cost of correctly rounded
 *   division against add's. b holds zeros (a thirteenth of the elements),
 *   so infinite and NaN quotients take their branch too.
 *
 * One timed run enqueues the op R times (each result released as soon as
 * the next is enqueued), then synchronizes; GB/s = R * logical bytes (each
 * operand read once, the result written once) / time, best (and median) of
 * --reps runs after one checked warm-up run. R is 8 on GPUs (2 on CPU
 * devices) times the copy's bytes over the op's, rounded: sums, which move
 * half a copy's bytes per op, run 2R, so every timed run moves about as
 * many bytes as the copy's and carries the same share of the run's fixed
 * cost (submission, the wait for the last batch).
 *
 * Inputs are small integers (a in [-5, 5], b in [-6, 6], row in [-2, 2])
 * laid out so that every row, column and whole-tensor sum is small: every
 * result is an integer exactly representable in each dtype, and the usual
 * summation orders (sequential, strided, tree) keep their partial sums
 * small enough that an f32 (or wider) accumulator reproduces it exactly. Elementwise results are checked exactly on 64 elements
 * (both ends and random ones), sums on every result against a CPU sum in
 * integer arithmetic, within 4 units of roundoff of the dtype.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

#define BW_INNER_GPU 8
#define BW_INNER_CPU 2
#define BW_SPOT 64

typedef enum bw_kind {
  BW_COPY_TENSOR,
  BW_COPY_KERNEL,
  BW_ADD,
  BW_ADD_BCAST,
  BW_ADD_STRIDED,
  BW_TRANSPOSE,
  BW_SUM_ALL,
  BW_SUM_ROWS,
  BW_SUM_COLS,
  BW_MUL_U8,
  BW_MUL_U8_TWO_STEP,
  BW_CONVERT_U8,
  BW_COMPARE,
  BW_SELECT,
  BW_DIVIDE,
  BW_KINDS
} bw_kind;

/* mul_u8: a times a u8 mask in one op (the mask converted as it is read);
 * mul_u8_two_step: the same as the mask converted to a's dtype first, then
 * multiplied (two ops; what a mixed-type op cost before). Both count the
 * same logical bytes (a, the mask, the result). */
static const char *const kLabel[BW_KINDS] = {
    "copy (tensor_copy)", "copy (unary copy)", "add", "add_bcast",
    "add_strided", "transpose", "sum_all", "sum_rows", "sum_cols",
    "mul_u8", "mul_u8_two_step", "convert_u8", "compare", "select", "divide"};
static const char *const kTest[BW_KINDS] = {
    "copy", "copy", "add", "add_bcast", "add_strided", "transpose",
    "sum_all", "sum_rows", "sum_cols", "mul_u8", "mul_u8_two_step", "convert_u8",
    "compare", "select", "divide"};

/* The input patterns. */
static int a_val(uint64_t r, uint64_t c) { return (int)((3 * r + 5 * c) % 11) - 5; }
static int b_val(uint64_t r, uint64_t c) { return (int)((7 * r + 2 * c) % 13) - 6; }
static int row_val(uint64_t c) { return (int)(c % 5) - 2; }
static int mask_val(uint64_t r, uint64_t c) { return (r + 2 * c) % 3 != 0; }

typedef struct bw_ref {
  uint64_t side;
  int64_t *row_sums;  /* side: sum over c of a(r, c) */
  int64_t *col_sums;  /* side: sum over r of a(r, c) */
  int64_t total;
} bw_ref;

typedef struct bw_ctx {
  nxv_device *dev;
  nxv_dtype t;
  uint64_t side;
  uint32_t inner;     /* R of a copy (bw_inner() scales it per op) */
  nxv_tensor *a, *b, *row;
  nxv_tensor *mask;   /* u8, mask_val */
  const bw_ref *ref;
} bw_ctx;

/* ------------------------------------------------------------------ */
/* Sizes                                                               */
/* ------------------------------------------------------------------ */

typedef struct bw_plan {
  uint64_t req;       /* side asked for */
  uint64_t side;      /* side used */
  uint32_t inner;     /* ops per timed run (R) */
  const char *note;
} bw_plan;

static uint64_t isqrt_u64(uint64_t v) {
  uint64_t s = (uint64_t)sqrt((double)v);
  while (s * s > v) s--;
  while ((s + 1) * (s + 1) <= v) s++;
  return s;
}

/* Rounds a side computed from a byte budget down to a multiple of 64. */
static uint64_t round_side(uint64_t s) { return s >= 128 ? s & ~63ull : s; }

/* max_es: the largest element size among the dtypes to run. The operands,
 * the broadcast row and R results in flight must fit in half the
 * device-local heap; every tensor within the device's buffer limits. */
static bw_plan plan_bandwidth(const options *o, const nxv_device_info *info,
                              size_t max_es) {
  const bool cpu = info->type == NXV_DEVICE_CPU;
  bw_plan p = {.inner = cpu || o->quick ? BW_INNER_CPU : BW_INNER_GPU};
  if (o->side_set) {
    p.req = o->side;
    p.note = "as requested";
  } else if (o->quick) {
    p.req = 256;
    p.note = "--quick";
  } else if (o->mb_set) {
    p.req = round_side(isqrt_u64((o->mb << 20) / 4));
    p.note = "from --mb (f32)";
  } else if (cpu) {
    p.req = 1024;
    p.note = "CPU-device default";
  } else {
    p.req = 8192;
    p.note = "default";
  }
  if (p.req < 2) p.req = 2;
  uint64_t s = p.req;
  uint64_t smax = isqrt_u64(buffer_limit(info) / max_es);
  if (smax > 65535) smax = 65535; /* S*S elements < 2^32 */
  if (s > smax) s = round_side(smax);
  uint64_t budget = info->device_local_heap_size / 2;
  if (budget) {
    while (p.inner > 1 && (2 + (uint64_t)p.inner) * s * s * max_es > budget)
      p.inner--;
    if ((2 + (uint64_t)p.inner) * s * s * max_es > budget)
      s = round_side(isqrt_u64(budget / ((2 + p.inner) * max_es)));
  }
  if (s < 2) die("bandwidth: device limits leave no room for the operands");
  p.side = s;
  if (s < p.req) p.note = "reduced to the device's limits";
  return p;
}

/* ------------------------------------------------------------------ */
/* Inputs and references                                               */
/* ------------------------------------------------------------------ */

static bw_ref make_ref(uint64_t side) {
  bw_ref r = {.side = side};
  r.row_sums = xcalloc(side, sizeof *r.row_sums);
  r.col_sums = xcalloc(side, sizeof *r.col_sums);
  for (uint64_t i = 0; i < side; i++)
    for (uint64_t j = 0; j < side; j++) {
      int v = a_val(i, j);
      r.row_sums[i] += v;
      r.col_sums[j] += v;
      r.total += v;
    }
  return r;
}

static void free_ref(bw_ref *r) {
  free(r->row_sums);
  free(r->col_sums);
  r->row_sums = r->col_sums = NULL;
}

/* Uploads rows x cols elements of dtype t with values f(r, c) (or g(c)). */
static nxv_tensor *upload_pattern(nxv_device *dev, nxv_dtype t, uint64_t rows,
                                  uint64_t cols, int (*f)(uint64_t, uint64_t),
                                  int (*g)(uint64_t)) {
  uint64_t n = rows * cols;
  void *h = xmalloc_bytes(n * nxv_dtype_size(t));
  for (uint64_t r = 0; r < rows; r++)
    for (uint64_t c = 0; c < cols; c++)
      store_elem(t, h, r * cols + c, f ? f(r, c) : g(c));
  nxv_tensor *x;
  NXV_CHECK(nxv_tensor_upload(dev, t, n, h, &x));
  free(h);
  return x;
}

/* ------------------------------------------------------------------ */
/* Running and checking                                                */
/* ------------------------------------------------------------------ */

static nxv_tensor *bw_enqueue(const bw_ctx *c, bw_kind k) {
  const int64_t s = (int64_t)c->side;
  const int64_t shape[2] = {s, s};
  nxv_view va = {c->a, 0, NULL}, vb = {c->b, 0, NULL};
  nxv_tensor *y = NULL;
  switch (k) {
    case BW_COPY_TENSOR:
      NXV_CHECK(nxv_tensor_copy(c->a, &y));
      break;
    case BW_COPY_KERNEL:
      NXV_CHECK(nxv_unary(c->dev, NXV_COPY, 2, shape, &va, &y));
      break;
    case BW_ADD:
      NXV_CHECK(nxv_binary(c->dev, NXV_ADD, 2, shape, &va, &vb, &y));
      break;
    case BW_ADD_BCAST: {
      const int64_t row_shape[2] = {1, s};
      int64_t st[2];
      NXV_CHECK(nxv_broadcast_strides(2, row_shape, 2, shape, st));
      nxv_view vr = {c->row, 0, st};
      NXV_CHECK(nxv_binary(c->dev, NXV_ADD, 2, shape, &va, &vr, &y));
      break;
    }
    case BW_ADD_STRIDED: {
      const int64_t st[2] = {1, s}; /* element (i, j) reads a[j][i] */
      nxv_view vt = {c->a, 0, st};
      NXV_CHECK(nxv_binary(c->dev, NXV_ADD, 2, shape, &vt, &vb, &y));
      break;
    }
    case BW_TRANSPOSE: {
      const int64_t st[2] = {1, s};
      nxv_view vt = {c->a, 0, st};
      NXV_CHECK(nxv_unary(c->dev, NXV_COPY, 2, shape, &vt, &y));
      break;
    }
    case BW_SUM_ALL:
      NXV_CHECK(nxv_reduce(c->dev, NXV_REDUCE_SUM, 2, shape, &va, 0x3u, &y));
      break;
    case BW_SUM_ROWS:
      NXV_CHECK(nxv_reduce(c->dev, NXV_REDUCE_SUM, 2, shape, &va, 0x2u, &y));
      break;
    case BW_SUM_COLS:
      NXV_CHECK(nxv_reduce(c->dev, NXV_REDUCE_SUM, 2, shape, &va, 0x1u, &y));
      break;
    case BW_MUL_U8: {
      nxv_view vm = {c->mask, 0, NULL};
      NXV_CHECK(nxv_binary(c->dev, NXV_MUL, 2, shape, &va, &vm, &y));
      break;
    }
    case BW_MUL_U8_TWO_STEP: {
      nxv_view vm = {c->mask, 0, NULL};
      nxv_tensor *m;
      NXV_CHECK(nxv_convert(c->dev, c->t, 2, shape, &vm, &m));
      nxv_view vc = {m, 0, NULL};
      NXV_CHECK(nxv_binary(c->dev, NXV_MUL, 2, shape, &va, &vc, &y));
      nxv_tensor_release(m);
      break;
    }
    case BW_CONVERT_U8: {
      nxv_view vm = {c->mask, 0, NULL};
      NXV_CHECK(nxv_convert(c->dev, c->t, 2, shape, &vm, &y));
      break;
    }
    case BW_COMPARE:
      NXV_CHECK(nxv_compare(c->dev, NXV_GREATER, 2, shape, &va, &vb, &y));
      break;
    case BW_SELECT: {
      nxv_view vm = {c->mask, 0, NULL};
      NXV_CHECK(nxv_select(c->dev, 2, shape, &vm, &va, &vb, &y));
      break;
    }
    case BW_DIVIDE:
      NXV_CHECK(nxv_binary(c->dev, NXV_DIV, 2, shape, &va, &vb, &y));
      break;
    default:
      die("bandwidth: bad kind %d", (int)k);
  }
  return y;
}

/* Enqueues the op inner times, then synchronizes; returns the seconds from
 * the first enqueue to the synchronize returning; the last result goes to
 * *out_last, the GPU time of the batches that ran them (nxv_stats'
 * gpu_busy_ns: timestamps at the start and end of each batch, so idle gaps
 * between batches are not counted; 0 where the queue has no timestamps)
 * to *out_gpu_s, and the time from the last batch's end on the GPU to the
 * synchronize returning (batch records on the host's clock; 0 where the
 * device cannot calibrate its timestamps) to *out_tail_s. */
static double bw_run(const bw_ctx *c, bw_kind k, uint32_t inner, nxv_tensor **out_last,
                     double *out_gpu_s, double *out_tail_s) {
  nxv_tensor *last = NULL;
  nxv_stats st0, st1;
  NXV_CHECK(nxv_device_synchronize(c->dev));
  NXV_CHECK(nxv_device_stats(c->dev, &st0));
  NXV_CHECK(nxv_device_record_batches(c->dev, true));
  double t0 = now_s();
  for (uint32_t r = 0; r < inner; r++) {
    nxv_tensor *y = bw_enqueue(c, k);
    if (last) nxv_tensor_release(last);
    last = y;
  }
  NXV_CHECK(nxv_device_synchronize(c->dev));
  uint64_t returned = nxv_clock_ns();
  double t1 = now_s();
  NXV_CHECK(nxv_device_stats(c->dev, &st1));
  nxv_batch_record rec[64];
  uint32_t nrec = 0;
  uint64_t dropped = 0, end = 0;
  NXV_CHECK(nxv_device_take_batches(c->dev, rec, 64, &nrec, &dropped));
  NXV_CHECK(nxv_device_record_batches(c->dev, false));
  for (uint32_t i = 0; i < nrec; i++)
    if (rec[i].gpu_end_time_ns > end) end = rec[i].gpu_end_time_ns;
  *out_tail_s = nrec == 64 || !end || end > returned ? 0 : (double)(returned - end) * 1e-9;
  *out_last = last;
  *out_gpu_s = (double)(st1.gpu_busy_ns - st0.gpu_busy_ns) * 1e-9;
  return t1 - t0;
}

/* Logical bytes read + written by one op. */
static double bw_bytes(bw_kind k, uint64_t side, size_t es) {
  double n = (double)side * (double)side * (double)es, row = (double)side * es;
  switch (k) {
    case BW_COPY_TENSOR:
    case BW_COPY_KERNEL:
    case BW_TRANSPOSE: return 2 * n;
    case BW_ADD:
    case BW_DIVIDE: return 3 * n;
    case BW_ADD_BCAST: return 2 * n + row;
    case BW_ADD_STRIDED: return 3 * n;
    case BW_SUM_ALL: return n + (double)es;
    case BW_SUM_ROWS:
    case BW_SUM_COLS: return n + row;
    case BW_MUL_U8:
    case BW_MUL_U8_TWO_STEP: return 2 * n + (double)side * (double)side;
    case BW_CONVERT_U8:
    case BW_COMPARE: return (k == BW_COMPARE ? 2 : 1) * n + (double)side * (double)side;
    case BW_SELECT: return 3 * n + (double)side * (double)side;
    default: return 0;
  }
}

/* Ops per timed run of kind k: the copy's R times the copy's bytes over
 * k's, rounded, at least R. */
static uint32_t bw_inner(uint32_t inner, bw_kind k, uint64_t side, size_t es) {
  double scale = bw_bytes(BW_COPY_TENSOR, side, es) / bw_bytes(k, side, es);
  return inner * (scale >= 1.5 ? (uint32_t)(scale + 0.5) : 1u);
}

/* a / b correctly rounded to t as the device computes it: f64 in double;
 * f32, and f16 and bf16 through an f32 quotient (double rounding through
 * double is innocuous for f32's precision), f16 then rounded to nearest,
 * bf16 truncated as Nx.BinaryBackend stores it. */
static double bw_quotient(nxv_dtype t, int a, int b) {
  double q = (double)a / (double)b;
  if (t == NXV_F64) return q;
  float f = (float)q;
  if (t == NXV_F16) return f16_value(f16_bits((double)f));
  if (t == NXV_BF16 && !isnan(f)) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return bf16_value((uint16_t)(u >> 16));
  }
  return (double)f;
}

static void bw_verify(const bw_ctx *c, bw_kind k, nxv_tensor *y) {
  const uint64_t s = c->side;
  const char *dt = nxv_dtype_name(c->t);
  nxv_dtype rt = k == BW_COMPARE ? NXV_U8 : c->t; /* the result's type */
  if (nxv_tensor_dtype(y) != rt)
    die("bandwidth %s %s: result is %s", kLabel[k], dt,
        nxv_dtype_name(nxv_tensor_dtype(y)));
  if (k >= BW_SUM_ALL && k <= BW_SUM_COLS) {
    uint64_t n = k == BW_SUM_ALL ? 1 : s;
    if (nxv_tensor_count(y) != n)
      die("bandwidth %s %s: %" PRIu64 " results, expected %" PRIu64,
          kLabel[k], dt, nxv_tensor_count(y), n);
    void *h = xmalloc_bytes(n * nxv_dtype_size(c->t));
    NXV_CHECK(nxv_tensor_download(y, 0, n, h));
    for (uint64_t i = 0; i < n; i++) {
      double want = k == BW_SUM_ALL ? (double)c->ref->total
                    : k == BW_SUM_ROWS ? (double)c->ref->row_sums[i]
                                       : (double)c->ref->col_sums[i];
      double got = load_elem(c->t, h, i);
      double tol = 4 * unit_roundoff(c->t) * fmax(1.0, fabs(want));
      if (!(fabs(got - want) <= tol))
        die("bandwidth %s %s (%" PRIu64 "x%" PRIu64 "): result %" PRIu64
            " is %.17g, expected %.17g (tolerance %.3g)", kLabel[k], dt, s, s,
            i, got, want, tol);
    }
    free(h);
    return;
  }
  if (nxv_tensor_count(y) != s * s)
    die("bandwidth %s %s: %" PRIu64 " elements, expected %" PRIu64, kLabel[k],
        dt, nxv_tensor_count(y), s * s);
  uint64_t seed = 777 + (uint64_t)k;
  for (uint32_t q = 0; q < BW_SPOT; q++) {
    uint64_t idx = q == 0 ? 0 : q == 1 ? s * s - 1 : splitmix64(&seed) % (s * s);
    uint64_t i = idx / s, j = idx % s;
    double want;
    switch (k) {
      case BW_COPY_TENSOR:
      case BW_COPY_KERNEL: want = a_val(i, j); break;
      case BW_ADD: want = a_val(i, j) + b_val(i, j); break;
      case BW_ADD_BCAST: want = a_val(i, j) + row_val(j); break;
      case BW_ADD_STRIDED: want = a_val(j, i) + b_val(i, j); break;
      case BW_TRANSPOSE: want = a_val(j, i); break;
      case BW_MUL_U8:
      case BW_MUL_U8_TWO_STEP: want = a_val(i, j) * mask_val(i, j); break;
      case BW_CONVERT_U8: want = mask_val(i, j); break;
      case BW_COMPARE: want = a_val(i, j) > b_val(i, j); break;
      case BW_SELECT: want = mask_val(i, j) ? a_val(i, j) : b_val(i, j); break;
      case BW_DIVIDE: want = bw_quotient(c->t, a_val(i, j), b_val(i, j)); break;
      default: want = NAN;
    }
    double got = download_elem(y, idx);
    if (got != want && !(isnan(got) && isnan(want)))
      die("bandwidth %s %s (%" PRIu64 "x%" PRIu64 "): element [%" PRIu64
          "][%" PRIu64 "] is %.17g, expected %.17g", kLabel[k], dt, s, s, i,
          j, got, want);
  }
}

/* ------------------------------------------------------------------ */
/* The suite                                                           */
/* ------------------------------------------------------------------ */

typedef struct bw_result {
  bool ran;
  const char *skip;            /* why not, when !ran */
  double best[BW_KINDS], med[BW_KINDS]; /* GB/s */
  double gpu[BW_KINDS];        /* GB/s over the GPU time of the batches
                                  (best run); 0 without timestamps */
  double ms[BW_KINDS];         /* best ms per op */
  double tail_us[BW_KINDS];    /* median time from the last batch's GPU
                                  end to synchronize returning; 0 without
                                  calibrated timestamps */
  int copy;                    /* the faster copy */
} bw_result;

static void bw_dtype(const options *o, nxv_device *dev, const nxv_device_info *info,
                     nxv_dtype t, const bw_plan *p, const bw_ref *ref, bw_result *res) {
  bw_ctx c = {.dev = dev, .t = t, .side = p->side, .inner = p->inner,
              .ref = ref};
  const uint64_t s = p->side;
  c.a = upload_pattern(dev, t, s, s, a_val, NULL);
  c.b = upload_pattern(dev, t, s, s, b_val, NULL);
  c.row = upload_pattern(dev, t, 1, s, NULL, row_val);
  c.mask = upload_pattern(dev, NXV_U8, s, s, mask_val, NULL);
  NXV_CHECK(nxv_device_synchronize(dev));
  gpu_warm(o, dev, info);
  nxv_tensor *y;
  double gpu_s, tail_s;
  for (int k = 0; k < BW_KINDS; k++) { /* warm-up, checked */
    (void)bw_run(&c, (bw_kind)k, p->inner, &y, &gpu_s, &tail_s);
    bw_verify(&c, (bw_kind)k, y);
    nxv_tensor_release(y);
  }
  double *secs[BW_KINDS], *tails[BW_KINDS], gpu_best[BW_KINDS];
  for (int k = 0; k < BW_KINDS; k++) {
    secs[k] = xcalloc(o->reps, sizeof(double));
    tails[k] = xcalloc(o->reps, sizeof(double));
    gpu_best[k] = 0;
  }
  for (uint32_t r = 0; r < o->reps; r++) /* interleaved against drift */
    for (int k = 0; k < BW_KINDS; k++) {
      secs[k][r] = bw_run(&c, (bw_kind)k, bw_inner(p->inner, (bw_kind)k, s, nxv_dtype_size(t)),
                          &y, &gpu_s, &tails[k][r]);
      if (gpu_s > 0 && (gpu_best[k] == 0 || gpu_s < gpu_best[k])) gpu_best[k] = gpu_s;
      if (r + 1 == o->reps) bw_verify(&c, (bw_kind)k, y);
      nxv_tensor_release(y);
    }
  nxv_tensor_release(c.a);
  nxv_tensor_release(c.b);
  nxv_tensor_release(c.row);
  nxv_tensor_release(c.mask);
  const size_t es = nxv_dtype_size(t);
  for (int k = 0; k < BW_KINDS; k++) {
    uint32_t inner = bw_inner(p->inner, (bw_kind)k, s, es);
    double bytes = bw_bytes((bw_kind)k, s, es) * inner;
    double tbest = min_of(secs[k], o->reps), tmed = median_of(secs[k], o->reps);
    res->best[k] = bytes / tbest / 1e9;
    res->med[k] = bytes / tmed / 1e9;
    res->ms[k] = tbest / inner * 1e3;
    res->gpu[k] = gpu_best[k] > 0 ? bytes / gpu_best[k] / 1e9 : 0;
    res->tail_us[k] = median_of(tails[k], o->reps) * 1e6;
    free(secs[k]);
    free(tails[k]);
  }
  res->copy = res->best[BW_COPY_KERNEL] > res->best[BW_COPY_TENSOR]
                  ? BW_COPY_KERNEL : BW_COPY_TENSOR;
  res->ran = true;
  char shape[48];
  snprintf(shape, sizeof shape, "%" PRIu64 "x%" PRIu64, s, s);
  const char *dt = nxv_dtype_name(t);
  emit("copy", dt, shape, "GB_s", res->best[res->copy]);
  for (int k = BW_ADD; k < BW_KINDS; k++)
    emit(kTest[k], dt, shape, "GB_s", res->best[k]);
}

void suite_bandwidth(const options *o, nxv_device *dev,
                     const nxv_device_info *info) {
  /* bf16 on request only (--dtypes): the targets name f32, f16, f64. */
  static const nxv_dtype kTypes[4] = {NXV_F32, NXV_F16, NXV_F64, NXV_BF16};
  bw_result res[4];
  memset(res, 0, sizeof res);
  size_t max_es = 0;
  for (int i = 0; i < 4; i++) {
    nxv_dtype t = kTypes[i];
    if (o->dtypes ? !(o->dtypes & (1u << i)) : t == NXV_BF16)
      res[i].skip = "not in --dtypes";
    else if (!nxv_binary_supported(dev, NXV_ADD, t) ||
        !nxv_unary_supported(dev, NXV_COPY, t))
      res[i].skip = t == NXV_F64 ? "no shaderFloat64 on this device"
                                 : "no 16-bit storage on this device";
    else if (nxv_dtype_size(t) > max_es)
      max_es = nxv_dtype_size(t);
  }
  if (!max_es) die("bandwidth: the device supports none of the dtypes asked for");
  bw_plan p = plan_bandwidth(o, info, max_es);
  bw_ref ref = make_ref(p.side);
  for (int i = 0; i < 4; i++)
    if (!res[i].skip) bw_dtype(o, dev, info, kTypes[i], &p, &ref, &res[i]);
  free_ref(&ref);
  if (o->csv) return;

  printf("Bandwidth, %" PRIu64 "x%" PRIu64 " operands (%s), %u ops per "
         "timed run, twice that for sums (enqueue all, then synchronize), "
         "best of %u runs; GB/s "
         "= 1e9 logical bytes read + written per second; %% of copy = best "
         "GB/s over the same dtype's copy (the faster copy, marked *); GPU "
         "GB/s = the same bytes over the GPU time of the batches (idle gaps "
         "between batches excluded; - without timestamps); sync tail = "
         "median us from the last batch's end on the GPU to synchronize "
         "returning (- without calibrated timestamps)\n",
         p.side, p.side, p.note, p.inner, o->reps);
  printf("%-5s %-19s %10s %11s %12s %11s %10s %9s %10s\n", "dtype", "test",
         "MiB/op", "best GB/s", "median GB/s", "best ms/op", "% of copy",
         "GPU GB/s", "sync tail");
  for (int i = 0; i < 4; i++) {
    const char *dt = nxv_dtype_name(kTypes[i]);
    if (!res[i].ran) {
      printf("%-5s skipped: %s\n", dt, res[i].skip);
      continue;
    }
    const double copy = res[i].best[res[i].copy];
    for (int k = 0; k < BW_KINDS; k++) {
      char label[32];
      snprintf(label, sizeof label, "%s%s", kLabel[k],
               k == res[i].copy ? " *" : "");
      char gpu[16] = "-";
      if (res[i].gpu[k] > 0) snprintf(gpu, sizeof gpu, "%.1f", res[i].gpu[k]);
      char tail[16] = "-";
      if (res[i].tail_us[k] > 0) snprintf(tail, sizeof tail, "%.1f", res[i].tail_us[k]);
      printf("%-5s %-19s %10.2f %11.3f %12.3f %11.3f %9.1f%% %9s %10s\n", dt, label,
             bw_bytes((bw_kind)k, p.side, nxv_dtype_size(kTypes[i])) / MIB,
             res[i].best[k], res[i].med[k], res[i].ms[k],
             100.0 * res[i].best[k] / copy, gpu, tail);
    }
  }
  printf("\n");
  fflush(stdout);
}
