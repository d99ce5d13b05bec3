/*
 * Type coverage tests: every op family on each of the 12 real Nx types
 * (s8 s16 s32 s64 u8 u16 u32 u64 f16 bf16 f32 f64) against a CPU reference.
 *
 * Values travel as `val`: integers as 64-bit two's complement, sign- or
 * zero-extended from the type's width (nxv_test_wrap()); floats as doubles holding a
 * value of the type (canon()). Integer references run in 64-bit unsigned
 * arithmetic and wrap to the width of the type; the device computes narrow
 * integers in 32 bits, which only shows in shifts (amounts are clamped at
 * the compute width, not the storage width). Float references run in
 * double (long double for the transcendental ones) and are rounded to the
 * type: f16 by a portable round-to-nearest-even encoder (no _Float16), bf16
 * by rounding to f32 and truncating to the upper 16 bits, as the kernels
 * store it (NaN as 0x7FC0).
 *
 * Float results pass when bit-identical (exact checks; any NaN matches a
 * NaN except that bf16 NaNs must read 0x7FC0) or, for tolerant checks, when
 * within a number of ulps of the type or an absolute tolerance; a value the
 * reference puts below the smallest normal may read as zero on bf16, f32
 * and f64, whose compute types a driver may run with denormals flushed.
 *
 * Outputs are poisoned with 0xFF bytes by the device, so a missed write
 * fails. A type the device cannot hold is skipped with a note.
 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define NREAL 12    /* s8 .. f64, in nxv_dtype order */
#define N 1031      /* elementwise length: 257 4-wide groups and a tail */
#define MAX_REPORT 6
#define EXACT (-1)  /* ulps argument of check_out: bit-exact */

typedef nxv_test_val val;

/* ------------------------------------------------------------------------ */
/* Types                                                                     */
/* ------------------------------------------------------------------------ */

static int tbits(nxv_dtype t) { return 8 * (int)nxv_dtype_size(t); }
static bool is_fp(nxv_dtype t) { return t >= NXV_F16; }
static bool is_sint(nxv_dtype t) { return t <= NXV_S64; }
/* Width of integer arithmetic on the device. */
static int cbits(nxv_dtype t) { return tbits(t) == 64 ? 64 : 32; }
/* Significand bits of a float type, implicit bit included. */
static int prec(nxv_dtype t) {
  return t == NXV_F16 ? 11 : t == NXV_BF16 ? 8 : t == NXV_F32 ? 24 : 53;
}
/* frexp exponent of the smallest normal of a float type. */
static int emin(nxv_dtype t) {
  return t == NXV_F16 ? -13 : t == NXV_F64 ? -1021 : -125;
}
static double min_normal(nxv_dtype t) { return ldexp(1.0, emin(t) - 1); }
static double max_finite(nxv_dtype t) {
  return t == NXV_F16 ? 65504.0 : t == NXV_BF16 ? ldexp(255.0, 120)
       : t == NXV_F32 ? FLT_MAX : DBL_MAX;
}
/* Epsilon of the type f16/bf16 accumulate in. */
static double eps_acc(nxv_dtype t) { return t == NXV_F64 ? DBL_EPSILON : FLT_EPSILON; }
/* One ulp of the type at magnitude v. */
static double ulp_of(nxv_dtype t, double v) {
  int e = emin(t);
  if (v != 0 && isfinite(v)) {
    frexp(v, &e);
    if (e < emin(t)) e = emin(t);
  }
  return ldexp(1.0, e - prec(t));
}


/* v rounded (floats) or wrapped (integers) to type t. */
static val canon(nxv_dtype t, val v) { return nxv_test_decode(t, nxv_test_encode(t, v)); }
static val fval(nxv_dtype t, double f) { return canon(t, (val){.f = f}); }

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

/* ------------------------------------------------------------------------ */
/* Device helpers and checks                                                 */
/* ------------------------------------------------------------------------ */

/* Uploads n values as type t, in reverse order when reversed. */
static nxv_tensor *upload(nxv_device *d, nxv_dtype t, size_t n, const val *v,
                          bool reversed) {
  void *h = test_xcalloc(n, nxv_dtype_size(t));
  for (size_t i = 0; i < n; i++) store_raw(t, h, reversed ? n - 1 - i : i, nxv_test_encode(t, v[i]));
  nxv_tensor *out = NULL;
  nxv_status st = nxv_tensor_upload(d, t, n, h, &out);
  free(h);
  CHECK_OK(st);
  return st == NXV_OK ? out : NULL;
}

/* Ordered key of float bits: adjacent floats differ by one. */
static uint64_t fkey(nxv_dtype t, uint64_t bits) {
  int w = tbits(t);
  uint64_t sign = 1ull << (w - 1), mag = bits & (sign - 1);
  return (bits & sign) ? (1ull << 63) - mag : (1ull << 63) + mag;
}

static bool close_enough(nxv_dtype t, uint64_t got, uint64_t exp, int ulps,
                         double abs_tol) {
  if (!is_fp(t)) return got == exp;
  val g = nxv_test_decode(t, got), e = nxv_test_decode(t, exp);
  if (isnan(e.f)) return isnan(g.f) && (t != NXV_BF16 || got == 0x7FC0u);
  if (got == exp) return true;
  if (ulps < 0 || isnan(g.f)) return false;
  if (g.f == e.f) return true; /* +0 and -0 */
  if (t != NXV_F16 && fabs(e.f) < min_normal(t) && g.f == 0) return true;
  if (fabs(g.f - e.f) <= abs_tol) return true;
  uint64_t kg = fkey(t, got), ke = fkey(t, exp);
  return (kg > ke ? kg - ke : ke - kg) <= (uint64_t)ulps;
}

/* Downloads the n elements of out (type t; released here) and compares
 * them with exp: bit-exact when ulps is EXACT, else within ulps or abs[i]
 * (abs may be NULL). Mismatches print with the inputs x and y (of type
 * in; either may be NULL). */
static void check_out(const char *tag, nxv_dtype t, nxv_tensor *out, size_t n,
                      const val *exp, int ulps, const double *abs,
                      nxv_dtype in, const val *x, const val *y) {
  if (!out) return;
  void *h = test_xcalloc(n, nxv_dtype_size(t));
  nxv_status st = nxv_tensor_download(out, 0, n, h);
  CHECK_OK(st);
  if (st == NXV_OK) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
      uint64_t got = load_raw(t, h, i), want = nxv_test_encode(t, exp[i]);
      if (close_enough(t, got, want, ulps, abs ? abs[i] : 0)) continue;
      if (++bad <= MAX_REPORT) {
        char args[96] = "", bx[40], by[40], be[40], bg[40];
        if (x && y)
          snprintf(args, sizeof args, " (%s, %s)", fmt(bx, sizeof bx, in, x[i]),
                   fmt(by, sizeof by, in, y[i]));
        else if (x)
          snprintf(args, sizeof args, " (%s)", fmt(bx, sizeof bx, in, x[i]));
        fprintf(stderr,
                "  %s [%zu]%s: expected %s (0x%llx), got %s (0x%llx)"
                " (ulps %d, abs %.3g)\n",
                tag, i, args, fmt(be, sizeof be, t, exp[i]),
                (unsigned long long)want, fmt(bg, sizeof bg, t, nxv_test_decode(t, got)),
                (unsigned long long)got, ulps, abs ? abs[i] : 0.0);
      }
    }
    CHECK_MSG(bad == 0, "%s: %zu of %zu elements wrong", tag, bad, n);
  }
  free(h);
  nxv_tensor_release(out);
}

/* The result of an op call, or NULL after a failed CHECK. */
static nxv_tensor *result(nxv_status st, nxv_tensor *out, const char *tag) {
  CHECK_MSG(st == NXV_OK, "%s: %s: %s", tag, nxv_status_name(st), nxv_last_error());
  return st == NXV_OK ? out : NULL;
}

static bool usable(nxv_device *d, nxv_dtype t) {
  if (nxv_convert_supported(d, t)) return true;
  fprintf(stderr, "  note: %s is not supported on this device, skipped\n",
          nxv_dtype_name(t));
  return false;
}

/* ------------------------------------------------------------------------ */
/* Inputs                                                                    */
/* ------------------------------------------------------------------------ */

static bool coin(uint64_t *r, uint64_t n) { return test_rand_u64(r) % n == 0; }
static double uni(uint64_t *r, double lo, double hi) {
  return test_rand_uniform(r, lo, hi);
}
/* Log-uniform in [lo, hi], 0 < lo < hi. */
static double logu(uint64_t *r, double lo, double hi) {
  return exp(uni(r, log(lo), log(hi)));
}
static double sgn(uint64_t *r) { return coin(r, 2) ? -1.0 : 1.0; }

/* The type's extremes and neighbours of zero. */
static int specials(nxv_dtype t, val *v) {
  if (!is_fp(t)) {
    val mn = nxv_test_int_min(t), mx = nxv_test_int_max(t);
    if (is_sint(t)) {
      val s[7] = {mn, mx, nxv_test_wrap(t, ~0ull), nxv_test_wrap(t, 0), nxv_test_wrap(t, 1), nxv_test_wrap(t, 2),
                  nxv_test_wrap(t, mn.u + 1)};
      memcpy(v, s, sizeof s);
    } else {
      val s[7] = {mn, mx, nxv_test_wrap(t, 1), nxv_test_wrap(t, 2), nxv_test_wrap(t, mx.u - 1),
                  nxv_test_wrap(t, mx.u >> 1), nxv_test_wrap(t, (mx.u >> 1) + 1)};
      memcpy(v, s, sizeof s);
    }
    return 7;
  }
  double s[10] = {-max_finite(t), max_finite(t), -1, 0, 1, min_normal(t),
                  -0.0, INFINITY, -INFINITY, NAN};
  for (int i = 0; i < 10; i++) v[i] = fval(t, s[i]);
  return 10;
}

/* Random integer of type t: full range, small of either sign, any
 * magnitude, or a small count (shift amounts, exponents). */
static val rnd_int(uint64_t *r, nxv_dtype t) {
  uint64_t u = test_rand_u64(r);
  switch (test_rand_u64(r) % 4) {
    case 0: break;
    case 1: u = u % 81 - 40; break;
    case 2: u >>= u % 64; break;
    default: u %= 70; break;
  }
  return nxv_test_wrap(t, u);
}

