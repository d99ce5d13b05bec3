/*
 * Indexing, ordering and window tests: nxv_argreduce, nxv_gather,
 * nxv_scatter, nxv_sort and nxv_window_reduce on each of the 12 real Nx
 * types (and c64/c128 for gather and scatter) against CPU references.
 *
 * Values travel as `val` (as in test_types.c): integers as 64-bit two's
 * complement, sign- or zero-extended from the type's width; floats as
 * doubles holding a value of the type. A complex element is two lanes of
 * its component type (re, im). Integer references are exact (64-bit
 * arithmetic wrapped to the type); float references run in double, on
 * inputs chosen so that the result is exact in the type (small integers,
 * quarters, powers of two), except scatter adds, whose reference repeats
 * the kernel's rounding step by step (f16/bf16 add in f32 and round on
 * each store).
 *
 * Every element of every result is compared, bit for bit except that an
 * expected NaN matches any NaN. The device fills new outputs with 0xFF
 * bytes first (poison_outputs), so a missed write fails; scatter writes in
 * place into a tensor of known values, whose untouched elements are
 * compared too. Wrong calls must fail with NXV_ERR_INVALID_ARGUMENT (or
 * NXV_ERR_UNSUPPORTED for complex types where the op has no meaning),
 * record a message, and leave their output parameters alone.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define MAX_REPORT 6

typedef nxv_test_val val;

static const nxv_dtype kReal[] = {NXV_S8,  NXV_S16, NXV_S32, NXV_S64,
                                  NXV_U8,  NXV_U16, NXV_U32, NXV_U64,
                                  NXV_F16, NXV_BF16, NXV_F32, NXV_F64};
#define NREAL (sizeof kReal / sizeof *kReal)
/* The types gather and scatter take: the real ones and c64, c128. */
static const nxv_dtype kAll[] = {NXV_S8,  NXV_S16,  NXV_S32, NXV_S64, NXV_U8,
                                 NXV_U16, NXV_U32,  NXV_U64, NXV_F16, NXV_BF16,
                                 NXV_F32, NXV_F64,  NXV_C64, NXV_C128};
#define NALL (sizeof kAll / sizeof *kAll)

/* Elements and calls verified by the running test (printed at its end). */
static uint64_t g_elems, g_calls;

static void report_counts(const char *what) {
  fprintf(stderr, "  %s: %llu results verified, %llu elements compared\n", what,
          (unsigned long long)(g_calls + nxv_test_expect_calls),
          (unsigned long long)g_elems);
  g_elems = g_calls = 0;
  nxv_test_expect_calls = 0;
}

/* ------------------------------------------------------------------------ */
/* Types and values                                                          */
/* ------------------------------------------------------------------------ */

static bool is_cx(nxv_dtype t) { return t == NXV_C64 || t == NXV_C128; }
static bool is_fp(nxv_dtype t) { return t >= NXV_F16 && t <= NXV_F64; }
static bool is_sint(nxv_dtype t) { return t <= NXV_S64; }
/* Values per element, and their type: a complex element is two floats. */
static size_t lanes(nxv_dtype t) { return is_cx(t) ? 2 : 1; }
static nxv_dtype lane_type(nxv_dtype t) {
  return t == NXV_C64 ? NXV_F32 : t == NXV_C128 ? NXV_F64 : t;
}


static val fval(nxv_dtype t, double f) { return nxv_test_decode(t, nxv_test_encode(t, (val){.f = f})); }
static val ival(int64_t v) { return (val){.s = v}; }

static uint64_t load_raw(nxv_dtype t, const void *p, size_t i) {
  switch (nxv_dtype_size(t)) {
    case 1: return ((const uint8_t *)p)[i];
    case 2: return ((const uint16_t *)p)[i];
    case 4: return ((const uint32_t *)p)[i];
    default: return ((const uint64_t *)p)[i];
  }
}

static void store_raw(nxv_dtype t, void *p, size_t i, uint64_t bits) {
  switch (nxv_dtype_size(t)) {
    case 1: ((uint8_t *)p)[i] = (uint8_t)bits; break;
    case 2: ((uint16_t *)p)[i] = (uint16_t)bits; break;
    case 4: ((uint32_t *)p)[i] = (uint32_t)bits; break;
    default: ((uint64_t *)p)[i] = bits; break;
  }
}

static const char *fmt(char *buf, size_t cap, nxv_dtype t, val v) {
  if (is_fp(t))
    snprintf(buf, cap, "%.9g", v.f);
  else if (is_sint(t))
    snprintf(buf, cap, "%lld", (long long)v.s);
  else
    snprintf(buf, cap, "%llu", (unsigned long long)v.u);
  return buf;
}

/* Order of two values of real type t: -1, 0, 1, or 2 when unordered. */
static int cmp_val(nxv_dtype t, val a, val b) {
  if (is_fp(t)) return isnan(a.f) || isnan(b.f) ? 2 : a.f < b.f ? -1 : a.f > b.f;
  if (is_sint(t)) return a.s < b.s ? -1 : a.s > b.s;
  return a.u < b.u ? -1 : a.u > b.u;
}

static bool is_nan_val(nxv_dtype t, val v) { return is_fp(t) && isnan(v.f); }

/* ------------------------------------------------------------------------ */
/* Device transfers and checks                                               */
/* ------------------------------------------------------------------------ */

static bool usable(nxv_device *d, nxv_dtype t) {
  if (nxv_convert_supported(d, t)) return true;
  fprintf(stderr, "  note: %s is not supported on this device, skipped\n",
          nxv_dtype_name(t));
  return false;
}

/* Uploads n elements of t (lanes(t) values each). */
static nxv_tensor *upload(nxv_device *d, nxv_dtype t, size_t n, const val *v) {
  nxv_dtype lt = lane_type(t);
  size_t m = n * lanes(t);
  void *h = test_xcalloc(m, nxv_dtype_size(lt));
  for (size_t i = 0; i < m; i++) store_raw(lt, h, i, nxv_test_encode(lt, v[i]));
  nxv_tensor *out = NULL;
  nxv_status st = nxv_tensor_upload(d, t, n, n ? h : NULL, &out);
  free(h);
  CHECK_MSG(st == NXV_OK, "upload of %zu x %s: %s: %s", n, nxv_dtype_name(t),
            nxv_status_name(st), nxv_last_error());
  return st == NXV_OK ? out : NULL;
}

static nxv_tensor *upload_s64(nxv_device *d, size_t n, const int64_t *v) {
  nxv_tensor *out = NULL;
  nxv_status st = nxv_tensor_upload(d, NXV_S64, n, n ? v : NULL, &out);
  CHECK_MSG(st == NXV_OK, "upload of %zu indices: %s: %s", n, nxv_status_name(st),
            nxv_last_error());
  return st == NXV_OK ? out : NULL;
}

static void release(nxv_tensor *t) {
  if (t) nxv_tensor_release(t);
}

/* Expected lane e matches the stored bits got: bit for bit, but any NaN
 * matches an expected NaN. */
static bool same(nxv_dtype lt, uint64_t got, val e) {
  if (is_nan_val(lt, e)) return isnan(nxv_test_decode(lt, got).f);
  return got == nxv_test_encode(lt, e);
}

/* Appends a description of element i of a failing result to buf. */
typedef void (*describe_fn)(const void *ctx, size_t i, char *buf, size_t cap);

/* Downloads the n elements of x (type t) and compares them with exp
 * (lanes(t) values each). Mismatches print with describe's account of the
 * element (describe may be NULL). Returns the number of wrong elements. */
static size_t check_elems(const char *tag, nxv_dtype t, nxv_tensor *x, size_t n,
                          const val *exp, describe_fn describe, const void *ctx) {
  g_calls++;
  if (!x) {
    CHECK_MSG(false, "%s: no result", tag);
    return n;
  }
  CHECK_MSG(nxv_tensor_dtype(x) == t, "%s: result is %s, expected %s", tag,
            nxv_dtype_name(nxv_tensor_dtype(x)), nxv_dtype_name(t));
  if (nxv_tensor_count(x) != n) {
    CHECK_MSG(false, "%s: result has %llu elements, expected %zu", tag,
              (unsigned long long)nxv_tensor_count(x), n);
    return n;
  }
  if (n == 0) return 0;
  nxv_dtype lt = lane_type(t);
  size_t L = lanes(t);
  void *h = test_xcalloc(n * L, nxv_dtype_size(lt));
  nxv_status st = nxv_tensor_download(x, 0, n, h);
  CHECK_MSG(st == NXV_OK, "%s: download: %s: %s", tag, nxv_status_name(st),
            nxv_last_error());
  size_t bad = 0;
  if (st != NXV_OK) bad = n;
  for (size_t i = 0; i < n && st == NXV_OK; i++) {
    bool ok = true;
    for (size_t l = 0; l < L; l++)
      ok = ok && same(lt, load_raw(lt, h, i * L + l), exp[i * L + l]);
    g_elems++;
    if (ok || ++bad > MAX_REPORT) continue;
    char be[2][48], bg[2][48], more[512] = "";
    for (size_t l = 0; l < L; l++) {
      fmt(be[l], sizeof be[l], lt, exp[i * L + l]);
      fmt(bg[l], sizeof bg[l], lt, nxv_test_decode(lt, load_raw(lt, h, i * L + l)));
    }
    if (describe) describe(ctx, i, more, sizeof more);
    if (L == 1)
      fprintf(stderr, "  %s: [%zu]: expected %s, got %s%s\n", tag, i, be[0], bg[0], more);
    else
      fprintf(stderr, "  %s: [%zu]: expected (%s, %s), got (%s, %s)%s\n", tag, i, be[0],
              be[1], bg[0], bg[1], more);
  }
  CHECK_MSG(bad == 0, "%s: %zu of %zu elements wrong", tag, bad, n);
  free(h);
  return bad;
}

/* check_elems on the result of a call that returned st, then releases it. */
static void check_result(const char *tag, nxv_status st, nxv_dtype t, nxv_tensor *x,
                         size_t n, const val *exp, describe_fn describe,
                         const void *ctx) {
  CHECK_MSG(st == NXV_OK, "%s: %s: %s", tag, nxv_status_name(st), nxv_last_error());
  if (st != NXV_OK) return;
  check_elems(tag, t, x, n, exp, describe, ctx);
  release(x);
}

/* ------------------------------------------------------------------------ */
/* Random inputs                                                             */
/* ------------------------------------------------------------------------ */

static uint64_t rnd(uint64_t *r, uint64_t n) { return test_rand_u64(r) % n; }
static bool coin(uint64_t *r, uint64_t n) { return rnd(r, n) == 0; }
static double uni(uint64_t *r, double lo, double hi) {
  return test_rand_uniform(r, lo, hi);
}
/* A random integer in [lo, hi]. */
static int64_t irange(uint64_t *r, int64_t lo, int64_t hi) {
  return lo + (int64_t)rnd(r, (uint64_t)(hi - lo + 1));
}

/* Random integer of type t: full range, small of either sign, or any
 * magnitude. */
