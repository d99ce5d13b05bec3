// binary_ops.glsl - the binary ops of binary.comp on the compute type TC
// of T, op following nxv_binary_op in include/nxv.h. Shared by
// binary.comp and fused.comp. Needs types.glsl first, and complex.glsl for
// complex T or math64.glsl for f64 and PRECISE32 (pow and atan2 of f16,
// bf16 and f32 in double).
// Defines the helpers below once, and TC BINARY_FN(BINARY_ARGS TC x, TC y)
// computing op BINARY_SEL; by default binary_apply(uint op, TC x, TC y).
// See unary_ops.glsl for why a shader names its specialization constant
// instead; may be included more than once with other names.
#ifndef BINARY_FN
#define BINARY_FN binary_apply
#define BINARY_ARGS uint op,
#define BINARY_SEL op
#endif
#ifndef NXV_BINARY_OPS_HELPERS
#define NXV_BINARY_OPS_HELPERS 1

#if T_KIND == KIND_FLOAT
TC nxv_nan() { return TC(0.0) / TC(0.0); }

#if TC_BITS == 64
#define NXV_SPLIT 134217729.0  // 2^27 + 1
#define NXV_DIV_EXP 1000       // 2^+-NXV_DIV_EXP are normal
#define NXV_MIN_EXP (-1022)    // the smallest normal is 2^NXV_MIN_EXP
#else
#define NXV_SPLIT 4097.0  // 2^12 + 1
#define NXV_DIV_EXP 120
#define NXV_MIN_EXP (-126)
#endif

// The rounding error of p = a b, exactly (a b = p + e), by Dekker's
// product: no fma, whose fusion Vulkan does not promise (llvmpipe's fma
// rounds the product and then the sum, and a correction through it moved
// a tenth of correctly rounded quotients by an ulp). a and b such that
// the splits do not overflow and the partial products do not underflow:
// fdiv's both in [0.5, 2) in magnitude, frem's an integer and a divisor
// in [0.5, 1). precise: no contraction into fma, no reassociation.
TC nxv_product_error(TC a, TC b, TC p) {
  precise TC ca = a * TC(NXV_SPLIT);
  precise TC ah = ca - (ca - a);
  precise TC al = a - ah;
  precise TC cb = b * TC(NXV_SPLIT);
  precise TC bh = cb - (cb - b);
  precise TC bl = b - bh;
  precise TC e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
  return e;
}

// x / y as the driver divides, but an infinite dividend over a finite
// divisor of magnitude above 1 divides by the divisor scaled down (the
// same infinity): a divisor above 2^126 has a subnormal reciprocal, and a
// driver flushing it to zero would make inf / 2^127 NaN.
TC nxv_driver_div(TC x, TC y) {
  if (isinf(x) && abs(y) > TC(1) && !isinf(y)) y *= ldexp(TC(1), -NXV_DIV_EXP);
  return x / y;
}

#if TC_BITS == 32
// a * 2^s as a 64-bit integer (hi, lo), a < 2^24, 0 < s < 32.
uvec2 nxv_shl64(uint a, int s) { return uvec2(a >> (32 - s), a << s); }
bool nxv_gt64(uvec2 a, uvec2 b) { return a.x > b.x || (a.x == b.x && a.y > b.y); }
uvec2 nxv_mul64(uint a, uint b) {
  uint hi, lo;
  umulExtended(a, b, hi, lo);
  return uvec2(hi, lo);
}

