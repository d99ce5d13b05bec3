/*
 * Convolution and window scatter tests against a CPU reference.
 *
 * conv: random inputs over 1 to 4 spatial axes with strides, positive and
 * negative padding, input and kernel dilation, feature and batch groups and
 * odd sizes, on every real type the device holds. The reference builds the
 * zero-padded, dilated input and the dilated kernel explicitly and slides
 * one over the other, in double (floats) or in 64-bit integers wrapped to
 * the type's width (integers, exact). Float inputs are small multiples of
 * 1/8 where the result type is f16 or bf16 (so f32 accumulation is exact
 * and only the final rounding differs: one ulp), random reals otherwise,
 * checked against an error bound proportional to the sum of the absolute
 * products.
 *
 * window scatter: the reference scans each window in row-major order
 * (positions inside the input only, >= or <=, so ties go to the last
 * position) and adds the window's source value to the selected element in
 * window order, starting from init. Sources are small multiples of 1/8, so
 * every sum is exact in every type and results compare bit for bit.
 *
 * Complex convolutions (c64, c128) are checked against four real
 * reference convolutions of the real and imaginary parts.
 *
 * Outputs are poisoned by the test device, so unwritten elements fail.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define MAX_REPORT 5

/* ------------------------------------------------------------------------ */
/* Element types on the host                                                 */
/* ------------------------------------------------------------------------ */

static const nxv_dtype kAllTypes[] = {NXV_S8,  NXV_S16, NXV_S32,  NXV_S64,
                                      NXV_U8,  NXV_U16, NXV_U32,  NXV_U64,
                                      NXV_F16, NXV_BF16, NXV_F32, NXV_F64};
#define NALL (sizeof kAllTypes / sizeof kAllTypes[0])

static bool is_fp(nxv_dtype t) { return t >= NXV_F16 && t <= NXV_F64; }
static bool is_signed(nxv_dtype t) { return t <= NXV_S64; }
static int bits_of(nxv_dtype t) { return 8 * (int)nxv_dtype_size(t); }

