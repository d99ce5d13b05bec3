/*
 * Complex type tests: c64 and c128 through every op that has complex
 * kernels (element-wise, conversions, compare, select, reductions, dot,
 * gather/scatter, iota, FFT), against a CPU reference in long double
 * complex arithmetic, plus the refusals of the ops complex types lack.
 *
 * Inputs are generated already rounded to the type, so the reference sees
 * what the device reads. A result passes per component: NaN matches NaN,
 * infinities must match exactly, finite values must lie within an
 * absolute tolerance (none for the exact ops; +0 and -0 compare equal).
 *
 * Tolerances follow the kernels' formulas, those of Elixir's Complex
 * library that Nx.BinaryBackend computes with: a multiple of the type's
 * epsilon times a scale, the magnitude of the terms the formula combines.
 * That is |result| for most ops and more where the formula cancels (sinh
 * as (e^z - e^-z) / 2, expm1 as e^z - 1, log1p as log(z + 1), pow as
 * exp(y log x), ...). The multiple is ARITH for arithmetic and TRANS for
 * the transcendental ops; DRIVER where c64 uses the driver's float
 * built-ins (pow, and every op under fast_math), whose accuracy Vulkan
 * leaves loose (sin and cos only to an absolute error: their scale then
 * includes cosh of the imaginary part). c64 unary ops on a device with
 * float64 evaluate in double and round once: they must be within an ulp
 * of the double result.
 *
 * The device poisons new op outputs with 0xFF bytes (NaN components), so
 * an element a kernel fails to write fails its check. c128 needs
 * shaderFloat64; without it the c128 runs are skipped with a note.
 */
#include <complex.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

typedef long double complex lcx;

#define N 1031      /* element-wise length */
#define MAX_REPORT 6
#define NCX 2
static const nxv_dtype kCx[NCX] = {NXV_C64, NXV_C128};

/* Error multiples, in units of the type's epsilon times an op's scale. */
#define ARITH 8.0L
#define TRANS 32.0L
#define DRIVER 4096.0L /* Vulkan's bound for atan; sin and cos: 2^-11 absolute */

static const long double kPi = 3.14159265358979323846264338327950288L;

/* ------------------------------------------------------------------------ */
/* Types and host values                                                     */
/* ------------------------------------------------------------------------ */

static bool is_cx(nxv_dtype t) { return t == NXV_C64 || t == NXV_C128; }
/* The component type of a complex type. */
static nxv_dtype part(nxv_dtype t) { return t == NXV_C64 ? NXV_F32 : NXV_F64; }
static bool single(nxv_dtype t) { return t == NXV_C64 || t == NXV_F32; }
static long double eps_t(nxv_dtype t) { return single(t) ? FLT_EPSILON : DBL_EPSILON; }
static long double tiny_t(nxv_dtype t) { return single(t) ? FLT_MIN : DBL_MIN; }

/* v rounded to the component type of t. */
static long double rpart(nxv_dtype t, long double v) {
  return single(t) ? (long double)(float)v : (long double)(double)v;
}
static lcx cround(nxv_dtype t, lcx z) {
  return CMPLXL(rpart(t, creall(z)), rpart(t, cimagl(z)));
}
/* x + y rounded to the component type of t (IEEE: one rounding). */
static long double radd(nxv_dtype t, long double x, long double y) {
  if (single(t)) return (float)x + (float)y;
  return (double)x + (double)y;
}

/* Element i of a host buffer of real type t, exactly (long double holds
 * every 64-bit integer). */
static long double rget(nxv_dtype t, const void *p, size_t i) {
  switch (t) {
    case NXV_S8: return ((const int8_t *)p)[i];
    case NXV_S16: return ((const int16_t *)p)[i];
    case NXV_S32: return ((const int32_t *)p)[i];
    case NXV_S64: return ((const int64_t *)p)[i];
    case NXV_U8: return ((const uint8_t *)p)[i];
    case NXV_U16: return ((const uint16_t *)p)[i];
    case NXV_U32: return ((const uint32_t *)p)[i];
    case NXV_U64: return ((const uint64_t *)p)[i];
    case NXV_F16: return nxv_test_f16_value(((const uint16_t *)p)[i]);
    case NXV_BF16: return nxv_test_bf16_value(((const uint16_t *)p)[i]);
    case NXV_F32: return ((const float *)p)[i];
    case NXV_F64: return ((const double *)p)[i];
    default: return NAN;
  }
}

/* Stores v as element i of real type t: integers must be in range, floats
 * round (bf16 truncates). */
static void rset(nxv_dtype t, void *p, size_t i, long double v) {
  switch (t) {
    case NXV_S8: ((int8_t *)p)[i] = (int8_t)v; break;
    case NXV_S16: ((int16_t *)p)[i] = (int16_t)v; break;
    case NXV_S32: ((int32_t *)p)[i] = (int32_t)v; break;
    case NXV_S64: ((int64_t *)p)[i] = (int64_t)v; break;
    case NXV_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case NXV_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case NXV_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case NXV_U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    case NXV_F16: ((uint16_t *)p)[i] = nxv_test_f16_bits((double)v); break;
    case NXV_BF16: ((uint16_t *)p)[i] = nxv_test_bf16_bits((float)v); break;
    case NXV_F32: ((float *)p)[i] = (float)v; break;
    case NXV_F64: ((double *)p)[i] = (double)v; break;
    default: break;
  }
}

static lcx cget(nxv_dtype t, const void *p, size_t i) {
  if (t == NXV_C64) {
    const float *f = p;
    return CMPLXL(f[2 * i], f[2 * i + 1]);
  }
  const double *f = p;
  return CMPLXL(f[2 * i], f[2 * i + 1]);
}

static void cset(nxv_dtype t, void *p, size_t i, lcx z) {
  if (t == NXV_C64) {
    float *f = p;
    f[2 * i] = (float)creall(z);
    f[2 * i + 1] = (float)cimagl(z);
  } else {
    double *f = p;
    f[2 * i] = (double)creall(z);
    f[2 * i + 1] = (double)cimagl(z);
  }
}

/* ------------------------------------------------------------------------ */
/* Random values                                                             */
/* ------------------------------------------------------------------------ */

static long double uni(uint64_t *r, double lo, double hi) {
  return test_rand_uniform(r, lo, hi);
}
/* Log-uniform in [lo, hi], 0 < lo < hi. */
static long double logu(uint64_t *r, double lo, double hi) {
  return exp(test_rand_uniform(r, log(lo), log(hi)));
}
static long double sgn(uint64_t *r) { return (test_rand_u64(r) >> 21) & 1u ? 1.0L : -1.0L; }
/* True with probability 1/n. */
static bool coin(uint64_t *r, unsigned n) { return (test_rand_u64(r) >> 9) % n == 0; }

/* Input domains. */
enum {
  D_WIDE,     /* components of any size: uniform, or 1e-4 .. 1e4 */
  D_EXP,      /* arguments of exp-like ops: uniform in [-4, 4] or small */
  D_SMALL,    /* uniform in [-10, 10] */
  D_UNIT,     /* modulus 0.8 .. 1.25, any phase (long products) */
  D_DIVISOR,  /* D_WIDE, often with a zero real or imaginary part */
  D_POW_BASE, /* uniform in [-3, 3], some negative reals and imaginaries */
  D_POW_EXP,  /* a small integer, or uniform in [-2.5, 2.5] */
};

static long double comp(uint64_t *r, int dom) {
  unsigned k = (unsigned)(test_rand_u64(r) % 20);
  if (dom == D_EXP) return k < 14 ? uni(r, -4, 4) : sgn(r) * logu(r, 1e-6, 1);
  if (dom == D_SMALL) return uni(r, -10, 10);
  return k < 13 ? uni(r, -4, 4) : sgn(r) * logu(r, 1e-4, 1e4);
}

/* A random complex of domain dom, rounded to t. One component is zero
 * now and then (the formulas branch on zero parts), never both. */
static lcx gen(uint64_t *r, nxv_dtype t, int dom) {
  lcx z;
  switch (dom) {
    case D_UNIT: {
      long double m = logu(r, 0.8, 1.25), a = uni(r, -3.14159, 3.14159);
      z = CMPLXL(m * cosl(a), m * sinl(a));
      break;
    }
    case D_DIVISOR: {
      unsigned k = (unsigned)(test_rand_u64(r) % 6);
      long double x = comp(r, D_WIDE), y = comp(r, D_WIDE);
      z = CMPLXL(k == 0 ? 0 : x, k == 1 ? 0 : y);
      break;
    }
    case D_POW_BASE: {
      unsigned k = (unsigned)(test_rand_u64(r) % 8);
      long double x = uni(r, -3, 3), y = uni(r, -3, 3);
      z = k == 0 ? CMPLXL(-fabsl(x), 0) : k == 1 ? CMPLXL(0, y) : CMPLXL(x, y);
      break;
    }
    case D_POW_EXP:
      if (coin(r, 3)) z = CMPLXL((long double)(int)(test_rand_u64(r) % 9) - 4, 0);
      else z = CMPLXL(uni(r, -2.5, 2.5), coin(r, 5) ? 0 : uni(r, -2.5, 2.5));
      break;
    default: {
      long double x = comp(r, dom), y = comp(r, dom);
      if (dom != D_SMALL && coin(r, 8)) {
        if (coin(r, 2)) x = 0;
        else y = 0;
      }
      z = CMPLXL(x, y);
      break;
    }
  }
  return cround(t, z);
}

/* ------------------------------------------------------------------------ */
/* Device helpers and checks                                                 */
/* ------------------------------------------------------------------------ */

/* Uploads n complex values as t. */
static nxv_tensor *up(nxv_device *d, nxv_dtype t, size_t n, const lcx *v) {
  void *h = test_xcalloc(n, nxv_dtype_size(t));
  for (size_t i = 0; i < n; i++) cset(t, h, i, v[i]);
  nxv_tensor *out = NULL;
  nxv_status st = nxv_tensor_upload(d, t, n, h, &out);
  free(h);
  CHECK_MSG(st == NXV_OK, "upload of %zu %s: %s", n, nxv_dtype_name(t), nxv_last_error());
  return st == NXV_OK ? out : NULL;
}

/* Uploads n real values as t (see rset). */
static nxv_tensor *up_real(nxv_device *d, nxv_dtype t, size_t n, const long double *v) {
  void *h = test_xcalloc(n, nxv_dtype_size(t));
  for (size_t i = 0; i < n; i++) rset(t, h, i, v[i]);
  nxv_tensor *out = NULL;
  nxv_status st = nxv_tensor_upload(d, t, n, h, &out);
  free(h);
  CHECK_MSG(st == NXV_OK, "upload of %zu %s: %s", n, nxv_dtype_name(t), nxv_last_error());
  return st == NXV_OK ? out : NULL;
}

static void release(nxv_tensor *t) {
  if (t) nxv_tensor_release(t);
}

static bool comp_ok(long double g, long double e, long double tol) {
  if (isnan(e)) return isnan(g);
  if (isnan(g)) return false;
  if (isinf(e) || isinf(g)) return g == e;
  if (tol < 0) return g == e;
  return fabsl(g - e) <= tol;
}

static void print_cx(char *buf, size_t cap, lcx z) {
  snprintf(buf, cap, "(%.17Lg, %.17Lg)", creall(z), cimagl(z));
}

/* Checks an op's status and result (n elements of type t: complex, or a
 * real type compared with the real parts of exp), compares it with exp
 * within the absolute tolerances tol (NULL: exact) and releases it. x and
 * y, when given, are the inputs printed with mismatches. */