static val rnd_int(uint64_t *r, nxv_dtype t) {
  uint64_t u = test_rand_u64(r);
  switch (rnd(r, 3)) {
    case 0: break;
    case 1: u = u % 81 - 40; break;
    default: u >>= u % 64; break;
  }
  return nxv_test_wrap(t, u);
}

/* Random lane of (lane) type lt, any bits a copy must preserve: for floats
 * wide finite values, signed zeros, infinities and NaN (finite_only:
 * values that add without overflow). */
static val rnd_lane(uint64_t *r, nxv_dtype lt, bool finite_only) {
  if (!is_fp(lt)) return rnd_int(r, lt);
  if (!finite_only) switch (rnd(r, 16)) {
      case 0: return fval(lt, NAN);
      case 1: return fval(lt, INFINITY);
      case 2: return fval(lt, -INFINITY);
      case 3: return fval(lt, -0.0);
      default: break;
    }
  return fval(lt, uni(r, -1000, 1000));
}

/* Index of an axis of size dim: mostly in range, a third outside it
 * (just outside, far outside, or the int64 extremes). */
static int64_t rnd_index(uint64_t *r, int64_t dim) {
  switch (rnd(r, 12)) {
    case 0: return -1 - irange(r, 0, 2);
    case 1: return dim + irange(r, 0, 2);
    case 2: return coin(r, 2) ? INT64_MIN : INT64_MAX;
    case 3: {
      int64_t far = (int64_t)(test_rand_u64(r) >> 2);
      return coin(r, 2) ? -far : far;
    }
    default: return irange(r, 0, dim - 1);
  }
}

/* ------------------------------------------------------------------------ */
/* Argmax, argmin                                                            */
/* ------------------------------------------------------------------------ */

typedef struct arg_case {
  uint32_t rank;
  int64_t shape[5];
  uint32_t mask;
} arg_case;

/* Single and multiple axes of ranks 1 to 5, odd sizes; reductions of 64 or
 * more elements take the workgroup-per-output path. */
static const arg_case kArgCases[] = {
    {1, {1}, 1},
    {1, {7}, 1},
    {1, {130}, 1},
    {2, {5, 9}, 1},
    {2, {5, 9}, 2},
    {2, {5, 9}, 3},
    {2, {4, 3}, 0},
    {2, {3, 70}, 2},
    {2, {67, 3}, 1},
    {3, {4, 5, 6}, 5},
    {3, {4, 5, 6}, 2},
    {3, {4, 5, 6}, 7},
    {3, {3, 17, 5}, 6},
    {3, {3, 1, 5}, 2},
    {4, {3, 2, 5, 3}, 10},
    {4, {3, 2, 5, 3}, 5},
    {4, {2, 3, 4, 5}, 13},
    {5, {2, 3, 1, 4, 3}, 22},
    {5, {3, 1, 2, 5, 2}, 27},
    {5, {2, 2, 3, 3, 2}, 1},
    {5, {2, 3, 2, 3, 4}, 31},
};
#define NARG_CASES (sizeof kArgCases / sizeof *kArgCases)

/* Element counts of an argreduce case: input, outputs, per reduction. */
static void arg_sizes(const arg_case *c, size_t *n, size_t *n_out, size_t *k) {
  *n = *n_out = *k = 1;
  for (uint32_t d = 0; d < c->rank; d++) {
    *n *= (size_t)c->shape[d];
    if ((c->mask >> d) & 1u) *k *= (size_t)c->shape[d];
    else *n_out *= (size_t)c->shape[d];
  }
}

/* Input element i (row-major) is element *k (row-major over the reduced
 * axes) of output *o (row-major over the kept axes). */
static void arg_split(const arg_case *c, size_t i, size_t *o, size_t *k) {
  size_t oo = 0, kk = 0, om = 1, km = 1;
  for (int d = (int)c->rank - 1; d >= 0; d--) {
    size_t dim = (size_t)c->shape[d], x = i % dim;
    i /= dim;
    if ((c->mask >> d) & 1u) {
      kk += x * km;
      km *= dim;
    } else {
      oo += x * om;
      om *= dim;
    }
  }
  *o = oo;
  *k = kk;
}

/* Nx.BinaryBackend's scan over g[0..k): the first element, replaced by a
 * later one that is larger (is_max) or smaller, or equal with high; NaN
 * never compares, so NaNs are skipped, but a NaN first element stays
 * (with high: the last NaN, which equals it). */
static int64_t ref_arg(nxv_dtype t, bool is_max, bool high, const val *g, size_t k) {
  if (k == 0) return 0;
  if (is_nan_val(t, g[0])) {
    size_t last = 0;
    for (size_t j = 0; j < k; j++)
      if (is_nan_val(t, g[j])) last = j;
    return high ? (int64_t)last : 0;
  }
  size_t best = 0;
  for (size_t j = 1; j < k; j++) {
    int c = cmp_val(t, g[j], g[best]);
    if (c == 2) continue;
    if ((is_max ? c > 0 : c < 0) || (c == 0 && high)) best = j;
  }
  return (int64_t)best;
}

enum {
  P_POOL,      /* values of a pool of 8 (ties); floats: NaN now and then */
  P_WIDE,      /* values of the whole range (few ties) */
  P_EQUAL,     /* every element the same */
  P_NAN_FIRST, /* floats: the first element of each reduction NaN */
  P_NAN_MID,   /* floats: a NaN in the middle of each reduction */
  P_ALL_NAN,   /* floats: only NaNs */
  P_COUNT
};
static const char *kPatternNames[P_COUNT] = {"pool", "wide", "all equal",
                                             "NaN first", "NaN in the middle", "all NaN"};

/* A pool of 8 values of t: the extremes, zero and random ones (floats:
 * infinities and both zeros, which compare equal). */
static void make_pool(uint64_t *r, nxv_dtype t, val *pool) {
  if (!is_fp(t)) {
    pool[0] = nxv_test_int_min(t);
    pool[1] = nxv_test_int_max(t);
    pool[2] = nxv_test_wrap(t, 0);
    pool[3] = nxv_test_wrap(t, 1);
    for (int i = 4; i < 8; i++) pool[i] = rnd_int(r, t);
    return;
  }
  const double f[7] = {-INFINITY, INFINITY, -0.0, 0.0, 1.5, -2.25, 3};
  for (int i = 0; i < 7; i++) pool[i] = fval(t, f[i]);
  pool[7] = fval(t, uni(r, -100, 100));
}

typedef struct arg_ctx {
  nxv_dtype t;
  const val *g; /* n_out groups of k values */
  size_t k;
} arg_ctx;

/* The reduced values of output i. */
static void describe_group(const void *ctx, size_t i, char *buf, size_t cap) {
  const arg_ctx *c = ctx;
  size_t used = (size_t)snprintf(buf, cap, "; values");
  for (size_t j = 0; j < c->k && j < 24 && used < cap; j++) {
    char b[48];
    used += (size_t)snprintf(buf + used, cap - used, " %s",
                             fmt(b, sizeof b, c->t, c->g[i * c->k + j]));
  }
  if (c->k > 24 && used < cap) snprintf(buf + used, cap - used, " ...");
}

/* All four modes (max/min, ties low/high) of one case and pattern, on a
 * dense tensor, on a view of a tensor holding the axes in reverse order
 * after 5 elements of decoys, and on a view with negative strides of a
 * tensor holding the elements backwards (decoys after them). */
static void run_argreduce(nxv_device *d, nxv_dtype t, const arg_case *c, int pattern,
                          uint64_t *r) {
  size_t n, n_out, k;
  arg_sizes(c, &n, &n_out, &k);
  val pool[8];
  make_pool(r, t, pool);
  val *a = test_xcalloc(n, sizeof *a), *g = test_xcalloc(n, sizeof *g);
  val *phys = test_xcalloc(n + 5, sizeof *phys), *back = test_xcalloc(n + 5, sizeof *back);
  val e[4][1024];
  val nan = is_fp(t) ? fval(t, NAN) : nxv_test_wrap(t, 0);
  val same_v = pool[rnd(r, 8)];
  for (size_t i = 0; i < n; i++) {
    size_t o, j;
    arg_split(c, i, &o, &j);
    val v = pool[rnd(r, 8)];
    bool nan_ok = is_fp(t) && pattern != P_NAN_MID;
    if (pattern == P_WIDE) v = is_fp(t) ? fval(t, uni(r, -1e4, 1e4)) : rnd_int(r, t);
    if (nan_ok && coin(r, pattern == P_NAN_FIRST ? 4 : 12)) v = nan;
    if (pattern == P_EQUAL) v = same_v;
    if ((pattern == P_NAN_FIRST && j == 0) || (pattern == P_NAN_MID && j == k / 2) ||
        pattern == P_ALL_NAN)
      v = nan;
    a[i] = v;
    g[o * k + j] = v;
  }
  /* The reversed-axes copy: axis d has stride prod(shape[0..d)). */
  int64_t vstrides[5], s = 1;
  for (uint32_t dd = 0; dd < c->rank; dd++) {
    vstrides[dd] = s;
    s *= c->shape[dd];
  }
  for (int i = 0; i < 5; i++)
    phys[i] = is_fp(t) ? fval(t, i == 0 ? NAN : i & 1 ? INFINITY : -INFINITY)
                       : (i & 1 ? nxv_test_int_max(t) : nxv_test_int_min(t));
  for (size_t i = 0; i < n; i++) {
    size_t rem = i, p = 0;
    for (int dd = (int)c->rank - 1; dd >= 0; dd--) {
      p += (rem % (size_t)c->shape[dd]) * (size_t)vstrides[dd];
      rem /= (size_t)c->shape[dd];
    }
    phys[5 + p] = a[i];
    back[n - 1 - i] = a[i];
  }
  for (int i = 0; i < 5; i++) back[n + (size_t)i] = phys[i];
  int64_t nstrides[5];
  s = 1;
  for (int dd = (int)c->rank - 1; dd >= 0; dd--) {
    nstrides[dd] = -s;
    s *= c->shape[dd];
  }
  for (int m = 0; m < 4; m++)
    for (size_t o = 0; o < n_out; o++)
      e[m][o] = ival(ref_arg(t, !(m & 1), m >= 2, g + o * k, k));
  nxv_tensor *ta = upload(d, t, n, a), *tp = upload(d, t, n + 5, phys),
             *tb = upload(d, t, n + 5, back);
  arg_ctx ctx = {t, g, k};
  static const char *kViews[3] = {"", ", reversed-axes view", ", negative strides"};
  for (int view = 0; view < 3 && ta && tp && tb; view++) {
    nxv_view v = view == 0   ? (nxv_view){ta, 0, NULL}
                 : view == 1 ? (nxv_view){tp, 5, vstrides}
                             : (nxv_view){tb, (int64_t)n - 1, nstrides};
    nxv_tensor *out[4] = {NULL, NULL, NULL, NULL};
    nxv_status st[4];
    for (int m = 0; m < 4; m++)
      st[m] = nxv_argreduce(d, !(m & 1), m >= 2, c->rank, c->shape, &v, c->mask, &out[m]);
    for (int m = 0; m < 4; m++) {
      char tag[160], sh[64];
      size_t used = 0;
      for (uint32_t dd = 0; dd < c->rank; dd++)
        used += (size_t)snprintf(sh + used, sizeof sh - used, "%s%lld", dd ? "," : "",
                                 (long long)c->shape[dd]);
      snprintf(tag, sizeof tag, "%s (ties %s) %s [%s] axes 0x%x, %s%s",
               m & 1 ? "argmin" : "argmax", m >= 2 ? "high" : "low", nxv_dtype_name(t),
               sh, c->mask, kPatternNames[pattern], kViews[view]);
      check_result(tag, st[m], NXV_S64, out[m], n_out, e[m], describe_group, &ctx);
    }
  }
  release(ta);
  release(tp);
  release(tb);
  free(a);
  free(g);
  free(phys);
  free(back);
}