static double f32_bits_to(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Element i of a host buffer of type t, as a double (floats) or as 64-bit
 * two's complement (integers, sign- or zero-extended). */
static double get_f(nxv_dtype t, const void *p, uint64_t i) {
  switch (t) {
    case NXV_F16: return nxv_test_f16_value(((const uint16_t *)p)[i]);
    case NXV_BF16: return f32_bits_to((uint32_t)((const uint16_t *)p)[i] << 16);
    case NXV_F32: return ((const float *)p)[i];
    case NXV_F64: return ((const double *)p)[i];
    default: return 0;
  }
}

static int64_t get_i(nxv_dtype t, const void *p, uint64_t i) {
  switch (t) {
    case NXV_S8: return ((const int8_t *)p)[i];
    case NXV_S16: return ((const int16_t *)p)[i];
    case NXV_S32: return ((const int32_t *)p)[i];
    case NXV_S64: return ((const int64_t *)p)[i];
    case NXV_U8: return ((const uint8_t *)p)[i];
    case NXV_U16: return ((const uint16_t *)p)[i];
    case NXV_U32: return ((const uint32_t *)p)[i];
    case NXV_U64: return (int64_t)((const uint64_t *)p)[i];
    default: return 0;
  }
}

/* Stores v (a double for floats: rounded to the type, bf16 by truncation
 * as the kernels store it; an integer wrapped to the type's width). */
static void set_f(nxv_dtype t, void *p, uint64_t i, double v) {
  switch (t) {
    case NXV_F16: ((uint16_t *)p)[i] = nxv_test_f16_bits(v); break;
    case NXV_BF16: {
      float f = (float)v;
      uint32_t u;
      memcpy(&u, &f, 4);
      ((uint16_t *)p)[i] = isnan(f) ? 0x7FC0u : (uint16_t)(u >> 16);
      break;
    }
    case NXV_F32: ((float *)p)[i] = (float)v; break;
    case NXV_F64: ((double *)p)[i] = v; break;
    default: break;
  }
}

static void set_i(nxv_dtype t, void *p, uint64_t i, int64_t v) {
  switch (nxv_dtype_size(t)) {
    case 1: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case 2: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case 4: ((uint32_t *)p)[i] = (uint32_t)v; break;
    default: ((uint64_t *)p)[i] = (uint64_t)v; break;
  }
}

/* v wrapped to the width of integer type t, extended back to 64 bits. */
static int64_t wrap_i(nxv_dtype t, int64_t v) {
  int b = bits_of(t);
  if (b == 64) return v;
  uint64_t u = (uint64_t)v & ((1ull << b) - 1);
  if (is_signed(t) && ((u >> (b - 1)) & 1u)) u |= ~0ull << b;
  return (int64_t)u;
}

/* One ulp of float type t at magnitude v (normal range). */
static double ulp_at(nxv_dtype t, double v) {
  int p = t == NXV_F16 ? 11 : t == NXV_BF16 ? 8 : t == NXV_F32 ? 24 : 53;
  int emin = t == NXV_F16 ? -13 : t == NXV_F64 ? -1021 : -125;
  int e = emin;
  if (v != 0 && isfinite(v)) {
    frexp(v, &e);
    if (e < emin) e = emin;
  }
  return ldexp(1.0, e - p);
}

static bool device_has(nxv_device *d, nxv_dtype t) { return nxv_convert_supported(d, t); }

static nxv_tensor *upload(nxv_device *d, nxv_dtype t, uint64_t n, const void *data) {
  nxv_tensor *x = NULL;
  CHECK_OK(nxv_tensor_upload(d, t, n, data, &x));
  return x;
}

static void *download(nxv_tensor *x, uint64_t n, nxv_dtype t) {
  void *h = test_xcalloc(n, nxv_dtype_size(t));
  CHECK_OK(nxv_tensor_download(x, 0, n, h));
  return h;
}

static uint64_t prod(uint32_t rank, const int64_t *shape) {
  uint64_t n = 1;
  for (uint32_t i = 0; i < rank; i++) n *= (uint64_t)shape[i];
  return n;
}

/* Fills a host buffer of type t with random values: integers over a small
 * range around zero (wrapping is still exercised by the sums of narrow
 * types), floats as multiples of 1/8 when exact is set, reals otherwise. */
static void fill_random(nxv_dtype t, void *p, uint64_t n, bool exact, uint64_t *rng) {
  for (uint64_t i = 0; i < n; i++) {
    if (is_fp(t)) {
      double v = exact ? (double)((int64_t)(test_rand_u64(rng) % 33) - 16) / 8.0
                       : test_rand_uniform(rng, -2.0, 2.0);
      set_f(t, p, i, v);
    } else {
      int64_t v = (int64_t)(test_rand_u64(rng) % 15) - (is_signed(t) ? 7 : 0);
      set_i(t, p, i, v);
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Convolution                                                               */
/* ------------------------------------------------------------------------ */

typedef struct conv_case {
  const char *name;
  uint32_t rank;
  int64_t in[NXV_MAX_RANK], k[NXV_MAX_RANK];
  int64_t strides[NXV_MAX_RANK], lo[NXV_MAX_RANK], hi[NXV_MAX_RANK];
  int64_t idil[NXV_MAX_RANK], kdil[NXV_MAX_RANK];
  int64_t fg, bg;
} conv_case;

/* Fills defaults (strides and dilations 1, groups 1) where left zero. */
static void conv_defaults(conv_case *c) {
  for (uint32_t d = 0; d + 2 < c->rank; d++) {
    if (!c->strides[d]) c->strides[d] = 1;
    if (!c->idil[d]) c->idil[d] = 1;
    if (!c->kdil[d]) c->kdil[d] = 1;
  }
  if (!c->fg) c->fg = 1;
  if (!c->bg) c->bg = 1;
}

static int64_t dil_len(int64_t n, int64_t dil) { return n == 0 ? 0 : (n - 1) * dil + 1; }

static void conv_out_shape(const conv_case *c, int64_t *out) {
  out[0] = c->in[0] / c->bg;
  out[1] = c->k[0];
  for (uint32_t d = 0; d + 2 < c->rank; d++) {
    int64_t padded = c->lo[d] + dil_len(c->in[2 + d], c->idil[d]) + c->hi[d];
    int64_t taps = dil_len(c->k[2 + d], c->kdil[d]);
    out[2 + d] = padded >= taps ? (padded - taps) / c->strides[d] + 1 : 0;
  }
}

/* Row-major multi-index increment over dims (rank n); false at the end. */
static bool next_idx(uint32_t n, const int64_t *dims, int64_t *idx) {
  for (int i = (int)n - 1; i >= 0; i--) {
    if (++idx[i] < dims[i]) return true;
    idx[i] = 0;
  }
  return false;
}

/* The reference: pads and dilates the input into a dense [N, C, padded...]
 * array and dilates the kernel into [O, Ck, taps...], both in double or
 * int64, then slides the kernel with the strides. */
typedef struct conv_ref {
  double *f;
  int64_t *i;
  double *mag; /* sum of |products| per output (floats) */
} conv_ref;

static void conv_reference(const conv_case *c, nxv_dtype t, const void *in, const void *ker,
                           const int64_t *oshape, conv_ref *r) {
  uint32_t S = c->rank - 2;
  int64_t pdims[NXV_MAX_RANK], tdims[NXV_MAX_RANK];
  uint64_t psp = 1, tsp = 1, isp = 1, ksp = 1, osp = 1;
  for (uint32_t d = 0; d < S; d++) {
    pdims[d] = c->lo[d] + dil_len(c->in[2 + d], c->idil[d]) + c->hi[d];
    tdims[d] = dil_len(c->k[2 + d], c->kdil[d]);
    psp *= (uint64_t)(pdims[d] > 0 ? pdims[d] : 0);
    tsp *= (uint64_t)tdims[d];
    isp *= (uint64_t)c->in[2 + d];
    ksp *= (uint64_t)c->k[2 + d];
    osp *= (uint64_t)oshape[2 + d];
  }
  int64_t N = c->in[0], C = c->in[1], O = c->k[0], Ck = c->k[1];
  bool fp = is_fp(t);
  /* Padded input. */
  double *pf = test_xcalloc((size_t)(N * C) * psp, sizeof *pf);
  int64_t *pi = test_xcalloc((size_t)(N * C) * psp, sizeof *pi);
  if (psp) {
    for (int64_t nc = 0; nc < N * C; nc++) {
      int64_t pidx[NXV_MAX_RANK] = {0};
      uint64_t pos = 0;
      do {
        bool inside = true;
        uint64_t src = 0;
        for (uint32_t d = 0; d < S; d++) {
          int64_t q = pidx[d] - c->lo[d];
          if (q < 0 || q % c->idil[d] || q / c->idil[d] >= c->in[2 + d]) inside = false;
          else src = src * (uint64_t)c->in[2 + d] + (uint64_t)(q / c->idil[d]);
        }
        if (inside) {
          uint64_t at = (uint64_t)nc * isp + src;
          if (fp) pf[(uint64_t)nc * psp + pos] = get_f(t, in, at);
          else pi[(uint64_t)nc * psp + pos] = get_i(t, in, at);
        }
        pos++;
      } while (next_idx(S, pdims, pidx));
    }
  }
  /* Dilated kernel. */
  double *kf = test_xcalloc((size_t)(O * Ck) * tsp, sizeof *kf);
  int64_t *ki = test_xcalloc((size_t)(O * Ck) * tsp, sizeof *ki);
  for (int64_t oc = 0; oc < O * Ck && tsp; oc++) {
    int64_t kidx[NXV_MAX_RANK] = {0};
    uint64_t src = 0;
    do {
      uint64_t dst = 0;
      for (uint32_t d = 0; d < S; d++) dst = dst * (uint64_t)tdims[d] + (uint64_t)(kidx[d] * c->kdil[d]);
      if (fp) kf[(uint64_t)oc * tsp + dst] = get_f(t, ker, (uint64_t)oc * ksp + src);
      else ki[(uint64_t)oc * tsp + dst] = get_i(t, ker, (uint64_t)oc * ksp + src);
      src++;
    } while (next_idx(S, c->k + 2, kidx));
  }
  /* Slide. */
  int64_t Nout = oshape[0], groups = c->fg * c->bg, opg = O / groups;
  for (int64_t n = 0; n < Nout; n++)
    for (int64_t o = 0; o < O; o++) {
      int64_t g = o / opg;
      int64_t bn = c->bg > 1 ? n + g * Nout : n;
      int64_t cb = c->fg > 1 ? g * Ck : 0;
      int64_t oidx[NXV_MAX_RANK] = {0};
      uint64_t opos = 0;
      if (!osp) continue;
      do {
        double acc = 0, mag = 0;
        uint64_t iacc = 0;
        for (int64_t ch = 0; ch < Ck; ch++) {
          int64_t tidx[NXV_MAX_RANK] = {0};
          uint64_t tpos = 0;
          do {
            uint64_t ppos = 0;
            for (uint32_t d = 0; d < S; d++)
              ppos = ppos * (uint64_t)pdims[d] +
                     (uint64_t)(oidx[d] * c->strides[d] + tidx[d]);
            uint64_t pin = (uint64_t)(bn * C + cb + ch) * psp + ppos;
            uint64_t pk = (uint64_t)(o * Ck + ch) * tsp + tpos;
            if (fp) {
              double p = pf[pin] * kf[pk];
              acc += p;
              mag += fabs(p);
            } else {
              iacc += (uint64_t)pi[pin] * (uint64_t)ki[pk];
            }
            tpos++;
          } while (next_idx(S, tdims, tidx));
        }
        uint64_t at = ((uint64_t)n * (uint64_t)O + (uint64_t)o) * osp + opos;
        if (fp) {
          r->f[at] = acc;
          r->mag[at] = mag;
        } else {
          r->i[at] = wrap_i(t, (int64_t)iacc);
        }
        opos++;
      } while (next_idx(S, oshape + 2, oidx));
    }
  free(pf);
  free(pi);
  free(kf);
  free(ki);
}

static void run_conv(nxv_device *d, conv_case c, nxv_dtype t, uint64_t *rng) {
  conv_defaults(&c);
  int64_t oshape[NXV_MAX_RANK];
  conv_out_shape(&c, oshape);
  uint64_t n_in = prod(c.rank, c.in), n_k = prod(c.rank, c.k), n_out = prod(c.rank, oshape);
  bool exact = t == NXV_F16 || t == NXV_BF16;
  size_t es = nxv_dtype_size(t);
  void *hin = test_xcalloc(n_in, es), *hk = test_xcalloc(n_k, es);
  fill_random(t, hin, n_in, exact, rng);
  fill_random(t, hk, n_k, exact, rng);
  nxv_tensor *tin = upload(d, t, n_in, hin), *tk = upload(d, t, n_k, hk), *out = NULL;
  if (tin && tk) {
    nxv_conv_desc desc = {.input = tin, .kernel = tk, .rank = c.rank, .in_shape = c.in,
                          .kernel_shape = c.k, .out_shape = oshape, .strides = c.strides,
                          .pad_lo = c.lo, .pad_hi = c.hi, .input_dilation = c.idil,
                          .kernel_dilation = c.kdil, .feature_groups = c.fg,
                          .batch_groups = c.bg};
    nxv_status st = nxv_conv(d, &desc, &out);
    CHECK_MSG(st == NXV_OK, "conv %s on %s: %s", c.name, nxv_dtype_name(t), nxv_last_error());
  }
  if (out) {
    CHECK(nxv_tensor_dtype(out) == t && nxv_tensor_count(out) == n_out);
    void *got = download(out, n_out, t);
    conv_ref r = {test_xcalloc(n_out, sizeof(double)), test_xcalloc(n_out, sizeof(int64_t)),
                  test_xcalloc(n_out, sizeof(double))};
    conv_reference(&c, t, hin, hk, oshape, &r);
    int bad = 0;
    double acc_eps = t == NXV_F64 ? 0x1p-52 : 0x1p-23;
    uint64_t terms = n_k / (uint64_t)(c.k[0] ? c.k[0] : 1);
    for (uint64_t i = 0; i < n_out; i++) {
      bool ok;
      double g = 0, w = 0;
      if (is_fp(t)) {
        g = get_f(t, got, i);
        w = r.f[i];
        double tol = exact ? ulp_at(t, w)
                           : acc_eps * (double)(terms + 1) * r.mag[i] + ulp_at(t, w);
        ok = fabs(g - w) <= tol;
      } else {
        ok = get_i(t, got, i) == r.i[i];
        g = (double)get_i(t, got, i);
        w = (double)r.i[i];
      }
      if (!ok && bad++ < MAX_REPORT)
        CHECK_MSG(ok, "conv %s on %s: element %llu is %.9g, expected %.9g", c.name,
                  nxv_dtype_name(t), (unsigned long long)i, g, w);
      else if (!ok)
        atomic_fetch_add(&nxv_test_failures, 1);
    }
    free(r.f);
    free(r.i);
    free(r.mag);
    free(got);
    nxv_tensor_release(out);
  }
  if (tin) nxv_tensor_release(tin);
  if (tk) nxv_tensor_release(tk);
  free(hin);
  free(hk);
}

static const conv_case kConvCases[] = {
    {.name = "1d stride 2, padding 1/2", .rank = 3, .in = {2, 3, 11}, .k = {4, 3, 3},
     .strides = {2}, .lo = {1}, .hi = {2}},
    {.name = "1d negative padding, kernel dilation", .rank = 3, .in = {3, 2, 13},
     .k = {5, 2, 4}, .lo = {-2}, .hi = {-1}, .kdil = {2}},
    {.name = "2d feature groups, dilations, mixed padding", .rank = 4, .in = {2, 4, 7, 9},
     .k = {6, 2, 3, 2}, .strides = {1, 2}, .lo = {-1, 0}, .hi = {2, 1}, .idil = {2, 1},
     .kdil = {1, 3}, .fg = 2},
    {.name = "2d batch groups", .rank = 4, .in = {6, 3, 5, 5}, .k = {4, 3, 3, 3},
     .lo = {1, 1}, .hi = {1, 1}, .bg = 2},
    {.name = "2d batch groups 3, strides", .rank = 4, .in = {6, 2, 6, 7}, .k = {6, 2, 2, 3},
     .strides = {2, 1}, .lo = {0, 2}, .hi = {1, 0}, .bg = 3},
    {.name = "2d depthwise (groups = channels), odd sizes", .rank = 4, .in = {3, 5, 17, 19},
     .k = {5, 1, 5, 5}, .lo = {2, 2}, .hi = {2, 2}, .fg = 5},
    {.name = "2d same padding", .rank = 4, .in = {3, 5, 13, 11}, .k = {7, 5, 3, 3},
     .lo = {1, 1}, .hi = {1, 1}},
    {.name = "2d 11 output channels (a full and a partial block), strides, dilation",
     .rank = 4, .in = {2, 3, 9, 10}, .k = {11, 3, 3, 2}, .strides = {2, 1}, .lo = {1, 0},
     .hi = {1, 2}, .kdil = {1, 2}},
    {.name = "2d transposed-conv geometry (input dilation 3, padding 2)", .rank = 4,
     .in = {2, 3, 4, 5}, .k = {2, 3, 3, 3}, .lo = {2, 2}, .hi = {2, 3}, .idil = {3, 3}},
    {.name = "3d", .rank = 5, .in = {1, 2, 5, 4, 6}, .k = {3, 2, 2, 3, 2},
     .strides = {1, 2, 1}, .lo = {1, 2, 0}, .hi = {0, -1, 0}, .kdil = {2, 1, 1}},
    {.name = "4d spatial", .rank = 6, .in = {1, 2, 3, 4, 3, 4}, .k = {2, 2, 2, 2, 2, 3},
     .strides = {1, 2, 1, 1}, .lo = {0, 1, 0, 1}, .hi = {0, 0, 1, 0}, .idil = {1, 1, 2, 1}},
    {.name = "no spatial axes (a matrix product)", .rank = 2, .in = {3, 5}, .k = {4, 5}},
    {.name = "kernel larger than the input", .rank = 3, .in = {1, 1, 3}, .k = {1, 1, 5},
     .lo = {2}, .hi = {2}},
    /* Few outputs with long sums, as in kernel gradients (a workgroup per
     * output): fewer taps than a workgroup, then more, with batch groups. */
    {.name = "kernel-gradient geometry", .rank = 4, .in = {1, 12, 14, 15},
     .k = {4, 12, 12, 13}},
    {.name = "kernel-gradient geometry, batch groups, padding, 992 taps", .rank = 4,
     .in = {3, 2, 33, 34}, .k = {6, 2, 31, 32}, .lo = {1, 0}, .hi = {0, 1}, .bg = 3},
    {.name = "few outputs, 9 taps, 300 channels (threads split channels)", .rank = 4,
     .in = {2, 300, 5, 5}, .k = {3, 300, 3, 3}, .kdil = {1, 2}, .lo = {0, 1}, .hi = {0, 1}},
    {.name = "few outputs, long sums, no spatial axes", .rank = 2, .in = {2, 600},
     .k = {3, 600}},
};
#define NCONV (sizeof kConvCases / sizeof kConvCases[0])

NXV_TEST(conv, every_type_and_geometry) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t rng = 0xC0417;
  for (size_t ti = 0; ti < NALL; ti++) {
    nxv_dtype t = kAllTypes[ti];
    if (!device_has(d, t)) {
      fprintf(stderr, "  note: device lacks %s, skipped\n", nxv_dtype_name(t));
      continue;
    }
    for (size_t ci = 0; ci < NCONV; ci++) run_conv(d, kConvCases[ci], t, &rng);
  }
  nxv_device_release(d);
}

NXV_TEST(conv, larger_f32_and_f16) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t rng = 0xC0418;
  conv_case big = {.name = "32x32 image, 8 -> 16 channels, 3x3", .rank = 4,
                   .in = {4, 8, 32, 32}, .k = {16, 8, 3, 3}, .lo = {1, 1}, .hi = {1, 1}};
  conv_case strided = {.name = "strided 5x5, 4 feature groups", .rank = 4,
                       .in = {2, 8, 29, 31}, .k = {12, 2, 5, 5}, .strides = {2, 3},
                       .lo = {2, 1}, .hi = {2, 0}, .fg = 4};
  /* A small CNN's kernel gradient (batch 128 as channels, 26x26 taps,
   * 144 outputs): its channels split over 8 workgroups per output. */
  conv_case kgrad = {.name = "kernel gradient 1x128x28x28 by 16x128x26x26", .rank = 4,
                     .in = {1, 128, 28, 28}, .k = {16, 128, 26, 26}};
  run_conv(d, big, NXV_F32, &rng);
  run_conv(d, strided, NXV_F32, &rng);
  run_conv(d, kgrad, NXV_F32, &rng);
  if (device_has(d, NXV_F16)) run_conv(d, big, NXV_F16, &rng);
  if (device_has(d, NXV_F16)) run_conv(d, kgrad, NXV_F16, &rng);
  if (device_has(d, NXV_F64)) run_conv(d, kgrad, NXV_F64, &rng);
  nxv_device_release(d);
}

/* Complex convolution: the reference is four real convolutions of the
 * real and imaginary parts, in double. */
static void run_conv_complex(nxv_device *d, conv_case c, nxv_dtype t, uint64_t *rng) {
  conv_defaults(&c);
  int64_t oshape[NXV_MAX_RANK];
  conv_out_shape(&c, oshape);
  uint64_t n_in = prod(c.rank, c.in), n_k = prod(c.rank, c.k), n_out = prod(c.rank, oshape);
  bool c64 = t == NXV_C64;
  double *part[4]; /* input re, input im, kernel re, kernel im */
  uint64_t counts[4] = {n_in, n_in, n_k, n_k};
  for (int p = 0; p < 4; p++) {
    part[p] = test_xcalloc(counts[p], sizeof(double));
    for (uint64_t i = 0; i < counts[p]; i++) {
      double v = test_rand_uniform(rng, -1.0, 1.0);
      part[p][i] = c64 ? (double)(float)v : v;
    }
  }
  void *hin = test_xcalloc(2 * n_in, sizeof(double)), *hk = test_xcalloc(2 * n_k, sizeof(double));
  for (int p = 0; p < 4; p++)
    for (uint64_t i = 0; i < counts[p]; i++) {
      void *h = p < 2 ? hin : hk;
      uint64_t at = 2 * i + (uint64_t)(p % 2);
      if (c64) ((float *)h)[at] = (float)part[p][i];
      else ((double *)h)[at] = part[p][i];
    }
  nxv_tensor *tin = upload(d, t, n_in, hin), *tk = upload(d, t, n_k, hk), *out = NULL;
  if (tin && tk) {
    nxv_conv_desc desc = {.input = tin, .kernel = tk, .rank = c.rank, .in_shape = c.in,
                          .kernel_shape = c.k, .out_shape = oshape, .strides = c.strides,
                          .pad_lo = c.lo, .pad_hi = c.hi, .input_dilation = c.idil,
                          .kernel_dilation = c.kdil, .feature_groups = c.fg,
                          .batch_groups = c.bg};
    nxv_status st = nxv_conv(d, &desc, &out);
    CHECK_MSG(st == NXV_OK, "conv %s on %s: %s", c.name, nxv_dtype_name(t), nxv_last_error());
  }
  if (out) {
    CHECK(nxv_tensor_dtype(out) == t && nxv_tensor_count(out) == n_out);
    void *got = test_xcalloc(2 * n_out, sizeof(double));
    CHECK_OK(nxv_tensor_download(out, 0, n_out, got));
    /* rr = re * re, ii = im * im, ri = re * im, ir = im * re */
    const int pairs[4][2] = {{0, 2}, {1, 3}, {0, 3}, {1, 2}};
    conv_ref r[4];
    for (int q = 0; q < 4; q++) {
      r[q] = (conv_ref){test_xcalloc(n_out, sizeof(double)), test_xcalloc(n_out, sizeof(int64_t)),
                        test_xcalloc(n_out, sizeof(double))};
      conv_reference(&c, NXV_F64, part[pairs[q][0]], part[pairs[q][1]], oshape, &r[q]);
    }
    double eps = c64 ? 0x1p-23 : 0x1p-52;
    uint64_t terms = n_k / (uint64_t)(c.k[0] ? c.k[0] : 1);
    int bad = 0;
    for (uint64_t i = 0; i < n_out; i++) {
      double want[2] = {r[0].f[i] - r[1].f[i], r[2].f[i] + r[3].f[i]};
      double mag[2] = {r[0].mag[i] + r[1].mag[i], r[2].mag[i] + r[3].mag[i]};
      for (int part_i = 0; part_i < 2; part_i++) {
        double g = c64 ? ((float *)got)[2 * i + (uint64_t)part_i]
                       : ((double *)got)[2 * i + (uint64_t)part_i];
        double tol = eps * (double)(2 * terms + 2) * mag[part_i] + eps * fabs(want[part_i]);
        bool ok = fabs(g - want[part_i]) <= tol;
        if (!ok && bad++ < MAX_REPORT)
          CHECK_MSG(ok, "conv %s on %s: element %llu (%s) is %.9g, expected %.9g", c.name,
                    nxv_dtype_name(t), (unsigned long long)i, part_i ? "imag" : "real", g,
                    want[part_i]);
        else if (!ok)
          atomic_fetch_add(&nxv_test_failures, 1);
      }
    }
    for (int q = 0; q < 4; q++) {
      free(r[q].f);
      free(r[q].i);
      free(r[q].mag);
    }
    free(got);
    nxv_tensor_release(out);
  }
  if (tin) nxv_tensor_release(tin);
  if (tk) nxv_tensor_release(tk);
  for (int p = 0; p < 4; p++) free(part[p]);
  free(hin);
  free(hk);
}

NXV_TEST(conv, complex_types) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t rng = 0xC0419;
  nxv_device_info info;
  CHECK_OK(nxv_device_info_get(d, &info));
  for (size_t ci = 0; ci < NCONV; ci++) {
    run_conv_complex(d, kConvCases[ci], NXV_C64, &rng);
    if (info.float64) run_conv_complex(d, kConvCases[ci], NXV_C128, &rng);
  }
  nxv_device_release(d);
}

NXV_TEST(conv, empty_results) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  /* Batch 0: an empty result; no input channels: zeros. */
  float one = 1.0f, kdata[6] = {1, 2, 3, 4, 5, 6};
  int64_t in0[3] = {0, 2, 4}, k0[3] = {3, 2, 1}, o0[3] = {0, 3, 4};
  int64_t s[1] = {1}, z[1] = {0};
  nxv_tensor *a = upload(d, NXV_F32, 0, &one), *k = upload(d, NXV_F32, 6, kdata), *out = NULL;
  REQUIRE(a && k);
  nxv_conv_desc desc = {.input = a, .kernel = k, .rank = 3, .in_shape = in0,
                        .kernel_shape = k0, .out_shape = o0, .strides = s, .pad_lo = z,
                        .pad_hi = z, .input_dilation = s, .kernel_dilation = s,
                        .feature_groups = 1, .batch_groups = 1};
  CHECK_OK(nxv_conv(d, &desc, &out));
  if (out) {
    CHECK(nxv_tensor_count(out) == 0);
    nxv_tensor_release(out);
    out = NULL;
  }
  nxv_tensor_release(a);
  nxv_tensor_release(k);
  int64_t in1[3] = {2, 0, 3}, k1[3] = {2, 0, 2}, o1[3] = {2, 2, 2};
  float none[1] = {0};
  a = upload(d, NXV_F32, 0, none);
  k = upload(d, NXV_F32, 0, none);
  REQUIRE(a && k);
  desc.input = a;
  desc.kernel = k;
  desc.in_shape = in1;
  desc.kernel_shape = k1;
  desc.out_shape = o1;
  CHECK_OK(nxv_conv(d, &desc, &out));
  if (out) {
    float got[8];
    CHECK_OK(nxv_tensor_download(out, 0, 8, got));
    for (int i = 0; i < 8; i++) CHECK(got[i] == 0.0f);
    nxv_tensor_release(out);
  }
  nxv_tensor_release(a);
  nxv_tensor_release(k);
  nxv_device_release(d);
}