static void check_vals(const char *tag, nxv_status st, nxv_tensor *out, nxv_dtype t,
                       size_t n, const lcx *exp, const long double *tol, const lcx *x,
                       const lcx *y) {
  CHECK_MSG(st == NXV_OK, "%s: %s: %s", tag, nxv_status_name(st), nxv_last_error());
  if (st != NXV_OK) return;
  if (nxv_tensor_dtype(out) != t || nxv_tensor_count(out) != n) {
    CHECK_MSG(false, "%s: result is %llu %s, expected %zu %s", tag,
              (unsigned long long)nxv_tensor_count(out),
              nxv_dtype_name(nxv_tensor_dtype(out)), n, nxv_dtype_name(t));
    nxv_tensor_release(out);
    return;
  }
  void *h = test_xcalloc(n, nxv_dtype_size(t));
  nxv_status ds = nxv_tensor_download(out, 0, n, h);
  CHECK_MSG(ds == NXV_OK, "%s: download: %s", tag, nxv_last_error());
  size_t bad = 0;
  for (size_t i = 0; ds == NXV_OK && i < n; i++) {
    long double tl = tol ? tol[i] : -1;
    lcx g = is_cx(t) ? cget(t, h, i) : CMPLXL(rget(t, h, i), 0);
    bool ok = comp_ok(creall(g), creall(exp[i]), tl) &&
              (!is_cx(t) || comp_ok(cimagl(g), cimagl(exp[i]), tl));
    if (ok || ++bad > MAX_REPORT) continue;
    char bx[96] = "", by[96] = "", be[96], bg[96];
    if (x) print_cx(bx, sizeof bx, x[i]);
    if (y) print_cx(by, sizeof by, y[i]);
    print_cx(be, sizeof be, exp[i]);
    print_cx(bg, sizeof bg, g);
    fprintf(stderr, "    %s [%zu] %s%s%s: expected %s, got %s (tolerance %.3Lg)\n", tag, i,
            bx, y ? " " : "", by, be, bg, tl);
  }
  CHECK_MSG(bad == 0, "%s: %zu of %zu elements wrong", tag, bad, n);
  free(h);
  nxv_tensor_release(out);
}

/* Checks a u8 result against exp (0 or 1). */
static void check_u8(const char *tag, nxv_status st, nxv_tensor *out, size_t n,
                     const uint8_t *exp, const lcx *x, const lcx *y) {
  CHECK_MSG(st == NXV_OK, "%s: %s: %s", tag, nxv_status_name(st), nxv_last_error());
  if (st != NXV_OK) return;
  CHECK(nxv_tensor_dtype(out) == NXV_U8 && nxv_tensor_count(out) == n);
  uint8_t *h = test_xcalloc(n, 1);
  nxv_status ds = nxv_tensor_download(out, 0, n, h);
  CHECK_MSG(ds == NXV_OK, "%s: download: %s", tag, nxv_last_error());
  size_t bad = 0;
  for (size_t i = 0; ds == NXV_OK && i < n; i++) {
    if (h[i] == exp[i] || ++bad > MAX_REPORT) continue;
    char bx[96], by[96];
    print_cx(bx, sizeof bx, x[i]);
    print_cx(by, sizeof by, y[i]);
    fprintf(stderr, "    %s [%zu] %s %s: expected %u, got %u\n", tag, i, bx, by, exp[i], h[i]);
  }
  CHECK_MSG(bad == 0, "%s: %zu of %zu elements wrong", tag, bad, n);
  free(h);
  nxv_tensor_release(out);
}

/* The complex types this device holds (c128 needs shaderFloat64). */
static bool usable(nxv_device *d, nxv_dtype t) {
  if (nxv_convert_supported(d, t)) return true;
  nxv_device_info info;
  if (nxv_device_info_get(d, &info) == NXV_OK && !info.float64 && t == NXV_C128) {
    fprintf(stderr, "  note: the device has no float64: %s skipped\n", nxv_dtype_name(t));
    return false;
  }
  CHECK_MSG(false, "%s is not supported on this device", nxv_dtype_name(t));
  return false;
}

/* A strided view of a tensor over an op shape of rank <= 3: element i of
 * the op (row-major) is element offset + sum_k i_k strides[k] of the
 * tensor, of count elements; dense: strides NULL (offset 0, count = the
 * op's size). */
typedef struct lay {
  int64_t count, offset;
  int64_t strides[3];
  bool dense;
} lay;

static int64_t lay_at(const lay *l, uint32_t rank, const int64_t *shape, int64_t i) {
  if (l->dense) return i;
  int64_t off = l->offset;
  for (int k = (int)rank - 1; k >= 0; k--) {
    off += (i % shape[k]) * l->strides[k];
    i /= shape[k];
  }
  return off;
}

static nxv_view lay_view(const lay *l, nxv_tensor *t) {
  nxv_view v = {t, l->dense ? 0 : l->offset, l->dense ? NULL : l->strides};
  return v;
}

static int64_t shape_count(uint32_t rank, const int64_t *shape) {
  int64_t n = 1;
  for (uint32_t i = 0; i < rank; i++) n *= shape[i];
  return n;
}

/* ------------------------------------------------------------------------ */
/* Binary ops                                                                */
/* ------------------------------------------------------------------------ */

static const nxv_binary_op kBinOps[] = {NXV_ADD, NXV_SUB, NXV_MUL, NXV_DIV, NXV_POW};
#define NBIN (sizeof kBinOps / sizeof kBinOps[0])

/* a op b; *scale is the scale of its error (< 0: exact). add and subtract
 * round once per component, as the device does. */
static lcx ref_binary(nxv_dtype t, nxv_binary_op op, lcx a, lcx b, long double *scale) {
  switch (op) {
    case NXV_ADD:
    case NXV_SUB: {
      long double s = op == NXV_ADD ? 1 : -1;
      *scale = -1;
      return CMPLXL(radd(t, creall(a), s * creall(b)), radd(t, cimagl(a), s * cimagl(b)));
    }
    case NXV_MUL: *scale = cabsl(a) * cabsl(b); return a * b;
    case NXV_DIV: *scale = cabsl(a) / cabsl(b); return a / b;
    default: {
      /* exp(y log x): the error of log |x| and of the phase scales with y. */
      lcx r = cpowl(a, b);
      long double lx = fabsl(logl(cabsl(a))) + fabsl(cargl(a));
      *scale = cabsl(r) * (1 + (fabsl(creall(b)) + fabsl(cimagl(b))) * lx);
      return r;
    }
  }
}

static long double binary_mult(nxv_dtype t, nxv_binary_op op) {
  if (op != NXV_POW) return ARITH;
  return t == NXV_C64 ? DRIVER : TRANS; /* c64 pow: the driver's float pow, exp, atan */
}

static void gen_binary(uint64_t *r, nxv_dtype t, nxv_binary_op op, int which, lcx *v,
                       int64_t n) {
  int dom = D_WIDE;
  if (op == NXV_DIV && which) dom = D_DIVISOR;
  if (op == NXV_POW) dom = which ? D_POW_EXP : D_POW_BASE;
  for (int64_t i = 0; i < n; i++) v[i] = gen(r, t, dom);
}

/* Operand layouts over the op shape: contiguous, broadcast scalars,
 * permuted/reversed/offset strides, row and column broadcasts. */
static const struct bcase {
  const char *name;
  uint32_t rank;
  int64_t shape[3];
  lay a, b;
} kBinCases[] = {
    {"contiguous", 1, {N}, {N, 0, {0}, true}, {N, 0, {0}, true}},
    {"scalar b", 1, {N}, {N, 0, {0}, true}, {3, 2, {0}, false}},
    {"scalar a", 1, {N}, {1, 0, {0}, false}, {N, 0, {0}, true}},
    {"strided", 3, {7, 5, 9}, {315, 0, {1, 7, 35}, false}, {320, 39, {45, -9, 1}, false}},
    {"row and column broadcast", 2, {6, 40}, {6, 0, {1, 0}, false}, {43, 3, {0, 1}, false}},
    /* Tiles of 32x32 (tile2d.glsl): a transposed through shared memory. */
    {"transposed, row broadcast", 2, {20, 36}, {720, 0, {1, 20}, false}, {37, 1, {0, 1}, false}},
    {"batched transposed, batch broadcast", 3, {2, 17, 18},
     {612, 0, {306, 1, 17}, false}, {306, 0, {0, 18, 1}, false}},
};

NXV_TEST(complex, binary) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0xB1C0;
  static lcx ha[N + 8], hb[N + 8], xs[N], ys[N], e[N];
  static long double tol[N];
  for (int ti = 0; ti < NCX; ti++) {
    nxv_dtype t = kCx[ti];
    if (!usable(d, t)) continue;
    for (size_t o = 0; o < NBIN; o++) {
      nxv_binary_op op = kBinOps[o];
      CHECK_MSG(nxv_binary_supported(d, op, t), "%s %s", nxv_binary_op_name(op),
                nxv_dtype_name(t));
      for (size_t c = 0; c < sizeof kBinCases / sizeof kBinCases[0]; c++) {
        const struct bcase *bc = &kBinCases[c];
        gen_binary(&r, t, op, 0, ha, bc->a.count);
        gen_binary(&r, t, op, 1, hb, bc->b.count);
        int64_t n = shape_count(bc->rank, bc->shape);
        for (int64_t i = 0; i < n; i++) {
          xs[i] = ha[lay_at(&bc->a, bc->rank, bc->shape, i)];
          ys[i] = hb[lay_at(&bc->b, bc->rank, bc->shape, i)];
          long double s;
          e[i] = ref_binary(t, op, xs[i], ys[i], &s);
          tol[i] = s < 0 ? -1 : binary_mult(t, op) * eps_t(t) * fmaxl(s, tiny_t(t));
        }
        nxv_tensor *ta = up(d, t, (size_t)bc->a.count, ha), *tb = up(d, t, (size_t)bc->b.count, hb);
        if (ta && tb) {
          nxv_view va = lay_view(&bc->a, ta), vb = lay_view(&bc->b, tb);
          char tag[96];
          snprintf(tag, sizeof tag, "%s %s (%s)", nxv_binary_op_name(op), nxv_dtype_name(t),
                   bc->name);
          nxv_tensor *out = NULL;
          nxv_status st = nxv_binary(d, op, bc->rank, bc->shape, &va, &vb, &out);
          check_vals(tag, st, out, t, (size_t)n, e, tol, xs, ys);
          /* The broadcast scalar as an immediate (nxv_binary_scalar): in
           * push constants for c64; c128's 16 bytes are refused. */
          bool first = strcmp(bc->name, "scalar a") == 0;
          if (first || strcmp(bc->name, "scalar b") == 0) {
            double value[2];
            cset(t, value, 0, first ? xs[0] : ys[0]);
            snprintf(tag, sizeof tag, "%s %s (immediate %c)", nxv_binary_op_name(op),
                     nxv_dtype_name(t), first ? 'a' : 'b');
            const nxv_view *x = first ? &vb : &va;
            out = NULL;
            if (t == NXV_C128) {
              EXPECT_FAIL_TAG(NXV_ERR_UNSUPPORTED, out, tag,
                              nxv_binary_scalar(d, op, bc->rank, bc->shape, x, first, value,
                                                &out));
            } else {
              st = nxv_binary_scalar(d, op, bc->rank, bc->shape, x, first, value, &out);
              check_vals(tag, st, out, t, (size_t)n, e, tol, xs, ys);
            }
          }
        }
        release(ta);
        release(tb);
      }
    }
  }
  nxv_device_release(d);
}