NXV_TEST(indexing, argreduce) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0xA7C5;
  for (size_t ti = 0; ti < NREAL; ti++) {
    nxv_dtype t = kReal[ti];
    if (!usable(d, t)) continue;
    for (size_t ci = 0; ci < NARG_CASES; ci++)
      for (int p = 0; p < P_COUNT; p++)
        if (is_fp(t) || p < P_NAN_FIRST) run_argreduce(d, t, &kArgCases[ci], p, &r);
  }
  report_counts("argreduce");
  nxv_device_release(d);
}

/* Hand-made cases whose answers are known without the reference. */
NXV_TEST(indexing, argreduce_known) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  const double nan = NAN, inf = INFINITY;
  static const struct {
    size_t n;
    double v[8];
    int64_t want[4]; /* argmax low, argmin low, argmax high, argmin high */
  } cases[] = {
      {5, {1, 3, 3, 2, 1}, {1, 0, 2, 4}},
      {5, {nan, 3, nan, 2, 1}, {0, 0, 2, 2}},
      {5, {1, nan, 3, nan, 0}, {2, 4, 2, 4}},
      {4, {2, 2, 2, 2}, {0, 0, 3, 3}},
      {3, {nan, nan, nan}, {0, 0, 2, 2}},
      {4, {-inf, inf, -inf, inf}, {1, 0, 3, 2}},
      {4, {-0.0, 0.0, -0.0, 0.0}, {0, 0, 3, 3}},
      {6, {5, nan, 5, 7, 7, nan}, {3, 0, 4, 2}},
      {1, {nan}, {0, 0, 0, 0}},
  };
  for (size_t ti = NXV_F16; ti <= NXV_F64; ti++) {
    nxv_dtype t = (nxv_dtype)ti;
    if (!usable(d, t)) continue;
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
      val v[8];
      for (size_t i = 0; i < cases[ci].n; i++) v[i] = fval(t, cases[ci].v[i]);
      nxv_tensor *ta = upload(d, t, cases[ci].n, v);
      if (!ta) continue;
      int64_t shape[1] = {(int64_t)cases[ci].n};
      nxv_view va = {ta, 0, NULL};
      for (int m = 0; m < 4; m++) {
        nxv_tensor *out = NULL;
        nxv_status st = nxv_argreduce(d, !(m & 1), m >= 2, 1, shape, &va, 1, &out);
        char tag[96];
        snprintf(tag, sizeof tag, "%s (ties %s) %s case %zu", m & 1 ? "argmin" : "argmax",
                 m >= 2 ? "high" : "low", nxv_dtype_name(t), ci);
        val e = ival(cases[ci].want[m]);
        arg_ctx ctx = {t, v, cases[ci].n};
        check_result(tag, st, NXV_S64, out, 1, &e, describe_group, &ctx);
        /* the reference agrees with the hand-made answer */
        CHECK_MSG(ref_arg(t, !(m & 1), m >= 2, v, cases[ci].n) == cases[ci].want[m],
                  "%s: reference disagrees", tag);
      }
      release(ta);
    }
  }
  /* A broadcast view (stride 0 on axis 0) of 4 values as [3,4]: along
   * axis 0 every element ties (0 low, 2 high); along axis 1 each row is
   * the same 4 values. */
  const int32_t row[4] = {7, -3, 7, -3};
  nxv_tensor *tr = NULL;
  CHECK_OK(nxv_tensor_upload(d, NXV_S32, 4, row, &tr));
  if (tr) {
    const int64_t shape[2] = {3, 4}, bstr[2] = {0, 1};
    nxv_view v = {tr, 0, bstr};
    /* per mode (argmax low, argmin low, argmax high, argmin high) */
    const int64_t along1[4] = {0, 1, 2, 3};
    for (int m = 0; m < 4; m++)
      for (uint32_t mask = 1; mask <= 2; mask++) {
        nxv_tensor *out = NULL;
        nxv_status st = nxv_argreduce(d, !(m & 1), m >= 2, 2, shape, &v, mask, &out);
        val e[4];
        size_t n = mask == 1 ? 4 : 3;
        for (size_t i = 0; i < n; i++)
          e[i] = ival(mask == 1 ? (m >= 2 ? 2 : 0) : along1[m]);
        char tag[96];
        snprintf(tag, sizeof tag, "%s (ties %s) s32 broadcast [3,4] axes 0x%x",
                 m & 1 ? "argmin" : "argmax", m >= 2 ? "high" : "low", mask);
        check_result(tag, st, NXV_S64, out, n, e, NULL, NULL);
      }
    release(tr);
  }
  /* An empty result: nothing to compute, still a tensor. */
  nxv_tensor *te = NULL;
  CHECK_OK(nxv_tensor_empty(d, NXV_F32, 0, &te));
  if (te) {
    int64_t shape[2] = {0, 5};
    nxv_view v = {te, 0, NULL};
    nxv_tensor *out = NULL;
    nxv_status st = nxv_argreduce(d, true, false, 2, shape, &v, 2, &out);
    check_result("argmax of [0,5] over axis 1", st, NXV_S64, out, 0, NULL, NULL, NULL);
    release(te);
  }
  report_counts("argreduce (known answers)");
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Gather                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct gather_case {
  const char *name;
  size_t src_count;  /* source elements */
  int64_t src_offset;
  uint32_t rank;     /* output rank */
  int64_t shape[4];
  int64_t src_strides[4];
  int64_t index_strides[4];
  size_t idx_count;  /* index entries, tuples of depth */
  uint32_t depth;
  int64_t axis_dims[3];
  int64_t axis_strides[3];
} gather_case;

static const gather_case kGatherCases[] = {
    /* take rows of [11,13]: out [23,13] */
    {"take rows of [11,13]", 143, 0, 2, {23, 13}, {0, 1}, {1, 0}, 23, 1, {11}, {13}},
    /* take along axis 1 of [6,9] with [6,14] indices */
    {"take_along_axis 1 of [6,9]", 54, 0, 2, {6, 14}, {9, 0}, {14, 1}, 84, 1, {9}, {1}},
    /* take along the middle axis of [4,10,3]: out [4,7,3] */
    {"take axis 1 of [4,10,3]", 120, 0, 3, {4, 7, 3}, {30, 0, 1}, {0, 1, 0}, 7, 1, {10},
     {3}},
    /* depth 2 into [5,7,6], slices [2..6) of the last axis: out [17,4] */
    {"gather depth 2 of [5,7,6], slice 2..6", 210, 2, 2, {17, 4}, {0, 1}, {2, 0}, 34, 2,
     {5, 7}, {42, 6}},
    /* depth 3 into [4,3,5,8], [3,4] tuples, last axis reversed from 6 to 2 */
    {"gather depth 3 of [4,3,5,8], reversed slice", 480, 6, 3, {3, 4, 5}, {0, 0, -1},
     {12, 3, 0}, 36, 3, {4, 3, 5}, {120, 40, 8}},
    /* depth 3, scalar slices: point gather from [6,5,7], out [29] */
    {"gather points of [6,5,7]", 210, 0, 1, {29}, {0}, {3}, 87, 3, {6, 5, 7}, {35, 7, 1}},
    /* one tuple, scalar result */
    {"gather one point of [9,8]", 72, 0, 0, {0}, {0}, {0}, 2, 2, {9, 8}, {8, 1}},
    /* no indices: a transposed strided read of [4,5] */
    {"gather depth 0 (transpose of [4,5])", 20, 0, 2, {5, 4}, {1, 5}, {0, 0}, 1, 0, {0},
     {0}},
    /* a large output over many workgroups: rows of [40,37] */
    {"take rows of [40,37]", 1480, 0, 2, {61, 37}, {0, 1}, {1, 0}, 61, 1, {40}, {37}},
};
#define NGATHER (sizeof kGatherCases / sizeof *kGatherCases)

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

typedef struct gather_ctx {
  const gather_case *c;
  const int64_t *idx;
  const size_t *src_of; /* source element of each output */
} gather_ctx;

static void describe_gather(const void *ctx, size_t i, char *buf, size_t cap) {
  const gather_ctx *g = ctx;
  size_t rem = i, p = 0;
  for (int dd = (int)g->c->rank - 1; dd >= 0; dd--) {
    size_t x = rem % (size_t)g->c->shape[dd];
    rem /= (size_t)g->c->shape[dd];
    p += x * (size_t)g->c->index_strides[dd];
  }
  size_t used = (size_t)snprintf(buf, cap, "; index tuple (");
  for (uint32_t j = 0; j < g->c->depth && used < cap; j++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%lld", j ? ", " : "",
                             (long long)g->idx[p + j]);
  if (used < cap) snprintf(buf + used, cap - used, "), source element %zu", g->src_of[i]);
}

static void run_gather(nxv_device *d, nxv_dtype t, const gather_case *c, uint64_t *r) {
  size_t L = lanes(t), n = 1;
  nxv_dtype lt = lane_type(t);
  for (uint32_t dd = 0; dd < c->rank; dd++) n *= (size_t)c->shape[dd];
  val *src = test_xcalloc(c->src_count * L, sizeof *src), *e = test_xcalloc(n * L, sizeof *e);
  int64_t *idx = test_xcalloc(c->idx_count, sizeof *idx);
  size_t *src_of = test_xcalloc(n, sizeof *src_of);
  for (size_t i = 0; i < c->src_count * L; i++) src[i] = rnd_lane(r, lt, false);
  for (size_t i = 0; i < c->idx_count; i++)
    idx[i] = c->depth ? rnd_index(r, c->axis_dims[i % c->depth]) : 0;
  /* the reference: the documented formula, with clamped indices */
  for (size_t o = 0; o < n; o++) {
    size_t rem = o;
    int64_t s = c->src_offset, p = 0;
    for (int dd = (int)c->rank - 1; dd >= 0; dd--) {
      int64_t x = (int64_t)(rem % (size_t)c->shape[dd]);
      rem /= (size_t)c->shape[dd];
      s += x * c->src_strides[dd];
      p += x * c->index_strides[dd];
    }
    for (uint32_t j = 0; j < c->depth; j++)
      s += clamp64(idx[p + j], 0, c->axis_dims[j] - 1) * c->axis_strides[j];
    REQUIRE(s >= 0 && (size_t)s < c->src_count); /* the case itself is wrong */
    src_of[o] = (size_t)s;
    for (size_t l = 0; l < L; l++) e[o * L + l] = src[(size_t)s * L + l];
  }
  nxv_tensor *ts = upload(d, t, c->src_count, src);
  nxv_tensor *ti = upload_s64(d, c->idx_count, idx);
  if (ts && ti) {
    nxv_gather_desc g = {ts, c->src_offset, ti, c->rank, c->shape, c->src_strides,
                         c->index_strides, c->depth, c->axis_dims, c->axis_strides};
    nxv_tensor *out = NULL;
    nxv_status st = nxv_gather(d, &g, &out);
    char tag[128];
    snprintf(tag, sizeof tag, "gather %s: %s", nxv_dtype_name(t), c->name);
    gather_ctx ctx = {c, idx, src_of};
    check_result(tag, st, t, out, n, e, describe_gather, &ctx);
  }
  release(ts);
  release(ti);
  free(src);
  free(e);
  free(idx);
  free(src_of);
}