/* Random operand `which` (0: a, 1: b) of binary op on float type t, in a
 * domain where the comparison means something. */
static val rnd_binary_fp(uint64_t *r, nxv_dtype t, nxv_binary_op op, int which) {
  double x;
  switch (op) {
    case NXV_DIV: x = which ? sgn(r) * logu(r, 0.1, 100) : uni(r, -100, 100); break;
    case NXV_POW:
      if (which == 0) x = (coin(r, 4) ? -1 : 1) * logu(r, 0.25, 4);
      else x = coin(r, 2) ? (double)(int)(test_rand_u64(r) % 17) - 8 : uni(r, -4, 4);
      break;
    case NXV_REM: x = which ? sgn(r) * uni(r, 0.5, 20) : uni(r, -100, 100); break;
    case NXV_ATAN2: x = sgn(r) * logu(r, 0.01, 10); break;
    default: x = coin(r, 8) ? nearbyint(uni(r, -100, 100)) : uni(r, -100, 100); break;
  }
  return fval(t, x);
}

/* ------------------------------------------------------------------------ */
/* Binary ops                                                                */
/* ------------------------------------------------------------------------ */

static uint64_t asr(int64_t v, int64_t s) {
  return v < 0 ? ~(~(uint64_t)v >> s) : (uint64_t)v >> s;
}

static val ref_binary_int(nxv_binary_op op, nxv_dtype t, val a, val b) {
  uint64_t x = a.u, y = b.u, r = 0;
  int64_t cw = cbits(t);
  bool sg = is_sint(t);
  switch (op) {
    case NXV_ADD: r = x + y; break;
    case NXV_SUB: r = x - y; break;
    case NXV_MUL: r = x * y; break;
    case NXV_DIV:
    case NXV_QUOTIENT:
      if (y == 0) r = 0;
      else if (sg) r = b.s == -1 ? 0 - x : (uint64_t)(a.s / b.s);
      else r = x / y;
      break;
    case NXV_REM:
      if (y == 0) r = 0;
      else if (sg) r = b.s == -1 ? 0 : (uint64_t)(a.s % b.s);
      else r = x % y;
      break;
    case NXV_MAX: r = (sg ? a.s > b.s : x > y) ? x : y; break;
    case NXV_MIN: r = (sg ? a.s < b.s : x < y) ? x : y; break;
    case NXV_POW:
      if (sg && b.s < 0) {
        r = a.s == 1 ? 1 : a.s == -1 ? ((y & 1) ? ~0ull : 1) : 0;
      } else {
        r = 1;
        for (uint64_t base = x, e = y; e; e >>= 1, base *= base)
          if (e & 1) r *= base;
      }
      break;
    case NXV_BITWISE_AND: r = x & y; break;
    case NXV_BITWISE_OR: r = x | y; break;
    case NXV_BITWISE_XOR: r = x ^ y; break;
    case NXV_LEFT_SHIFT:
    case NXV_RIGHT_SHIFT:
      if (sg) { /* a negative amount shifts the other way; clamped at cw */
        int64_t s = b.s < -cw ? -cw : b.s > cw ? cw : b.s;
        if (op == NXV_RIGHT_SHIFT) s = -s;
        if (s >= 0) r = s >= cw ? 0 : x << s;
        else r = -s >= cw ? (a.s < 0 ? ~0ull : 0) : asr(a.s, -s);
      } else {
        r = y >= (uint64_t)cw ? 0 : op == NXV_LEFT_SHIFT ? x << y : x >> y;
      }
      break;
    default: break;
  }
  return nxv_test_wrap(t, r);
}

static val ref_binary(nxv_binary_op op, nxv_dtype t, val a, val b) {
  if (!is_fp(t)) return ref_binary_int(op, t, a, b);
  double x = a.f, y = b.f, r = 0;
  switch (op) {
    case NXV_ADD: r = x + y; break;
    case NXV_SUB: r = x - y; break;
    case NXV_MUL: r = x * y; break;
    case NXV_DIV: r = x / y; break;
    case NXV_MAX: r = isnan(x) || isnan(y) ? NAN : fmax(x, y); break;
    case NXV_MIN: r = isnan(x) || isnan(y) ? NAN : fmin(x, y); break;
    case NXV_POW: r = (double)powl(x, y); break;
    case NXV_REM: r = fmod(x, y); break;
    case NXV_ATAN2: r = (double)atan2l(x, y); break;
    default: break;
  }
  return fval(t, r);
}

/* Allowed error of a float binary op: one ulp on f16/bf16; on f32/f64
 * correctly rounded arithmetic but for division (one ulp), and for f32 pow
 * and atan2, which use the driver's pow and atan (Vulkan allows atan 4096
 * ulps; lavapipe shows up to 8 for pow and ~350 for atan). */
static int binary_ulps(nxv_dtype t, nxv_binary_op op) {
  if (!is_fp(t)) return EXACT;
  if (t == NXV_F16 || t == NXV_BF16) return 1;
  if (op == NXV_POW) return 32;
  if (op == NXV_ATAN2) return 4096;
  /* division correctly rounded, remainder exact, the rest exact */
  return 0;
}

/* a op b over N elements: every pair of specials first, then random
 * values; run contiguous, with b a broadcast scalar, and with a read
 * backwards through a negative stride. */
static void run_binary(nxv_device *d, nxv_dtype t, nxv_binary_op op, uint64_t *r) {
  static val a[N], b[N], bsv[N], e[N], es[N];
  static double abs_tol[N];
  val sp[16];
  int ns = specials(t, sp);
  size_t k = 0;
  for (int i = 0; i < ns; i++)
    for (int j = 0; j < ns; j++) {
      a[k] = sp[i];
      b[k++] = sp[j];
    }
  for (; k < N; k++) {
    a[k] = is_fp(t) ? rnd_binary_fp(r, t, op, 0) : rnd_int(r, t);
    b[k] = is_fp(t) ? rnd_binary_fp(r, t, op, 1) : rnd_int(r, t);
  }
  for (size_t i = 0; i < N; i++) {
    bsv[i] = b[ns * ns + 5]; /* the broadcast scalar: a random value */
    e[i] = ref_binary(op, t, a[i], b[i]);
    es[i] = ref_binary(op, t, a[i], bsv[i]);
    abs_tol[i] = 0;
  }
  nxv_tensor *ta = upload(d, t, N, a, false), *tar = upload(d, t, N, a, true),
             *tb = upload(d, t, N, b, false), *tbs = upload(d, t, 1, bsv, false);
  if (ta && tar && tb && tbs) {
    const int64_t shape[1] = {N}, zero[1] = {0}, back[1] = {-1};
    nxv_view va = {ta, 0, NULL}, vb = {tb, 0, NULL}, vbs = {tbs, 0, zero},
             var = {tar, N - 1, back};
    int ulps = binary_ulps(t, op);
    struct {
      const char *name;
      const nxv_view *x, *y;
      const val *exp, *ya;
    } runs[3] = {{"contiguous", &va, &vb, e, b},
                 {"scalar b", &va, &vbs, es, bsv},
                 {"reversed a", &var, &vb, e, b}};
    for (int i = 0; i < 3; i++) {
      char tag[96];
      snprintf(tag, sizeof tag, "binary %s %s (%s)", nxv_binary_op_name(op),
               nxv_dtype_name(t), runs[i].name);
      nxv_tensor *out = NULL;
      nxv_status st = nxv_binary(d, op, 1, shape, runs[i].x, runs[i].y, &out);
      check_out(tag, t, result(st, out, tag), N, runs[i].exp, ulps, abs_tol, t,
                a, runs[i].ya);
    }
    /* The scalar as an immediate (nxv_binary_scalar), on either side: x
     * contiguous (the contiguous variant), x reversed (the strided
     * variant), and rank 0. */
    static val ef[N];
    static double abs_tol_f[N];
    for (size_t i = 0; i < N; i++) {
      ef[i] = ref_binary(op, t, bsv[i], b[i]);
      abs_tol_f[i] = 0;
    }
    uint8_t value[8] = {0};
    store_raw(t, value, 0, nxv_test_encode(t, bsv[0]));
    struct {
      const char *name;
      const nxv_view *x;
      bool first;
      const val *exp, *xa, *ya;
      const double *tol;
    } imm_runs[3] = {{"immediate b", &va, false, es, a, bsv, abs_tol},
                     {"immediate b, reversed a", &var, false, es, a, bsv, abs_tol},
                     {"immediate a", &vb, true, ef, bsv, b, abs_tol_f}};
    for (int i = 0; i < 3; i++) {
      char tag[96];
      snprintf(tag, sizeof tag, "binary %s %s (%s)", nxv_binary_op_name(op),
               nxv_dtype_name(t), imm_runs[i].name);
      nxv_tensor *out = NULL;
      nxv_status st = nxv_binary_scalar(d, op, 1, shape, imm_runs[i].x, imm_runs[i].first,
                                        value, &out);
      check_out(tag, t, result(st, out, tag), N, imm_runs[i].exp, ulps, imm_runs[i].tol,
                t, imm_runs[i].xa, imm_runs[i].ya);
    }
    char tag[96];
    snprintf(tag, sizeof tag, "binary %s %s (immediate b, rank 0)", nxv_binary_op_name(op),
             nxv_dtype_name(t));
    nxv_view v0 = {ta, 3, NULL};
    nxv_tensor *out = NULL;
    nxv_status st = nxv_binary_scalar(d, op, 0, NULL, &v0, false, value, &out);
    check_out(tag, t, result(st, out, tag), 1, es + 3, ulps, abs_tol + 3, t, a + 3, bsv);
  }
  nxv_tensor_release(ta);
  nxv_tensor_release(tar);
  nxv_tensor_release(tb);
  nxv_tensor_release(tbs);
}

NXV_TEST(types, binary) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0x7E57B1;
  for (int ti = 0; ti < NREAL; ti++) {
    nxv_dtype t = (nxv_dtype)ti;
    if (!usable(d, t)) continue;
    for (int op = 0; op < NXV_BINARY_OP_COUNT; op++)
      if (nxv_binary_supported(d, (nxv_binary_op)op, t))
        run_binary(d, t, (nxv_binary_op)op, &r);
  }
  nxv_device_release(d);
}