/* Division by operands with a zero part, and pow's special cases
 * (Complex.pow: 0^0 = 1, 0^y = 0 otherwise, x^1 = x, x^-1 = 1/x). */
static const struct bspecial {
  nxv_binary_op op;
  double ar, ai, br, bi, er, ei; /* a, b, expected (NAN er: the reference) */
} kBinSpecial[] = {
    {NXV_DIV, 3, -4, 0, 2, NAN, 0},   {NXV_DIV, 3, -4, 0, -0.5, NAN, 0},
    {NXV_DIV, 3, -4, 2, 0, NAN, 0},   {NXV_DIV, 3, -4, -0.25, 0, NAN, 0},
    {NXV_DIV, 0, 1, 0, 1, 1, 0},      {NXV_DIV, 1, 0, 0, 1, 0, -1},
    {NXV_DIV, -7, 0, 2, 0, -3.5, 0},  {NXV_DIV, 1e-3, 5, 0, 1e4, NAN, 0},
    {NXV_DIV, 1, 1, 1, 1, 1, 0},      {NXV_DIV, 2, 0, 1, 1, 1, -1},
    {NXV_POW, 0, 0, 0, 0, 1, 0},      {NXV_POW, 0, 0, 2, 0, 0, 0},
    {NXV_POW, 0, 0, -1, 0, 0, 0},     {NXV_POW, 0, 0, 0.5, 3, 0, 0},
    {NXV_POW, 1.5, -2, 1, 0, 1.5, -2}, {NXV_POW, 2, 0, -1, 0, 0.5, 0},
    {NXV_POW, 0, 2, -1, 0, 0, -0.5},  {NXV_POW, 2, 0, 3, 0, 8, 0},
    {NXV_POW, -8, 0, 1.0 / 3, 0, NAN, 0}, {NXV_POW, 0, 1, 0, 1, NAN, 0},
    {NXV_POW, -1, 0, 0.5, 0, 0, 1},   {NXV_POW, 0, 1, 2, 0, -1, 0},
    {NXV_POW, 3, 4, 0, 0, 1, 0},      {NXV_POW, -2, 0, 2, 0, 4, 0},
    /* Complex.multiply/2: a real b scales a, a real a scales b (a number
     * times a complex), an imaginary b rotates a; the textbook formula
     * otherwise */
    {NXV_MUL, INFINITY, 3, 2, 0, INFINITY, 6}, {NXV_MUL, INFINITY, 3, 0, 2, -6, INFINITY},
    {NXV_MUL, 2, 0, INFINITY, 3, INFINITY, 6}, {NXV_MUL, -INFINITY, 3, -2, 4, INFINITY, -INFINITY},
    {NXV_MUL, 3, -INFINITY, 0, -2, -INFINITY, -6}, {NXV_MUL, 0, 1, 0, 1, -1, 0},
    {NXV_MUL, 3, 4, 0, 0, 0, 0},      {NXV_MUL, 1, 0, INFINITY, 3, INFINITY, 3},
    {NXV_MUL, 2, 0, 0, INFINITY, 0, INFINITY},
};

NXV_TEST(complex, binary_special_values) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  enum { NS = sizeof kBinSpecial / sizeof kBinSpecial[0] };
  for (int ti = 0; ti < NCX; ti++) {
    nxv_dtype t = kCx[ti];
    if (!usable(d, t)) continue;
    for (int op = 0; op < NXV_BINARY_OP_COUNT; op++) {
      lcx a[NS], b[NS], e[NS];
      long double tol[NS];
      size_t n = 0;
      for (size_t i = 0; i < NS; i++) {
        const struct bspecial *s = &kBinSpecial[i];
        if ((int)s->op != op) continue;
        a[n] = cround(t, CMPLXL(s->ar, s->ai));
        b[n] = cround(t, CMPLXL(s->br, s->bi));
        long double sc;
        e[n] = ref_binary(t, s->op, a[n], b[n], &sc);
        if (!isnan(s->er)) {
          e[n] = CMPLXL(s->er, s->ei);
          sc = cabsl(e[n]);
        }
        tol[n] = binary_mult(t, s->op) * eps_t(t) * fmaxl(sc, 1);
        /* pow's branches for a zero base and a unit exponent are exact */
        if (s->op == NXV_POW && ((s->ar == 0 && s->ai == 0) || (s->br == 1 && s->bi == 0)))
          tol[n] = -1;
        n++;
      }
      if (!n) continue;
      nxv_tensor *ta = up(d, t, n, a), *tb = up(d, t, n, b);
      if (ta && tb) {
        const int64_t shape[1] = {(int64_t)n};
        nxv_view va = {ta, 0, NULL}, vb = {tb, 0, NULL};
        char tag[96];
        snprintf(tag, sizeof tag, "%s %s (special values)",
                 nxv_binary_op_name((nxv_binary_op)op), nxv_dtype_name(t));
        nxv_tensor *out = NULL;
        nxv_status st = nxv_binary(d, (nxv_binary_op)op, 1, shape, &va, &vb, &out);
        check_vals(tag, st, out, t, n, e, tol, a, b);
      }
      release(ta);
      release(tb);
    }
  }
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Unary ops                                                                 */
/* ------------------------------------------------------------------------ */

enum { C_EXACT, C_ARITH, C_TRANS };

static const struct ucase {
  nxv_unary_op op;
  int dom, cls;
} kUnary[] = {
    {NXV_COPY, D_WIDE, C_EXACT},   {NXV_NEG, D_WIDE, C_EXACT},    {NXV_CONJ, D_WIDE, C_EXACT},
    {NXV_REAL, D_WIDE, C_EXACT},   {NXV_IMAG, D_WIDE, C_EXACT},   {NXV_ABS, D_WIDE, C_ARITH},
    {NXV_SQUARE, D_WIDE, C_ARITH}, {NXV_PHASE, D_WIDE, C_TRANS},  {NXV_SQRT, D_WIDE, C_TRANS},
    {NXV_RSQRT, D_WIDE, C_TRANS},  {NXV_EXP, D_EXP, C_TRANS},     {NXV_LOG, D_WIDE, C_TRANS},
    {NXV_SIN, D_EXP, C_TRANS},     {NXV_COS, D_EXP, C_TRANS},     {NXV_TAN, D_EXP, C_TRANS},
    {NXV_TANH, D_EXP, C_TRANS},    {NXV_SINH, D_EXP, C_TRANS},    {NXV_COSH, D_EXP, C_TRANS},
    {NXV_SIGMOID, D_EXP, C_TRANS}, {NXV_EXPM1, D_EXP, C_TRANS},   {NXV_LOG1P, D_WIDE, C_TRANS},
};
#define NUNARY (sizeof kUnary / sizeof kUnary[0])

/* abs, real, imag and phase of a complex type have its component type. */
static bool real_result(nxv_unary_op op) {
  return op == NXV_ABS || op == NXV_REAL || op == NXV_IMAG || op == NXV_PHASE;
}

/* op(z) (a real result as its real part) and in *scale the scale of its
 * error in the kernel's formula (see the top of the file); abs_trig: sin
 * and cos are accurate to an absolute error only. */
static lcx ref_unary(nxv_unary_op op, lcx z, bool abs_trig, long double *scale) {
  lcx r;
  long double s = -1;
  switch (op) {
    case NXV_COPY: r = z; break;
    case NXV_NEG: r = CMPLXL(-creall(z), -cimagl(z)); break;
    case NXV_CONJ: r = CMPLXL(creall(z), -cimagl(z)); break;
    case NXV_REAL: r = CMPLXL(creall(z), 0); break;
    case NXV_IMAG: r = CMPLXL(cimagl(z), 0); break;
    case NXV_ABS: r = cabsl(z); break;
    case NXV_PHASE: r = cargl(z); break;
    case NXV_SQUARE: r = z * z; s = cabsl(z) * cabsl(z); break;
    case NXV_SQRT: r = csqrtl(z); break;
    case NXV_RSQRT: r = 1.0L / csqrtl(z); break;
    case NXV_EXP: r = cexpl(z); break;
    case NXV_LOG: r = clogl(z); s = cabsl(r) + 1; break; /* log|z| near |z| = 1 */
    case NXV_SIN:
    case NXV_COS:
      r = op == NXV_SIN ? csinl(z) : ccosl(z);
      if (abs_trig) s = fmaxl(cabsl(r), coshl(cimagl(z)));
      break;
    case NXV_TAN:
      r = ctanl(z);
      if (abs_trig) s = fmaxl(cabsl(r), coshl(cimagl(z)) * (1 + cabsl(r)) / cabsl(ccosl(z)));
      break;
    case NXV_SINH:
    case NXV_COSH:
      r = op == NXV_SINH ? csinhl(z) : ccoshl(z);
      s = (cabsl(cexpl(z)) + cabsl(cexpl(-z))) / 2;
      break;
    case NXV_TANH: {
      long double sh = (cabsl(cexpl(z)) + cabsl(cexpl(-z))) / 2;
      r = ctanhl(z);
      s = sh / cabsl(ccoshl(z)) * (1 + cabsl(r));
      break;
    }
    case NXV_SIGMOID: {
      lcx em = cexpl(-z);
      r = 1.0L / (1.0L + em);
      s = cabsl(r) * cabsl(r) * (1 + cabsl(em)) + cabsl(r);
      break;
    }
    case NXV_EXPM1: {
      lcx ez = cexpl(z);
      r = ez - 1.0L;
      s = cabsl(ez) + 1;
      break;
    }
    case NXV_LOG1P: {
      lcx w = z + 1.0L;
      r = clogl(w);
      s = (cabsl(z) + 1) / cabsl(w) + 1 + cabsl(r);
      break;
    }
    default: r = NAN; break;
  }
  *scale = s >= 0 ? s : cabsl(r);
  return r;
}

static const struct ulay {
  const char *name;
  uint32_t rank;
  int64_t shape[3];
  lay a;
} kULays[] = {
    {"contiguous", 1, {N}, {N, 0, {0}, true}},
    {"reversed", 1, {N}, {N + 2, N, {-1}, false}},
    {"scalar", 1, {N}, {2, 1, {0}, false}},
    {"strided", 3, {7, 5, 9}, {315, 0, {1, 7, 35}, false}},
};

/* Every unary op of kUnary on t over the layouts of kULays, on a device
 * opened with fast_math or not. c64 computes in double on a device with
 * float64 (unless fast_math): its results must be the double results
 * rounded once; otherwise it uses the driver's float built-ins. */