NXV_TEST(indexing, gather) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0x6A7E;
  for (size_t ti = 0; ti < NALL; ti++) {
    nxv_dtype t = kAll[ti];
    if (!usable(d, t)) continue;
    for (size_t ci = 0; ci < NGATHER; ci++) run_gather(d, t, &kGatherCases[ci], &r);
  }
  report_counts("gather");
  nxv_device_release(d);
}

/* Clamping, with indices known by hand: rows of a [4,2] s32 source. */
NXV_TEST(indexing, gather_clamps) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  const int32_t src[8] = {10, 11, 20, 21, 30, 31, 40, 41};
  const int64_t idx[8] = {2, -1, 4, 3, INT64_MIN, INT64_MAX, 0, -5};
  const int64_t rows[8] = {2, 0, 3, 3, 0, 3, 0, 0};
  nxv_tensor *ts = NULL, *ti = NULL;
  CHECK_OK(nxv_tensor_upload(d, NXV_S32, 8, src, &ts));
  ti = upload_s64(d, 8, idx);
  if (ts && ti) {
    const int64_t shape[2] = {8, 2}, ss[2] = {0, 1}, is[2] = {1, 0}, dims[1] = {4},
                  astr[1] = {2};
    nxv_gather_desc g = {ts, 0, ti, 2, shape, ss, is, 1, dims, astr};
    val e[16];
    for (int i = 0; i < 8; i++)
      for (int j = 0; j < 2; j++) e[i * 2 + j] = ival(src[rows[i] * 2 + j]);
    nxv_tensor *out = NULL;
    nxv_status st = nxv_gather(d, &g, &out);
    check_result("gather s32 rows with clamped indices", st, NXV_S32, out, 16, e, NULL,
                 NULL);
  }
  release(ts);
  release(ti);
  report_counts("gather (known answers)");
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Scatter                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct scatter_case {
  const char *name;
  size_t dst_count;
  uint32_t rank; /* slice rank */
  int64_t slice_shape[3];
  int64_t dst_strides[3];
  uint32_t depth;
  int64_t axis_dims[3];
  int64_t axis_strides[3];
  uint64_t count;
} scatter_case;

static const scatter_case kScatterCases[] = {
    /* rows of [9,7]; 20 updates over 9 rows: duplicates */
    {"rows of [9,7]", 63, 1, {7}, {1}, 1, {9}, {7}, 20},
    /* depth 2 into [4,5,6], slices of the first 4 of the last axis */
    {"depth 2 into [4,5,6], slice 4", 120, 1, {4}, {1}, 2, {4, 5}, {30, 6}, 15},
    /* scalar updates of [3,4,2] (one thread walks them all) */
    {"points of [3,4,2]", 24, 0, {0}, {0}, 3, {3, 4, 2}, {8, 2, 1}, 60},
    /* the middle axis of [3,6,5]: slices [3,5] */
    {"axis 1 of [3,6,5]", 90, 2, {3, 5}, {30, 1}, 1, {6}, {5}, 11},
    /* many rows of a wide target: slices over several workgroups */
    {"rows of [5,300]", 1500, 1, {300}, {1}, 1, {5}, {300}, 9},
    /* no updates */
    {"no updates", 12, 1, {3}, {1}, 1, {4}, {3}, 0},
};
#define NSCATTER (sizeof kScatterCases / sizeof *kScatterCases)

/* a + b in lane type lt as the kernel computes it: integers wrap, f16/bf16
 * add in f32 and round to the type, f32 in f32, f64 in f64. */
static val add_lane(nxv_dtype lt, val a, val b) {
  if (!is_fp(lt)) return nxv_test_wrap(lt, a.u + b.u);
  if (lt == NXV_F64) return (val){.f = a.f + b.f};
  float s = (float)a.f + (float)b.f;
  return fval(lt, (double)s);
}

typedef struct scatter_ctx {
  const scatter_case *c;
  const int64_t *idx;
  size_t slice;
  const int *last_u; /* the last in-range update of each element, -1 none */
} scatter_ctx;

static void describe_scatter(const void *ctx, size_t i, char *buf, size_t cap) {
  const scatter_ctx *s = ctx;
  int u = s->last_u[i];
  if (u < 0) {
    snprintf(buf, cap, "; no update reaches it");
    return;
  }
  size_t used = (size_t)snprintf(buf, cap, "; last update %d, index (", u);
  for (uint32_t j = 0; j < s->c->depth && used < cap; j++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%lld", j ? ", " : "",
                             (long long)s->idx[(size_t)u * s->c->depth + j]);
  if (used < cap) snprintf(buf + used, cap - used, ")");
}

static void run_scatter(nxv_device *d, nxv_dtype t, const scatter_case *c, bool add,
                        uint64_t *r) {
  size_t L = lanes(t), slice = 1, U = (size_t)c->count;
  nxv_dtype lt = lane_type(t);
  for (uint32_t dd = 0; dd < c->rank; dd++) slice *= (size_t)c->slice_shape[dd];
  size_t nu = U * slice;
  val *base = test_xcalloc(c->dst_count * L, sizeof *base);
  val *e = test_xcalloc(c->dst_count * L, sizeof *e);
  val *upd = test_xcalloc((nu ? nu : 1) * L, sizeof *upd);
  int64_t *idx = test_xcalloc(U * c->depth + 1, sizeof *idx);
  int *last_u = test_xcalloc(c->dst_count, sizeof *last_u);
  for (size_t i = 0; i < c->dst_count * L; i++) base[i] = rnd_lane(r, lt, add);
  for (size_t i = 0; i < nu * L; i++) upd[i] = rnd_lane(r, lt, add);
  for (size_t i = 0; i < U * c->depth; i++)
    idx[i] = rnd_index(r, c->axis_dims[i % c->depth]);
  if (U >= 2) { /* update 0 in range, update 1 not */
    for (uint32_t j = 0; j < c->depth; j++) idx[j] = irange(r, 0, c->axis_dims[j] - 1);
    idx[c->depth] = c->axis_dims[0];
  }
  /* the reference: updates in order, out-of-range ones skipped */
  memcpy(e, base, c->dst_count * L * sizeof *e);
  for (size_t i = 0; i < c->dst_count; i++) last_u[i] = -1;
  size_t applied = 0;
  for (size_t u = 0; u < U; u++) {
    int64_t off = 0;
    bool inside = true;
    for (uint32_t j = 0; j < c->depth; j++) {
      int64_t i = idx[u * c->depth + j];
      if (i < 0 || i >= c->axis_dims[j]) inside = false;
      else off += i * c->axis_strides[j];
    }
    if (!inside) continue;
    applied++;
    for (size_t s = 0; s < slice; s++) {
      size_t rem = s;
      int64_t dst = off;
      for (int dd = (int)c->rank - 1; dd >= 0; dd--) {
        dst += (int64_t)(rem % (size_t)c->slice_shape[dd]) * c->dst_strides[dd];
        rem /= (size_t)c->slice_shape[dd];
      }
      REQUIRE(dst >= 0 && (size_t)dst < c->dst_count); /* the case itself is wrong */
      last_u[dst] = (int)u;
      for (size_t l = 0; l < L; l++) {
        val *x = &e[(size_t)dst * L + l];
        val y = upd[(u * slice + s) * L + l];
        *x = add ? add_lane(lt, *x, y) : y;
      }
    }
  }
  /* the inputs exercise both kinds */
  CHECK_MSG(U == 0 || (applied > 0 && applied < U),
            "scatter %s: %zu of %zu updates in range", c->name, applied, U);
  nxv_tensor *td = upload(d, t, c->dst_count, base), *tu = upload(d, t, nu ? nu : 1, upd),
             *ti = upload_s64(d, U * c->depth > 0 ? U * c->depth : 1, idx);
  if (td && tu && ti) {
    /* a copy queued before the scatter must see the old values, one
     * queued after it the new ones */
    nxv_tensor *before = NULL, *after = NULL;
    CHECK_OK(nxv_tensor_copy(td, &before));
    nxv_scatter_desc s = {td,          tu,       ti,           c->count,
                          add,         c->rank,  c->rank ? c->slice_shape : NULL,
                          c->rank ? c->dst_strides : NULL, c->depth,
                          c->axis_dims, c->axis_strides};
    nxv_status st = nxv_scatter(d, &s);
    CHECK_MSG(st == NXV_OK, "scatter %s: %s: %s", c->name, nxv_status_name(st),
              nxv_last_error());
    CHECK_OK(nxv_tensor_copy(td, &after));
    char tag[160];
    scatter_ctx ctx = {c, idx, slice, last_u};
    const char *op = add ? "indexed_add" : "indexed_put";
    snprintf(tag, sizeof tag, "%s %s: %s", op, nxv_dtype_name(t), c->name);
    if (st == NXV_OK) check_elems(tag, t, td, c->dst_count, e, describe_scatter, &ctx);
    snprintf(tag, sizeof tag, "%s %s: %s (copy queued after)", op, nxv_dtype_name(t),
             c->name);
    if (st == NXV_OK && after)
      check_elems(tag, t, after, c->dst_count, e, describe_scatter, &ctx);
    snprintf(tag, sizeof tag, "%s %s: %s (copy queued before)", op, nxv_dtype_name(t),
             c->name);
    if (before) check_elems(tag, t, before, c->dst_count, base, NULL, NULL);
    release(before);
    release(after);
  }
  release(td);
  release(tu);
  release(ti);
  free(base);
  free(e);
  free(upd);
  free(idx);
  free(last_u);
}

NXV_TEST(indexing, scatter) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0x5CA7;
  for (size_t ti = 0; ti < NALL; ti++) {
    nxv_dtype t = kAll[ti];
    if (!usable(d, t)) continue;
    for (size_t ci = 0; ci < NSCATTER; ci++)
      for (int add = 0; add < 2; add++) run_scatter(d, t, &kScatterCases[ci], add, &r);
  }
  report_counts("scatter");
  nxv_device_release(d);
}