/* f32 and f64 division correctly rounded over the whole range: operands of
 * random sign, 24 / 53 random bits and any normal exponent (quotients from
 * subnormal to infinite), divisors above 2^126 (whose reciprocals are
 * subnormal), powers of two, exact quotients, quotients beside a
 * midpoint, subnormal operands, zeros, infinities and NaN,
 * against C's quotient (f32 through double, which rounds the same). Every
 * quotient must be that value; a subnormal one may also be flushed to zero. */
NXV_TEST(types, division_correctly_rounded) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0xD1F1DE;
  enum { ND = 20000 };
  static val x[ND], y[ND], e[ND];
  const nxv_dtype types[2] = {NXV_F32, NXV_F64};
  for (int ti = 0; ti < 2; ti++) {
    nxv_dtype t = types[ti];
    if (!usable(d, t)) continue;
    int p = prec(t), lo = emin(t), hi = t == NXV_F32 ? 128 : 1024;
    for (size_t i = 0; i < ND; i++) {
      double v[2];
      for (int k = 0; k < 2; k++) {
        double m = ldexp((double)(test_rand_u64(&r) >> (64 - p)) + ldexp(1.0, p - 1), -p);
        /* mostly exponents near 0, a third anywhere in the normal range */
        int ex = coin(&r, 3) ? lo + (int)(test_rand_u64(&r) % (uint64_t)(hi - lo))
                             : (int)(test_rand_u64(&r) % 41) - 20;
        v[k] = ldexp(m, ex) * (coin(&r, 2) ? -1 : 1);
      }
      switch (i % 16) {
        case 1: v[1] = ldexp(1.0, (int)(test_rand_u64(&r) % 60) - 30); break; /* power of two */
        case 2: v[0] = v[1] * (double)(test_rand_u64(&r) % 4096); break;      /* exact quotient */
        case 3: v[1] = ldexp(1.0 + (double)(test_rand_u64(&r) % 1000) / 1000, hi - 2); break;
        default: break;
      }
      x[i] = fval(t, v[0]);
      y[i] = fval(t, v[1]);
    }
    const double specials[][2] = {{0.0, 3.0},      {-0.0, 3.0},       {3.0, 0.0},
                                  {-3.0, 0.0},     {0.0, 0.0},        {INFINITY, 2.0},
                                  {2.0, INFINITY}, {-2.0, INFINITY},  {INFINITY, -INFINITY},
                                  {NAN, 1.0},      {1.0, NAN},        {1.0, 3.0},
                                  {-7.0, 0.7},     {1.0, 0.17317819595336914},
                                  {1.0e-40, 3.0},  {1.0e-310, 3.0}};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
      x[i] = fval(t, specials[i][0]);
      y[i] = fval(t, specials[i][1]);
    }
    /* quotients just beside a midpoint, where a correction rounded twice
     * lands on a tie (1 / (1 - 2^-24) is 1 + 2^-23 in f32, 1 / (1 - 2^-53)
     * 1 + 2^-52 in f64) */
    for (size_t i = 0; i < 64; i++) {
      size_t at = ND - 1 - i;
      x[at] = fval(t, (double)(1 + i % 5));
      y[at] = fval(t, ldexp(1.0, (int)(i % 4)) - ldexp(1.0, (int)(i % 4) - p + (int)(i / 32)));
    }
    for (size_t i = 0; i < ND; i++) e[i] = fval(t, x[i].f / y[i].f);
    nxv_tensor *tx = upload(d, t, ND, x, false), *ty = upload(d, t, ND, y, false);
    if (tx && ty) {
      const int64_t shape[1] = {ND};
      nxv_view vx = {tx, 0, NULL}, vy = {ty, 0, NULL};
      char tag[64];
      snprintf(tag, sizeof tag, "divide %s", nxv_dtype_name(t));
      nxv_tensor *out = NULL;
      nxv_status st = nxv_binary(d, NXV_DIV, 1, shape, &vx, &vy, &out);
      check_out(tag, t, result(st, out, tag), ND, e, 0, NULL, t, x, y);
    }
    if (tx) nxv_tensor_release(tx);
    if (ty) nxv_tensor_release(ty);
  }
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Unary ops                                                                 */
/* ------------------------------------------------------------------------ */

static val ref_unary(nxv_unary_op op, nxv_dtype t, val a) {
  if (!is_fp(t)) {
    uint64_t x = a.u, r = 0;
    bool sg = is_sint(t);
    switch (op) {
      case NXV_NEG: r = 0 - x; break;
      case NXV_ABS: r = sg && a.s < 0 ? 0 - x : x; break;
      case NXV_SIGN: r = sg ? (a.s > 0 ? 1 : a.s < 0 ? ~0ull : 0) : x != 0; break;
      case NXV_SQUARE: r = x * x; break;
      case NXV_BITWISE_NOT: r = ~x; break;
      default: break;
    }
    return nxv_test_wrap(t, r);
  }
  double x = a.f, r = 0;
  switch (op) {
    case NXV_NEG: r = -x; break;
    case NXV_ABS: r = fabs(x); break;
    case NXV_SQRT: r = sqrt(x); break;
    case NXV_EXP: r = (double)expl(x); break;
    case NXV_FLOOR: r = floor(x); break;
    case NXV_ROUND: r = round(x); break; /* half away from zero */
    default: break;
  }
  return fval(t, r);
}

static val rnd_unary(uint64_t *r, nxv_dtype t, nxv_unary_op op) {
  if (!is_fp(t)) return rnd_int(r, t);
  switch (op) {
    case NXV_SQRT: return fval(t, (coin(r, 8) ? -1 : 1) * logu(r, 1e-3, 1e4));
    case NXV_EXP: return fval(t, uni(r, -20, 20));
    default: /* a quarter on halves, for round */
      return fval(t, coin(r, 4) ? nearbyint(uni(r, -200, 200)) / 2 : uni(r, -100, 100));
  }
}

static void run_unary(nxv_device *d, nxv_dtype t, nxv_unary_op op, uint64_t *r) {
  static val a[N], e[N];
  size_t k = (size_t)specials(t, a);
  if (is_fp(t)) {
    static const double halves[] = {0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49, -0.51, 99.5};
    for (size_t i = 0; i < sizeof halves / sizeof *halves; i++)
      a[k++] = fval(t, halves[i]);
  }
  for (; k < N; k++) a[k] = rnd_unary(r, t, op);
  for (size_t i = 0; i < N; i++) e[i] = ref_unary(op, t, a[i]);
  int ulps = EXACT;
  if (op == NXV_SQRT || op == NXV_EXP) ulps = t == NXV_F64 && op == NXV_EXP ? 2 : 1;
  nxv_tensor *ta = upload(d, t, N, a, false), *tar = upload(d, t, N, a, true);
  if (ta && tar) {
    const int64_t shape[1] = {N}, back[1] = {-1};
    nxv_view views[2] = {{ta, 0, NULL}, {tar, N - 1, back}};
    for (int i = 0; i < 2; i++) {
      char tag[96];
      snprintf(tag, sizeof tag, "unary %s %s (%s)", nxv_unary_op_name(op),
               nxv_dtype_name(t), i ? "reversed" : "contiguous");
      nxv_tensor *out = NULL;
      nxv_status st = nxv_unary(d, op, 1, shape, &views[i], &out);
      check_out(tag, t, result(st, out, tag), N, e, ulps, NULL, t, a, NULL);
    }
  }
  nxv_tensor_release(ta);
  nxv_tensor_release(tar);
}

NXV_TEST(types, unary) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  static const nxv_unary_op int_ops[] = {NXV_NEG, NXV_ABS, NXV_SIGN, NXV_SQUARE,
                                         NXV_BITWISE_NOT};
  static const nxv_unary_op fp_ops[] = {NXV_NEG, NXV_ABS, NXV_SQRT,
                                        NXV_EXP, NXV_FLOOR, NXV_ROUND};
  uint64_t r = 0x0A7A;
  for (int ti = 0; ti < NREAL; ti++) {
    nxv_dtype t = (nxv_dtype)ti;
    if (!usable(d, t)) continue;
    const nxv_unary_op *ops = is_fp(t) ? fp_ops : int_ops;
    int nops = is_fp(t) ? 6 : 5;
    for (int i = 0; i < nops; i++) {
      CHECK_MSG(nxv_unary_supported(d, ops[i], t), "%s on %s unsupported",
                nxv_unary_op_name(ops[i]), nxv_dtype_name(t));
      run_unary(d, t, ops[i], &r);
    }
  }
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Strided operands over two and three axes (the tiled kernels)              */
/* ------------------------------------------------------------------------ */

/* An operand of a [D, R, C] op: a flat tensor of count elements read
 * through offset and strides (one per axis of the op). */
typedef struct tiled_arg {
  const char *name;
  int64_t offset, strides[3];
  size_t count;
} tiled_arg;

enum { TA_DENSE, TA_DENSE_OFF1, TA_TRANSPOSED, TA_ROWS, TA_COLUMNS,
       TA_REV_COLUMNS, TA_EVERY_OTHER, TA_TRANSPOSED_OFF1, TA_BATCH_BCAST_T,
       TA_TRANSPOSED_PADDED, TA_TRANSPOSED_ALIGNED, TA_COUNT };

static tiled_arg tiled_layout(int kind, int64_t D, int64_t R, int64_t C) {
  size_t n = (size_t)(D * R * C);
  switch (kind) {
    case TA_DENSE: return (tiled_arg){"dense", 0, {R * C, C, 1}, n};
    case TA_DENSE_OFF1: return (tiled_arg){"dense at offset 1", 1, {R * C, C, 1}, n + 1};
    case TA_TRANSPOSED: return (tiled_arg){"transposed", 0, {R * C, 1, R}, n};
    case TA_ROWS: return (tiled_arg){"a row broadcast", 0, {0, 0, 1}, (size_t)C};
    case TA_COLUMNS: return (tiled_arg){"a column broadcast", 0, {0, 1, 0}, (size_t)R};
    case TA_REV_COLUMNS:
      return (tiled_arg){"columns reversed", C - 1, {R * C, C, -1}, n};
    case TA_EVERY_OTHER:
      return (tiled_arg){"every other column", 1, {2 * R * C, 2 * C, 2}, 2 * n + 1};
    case TA_TRANSPOSED_OFF1:
      return (tiled_arg){"transposed at offset 1", 1, {R * C, 1, R}, n + 1};
    case TA_TRANSPOSED_PADDED: {
      /* a transposed view of a matrix whose columns are longer than R
       * (an even length, at offset 2): the column stride is not R */
      int64_t p = (R | 1) + 1;
      return (tiled_arg){"transposed, columns padded", 2, {C * p, 1, p}, (size_t)(D * C * p + 2)};
    }
    case TA_TRANSPOSED_ALIGNED: {
      /* columns padded to a multiple of 8 elements past R, at offset 8:
       * with R % 8 == 0, 16-bit types read 8 rows per 16-byte load */
      int64_t p = (R + 7) / 8 * 8 + 8;
      return (tiled_arg){"transposed, columns of 8-element groups", 8, {C * p, 1, p},
                         (size_t)(D * C * p + 8)};
    }
    default:
      return (tiled_arg){"transposed, batch broadcast", 0, {0, 1, R}, (size_t)(R * C)};
  }
}

