// unary_ops.glsl - the unary ops of unary.comp on a real compute type TC
// of T, op following nxv_unary_op in include/nxv.h. Shared by unary.comp
// and fused.comp. Needs types.glsl first, and math64.glsl where TC is
// 64-bit or PRECISE32 is defined (f32 transcendentals evaluated in
// double). With CONVERT_ONLY it is the identity.
// Defines TC UNARY_FN(UNARY_ARGS TC x) computing op UNARY_SEL; by default
// unary_apply(uint op, TC x). A shader whose op is a specialization
// constant names it as UNARY_SEL with UNARY_ARGS empty, so the switch is
// on that constant and the runtime (kernels/spv_prune.c) strips every
// other case, and the math functions only they call, before the driver
// compiles the module. May be included more than once with other names
// (fused.comp: once per instruction slot).
#ifndef UNARY_FN
#define UNARY_FN unary_apply
#define UNARY_ARGS uint op,
#define UNARY_SEL op
#endif

TC UNARY_FN(UNARY_ARGS TC x) {
#if !defined(CONVERT_ONLY)
  switch (UNARY_SEL) {
  case 0: return x;
#if T_KIND == KIND_FLOAT
  case 16: { precise TC p = x * x; return p; }  // see binary_ops.glsl
#else
  case 16: return x * x;
#endif
#if T_KIND == KIND_UINT
  case 1: return TC(0) - x;
  case 2: return x;
  case 3: return x != TC(0) ? TC(1) : TC(0);
#else
  case 1: return -x;
  case 2: return abs(x);
  case 3: return sign(x);
#endif
#if T_KIND == KIND_FLOAT
  case 4: {  // one Newton step on top of the driver's sqrt: correctly
             // rounded in practice where the driver's is not
    TC r = sqrt(x);
    if (x > TC(0) && !isinf(x)) r = fma(fma(-r, r, x), TC(0.5) / r, r);
    return r;
  }
  case 5: {
    TC r = inversesqrt(x);
    if (x > TC(0) && !isinf(x)) r = fma(TC(0.5) * r, fma(-x * r, r, TC(1)), r);
    return r;
  }
  case 12: return floor(x);
  case 13: return ceil(x);
  case 14: {  // round half away from zero
    // On the magnitude, the sign put back explicitly: lavapipe's f64 trunc
    // returns +0 for negative inputs above -1 on some CPUs (seen on AMD
    // EPYC), which would lose the sign of a -0 result.
    TC a = abs(x), t = trunc(a);
    TC r = a - t >= TC(0.5) ? t + TC(1) : t;
    return x < TC(0) ? -r : x == TC(0) ? x : r;
  }
#if TC_BITS == 64 || defined(PRECISE32)
  // Evaluated in double (math64.glsl); rounded to f32 this is the
  // correctly rounded result in practice.
  case 6: return TC(exp64(double(x)));
  case 7: return TC(log64(double(x)));
  case 8: return TC(sin64(double(x)));
  case 9: return TC(cos64(double(x)));
  case 10: return TC(tanh64(double(x)));
  case 11: return TC(sigmoid64(double(x)));
  case 17: return TC(expm1_64(double(x)));
  case 18: return TC(log1p64(double(x)));
  case 19: return TC(erf64(double(x)));
  case 20: return TC(erfc64(double(x)));
  case 21: return TC(erf_inv64(double(x), TC_BITS == 64));
  case 22: return TC(tan64(double(x)));
  case 23: return TC(sinh64(double(x)));
  case 24: return TC(cosh64(double(x)));
  case 25: return TC(cbrt64(double(x)));
  case 26: return TC(asin64(double(x)));
  case 27: return TC(acos64(double(x)));
  case 28: return TC(atan64(double(x)));
  case 29: return TC(asinh64(double(x)));
  case 30: return TC(acosh64(double(x)));
  case 31: return TC(atanh64(double(x)));
#else
  case 6: return exp(x);
  case 7: return log(x);
  case 8: return sin(x);
  case 9: return cos(x);
  case 10: return isnan(x) ? x : tanh(clamp(x, TC(-20.0), TC(20.0)));
  case 11: return TC(1.0) / (TC(1.0) + exp(-x));
  case 25: return sign(x) * pow(abs(x), TC(1.0) / TC(3.0));
  case 26: return asin(x);
  case 27: return acos(x);
  case 28: return atan(x);
  case 29: return asinh(x);
  case 30: return acosh(x);
  case 31: return atanh(x);
#endif
#else
  case 15: return ~x;
  case 32: {  // count_leading_zeros over the storage width
#if TC_BITS == 64
    uvec2 w = unpackUint2x32(uint64_t(x));
    return TC(w.y != 0u ? 31 - findMSB(w.y) : 63 - findMSB(w.x));
#else
    uint u = uint(x) & (T_BITS == 32 ? 0xFFFFFFFFu : ((1u << T_BITS) - 1u));
    return TC(T_BITS - 1 - findMSB(u));
#endif
  }
  case 33: {  // population_count over the storage width
#if TC_BITS == 64
    uvec2 w = unpackUint2x32(uint64_t(x));
    return TC(bitCount(w.x) + bitCount(w.y));
#else
    uint u = uint(x) & (T_BITS == 32 ? 0xFFFFFFFFu : ((1u << T_BITS) - 1u));
    return TC(bitCount(u));
#endif
  }
#endif
  }
#endif
  return x;
}