/* Order and skipping with values known by hand: 6 scalar updates of a
 * [4] s32 target at 1, 3, 1, 4 (skipped), -1 (skipped), 1. */
NXV_TEST(indexing, scatter_order) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  const int32_t base[4] = {100, 200, 300, 400}, upd[6] = {1, 2, 3, 4, 5, 6};
  const int64_t idx[6] = {1, 3, 1, 4, -1, 1};
  const int64_t dims[1] = {4}, astr[1] = {1};
  const int32_t want[2][4] = {{100, 6, 300, 2}, {100, 210, 300, 402}};
  for (int add = 0; add < 2; add++) {
    nxv_tensor *td = NULL, *tu = NULL, *ti = upload_s64(d, 6, idx);
    CHECK_OK(nxv_tensor_upload(d, NXV_S32, 4, base, &td));
    CHECK_OK(nxv_tensor_upload(d, NXV_S32, 6, upd, &tu));
    if (td && tu && ti) {
      nxv_scatter_desc s = {td, tu, ti, 6, add, 0, NULL, NULL, 1, dims, astr};
      nxv_status st = nxv_scatter(d, &s);
      CHECK_MSG(st == NXV_OK, "%s", nxv_last_error());
      val e[4];
      for (int i = 0; i < 4; i++) e[i] = ival(want[add][i]);
      check_elems(add ? "indexed_add s32 in order" : "indexed_put s32, last wins",
                  NXV_S32, td, 4, e, NULL, NULL);
    }
    release(td);
    release(tu);
    release(ti);
  }
  report_counts("scatter (known answers)");
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Sort                                                                      */
/* ------------------------------------------------------------------------ */

/* Element i sorts before element j (keys of a row): -inf .. +inf then NaN
 * ascending, NaN then +inf .. -inf descending, equal keys (-0 equals +0;
 * NaN equals NaN) by position. */
static bool sort_before(nxv_dtype t, bool desc, const val *key, size_t i, size_t j) {
  bool ni = is_nan_val(t, key[i]), nj = is_nan_val(t, key[j]);
  if (ni || nj) {
    if (ni && nj) return i < j;
    return desc ? ni : nj;
  }
  int c = cmp_val(t, key[i], key[j]);
  if (c == 0) return i < j;
  return desc ? c > 0 : c < 0;
}

/* Merge sort of the positions perm[0..n) of a row (tmp: n scratch). */
static void ref_sort(nxv_dtype t, bool desc, const val *key, size_t *perm, size_t *tmp,
                     size_t n) {
  for (size_t i = 0; i < n; i++) perm[i] = i;
  for (size_t w = 1; w < n; w *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * w) {
      size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      size_t a = lo, b = mid, o = lo;
      while (a < mid && b < hi)
        tmp[o++] = sort_before(t, desc, key, perm[b], perm[a]) ? perm[b++] : perm[a++];
      while (a < mid) tmp[o++] = perm[a++];
      while (b < hi) tmp[o++] = perm[b++];
    }
    memcpy(perm, tmp, n * sizeof *perm);
  }
}

typedef struct sort_case {
  uint64_t rows, len;
} sort_case;

static const sort_case kSortCases[] = {{1, 1},  {5, 1},  {1, 2},   {3, 2},   {2, 3},
                                       {1, 5},  {4, 7},  {1, 16},  {3, 17},  {2, 33},
                                       {5, 100}, {2, 129}, {3, 1000}};
#define NSORT (sizeof kSortCases / sizeof *kSortCases)

/* Sort keys: a pool of 4 (heavy duplicates) or the whole range; floats
 * also +-inf, both zeros and NaN. */
static val rnd_sort_key(uint64_t *r, nxv_dtype t, const val *pool, bool dup) {
  if (dup) return pool[rnd(r, 4)];
  if (!is_fp(t)) return rnd_int(r, t);
  switch (rnd(r, 12)) {
    case 0: return fval(t, NAN);
    case 1: return fval(t, INFINITY);
    case 2: return fval(t, -INFINITY);
    case 3: return fval(t, coin(r, 2) ? 0.0 : -0.0);
    default: return fval(t, uni(r, -1e3, 1e3));
  }
}

typedef struct sort_ctx {
  nxv_dtype t;
  const val *a;
  uint64_t len;
} sort_ctx;

static void describe_sort(const void *ctx, size_t i, char *buf, size_t cap) {
  const sort_ctx *s = ctx;
  size_t row = i / s->len, used = (size_t)snprintf(buf, cap, "; row %zu:", row);
  for (size_t j = 0; j < s->len && j < 20 && used < cap; j++) {
    char b[48];
    used += (size_t)snprintf(buf + used, cap - used, " %s",
                             fmt(b, sizeof b, s->t, s->a[row * s->len + j]));
  }
  if (s->len > 20 && used < cap) snprintf(buf + used, cap - used, " ...");
}

static void run_sort(nxv_device *d, nxv_dtype t, const sort_case *c, bool dup,
                     uint64_t *r) {
  size_t n = (size_t)(c->rows * c->len), len = (size_t)c->len;
  val pool[4];
  if (is_fp(t)) {
    const double f[4] = {NAN, 1.5, -0.0, 0.0};
    for (int i = 0; i < 4; i++)
      pool[i] = coin(r, 2) ? fval(t, f[i]) : fval(t, uni(r, -9, 9));
  } else {
    for (int i = 0; i < 4; i++)
      pool[i] = coin(r, 3) ? (i & 1 ? nxv_test_int_max(t) : nxv_test_int_min(t)) : rnd_int(r, t);
  }
  val *a = test_xcalloc(n, sizeof *a), *ev[2], *ei[2];
  size_t *perm = test_xcalloc(len, sizeof *perm), *tmp = test_xcalloc(len, sizeof *tmp);
  for (size_t i = 0; i < n; i++) a[i] = rnd_sort_key(r, t, pool, dup);
  for (int desc = 0; desc < 2; desc++) {
    ev[desc] = test_xcalloc(n, sizeof(val));
    ei[desc] = test_xcalloc(n, sizeof(val));
    for (size_t row = 0; row < c->rows; row++) {
      ref_sort(t, desc, a + row * len, perm, tmp, len);
      for (size_t j = 0; j < len; j++) {
        ev[desc][row * len + j] = a[row * len + perm[j]];
        ei[desc][row * len + j] = ival((int64_t)perm[j]);
      }
    }
  }
  nxv_tensor *ta = upload(d, t, n, a);
  sort_ctx ctx = {t, a, c->len};
  for (int desc = 0; desc < 2 && ta; desc++) {
    char tag[128];
    snprintf(tag, sizeof tag, "sort %s %llu x %llu %s%s", nxv_dtype_name(t),
             (unsigned long long)c->rows, (unsigned long long)c->len,
             desc ? "descending" : "ascending", dup ? ", duplicates" : "");
    /* values and indices together, then each alone */
    for (int which = 0; which < 3; which++) {
      nxv_tensor *vals = NULL, *inds = NULL;
      nxv_status st = nxv_sort(d, ta, c->rows, c->len, desc, which == 2 ? NULL : &vals,
                               which == 1 ? NULL : &inds);
      char tw[160];
      static const char *kWhich[3] = {"values and indices", "values only",
                                      "indices only"};
      snprintf(tw, sizeof tw, "%s (%s)", tag, kWhich[which]);
      CHECK_MSG(st == NXV_OK, "%s: %s: %s", tw, nxv_status_name(st), nxv_last_error());
      if (st != NXV_OK) continue;
      char tv[192];
      snprintf(tv, sizeof tv, "%s: values", tw);
      if (which != 2) check_elems(tv, t, vals, n, ev[desc], describe_sort, &ctx);
      snprintf(tv, sizeof tv, "%s: indices", tw);
      if (which != 1) check_elems(tv, NXV_S64, inds, n, ei[desc], describe_sort, &ctx);
      release(vals);
      release(inds);
    }
  }
  release(ta);
  for (int desc = 0; desc < 2; desc++) {
    free(ev[desc]);
    free(ei[desc]);
  }
  free(a);
  free(perm);
  free(tmp);
}

NXV_TEST(indexing, sort) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0x5027;
  for (size_t ti = 0; ti < NREAL; ti++) {
    nxv_dtype t = kReal[ti];
    if (!usable(d, t)) continue;
    for (size_t ci = 0; ci < NSORT; ci++)
      for (int dup = 0; dup < 2; dup++) run_sort(d, t, &kSortCases[ci], dup, &r);
  }
  report_counts("sort");
  nxv_device_release(d);
}

/* Orders known by hand, and empty tensors. */
NXV_TEST(indexing, sort_known) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  const double nan = NAN, inf = INFINITY;
  const double keys[9] = {2, nan, -inf, 0.0, 2, inf, -0.0, nan, -1};
  /* ascending: -inf -1 0 -0 2 2 inf nan nan; descending: nan nan inf 2 2 0 -0 -1 -inf */
  const int64_t asc[9] = {2, 8, 3, 6, 0, 4, 5, 1, 7};
  const int64_t desc[9] = {1, 7, 5, 0, 4, 3, 6, 8, 2};
  for (size_t ti = NXV_F16; ti <= NXV_F64; ti++) {
    nxv_dtype t = (nxv_dtype)ti;
    if (!usable(d, t)) continue;
    val a[9], ev[9], ei[9];
    for (int i = 0; i < 9; i++) a[i] = fval(t, keys[i]);
    nxv_tensor *ta = upload(d, t, 9, a);
    for (int dsc = 0; dsc < 2 && ta; dsc++) {
      const int64_t *want = dsc ? desc : asc;
      for (int i = 0; i < 9; i++) {
        ev[i] = a[want[i]];
        ei[i] = ival(want[i]);
      }
      /* the reference agrees with the hand-made order */
      size_t perm[9], tmp[9];
      ref_sort(t, dsc, a, perm, tmp, 9);
      for (int i = 0; i < 9; i++)
        CHECK_MSG((int64_t)perm[i] == want[i], "sort reference %d: %zu", i, perm[i]);
      nxv_tensor *vals = NULL, *inds = NULL;
      nxv_status st = nxv_sort(d, ta, 1, 9, dsc, &vals, &inds);
      char tag[96];
      snprintf(tag, sizeof tag, "sort %s known %s", nxv_dtype_name(t),
               dsc ? "descending" : "ascending");
      CHECK_MSG(st == NXV_OK, "%s: %s", tag, nxv_last_error());
      if (st == NXV_OK) {
        check_elems(tag, t, vals, 9, ev, NULL, NULL);
        check_elems(tag, NXV_S64, inds, 9, ei, NULL, NULL);
        release(vals);
        release(inds);
      }
    }
    release(ta);
  }
  /* empty: 0 rows, rows of 0 */
  const uint64_t empty[3][2] = {{0, 5}, {3, 0}, {0, 0}};
  for (int i = 0; i < 3; i++) {
    nxv_tensor *ta = NULL;
    CHECK_OK(nxv_tensor_empty(d, NXV_S32, 0, &ta));
    if (!ta) continue;
    nxv_tensor *vals = NULL, *inds = NULL;
    nxv_status st = nxv_sort(d, ta, empty[i][0], empty[i][1], i == 1, &vals, &inds);
    char tag[64];
    snprintf(tag, sizeof tag, "sort of %llu x %llu", (unsigned long long)empty[i][0],
             (unsigned long long)empty[i][1]);
    CHECK_MSG(st == NXV_OK, "%s: %s: %s", tag, nxv_status_name(st), nxv_last_error());
    if (st == NXV_OK) {
      check_elems(tag, NXV_S32, vals, 0, NULL, NULL, NULL);
      check_elems(tag, NXV_S64, inds, 0, NULL, NULL, NULL);
      release(vals);
      release(inds);
    }
    release(ta);
  }
  report_counts("sort (known answers)");
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Window reductions                                                         */
/* ------------------------------------------------------------------------ */