static void run_unary(nxv_device *d, nxv_dtype t, bool fast_math, const char *what,
                      uint64_t *r) {
  nxv_device_info info;
  bool f64 = nxv_device_info_get(d, &info) == NXV_OK && info.float64;
  bool c64_double = t == NXV_C64 && f64 && !fast_math;
  bool driver = t == NXV_C64 && !c64_double;
  static lcx h[N + 8], xs[N], e[N];
  static long double tol[N];
  for (size_t o = 0; o < NUNARY; o++) {
    nxv_unary_op op = kUnary[o].op;
    CHECK_MSG(nxv_unary_supported(d, op, t), "%s %s", nxv_unary_op_name(op),
              nxv_dtype_name(t));
    nxv_dtype to = real_result(op) ? part(t) : t;
    long double m = kUnary[o].cls == C_ARITH ? ARITH : driver ? DRIVER : TRANS;
    for (size_t c = 0; c < sizeof kULays / sizeof kULays[0]; c++) {
      const struct ulay *ul = &kULays[c];
      for (int64_t i = 0; i < ul->a.count; i++) h[i] = gen(r, t, kUnary[o].dom);
      int64_t n = shape_count(ul->rank, ul->shape);
      for (int64_t i = 0; i < n; i++) {
        xs[i] = h[lay_at(&ul->a, ul->rank, ul->shape, i)];
        long double s;
        e[i] = ref_unary(op, xs[i], driver, &s);
        if (kUnary[o].cls == C_EXACT)
          tol[i] = -1;
        else if (c64_double)
          tol[i] = FLT_EPSILON * cabsl(e[i]) + m * DBL_EPSILON * s + FLT_MIN;
        else
          tol[i] = m * eps_t(t) * fmaxl(s, tiny_t(t));
      }
      nxv_tensor *ta = up(d, t, (size_t)ul->a.count, h);
      if (ta) {
        nxv_view va = lay_view(&ul->a, ta);
        char tag[96];
        snprintf(tag, sizeof tag, "%s %s (%s%s)", nxv_unary_op_name(op), nxv_dtype_name(t),
                 ul->name, what);
        nxv_tensor *out = NULL;
        nxv_status st = nxv_unary(d, op, ul->rank, ul->shape, &va, &out);
        check_vals(tag, st, out, to, (size_t)n, e, tol, xs, NULL);
      }
      release(ta);
    }
  }
}

/* c64 with fast_math: the driver's float built-ins instead of double
 * evaluation. */
NXV_TEST(complex, unary_fast_math) {
  nxv_device_config config = {0};
  config.poison_outputs = true;
  config.disable_disk_cache = true;
  config.fast_math = true;
  nxv_device *d = NULL;
  REQUIRE_OK(nxv_device_open(-1, &config, &d));
  uint64_t r = 0xFA57;
  run_unary(d, NXV_C64, true, ", fast math", &r);
  nxv_device_release(d);
}

/* Branch cuts, zeros, infinities and NaN, as Elixir's Complex computes
 * them (sqrt of a negative real with a -0 imaginary part: +i sqrt|x|). */
#define INF INFINITY
#define PI 3.14159265358979323846
static const struct uspecial {
  nxv_unary_op op;
  double zr, zi, er, ei;
} kUSpecial[] = {
    {NXV_SQRT, -4, 0, 0, 2}, {NXV_SQRT, -4, -0.0, 0, 2}, {NXV_SQRT, -1, 0, 0, 1},
    {NXV_SQRT, -2.25, 0, 0, 1.5}, {NXV_SQRT, 0, 0, 0, 0}, {NXV_SQRT, -0.0, 0, 0, 0},
    {NXV_SQRT, 4, 0, 2, 0}, {NXV_SQRT, 0, 2, 1, 1}, {NXV_SQRT, 0, -2, 1, -1},
    {NXV_SQRT, 9, -0.0, 3, 0}, {NXV_SQRT, -3, 4, 1, 2}, {NXV_SQRT, -3, -4, 1, -2},
    {NXV_SQRT, NAN, 0, NAN, NAN}, {NXV_SQRT, 1, NAN, NAN, NAN}, {NXV_SQRT, NAN, INF, NAN, NAN},
    {NXV_SQRT, 1, INF, INF, INF}, {NXV_SQRT, -3, -INF, INF, -INF}, {NXV_SQRT, INF, INF, INF, INF},
    {NXV_SQRT, 0, -INF, INF, -INF}, {NXV_SQRT, INF, 2, INF, 0}, {NXV_SQRT, -INF, 2, 0, INF},
    {NXV_RSQRT, -4, 0, 0, -0.5}, {NXV_RSQRT, 4, 0, 0.5, 0}, {NXV_RSQRT, 0, 2, 0.5, -0.5},
    {NXV_ABS, 3, 4, 5, 0}, {NXV_ABS, -3, -4, 5, 0}, {NXV_ABS, 0, -2, 2, 0},
    {NXV_ABS, -0.0, 0, 0, 0}, {NXV_ABS, INF, NAN, INF, 0}, {NXV_ABS, NAN, -INF, INF, 0},
    {NXV_ABS, NAN, NAN, NAN, 0}, {NXV_ABS, 1e30, 1e30, 1.4142135623730951e30, 0},
    {NXV_ABS, 3e-30, 4e-30, 5e-30, 0}, {NXV_PHASE, -1, 0, PI, 0}, {NXV_PHASE, -1, -0.0, -PI, 0},
    {NXV_PHASE, 0, 1, PI / 2, 0}, {NXV_PHASE, 0, -1, -PI / 2, 0}, {NXV_PHASE, 0, 0, 0, 0},
    {NXV_PHASE, -0.0, 0, PI, 0}, {NXV_PHASE, INF, INF, PI / 4, 0},
    {NXV_PHASE, -INF, INF, 3 * PI / 4, 0}, {NXV_PHASE, NAN, 1, NAN, 0}, {NXV_PHASE, 5, 0, 0, 0},
    {NXV_LOG, 0, 0, -INF, 0}, {NXV_LOG, -1, 0, 0, PI}, {NXV_LOG, 1, 0, 0, 0},
    {NXV_LOG, 0, 1, 0, PI / 2}, {NXV_LOG, -1, -0.0, 0, -PI},
    {NXV_LOG, -2, 0, 0.69314718055994531, PI}, {NXV_EXP, 0, 0, 1, 0}, {NXV_EXP, -INF, 0, 0, 0},
    {NXV_EXP, -INF, 3, 0, 0}, {NXV_EXP, 1, 0, 2.7182818284590452, 0}, {NXV_EXP, 0, PI, -1, 0},
    {NXV_EXP, 0, PI / 2, 0, 1}, {NXV_SIN, 0, 0, 0, 0}, {NXV_SIN, PI / 2, 0, 1, 0},
    {NXV_COS, 0, 0, 1, 0}, {NXV_COS, 0, 1, 1.5430806348152437, 0}, {NXV_TAN, 0, 0, 0, 0},
    {NXV_TAN, PI / 4, 0, 1, 0}, {NXV_TANH, 0, 0, 0, 0}, {NXV_TANH, 0, PI / 4, 0, 1},
    {NXV_SINH, 0, 1, 0, 0.8414709848078965}, {NXV_COSH, 0, 0, 1, 0}, {NXV_SIGMOID, 0, 0, 0.5, 0},
    {NXV_EXPM1, 0, 0, 0, 0}, {NXV_LOG1P, 0, 0, 0, 0}, {NXV_LOG1P, -2, 0, 0, PI},
    {NXV_LOG1P, -1, 1, 0, PI / 2}, {NXV_SQUARE, 0, 1, -1, 0}, {NXV_SQUARE, 3, -4, -7, -24},
    {NXV_CONJ, 1, 0, 1, -0.0}, {NXV_REAL, NAN, 1, NAN, 0}, {NXV_IMAG, 1, -INF, -INF, 0},
    {NXV_NEG, 0, -INF, -0.0, INF},
};

static void run_unary_special(nxv_device *d, nxv_dtype t) {
  enum { NS = sizeof kUSpecial / sizeof kUSpecial[0] };
  for (int op = 0; op < NXV_UNARY_OP_COUNT; op++) {
    lcx a[NS], e[NS];
    long double tol[NS];
    size_t n = 0;
    for (size_t i = 0; i < NS; i++) {
      const struct uspecial *s = &kUSpecial[i];
      if ((int)s->op != op) continue;
      a[n] = cround(t, CMPLXL(s->zr, s->zi));
      e[n] = CMPLXL(s->er, s->ei);
      tol[n] = TRANS * eps_t(t) * fmaxl(cabsl(e[n]), 1);
      n++;
    }
    if (!n) continue;
    nxv_dtype to = real_result((nxv_unary_op)op) ? part(t) : t;
    nxv_tensor *ta = up(d, t, n, a);
    if (ta) {
      const int64_t shape[1] = {(int64_t)n};
      nxv_view va = {ta, 0, NULL};
      char tag[96];
      snprintf(tag, sizeof tag, "%s %s (special values)", nxv_unary_op_name((nxv_unary_op)op),
               nxv_dtype_name(t));
      nxv_tensor *out = NULL;
      nxv_status st = nxv_unary(d, (nxv_unary_op)op, 1, shape, &va, &out);
      check_vals(tag, st, out, to, n, e, tol, a, NULL);
    }
    release(ta);
  }
}
#undef INF
#undef PI

NXV_TEST(complex, unary) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0x0C0A;
  for (int ti = 0; ti < NCX; ti++) {
    if (!usable(d, kCx[ti])) continue;
    run_unary(d, kCx[ti], false, "", &r);
    run_unary_special(d, kCx[ti]);
  }
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Conversions                                                               */
/* ------------------------------------------------------------------------ */

static bool is_int(nxv_dtype t) { return t <= NXV_U64; }
static bool is_sint(nxv_dtype t) { return t <= NXV_S64; }

/* A real value x (a complex type's real part) as real type `to`: floats to
 * integers truncate toward zero, saturate, NaN -> 0; f16 and bf16 go
 * through f32 (bf16 truncating); f32 and f64 round. */
static long double conv_ref(nxv_dtype to, long double x) {
  if (is_int(to)) {
    if (isnan(x)) return 0;
    int b = 8 * (int)nxv_dtype_size(to);
    long double lo = is_sint(to) ? -ldexpl(1, b - 1) : 0;
    long double hi = is_sint(to) ? ldexpl(1, b - 1) : ldexpl(1, b); /* first out */
    x = truncl(x);
    if (x <= lo) return lo;
    if (x >= hi) return hi - 1;
    return x;
  }
  switch (to) {
    case NXV_F16: return nxv_test_f16_value(nxv_test_f16_bits((float)x));
    case NXV_BF16: return nxv_test_bf16_value(nxv_test_bf16_bits((float)x));
    case NXV_F32: return (float)x;
    default: return (double)x;
  }
}

/* Values exactly representable in real type t (written and read back):
 * small integers in every type, then the type's extremes, large integers
 * and fractions. */
static size_t real_inputs(nxv_dtype t, uint64_t *r, long double *v) {
  size_t n = 0;
  int b = 8 * (int)nxv_dtype_size(t);
  int top = t == NXV_S8 ? 127 : 200;
  for (int k = is_sint(t) || !is_int(t) ? -100 : 0; k <= top; k += 7) v[n++] = k;
  if (!is_int(t)) {
    static const double fl[] = {NAN, INFINITY, -INFINITY, -0.0, 0.5, -2.75, 0.125,
                                1e-3, 3.14159265358979, -65504, 1e30, -1e-30};
    for (size_t i = 0; i < sizeof fl / sizeof *fl; i++) v[n++] = fl[i];
    for (int i = 0; i < 12; i++) v[n++] = uni(r, -1000, 1000);
  } else {
    long double mx = is_sint(t) ? ldexpl(1, b - 1) - 1 : ldexpl(1, b) - 1;
    long double mn = is_sint(t) ? -ldexpl(1, b - 1) : 0;
    v[n++] = mx;
    v[n++] = mn;
    v[n++] = mx - 1;
    if (b >= 32) {
      v[n++] = 16777217;
      v[n++] = 2147483520;
      if (is_sint(t)) v[n++] = -16777219;
    }
    if (b == 64) {
      v[n++] = 9007199254740993.0L; /* 2^53 + 1 */
      v[n++] = 12345678901234567.0L;
      if (is_sint(t)) v[n++] = -9007199254740993.0L;
    }
    for (int i = 0; i < 12; i++) {
      uint64_t u = test_rand_u64(r) >> (test_rand_u64(r) % 64);
      if (b == 64) v[n++] = is_sint(t) ? (long double)(int64_t)u : (long double)u;
      else v[n++] = mn + (long double)(u % ((uint64_t)(mx - mn) + 1));
    }
  }
  /* What the type holds. */
  void *h = test_xcalloc(n, nxv_dtype_size(t));
  for (size_t i = 0; i < n; i++) rset(t, h, i, v[i]);
  for (size_t i = 0; i < n; i++) v[i] = rget(t, h, i);
  free(h);
  return n;
}

