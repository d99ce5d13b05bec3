#version 460
#extension GL_GOOGLE_include_directive : require
#include "types.glsl"
// unary.comp - c[i] = convert<O>(OP(a[i])) for input type T (T_ID), output
// type O (O_ID). Arithmetic is in the compute type TC (narrow integers in 32
// bits, f16/bf16 in f32); CONVERT_ONLY builds a module that only converts
// (OP 0), for the T != O pairs.
// Element type conversion is OP 0 (copy) with O != T; a strided copy is a
// transpose. VARIANT 0: contiguous (flags bit2: 4-wide loads allowed;
// bit7, 8- and 16-bit inputs: 16 bytes of input at a time, the input
// 16-byte aligned; bit8, a conversion to a wider 16- or 64-bit type: 16
// bytes of output at a time, 8 or 2 elements, the input aligned to as many
// elements);
// VARIANT 1: strided, the arena holds shape[rank], a_strides[rank], a_off;
// VARIANT 2: strided output too (see main).
// VARIANT 3: strided input, output collapsed to at most three axes: tiles
// of 32 rows (tile2d.glsl); 256 threads. Not for c128 inputs.
// VARIANT 4: 16-bit input and output, the same arguments: tile2d.glsl's
// 16-byte form (the input transposed in the wide form, C % 8 == 0); 256
// threads.
// OP follows nxv_unary_op in include/nxv.h.
#include "common.glsl"
#if T_KIND == 0 && (TC_BITS == 64 || defined(PRECISE32)) && !defined(CONVERT_ONLY)
#include "math64.glsl"
#endif
#if T_KIND == KIND_COMPLEX && !defined(CONVERT_ONLY)
#if defined(PRECISE32)
// c64 with PRECISE32 evaluates the complex formulas in double (complex.glsl
// on dvec2): a result is rounded to c64 once, on store.
#undef TC
#undef TR
#define TC dvec2
#define TR double
#include "complex.glsl"
#undef TC
#undef TR
#define TC vec2
#define TR float
#define CW dvec2
#define CWR double
#else
#include "complex.glsl"
#define CW TC
#define CWR TR
#endif
#endif

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT { T v[]; };
layout(buffer_reference, std430, buffer_reference_align = O_ALIGN) buffer BufO { O v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4 * T_ALIGN) buffer BufT4 { T4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4 * O_ALIGN) buffer BufO4 { O4 v[]; };
#if defined(CONVERT_ONLY) && T_KIND != KIND_COMPLEX && \
    ((O_BITS == 16 && T_BITS == 8 && T_VEC) ||                       \
     (O_BITS == 64 && T_BITS < 64 && O_KIND != KIND_COMPLEX))