static size_t tiled_at(const tiled_arg *g, int64_t z, int64_t r, int64_t c) {
  return (size_t)(g->offset + z * g->strides[0] + r * g->strides[1] + c * g->strides[2]);
}

static val ref_convert(nxv_dtype from, nxv_dtype to, val a);

/* Random values of type t for operand which of add. */
static void tiled_fill(uint64_t *r, nxv_dtype t, int which, size_t n, val *v) {
  for (size_t i = 0; i < n; i++)
    v[i] = is_fp(t) ? rnd_binary_fp(r, t, NXV_ADD, which) : rnd_int(r, t);
}

/* Calls op on views of rank 2 ([R, C], when D is 1) or 3. */
static nxv_view tiled_view(nxv_tensor *t, const tiled_arg *g, int64_t D) {
  return (nxv_view){t, g->offset, D == 1 ? g->strides + 1 : g->strides};
}

/* add of two operands, negate and a conversion of the first, and the
 * first minus an immediate and an immediate minus it, over pairs of
 * layouts chosen to hit each of the tiled kernel's load modes (4-wide,
 * direct, transposed through shared memory, immediate) and its edges
 * (partial tiles, several tiles down and across, rows not a multiple of 4
 * wide, a batch axis, odd row counts and offsets). */
static void run_tiled(nxv_device *d, nxv_dtype t, uint64_t *r) {
  /* Rows of 4, 12, 96 and 1028 elements: repeated rows read by the
   * contiguous kernel, their period a power of two of groups of 4 or not.
   * Row counts that are multiples of 8 (64, 40, 24): transposed 16-bit
   * operands read 8 rows at a time, over tiles partly past the columns;
   * with columns of a multiple of 8 too (16, 136, 72) and the other
   * operand transposed the same way, dense, an immediate or a repeated
   * row, 16-bit types take the 16-byte tiles (a misaligned or broadcast
   * column the 8-row form). */
  static const int64_t shapes[][3] = {{1, 37, 44}, {3, 19, 33}, {2, 64, 16}, {1, 20, 130},
                                      {2, 34, 70}, {1, 131, 66}, {2, 65, 129}, {1, 9, 4},
                                      {3, 7, 12},  {2, 20, 96}, {1, 33, 1028},
                                      {1, 40, 136}, {2, 24, 72}};
  static const int pairs[][2] = {
      {TA_TRANSPOSED, TA_DENSE},         {TA_DENSE, TA_ROWS},
      {TA_COLUMNS, TA_TRANSPOSED},       {TA_TRANSPOSED, TA_TRANSPOSED},
      {TA_DENSE_OFF1, TA_REV_COLUMNS},   {TA_EVERY_OTHER, TA_BATCH_BCAST_T},
      {TA_BATCH_BCAST_T, TA_COLUMNS},    {TA_ROWS, TA_EVERY_OTHER},
      {TA_TRANSPOSED_OFF1, TA_TRANSPOSED}, {TA_TRANSPOSED_PADDED, TA_ROWS},
      {TA_DENSE, TA_TRANSPOSED_PADDED},  {TA_ROWS, TA_DENSE},
      {TA_ROWS, TA_ROWS},                {TA_DENSE_OFF1, TA_ROWS},
      {TA_TRANSPOSED_ALIGNED, TA_TRANSPOSED_ALIGNED}, {TA_DENSE, TA_TRANSPOSED_ALIGNED},
      {TA_TRANSPOSED_ALIGNED, TA_ROWS},  {TA_DENSE_OFF1, TA_TRANSPOSED_ALIGNED},
      {TA_COLUMNS, TA_TRANSPOSED_ALIGNED}};
  nxv_dtype to = (nxv_dtype)((t + 5) % NREAL);
  bool conv = nxv_convert_supported(d, to);
  for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
    int64_t D = shapes[si][0], R = shapes[si][1], C = shapes[si][2];
    size_t n = (size_t)(D * R * C);
    uint32_t rank = D == 1 ? 2 : 3;
    const int64_t *shape = D == 1 ? shapes[si] + 1 : shapes[si];
    for (size_t pi = 0; pi < sizeof pairs / sizeof *pairs; pi++) {
      tiled_arg ga = tiled_layout(pairs[pi][0], D, R, C);
      tiled_arg gb = tiled_layout(pairs[pi][1], D, R, C);
      val *a = test_xcalloc(ga.count, sizeof *a), *b = test_xcalloc(gb.count, sizeof *b);
      val *x = test_xcalloc(n, sizeof *x), *y = test_xcalloc(n, sizeof *y);
      val *e_add = test_xcalloc(n, sizeof *e_add), *e_neg = test_xcalloc(n, sizeof *e_neg);
      val *e_cvt = test_xcalloc(n, sizeof *e_cvt), *sv = test_xcalloc(n, sizeof *sv);
      val *e_sub = test_xcalloc(n, sizeof *e_sub), *e_rsub = test_xcalloc(n, sizeof *e_rsub);
      tiled_fill(r, t, 0, ga.count, a);
      tiled_fill(r, t, 1, gb.count, b);
      val s = b[gb.count / 2]; /* the immediate */
      size_t i = 0;
      for (int64_t z = 0; z < D; z++)
        for (int64_t rr = 0; rr < R; rr++)
          for (int64_t c = 0; c < C; c++, i++) {
            x[i] = a[tiled_at(&ga, z, rr, c)];
            y[i] = b[tiled_at(&gb, z, rr, c)];
            e_add[i] = ref_binary(NXV_ADD, t, x[i], y[i]);
            e_neg[i] = ref_unary(NXV_NEG, t, x[i]);
            e_cvt[i] = ref_convert(t, to, x[i]);
            sv[i] = s;
            e_sub[i] = ref_binary(NXV_SUB, t, x[i], s);
            e_rsub[i] = ref_binary(NXV_SUB, t, s, x[i]);
          }
      nxv_tensor *ta = upload(d, t, ga.count, a, false), *tb = upload(d, t, gb.count, b, false);
      if (ta && tb) {
        nxv_view va = tiled_view(ta, &ga, D), vb = tiled_view(tb, &gb, D);
        char tag[160];
        nxv_tensor *out = NULL;
        snprintf(tag, sizeof tag, "add %s %lldx%lldx%lld (%s, %s)", nxv_dtype_name(t),
                 (long long)D, (long long)R, (long long)C, ga.name, gb.name);
        nxv_status st = nxv_binary(d, NXV_ADD, rank, shape, &va, &vb, &out);
        check_out(tag, t, result(st, out, tag), n, e_add, binary_ulps(t, NXV_ADD),
                  NULL, t, x, y);
        snprintf(tag, sizeof tag, "negate %s %lldx%lldx%lld (%s)", nxv_dtype_name(t),
                 (long long)D, (long long)R, (long long)C, ga.name);
        st = nxv_unary(d, NXV_NEG, rank, shape, &va, &out);
        check_out(tag, t, result(st, out, tag), n, e_neg, EXACT, NULL, t, x, NULL);
        uint8_t value[8] = {0};
        store_raw(t, value, 0, nxv_test_encode(t, s));
        for (int first = 0; first < 2; first++) {
          snprintf(tag, sizeof tag, "subtract %s %lldx%lldx%lld (%s, immediate %s)",
                   nxv_dtype_name(t), (long long)D, (long long)R, (long long)C, ga.name,
                   first ? "a" : "b");
          st = nxv_binary_scalar(d, NXV_SUB, rank, shape, &va, first, value, &out);
          check_out(tag, t, result(st, out, tag), n, first ? e_rsub : e_sub,
                    binary_ulps(t, NXV_SUB), NULL, t, first ? sv : x, first ? x : sv);
        }
        if (conv) {
          snprintf(tag, sizeof tag, "as_type %s -> %s %lldx%lldx%lld (%s)",
                   nxv_dtype_name(t), nxv_dtype_name(to), (long long)D, (long long)R,
                   (long long)C, ga.name);
          st = nxv_convert(d, to, rank, shape, &va, &out);
          check_out(tag, to, result(st, out, tag), n, e_cvt, EXACT, NULL, t, x, NULL);
        }
      }
      nxv_tensor_release(ta);
      nxv_tensor_release(tb);
      free(a);
      free(b);
      free(x);
      free(y);
      free(e_add);
      free(e_neg);
      free(e_cvt);
      free(sv);
      free(e_sub);
      free(e_rsub);
    }
  }
}

NXV_TEST(types, tiled_layouts) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0x711ED;
  for (int ti = 0; ti < NREAL; ti++)
    if (usable(d, (nxv_dtype)ti)) run_tiled(d, (nxv_dtype)ti, &r);
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Conversions                                                               */
/* ------------------------------------------------------------------------ */

/* a (of type from) as type to: integers wrap; floats to integers truncate,
 * saturate and send NaN to 0; anything to f16/bf16 goes through f32 (their
 * compute type), then rounds to nearest even (f16) or truncates (bf16). */
static val ref_convert(nxv_dtype from, nxv_dtype to, val a) {
  if (!is_fp(to)) {
    if (!is_fp(from)) return nxv_test_wrap(to, a.u);
    double x = trunc(a.f);
    if (isnan(x)) return nxv_test_wrap(to, 0);
    int b = tbits(to);
    double lo = is_sint(to) ? -ldexp(1, b - 1) : 0;
    double hi = is_sint(to) ? ldexp(1, b - 1) : ldexp(1, b); /* first out */
    if (x <= lo) return nxv_test_int_min(to);
    if (x >= hi) return nxv_test_int_max(to);
    return x < 0 ? nxv_test_wrap(to, (uint64_t)(int64_t)x) : nxv_test_wrap(to, (uint64_t)x);
  }
  if (to == NXV_F64)
    return (val){.f = is_fp(from) ? a.f : is_sint(from) ? (double)a.s : (double)a.u};
  float f = is_fp(from) ? (float)a.f : is_sint(from) ? (float)a.s : (float)a.u;
  return fval(to, f);
}