/* Real parts for conversions from complex types: the float -> integer
 * edge cases, then random magnitudes; random imaginary parts. */
static size_t complex_inputs(nxv_dtype t, uint64_t *r, lcx *v) {
  static const double fl[] = {
      NAN, INFINITY, -INFINITY, 0.0, -0.0, 0.5, -0.5, 0.99, -0.99, 1, -1, 1.5, -1.5, 2.5,
      -7.75, 100.25, 127, 127.9, 128, 128.5, -128, -128.9, -129, 255, 255.9, 256, 300.7,
      -300.7, 32767, 32767.9, 32768, -32768, -32768.9, -32769, 65504, 65519, 65520,
      65535.9, 65536, -65536, 70000.5, 16777217, 2147483520.0, 2147483647.0,
      2147483648.0, -2147483648.0, -2147483904.0, 4294967295.0, 4294967296.0, 1e10,
      -1e10, 9.2e18, 0x1p63, -0x1p63, -9.3e18, 1.8e19, 0x1p64, 2e19, 3e38, -3e38, 1e300,
      -1e300, 1e-6, -1e-6};
  size_t n = 0;
  for (size_t i = 0; i < sizeof fl / sizeof *fl; i++)
    v[n++] = cround(t, CMPLXL(fl[i], uni(r, -100, 100)));
  for (int i = 0; i < 26; i++) {
    long double x = coin(r, 2) ? uni(r, -300, 300) : sgn(r) * logu(r, 1e-3, 1e20);
    v[n++] = cround(t, CMPLXL(x, coin(r, 4) ? NAN : uni(r, -1e6, 1e6)));
  }
  return n;
}

/* Runs nxv_convert over the n values of ta (contiguous and read
 * backwards) and checks them against exp. */
static void run_convert(nxv_device *d, nxv_tensor *ta, nxv_dtype from, nxv_dtype to,
                        size_t n, const lcx *exp, const lcx *x) {
  static lcx rev[128], xrev[128];
  for (size_t i = 0; i < n; i++) {
    rev[i] = exp[n - 1 - i];
    xrev[i] = x[n - 1 - i];
  }
  const int64_t shape[1] = {(int64_t)n}, back[1] = {-1};
  nxv_view views[2] = {{ta, 0, NULL}, {ta, (int64_t)n - 1, back}};
  for (int v = 0; v < 2; v++) {
    char tag[96];
    snprintf(tag, sizeof tag, "convert %s -> %s (%s)", nxv_dtype_name(from),
             nxv_dtype_name(to), v ? "reversed" : "contiguous");
    nxv_tensor *out = NULL;
    nxv_status st = nxv_convert(d, to, 1, shape, &views[v], &out);
    check_vals(tag, st, out, to, n, v ? rev : exp, NULL, v ? xrev : x, NULL);
  }
}

NXV_TEST(complex, convert) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0xC0C0;
  long double rv[128];
  lcx x[128], e[128];
  /* Every real type -> c64, c128: the value rounded to the component
   * type, imaginary part 0. */
  for (int fi = 0; fi < NXV_C64; fi++) {
    nxv_dtype from = (nxv_dtype)fi;
    if (!nxv_convert_supported(d, from)) continue;
    size_t n = real_inputs(from, &r, rv);
    nxv_tensor *ta = up_real(d, from, n, rv);
    for (int ti = 0; ta && ti < NCX; ti++) {
      nxv_dtype to = kCx[ti];
      if (!usable(d, to)) continue;
      for (size_t i = 0; i < n; i++) {
        x[i] = CMPLXL(rv[i], 0);
        e[i] = CMPLXL(rpart(to, rv[i]), 0);
      }
      run_convert(d, ta, from, to, n, e, x);
    }
    release(ta);
  }
  /* c64, c128 -> every type: the real part converted. */
  for (int fi = 0; fi < NCX; fi++) {
    nxv_dtype from = kCx[fi];
    if (!usable(d, from)) continue;
    size_t n = complex_inputs(from, &r, x);
    nxv_tensor *ta = up(d, from, n, x);
    for (int ti = 0; ta && ti < NXV_DTYPE_COUNT; ti++) {
      nxv_dtype to = (nxv_dtype)ti;
      if (!nxv_convert_supported(d, to)) continue;
      for (size_t i = 0; i < n; i++)
        e[i] = is_cx(to) ? cround(to, x[i]) : CMPLXL(conv_ref(to, creall(x[i])), 0);
      run_convert(d, ta, from, to, n, e, x);
    }
    release(ta);
  }
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Compare and select                                                        */
/* ------------------------------------------------------------------------ */

static bool nonzero(lcx z) { return creall(z) != 0 || cimagl(z) != 0; } /* NaN too */

static uint8_t ref_compare(nxv_compare_op op, lcx a, lcx b) {
  bool eq = creall(a) == creall(b) && cimagl(a) == cimagl(b);
  switch (op) {
    case NXV_EQUAL: return eq;
    case NXV_NOT_EQUAL: return !eq;
    case NXV_LOGICAL_AND: return nonzero(a) && nonzero(b);
    case NXV_LOGICAL_OR: return nonzero(a) || nonzero(b);
    case NXV_LOGICAL_XOR: return nonzero(a) != nonzero(b);
    default: return 0;
  }
}

/* Pairs that are equal, differ in one part, are signed zeros of each
 * other or hold NaN parts. */
static void compare_pairs(uint64_t *r, nxv_dtype t, lcx *a, lcx *b, size_t n) {
  for (size_t i = 0; i < n; i++) {
    long double x = coin(r, 3) ? (long double)(int)(test_rand_u64(r) % 5) - 2 : uni(r, -9, 9);
    long double y = coin(r, 3) ? (long double)(int)(test_rand_u64(r) % 5) - 2 : uni(r, -9, 9);
    a[i] = cround(t, CMPLXL(x, y));
    switch (test_rand_u64(r) % 8) {
      case 0:
      case 1: b[i] = a[i]; break;
      case 2: b[i] = cround(t, CMPLXL(x + 1, y)); break;
      case 3: b[i] = cround(t, CMPLXL(x, y - 0.5L)); break;
      case 4: /* signed zeros */
        a[i] = CMPLXL(coin(r, 2) ? 0.0L : -0.0L, coin(r, 2) ? 0.0L : y);
        b[i] = CMPLXL(coin(r, 2) ? 0.0L : -0.0L, coin(r, 2) ? cimagl(a[i]) : -cimagl(a[i]));
        break;
      case 5: /* NaN in a part of one or both */
        a[i] = coin(r, 2) ? CMPLXL(NAN, y) : CMPLXL(x, NAN);
        b[i] = coin(r, 2) ? a[i] : cround(t, CMPLXL(x, y));
        break;
      default: b[i] = gen(r, t, D_SMALL); break;
    }
    if (coin(r, 2)) {
      lcx s = a[i];
      a[i] = b[i];
      b[i] = s;
    }
  }
}

NXV_TEST(complex, compare) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0xC03E;
  static lcx a[N], b[N], ys[N];
  static uint8_t e[N];
  static const nxv_compare_op ops[] = {NXV_EQUAL, NXV_NOT_EQUAL, NXV_LOGICAL_AND,
                                       NXV_LOGICAL_OR, NXV_LOGICAL_XOR};
  for (int ti = 0; ti < NCX; ti++) {
    nxv_dtype t = kCx[ti];
    if (!usable(d, t)) continue;
    CHECK(nxv_mask_type_supported(d, t));
    compare_pairs(&r, t, a, b, N);
    nxv_tensor *ta = up(d, t, N, a), *tb = up(d, t, N, b);
    if (ta && tb) {
      const int64_t shape[1] = {N}, zero[1] = {0}, back[1] = {-1};
      nxv_view va = {ta, 0, NULL}, vb = {tb, 0, NULL}, vbr = {tb, N - 1, back},
               vbs = {tb, 11, zero};
      for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        CHECK_MSG(nxv_compare_supported(d, ops[o], t), "%s %s",
                  nxv_compare_op_name(ops[o]), nxv_dtype_name(t));
        for (int run = 0; run < 3; run++) {
          for (size_t i = 0; i < N; i++) {
            ys[i] = run == 0 ? b[i] : run == 1 ? b[N - 1 - i] : b[11];
            e[i] = ref_compare(ops[o], a[i], ys[i]);
          }
          char tag[96];
          static const char *const runs[3] = {"contiguous", "b reversed", "b scalar"};
          snprintf(tag, sizeof tag, "%s %s (%s)", nxv_compare_op_name(ops[o]),
                   nxv_dtype_name(t), runs[run]);
          nxv_tensor *out = NULL;
          nxv_status st = nxv_compare(d, ops[o], 1, shape, &va,
                                      run == 0 ? &vb : run == 1 ? &vbr : &vbs, &out);
          check_u8(tag, st, out, N, e, a, ys);
        }
      }
      /* Complex numbers are not ordered. */
      static const nxv_compare_op ordered[] = {NXV_LESS, NXV_LESS_EQUAL, NXV_GREATER,
                                               NXV_GREATER_EQUAL};
      for (size_t o = 0; o < sizeof ordered / sizeof ordered[0]; o++) {
        char tag[96];
        snprintf(tag, sizeof tag, "%s %s", nxv_compare_op_name(ordered[o]), nxv_dtype_name(t));
        CHECK_MSG(!nxv_compare_supported(d, ordered[o], t), "%s is reported supported", tag);
        nxv_tensor *out;
        EXPECT_FAIL_TAG(NXV_ERR_UNSUPPORTED, out, tag,
                    nxv_compare(d, ordered[o], 1, shape, &va, &vb, &out));
      }
    }
    release(ta);
    release(tb);
  }
  nxv_device_release(d);
}

NXV_TEST(complex, select) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0x5E1E;
  static lcx a[N], b[N], e[N];
  static uint8_t p[N];
  static const uint8_t preds[5] = {0, 1, 2, 255, 0};
  for (int ti = 0; ti < NCX; ti++) {
    nxv_dtype t = kCx[ti];
    if (!usable(d, t)) continue;
    for (size_t i = 0; i < N; i++) {
      a[i] = gen(&r, t, D_WIDE);
      b[i] = coin(&r, 9) ? CMPLXL(NAN, -0.0) : gen(&r, t, D_WIDE);
      p[i] = coin(&r, 3) ? (uint8_t)test_rand_u64(&r) : preds[test_rand_u64(&r) % 5];
    }
    nxv_tensor *ta = up(d, t, N, a), *tb = up(d, t, N, b), *tp = NULL;
    CHECK_OK(nxv_tensor_upload(d, NXV_U8, N, p, &tp));
    if (ta && tb && tp) {
      /* contiguous; on_false a broadcast scalar; a 2-d case with the
       * predicate broadcast over rows, on_true transposed and on_false
       * reversed. */
      const int64_t shape1[1] = {N}, zero[1] = {0};
      nxv_view vp = {tp, 0, NULL}, va = {ta, 0, NULL}, vb = {tb, 0, NULL}, vbs = {tb, 5, zero};
      for (int run = 0; run < 2; run++) {
        for (size_t i = 0; i < N; i++) e[i] = p[i] ? a[i] : b[run ? 5 : i];
        char tag[64];
        snprintf(tag, sizeof tag, "select %s (%s)", nxv_dtype_name(t),
                 run ? "scalar on_false" : "contiguous");
        nxv_tensor *out = NULL;
        nxv_status st = nxv_select(d, 1, shape1, &vp, &va, run ? &vbs : &vb, &out);
        check_vals(tag, st, out, t, N, e, NULL, a, NULL);
      }
      const int64_t shape2[2] = {8, 16}, sp[2] = {0, 1}, sa[2] = {1, 8}, sb[2] = {-16, -1};
      nxv_view vp2 = {tp, 3, sp}, va2 = {ta, 2, sa}, vb2 = {tb, 127, sb};
      for (int64_t i = 0; i < 128; i++) {
        int64_t row = i / 16, col = i % 16;
        e[i] = p[3 + col] ? a[2 + row + 8 * col] : b[127 - 16 * row - col];
      }
      char tag[64];
      snprintf(tag, sizeof tag, "select %s (strided)", nxv_dtype_name(t));
      nxv_tensor *out = NULL;
      nxv_status st = nxv_select(d, 2, shape2, &vp2, &va2, &vb2, &out);
      check_vals(tag, st, out, t, 128, e, NULL, NULL, NULL);
    }
    release(ta);
    release(tb);
    release(tp);
  }
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Reductions                                                                */
/* ------------------------------------------------------------------------ */