/* Expects nxv_conv to fail with want, leaving *out untouched and naming
 * the op in its message. */
static void expect_conv_fail(nxv_device *d, const nxv_conv_desc *desc, nxv_status want,
                             const char *what) {
  nxv_tensor *sentinel = (nxv_tensor *)&sentinel, *out = sentinel;
  nxv_status st = nxv_conv(d, desc, &out);
  CHECK_MSG(st == want, "%s: got %s (%s), expected %s", what, nxv_status_name(st),
            nxv_last_error(), nxv_status_name(want));
  CHECK_MSG(out == sentinel, "%s: output written on failure", what);
  CHECK_MSG(strstr(nxv_last_error(), "conv") != NULL, "%s: message '%s'", what,
            nxv_last_error());
  if (st == NXV_OK && out != sentinel) nxv_tensor_release(out);
}

NXV_TEST(conv, bad_geometry) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  float data[64] = {0};
  int32_t idata[64] = {0};
  nxv_tensor *a = upload(d, NXV_F32, 2 * 4 * 5, data), *k = upload(d, NXV_F32, 6 * 2 * 3, data);
  nxv_tensor *ki = upload(d, NXV_S32, 6 * 2 * 3, idata);
  REQUIRE(a && k && ki);
  int64_t in[3] = {2, 4, 5}, ks[3] = {6, 2, 3}, os[3] = {2, 6, 3};
  int64_t one[1] = {1}, zero[1] = {0};
  nxv_conv_desc good = {.input = a, .kernel = k, .rank = 3, .in_shape = in,
                        .kernel_shape = ks, .out_shape = os, .strides = one,
                        .pad_lo = zero, .pad_hi = zero, .input_dilation = one,
                        .kernel_dilation = one, .feature_groups = 2, .batch_groups = 1};
  nxv_tensor *out = NULL;
  CHECK_OK(nxv_conv(d, &good, &out));
  if (out) nxv_tensor_release(out);

  nxv_conv_desc c = good;
  c.kernel = ki;
  expect_conv_fail(d, &c, NXV_ERR_INVALID_ARGUMENT, "kernel type differs");
  c = good;
  c.feature_groups = 1;
  expect_conv_fail(d, &c, NXV_ERR_INVALID_ARGUMENT, "channels do not match groups");
  c = good;
  c.feature_groups = 0;
  expect_conv_fail(d, &c, NXV_ERR_INVALID_ARGUMENT, "zero feature groups");
  c = good;
  c.batch_groups = 2;
  expect_conv_fail(d, &c, NXV_ERR_INVALID_ARGUMENT, "both group counts");
  int64_t os_bad[3] = {2, 6, 4};
  c = good;
  c.out_shape = os_bad;
  expect_conv_fail(d, &c, NXV_ERR_INVALID_ARGUMENT, "wrong output spatial size");
  int64_t os_bad2[3] = {1, 6, 3};
  c = good;
  c.out_shape = os_bad2;
  expect_conv_fail(d, &c, NXV_ERR_INVALID_ARGUMENT, "wrong output batch");
  int64_t zs[1] = {0};
  c = good;
  c.strides = zs;
  expect_conv_fail(d, &c, NXV_ERR_INVALID_ARGUMENT, "zero stride");
  c = good;
  c.kernel_dilation = zs;
  expect_conv_fail(d, &c, NXV_ERR_INVALID_ARGUMENT, "zero kernel dilation");
  c = good;
  c.rank = 1;
  expect_conv_fail(d, &c, NXV_ERR_INVALID_ARGUMENT, "rank 1");
  int64_t in_big[3] = {2, 4, 6};
  c = good;
  c.in_shape = in_big;
  expect_conv_fail(d, &c, NXV_ERR_INVALID_ARGUMENT, "element count mismatch");
  c = good;
  c.strides = NULL;
  expect_conv_fail(d, &c, NXV_ERR_INVALID_ARGUMENT, "NULL strides");
  int64_t ks_odd[3] = {5, 2, 3};
  nxv_tensor *k5 = upload(d, NXV_F32, 5 * 2 * 3, data);
  REQUIRE(k5);
  c = good;
  c.kernel = k5;
  c.kernel_shape = ks_odd;
  int64_t os5[3] = {2, 5, 3};
  c.out_shape = os5;
  expect_conv_fail(d, &c, NXV_ERR_INVALID_ARGUMENT, "output channels not divisible");
  nxv_tensor_release(k5);
  nxv_tensor_release(a);
  nxv_tensor_release(k);
  nxv_tensor_release(ki);
  nxv_device_release(d);
}

