/*
 * test_values.c - bit encodings of the float types and integer wrapping for
 * the C tests' references (declared in test.h).
 */
#include <math.h>
#include <string.h>

#include "test.h"

uint16_t nxv_test_f16_bits(double x) {
  uint16_t sign = signbit(x) ? 0x8000u : 0u;
  if (isnan(x)) return 0x7E00u;
  x = fabs(x);
  if (x >= 65520.0) return sign | 0x7C00u; /* past 65504 + half an ulp */
  if (x < 0x1p-14) /* subnormal: units of 2^-24; 1024 is the smallest normal */
    return sign | (uint16_t)nearbyint(x * 0x1p24);
  int e;
  double m = nearbyint(ldexp(frexp(x, &e), 11)); /* 1024 .. 2048 */
  if (m == 2048.0) {
    m = 1024.0;
    e++;
  }
  return sign | (uint16_t)((e + 14) << 10) | (uint16_t)(m - 1024.0);
}

double nxv_test_f16_value(uint16_t h) {
  int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
  return (h & 0x8000u) ? -v : v;
}

uint16_t nxv_test_bf16_bits(double x) {
  float f = (float)x;
  uint32_t u;
  if (isnan(f)) return 0x7FC0u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}

double nxv_test_bf16_value(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static int tbits(nxv_dtype t) { return 8 * (int)nxv_dtype_size(t); }
static bool is_sint(nxv_dtype t) { return t <= NXV_S64; }

nxv_test_val nxv_test_wrap(nxv_dtype t, uint64_t u) {
  int b = tbits(t);
  if (b < 64) {
    u &= (1ull << b) - 1;
    if (is_sint(t) && ((u >> (b - 1)) & 1u)) u |= ~0ull << b;
  }
  return (nxv_test_val){.u = u};
}

nxv_test_val nxv_test_int_min(nxv_dtype t) {
  return is_sint(t) ? nxv_test_wrap(t, 1ull << (tbits(t) - 1)) : (nxv_test_val){.u = 0};
}

nxv_test_val nxv_test_int_max(nxv_dtype t) {
  return is_sint(t) ? nxv_test_wrap(t, (1ull << (tbits(t) - 1)) - 1) : nxv_test_wrap(t, ~0ull);
}

static double f32_value(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint64_t nxv_test_encode(nxv_dtype t, nxv_test_val v) {
  switch (t) {
    case NXV_F16: return nxv_test_f16_bits(v.f);
    case NXV_BF16: return nxv_test_bf16_bits(v.f);
    case NXV_F32: {
      float f = (float)v.f;
      uint32_t u;
      memcpy(&u, &f, 4);
      return u;
    }
    case NXV_F64: return v.u;
    default: return tbits(t) == 64 ? v.u : v.u & ((1ull << tbits(t)) - 1);
  }
}

nxv_test_val nxv_test_decode(nxv_dtype t, uint64_t bits) {
  switch (t) {
    case NXV_F16: return (nxv_test_val){.f = nxv_test_f16_value((uint16_t)bits)};
    case NXV_BF16: return (nxv_test_val){.f = f32_value((uint32_t)bits << 16)};
    case NXV_F32: return (nxv_test_val){.f = f32_value((uint32_t)bits)};
    case NXV_F64: return (nxv_test_val){.u = bits};
    default: return nxv_test_wrap(t, bits);
  }
}

double nxv_test_float_at(nxv_dtype t, const void *p, uint64_t i) {
  size_t es = nxv_dtype_size(t);
  uint64_t bits = 0;
  memcpy(&bits, (const unsigned char *)p + i * es, es);
  return nxv_test_decode(t, bits).f;
}