// A conversion to a wider type, 16 bytes of output per thread (flags bit
// 8): 8 elements (two groups of 4) of a 16-bit output from an 8-bit input,
// 2 of a 64-bit output, so that neighbouring threads store neighbouring
// 16-byte runs, each in one store (bf16 results too, which have no 4-wide
// path).
#define WIDEN16 1
#if O_BITS == 16
layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufW { uvec4 v[]; };
// The bits of a 16-bit result, its value z in OC, in a word's low half
// (no 16-bit locals without the arithmetic extensions). The input is an
// 8-bit integer: z is an integer within [-128, 255], exact in f16 and bf16.
uint w16(OC z) {
#if O_ID == 8
  return packHalf2x16(vec2(z, 0.0));
#elif O_ID == 9
  return floatBitsToUint(z) >> 16;
#else
  return uint(z) & 0xFFFFu;
#endif
}
// Two groups of 4 results as the 16 bytes that hold them.
uvec4 w16x8(OC4 p, OC4 q) {
  return uvec4(w16(p.x) | (w16(p.y) << 16), w16(p.z) | (w16(p.w) << 16),
               w16(q.x) | (w16(q.y) << 16), w16(q.z) | (w16(q.w) << 16));
}
#else
#if O_KIND == KIND_FLOAT
#define O2 dvec2
#elif O_KIND == KIND_SINT
#define O2 i64vec2
#else
#define O2 u64vec2
#endif
layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufW { O2 v[]; };
#endif
#endif
// The contiguous variant's 4-wide and 16-byte paths: types with T_VEC and
// O_VEC, and bf16 on either side (no T_VEC: its bits move through T_LD4
// and O_ST4).
#if (T_VEC || defined(T_BF16)) && (O_VEC || defined(O_BF16))
#define FLAT_VEC 1
#else
#define FLAT_VEC 0
#endif
#if FLAT_VEC && T_BITS <= 16
// 16 bytes of an 8- or 16-bit input: Q groups of 4, read at once, and
// their Q groups of results (flags bit 7).
const uint Q = 4u / T_ALIGN;
#define O16_ALIGN (Q * 4 * O_ALIGN < 16 ? Q * 4 * O_ALIGN : 16)
struct T16 { T4 q[Q]; };
struct O16 { O4 q[Q]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufT16 { T16 v[]; };
layout(buffer_reference, std430, buffer_reference_align = O16_ALIGN) buffer BufO16 { O16 v[]; };
#if defined(T_BF16) && defined(O_BF16)
layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufW16 { uvec4 v[]; };
#endif
#endif

layout(push_constant, std430) uniform PC {
  BufT a;
  uint64_t unused_b;
  BufO c;
  ArgsRef args;
  uint n;
  uint rank;
  uint flags;
} pc;

#if T_KIND == KIND_COMPLEX
// Complex ops, evaluated in CW (TC, or dvec2 for c64 with PRECISE32). abs,
// real, imag and phase have real results: they return (result, 0) and are
// built with a real O (the component type), where cvt keeps the real part.
TC apply(TC x) {
#if !defined(CONVERT_ONLY)
  CW z = CW(x);
  const CW one = CW(CWR(1), CWR(0));
  switch (OP) {
  case 0: return x;
  case 1: return -x;
  case 2: return TC(c_abs(z), TR(0));
  case 4: return TC(c_sqrt(z));
  case 5: return TC(c_div(one, c_sqrt(z)));
  case 6: return TC(c_exp(z));
  case 7: return TC(c_log(z));
  case 8: return TC(c_sin(z));
  case 9: return TC(c_cos(z));
  case 10: return TC(c_div(c_sinh(z), c_cosh(z)));
  case 11: return TC(c_div(one, one + c_exp(-z)));
  case 16: return TC(c_mul(z, z));
  case 17: return TC(c_exp(z) - one);
  case 18: return TC(c_log(z + one));
  case 22: return TC(c_div(c_sin(z), c_cos(z)));
  case 23: return TC(c_sinh(z));
  case 24: return TC(c_cosh(z));
  case 34: return TC(x.x, -x.y);
  case 35: return TC(x.x, TR(0));
  case 36: return TC(x.y, TR(0));
  case 37: return TC(c_phase(z), TR(0));
  }
#endif
  return x;
}
#else
#define UNARY_FN apply
#define UNARY_ARGS
#define UNARY_SEL OP
#include "unary_ops.glsl"
#endif

// Conversion TC -> O. Float to integer truncates toward zero, saturates and
// maps NaN to 0. Complex to real keeps the real part; real to complex has
// a zero imaginary part.
#if T_KIND == KIND_COMPLEX
#define S TR
#define S_KIND KIND_FLOAT
#define SRC(v) (v).x
#else
#define S TC
#define S_KIND T_KIND
#define SRC(v) (v)
#endif
OC cvt(TC xin) {
#if O_KIND == KIND_COMPLEX
#if T_KIND == KIND_COMPLEX
  return OC(xin);
#else
  return OC(OR(xin), OR(0));
#endif
#else
  S x = SRC(xin);
#if S_KIND == KIND_FLOAT && O_KIND != KIND_FLOAT
  if (isnan(x)) return OC(0);
#if O_KIND == KIND_SINT
  if (x <= S(O_MIN)) return OC(O_MIN);
  if (x >= S(O_MAX) + S(1.0)) return OC(O_MAX);
#else
  if (x <= S(0)) return OC(0);
  if (x >= S(O_MAX) + S(1.0)) return OC(O_MAX);
#endif
  return OC(trunc(x));
#else
  return OC(x);  // integers wrap to the width of O on store
#endif
#endif
}

shared uint s_args[NXV_MAX_RANK * 3 + 2];

// c128 would need 17 KiB of shared memory for the tile: it keeps VARIANT 1.
#define TILED !(T_KIND == KIND_COMPLEX && TC_BITS == 64)
#if TILED
#include "tile2d.glsl"

void tiled() {
  TC x[T2_PER];
  t2_load(pc.a, 0u, x);
  uint R = t2_rows(), C = t2_cols(), r = t2_row(), c = t2_col();
  if (r >= R || c >= C) return;
  uint i = (gl_WorkGroupID.z * R + r) * C + c;
#if T_VEC && O_VEC
  if ((pc.flags & T2_FLAG_VEC_OUT) != 0u) {  // C % 4 == 0
    [[unroll]] for (uint q = 0u; q < T2_PER; q += 4u) {
      if (c + t2_dc(q) >= C) break;
      BufO4(pc.c).v[(i + t2_dc(q)) / 4u] =
          O4(OC4(cvt(apply(x[q])), cvt(apply(x[q + 1u])), cvt(apply(x[q + 2u])),
                 cvt(apply(x[q + 3u]))));
    }
    return;
  }
#endif
  [[unroll]] for (uint j = 0u; j < T2_PER; ++j)
    if (c + t2_dc(j) < C) pc.c.v[i + t2_dc(j)] = O_ST(cvt(apply(x[j])));
}

#if T_BITS == 16 && O_BITS == 16
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer T16BufO { uvec4 v[]; };
#if O_VEC
struct O8 { O4 q[2]; };
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer T16BufOV { O8 v[]; };
#endif

// VARIANT 4: the 16-byte tiles (tile2d.glsl's 16-byte form), for a
// transposed input of 16 bits and an output of 16 bits.
void tiled16() {
  uvec4 xa = t16_load(pc.a, 0u);
  uint R = t2_rows(), C = t2_cols(), r = t2_row(), c = t16_col();
  if (r >= R || c >= C) return;
  OC z[8];
  [[unroll]] for (uint j = 0u; j < 8u; ++j) z[j] = cvt(apply(t2_half(xa[j / 2u], j % 2u)));
  uint i = ((gl_WorkGroupID.z * R + r) * C + c) / 8u;
#if O_VEC
  T16BufOV(pc.c).v[i].q[0] = O4(OC4(z[0], z[1], z[2], z[3]));
  T16BufOV(pc.c).v[i].q[1] = O4(OC4(z[4], z[5], z[6], z[7]));
#else
  uvec4 o;
  [[unroll]] for (uint k = 0u; k < 4u; ++k)
    o[k] = (uint(O_ST(z[2u * k])) & 0xFFFFu) | (uint(O_ST(z[2u * k + 1u])) << 16u);
  T16BufO(pc.c).v[i] = o;
#endif
}
#endif
#endif

void main() {
  uint gid = nxv_gid();
  uint stride = nxv_nthreads();
  if (VARIANT == 0) {
    bool scalar = (pc.flags & 1u) != 0u;  // a is one element, broadcast
    OC sv = scalar ? cvt(apply(T_LD(pc.a.v[0]))) : OC(0);
    uint start = 0u;
#ifdef WIDEN16
    if ((pc.flags & 256u) != 0u) {
      BufW w = BufW(pc.c);
#if O_BITS == 16
      uint nw = pc.n / 8u;
      BufT4 a4 = BufT4(pc.a);
      for (uint i = gid; i < nw; i += stride) {
        TC4 x0 = scalar ? TC4(0) : TC4(a4.v[2u * i]);
        TC4 x1 = scalar ? TC4(0) : TC4(a4.v[2u * i + 1u]);
        OC4 p = scalar ? OC4(sv) : OC4(cvt(x0.x), cvt(x0.y), cvt(x0.z), cvt(x0.w));
        OC4 q = scalar ? OC4(sv) : OC4(cvt(x1.x), cvt(x1.y), cvt(x1.z), cvt(x1.w));
        w.v[i] = w16x8(p, q);
      }
      start = nw * 8u;
#else
      uint nw = pc.n / 2u;
      for (uint i = gid; i < nw; i += stride) {
        OC x = scalar ? sv : cvt(apply(T_LD(pc.a.v[2u * i])));
        OC y = scalar ? sv : cvt(apply(T_LD(pc.a.v[2u * i + 1u])));
        w.v[i] = O2(O_ST(x), O_ST(y));
      }
      start = nw * 2u;
#endif
    }
#endif
#if FLAT_VEC
#if T_BITS <= 16
#if defined(T_BF16) && defined(O_BF16)
    // A bf16 copy moves its bits, 16 bytes at a time: on an H200 (8192 x
    // 8192, wall clock) 79% of the buffer copy's bandwidth through T_LD4
    // and O_ST4, 97% this way (f16's vector conversions: 96%). NaN
    // payloads are kept, as a copy keeps them.
    if (OP == 0u && (pc.flags & 128u) != 0u && !scalar) {
      uint n16 = pc.n / 8u;
      BufW16 a16 = BufW16(pc.a), c16 = BufW16(pc.c);
      for (uint i = gid; i < n16; i += stride) c16.v[i] = a16.v[i];
      start = n16 * 8u;
    } else
#endif
    if ((pc.flags & 128u) != 0u) {
      uint n16 = pc.n / (4u * Q);
      BufT16 a16 = BufT16(pc.a);
      BufO16 c16 = BufO16(pc.c);
      for (uint i = gid; i < n16; i += stride) {
        // (8- and 16-bit values cannot be locals without the arithmetic
        // extensions: each group is converted as it is read.)
        TC4 x[Q];
        [[unroll]] for (uint q = 0u; q < Q; ++q) x[q] = scalar ? TC4(0) : T_LD4(a16.v[i].q[q]);
        [[unroll]] for (uint q = 0u; q < Q; ++q)
          c16.v[i].q[q] = scalar ? O_ST4(OC4(sv))
                                 : O_ST4(OC4(cvt(apply(x[q].x)), cvt(apply(x[q].y)),
                                             cvt(apply(x[q].z)), cvt(apply(x[q].w))));
      }
      start = n16 * 4u * Q;
    }
#endif
    if ((pc.flags & 4u) != 0u) {
      uint n4 = pc.n / 4u;
      BufT4 a4 = BufT4(pc.a);
      BufO4 c4 = BufO4(pc.c);
      for (uint i = start / 4u + gid; i < n4; i += stride) {
        if (scalar) {
          c4.v[i] = O_ST4(OC4(sv));
        } else {
          TC4 x = T_LD4(a4.v[i]);
          c4.v[i] = O_ST4(OC4(cvt(apply(x.x)), cvt(apply(x.y)), cvt(apply(x.z)), cvt(apply(x.w))));
        }
      }
      start = max(start, n4 * 4u);
    }
#endif
    for (uint i = start + gid; i < pc.n; i += stride)
      pc.c.v[i] = O_ST(scalar ? sv : cvt(apply(T_LD(pc.a.v[i]))));
  } else if (VARIANT == 3u) {
#if TILED
    tiled();
#endif
  } else if (VARIANT == 4u) {
#if TILED && T_BITS == 16 && O_BITS == 16
    tiled16();
#endif
  } else {
    // VARIANT 1: dense output; VARIANT 2: the output is strided too (a
    // region of a larger tensor): the arena holds shape[rank],
    // a_strides[rank], c_strides[rank], a_off, c_off.
    bool out_strided = VARIANT == 2u;
    uint rank = pc.rank;
    uint nargs = out_strided ? 3u * rank + 2u : 2u * rank + 1u;
    uint offs = out_strided ? 3u * rank : 2u * rank;
    for (uint j = gl_LocalInvocationID.x; j < nargs; j += gl_WorkGroupSize.x)
      s_args[j] = pc.args.d[j];
    barrier();
    for (uint i = gid; i < pc.n; i += stride) {
      uint ia = s_args[offs], ic = out_strided ? s_args[offs + 1u] : i, rem = i;
      for (int d = int(rank) - 1; d >= 0; --d) {
        uint dim = s_args[d];
        uint q = rem / dim;
        uint r = rem - q * dim;
        ia += r * s_args[rank + uint(d)];
        if (out_strided) ic += r * s_args[2u * rank + uint(d)];
        rem = q;
      }
      pc.c.v[ic] = O_ST(cvt(apply(T_LD(pc.a.v[ia]))));
    }
  }
}
