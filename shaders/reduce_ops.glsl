// reduce_ops.glsl - the reduction ops of reduce.comp and window.comp
// (OP 0 sum, 1 product, 2 max, 3 min) in the accumulator type RC (the
// compute type TC unless the includer defines RC: reduce.comp's widening
// sums of narrow integers accumulate in 64 bits): identity and combine.
// Float max/min propagate NaN; complex types have sum and product only
// (include complex.glsl first).
#include "complex.glsl"

#ifndef RC
#define RC TC
#endif

RC identity() {
#if T_KIND == KIND_FLOAT
  if (OP == 2u) return RC(-1.0) / RC(0.0);
  if (OP == 3u) return RC(1.0) / RC(0.0);
#elif T_KIND != KIND_COMPLEX
  if (OP == 2u) return RC(T_MIN);
  if (OP == 3u) return RC(T_MAX);
#endif
#if T_KIND == KIND_COMPLEX
  return OP == 1u ? T_FROM_REAL(1) : TC(0);
#else
  return OP == 1u ? RC(1) : RC(0);
#endif
}

RC combine(RC x, RC y) {
  switch (OP) {
  case 0: return x + y;
#if T_KIND == KIND_COMPLEX
  // y x, Nx.BinaryBackend's order (each element times the product so
  // far); c_mul's real operands (the identity a partial of no elements
  // starts from among them) scale the other, so they never turn an infinite
  // part into NaN.
  case 1: return c_mul(y, x);
#else
  case 1: return x * y;
#endif
#if T_KIND == KIND_FLOAT
  case 2: return (isnan(x) || isnan(y)) ? x + y : max(x, y);
  case 3: return (isnan(x) || isnan(y)) ? x + y : min(x, y);
#elif T_KIND != KIND_COMPLEX
  case 2: return max(x, y);
  case 3: return min(x, y);
#endif
  }
  return x;
}