/* ------------------------------------------------------------------------ */
/* Window scatter                                                            */
/* ------------------------------------------------------------------------ */

typedef struct ws_case {
  const char *name;
  uint32_t rank;
  int64_t in[NXV_MAX_RANK], win[NXV_MAX_RANK], strides[NXV_MAX_RANK];
  int64_t lo[NXV_MAX_RANK], hi[NXV_MAX_RANK];
  unsigned values; /* operand values: 0 random, 1 all equal, 2 few distinct */
} ws_case;

static void ws_windows(const ws_case *c, int64_t *wdims) {
  for (uint32_t d = 0; d < c->rank; d++) {
    int64_t padded = c->in[d] + c->lo[d] + c->hi[d];
    wdims[d] = padded >= c->win[d] ? (padded - c->win[d]) / c->strides[d] + 1 : 0;
  }
}

/* Operand value of element i as a double (NaN allowed). */
static double operand_value(nxv_dtype t, const void *p, uint64_t i) {
  return is_fp(t) ? get_f(t, p, i) : (double)get_i(t, p, i);
}

/* The reference selection: flat input index per window, or -1. */
static void ws_select(const ws_case *c, bool is_min, nxv_dtype ta, const void *a,
                      int64_t *sel) {
  int64_t wdims[NXV_MAX_RANK], widx[NXV_MAX_RANK] = {0};
  ws_windows(c, wdims);
  uint64_t nw = prod(c->rank, wdims), w = 0;
  if (!nw) return;
  do {
    int64_t best = -1, jidx[NXV_MAX_RANK] = {0};
    double acc = 0;
    do {
      bool inside = true;
      int64_t flat = 0;
      for (uint32_t d = 0; d < c->rank; d++) {
        int64_t p = widx[d] * c->strides[d] - c->lo[d] + jidx[d];
        if (p < 0 || p >= c->in[d]) inside = false;
        flat = flat * c->in[d] + p;
      }
      if (!inside) continue;
      double x = operand_value(ta, a, (uint64_t)flat);
      if (best < 0 || (is_min ? x <= acc : x >= acc)) {
        best = flat;
        acc = x;
      }
    } while (next_idx(c->rank, c->win, jidx));
    sel[w++] = best;
  } while (next_idx(c->rank, wdims, widx));
}