// |mx| / |my| for mx, my in [0.5, 1) in magnitude, correctly rounded: the
// driver's quotient (within a few ulp), then moved an ulp at a time until
// the exact quotient lies between the midpoints to its neighbours, each
// compared in 64-bit integers (the operands' 24-bit significands times a
// midpoint's 26 bits; an exact quotient is never a midpoint, so there are
// no ties).
TC nxv_div_scaled(TC mx, TC my) {
  uint MX = uint(abs(mx) * TC(16777216)), MY = uint(abs(my) * TC(16777216));
  TC q = clamp(abs(mx) / abs(my), TC(0.5), TC(2));
  for (int i = 0; i < 6; i++) {
    uint bits = floatBitsToUint(q);
    int E = int(bits >> 23) - 127;  // q = N 2^(E - 23): E is -1, 0 or 1
    uint N = (bits & 0x7FFFFFu) | 0x800000u;
    // above the midpoint (2N + 1) 2^(E - 24): MX 2^(24 - E) > (2N + 1) MY
    if (nxv_gt64(nxv_shl64(MX, 24 - E), nxv_mul64(2u * N + 1u, MY))) {
      q = uintBitsToFloat(bits + 1u);
      continue;
    }
    // below the midpoint to the float below: (2N - 1) 2^(E - 24), or
    // (4N - 1) 2^(E - 25) when q is a power of two (the ulp below halves)
    bool below = N == 0x800000u
                     ? nxv_gt64(nxv_mul64(4u * N - 1u, MY), nxv_shl64(MX, 25 - E))
                     : nxv_gt64(nxv_mul64(2u * N - 1u, MY), nxv_shl64(MX, 24 - E));
    if (!below) break;
    q = uintBitsToFloat(bits - 1u);
  }
  return q;
}
#else
// |mx| / |my| for mx, my in [0.5, 1) in magnitude, correctly rounded: the
// driver's quotient q (within a few ulp), then moved an ulp at a time
// until the exact quotient lies between the midpoints to its neighbours,
// q + up / 2 and q - down / 2, compared through q's exact residual
// r = |mx| - q |my| (nxv_product_error, not fma, which llvmpipe does not
// fuse): the quotient is above q + up / 2 when r > |my| up / 2. Every step
// is exact: |mx| - p by Sterbenz, r because a quotient within an ulp
// leaves a representable residual, the products by powers of two and
// q +- ulp. An exact quotient is never a midpoint (53 bits over 53 bits
// are no 54-bit midpoint), so there are no ties.
TC nxv_div_scaled(TC mx, TC my) {
  TC ax = abs(mx), ay = abs(my);
  TC q = clamp(ax / ay, TC(0.5), TC(2));
  for (int i = 0; i < 6; i++) {
    int eq;
    TC fq = frexp(q, eq);
    TC up = ldexp(TC(1), eq - 53);                  // q's ulp
    TC down = fq == TC(0.5) ? TC(0.5) * up : up;  // the ulp below halves at a power of two
    precise TC p = q * ay;
    TC e = nxv_product_error(q, ay, p);
    precise TC r = (ax - p) - e;
    precise TC half_up = TC(0.5) * up * ay;
    precise TC half_down = TC(0.5) * down * ay;
    if (r > half_up) {
      q += up;
    } else if (r < -half_down) {
      q -= down;
    } else {
      break;
    }
  }
  return q;
}
#endif

// x / y correctly rounded, on drivers that divide through an approximate
// reciprocal (2.5 ulp allowed; a divisor above 2^126 has a subnormal
// reciprocal, which some flush to zero) as on those that divide exactly:
// both operands scaled into [0.5, 1) by their exponents (exact); the
// quotient of the scaled pair rounded by nxv_div_scaled's exact
// comparisons with the midpoints (integers for f32, the exact residual for
// f64); then scaled back by normal powers of two (exact for a normal
// quotient; overflow gives infinity). Zeros, infinities, NaN, subnormal
// operands and subnormal quotients take the driver's quotient (exact where
// it divides exactly, flushed to zero where it flushes).
TC fdiv(TC x, TC y) {
  if (isinf(x) || isnan(x) || isinf(y) || isnan(y) || x == TC(0) || y == TC(0))
    return nxv_driver_div(x, y);
  // Subnormal operands: frexp may see them flushed, or (llvmpipe) read
  // their bits as a normal number's.
  const TC min_normal = ldexp(TC(1), NXV_MIN_EXP);
  if (abs(x) < min_normal || abs(y) < min_normal) return nxv_driver_div(x, y);
  int ex, ey;
  TC mx = frexp(x, ex), my = frexp(y, ey);
  TC qc = nxv_div_scaled(mx, my);
  if ((mx < TC(0)) != (my < TC(0))) qc = -qc;
  int k = ex - ey;
  for (; k > NXV_DIV_EXP; k -= NXV_DIV_EXP) qc *= ldexp(TC(1), NXV_DIV_EXP);
  for (; k < -NXV_DIV_EXP; k += NXV_DIV_EXP) qc *= ldexp(TC(1), -NXV_DIV_EXP);
  qc *= ldexp(TC(1), k);
  return abs(qc) >= min_normal ? qc : nxv_driver_div(x, y);
}

