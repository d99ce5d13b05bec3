// reduce_ops.glsl - the reduction ops of reduce.comp and window.comp
// (OP 0 sum, 1 product, 2 max, 3 min) in the compute type TC: identity
// and combine. Float max/min propagate NaN; complex types have sum and
// product only (include complex.glsl first).
#include "complex.glsl"

TC identity() {
#if T_KIND == KIND_FLOAT
  if (OP == 2u) return TC(-1.0) / TC(0.0);
  if (OP == 3u) return TC(1.0) / TC(0.0);
#elif T_KIND != KIND_COMPLEX
  if (OP == 2u) return TC(T_MIN);
  if (OP == 3u) return TC(T_MAX);
#endif
  return OP == 1u ? T_FROM_REAL(1) : TC(0);
}

TC combine(TC x, TC y) {
  switch (OP) {
  case 0: return x + y;
#if T_KIND == KIND_COMPLEX
  case 1: return c_mul(x, y);
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