static void run_window_scatter(nxv_device *d, const ws_case *c, bool is_min, nxv_dtype ta,
                               nxv_dtype t, uint64_t *rng) {
  int64_t wdims[NXV_MAX_RANK];
  ws_windows(c, wdims);
  uint64_t n_in = prod(c->rank, c->in), n_src = prod(c->rank, wdims);
  void *ha = test_xcalloc(n_in, nxv_dtype_size(ta)), *hs = test_xcalloc(n_src, nxv_dtype_size(t));
  void *hinit = test_xcalloc(1, 8);
  for (uint64_t i = 0; i < n_in; i++) {
    int64_t v = c->values == 1 ? 3 : c->values == 2 ? (int64_t)(test_rand_u64(rng) % 3)
                                                    : (int64_t)(test_rand_u64(rng) % 1000) - 500;
    if (!is_signed(ta) && !is_fp(ta) && v < 0) v = -v;
    if (nxv_dtype_size(ta) == 1 && c->values == 0) v %= 100;
    if (is_fp(ta)) set_f(ta, ha, i, (double)v / 4.0);
    else set_i(ta, ha, i, v);
  }
  for (uint64_t i = 0; i < n_src; i++) {
    int64_t v = (int64_t)(test_rand_u64(rng) % 16) + 1;
    if (is_fp(t)) set_f(t, hs, i, (double)v / 8.0);
    else set_i(t, hs, i, v);
  }
  if (is_fp(t)) set_f(t, hinit, 0, 0.5);
  else set_i(t, hinit, 0, 2);
  nxv_tensor *ta_ = upload(d, ta, n_in, ha), *ts = upload(d, t, n_src, hs);
  nxv_tensor *ti = upload(d, t, 1, hinit), *out = NULL;
  if (ta_ && ts && ti) {
    nxv_window_scatter_desc desc = {.a = ta_, .source = ts, .init = ti, .is_min = is_min,
                                    .rank = c->rank, .in_shape = c->in, .window = c->win,
                                    .strides = c->strides, .pad_lo = c->lo, .pad_hi = c->hi};
    nxv_status st = nxv_window_scatter(d, &desc, &out);
    CHECK_MSG(st == NXV_OK, "window_scatter %s (%s, %s): %s", c->name, nxv_dtype_name(ta),
              nxv_dtype_name(t), nxv_last_error());
  }
  if (out) {
    CHECK(nxv_tensor_dtype(out) == t && nxv_tensor_count(out) == n_in);
    void *got = download(out, n_in, t);
    int64_t *sel = test_xcalloc(n_src, sizeof *sel);
    ws_select(c, is_min, ta, ha, sel);
    double *wf = test_xcalloc(n_in, sizeof *wf);
    int64_t *wi = test_xcalloc(n_in, sizeof *wi);
    for (uint64_t i = 0; i < n_in; i++) {
      wf[i] = is_fp(t) ? get_f(t, hinit, 0) : 0;
      wi[i] = is_fp(t) ? 0 : get_i(t, hinit, 0);
    }
    for (uint64_t w = 0; w < n_src; w++) {
      if (sel[w] < 0) continue;
      if (is_fp(t)) wf[sel[w]] += get_f(t, hs, w);
      else wi[sel[w]] = wrap_i(t, (int64_t)((uint64_t)wi[sel[w]] + (uint64_t)get_i(t, hs, w)));
    }
    int bad = 0;
    for (uint64_t i = 0; i < n_in; i++) {
      double g = is_fp(t) ? get_f(t, got, i) : (double)get_i(t, got, i);
      bool ok;
      if (is_fp(t)) {
        void *tmp = test_xcalloc(1, 8);
        set_f(t, tmp, 0, wf[i]);
        double w = get_f(t, tmp, 0);
        free(tmp);
        ok = g == w;
        if (!ok && bad++ < MAX_REPORT)
          CHECK_MSG(ok, "window_scatter_%s %s (%s -> %s): element %llu is %.9g, expected %.9g",
                    is_min ? "min" : "max", c->name, nxv_dtype_name(ta), nxv_dtype_name(t),
                    (unsigned long long)i, g, w);
        else if (!ok)
          atomic_fetch_add(&nxv_test_failures, 1);
      } else {
        ok = get_i(t, got, i) == wi[i];
        if (!ok && bad++ < MAX_REPORT)
          CHECK_MSG(ok, "window_scatter_%s %s (%s -> %s): element %llu is %lld, expected %lld",
                    is_min ? "min" : "max", c->name, nxv_dtype_name(ta), nxv_dtype_name(t),
                    (unsigned long long)i, (long long)get_i(t, got, i), (long long)wi[i]);
        else if (!ok)
          atomic_fetch_add(&nxv_test_failures, 1);
      }
    }
    free(sel);
    free(wf);
    free(wi);
    free(got);
    nxv_tensor_release(out);
  }
  if (ta_) nxv_tensor_release(ta_);
  if (ts) nxv_tensor_release(ts);
  if (ti) nxv_tensor_release(ti);
  free(ha);
  free(hs);
  free(hinit);
}