#define RA 3
#define RB 70 /* reducing it alone takes the workgroup path (k >= 64) */
#define RC 5

NXV_TEST(complex, reduce) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0x5ED0;
  enum { RN = RA * RB * RC };
  static lcx a[RN], e[RN];
  static long double tol[RN];
  const int64_t shape[3] = {RA, RB, RC};
  /* dense, and axis 1 read backwards from an offset */
  const int64_t rstrides[3] = {RB * RC, -RC, 1};
  static const uint32_t masks[] = {1, 2, 4, 3, 5, 6, 7, 0};
  for (int ti = 0; ti < NCX; ti++) {
    nxv_dtype t = kCx[ti];
    if (!usable(d, t)) continue;
    for (int op = 0; op < 2; op++) {
      nxv_reduce_op rop = op ? NXV_REDUCE_PRODUCT : NXV_REDUCE_SUM;
      for (size_t i = 0; i < RN; i++) a[i] = gen(&r, t, op ? D_UNIT : D_SMALL);
      nxv_tensor *ta = up(d, t, RN, a);
      if (!ta) continue;
      for (size_t mi = 0; mi < sizeof masks / sizeof masks[0]; mi++) {
        for (int strided = 0; strided < 2; strided++) {
          uint32_t mask = masks[mi];
          int64_t kept[3], nk = 0, red[3], nr = 0;
          for (int ax = 0; ax < 3; ax++) {
            if ((mask >> ax) & 1u) red[nr++] = ax;
            else kept[nk++] = ax;
          }
          int64_t nout = 1, k = 1;
          for (int j = 0; j < nk; j++) nout *= shape[kept[j]];
          for (int j = 0; j < nr; j++) k *= shape[red[j]];
          for (int64_t o = 0; o < nout; o++) {
            lcx acc = op ? 1 : 0;
            long double mag = 0;
            for (int64_t q = 0; q < k; q++) {
              int64_t idx[3], rem = o;
              for (int j = (int)nk - 1; j >= 0; j--) {
                idx[kept[j]] = rem % shape[kept[j]];
                rem /= shape[kept[j]];
              }
              rem = q;
              for (int j = (int)nr - 1; j >= 0; j--) {
                idx[red[j]] = rem % shape[red[j]];
                rem /= shape[red[j]];
              }
              int64_t at = strided ? RB * RC - RC + idx[0] * rstrides[0] +
                                         idx[1] * rstrides[1] + idx[2]
                                   : (idx[0] * RB + idx[1]) * RC + idx[2];
              acc = op ? acc * a[at] : acc + a[at];
              mag += cabsl(a[at]);
            }
            e[o] = acc;
            /* accumulated in the type in any order: k roundings of
             * partial results */
            tol[o] = (k + 2) * 4 * eps_t(t) * (op ? cabsl(acc) : mag) + tiny_t(t);
          }
          const int64_t off = strided ? RB * RC - RC : 0;
          nxv_view va = {ta, off, strided ? rstrides : NULL};
          char tag[96];
          snprintf(tag, sizeof tag, "reduce %s %s axes 0x%x%s", nxv_reduce_op_name(rop),
                   nxv_dtype_name(t), mask, strided ? " (strided)" : "");
          nxv_tensor *out = NULL;
          nxv_status st = nxv_reduce(d, rop, 3, shape, &va, mask, &out);
          check_vals(tag, st, out, t, (size_t)nout, e, tol, NULL, NULL);
        }
      }
      release(ta);
    }
    /* Empty reductions give the identity: 0 and 1. */
    nxv_tensor *te = NULL;
    CHECK_OK(nxv_tensor_empty(d, t, 0, &te));
    if (te) {
      const int64_t eshape[2] = {3, 0};
      nxv_view ve = {te, 0, NULL};
      for (int op = 0; op < 2; op++) {
        lcx id[3] = {op, op, op};
        char tag[64];
        snprintf(tag, sizeof tag, "reduce %s %s of [3, 0]", op ? "product" : "sum",
                 nxv_dtype_name(t));
        nxv_tensor *out = NULL;
        nxv_status st = nxv_reduce(d, op ? NXV_REDUCE_PRODUCT : NXV_REDUCE_SUM, 2, eshape,
                                   &ve, 2, &out);
        check_vals(tag, st, out, t, 3, id, NULL, NULL, NULL);
      }
      /* max and min are not defined for complex types. */
      for (int op = NXV_REDUCE_MAX; op <= NXV_REDUCE_MIN; op++) {
        const int64_t shape1[1] = {4};
        nxv_tensor *t4 = NULL;
        lcx four[4] = {1, 2, 3, 4};
        t4 = up(d, t, 4, four);
        if (!t4) continue;
        nxv_view v4 = {t4, 0, NULL};
        char tag[64];
        snprintf(tag, sizeof tag, "reduce %s %s", nxv_reduce_op_name((nxv_reduce_op)op),
                 nxv_dtype_name(t));
        nxv_tensor *out;
        EXPECT_FAIL_TAG(NXV_ERR_UNSUPPORTED, out, tag,
                    nxv_reduce(d, (nxv_reduce_op)op, 1, shape1, &v4, 1, &out));
        release(t4);
      }
      release(te);
    }
  }
  nxv_device_release(d);
}

/* Products with infinite parts: the identity a partial of no elements
 * starts from, and elements exactly 1 + 0i, leave a product as it is (1 + 0i
 * times inf + 3i by the textbook formula is inf + NaN i), and each element
 * multiplies the product so far as Complex.multiply/2 does. Rows of 2 and
 * of 300 (split over many invocations); every value here comes out the
 * same in any order of the products. */
NXV_TEST(complex, product_with_infinite_parts) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  enum { L = 300 };
  for (int ti = 0; ti < NCX; ti++) {
    nxv_dtype t = kCx[ti];
    if (!usable(d, t)) continue;
    static lcx a[3 * L];
    for (size_t i = 0; i < 3 * L; i++) a[i] = 1;
    a[7] = CMPLXL(INFINITY, 3), a[200] = CMPLXL(-2, 4);
    a[L] = CMPLXL(INFINITY, 3), a[2 * L - 1] = 2;
    a[2 * L + 100] = CMPLXL(INFINITY, 3), a[2 * L + 101] = 2;
    a[2 * L + 102] = 0.5, a[2 * L + 250] = -1;
    const lcx rows[3] = {CMPLXL(-INFINITY, INFINITY), CMPLXL(INFINITY, 6),
                         CMPLXL(-INFINITY, -3)};
    nxv_tensor *ta = up(d, t, 3 * L, a);
    if (!ta) continue;
    const int64_t shape[2] = {3, L};
    nxv_view va = {ta, 0, NULL};
    char tag[96];
    snprintf(tag, sizeof tag, "product of %s rows with infinite parts", nxv_dtype_name(t));
    nxv_tensor *out = NULL;
    nxv_status st = nxv_reduce(d, NXV_REDUCE_PRODUCT, 2, shape, &va, 2, &out);
    check_vals(tag, st, out, t, 3, rows, NULL, NULL, NULL);
    /* The first row's two elements alone, as a tensor of 2. */
    const int64_t two[2] = {1, 2};
    lcx pair[2] = {CMPLXL(INFINITY, 3), CMPLXL(-2, 4)};
    nxv_tensor *tp = up(d, t, 2, pair);
    if (tp) {
      nxv_view vp = {tp, 0, NULL};
      snprintf(tag, sizeof tag, "product of %s [inf + 3i, -2 + 4i]", nxv_dtype_name(t));
      out = NULL;
      st = nxv_reduce(d, NXV_REDUCE_PRODUCT, 2, two, &vp, 2, &out);
      check_vals(tag, st, out, t, 1, rows, NULL, NULL, NULL);
      release(tp);
    }
    release(ta);
  }
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Dot                                                                       */
/* ------------------------------------------------------------------------ */

/* Batched products through strides: tiles of 64 crossed, both operands
 * transposed, a broadcast batch with an offset, and k = 0. */
static const struct mcase {
  const char *name;
  uint64_t batch, m, n, k;
  int64_t a_off, a_str[3], a_count;
  int64_t b_off, b_str[3], b_count;
} kMatmul[] = {
    {"70x37 * 37x67", 1, 70, 67, 37, 0, {0, 37, 1}, 70 * 37, 0, {0, 67, 1}, 37 * 67},
    {"3 x 5x9 * 9x6, both transposed", 3, 5, 6, 9, 0, {45, 1, 5}, 135, 0, {54, 1, 9}, 162},
    {"2 x 65x20 * 20x3, B broadcast", 2, 65, 3, 20, 5, {1300, 20, 1}, 2607, 0, {0, 3, 1}, 60},
    {"17x1 * 1x130", 1, 17, 130, 1, 0, {0, 1, 1}, 17, 0, {0, 130, 1}, 130},
    {"2x0 * 0x3", 1, 2, 3, 0, 0, {0, 1, 1}, 1, 0, {0, 3, 1}, 1},
};