#if TC_BITS == 32
// pow with the sign rules of C's pow: a negative base with an integer
// exponent, zero bases, exact results for small integer exponents.
TC fpow(TC x, TC y) {
  if (y == TC(0) || x == TC(1)) return TC(1);
  if (isnan(x) || isnan(y)) return nxv_nan();
  TC inf = TC(1) / TC(0);
  bool yint = floor(y) == y;
  bool odd = yint && abs(y) < TC(16777216) && mod(abs(y), TC(2)) == TC(1);
  if (x == TC(0)) {
    TC z = y > TC(0) ? TC(0) : inf;
    return odd && (floatBitsToUint(x) >> 31) != 0u ? -z : z;  // -0 ** odd
  }
  if (isinf(y)) {  // |x| = 1 gives 1; otherwise 0 or inf by |x| > 1
    TC ax = abs(x);
    if (ax == TC(1)) return TC(1);
    return (ax > TC(1)) == (y > TC(0)) ? inf : TC(0);
  }
  if (isinf(x)) {
    TC z = y > TC(0) ? inf : TC(0);
    return x < TC(0) && odd ? -z : z;
  }
  if (x < TC(0) && !yint) return nxv_nan();
  TC ax = abs(x), r;
  if (yint && abs(y) <= TC(64)) {  // exponentiation by squaring
    TC b = ax;
    uint e = uint(abs(y));
    r = TC(1);
    while (e != 0u) {
      if ((e & 1u) != 0u) r *= b;
      b *= b;
      e >>= 1;
    }
    if (y < TC(0)) r = TC(1) / r;
  } else {
    r = pow(ax, y);
  }
  return x < TC(0) && odd ? -r : r;
}

// atan2 with C's special cases (GLSL leaves zeros, infinities and NaN
// undefined).
TC fatan2(TC y, TC x) {
  if (isnan(x) || isnan(y)) return nxv_nan();
  const TC PI = TC(3.14159265358979323846);
  bool xneg = (floatBitsToUint(x) >> 31) != 0u;
  TC r;
  if (y == TC(0)) r = xneg ? PI : TC(0);
  else if (isinf(x) && isinf(y)) r = xneg ? TC(0.75) * PI : TC(0.25) * PI;
  else if (isinf(x)) r = xneg ? PI : TC(0);
  else if (isinf(y) || x == TC(0)) r = TC(0.5) * PI;
  else return atan(y, x);
  return (floatBitsToUint(y) >> 31) != 0u ? -r : r;
}
#endif

// floor(log2(|v|)) of a finite non-zero v, subnormals included, and 2^e
// for e within the normal exponent range: from the bits (exact, where
// frexp/ldexp/exp2 need not be).
#if TC_BITS == 64
int fexpo(TC v) {
  uvec2 w = unpackDouble2x32(v);
  int ef = int((w.y >> 20) & 0x7FFu);
  if (ef != 0) return ef - 1023;
  uint hi = w.y & 0xFFFFFu;
  return hi != 0u ? findMSB(hi) + 32 - 1074 : findMSB(w.x) - 1074;
}
TC pow2(int e) { return packDouble2x32(uvec2(0u, uint(e + 1023) << 20)); }
#else
int fexpo(TC v) {
  uint b = floatBitsToUint(v);
  int ef = int((b >> 23) & 0xFFu);
  return ef != 0 ? ef - 127 : findMSB(b & 0x7FFFFFu) - 149;
}
TC pow2(int e) { return uintBitsToFloat(uint(e + 127) << 23); }
#endif

// C's fmod: exact. The quotient is exact while it is small; beyond, the
// remainder is reduced by y scaled to r's binade (r - t with
// t <= r < 2t is exact).
TC frem(TC x, TC y) {
  if (isnan(x) || isnan(y) || isinf(x) || y == TC(0)) return nxv_nan();
  TC ax = abs(x), ay = abs(y);
  if (isinf(y) || ax < ay) return x;
  TC r;
  TC q = trunc(fdiv(ax, ay));
  int ey;
  TC my = frexp(ay, ey);
  // (frexp of a subnormal ay is not to be trusted: see fdiv)
  if (q < TC(TC_BITS == 64 ? 4503599627370496.0 : 8388608.0) &&
      ay >= ldexp(TC(1), NXV_MIN_EXP)) {
    // ax - q ay exactly (a remainder is representable): both scaled by
    // ay's exponent (ay into [0.5, 1), exact), the product's rounding error
    // from Dekker's product (not fma, which llvmpipe does not fuse: a
    // remainder off by up to half an ulp of x there), the difference
    // exact by Sterbenz's lemma, then scaled back.
    TC mx = ldexp(ax, -ey);
    precise TC p = q * my;
    TC e = nxv_product_error(q, my, p);
    precise TC rm = (mx - p) - e;
    if (rm < TC(0)) rm += my;
    else if (rm >= my) rm -= my;
    r = ldexp(rm, ey);
  } else {
    r = ax;
    int ay_exp = fexpo(ay);
    while (r >= ay) {
      int d = fexpo(r) - ay_exp;
      TC t = ay * pow2(d / 2) * pow2(d - d / 2);
      if (t > r) t *= TC(0.5);
      r -= t;
    }
  }
  return x < TC(0) ? -r : r;
}
#endif

