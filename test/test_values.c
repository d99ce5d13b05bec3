/*
 * test_values.c - bit encodings of the 16-bit float types for the C tests'
 * references (declared in test.h).
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