#define NCONV 91 /* not a multiple of 4: the 4-wide path and a tail */

static int conv_inputs(nxv_dtype t, uint64_t *r, val *v) {
  static const double fl[] = {
      NAN, INFINITY, -INFINITY, 0.0, -0.0, 0.5, -0.5, 0.99, -0.99, 1, -1, 1.5,
      -1.5, 2.5, -2.5, 3.14159, -7.75, 100.25, 127, 127.9, 128, 128.5, -128,
      -128.9, -129, 255, 255.9, 256, 300.7, -300.7, 32767, 32767.9, 32768,
      -32768, -32768.9, -32769, 65504, 65519, 65520, 65535.9, 65536, -65536,
      70000.5, 1000000.5, 16777217, 2147483520.0, 2147483647.0, 2147483648.0,
      -2147483648.0, -2147483904.0, 4294967295.0, 4294967296.0, 1e10, -1e10,
      9.2e18, 0x1p63, -0x1p63, -9.3e18, 1.8e19, 0x1p64, 2e19, 3e38, -3e38,
      1e300, -1e300, 1e-6, -1e-6, 1e-3};
  static const int64_t in[] = {
      0, 1, -1, 2, -2, 100, -100, 127, 128, -128, -129, 255, 256, 32767,
      32768, -32768, -32769, 65504, 65519, 65520, 65535, 65536, -65520,
      16777217, INT32_MAX, INT32_MIN, (int64_t)UINT32_MAX, INT64_C(1) << 32,
      (INT64_C(1) << 53) + 1, INT64_C(12345678901), -INT64_C(12345678901),
      INT64_MAX, INT64_MIN, INT64_MIN + 1, 0x7F7F7F7F7F7F7F7F, 0x00FFFF7FFFFF8001,
      -0x0123456789ABCDEF, 2147483520, 2147483584, -2147483584};
  int k = 0;
  if (is_fp(t))
    for (size_t i = 0; i < sizeof fl / sizeof *fl; i++) v[k++] = fval(t, fl[i]);
  else
    for (size_t i = 0; i < sizeof in / sizeof *in; i++) v[k++] = nxv_test_wrap(t, (uint64_t)in[i]);
  for (; k < NCONV; k++)
    v[k] = !is_fp(t) ? nxv_test_wrap(t, test_rand_u64(r) >> (test_rand_u64(r) % 64))
           : fval(t, coin(r, 2) ? uni(r, -300, 300) : sgn(r) * logu(r, 1e-3, 1e20));
  return k;
}

NXV_TEST(types, convert) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0xC0417;
  for (int fi = 0; fi < NREAL; fi++) {
    nxv_dtype from = (nxv_dtype)fi;
    if (!usable(d, from)) continue;
    val a[NCONV], e[NCONV];
    int n = conv_inputs(from, &r, a);
    nxv_tensor *ta = upload(d, from, (size_t)n, a, false);
    if (!ta) continue;
    const int64_t shape[1] = {n};
    nxv_view va = {ta, 0, NULL};
    for (int ti = 0; ti < NREAL; ti++) {
      nxv_dtype to = (nxv_dtype)ti;
      if (!nxv_convert_supported(d, to)) continue;
      for (int i = 0; i < n; i++) e[i] = ref_convert(from, to, a[i]);
      char tag[64];
      snprintf(tag, sizeof tag, "convert %s -> %s", nxv_dtype_name(from),
               nxv_dtype_name(to));
      nxv_tensor *out = NULL;
      nxv_status st = nxv_convert(d, to, 1, shape, &va, &out);
      check_out(tag, to, result(st, out, tag), (size_t)n, e, EXACT, NULL, from, a, NULL);
    }
    nxv_tensor_release(ta);
  }
  nxv_device_release(d);
}

/* Conversions with paths of their own where the input is aligned: to a
 * wider type, 16 bytes of results per thread (8-bit inputs to 16-bit
 * types, real inputs to 64-bit ones), and from or to bf16, 4 elements per
 * thread: every size from 0 to 40 and a few larger odd ones, each read from
 * offsets 0 to 9 of its buffer (aligned for those paths or not), and a
 * broadcast scalar; compared bit for bit with the CPU conversion. */
NXV_TEST(types, convert_sizes_and_offsets) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  static const nxv_dtype pairs[][2] = {
      {NXV_U8, NXV_F16}, {NXV_S8, NXV_BF16}, {NXV_S8, NXV_U16}, {NXV_U8, NXV_S16},
      {NXV_U8, NXV_F64}, {NXV_S16, NXV_S64}, {NXV_F32, NXV_F64}, {NXV_S32, NXV_U64},
      {NXV_BF16, NXV_F64}, {NXV_U32, NXV_S64}, {NXV_BF16, NXV_F32}, {NXV_F32, NXV_BF16},
      {NXV_F16, NXV_BF16}, {NXV_BF16, NXV_F16}, {NXV_BF16, NXV_S32}, {NXV_S32, NXV_BF16},
      {NXV_BF16, NXV_U8}};
  enum { MAXN = 1100, OFFS = 10 };
  static val in[MAXN + OFFS], e[MAXN];
  uint64_t r = 0x51DE;
  for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
    nxv_dtype from = pairs[p][0], to = pairs[p][1];
    if (!usable(d, from) || !nxv_convert_supported(d, to)) continue;
    val c[NCONV];
    int nc = conv_inputs(from, &r, c);
    for (size_t i = 0; i < MAXN + OFFS; i++) in[i] = c[test_rand_u64(&r) % (uint64_t)nc];
    nxv_tensor *src = upload(d, from, MAXN + OFFS, in, false);
    if (!src) continue;
    static const int64_t big[] = {255, 1023, 1031, 1097};
    for (int k = 0; k < 41 + 4; k++) {
      int64_t n = k <= 40 ? k : big[k - 41];
      for (int64_t off = 0; off < OFFS; off++) {
        for (int64_t i = 0; i < n; i++) e[i] = ref_convert(from, to, in[off + i]);
        char tag[96];
        snprintf(tag, sizeof tag, "convert %s -> %s [%lld] at offset %lld", nxv_dtype_name(from),
                 nxv_dtype_name(to), (long long)n, (long long)off);
        const int64_t shape[1] = {n}, one[1] = {1};
        nxv_view v = {src, off, one};
        nxv_tensor *out = NULL;
        nxv_status st = nxv_convert(d, to, 1, shape, &v, &out);
        check_out(tag, to, result(st, out, tag), (size_t)n, e, EXACT, NULL, from, in + off,
                  NULL);
      }
      /* A broadcast scalar (stride 0). */
      const int64_t shape[1] = {n}, zero[1] = {0};
      nxv_view vs = {src, 3, zero};
      for (int64_t i = 0; i < n; i++) e[i] = ref_convert(from, to, in[3]);
      char tag[96];
      snprintf(tag, sizeof tag, "convert %s -> %s [%lld] broadcast", nxv_dtype_name(from),
               nxv_dtype_name(to), (long long)n);
      nxv_tensor *out = NULL;
      nxv_status st = nxv_convert(d, to, 1, shape, &vs, &out);
      check_out(tag, to, result(st, out, tag), (size_t)n, e, EXACT, NULL, from, NULL, NULL);
    }
    nxv_tensor_release(src);
  }
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Binary ops with operands of two types                                     */
/* ------------------------------------------------------------------------ */

/* Whether nxv_binary takes float type t with an operand of type u: every
 * integer type, and the float types narrower than t (include/nxv.h). */
static bool mixed_pair(nxv_dtype t, nxv_dtype u) {
  if (t <= NXV_U64) {
    /* An integer t: u an integer type all of whose values t holds. */
    if (u > NXV_U64 || u == t || (is_sint(u) && !is_sint(t))) return false;
    return nxv_dtype_size(t) > nxv_dtype_size(u);
  }
  if (!is_fp(t) || u >= t) return false;
  return !is_fp(u) || t >= NXV_F32;
}

/* An operand of type u for mixed op: moderate values for the ops whose
 * reference needs them (remainder and atan2: integers within +-100 and
 * floats within +-100; pow: within +-4, as base or exponent), else
 * conversion inputs of every magnitude. */
static val rnd_mixed_u(uint64_t *r, nxv_dtype u, nxv_binary_op op, size_t i, const val *wide) {
  int64_t lim = op == NXV_POW ? 4 : 100;
  if (op != NXV_REM && op != NXV_ATAN2 && op != NXV_POW) return wide[i % NCONV];
  if (is_fp(u)) return fval(u, coin(r, 8) ? 0.0 : uni(r, -(double)lim, (double)lim));
  int64_t x = (int64_t)(test_rand_u64(r) % (uint64_t)(2 * lim + 1)) - (is_sint(u) ? lim : 0);
  return nxv_test_wrap(u, (uint64_t)x);
}

/* The device's own two steps for a op b with one operand of type u: that
 * operand converted to t (nxv_convert), then the op in t; NULL after a
 * failed CHECK. x is the u operand's view, y the t one's. */
static nxv_tensor *two_step(nxv_device *d, nxv_binary_op op, nxv_dtype t, uint32_t rank,
                            const int64_t *shape, const nxv_view *x, const nxv_view *y,
                            bool u_is_a, const char *tag) {
  nxv_tensor *cv = NULL, *out = NULL;
  nxv_status st = nxv_convert(d, t, rank, shape, x, &cv);
  if (!result(st, cv, tag)) return NULL;
  nxv_view vc = {cv, 0, NULL};
  st = nxv_binary(d, op, rank, shape, u_is_a ? &vc : y, u_is_a ? y : &vc, &out);
  nxv_tensor_release(cv);
  return result(st, out, tag);
}

/* Downloads n elements of type t into vals (decoded). */
static bool download_vals(nxv_tensor *x, nxv_dtype t, size_t n, val *vals) {
  if (!x) return false;
  void *h = test_xcalloc(n ? n : 1, nxv_dtype_size(t));
  nxv_status st = nxv_tensor_download(x, 0, n, h);
  CHECK_OK(st);
  for (size_t i = 0; st == NXV_OK && i < n; i++) vals[i] = nxv_test_decode(t, load_raw(t, h, i));
  free(h);
  nxv_tensor_release(x);
  return st == NXV_OK;
}