NXV_TEST(complex, matmul) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0x3A7C;
  for (int ti = 0; ti < NCX; ti++) {
    nxv_dtype t = kCx[ti];
    if (!usable(d, t)) continue;
    for (size_t c = 0; c < sizeof kMatmul / sizeof kMatmul[0]; c++) {
      const struct mcase *mc = &kMatmul[c];
      lcx *a = test_xcalloc((size_t)mc->a_count, sizeof(lcx));
      lcx *b = test_xcalloc((size_t)mc->b_count, sizeof(lcx));
      size_t nout = (size_t)(mc->batch * mc->m * mc->n);
      lcx *e = test_xcalloc(nout, sizeof(lcx));
      long double *tol = test_xcalloc(nout, sizeof(long double));
      for (int64_t i = 0; i < mc->a_count; i++) a[i] = gen(&r, t, D_SMALL);
      for (int64_t i = 0; i < mc->b_count; i++) b[i] = gen(&r, t, D_SMALL);
      for (uint64_t q = 0; q < mc->batch; q++)
        for (uint64_t i = 0; i < mc->m; i++)
          for (uint64_t j = 0; j < mc->n; j++) {
            lcx acc = 0;
            long double mag = 0;
            for (uint64_t p = 0; p < mc->k; p++) {
              lcx x = a[mc->a_off + (int64_t)q * mc->a_str[0] + (int64_t)i * mc->a_str[1] +
                        (int64_t)p * mc->a_str[2]];
              lcx y = b[mc->b_off + (int64_t)q * mc->b_str[0] + (int64_t)p * mc->b_str[1] +
                        (int64_t)j * mc->b_str[2]];
              acc += x * y;
              mag += cabsl(x) * cabsl(y);
            }
            size_t o = (size_t)((q * mc->m + i) * mc->n + j);
            e[o] = acc;
            tol[o] = (long double)(mc->k + 2) * 4 * eps_t(t) * mag;
          }
      nxv_tensor *ta = up(d, t, (size_t)mc->a_count, a), *tb = up(d, t, (size_t)mc->b_count, b);
      if (ta && tb) {
        nxv_matmul_desc m = {mc->batch, mc->m, mc->n, mc->k, ta, mc->a_off,
                             {mc->a_str[0], mc->a_str[1], mc->a_str[2]}, tb, mc->b_off,
                             {mc->b_str[0], mc->b_str[1], mc->b_str[2]}};
        char tag[96];
        snprintf(tag, sizeof tag, "matmul %s %s", nxv_dtype_name(t), mc->name);
        nxv_tensor *out = NULL;
        nxv_status st = nxv_matmul(d, &m, &out);
        check_vals(tag, st, out, t, nout, e, tol, NULL, NULL);
      }
      release(ta);
      release(tb);
      free(a);
      free(b);
      free(e);
      free(tol);
    }
  }
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Gather, scatter, iota, fill                                               */
/* ------------------------------------------------------------------------ */

NXV_TEST(complex, gather_scatter_iota) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0x6A7E;
  for (int ti = 0; ti < NCX; ti++) {
    nxv_dtype t = kCx[ti];
    if (!usable(d, t)) continue;
    /* take rows of a 5x7 source; indices out of range clamp */
    lcx src[35], e[64];
    for (int i = 0; i < 35; i++) src[i] = gen(&r, t, D_WIDE);
    const int64_t rows[4] = {4, 0, 9, -2}, clamped[4] = {4, 0, 4, 0};
    nxv_tensor *ts = up(d, t, 35, src), *ti_ = NULL;
    CHECK_OK(nxv_tensor_upload(d, NXV_S64, 4, rows, &ti_));
    if (ts && ti_) {
      const int64_t shape[2] = {4, 7}, src_strides[2] = {0, 1}, index_strides[2] = {1, 0};
      const int64_t axis_dims[1] = {5}, axis_strides[1] = {7};
      nxv_gather_desc g = {ts, 0, ti_, 2, shape, src_strides, index_strides,
                           1, axis_dims, axis_strides};
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 7; j++) e[i * 7 + j] = src[clamped[i] * 7 + j];
      char tag[64];
      snprintf(tag, sizeof tag, "gather %s", nxv_dtype_name(t));
      nxv_tensor *out = NULL;
      nxv_status st = nxv_gather(d, &g, &out);
      check_vals(tag, st, out, t, 28, e, NULL, NULL, NULL);
    }
    release(ts);
    release(ti_);
    /* indexed_add and indexed_put of 5 rows of 4 into a 6x4 target; row 2
     * is updated twice (in order), index 7 is out of range (skipped) */
    lcx dst[24], upd[20];
    for (int i = 0; i < 24; i++) dst[i] = gen(&r, t, D_SMALL);
    for (int i = 0; i < 20; i++) upd[i] = gen(&r, t, D_SMALL);
    const int64_t at[5] = {2, 5, 2, 7, 0};
    for (int add = 0; add < 2; add++) {
      for (int i = 0; i < 24; i++) e[i] = dst[i];
      for (int u = 0; u < 5; u++) {
        if (at[u] >= 6) continue;
        for (int j = 0; j < 4; j++) {
          lcx *x = &e[at[u] * 4 + j];
          lcx y = upd[u * 4 + j];
          *x = add ? CMPLXL(radd(t, creall(*x), creall(y)), radd(t, cimagl(*x), cimagl(y))) : y;
        }
      }
      nxv_tensor *td = up(d, t, 24, dst), *tu = up(d, t, 20, upd), *tix = NULL;
      CHECK_OK(nxv_tensor_upload(d, NXV_S64, 5, at, &tix));
      if (td && tu && tix) {
        const int64_t slice[1] = {4}, dst_strides[1] = {1}, dims[1] = {6}, astr[1] = {4};
        nxv_scatter_desc s = {td, tu, tix, 5, add, 1, slice, dst_strides, 1, dims, astr};
        char tag[64];
        snprintf(tag, sizeof tag, "%s %s", add ? "indexed_add" : "indexed_put",
                 nxv_dtype_name(t));
        nxv_status st = nxv_scatter(d, &s);
        if (st == NXV_OK) nxv_tensor_retain(td);
        check_vals(tag, st, td, t, 24, e, NULL, NULL, NULL);
      }
      release(td);
      release(tu);
      release(tix);
    }
    /* iota: (index, 0) */
    const int64_t ishape[2] = {3, 70};
    static lcx ie[210];
    for (uint32_t axis = 0; axis < 2; axis++) {
      for (int i = 0; i < 210; i++) ie[i] = axis ? i % 70 : i / 70;
      char tag[64];
      snprintf(tag, sizeof tag, "iota %s [3,70] axis %u", nxv_dtype_name(t), axis);
      nxv_tensor *out = NULL;
      nxv_status st = nxv_iota(d, t, 2, ishape, axis, &out);
      check_vals(tag, st, out, t, 210, ie, NULL, NULL, NULL);
    }
    /* transpose: a strided copy */
    lcx m[12], me[12];
    for (int i = 0; i < 12; i++) m[i] = gen(&r, t, D_WIDE);
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 4; j++) me[j * 3 + i] = m[i * 4 + j];
    nxv_tensor *tm = up(d, t, 12, m);
    if (tm) {
      const int64_t in_shape[2] = {3, 4};
      const uint32_t perm[2] = {1, 0};
      char tag[64];
      snprintf(tag, sizeof tag, "transpose %s", nxv_dtype_name(t));
      nxv_tensor *out = NULL;
      nxv_status st = nxv_transpose(d, 2, in_shape, tm, perm, &out);
      check_vals(tag, st, out, t, 12, me, NULL, m, NULL);
    }
    release(tm);
  }
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* FFT                                                                       */
/* ------------------------------------------------------------------------ */

/* Direct DFT of each of rows rows of n in long double: sign -1 forward,
 * +1 inverse (divided by n). */
static void ref_dft(const lcx *x, lcx *y, size_t rows, size_t n, int sign) {
  lcx *w = test_xcalloc(n, sizeof(lcx));
  for (size_t j = 0; j < n; j++) {
    long double th = 2 * kPi * (long double)j / (long double)n;
    w[j] = CMPLXL(cosl(th), sign * sinl(th));
  }
  for (size_t q = 0; q < rows; q++)
    for (size_t k = 0; k < n; k++) {
      lcx acc = 0;
      for (size_t j = 0; j < n; j++) acc += x[q * n + j] * w[(j * k) % n];
      y[q * n + k] = sign > 0 ? acc / (long double)n : acc;
    }
  free(w);
}

/* Tolerances of the transform of rows of x (out: the reference result):
 * errors grow with the stages and the odd length m summed directly, on
 * the scale of the row's norm; c64 on a device with float64 computes in
 * double and rounds once, so it must be within an ulp or so of each
 * component. */
static void fft_tol(nxv_dtype t, bool wide, const lcx *x, const lcx *out, size_t rows,
                    size_t n, bool inverse, long double *tol) {
  size_t m = n, p = 0;
  while (m % 2 == 0) {
    m /= 2;
    p++;
  }
  for (size_t q = 0; q < rows; q++) {
    long double norm = 0;
    for (size_t j = 0; j < n; j++) norm += cabsl(x[q * n + j]) * cabsl(x[q * n + j]);
    norm = sqrtl(norm);
    if (inverse) norm /= (long double)n;
    long double work = (long double)(p + m + 1) * 8 * norm;
    for (size_t k = 0; k < n; k++) {
      long double v = cabsl(out[q * n + k]);
      if (t == NXV_C64 && wide)
        tol[q * n + k] = FLT_EPSILON * v + DBL_EPSILON * work + FLT_MIN;
      else
        tol[q * n + k] = eps_t(t) * (work + v) + tiny_t(t);
    }
  }
}

/* inverse(forward(x)) against x: the rounding of the forward result and
 * the errors of both transforms, on the scale of the row's rms. */
static void fft_round_trip_tol(nxv_dtype t, const lcx *x, size_t rows, size_t n,
                               long double *tol) {
  size_t m = n, p = 0;
  while (m % 2 == 0) {
    m /= 2;
    p++;
  }
  for (size_t q = 0; q < rows; q++) {
    long double ss = 0;
    for (size_t j = 0; j < n; j++) ss += cabsl(x[q * n + j]) * cabsl(x[q * n + j]);
    long double rms = sqrtl(ss / (long double)n);
    for (size_t j = 0; j < n; j++)
      tol[q * n + j] = 16 * eps_t(t) * ((long double)(p + m + 1) * rms + cabsl(x[q * n + j]));
  }
}

static const size_t kFftLens[] = {1, 2, 3, 4, 5, 6, 8, 12, 15, 16, 17, 64, 96, 1000, 1024};

NXV_TEST(complex, fft) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  nxv_device_info info;
  REQUIRE_OK(nxv_device_info_get(d, &info));
  uint64_t r = 0xFF70;
  enum { ROWS = 3 };
  for (int ti = 0; ti < NCX; ti++) {
    nxv_dtype t = kCx[ti];
    if (!usable(d, t)) continue;
    for (size_t li = 0; li < sizeof kFftLens / sizeof kFftLens[0]; li++) {
      size_t n = kFftLens[li], total = ROWS * n;
      lcx *x = test_xcalloc(total, sizeof(lcx)), *e = test_xcalloc(total, sizeof(lcx));
      long double *tol = test_xcalloc(total, sizeof(long double));
      for (size_t i = 0; i < total; i++)
        x[i] = cround(t, CMPLXL(uni(&r, -1, 1), uni(&r, -1, 1)));
      nxv_tensor *ta = up(d, t, total, x);
      for (int inverse = 0; ta && inverse < 2; inverse++) {
        ref_dft(x, e, ROWS, n, inverse ? 1 : -1);
        fft_tol(t, info.float64, x, e, ROWS, n, inverse, tol);
        char tag[64];
        snprintf(tag, sizeof tag, "%s %s %d x %zu", inverse ? "ifft" : "fft", nxv_dtype_name(t),
                 ROWS, n);
        nxv_tensor *out = NULL;
        nxv_status st = nxv_fft(d, ta, ROWS, n, inverse, 0.0, &out);
        if (st == NXV_OK && !inverse) {
          /* inverse(forward(x)) = x, within the rounding of the forward
           * result: the inverse's error on the forward result's scale */
          nxv_tensor *rt = NULL;
          nxv_status st2 = nxv_fft(d, out, ROWS, n, true, 0.0, &rt);
          long double *tol2 = test_xcalloc(total, sizeof(long double));
          fft_round_trip_tol(t, x, ROWS, n, tol2);
          char tag2[64];
          snprintf(tag2, sizeof tag2, "ifft(fft) %s %d x %zu", nxv_dtype_name(t), ROWS, n);
          nxv_tensor_retain(out);
          check_vals(tag, st, out, t, total, e, tol, NULL, NULL);
          check_vals(tag2, st2, rt, t, total, x, tol2, NULL, NULL);
          free(tol2);
          nxv_tensor_release(out);
        } else {
          check_vals(tag, st, out, t, total, e, tol, NULL, NULL);
        }
      }
      /* the input is read, never written */
      if (ta) {
        char tag[64];
        snprintf(tag, sizeof tag, "fft %s %zu input after", nxv_dtype_name(t), n);
        nxv_tensor_retain(ta);
        check_vals(tag, NXV_OK, ta, t, total, x, NULL, NULL, NULL);
      }
      release(ta);
      free(x);
      free(e);
      free(tol);
    }
  }
  nxv_device_release(d);
}

