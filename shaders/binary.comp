#version 460
#extension GL_GOOGLE_include_directive : require
// binary.comp - c[i] = a[i] OP b[i] for one element type T.
// VARIANT 0: contiguous operands (flags bit0/bit1: a/b is a broadcast
//            scalar; bit2: 4-wide vector loads allowed).
// VARIANT 1: strided operands; the argument arena holds
//            shape[rank], a_strides[rank], b_strides[rank], a_off, b_off.
// OP follows nxv_binary_op in include/nxv.h.
#include "common.glsl"
#include "types.glsl"

layout(buffer_reference, std430, buffer_reference_align = 4) buffer BufT { T v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufT4 { T4 v[]; };

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
T nxv_nan() { return T(0.0) / T(0.0); }

// x / y refined by one fma-based correction step, so the quotient is
// correctly rounded in practice even where the driver divides through an
// approximate reciprocal.
T fdiv(T x, T y) {
  T q = x / y;
  if (!isinf(q) && !isnan(q) && q != T(0) && !isinf(y)) {
    T r = fma(-q, y, x);
    q = fma(r, T(1) / y, q);
  }
  return q;
}

#if T_BITS == 32
// pow with the sign rules of C's pow: a negative base with an integer
// exponent, zero bases, exact results for small integer exponents.
T fpow(T x, T y) {
  if (y == T(0)) return T(1);
  if (isnan(x) || isnan(y)) return nxv_nan();
  bool yint = floor(y) == y;
  bool odd = yint && abs(y) < T(16777216) && mod(abs(y), T(2)) == T(1);
  if (x == T(0)) {
    T z = y > T(0) ? T(0) : T(1) / T(0);
    return odd && (floatBitsToUint(x) >> 31) != 0u ? -z : z;  // -0 ** odd
  }
  if (x < T(0) && !yint && !isinf(y)) return nxv_nan();
  T ax = abs(x), r;
  if (yint && abs(y) <= T(64)) {  // exponentiation by squaring
    T b = ax;
    uint e = uint(abs(y));
    r = T(1);
    while (e != 0u) {
      if ((e & 1u) != 0u) r *= b;
      b *= b;
      e >>= 1;
    }
    if (y < T(0)) r = T(1) / r;
  } else {
    r = pow(ax, y);
  }
  return x < T(0) && odd ? -r : r;
}
#endif
#endif

T apply(T x, T y) {
  switch (OP) {
  case 0: return x + y;
  case 1: return x - y;
  case 2: return x * y;
#if T_KIND == KIND_FLOAT
  case 3: return fdiv(x, y);
  case 4: return (isnan(x) || isnan(y)) ? nxv_nan() : max(x, y);
  case 5: return (isnan(x) || isnan(y)) ? nxv_nan() : min(x, y);
#if T_BITS == 32
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
    return y == T(0) ? T(0) : x / y;
  case 4: return max(x, y);
  case 5: return min(x, y);
  case 6: {  // power by squaring, wrapping
    T r = T(1), base = x, e = y;
    while (e != T(0)) { if ((e & T(1)) != T(0)) r *= base; base *= base; e >>= 1; }
    return r;
  }
  case 7: return y == T(0) ? T(0) : x % y;
  case 10: return x & y;
  case 11: return x | y;
  case 12: return x ^ y;
  case 13: return y >= T(T_BITS) ? T(0) : x << y;  // logical shifts
  case 14: return y >= T(T_BITS) ? T(0) : x >> y;
#else
  case 3:  // integer division truncates; x/0 = 0; MIN/-1 wraps
  case 8:
    if (y == T(0)) return T(0);
    if (y == T(-1)) return -x;
    return x / y;
  case 4: return max(x, y);
  case 5: return min(x, y);
  case 6: {  // integer power by squaring, wrapping; negative exponents:
             // 1 for base 1, +-1 for base -1, else 0
    if (y < T(0)) return x == T(1) ? T(1) : (x == T(-1) ? ((y & T(1)) != T(0) ? T(-1) : T(1)) : T(0));
    T r = T(1), base = x, e = y;
    while (e != T(0)) { if ((e & T(1)) != T(0)) r *= base; base *= base; e >>= 1; }
    return r;
  }
  case 7:  // remainder takes the sign of the dividend; x rem 0 = 0
    if (y == T(0) || y == T(-1)) return T(0);
    return x - (x / y) * y;
  case 10: return x & y;
  case 11: return x | y;
  case 12: return x ^ y;
  case 13:    // left shift; a negative amount shifts right
  case 14: {  // arithmetic right shift; a negative amount shifts left
    // Clamped first: amounts of T_BITS or more all act alike, and negating
    // the most negative amount would overflow.
    T s = clamp(y, T(-T_BITS), T(T_BITS));
    if (OP == 14) s = -s;
    if (s >= T(0)) return s >= T(T_BITS) ? T(0) : x << s;
    s = -s;
    return s >= T(T_BITS) ? (x < T(0) ? T(-1) : T(0)) : x >> s;
  }
#endif
  }
  return T(0);
}

shared uint s_args[3 * NXV_MAX_RANK + 2];

void main() {
  uint gid = nxv_gid();
  uint stride = nxv_nthreads();
  if (VARIANT == 0) {
    bool a_scalar = (pc.flags & 1u) != 0u;
    bool b_scalar = (pc.flags & 2u) != 0u;
    T sa = a_scalar ? pc.a.v[0] : T(0);
    T sb = b_scalar ? pc.b.v[0] : T(0);
    uint start = 0u;
    if ((pc.flags & 4u) != 0u) {
      uint n4 = pc.n / 4u;
      BufT4 a4 = BufT4(pc.a), b4 = BufT4(pc.b), c4 = BufT4(pc.c);
      for (uint i = gid; i < n4; i += stride) {
        T4 x = a_scalar ? T4(sa) : a4.v[i];
        T4 y = b_scalar ? T4(sb) : b4.v[i];
        c4.v[i] = T4(apply(x.x, y.x), apply(x.y, y.y), apply(x.z, y.z), apply(x.w, y.w));
      }
      start = n4 * 4u;
    }
    for (uint i = start + gid; i < pc.n; i += stride) {
      T x = a_scalar ? sa : pc.a.v[i];
      T y = b_scalar ? sb : pc.b.v[i];
      pc.c.v[i] = apply(x, y);
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
      pc.c.v[i] = apply(pc.a.v[ia], pc.b.v[ib]);
    }
  }
}