/* a op b over N elements with one operand of type u, the result of type t:
 * the u operand as b, as a, as a broadcast scalar b, read backwards as a
 * (the strided variant), as a column broadcast down a [13, 17] b, and at
 * rank 0 and with no elements. Each result is checked against the CPU
 * reference (the u operand converted to t, then the op) and bit for bit
 * against the device's own two steps (nxv_convert, then nxv_binary). */
static void run_mixed(nxv_device *d, nxv_dtype t, nxv_dtype u, nxv_binary_op op,
                      uint64_t *r) {
  static val uv[N], tv[N], uc[N], e[N], e2[N], got[N], wide[NCONV];
  static double abs_tol[N];
  conv_inputs(u, r, wide);
  for (size_t i = 0; i < N; i++) {
    uv[i] = rnd_mixed_u(r, u, op, i, wide);
    uc[i] = ref_convert(u, t, uv[i]);
  }
  int ulps = binary_ulps(t, op);
  for (int side = 0; side < 2; side++) {
    bool u_is_a = side == 0;
    for (size_t i = 0; i < N; i++)
      tv[i] = is_fp(t) ? rnd_binary_fp(r, t, op, u_is_a ? 1 : 0) : rnd_int(r, t);
    nxv_tensor *tu = upload(d, u, N, uv, false), *tur = upload(d, u, N, uv, true),
               *tt = upload(d, t, N, tv, false);
    if (!tu || !tur || !tt) {
      nxv_tensor_release(tu);
      nxv_tensor_release(tur);
      nxv_tensor_release(tt);
      continue;
    }
    const int64_t shape[1] = {N}, zero[1] = {0}, back[1] = {-1};
    const int64_t s2[2] = {13, 17}, col[2] = {1, 0}, rows[2] = {17, 1};
    nxv_view vu = {tu, 0, NULL}, vus = {tu, 7, zero}, vur = {tur, N - 1, back},
             vt = {tt, 0, NULL}, vt2 = {tt, 0, rows}, vucol = {tu, 11, col},
             vu0 = {tu, 5, NULL},
             vt0 = {tt, 9, NULL};
    struct {
      const char *name;
      uint32_t rank;
      const int64_t *shape;
      const nxv_view *x; /* the u operand */
      const nxv_view *y; /* the t operand */
      size_t n;
    } runs[6] = {{"contiguous", 1, shape, &vu, &vt, N},
                 {"broadcast scalar", 1, shape, &vus, &vt, N},
                 {"reversed", 1, shape, &vur, &vt, N},
                 {"column broadcast", 2, s2, &vucol, &vt2, 13 * 17},
                 {"rank 0", 0, NULL, &vu0, &vt0, 1},
                 {"empty", 1, zero, &vu, &vt, 0}};
    for (int k = 0; k < 6; k++) {
      char tag[128];
      snprintf(tag, sizeof tag, "binary %s %s (%s operand %c %s)", nxv_binary_op_name(op),
               nxv_dtype_name(t), nxv_dtype_name(u), u_is_a ? 'a' : 'b', runs[k].name);
      size_t n = runs[k].n;
      int64_t idx[2] = {0, 0};
      for (size_t i = 0; i < n; i++) {
        size_t iu, it;
        switch (k) {
          case 1: iu = 7; it = i; break;
          case 2: iu = i; it = i; break; /* tur holds uv reversed */
          case 3: iu = 11 + (size_t)idx[0]; it = i; break;
          case 4: iu = 5; it = 9; break;
          default: iu = it = i; break;
        }
        if (k == 3 && ++idx[1] == 17) {
          idx[1] = 0;
          idx[0]++;
        }
        val x = uc[iu], y = tv[it];
        e[i] = u_is_a ? ref_binary(op, t, x, y) : ref_binary(op, t, y, x);
        abs_tol[i] = 0;
      }
      const nxv_view *a = u_is_a ? runs[k].x : runs[k].y, *b = u_is_a ? runs[k].y : runs[k].x;
      nxv_tensor *out = NULL;
      nxv_status st = nxv_binary(d, op, runs[k].rank, runs[k].shape, a, b, &out);
      if (result(st, out, tag)) {
        bool ok = nxv_tensor_dtype(out) == t && nxv_tensor_count(out) == n;
        CHECK_MSG(ok, "%s: result is %llu %s", tag, (unsigned long long)nxv_tensor_count(out),
                  nxv_dtype_name(nxv_tensor_dtype(out)));
        nxv_tensor_retain(out);
        check_out(tag, t, out, n, e, ulps, abs_tol, t, NULL, NULL);
        if (ok && download_vals(out, t, n, got)) {
          if (download_vals(two_step(d, op, t, runs[k].rank, runs[k].shape, runs[k].x,
                                     runs[k].y, u_is_a, tag),
                            t, n, e2)) {
            size_t bad = 0;
            for (size_t i = 0; i < n; i++) {
              uint64_t g = nxv_test_encode(t, got[i]), w = nxv_test_encode(t, e2[i]);
              if (g == w || (is_fp(t) && isnan(got[i].f) && isnan(e2[i].f))) continue;
              if (++bad <= MAX_REPORT)
                fprintf(stderr, "  %s [%zu]: 0x%llx, two steps give 0x%llx\n", tag, i,
                        (unsigned long long)g, (unsigned long long)w);
            }
            CHECK_MSG(bad == 0, "%s: %zu of %zu elements differ from the two steps", tag,
                      bad, n);
          }
        } else if (ok) {
          CHECK_MSG(false, "%s: download failed", tag);
        }
      }
    }
    nxv_tensor_release(tu);
    nxv_tensor_release(tur);
    nxv_tensor_release(tt);
  }
}

/* Every pair nxv_binary takes with operands of two types: subtract and
 * divide (the operand order matters) on each, and the shifts on the
 * integer pairs; every op on four float pairs and four integer pairs;
 * pairs outside the set are refused. */
NXV_TEST(types, binary_mixed) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0x313ED;
  for (int ti = 0; ti <= NXV_F64; ti++) {
    nxv_dtype t = (nxv_dtype)ti;
    if (!usable(d, t)) continue;
    for (int ui = 0; ui < NREAL; ui++) {
      nxv_dtype u = (nxv_dtype)ui;
      if (!mixed_pair(t, u) || !nxv_convert_supported(d, u)) continue;
      bool all = (t == NXV_F32 && u == NXV_U8) || (t == NXV_F16 && u == NXV_S32) ||
                 (t == NXV_BF16 && u == NXV_U64) || (t == NXV_F64 && u == NXV_F32) ||
                 (t == NXV_S64 && u == NXV_S32) || (t == NXV_S32 && u == NXV_U8) ||
                 (t == NXV_U16 && u == NXV_U8) || (t == NXV_S16 && u == NXV_S8);
      for (int op = 0; op < NXV_BINARY_OP_COUNT; op++) {
        if (!nxv_binary_supported(d, (nxv_binary_op)op, t)) continue;
        bool shift = !is_fp(t) && (op == NXV_LEFT_SHIFT || op == NXV_RIGHT_SHIFT);
        if (all || shift || op == NXV_SUB || op == NXV_DIV)
          run_mixed(d, t, u, (nxv_binary_op)op, &r);
      }
    }
  }
  /* Pairs without a mixed kernel: refused, naming both types. */
  static const nxv_dtype bad[][2] = {{NXV_S32, NXV_U32}, {NXV_F16, NXV_BF16},
                                     {NXV_BF16, NXV_F16}, {NXV_S64, NXV_U64},
                                     {NXV_C64, NXV_F32}, {NXV_U8, NXV_S8},
                                     {NXV_U32, NXV_S16}, {NXV_S16, NXV_U16}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (!nxv_convert_supported(d, bad[i][0]) || !nxv_convert_supported(d, bad[i][1])) continue;
    val v[4] = {{.u = 0}, {.u = 0}, {.u = 0}, {.u = 0}};
    nxv_tensor *x = upload(d, bad[i][0], 4, v, false), *y = upload(d, bad[i][1], 4, v, false);
    if (x && y) {
      const int64_t shape[1] = {4};
      nxv_view vx = {x, 0, NULL}, vy = {y, 0, NULL};
      nxv_tensor *out = NULL;
      EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_binary(d, NXV_ADD, 1, shape, &vx, &vy, &out));
      CHECK(strstr(nxv_last_error(), nxv_dtype_name(bad[i][0])) != NULL);
      CHECK(strstr(nxv_last_error(), nxv_dtype_name(bad[i][1])) != NULL);
      EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_binary(d, NXV_ADD, 1, shape, &vy, &vx, &out));
    }
    nxv_tensor_release(x);
    nxv_tensor_release(y);
  }
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Comparisons and select                                                    */
/* ------------------------------------------------------------------------ */

static bool ref_compare(nxv_compare_op op, nxv_dtype t, val a, val b) {
  int c; /* -1, 0, 1; 2 unordered */
  if (is_fp(t))
    c = isnan(a.f) || isnan(b.f) ? 2 : a.f < b.f ? -1 : a.f > b.f;
  else if (is_sint(t))
    c = a.s < b.s ? -1 : a.s > b.s;
  else
    c = a.u < b.u ? -1 : a.u > b.u;
  /* Logical ops: every non-zero value, NaN too, is true. */
  bool za = is_fp(t) ? !isnan(a.f) && a.f == 0 : a.u == 0;
  bool zb = is_fp(t) ? !isnan(b.f) && b.f == 0 : b.u == 0;
  switch (op) {
    case NXV_LESS: return c == -1;
    case NXV_LESS_EQUAL: return c == -1 || c == 0;
    case NXV_EQUAL: return c == 0;
    case NXV_NOT_EQUAL: return c != 0;
    case NXV_GREATER: return c == 1;
    case NXV_GREATER_EQUAL: return c == 0 || c == 1;
    case NXV_LOGICAL_AND: return !za && !zb;
    case NXV_LOGICAL_OR: return !za || !zb;
    case NXV_LOGICAL_XOR: return za != zb;
    default: return false;
  }
}

/* Random value of t for compare/select: specials, integers, halves. */
static val rnd_any(uint64_t *r, nxv_dtype t) {
  if (!is_fp(t)) return rnd_int(r, t);
  val sp[16];
  int ns = specials(t, sp);
  if (coin(r, 6)) return sp[test_rand_u64(r) % (uint64_t)ns];
  return fval(t, coin(r, 3) ? nearbyint(uni(r, -40, 40)) / 2 : uni(r, -1000, 1000));
}

