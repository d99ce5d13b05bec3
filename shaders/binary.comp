#version 460
#extension GL_GOOGLE_include_directive : require
#include "types.glsl"
// binary.comp - c[i] = a[i] OP b[i] for one element type T (T_ID), computed
// in TC and wrapped or rounded to T on store.
// VARIANT 0: contiguous operands (flags bit0/bit1: a/b is a broadcast
//            scalar; bit2: 4-wide vector loads allowed).
// VARIANT 1: strided operands; the argument arena holds
//            shape[rank], a_strides[rank], b_strides[rank], a_off, b_off.
// OP follows nxv_binary_op in include/nxv.h.
#include "common.glsl"

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT { T v[]; };
layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT4 { T4 v[]; };

layout(push_constant, std430) uniform PC {
  BufT a;
  BufT b;
  BufT c;
  ArgsRef args;
  uint n;
  uint rank;
  uint flags;
} pc;

#if T_KIND == KIND_FLOAT
TC nxv_nan() { return TC(0.0) / TC(0.0); }

// x / y refined by one fma-based correction step, so the quotient is
// correctly rounded in practice even where the driver divides through an
// approximate reciprocal.
TC fdiv(TC x, TC y) {
  TC q = x / y;
  if (!isinf(q) && !isnan(q) && q != TC(0) && !isinf(y)) {
    TC r = fma(-q, y, x);
    q = fma(r, TC(1) / y, q);
  }
  return q;
}

#if TC_BITS == 32
// pow with the sign rules of C's pow: a negative base with an integer
// exponent, zero bases, exact results for small integer exponents.
TC fpow(TC x, TC y) {
  if (y == TC(0)) return TC(1);
  if (isnan(x) || isnan(y)) return nxv_nan();
  bool yint = floor(y) == y;
  bool odd = yint && abs(y) < TC(16777216) && mod(abs(y), TC(2)) == TC(1);
  if (x == TC(0)) {
    TC z = y > TC(0) ? TC(0) : TC(1) / TC(0);
    return odd && (floatBitsToUint(x) >> 31) != 0u ? -z : z;  // -0 ** odd
  }
  if (x < TC(0) && !yint && !isinf(y)) return nxv_nan();
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
#endif
#endif

TC apply(TC x, TC y) {
  switch (OP) {
  case 0: return x + y;
  case 1: return x - y;
  case 2: return x * y;
#if T_KIND == KIND_FLOAT
  case 3: return fdiv(x, y);
  case 4: return (isnan(x) || isnan(y)) ? nxv_nan() : max(x, y);
  case 5: return (isnan(x) || isnan(y)) ? nxv_nan() : min(x, y);
#if TC_BITS == 32
  case 6: return fpow(x, y);
  case 9: return atan(x, y);
#endif
  case 7: {  // remainder, sign of the dividend (C fmod)
    if (isinf(y) && !isinf(x)) return x;
    return x - y * trunc(fdiv(x, y));
  }
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
    if (OP == 14) s = -s;
    if (s >= TC(0)) return s >= TC(TC_BITS) ? TC(0) : x << s;
    s = -s;
    return s >= TC(TC_BITS) ? (x < TC(0) ? TC(-1) : TC(0)) : x >> s;
  }
#endif
  }
  return TC(0);
}

shared uint s_args[3 * NXV_MAX_RANK + 2];

void main() {
  uint gid = nxv_gid();
  uint stride = nxv_nthreads();
  if (VARIANT == 0) {
    bool a_scalar = (pc.flags & 1u) != 0u;
    bool b_scalar = (pc.flags & 2u) != 0u;
    TC sa = a_scalar ? T_LD(pc.a.v[0]) : TC(0);
    TC sb = b_scalar ? T_LD(pc.b.v[0]) : TC(0);
    uint start = 0u;
#if T_VEC
    if ((pc.flags & 4u) != 0u) {
      uint n4 = pc.n / 4u;
      BufT4 a4 = BufT4(pc.a), b4 = BufT4(pc.b), c4 = BufT4(pc.c);
      for (uint i = gid; i < n4; i += stride) {
        TC4 x = a_scalar ? TC4(sa) : TC4(a4.v[i]);
        TC4 y = b_scalar ? TC4(sb) : TC4(b4.v[i]);
        c4.v[i] = T4(TC4(apply(x.x, y.x), apply(x.y, y.y), apply(x.z, y.z), apply(x.w, y.w)));
      }
      start = n4 * 4u;
    }
#endif
    for (uint i = start + gid; i < pc.n; i += stride) {
      TC x = a_scalar ? sa : T_LD(pc.a.v[i]);
      TC y = b_scalar ? sb : T_LD(pc.b.v[i]);
      pc.c.v[i] = T_ST(apply(x, y));
    }
  } else {
    uint rank = pc.rank;
    uint nargs = 3u * rank + 2u;
    for (uint j = gl_LocalInvocationID.x; j < nargs; j += gl_WorkGroupSize.x)
      s_args[j] = pc.args.d[j];
    barrier();
    for (uint i = gid; i < pc.n; i += stride) {
      uint ia = s_args[3u * rank], ib = s_args[3u * rank + 1u], rem = i;
      for (int d = int(rank) - 1; d >= 0; --d) {
        uint dim = s_args[d];
        uint q = rem / dim;
        uint r = rem - q * dim;
        rem = q;
        ia += r * s_args[rank + uint(d)];
        ib += r * s_args[2u * rank + uint(d)];
      }
      pc.c.v[i] = T_ST(apply(T_LD(pc.a.v[ia]), T_LD(pc.b.v[ib])));
    }
  }
}