static const ws_case kWsCases[] = {
    {.name = "2d 2x3 windows, strides 2x3", .rank = 2, .in = {4, 6}, .win = {2, 3},
     .strides = {2, 3}},
    {.name = "2d overlapping 3x3, stride 1", .rank = 2, .in = {7, 8}, .win = {3, 3},
     .strides = {1, 1}},
    {.name = "ties: all equal, overlapping", .rank = 2, .in = {5, 6}, .win = {2, 3},
     .strides = {1, 2}, .values = 1},
    {.name = "few distinct values, padding 1/1", .rank = 2, .in = {6, 7}, .win = {3, 3},
     .strides = {2, 2}, .lo = {1, 1}, .hi = {1, 1}, .values = 2},
    {.name = "asymmetric padding, strides", .rank = 3, .in = {2, 5, 9}, .win = {1, 2, 4},
     .strides = {1, 2, 3}, .lo = {0, 1, 2}, .hi = {0, 0, 3}},
    {.name = "negative padding", .rank = 2, .in = {8, 9}, .win = {2, 2}, .strides = {2, 2},
     .lo = {-1, 0}, .hi = {0, -2}},
    {.name = "windows wholly in the padding", .rank = 1, .in = {5}, .win = {2},
     .strides = {2}, .lo = {3}, .hi = {3}},
    {.name = "1d odd size, window larger than stride", .rank = 1, .in = {1031}, .win = {5},
     .strides = {3}, .lo = {2}, .hi = {1}},
    {.name = "4d pooling 2x2", .rank = 4, .in = {2, 3, 6, 6}, .win = {1, 1, 2, 2},
     .strides = {1, 1, 2, 2}},
    {.name = "4d pooling 2x2, few distinct values (ties)", .rank = 4, .in = {3, 2, 8, 4},
     .win = {1, 1, 2, 2}, .strides = {1, 1, 2, 2}, .values = 2},
    {.name = "4d pooling 2x3 over 4x9, all equal", .rank = 4, .in = {1, 2, 4, 9},
     .win = {1, 1, 2, 3}, .strides = {1, 1, 2, 3}, .values = 1},
    {.name = "4d pooling 2x2 with high padding (not a tiling)", .rank = 4, .in = {2, 1, 5, 6},
     .win = {1, 1, 2, 2}, .strides = {1, 1, 2, 2}, .hi = {0, 0, 1, 0}},
    {.name = "4d pooling 3x3 stride 2 same padding", .rank = 4, .in = {2, 2, 7, 7},
     .win = {1, 1, 3, 3}, .strides = {1, 1, 2, 2}, .lo = {0, 0, 1, 1}, .hi = {0, 0, 1, 1},
     .values = 2},
};
#define NWS (sizeof kWsCases / sizeof kWsCases[0])