typedef struct win_case {
  const char *name;
  uint32_t rank;
  int64_t in[4], win[4], str[4], dil[4], lo[4], hi[4];
} win_case;

static const win_case kWinCases[] = {
    {"rank 1", 1, {10}, {3}, {1}, {1}, {0}, {0}},
    {"rank 1 strided, dilated, padded", 1, {11}, {3}, {2}, {2}, {1}, {2}},
    {"rank 1 window larger than the input", 1, {3}, {5}, {1}, {1}, {2}, {2}},
    {"rank 1 window larger, stride 3", 1, {4}, {7}, {3}, {1}, {3}, {3}},
    {"rank 1 windows of padding only", 1, {2}, {2}, {1}, {3}, {2}, {2}},
    {"rank 1 stride past the window", 1, {13}, {2}, {4}, {1}, {0}, {0}},
    {"rank 2", 2, {5, 7}, {2, 3}, {1, 2}, {2, 1}, {1, 0}, {0, 2}},
    {"rank 2 window over all of it", 2, {4, 4}, {4, 4}, {1, 1}, {1, 1}, {3, 3}, {3, 3}},
    {"rank 2 negative padding", 2, {6, 5}, {2, 2}, {2, 1}, {1, 1}, {-1, 0}, {0, -1}},
    {"rank 2 large", 2, {40, 37}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
    {"rank 3", 3, {3, 4, 5}, {2, 2, 2}, {1, 2, 2}, {1, 1, 2}, {0, 1, 1}, {1, 0, 1}},
    {"rank 4", 4, {2, 3, 4, 3}, {1, 2, 3, 2}, {1, 1, 2, 1}, {1, 2, 1, 1}, {0, 1, 1, 0},
     {0, 1, 1, 1}},
    {"rank 4 no padding", 4, {3, 2, 5, 4}, {2, 1, 2, 2}, {1, 1, 2, 2}, {1, 1, 1, 1},
     {0, 0, 0, 0}, {0, 0, 0, 0}},
};
#define NWIN (sizeof kWinCases / sizeof *kWinCases)

static int64_t win_out_dim(const win_case *c, uint32_t dd) {
  int64_t ext = (c->win[dd] - 1) * c->dil[dd] + 1;
  int64_t padded = c->in[dd] + c->lo[dd] + c->hi[dd];
  return padded >= ext ? (padded - ext) / c->str[dd] + 1 : 0;
}

/* Window input values for op on t whose results are exact in t. */
static val rnd_window(uint64_t *r, nxv_dtype t, nxv_reduce_op op, size_t win_count) {
  if (!is_fp(t)) {
    val v = rnd_int(r, t);
    return op == NXV_REDUCE_PRODUCT ? nxv_test_wrap(t, v.u | 1) : v;
  }
  switch (op) {
    case NXV_REDUCE_SUM: /* integers (f16, bf16) or quarters: exact sums */
      return t == NXV_F16 || t == NXV_BF16 ? fval(t, (double)irange(r, -8, 8))
                                           : fval(t, (double)irange(r, -40, 40) / 4);
    case NXV_REDUCE_PRODUCT: { /* +-1, +-2, +-0.5: exact powers of two */
      double s = coin(r, 2) ? -1 : 1;
      if (win_count > 14) return fval(t, s);
      switch (rnd(r, 4)) {
        case 0: return fval(t, 2 * s);
        case 1: return fval(t, 0.5 * s);
        default: return fval(t, s);
      }
    }
    default:
      switch (rnd(r, 25)) {
        case 0: return fval(t, NAN);
        case 1: return fval(t, INFINITY);
        case 2: return fval(t, -INFINITY);
        default: return fval(t, (double)irange(r, -50, 50));
      }
  }
}

static val win_identity(nxv_dtype t, nxv_reduce_op op) {
  switch (op) {
    case NXV_REDUCE_SUM: return is_fp(t) ? (val){.f = 0} : nxv_test_wrap(t, 0);
    case NXV_REDUCE_PRODUCT: return is_fp(t) ? (val){.f = 1} : nxv_test_wrap(t, 1);
    case NXV_REDUCE_MAX: return is_fp(t) ? (val){.f = -INFINITY} : nxv_test_int_min(t);
    default: return is_fp(t) ? (val){.f = INFINITY} : nxv_test_int_max(t);
  }
}

static val win_combine(nxv_dtype t, nxv_reduce_op op, val acc, val x) {
  if (!is_fp(t)) {
    switch (op) {
      case NXV_REDUCE_SUM: return nxv_test_wrap(t, acc.u + x.u);
      case NXV_REDUCE_PRODUCT: return nxv_test_wrap(t, acc.u * x.u);
      case NXV_REDUCE_MAX: return cmp_val(t, x, acc) > 0 ? x : acc;
      default: return cmp_val(t, x, acc) < 0 ? x : acc;
    }
  }
  switch (op) {
    case NXV_REDUCE_SUM: return (val){.f = acc.f + x.f};
    case NXV_REDUCE_PRODUCT: return (val){.f = acc.f * x.f};
    case NXV_REDUCE_MAX:
      return (val){.f = isnan(acc.f) || isnan(x.f) ? NAN : fmax(acc.f, x.f)};
    default:
      return (val){.f = isnan(acc.f) || isnan(x.f) ? NAN : fmin(acc.f, x.f)};
  }
}

typedef struct win_ctx {
  const win_case *c;
  const int64_t *out;
  nxv_dtype t;
  const val *a;
} win_ctx;

/* The input values of window i (p: padding). */
static void describe_window(const void *ctx, size_t i, char *buf, size_t cap) {
  const win_ctx *w = ctx;
  const win_case *c = w->c;
  int64_t base[4];
  size_t rem = i, wc = 1;
  for (int dd = (int)c->rank - 1; dd >= 0; dd--) {
    base[dd] = (int64_t)(rem % (size_t)w->out[dd]) * c->str[dd] - c->lo[dd];
    rem /= (size_t)w->out[dd];
    wc *= (size_t)c->win[dd];
  }
  size_t used = (size_t)snprintf(buf, cap, "; window");
  for (size_t p = 0; p < wc && p < 24 && used < cap; p++) {
    size_t wr = p, off = 0, stride = 1;
    bool inside = true;
    for (int dd = (int)c->rank - 1; dd >= 0; dd--) {
      int64_t x = base[dd] + (int64_t)(wr % (size_t)c->win[dd]) * c->dil[dd];
      wr /= (size_t)c->win[dd];
      inside = inside && x >= 0 && x < c->in[dd];
      off += (size_t)(inside ? x : 0) * stride;
      stride *= (size_t)c->in[dd];
    }
    char b[48];
    used += (size_t)snprintf(buf + used, cap - used, " %s",
                             inside ? fmt(b, sizeof b, w->t, w->a[off]) : "p");
  }
}

static void run_window(nxv_device *d, nxv_dtype t, const win_case *c, uint64_t *r) {
  int64_t out[4];
  size_t n_in = 1, n_out = 1, wc = 1;
  for (uint32_t dd = 0; dd < c->rank; dd++) {
    out[dd] = win_out_dim(c, dd);
    n_in *= (size_t)c->in[dd];
    n_out *= (size_t)out[dd];
    wc *= (size_t)c->win[dd];
  }
  val *a = test_xcalloc(n_in, sizeof *a), *e = test_xcalloc(n_out, sizeof *e);
  for (int op = 0; op < NXV_REDUCE_OP_COUNT; op++) {
    for (size_t i = 0; i < n_in; i++) a[i] = rnd_window(r, t, (nxv_reduce_op)op, wc);
    for (size_t o = 0; o < n_out; o++) {
      int64_t base[4];
      size_t rem = o;
      for (int dd = (int)c->rank - 1; dd >= 0; dd--) {
        base[dd] = (int64_t)(rem % (size_t)out[dd]) * c->str[dd] - c->lo[dd];
        rem /= (size_t)out[dd];
      }
      val acc = win_identity(t, (nxv_reduce_op)op);
      for (size_t p = 0; p < wc; p++) { /* row-major over the window */
        size_t wr = p, off = 0, stride = 1;
        bool inside = true;
        for (int dd = (int)c->rank - 1; dd >= 0; dd--) {
          int64_t x = base[dd] + (int64_t)(wr % (size_t)c->win[dd]) * c->dil[dd];
          wr /= (size_t)c->win[dd];
          inside = inside && x >= 0 && x < c->in[dd];
          off += (size_t)(inside ? x : 0) * stride;
          stride *= (size_t)c->in[dd];
        }
        if (inside) acc = win_combine(t, (nxv_reduce_op)op, acc, a[off]);
      }
      e[o] = is_fp(t) ? fval(t, acc.f) : acc;
    }
    nxv_tensor *ta = upload(d, t, n_in, a);
    if (!ta) continue;
    nxv_window_desc w = {ta, c->rank, c->in, out, c->win, c->str, c->dil, c->lo};
    nxv_tensor *res = NULL;
    nxv_status st = nxv_window_reduce(d, (nxv_reduce_op)op, &w, &res);
    char tag[128];
    snprintf(tag, sizeof tag, "window_%s %s: %s", nxv_reduce_op_name((nxv_reduce_op)op),
             nxv_dtype_name(t), c->name);
    win_ctx ctx = {c, out, t, a};
    check_result(tag, st, t, res, n_out, e, describe_window, &ctx);
    release(ta);
  }
  free(a);
  free(e);
}

NXV_TEST(indexing, window_reduce) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0x3170;
  for (size_t ti = 0; ti < NREAL; ti++) {
    nxv_dtype t = kReal[ti];
    if (!usable(d, t)) continue;
    for (size_t ci = 0; ci < NWIN; ci++) run_window(d, t, &kWinCases[ci], &r);
  }
  report_counts("window_reduce");
  nxv_device_release(d);
}