/* eps flushing: components of magnitude <= eps come out as exactly +0;
 * larger ones are kept. */
NXV_TEST(complex, fft_eps) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t r = 0xE95;
  enum { ROWS = 2, LEN = 24 };
  for (int ti = 0; ti < NCX; ti++) {
    nxv_dtype t = kCx[ti];
    if (!usable(d, t)) continue;
    lcx x[ROWS * LEN], e[ROWS * LEN];
    /* row 0: a cosine, whose transform is n/2 at k = 1 and n - 1 and
     * rounding noise elsewhere; row 1: random */
    for (int j = 0; j < LEN; j++) x[j] = cround(t, CMPLXL(cosl(2 * kPi * j / LEN), 0));
    for (int j = LEN; j < ROWS * LEN; j++) x[j] = cround(t, CMPLXL(uni(&r, -1, 1), uni(&r, -1, 1)));
    nxv_tensor *ta = up(d, t, ROWS * LEN, x);
    if (!ta) continue;
    static const double epss[] = {1e-4, 1.0, 2.5};
    for (int inverse = 0; inverse < 2; inverse++) {
      ref_dft(x, e, ROWS, LEN, inverse ? 1 : -1);
      for (size_t ei = 0; ei < sizeof epss / sizeof epss[0]; ei++) {
        double eps = epss[ei];
        nxv_tensor *out = NULL;
        nxv_status st = nxv_fft(d, ta, ROWS, LEN, inverse, eps, &out);
        CHECK_MSG(st == NXV_OK, "fft eps %g: %s", eps, nxv_last_error());
        if (st != NXV_OK) continue;
        void *h = test_xcalloc(ROWS * LEN, nxv_dtype_size(t));
        CHECK_OK(nxv_tensor_download(out, 0, ROWS * LEN, h));
        size_t bad = 0, flushed = 0;
        long double slack = 64 * eps_t(t) * LEN; /* the computation's error */
        for (size_t i = 0; i < ROWS * LEN; i++) {
          lcx g = cget(t, h, i);
          long double gv[2] = {creall(g), cimagl(g)}, ev[2] = {creall(e[i]), cimagl(e[i])};
          for (int c = 0; c < 2; c++) {
            bool ok;
            if (fabsl(gv[c]) <= eps)
              ok = gv[c] == 0 && !signbit(gv[c]) && fabsl(ev[c]) <= eps + slack;
            else
              ok = fabsl(ev[c]) > eps - slack && fabsl(gv[c] - ev[c]) <= slack;
            if (gv[c] == 0) flushed++;
            if (!ok && ++bad <= MAX_REPORT)
              fprintf(stderr, "    %s %s eps %g [%zu].%d: expected %.17Lg, got %.17Lg\n",
                      inverse ? "ifft" : "fft", nxv_dtype_name(t), eps, i, c, ev[c], gv[c]);
          }
        }
        CHECK_MSG(bad == 0, "%s %s eps %g: %zu components wrong", inverse ? "ifft" : "fft",
                  nxv_dtype_name(t), eps, bad);
        CHECK(flushed > 0);
        free(h);
        nxv_tensor_release(out);
      }
    }
    release(ta);
  }
  nxv_device_release(d);
}

NXV_TEST(complex, fft_bad_arguments) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  float f[12] = {0};
  nxv_tensor *real = NULL, *out;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, 12, f, &real));
  EXPECT_FAIL_TAG(NXV_ERR_INVALID_ARGUMENT, out, "fft of f32", nxv_fft(d, real, 3, 4, false, 0, &out));
  EXPECT_FAIL_TAG(NXV_ERR_INVALID_ARGUMENT, out, "ifft of f32", nxv_fft(d, real, 3, 4, true, 0, &out));
  release(real);
  for (int ti = 0; ti < NCX; ti++) {
    nxv_dtype t = kCx[ti];
    if (!usable(d, t)) continue;
    lcx z[12] = {0};
    nxv_tensor *a = up(d, t, 12, z);
    if (!a) continue;
    EXPECT_FAIL_TAG(NXV_ERR_INVALID_ARGUMENT, out, "rows * n != count",
                nxv_fft(d, a, 2, 5, false, 0, &out));
    EXPECT_FAIL_TAG(NXV_ERR_INVALID_ARGUMENT, out, "rows * n > count",
                nxv_fft(d, a, 4, 4, true, 0, &out));
    EXPECT_FAIL_TAG(NXV_ERR_INVALID_ARGUMENT, out, "n = 0", nxv_fft(d, a, 12, 0, false, 0, &out));
    EXPECT_FAIL_TAG(NXV_ERR_INVALID_ARGUMENT, out, "n = 0, rows = 0",
                nxv_fft(d, a, 0, 0, false, 0, &out));
    EXPECT_FAIL_TAG(NXV_ERR_INVALID_ARGUMENT, out, "NULL device",
                nxv_fft(NULL, a, 3, 4, false, 0, &out));
    char primed[512];
    nxv_test_prime_error(primed, sizeof primed);
    CHECK(nxv_fft(d, a, 3, 4, false, 0, NULL) == NXV_ERR_INVALID_ARGUMENT);
    CHECK(strcmp(nxv_last_error(), primed) != 0);
    /* a NaN or negative eps flushes nothing: an impulse of 1e-3 at the
     * start of each row transforms to 1e-3 everywhere, exactly */
    lcx one[12], e[12];
    for (int i = 0; i < 12; i++) one[i] = i % 4 ? 0 : cround(t, CMPLXL(1e-3, -2e-3));
    for (int i = 0; i < 12; i++) e[i] = one[i - i % 4];
    nxv_tensor *ones = up(d, t, 12, one);
    if (ones) {
      nxv_tensor *o1 = NULL, *o2 = NULL;
      nxv_status s1 = nxv_fft(d, ones, 3, 4, false, NAN, &o1);
      nxv_status s2 = nxv_fft(d, ones, 3, 4, false, -1.0, &o2);
      check_vals("fft eps NaN", s1, o1, t, 12, e, NULL, NULL, NULL);
      check_vals("fft eps -1", s2, o2, t, 12, e, NULL, NULL, NULL);
    }
    release(ones);
    release(a);
  }
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Support queries against the ops                                           */
/* ------------------------------------------------------------------------ */

NXV_TEST(complex, supported_queries_match_ops) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  const uint64_t bin_ok = 1u << NXV_ADD | 1u << NXV_SUB | 1u << NXV_MUL | 1u << NXV_DIV |
                          1u << NXV_POW;
  uint64_t un_ok = 0;
  for (size_t i = 0; i < NUNARY; i++) un_ok |= 1ull << kUnary[i].op;
  for (int ti = 0; ti < NCX; ti++) {
    nxv_dtype t = kCx[ti];
    if (!usable(d, t)) continue;
    CHECK(nxv_convert_supported(d, t));
    CHECK(nxv_mask_type_supported(d, t));
    lcx z[4] = {1, CMPLXL(2, -1), CMPLXL(0, 3), CMPLXL(-4, 0.5)};
    nxv_tensor *a = up(d, t, 4, z);
    if (!a) continue;
    const int64_t shape[1] = {4};
    nxv_view v = {a, 0, NULL};
    for (int o = 0; o < NXV_BINARY_OP_COUNT; o++) {
      nxv_binary_op op = (nxv_binary_op)o;
      bool want = (bin_ok >> o) & 1u;
      char tag[64];
      snprintf(tag, sizeof tag, "%s %s", nxv_binary_op_name(op), nxv_dtype_name(t));
      CHECK_MSG(nxv_binary_supported(d, op, t) == want, "%s: supported query", tag);
      nxv_tensor *out = NULL;
      if (want) {
        nxv_status st = nxv_binary(d, op, 1, shape, &v, &v, &out);
        CHECK_MSG(st == NXV_OK, "%s: %s", tag, nxv_last_error());
        if (st == NXV_OK) {
          CHECK(nxv_tensor_dtype(out) == t && nxv_tensor_count(out) == 4);
          nxv_tensor_release(out);
        }
      } else {
        EXPECT_FAIL_TAG(NXV_ERR_UNSUPPORTED, out, tag, nxv_binary(d, op, 1, shape, &v, &v, &out));
      }
    }
    for (int o = 0; o < NXV_UNARY_OP_COUNT; o++) {
      nxv_unary_op op = (nxv_unary_op)o;
      bool want = (un_ok >> o) & 1u;
      char tag[64];
      snprintf(tag, sizeof tag, "%s %s", nxv_unary_op_name(op), nxv_dtype_name(t));
      CHECK_MSG(nxv_unary_supported(d, op, t) == want, "%s: supported query", tag);
      /* complex.unary runs and checks each supported op */
      nxv_tensor *out;
      if (!want)
        EXPECT_FAIL_TAG(NXV_ERR_UNSUPPORTED, out, tag, nxv_unary(d, op, 1, shape, &v, &out));
    }
    for (int o = 0; o < NXV_COMPARE_OP_COUNT; o++) {
      nxv_compare_op op = (nxv_compare_op)o;
      bool want = op < NXV_LESS || op > NXV_GREATER_EQUAL;
      char tag[64];
      snprintf(tag, sizeof tag, "%s %s", nxv_compare_op_name(op), nxv_dtype_name(t));
      CHECK_MSG(nxv_compare_supported(d, op, t) == want, "%s: supported query", tag);
      nxv_tensor *out = NULL;
      if (want) {
        nxv_status st = nxv_compare(d, op, 1, shape, &v, &v, &out);
        CHECK_MSG(st == NXV_OK, "%s: %s", tag, nxv_last_error());
        release(st == NXV_OK ? out : NULL);
      } else {
        EXPECT_FAIL_TAG(NXV_ERR_UNSUPPORTED, out, tag, nxv_compare(d, op, 1, shape, &v, &v, &out));
      }
    }
    release(a);
  }
  /* The complex-only ops on real types. */
  static const nxv_dtype reals[] = {NXV_F32, NXV_F64, NXV_S32};
  static const nxv_unary_op cx_only[] = {NXV_CONJ, NXV_REAL, NXV_IMAG, NXV_PHASE};
  for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
    if (!nxv_convert_supported(d, reals[i])) continue;
    long double vals[4] = {1, -2, 3, 0};
    nxv_tensor *a = up_real(d, reals[i], 4, vals);
    if (!a) continue;
    const int64_t shape[1] = {4};
    nxv_view v = {a, 0, NULL};
    for (size_t o = 0; o < sizeof cx_only / sizeof cx_only[0]; o++) {
      char tag[64];
      snprintf(tag, sizeof tag, "%s %s", nxv_unary_op_name(cx_only[o]), nxv_dtype_name(reals[i]));
      CHECK_MSG(!nxv_unary_supported(d, cx_only[o], reals[i]), "%s: supported query", tag);
      nxv_tensor *out;
      EXPECT_FAIL_TAG(NXV_ERR_UNSUPPORTED, out, tag, nxv_unary(d, cx_only[o], 1, shape, &v, &out));
    }
    release(a);
  }
  nxv_device_release(d);
}