NXV_TEST(window_scatter, max_min_every_type) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t rng = 0x5CA77E4;
  for (size_t ti = 0; ti < NALL; ti++) {
    nxv_dtype t = kAllTypes[ti];
    if (!device_has(d, t)) {
      fprintf(stderr, "  note: device lacks %s, skipped\n", nxv_dtype_name(t));
      continue;
    }
    for (size_t ci = 0; ci < NWS; ci++) {
      run_window_scatter(d, &kWsCases[ci], false, t, t, &rng);
      run_window_scatter(d, &kWsCases[ci], true, t, t, &rng);
    }
  }
  nxv_device_release(d);
}

NXV_TEST(window_scatter, operand_and_result_types_differ) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t rng = 0x5CA77E5;
  const nxv_dtype pairs[][2] = {{NXV_F32, NXV_S32}, {NXV_S64, NXV_F32}, {NXV_F16, NXV_F64},
                                {NXV_U8, NXV_F16}, {NXV_F64, NXV_BF16}, {NXV_S16, NXV_U64}};
  for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
    if (!device_has(d, pairs[p][0]) || !device_has(d, pairs[p][1])) continue;
    for (size_t ci = 0; ci < NWS; ci++) {
      run_window_scatter(d, &kWsCases[ci], false, pairs[p][0], pairs[p][1], &rng);
      run_window_scatter(d, &kWsCases[ci], true, pairs[p][0], pairs[p][1], &rng);
    }
  }
  nxv_device_release(d);
}