/* A window of padding only gives the identity; known by hand on s16 and
 * f32: input [2] = {5, -7}, window 2 dilated by 3, padding 2 and 2:
 * windows at -2 (reads 1), -1 (nothing), 0 (reads 0). */
NXV_TEST(indexing, window_reduce_known) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  const int64_t in[1] = {2}, out[1] = {3}, win[1] = {2}, str[1] = {1}, dil[1] = {3},
                lo[1] = {2};
  const nxv_dtype types[2] = {NXV_S16, NXV_F32};
  for (int ti = 0; ti < 2; ti++) {
    nxv_dtype t = types[ti];
    val a[2] = {is_fp(t) ? (val){.f = 5} : ival(5), is_fp(t) ? (val){.f = -7} : ival(-7)};
    const double want[4][3] = {
        {-7, 0, 5}, {-7, 1, 5}, {-7, -INFINITY, 5}, {-7, INFINITY, 5}};
    nxv_tensor *ta = upload(d, t, 2, a);
    if (!ta) continue;
    for (int op = 0; op < NXV_REDUCE_OP_COUNT; op++) {
      val e[3];
      for (int i = 0; i < 3; i++)
        e[i] = is_fp(t) ? (val){.f = want[op][i]}
               : isinf(want[op][i]) ? (want[op][i] < 0 ? nxv_test_int_min(t) : nxv_test_int_max(t))
                                    : ival((int64_t)want[op][i]);
      nxv_window_desc w = {ta, 1, in, out, win, str, dil, lo};
      nxv_tensor *res = NULL;
      nxv_status st = nxv_window_reduce(d, (nxv_reduce_op)op, &w, &res);
      char tag[96];
      snprintf(tag, sizeof tag, "window_%s %s, a padding-only window",
               nxv_reduce_op_name((nxv_reduce_op)op), nxv_dtype_name(t));
      check_result(tag, st, t, res, 3, e, NULL, NULL);
    }
    release(ta);
  }
  /* An empty input [3,0] padded by 1 on both sides of axis 1: [3,2]
   * windows of padding only, all the identity. */
  for (int ti = 0; ti < 2; ti++) {
    nxv_dtype t = types[ti];
    nxv_tensor *te = NULL;
    CHECK_OK(nxv_tensor_empty(d, t, 0, &te));
    if (!te) continue;
    const int64_t ein[2] = {3, 0}, eout[2] = {3, 2}, ewin[2] = {1, 1}, eone[2] = {1, 1},
                  elo[2] = {0, 1};
    for (int op = 0; op < NXV_REDUCE_OP_COUNT; op++) {
      val e[6];
      for (int i = 0; i < 6; i++) e[i] = win_identity(t, (nxv_reduce_op)op);
      nxv_window_desc w = {te, 2, ein, eout, ewin, eone, eone, elo};
      nxv_tensor *res = NULL;
      nxv_status st = nxv_window_reduce(d, (nxv_reduce_op)op, &w, &res);
      char tag[96];
      snprintf(tag, sizeof tag, "window_%s %s of an empty [3,0] padded to [3,2]",
               nxv_reduce_op_name((nxv_reduce_op)op), nxv_dtype_name(t));
      check_result(tag, st, t, res, 6, e, NULL, NULL);
    }
    release(te);
  }
  report_counts("window_reduce (known answers)");
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Complex types                                                             */
/* ------------------------------------------------------------------------ */

/* argreduce, sort and window_reduce refuse complex tensors (ordering has
 * no meaning for them) with NXV_ERR_UNSUPPORTED; gather and scatter take
 * them (tested above with the real types). */
NXV_TEST(indexing, complex_rejected) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  const nxv_dtype cx[2] = {NXV_C64, NXV_C128};
  for (int ci = 0; ci < 2; ci++) {
    nxv_dtype t = cx[ci];
    if (!usable(d, t)) continue;
    val v[8];
    for (int i = 0; i < 8; i++) v[i] = (val){.f = i - 3.5};
    nxv_tensor *a = upload(d, t, 4, v), *out;
    if (!a) continue;
    const int64_t shape[1] = {4};
    nxv_view va = {a, 0, NULL};
    for (int m = 0; m < 4; m++)
      EXPECT_FAIL(NXV_ERR_UNSUPPORTED, out,
                  nxv_argreduce(d, !(m & 1), m >= 2, 1, shape, &va, 1, &out));
    const int64_t wout[1] = {3}, win[1] = {2}, one[1] = {1}, zero[1] = {0};
    nxv_window_desc w = {a, 1, shape, wout, win, one, one, zero};
    for (int op = 0; op < NXV_REDUCE_OP_COUNT; op++)
      EXPECT_FAIL(NXV_ERR_UNSUPPORTED, out,
                  nxv_window_reduce(d, (nxv_reduce_op)op, &w, &out));
    for (int which = 0; which < 3; which++) {
      char primed[512];
      nxv_test_prime_error(primed, sizeof primed);
      nxv_tensor *vals = NXV_TEST_SENTINEL, *inds = NXV_TEST_SENTINEL;
      nxv_status st = nxv_sort(d, a, 1, 4, which == 1, which == 2 ? NULL : &vals,
                               which == 1 ? NULL : &inds);
      nxv_test_expect_fail_check(st, NXV_ERR_UNSUPPORTED, vals == NXV_TEST_SENTINEL && inds == NXV_TEST_SENTINEL,
                        primed, "nxv_sort of a complex tensor", __LINE__);
    }
    release(a);
  }
  report_counts("complex rejections");
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Bad arguments                                                             */
/* ------------------------------------------------------------------------ */

NXV_TEST(indexing, argreduce_bad_arguments) {
  nxv_device *d = test_open_device(), *d2 = test_open_device();
  REQUIRE(d && d2);
  float host[12] = {0};
  nxv_tensor *a = NULL, *a2 = NULL, *out;
  CHECK_OK(nxv_tensor_upload(d, NXV_F32, 12, host, &a));
  CHECK_OK(nxv_tensor_upload(d2, NXV_F32, 12, host, &a2));
  REQUIRE(a && a2);
  const int64_t shape[2] = {3, 4}, bad_dim[2] = {3, -4}, big[2] = {4, 4};
  const int64_t far[2] = {4, 2}; /* reaches element 2*4 + 3*2 = 14 */
  nxv_view va = {a, 0, NULL}, vnull = {NULL, 0, NULL}, vfar = {a, 0, far},
           vneg = {a, -1, NULL}, vother = {a2, 0, NULL};
  int64_t deep[NXV_MAX_RANK + 1];
  for (int i = 0; i <= NXV_MAX_RANK; i++) deep[i] = 1;
  /* the valid call works */
  out = NULL;
  CHECK_OK(nxv_argreduce(d, true, false, 2, shape, &va, 1, &out));
  release(out);
  const struct {
    const char *what;
    nxv_device *dev;
    uint32_t rank;
    const int64_t *shape;
    const nxv_view *view;
    uint32_t mask;
    bool no_out;
  } bad[] = {
      {"no device", NULL, 2, shape, &va, 1, false},
      {"no out", d, 2, shape, &va, 1, true},
      {"no view", d, 2, shape, NULL, 1, false},
      {"no tensor", d, 2, shape, &vnull, 1, false},
      {"no shape", d, 2, NULL, &va, 1, false},
      {"axis 2 of rank 2", d, 2, shape, &va, 4, false},
      {"axis 31 of rank 2", d, 2, shape, &va, 0x80000000u, false},
      {"axis 1 of rank 1", d, 1, shape, &va, 2, false},
      {"16 elements of 12", d, 2, big, &va, 1, false},
      {"negative dimension", d, 2, bad_dim, &va, 1, false},
      {"view past the end", d, 2, shape, &vfar, 1, false},
      {"view before the start", d, 2, shape, &vneg, 1, false},
      {"rank beyond the maximum", d, NXV_MAX_RANK + 1, deep, &va, 1, false},
      {"tensor of another device", d, 2, shape, &vother, 1, false},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    for (int m = 0; m < 4; m++) {
      char primed[512], what[96];
      nxv_test_prime_error(primed, sizeof primed);
      out = NXV_TEST_SENTINEL;
      nxv_status st = nxv_argreduce(bad[i].dev, !(m & 1), m >= 2, bad[i].rank,
                                    bad[i].shape, bad[i].view, bad[i].mask,
                                    bad[i].no_out ? NULL : &out);
      snprintf(what, sizeof what, "nxv_argreduce (%s, mode %d)", bad[i].what, m);
      nxv_test_expect_fail_check(st, NXV_ERR_INVALID_ARGUMENT, out == NXV_TEST_SENTINEL, primed, what,
                        __LINE__);
      if (st == NXV_OK && out != NXV_TEST_SENTINEL && out) nxv_tensor_release(out);
    }
  release(a);
  release(a2);
  report_counts("argreduce bad arguments");
  nxv_device_release(d);
  nxv_device_release(d2);
}

NXV_TEST(indexing, gather_bad_arguments) {
  nxv_device *d = test_open_device(), *d2 = test_open_device();
  REQUIRE(d && d2);
  float host[20] = {0};
  const int64_t ih[4] = {0, 1, 2, 3};
  nxv_tensor *src = NULL, *idx = NULL, *src2 = NULL, *idx32 = NULL, *out;
  CHECK_OK(nxv_tensor_upload(d, NXV_F32, 20, host, &src));
  CHECK_OK(nxv_tensor_upload(d2, NXV_F32, 20, host, &src2));
  CHECK_OK(nxv_tensor_upload(d, NXV_S32, 4, host, &idx32));
  idx = upload_s64(d, 4, ih);
  REQUIRE(src && idx && src2 && idx32);
  /* rows of a [4,5] source: out [4,5] */
  const int64_t shape[2] = {4, 5}, ss[2] = {0, 1}, is[2] = {1, 0}, dims[1] = {4},
                astr[1] = {5}, bad_dims[1] = {0}, wide[1] = {6}, neg_dim[2] = {4, -5};
  const int64_t far_is[2] = {2, 0}; /* index positions up to 6 of 4 */
  nxv_gather_desc ok = {src, 0, idx, 2, shape, ss, is, 1, dims, astr}, g;
  /* the valid call works */
  out = NULL;
  CHECK_OK(nxv_gather(d, &ok, &out));
  release(out);
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_gather(NULL, &ok, &out));
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_gather(d, NULL, &out));
  EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_gather(d, &ok, NULL));
  g = ok, g.src = NULL;
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_gather(d, &g, &out));
  g = ok, g.indices = NULL;
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_gather(d, &g, &out));
  g = ok, g.shape = NULL;
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_gather(d, &g, &out));
  g = ok, g.src_strides = NULL;
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_gather(d, &g, &out));
  g = ok, g.index_strides = NULL;
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_gather(d, &g, &out));
  g = ok, g.axis_dims = NULL;
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_gather(d, &g, &out));
  g = ok, g.axis_strides = NULL;
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_gather(d, &g, &out));
  /* indices not s64 */
  g = ok, g.indices = idx32;
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_gather(d, &g, &out));
  /* an indexed axis of size 0 */
  g = ok, g.axis_dims = bad_dims;
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_gather(d, &g, &out));
  /* depth beyond the maximum */
  g = ok, g.depth = NXV_MAX_RANK + 1;
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_gather(d, &g, &out));
  /* the source reached past its end (an axis of 6 rows of 5 in 20) */
  g = ok, g.axis_dims = wide;
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_gather(d, &g, &out));
  g = ok, g.src_offset = 1;
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_gather(d, &g, &out));
  g = ok, g.src_offset = -1;
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_gather(d, &g, &out));
  /* index positions past the index tensor */
  g = ok, g.index_strides = far_is;
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_gather(d, &g, &out));
  /* a negative dimension, a rank beyond the maximum */
  g = ok, g.shape = neg_dim;
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_gather(d, &g, &out));
  int64_t deep[NXV_MAX_RANK + 1] = {0};
  for (int i = 0; i <= NXV_MAX_RANK; i++) deep[i] = 1;
  g = ok, g.rank = NXV_MAX_RANK + 1, g.shape = deep, g.src_strides = deep,
  g.index_strides = deep;
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_gather(d, &g, &out));
  /* a tensor of another device */
  g = ok, g.src = src2;
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_gather(d, &g, &out));
  release(src);
  release(src2);
  release(idx);
  release(idx32);
  report_counts("gather bad arguments");
  nxv_device_release(d);
  nxv_device_release(d2);
}

