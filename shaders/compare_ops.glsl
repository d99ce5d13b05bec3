// compare_ops.glsl - the comparisons of compare.comp on the compute type
// TC of T: compare_apply(op, x, y) with op following nxv_compare_op in
// include/nxv.h: IEEE 754 comparisons (any comparison with NaN is false,
// except not_equal); logical ops treat every non-zero value (NaN too) as
// true. Shared by compare.comp and fused.comp. Needs types.glsl first.
// Defines bool COMPARE_FN(COMPARE_ARGS TC x, TC y) computing op
// COMPARE_SEL; by default compare_apply(uint op, TC x, TC y). See
// unary_ops.glsl for why a shader names its specialization constant
// instead; may be included more than once with other names.
#ifndef COMPARE_FN
#define COMPARE_FN compare_apply
#define COMPARE_ARGS uint op,
#define COMPARE_SEL op
#endif

bool COMPARE_FN(COMPARE_ARGS TC x, TC y) {
  switch (COMPARE_SEL) {
  case 0: return x == y;
  case 1: return x != y;
#if T_KIND != KIND_COMPLEX  // complex types are not ordered
  case 2: return x < y;
  case 3: return x <= y;
  case 4: return x > y;
  case 5: return x >= y;
#endif
  case 6: return (x != TC(0)) && (y != TC(0));
  case 7: return (x != TC(0)) || (y != TC(0));
  case 8: return (x != TC(0)) != (y != TC(0));
  }
  return false;
}