/* The Nx documentation example, and NaN: a NaN first in its window stays
 * selected; a later NaN is skipped. */
NXV_TEST(window_scatter, known_values_and_nan) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  const int64_t a[24] = {7, 2, 5, 3, 10, 2, 3, 8, 9, 3, 4, 2,
                         1, 5, 7, 5, 6,  1, 0, 6, 2, 7, 2, 8};
  const int64_t src[4] = {2, 6, 3, 1}, zero = 0;
  const int64_t want_max[24] = {0, 0, 0, 0, 6, 0, 0, 0, 2, 0, 0, 0,
                                0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  const int64_t want_min[24] = {0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 6,
                                0, 0, 0, 0, 0, 1, 3, 0, 0, 0, 0, 0};
  int64_t in[2] = {4, 6}, win[2] = {2, 3}, st[2] = {2, 3}, z[2] = {0, 0};
  nxv_tensor *ta = upload(d, NXV_S64, 24, a), *ts = upload(d, NXV_S64, 4, src);
  nxv_tensor *ti = upload(d, NXV_S64, 1, &zero);
  REQUIRE(ta && ts && ti);
  for (int m = 0; m < 2; m++) {
    nxv_window_scatter_desc desc = {.a = ta, .source = ts, .init = ti, .is_min = m == 1,
                                    .rank = 2, .in_shape = in, .window = win, .strides = st,
                                    .pad_lo = z, .pad_hi = z};
    nxv_tensor *out = NULL;
    CHECK_OK(nxv_window_scatter(d, &desc, &out));
    if (!out) continue;
    int64_t got[24];
    CHECK_OK(nxv_tensor_download(out, 0, 24, got));
    for (int i = 0; i < 24; i++)
      CHECK_MSG(got[i] == (m ? want_min : want_max)[i], "%s element %d: %lld",
                m ? "min" : "max", i, (long long)got[i]);
    nxv_tensor_release(out);
  }
  nxv_tensor_release(ta);
  nxv_tensor_release(ts);
  nxv_tensor_release(ti);

  const float fa[6] = {NAN, 5, 1, NAN, 2, 3};
  const float fsrc[3] = {1, 2, 4}, finit = 0;
  int64_t in1[1] = {6}, win1[1] = {2}, st1[1] = {2}, z1[1] = {0};
  const float want_fmax[6] = {1, 0, 2, 0, 0, 4}, want_fmin[6] = {1, 0, 2, 0, 4, 0};
  ta = upload(d, NXV_F32, 6, fa);
  ts = upload(d, NXV_F32, 3, fsrc);
  ti = upload(d, NXV_F32, 1, &finit);
  REQUIRE(ta && ts && ti);
  for (int m = 0; m < 2; m++) {
    nxv_window_scatter_desc desc = {.a = ta, .source = ts, .init = ti, .is_min = m == 1,
                                    .rank = 1, .in_shape = in1, .window = win1,
                                    .strides = st1, .pad_lo = z1, .pad_hi = z1};
    nxv_tensor *out = NULL;
    CHECK_OK(nxv_window_scatter(d, &desc, &out));
    if (!out) continue;
    float got[6];
    CHECK_OK(nxv_tensor_download(out, 0, 6, got));
    for (int i = 0; i < 6; i++)
      CHECK_MSG(got[i] == (m ? want_fmin : want_fmax)[i], "NaN %s element %d: %g",
                m ? "min" : "max", i, (double)got[i]);
    nxv_tensor_release(out);
  }
  nxv_tensor_release(ta);
  nxv_tensor_release(ts);
  nxv_tensor_release(ti);
  nxv_device_release(d);
}

static void expect_ws_fail(nxv_device *d, const nxv_window_scatter_desc *desc,
                           const char *what) {
  nxv_tensor *sentinel = (nxv_tensor *)&sentinel, *out = sentinel;
  nxv_status st = nxv_window_scatter(d, desc, &out);
  CHECK_MSG(st == NXV_ERR_INVALID_ARGUMENT, "%s: got %s (%s)", what, nxv_status_name(st),
            nxv_last_error());
  CHECK_MSG(out == sentinel, "%s: output written on failure", what);
  CHECK_MSG(strstr(nxv_last_error(), "window_scatter") != NULL, "%s: message '%s'", what,
            nxv_last_error());
  if (st == NXV_OK && out != sentinel) nxv_tensor_release(out);
}

NXV_TEST(window_scatter, bad_geometry) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  float data[16] = {0};
  double init64 = 0;
  nxv_tensor *a = upload(d, NXV_F32, 12, data), *s = upload(d, NXV_F32, 4, data);
  nxv_tensor *init = upload(d, NXV_F32, 1, data), *init_f64 = upload(d, NXV_F64, 1, &init64);
  nxv_tensor *init2 = upload(d, NXV_F32, 2, data);
  REQUIRE(a && s && init && init2);
  int64_t in[2] = {4, 3}, win[2] = {2, 2}, st[2] = {2, 1}, z[2] = {0, 0};
  nxv_window_scatter_desc good = {.a = a, .source = s, .init = init, .rank = 2,
                                  .in_shape = in, .window = win, .strides = st,
                                  .pad_lo = z, .pad_hi = z};
  nxv_tensor *out = NULL;
  CHECK_OK(nxv_window_scatter(d, &good, &out));
  if (out) nxv_tensor_release(out);
  nxv_window_scatter_desc c = good;
  int64_t st_bad[2] = {1, 1};
  c.strides = st_bad;
  expect_ws_fail(d, &c, "source count does not match the windows");
  int64_t win0[2] = {0, 2};
  c = good;
  c.window = win0;
  expect_ws_fail(d, &c, "zero window");
  int64_t st0[2] = {2, 0};
  c = good;
  c.strides = st0;
  expect_ws_fail(d, &c, "zero stride");
  if (init_f64) {
    c = good;
    c.init = init_f64;
    expect_ws_fail(d, &c, "init of another type");
  }
  c = good;
  c.init = init2;
  expect_ws_fail(d, &c, "init of two elements");
  int64_t in_bad[2] = {4, 4};
  c = good;
  c.in_shape = in_bad;
  expect_ws_fail(d, &c, "operand count mismatch");
  c = good;
  c.pad_hi = NULL;
  expect_ws_fail(d, &c, "NULL padding");
  nxv_tensor_release(a);
  nxv_tensor_release(s);
  nxv_tensor_release(init);
  nxv_tensor_release(init2);
  if (init_f64) nxv_tensor_release(init_f64);
  nxv_device_release(d);
}