static void run_compare_select(nxv_device *d, nxv_dtype t, uint64_t *r) {
  static val a[N], b[N], p[N], e[N], sel[N], sel_s[N];
  val sp[16];
  int ns = specials(t, sp);
  size_t k = 0;
  for (int i = 0; i < ns; i++)
    for (int j = 0; j < ns; j++) {
      a[k] = sp[i];
      b[k++] = sp[j];
    }
  for (; k < N; k++) {
    a[k] = rnd_any(r, t);
    b[k] = coin(r, 3) ? a[k] : rnd_any(r, t);
  }
  nxv_tensor *ta = upload(d, t, N, a, false), *tb = upload(d, t, N, b, false),
             *tbr = upload(d, t, N, b, true);
  const int64_t shape[1] = {N}, zero[1] = {0}, back[1] = {-1};
  static const nxv_compare_op ops[4] = {NXV_LESS, NXV_EQUAL, NXV_NOT_EQUAL,
                                        NXV_GREATER_EQUAL};
  if (ta && tb && tbr) {
    nxv_view va = {ta, 0, NULL}, vb = {tb, 0, NULL}, vbr = {tbr, N - 1, back};
    for (int o = 0; o < 4; o++) {
      for (size_t i = 0; i < N; i++) e[i].u = ref_compare(ops[o], t, a[i], b[i]);
      for (int run = 0; run < 2; run++) {
        char tag[96];
        snprintf(tag, sizeof tag, "compare %s %s (%s)", nxv_compare_op_name(ops[o]),
                 nxv_dtype_name(t), run ? "reversed b" : "contiguous");
        nxv_tensor *out = NULL;
        nxv_status st = nxv_compare(d, ops[o], 1, shape, &va, run ? &vbr : &vb, &out);
        check_out(tag, NXV_U8, result(st, out, tag), N, e, EXACT, NULL, t, a, b);
      }
      /* b[k] as an immediate (nxv_compare_scalar): on the right of a, on
       * the left of b reversed (the strided variant). */
      static val sv[N], es_[N], ef[N], br[N];
      const size_t ks = 7;
      uint8_t value[8] = {0};
      store_raw(t, value, 0, nxv_test_encode(t, b[ks]));
      for (size_t i = 0; i < N; i++) {
        sv[i] = b[ks];
        br[i] = b[N - 1 - i];
        es_[i].u = ref_compare(ops[o], t, a[i], b[ks]);
        ef[i].u = ref_compare(ops[o], t, b[ks], br[i]);
      }
      nxv_view vbrev = {tb, N - 1, back};
      for (int run = 0; run < 2; run++) {
        char tag[96];
        snprintf(tag, sizeof tag, "compare %s %s (%s)", nxv_compare_op_name(ops[o]),
                 nxv_dtype_name(t), run ? "immediate a, reversed b" : "immediate b");
        nxv_tensor *out = NULL;
        nxv_status st = nxv_compare_scalar(d, ops[o], 1, shape, run ? &vbrev : &va, run == 1,
                                           value, &out);
        check_out(tag, NXV_U8, result(st, out, tag), N, run ? ef : es_, EXACT, NULL, t,
                  run ? sv : a, run ? br : sv);
      }
    }
  }
  /* select: pred any byte; on_false also as a broadcast scalar */
  static const uint8_t preds[5] = {0, 1, 2, 255, 0};
  for (size_t i = 0; i < N; i++) {
    p[i].u = coin(r, 3) ? test_rand_u64(r) & 0xFF : preds[test_rand_u64(r) % 5];
    sel[i] = p[i].u ? a[i] : b[i];
    sel_s[i] = p[i].u ? a[i] : b[7];
  }
  nxv_tensor *tp = upload(d, NXV_U8, N, p, false), *tpr = upload(d, NXV_U8, N, p, true);
  if (ta && tb && tp && tpr) {
    nxv_view vp = {tp, 0, NULL}, vpr = {tpr, N - 1, back}, va = {ta, 0, NULL},
             vb = {tb, 0, NULL}, vbs = {tb, 7, zero};
    for (int run = 0; run < 2; run++) {
      char tag[96];
      snprintf(tag, sizeof tag, "select %s (%s)", nxv_dtype_name(t),
               run ? "reversed pred, scalar on_false" : "contiguous");
      nxv_tensor *out = NULL;
      nxv_status st = nxv_select(d, 1, shape, run ? &vpr : &vp, &va,
                                 run ? &vbs : &vb, &out);
      check_out(tag, t, result(st, out, tag), N, run ? sel_s : sel, EXACT, NULL,
                t, a, b);
    }
  }
  nxv_tensor_release(ta);
  nxv_tensor_release(tb);
  nxv_tensor_release(tbr);
  nxv_tensor_release(tp);
  nxv_tensor_release(tpr);
}

NXV_TEST(types, compare_select) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0xC3E9;
  for (int ti = 0; ti < NREAL; ti++) {
    nxv_dtype t = (nxv_dtype)ti;
    if (!usable(d, t)) continue;
    CHECK_MSG(nxv_mask_type_supported(d, t), "compare/select on %s unsupported",
              nxv_dtype_name(t));
    run_compare_select(d, t, &r);
  }
  nxv_device_release(d);
}

/* compare and select on dense operands, through the paths that take 4
 * elements or 16 bytes per thread and around them: every real type and
 * every comparison, lengths on both sides of each group size, each
 * operand at offsets that keep or break the alignments those paths need,
 * broadcast scalars and an immediate. Comparisons against the CPU, select
 * bit for bit. */
NXV_TEST(types, compare_select_wide) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0xC3EA;
  enum { M = 1031, OFF = 20, CFG = 13 };
  static const size_t lens[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, M};
  /* Offsets of a, b and the predicate; then a, b, the predicate as a
   * broadcast scalar (element 3), and (compare) b as an immediate. */
  static const int offs[CFG][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {2, 2, 2},
                                   {4, 4, 4}, {8, 8, 8}, {16, 16, 16}, {5, 3, 7},
                                   {12, 4, 8}, {-1, 0, 0}, {0, -1, 0}, {0, 0, -1}};
  static val a[M + OFF], b[M + OFF], p[M + OFF];
  static uint8_t got8[M];
  for (int ti = 0; ti < NREAL; ti++) {
    nxv_dtype t = (nxv_dtype)ti;
    if (!usable(d, t)) continue;
    for (size_t i = 0; i < M + OFF; i++) {
      a[i] = rnd_any(&r, t);
      b[i] = coin(&r, 3) ? a[i] : rnd_any(&r, t);
      p[i].u = coin(&r, 2) ? 0 : 1 + test_rand_u64(&r) % 255;
    }
    nxv_tensor *ta = upload(d, t, M + OFF, a, false), *tb = upload(d, t, M + OFF, b, false),
               *tp = upload(d, NXV_U8, M + OFF, p, false);
    void *h = test_xcalloc(M, nxv_dtype_size(t));
    for (size_t li = 0; ta && tb && tp && li < sizeof lens / sizeof lens[0]; li++) {
      size_t n = lens[li];
      const int64_t shape[1] = {(int64_t)n}, zero[1] = {0}, one[1] = {1};
      for (int c = 0; c < CFG; c++) {
        bool sa = c == 10, sb = c == 11, sp = c == 12;
        size_t oa = sa ? 3 : (size_t)offs[c][0], ob = sb ? 3 : (size_t)offs[c][1],
               op_ = sp ? 3 : (size_t)offs[c][2];
        nxv_view va = {ta, (int64_t)oa, sa ? zero : one}, vb = {tb, (int64_t)ob, sb ? zero : one},
                 vp = {tp, (int64_t)op_, sp ? zero : one};
        nxv_compare_op cop = (nxv_compare_op)((li * CFG + (size_t)c) % NXV_COMPARE_OP_COUNT);
        char tag[128];
        snprintf(tag, sizeof tag, "%s %s, %zu elements, config %d", nxv_compare_op_name(cop),
                 nxv_dtype_name(t), n, c);
        for (int imm = 0; imm < (c == 11 ? 2 : 1); imm++) {
          nxv_tensor *out = NULL;
          uint8_t raw[8] = {0};
          store_raw(t, raw, 0, nxv_test_encode(t, b[3]));
          nxv_status st = imm ? nxv_compare_scalar(d, cop, 1, shape, &va, false, raw, &out)
                              : nxv_compare(d, cop, 1, shape, &va, &vb, &out);
          if (result(st, out, tag)) {
            CHECK_OK(nxv_tensor_download(out, 0, n, got8));
            size_t bad = 0;
            for (size_t i = 0; i < n; i++) {
              bool want = ref_compare(cop, t, a[sa ? oa : oa + i], b[sb ? ob : ob + i]);
              if (got8[i] != (want ? 1 : 0) && ++bad <= MAX_REPORT)
                fprintf(stderr, "  %s%s [%zu]: %u, expected %d\n", tag,
                        imm ? " (immediate b)" : "", i, got8[i], want);
            }
            CHECK_MSG(bad == 0, "%s%s: %zu of %zu results wrong", tag,
                      imm ? " (immediate b)" : "", bad, n);
            nxv_tensor_release(out);
          }
        }
        snprintf(tag, sizeof tag, "select %s, %zu elements, config %d", nxv_dtype_name(t), n, c);
        nxv_tensor *out = NULL;
        nxv_status st = nxv_select(d, 1, shape, &vp, &va, &vb, &out);
        if (result(st, out, tag)) {
          CHECK_OK(nxv_tensor_download(out, 0, n, h));
          size_t bad = 0;
          for (size_t i = 0; i < n; i++) {
            val w = p[sp ? op_ : op_ + i].u ? a[sa ? oa : oa + i] : b[sb ? ob : ob + i];
            uint64_t g = load_raw(t, h, i), e = nxv_test_encode(t, w);
            if (g != e && ++bad <= MAX_REPORT)
              fprintf(stderr, "  %s [%zu]: 0x%llx, expected 0x%llx\n", tag, i,
                      (unsigned long long)g, (unsigned long long)e);
          }
          CHECK_MSG(bad == 0, "%s: %zu of %zu elements wrong", tag, bad, n);
          nxv_tensor_release(out);
        }
      }
    }
    free(h);
    nxv_tensor_release(ta);
    nxv_tensor_release(tb);
    nxv_tensor_release(tp);
  }
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Reductions                                                                */
/* ------------------------------------------------------------------------ */