#endif  // NXV_BINARY_OPS_HELPERS

#if T_KIND == KIND_COMPLEX
TC BINARY_FN(BINARY_ARGS TC x, TC y) {
  switch (BINARY_SEL) {
  case 0: return x + y;
  case 1: return x - y;
  case 2: return c_mul(x, y);
  case 3: return c_div(x, y);
  case 6: return c_pow(x, y);
  }
  return TC(0);
}
#else
TC BINARY_FN(BINARY_ARGS TC x, TC y) {
  switch (BINARY_SEL) {
#if T_KIND == KIND_FLOAT
  // No contraction: in a fused program a product followed by a sum must
  // round twice, as two kernels do.
  case 0: { precise TC s = x + y; return s; }
  case 1: { precise TC s = x - y; return s; }
  case 2: { precise TC p = x * y; return p; }
#else
  case 0: return x + y;
  case 1: return x - y;
  case 2: return x * y;
#endif
#if T_KIND == KIND_FLOAT
  case 3: return fdiv(x, y);
  case 4: return (isnan(x) || isnan(y)) ? nxv_nan() : max(x, y);
  case 5: return (isnan(x) || isnan(y)) ? nxv_nan() : min(x, y);
#if TC_BITS == 32 && defined(PRECISE32)
  // In double (math64.glsl), rounded once: within an ulp of f32 where the
  // driver's pow and atan are a few ulp off.
  case 6: return TC(pow64(double(x), double(y)));
  case 9: return TC(atan2_64(double(x), double(y)));
#elif TC_BITS == 32
  case 6: return fpow(x, y);
  case 9: return fatan2(x, y);
#else
  case 6: return pow64(x, y);
  case 9: return atan2_64(x, y);
#endif
  case 7: return frem(x, y);  // remainder, sign of the dividend
#elif T_KIND == KIND_UINT
  case 3:  // unsigned division; x/0 = 0
  case 8:
    return y == TC(0) ? TC(0) : x / y;
  case 4: return max(x, y);
  case 5: return min(x, y);
  case 6: {  // power by squaring, wrapping
    TC r = TC(1), base = x, e = y;
    while (e != TC(0)) { if ((e & TC(1)) != TC(0)) r *= base; base *= base; e >>= 1; }
    return r;
  }
  case 7: return y == TC(0) ? TC(0) : x % y;
  case 10: return x & y;
  case 11: return x | y;
  case 12: return x ^ y;
  case 13: return y >= TC(TC_BITS) ? TC(0) : x << y;  // logical shifts
  case 14: return y >= TC(TC_BITS) ? TC(0) : x >> y;
#else
  case 3:  // integer division truncates; x/0 = 0; MIN/-1 wraps
  case 8:
    if (y == TC(0)) return TC(0);
    if (y == TC(-1)) return -x;
    return x / y;
  case 4: return max(x, y);
  case 5: return min(x, y);
  case 6: {  // integer power by squaring, wrapping; negative exponents:
             // 1 for base 1, +-1 for base -1, else 0
    if (y < TC(0)) return x == TC(1) ? TC(1) : (x == TC(-1) ? ((y & TC(1)) != TC(0) ? TC(-1) : TC(1)) : TC(0));
    TC r = TC(1), base = x, e = y;
    while (e != TC(0)) { if ((e & TC(1)) != TC(0)) r *= base; base *= base; e >>= 1; }
    return r;
  }
  case 7:  // remainder takes the sign of the dividend; x rem 0 = 0
    if (y == TC(0) || y == TC(-1)) return TC(0);
    return x - (x / y) * y;
  case 10: return x & y;
  case 11: return x | y;
  case 12: return x ^ y;
  case 13:    // left shift; a negative amount shifts right
  case 14: {  // arithmetic right shift; a negative amount shifts left
    // Clamped first: amounts of TC_BITS or more all act alike, and negating
    // the most negative amount would overflow.
    TC s = clamp(y, TC(-TC_BITS), TC(TC_BITS));
    if ((BINARY_SEL) == 14u) s = -s;
    if (s >= TC(0)) return s >= TC(TC_BITS) ? TC(0) : x << s;
    s = -s;
    return s >= TC(TC_BITS) ? (x < TC(0) ? TC(-1) : TC(0)) : x >> s;
  }
#endif
  }
  return TC(0);
}
#endif
