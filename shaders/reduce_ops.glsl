// reduce_ops.glsl - the reduction ops of reduce.comp and window.comp
// (OP 0 sum, 1 product, 2 max, 3 min) in the compute type TC: identity
// and combine. Float max/min propagate NaN.
TC identity() {
#if T_KIND == KIND_FLOAT
  if (OP == 2u) return TC(-1.0) / TC(0.0);
  if (OP == 3u) return TC(1.0) / TC(0.0);
#else
  if (OP == 2u) return TC(T_MIN);
  if (OP == 3u) return TC(T_MAX);
#endif
  return OP == 1u ? TC(1) : TC(0);
}

TC combine(TC x, TC y) {
  switch (OP) {
  case 0: return x + y;
  case 1: return x * y;
#if T_KIND == KIND_FLOAT
  case 2: return (isnan(x) || isnan(y)) ? x + y : max(x, y);
  case 3: return (isnan(x) || isnan(y)) ? x + y : min(x, y);
#else
  case 2: return max(x, y);
  case 3: return min(x, y);
#endif
  }
  return x;
}