#define RR 6  /* rows */
#define RC 67 /* columns: the row reduction (k >= 64) takes the tree path */

static val rnd_reduce(uint64_t *r, nxv_dtype t, nxv_reduce_op op) {
  if (!is_fp(t)) { /* odd factors keep a wrapped product nonzero */
    val v = rnd_int(r, t);
    return op == NXV_REDUCE_PRODUCT ? nxv_test_wrap(t, v.u | 1) : v;
  }
  switch (op) {
    case NXV_REDUCE_SUM: return fval(t, uni(r, -10, 10));
    case NXV_REDUCE_PRODUCT: return fval(t, sgn(r) * logu(r, 0.8, 1.25));
    default: return fval(t, uni(r, -100, 100));
  }
}

/* Reduces a (RR x RC of t) over axis: the expected values and tolerances
 * of the outputs. Integers wrap in the type. Floats: the long double result
 * rounded to the type, within two ulps of the type plus twice the error
 * bound of k terms accumulated in any order in the compute type
 * (k * eps * sum |terms|; f16/bf16 accumulate in f32). */
static size_t ref_reduce(nxv_reduce_op op, nxv_dtype t, const val *a, int axis,
                         val *e, double *tol) {
  size_t nout = axis ? RR : RC, k = axis ? RC : RR;
  for (size_t o = 0; o < nout; o++) {
    uint64_t acc = op == NXV_REDUCE_PRODUCT ? 1 : 0;
    long double f = op == NXV_REDUCE_PRODUCT ? 1 : 0, mag = 0;
    bool nan = false, first = true;
    for (size_t j = 0; j < k; j++) {
      val v = a[axis ? o * RC + j : j * RC + o];
      if (is_fp(t)) {
        nan |= isnan(v.f);
        if (op == NXV_REDUCE_SUM) {
          f += v.f;
          mag += fabsl(v.f);
        } else if (op == NXV_REDUCE_PRODUCT) {
          f *= v.f;
        } else if (first || (op == NXV_REDUCE_MAX ? v.f > f : v.f < f)) {
          f = v.f;
        }
      } else if (op == NXV_REDUCE_SUM) {
        acc += v.u;
      } else if (op == NXV_REDUCE_PRODUCT) {
        acc *= v.u;
      } else {
        bool less = is_sint(t) ? v.s < (int64_t)acc : v.u < acc;
        if (first || (op == NXV_REDUCE_MAX ? !less && v.u != acc : less)) acc = v.u;
      }
      first = false;
    }
    if (!is_fp(t)) {
      e[o] = nxv_test_wrap(t, acc);
      tol[o] = 0;
      continue;
    }
    e[o] = fval(t, nan ? NAN : (double)f);
    if (op == NXV_REDUCE_PRODUCT) mag = fabsl(f);
    tol[o] = op <= NXV_REDUCE_PRODUCT
                 ? 2 * ulp_of(t, fabs(e[o].f)) + (double)(k * eps_acc(t) * 2 * mag)
                 : 0;
  }
  return nout;
}

static void run_reduce(nxv_device *d, nxv_dtype t, nxv_reduce_op op, uint64_t *r) {
  val a[RR * RC], e[RC];
  double tol[RC];
  for (size_t i = 0; i < RR * RC; i++) a[i] = rnd_reduce(r, t, op);
  if (op >= NXV_REDUCE_MAX) { /* extremes; for floats NaN in row 2, -inf in row 4 */
    val sp[16];
    int ns = specials(t, sp);
    for (int i = 0; i < ns; i++)
      if (!is_fp(t) || i < 2) a[(size_t)i * 11 % (RR * RC)] = sp[i];
    if (is_fp(t)) {
      a[2 * RC + 30] = fval(t, NAN);
      a[4 * RC + 3] = fval(t, -INFINITY);
    }
  } else if (!is_fp(t)) {
    a[5] = nxv_test_int_min(t);
    a[RC + 9] = nxv_test_int_max(t);
  }
  nxv_tensor *ta = upload(d, t, RR * RC, a, false);
  if (!ta) return;
  const int64_t shape[2] = {RR, RC};
  nxv_view va = {ta, 0, NULL};
  for (int axis = 0; axis < 2; axis++) {
    size_t n = ref_reduce(op, t, a, axis, e, tol);
    char tag[96];
    snprintf(tag, sizeof tag, "reduce %s %s over axis %d of [%d,%d]",
             nxv_reduce_op_name(op), nxv_dtype_name(t), axis, RR, RC);
    nxv_tensor *out = NULL;
    nxv_status st = nxv_reduce(d, op, 2, shape, &va, 1u << axis, &out);
    check_out(tag, t, result(st, out, tag), n, e, is_fp(t) ? 0 : EXACT,
              is_fp(t) ? tol : NULL, t, NULL, NULL);
  }
  nxv_tensor_release(ta);
}

NXV_TEST(types, reduce) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0x5E0CE;
  for (int ti = 0; ti < NREAL; ti++) {
    nxv_dtype t = (nxv_dtype)ti;
    if (!usable(d, t)) continue;
    for (int op = 0; op < NXV_REDUCE_OP_COUNT; op++)
      run_reduce(d, t, (nxv_reduce_op)op, &r);
  }
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Matmul, iota, fill                                                        */
/* ------------------------------------------------------------------------ */

#define MM 5
#define MK 7
#define MN 3

/* (MM x MK) * (MK x MN), B stored row-major and transposed. */
static void run_matmul(nxv_device *d, nxv_dtype t, uint64_t *r) {
  val a[MM * MK], b[MK * MN], bt[MN * MK], e[MM * MN];
  double tol[MM * MN];
  for (int i = 0; i < MM * MK; i++)
    a[i] = is_fp(t) ? fval(t, uni(r, -4, 4)) : nxv_test_wrap(t, test_rand_u64(r));
  for (int i = 0; i < MK * MN; i++)
    b[i] = is_fp(t) ? fval(t, uni(r, -4, 4)) : nxv_test_wrap(t, test_rand_u64(r));
  for (int p = 0; p < MK; p++)
    for (int j = 0; j < MN; j++) bt[j * MK + p] = b[p * MN + j];
  for (int i = 0; i < MM; i++)
    for (int j = 0; j < MN; j++) {
      uint64_t acc = 0;
      long double f = 0, mag = 0;
      for (int p = 0; p < MK; p++) {
        val x = a[i * MK + p], y = b[p * MN + j];
        if (!is_fp(t)) {
          acc += x.u * y.u;
          continue;
        }
        f += (long double)x.f * y.f;
        mag += fabsl((long double)x.f * y.f);
      }
      e[i * MN + j] = is_fp(t) ? fval(t, (double)f) : nxv_test_wrap(t, acc);
      tol[i * MN + j] =
          is_fp(t) ? 2 * ulp_of(t, (double)f) + (double)(MK * eps_acc(t) * mag) : 0;
    }
  nxv_tensor *ta = upload(d, t, MM * MK, a, false), *tb = upload(d, t, MK * MN, b, false),
             *tbt = upload(d, t, MN * MK, bt, false);
  if (ta && tb && tbt) {
    for (int tr = 0; tr < 2; tr++) {
      nxv_matmul_desc m = {1, MM, MN, MK, ta, 0, {0, MK, 1}, tb, 0, {0, MN, 1}};
      if (tr) {
        m.b = tbt;
        m.b_strides[1] = 1;
        m.b_strides[2] = MK;
      }
      char tag[96];
      snprintf(tag, sizeof tag, "matmul %s %dx%d * %dx%d%s", nxv_dtype_name(t), MM,
               MK, MK, MN, tr ? " (B transposed)" : "");
      nxv_tensor *out = NULL;
      nxv_status st = nxv_matmul(d, &m, &out);
      check_out(tag, t, result(st, out, tag), MM * MN, e, is_fp(t) ? 0 : EXACT,
                is_fp(t) ? tol : NULL, t, NULL, NULL);
    }
  }
  nxv_tensor_release(ta);
  nxv_tensor_release(tb);
  nxv_tensor_release(tbt);
}

static void run_iota_fill(nxv_device *d, nxv_dtype t, uint64_t *r) {
  static val e[N];
  const int64_t shape[2] = {3, 70};
  for (uint32_t axis = 0; axis < 2; axis++) {
    for (size_t i = 0; i < 3 * 70; i++) {
      uint64_t idx = axis ? i % 70 : i / 70;
      e[i] = is_fp(t) ? fval(t, (double)idx) : nxv_test_wrap(t, idx);
    }
    char tag[64];
    snprintf(tag, sizeof tag, "iota %s [3,70] axis %u", nxv_dtype_name(t), axis);
    nxv_tensor *out = NULL;
    nxv_status st = nxv_iota(d, t, 2, shape, axis, &out);
    check_out(tag, t, result(st, out, tag), 3 * 70, e, EXACT, NULL, t, NULL, NULL);
  }
  val sp[16];
  specials(t, sp);
  val fills[3] = {sp[0], is_fp(t) ? fval(t, NAN) : sp[1], rnd_any(r, t)};
  static const size_t counts[3] = {N, 3, 1};
  for (int i = 0; i < 3; i++) {
    uint64_t raw = 0; /* one element of t in its first bytes */
    store_raw(t, &raw, 0, nxv_test_encode(t, fills[i]));
    for (size_t j = 0; j < counts[i]; j++) e[j] = fills[i];
    char tag[64], buf[40];
    snprintf(tag, sizeof tag, "fill %s %zu x %s", nxv_dtype_name(t), counts[i],
             fmt(buf, sizeof buf, t, fills[i]));
    nxv_tensor *out = NULL;
    nxv_status st = nxv_fill(d, t, counts[i], &raw, &out);
    check_out(tag, t, result(st, out, tag), counts[i], e, EXACT, NULL, t, NULL, NULL);
  }
}

NXV_TEST(types, matmul_iota_fill) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0x3A73;
  for (int ti = 0; ti < NREAL; ti++) {
    nxv_dtype t = (nxv_dtype)ti;
    if (!usable(d, t)) continue;
    run_matmul(d, t, &r);
    run_iota_fill(d, t, &r);
  }
  nxv_device_release(d);
}