NXV_TEST(indexing, scatter_bad_arguments) {
  nxv_device *d = test_open_device(), *d2 = test_open_device();
  REQUIRE(d && d2);
  val base[12], upd[8];
  for (int i = 0; i < 12; i++) base[i] = (val){.f = i + 1};
  for (int i = 0; i < 8; i++) upd[i] = (val){.f = -(i + 1)};
  const int64_t ih[2] = {0, 2};
  nxv_tensor *dst = upload(d, NXV_F32, 12, base), *u = upload(d, NXV_F32, 8, upd),
             *idx = upload_s64(d, 2, ih), *u64 = upload(d, NXV_F64, 8, upd),
             *idx32 = upload(d, NXV_S32, 2, (val[2]){{.u = 0}, {.u = 2}}),
             *dst2 = upload(d2, NXV_F32, 12, base);
  REQUIRE(dst && u && idx && u64 && idx32 && dst2);
  /* two rows of 4 into [3,4] */
  const int64_t slice[1] = {4}, ds[1] = {1}, dims[1] = {3}, astr[1] = {4},
                zero_dim[1] = {0}, tall[1] = {4}, long_slice[1] = {5}, neg[1] = {-4};
  nxv_scatter_desc ok = {dst, u, idx, 2, false, 1, slice, ds, 1, dims, astr}, s;
  for (int add = 0; add < 2; add++) {
    ok.add = add;
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_scatter(NULL, &ok));
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_scatter(d, NULL));
    s = ok, s.dst = NULL;
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_scatter(d, &s));
    s = ok, s.updates = NULL;
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_scatter(d, &s));
    s = ok, s.indices = NULL;
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_scatter(d, &s));
    s = ok, s.slice_shape = NULL;
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_scatter(d, &s));
    s = ok, s.dst_strides = NULL;
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_scatter(d, &s));
    s = ok, s.axis_dims = NULL;
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_scatter(d, &s));
    s = ok, s.axis_strides = NULL;
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_scatter(d, &s));
    /* updates of another type, indices not s64 */
    s = ok, s.updates = u64;
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_scatter(d, &s));
    s = ok, s.indices = idx32;
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_scatter(d, &s));
    /* counts the tensors do not hold: 3 updates of 4 in 8, 3 indices in 2 */
    s = ok, s.count = 3;
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_scatter(d, &s));
    s = ok, s.depth = 2, s.axis_dims = (const int64_t[2]){3, 1},
    s.axis_strides = (const int64_t[2]){4, 0};
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_scatter(d, &s));
    /* the target reached past its end, an indexed axis of size 0, a
     * negative slice dimension, depth beyond the maximum */
    s = ok, s.axis_dims = tall;
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_scatter(d, &s));
    s = ok, s.slice_shape = long_slice, s.count = 1;
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_scatter(d, &s));
    s = ok, s.axis_dims = zero_dim;
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_scatter(d, &s));
    s = ok, s.slice_shape = neg;
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_scatter(d, &s));
    s = ok, s.depth = NXV_MAX_RANK + 1;
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_scatter(d, &s));
    /* a tensor of another device */
    s = ok, s.dst = dst2;
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_scatter(d, &s));
  }
  /* none of it touched the target */
  check_elems("target after failed scatters", NXV_F32, dst, 12, base, NULL, NULL);
  release(dst);
  release(u);
  release(idx);
  release(u64);
  release(idx32);
  release(dst2);
  report_counts("scatter bad arguments");
  nxv_device_release(d);
  nxv_device_release(d2);
}

NXV_TEST(indexing, sort_bad_arguments) {
  nxv_device *d = test_open_device(), *d2 = test_open_device();
  REQUIRE(d && d2);
  val v[12];
  for (int i = 0; i < 12; i++) v[i] = (val){.f = 12 - i};
  nxv_tensor *a = upload(d, NXV_F32, 12, v), *a2 = upload(d2, NXV_F32, 12, v);
  REQUIRE(a && a2);
  const struct {
    nxv_device *dev;
    nxv_tensor *t;
    uint64_t rows, len;
    int outs; /* bit 0: values, bit 1: indices */
  } bad[] = {
      {NULL, a, 3, 4, 3},         /* no device */
      {d, NULL, 3, 4, 3},         /* no tensor */
      {d, a, 3, 4, 0},            /* no output wanted */
      {d, a, 4, 4, 3},            /* 16 elements of 12 */
      {d, a, 2, 4, 1},            /* 8 of 12 */
      {d, a, 12, 0, 2},           /* 0 of 12 */
      {d, a, UINT64_MAX, 2, 3},   /* rows x len overflows */
      {d, a, 3, UINT64_MAX / 2, 3},
      {d, a2, 3, 4, 3},           /* a tensor of another device */
  };
  /* the valid call works */
  nxv_tensor *ok_vals = NULL, *ok_inds = NULL;
  CHECK_OK(nxv_sort(d, a, 3, 4, false, &ok_vals, &ok_inds));
  release(ok_vals);
  release(ok_inds);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    for (int desc = 0; desc < 2; desc++) {
      char primed[512], what[64];
      nxv_test_prime_error(primed, sizeof primed);
      nxv_tensor *vals = NXV_TEST_SENTINEL, *inds = NXV_TEST_SENTINEL;
      nxv_status st = nxv_sort(bad[i].dev, bad[i].t, bad[i].rows, bad[i].len, desc,
                               bad[i].outs & 1 ? &vals : NULL,
                               bad[i].outs & 2 ? &inds : NULL);
      snprintf(what, sizeof what, "nxv_sort bad case %zu", i);
      nxv_test_expect_fail_check(st, NXV_ERR_INVALID_ARGUMENT,
                        vals == NXV_TEST_SENTINEL && inds == NXV_TEST_SENTINEL, primed, what, __LINE__);
    }
  /* the tensor is unchanged */
  check_elems("sort input after failed sorts", NXV_F32, a, 12, v, NULL, NULL);
  release(a);
  release(a2);
  report_counts("sort bad arguments");
  nxv_device_release(d);
  nxv_device_release(d2);
}

NXV_TEST(indexing, window_reduce_bad_arguments) {
  nxv_device *d = test_open_device(), *d2 = test_open_device();
  REQUIRE(d && d2);
  float host[12] = {0};
  nxv_tensor *a = NULL, *a2 = NULL, *out;
  CHECK_OK(nxv_tensor_upload(d, NXV_F32, 12, host, &a));
  CHECK_OK(nxv_tensor_upload(d2, NXV_F32, 12, host, &a2));
  REQUIRE(a && a2);
  const int64_t in[2] = {3, 4}, wout[2] = {2, 3}, win[2] = {2, 2}, one[2] = {1, 1},
                zero[2] = {0, 0}, big_in[2] = {4, 4}, neg_in[2] = {3, -4},
                win0[2] = {2, 0}, neg_str[2] = {1, -1}, huge[2] = {1, (int64_t)1 << 31},
                neg_out[2] = {-2, 3};
  const nxv_window_desc ok = {a, 2, in, wout, win, one, one, zero};
  nxv_window_desc w;
  out = NULL;
  CHECK_OK(nxv_window_reduce(d, NXV_REDUCE_SUM, &ok, &out));
  release(out);
  for (int op = 0; op < NXV_REDUCE_OP_COUNT; op++) {
    nxv_reduce_op o = (nxv_reduce_op)op;
    EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_window_reduce(NULL, o, &ok, &out));
    EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_window_reduce(d, o, NULL, &out));
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_window_reduce(d, o, &ok, NULL));
    w = ok, w.a = NULL;
    EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_window_reduce(d, o, &w, &out));
    const int64_t **fields[6] = {&w.in_shape, &w.out_shape, &w.window, &w.strides,
                                 &w.dilations, &w.pad_lo};
    for (int f = 0; f < 6; f++) {
      w = ok;
      *fields[f] = NULL;
      EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_window_reduce(d, o, &w, &out));
    }
    /* shape and tensor disagree; negative dimensions */
    w = ok, w.in_shape = big_in;
    EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_window_reduce(d, o, &w, &out));
    w = ok, w.in_shape = neg_in;
    EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_window_reduce(d, o, &w, &out));
    w = ok, w.out_shape = neg_out;
    EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_window_reduce(d, o, &w, &out));
    /* window, strides, dilations below 1 or beyond 2^31 */
    w = ok, w.window = win0;
    EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_window_reduce(d, o, &w, &out));
    w = ok, w.strides = zero;
    EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_window_reduce(d, o, &w, &out));
    w = ok, w.strides = neg_str;
    EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_window_reduce(d, o, &w, &out));
    w = ok, w.dilations = zero;
    EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_window_reduce(d, o, &w, &out));
    w = ok, w.dilations = huge;
    EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_window_reduce(d, o, &w, &out));
    /* rank beyond the maximum */
    int64_t deep[NXV_MAX_RANK + 1];
    for (int i = 0; i <= NXV_MAX_RANK; i++) deep[i] = 1;
    w = (nxv_window_desc){a, NXV_MAX_RANK + 1, deep, deep, deep, deep, deep, deep};
    EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_window_reduce(d, o, &w, &out));
    /* a tensor of another device */
    w = ok, w.a = a2;
    EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_window_reduce(d, o, &w, &out));
  }
  /* invalid ops */
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out,
              nxv_window_reduce(d, NXV_REDUCE_OP_COUNT, &ok, &out));
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out,
              nxv_window_reduce(d, (nxv_reduce_op)-1, &ok, &out));
  release(a);
  release(a2);
  report_counts("window_reduce bad arguments");
  nxv_device_release(d);
  nxv_device_release(d2);
}
