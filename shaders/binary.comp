#version 460
#extension GL_GOOGLE_include_directive : require
#include "types.glsl"
// binary.comp - c[i] = a[i] OP b[i] for one element type T (T_ID), computed
// in TC and wrapped or rounded to T on store.
// VARIANT 0: contiguous operands (flags bit0/bit1: a/b is a broadcast
//            scalar; bit2: 4-wide vector loads allowed; bit3/bit4: a/b is
//            an immediate scalar, its bits in pc.args, nxv_imm; with bit2,
//            bit5/bit6: a/b is a row of 4 pc.rank elements repeated down
//            the rows of the output, group i of 4 reading its group
//            i % pc.rank, the quotient (i * m) >> (32 + pc.pad) with m the
//            low word of pc.imm, or a mask where m is 0; bit7, 8- and
//            16-bit types: 16 bytes at a time, every operand that is not
//            a scalar 16-byte aligned, the groups of bit5/bit6 then of 16
//            bytes).
// VARIANT 1: strided operands; the argument arena holds
//            shape[rank], a_strides[rank], b_strides[rank], a_off, b_off
//            (flags bit3/bit4: a/b is an immediate, its bits in pc.imm).
// VARIANT 2: strided operands, output collapsed to at most three axes:
//            tiles of 32 rows (tile2d.glsl); 256 threads. Operand mode 3
//            (see tile2d.glsl): an immediate, its bits in pc.imm. Not in
//            c128 modules.
// VARIANT 4: 16-bit types, the same arguments: tile2d.glsl's 16-byte form
//            (an operand transposed in the wide form, C % 8 == 0); 256
//            threads.
// With U_ID (T a float type, U an integer or narrower float type; or T an
// integer type, U an integer type all of whose values T holds): one
// operand is of type U, converted to T as it is read (exactly as as_type
// would store it), so that a mixed-type op needs no conversion first.
// Only VARIANT 0 (4 elements at a time with flag bit 2, f16 and bf16
// results 8 with bit 7; no row or immediate forms) and 1; VARIANT bit 3
// set: the U operand is a, else b.
// OP follows nxv_binary_op in include/nxv.h.
#include "common.glsl"
#if T_KIND == KIND_COMPLEX
#include "complex.glsl"
#elif T_KIND == KIND_FLOAT && (TC_BITS == 64 || defined(PRECISE32))
#include "math64.glsl"
#endif

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT { T v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4 * T_ALIGN) buffer BufT4 { T4 v[]; };
#if (T_VEC || defined(T_BF16)) && T_BITS <= 16
// 16 bytes of an 8- or 16-bit type: Q groups of 4, loaded and stored at
// once (flags bit 7).
const uint Q = 4u / T_ALIGN;
struct T16 { T4 q[Q]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufT16 { T16 v[]; };
#endif

#ifdef U_ID
layout(buffer_reference, std430, buffer_reference_align = U_ALIGN) buffer BufU { U v[]; };
// Element i of the U operand at p, converted to T and read back in TC:
// what as_type to T and a load would give.
// (8- and 16-bit values cannot be locals without the arithmetic
// extensions: an element is converted as it is read.)
#if T_ID == 8 && U_ID != 0 && U_ID != 4
// x, an integer (f16 modules take integer operands only) in f32, rounded
// to f16 as a store rounds it (to nearest even; 65520 and above to
// infinity), kept in f32. In integer arithmetic, without branches:
// NVIDIA's compiler folds float -> float16_t -> float into nothing.
// (8-bit integers are exact in f16: no rounding.)
float nxv_f16_round_int(float x) {
  uint u = floatBitsToUint(x), a = u & 0x7FFFFFFFu;
  uint r = (a + 0x0FFFu + ((a >> 13) & 1u)) & ~0x1FFFu;  // 10 fraction bits
  return uintBitsToFloat((u & 0x80000000u) | (a >= 0x477FF000u ? 0x7F800000u : r));
}
#define U_ROUND(x) nxv_f16_round_int(x)
#elif T_ID == 8
#define U_ROUND(x) (x)
#else
#define U_ROUND(x) T_LD(T_ST(x))
#endif
#if T_KIND == KIND_SINT && TC_BITS == 64 && U_ID == 2
// s32 into s64: the sign extension spelled out as the high word. On
// lavapipe (Mesa 22.3, LLVM 15) the strided variant's shifts and powers
// read int64_t(x) of a loaded int x as if zero-extended (negative values
// became large positive ones), where this form reads right.
#define U_CVT(e) packInt2x32(ivec2(int(e), int(e) >> 31))
#else
#define U_CVT(e) U_ROUND(TC(U_LD(e)))
#endif
TC u_ld(BufT p, uint i) { return U_CVT(BufU(p).v[i]); }
#if T_VEC || defined(T_BF16)
// Group i of 4 elements of the U operand at p (4-element aligned), converted.
layout(buffer_reference, std430, buffer_reference_align = 4 * U_ALIGN) buffer BufU4 { U4 v[]; };
TC4 u_ld4(BufT p, uint i) {
  TC4 w = TC4(U_LD4(BufU4(p).v[i]));
  return TC4(U_ROUND(w.x), U_ROUND(w.y), U_ROUND(w.z), U_ROUND(w.w));
}
#endif
const bool U_IS_A = (VARIANT & 8u) != 0u;
#define BASE_VARIANT (VARIANT & 7u)
#else
#define BASE_VARIANT VARIANT
#endif

layout(push_constant, std430) uniform PC {
  BufT a;
  BufT b;
  BufT c;
  ArgsRef args;
  uint n;
  uint rank;
  uint flags;
  uint pad;
  uint64_t imm;  // strided variants: an immediate operand's bits
} pc;

// VARIANT 0, flags bit 5 / 6: the group of a repeated row that group i
// of the output reads, i % pc.rank (see the header).
uint row_group(uint i) {
  uint m = uint(pc.imm), hi, lo;
  umulExtended(i, m, hi, lo);
  return m != 0u ? i - (hi >> pc.pad) * pc.rank : i & (pc.rank - 1u);
}

#define BINARY_FN apply
#define BINARY_ARGS
#define BINARY_SEL OP
#include "binary_ops.glsl"

shared uint s_args[3 * NXV_MAX_RANK + 2];

// c128 would need 17 KiB of shared memory for the tile: it keeps VARIANT 1.
// Mixed-type modules (U_ID) have no tiled variants either.
#ifdef U_ID
#define TILED 0
#else
#define TILED !(T_KIND == KIND_COMPLEX && TC_BITS == 64)
#endif
#if TILED
#include "tile2d.glsl"

// t2_load, or the immediate in pc.imm for operand mode 3.
void t2_operand(BufT p, uint o, out TC v[T2_PER]) {
#ifdef NXV_IMM
  if (((pc.flags >> (2u * o)) & 3u) == 3u) {
    TC s = nxv_imm(pc.imm);
    [[unroll]] for (uint j = 0u; j < T2_PER; ++j) v[j] = s;
    return;
  }
#endif
  t2_load(p, o, v);
}

void tiled() {
  TC x[T2_PER], y[T2_PER];
#if T_BITS == 16 || T_BITS == 32
  // A transposed a is staged after b's loads are issued, so that they are
  // in flight during the staging's barriers (on an H200, f32 x +
  // transpose(y) 3944-3948 -> 4221-4223 GPU GB/s, registers 29 -> 30, f16
  // unchanged at 32; 64-bit types, whose registers it raises more, lost
  // 3%; 8-bit types were not measured and keep the old order).
  if ((pc.flags & 3u) == 2u) {
    t2_operand(pc.b, 1u, y);
    t2_operand(pc.a, 0u, x);
  } else
#endif
  {
    t2_operand(pc.a, 0u, x);
    t2_operand(pc.b, 1u, y);
  }
  uint R = t2_rows(), C = t2_cols(), r = t2_row(), c = t2_col();
  if (r >= R || c >= C) return;
  uint i = (gl_WorkGroupID.z * R + r) * C + c;
#if T_VEC
  if ((pc.flags & T2_FLAG_VEC_OUT) != 0u) {  // C % 4 == 0
    [[unroll]] for (uint q = 0u; q < T2_PER; q += 4u) {
      if (c + t2_dc(q) >= C) break;
      BufT4(pc.c).v[(i + t2_dc(q)) / 4u] =
          T4(TC4(apply(x[q], y[q]), apply(x[q + 1u], y[q + 1u]),
                 apply(x[q + 2u], y[q + 2u]), apply(x[q + 3u], y[q + 3u])));
    }
    return;
  }
#endif
  [[unroll]] for (uint j = 0u; j < T2_PER; ++j)
    if (c + t2_dc(j) < C) pc.c.v[i + t2_dc(j)] = T_ST(apply(x[j], y[j]));
}

#if T_BITS == 16
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer T16BufO { uvec4 v[]; };
#if T_VEC
struct T8 { T4 q[2]; };
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer T16BufT { T8 v[]; };
#endif

// Operand o of VARIANT 4: its packed elements; zeros for an immediate
// (mode 3), whose value tiled16 takes from pc.imm.
uvec4 t16_operand(BufT p, uint o) {
  if (((pc.flags >> (2u * o)) & 3u) == 3u) return uvec4(0u);
  return t16_load(p, o);
}

// VARIANT 4: the 16-byte tiles (tile2d.glsl's 16-byte form).
void tiled16() {
  // A transposed a is staged after b's load is issued, so that b's load
  // is in flight during the staging's barriers (on an H200, f16 x +
  // transpose(y) 3711-3714 -> 3983-3988 GPU GB/s).
  uvec4 xa, xb;
  if ((pc.flags & 3u) == 2u) {
    xb = t16_operand(pc.b, 1u);
    xa = t16_operand(pc.a, 0u);
  } else {
    xa = t16_operand(pc.a, 0u);
    xb = t16_operand(pc.b, 1u);
  }
  uint R = t2_rows(), C = t2_cols(), r = t2_row(), c = t16_col();
  if (r >= R || c >= C) return;
  TC sa = TC(0), sb = TC(0);
  bool a_imm = (pc.flags & 3u) == 3u, b_imm = ((pc.flags >> 2u) & 3u) == 3u;
#ifdef NXV_IMM
  if (a_imm) sa = nxv_imm(pc.imm);
  if (b_imm) sb = nxv_imm(pc.imm);
#endif
  TC z[8];
  [[unroll]] for (uint j = 0u; j < 8u; ++j) {
    TC x = a_imm ? sa : t2_half(xa[j / 2u], j % 2u);
    TC y = b_imm ? sb : t2_half(xb[j / 2u], j % 2u);
    z[j] = apply(x, y);
  }
  uint i = ((gl_WorkGroupID.z * R + r) * C + c) / 8u;
#if T_VEC
  T16BufT(pc.c).v[i].q[0] = T4(TC4(z[0], z[1], z[2], z[3]));
  T16BufT(pc.c).v[i].q[1] = T4(TC4(z[4], z[5], z[6], z[7]));
#else
  uvec4 o;
  [[unroll]] for (uint k = 0u; k < 4u; ++k)
    o[k] = (uint(T_ST(z[2u * k])) & 0xFFFFu) | (uint(T_ST(z[2u * k + 1u])) << 16u);
  T16BufO(pc.c).v[i] = o;
#endif
}
#endif
#endif

void main() {
  uint gid = nxv_gid();
  uint stride = nxv_nthreads();
  if (BASE_VARIANT == 0u) {
    // A scalar operand comes from its buffer (flag bit 0 / 1) or, as an
    // immediate, from pc.args's bits (bit 3 / 4; its slot then holds a
    // valid address that is never read).
    bool a_scalar = (pc.flags & 9u) != 0u;
    bool b_scalar = (pc.flags & 18u) != 0u;
#ifdef U_ID
    TC sa = (pc.flags & 1u) != 0u ? (U_IS_A ? u_ld(pc.a, 0u) : T_LD(pc.a.v[0])) : TC(0);
    TC sb = (pc.flags & 2u) != 0u ? (U_IS_A ? T_LD(pc.b.v[0]) : u_ld(pc.b, 0u)) : TC(0);
#else
    TC sa = (pc.flags & 1u) != 0u ? T_LD(pc.a.v[0]) : TC(0);
    TC sb = (pc.flags & 2u) != 0u ? T_LD(pc.b.v[0]) : TC(0);
#endif
#if defined(NXV_IMM) && !defined(U_ID)
    if ((pc.flags & 8u) != 0u) sa = nxv_imm(uint64_t(pc.args));
    if ((pc.flags & 16u) != 0u) sb = nxv_imm(uint64_t(pc.args));
#endif
    uint start = 0u;
#if (T_VEC || defined(T_BF16)) && !defined(U_ID)
    bool a_row = (pc.flags & 32u) != 0u, b_row = (pc.flags & 64u) != 0u;
#if T_BITS <= 16
    if ((pc.flags & 128u) != 0u) {
      uint n16 = pc.n / (4u * Q);
      BufT16 a16 = BufT16(pc.a), b16 = BufT16(pc.b), c16 = BufT16(pc.c);
      for (uint i = gid; i < n16; i += stride) {
        uint col = a_row || b_row ? row_group(i) : i;
        // (8- and 16-bit values cannot be locals without the arithmetic
        // extensions: each group is converted as it is read; the groups
        // of one 16-byte element are adjacent, aligned accesses.)
        uint ia = a_row ? col : i, ib = b_row ? col : i;
        TC4 x[Q], y[Q];
        [[unroll]] for (uint q = 0u; q < Q; ++q) {
          x[q] = a_scalar ? TC4(sa) : T_LD4(a16.v[ia].q[q]);
          y[q] = b_scalar ? TC4(sb) : T_LD4(b16.v[ib].q[q]);
        }
        [[unroll]] for (uint q = 0u; q < Q; ++q)
          c16.v[i].q[q] = T_ST4(TC4(apply(x[q].x, y[q].x), apply(x[q].y, y[q].y),
                                 apply(x[q].z, y[q].z), apply(x[q].w, y[q].w)));
      }
      start = n16 * 4u * Q;
    }
#endif
    if ((pc.flags & 4u) != 0u) {
      uint n4 = pc.n / 4u;
      BufT4 a4 = BufT4(pc.a), b4 = BufT4(pc.b), c4 = BufT4(pc.c);
      for (uint i = start / 4u + gid; i < n4; i += stride) {
        uint col = a_row || b_row ? row_group(i) : i;
        TC4 x = a_scalar ? TC4(sa) : T_LD4(a4.v[a_row ? col : i]);
        TC4 y = b_scalar ? TC4(sb) : T_LD4(b4.v[b_row ? col : i]);
        c4.v[i] = T_ST4(TC4(apply(x.x, y.x), apply(x.y, y.y), apply(x.z, y.z), apply(x.w, y.w)));
      }
      start = n4 * 4u;
    }
#endif
#if (T_VEC || defined(T_BF16)) && defined(U_ID) && T_BITS == 16
    // 16 bytes of T (8 elements) at a time: the U operand's 8 elements as
    // two groups of 4 (bf16's bits through T_LD4 and T_ST4).
    if ((pc.flags & 128u) != 0u) {
      uint n8 = pc.n / 8u;
      BufT16 a16 = BufT16(pc.a), b16 = BufT16(pc.b), c16 = BufT16(pc.c);
      for (uint i = gid; i < n8; i += stride) {
        TC4 x[2], y[2];
        for (uint q = 0u; q < 2u; ++q) {
          x[q] = a_scalar ? TC4(sa) : U_IS_A ? u_ld4(pc.a, 2u * i + q) : T_LD4(a16.v[i].q[q]);
          y[q] = b_scalar ? TC4(sb) : U_IS_A ? T_LD4(b16.v[i].q[q]) : u_ld4(pc.b, 2u * i + q);
        }
        for (uint q = 0u; q < 2u; ++q)
          c16.v[i].q[q] = T_ST4(TC4(apply(x[q].x, y[q].x), apply(x[q].y, y[q].y),
                                    apply(x[q].z, y[q].z), apply(x[q].w, y[q].w)));
      }
      start = n8 * 8u;
    }
#endif
#if (T_VEC || defined(T_BF16)) && defined(U_ID)
    if ((pc.flags & 4u) != 0u) {
      uint n4 = pc.n / 4u;
      BufT4 a4 = BufT4(pc.a), b4 = BufT4(pc.b), c4 = BufT4(pc.c);
      for (uint i = start / 4u + gid; i < n4; i += stride) {
        TC4 x = a_scalar ? TC4(sa) : U_IS_A ? u_ld4(pc.a, i) : T_LD4(a4.v[i]);
        TC4 y = b_scalar ? TC4(sb) : U_IS_A ? T_LD4(b4.v[i]) : u_ld4(pc.b, i);
        c4.v[i] = T_ST4(TC4(apply(x.x, y.x), apply(x.y, y.y), apply(x.z, y.z), apply(x.w, y.w)));
      }
      start = n4 * 4u;
    }
#endif
    for (uint i = start + gid; i < pc.n; i += stride) {
#ifdef U_ID
      TC x = a_scalar ? sa : U_IS_A ? u_ld(pc.a, i) : T_LD(pc.a.v[i]);
      TC y = b_scalar ? sb : U_IS_A ? T_LD(pc.b.v[i]) : u_ld(pc.b, i);
#else
      TC x = a_scalar ? sa : T_LD(pc.a.v[i]);
      TC y = b_scalar ? sb : T_LD(pc.b.v[i]);
#endif
      pc.c.v[i] = T_ST(apply(x, y));
    }
  } else if (BASE_VARIANT == 2u) {
#if TILED
    tiled();
#endif
  } else if (BASE_VARIANT == 4u) {
#if TILED && T_BITS == 16
    tiled16();
#endif
  } else {
    uint rank = pc.rank;
    uint nargs = 3u * rank + 2u;
    for (uint j = gl_LocalInvocationID.x; j < nargs; j += gl_WorkGroupSize.x)
      s_args[j] = pc.args.d[j];
    barrier();
    // An immediate operand (flag bit 3 / 4; strides and offset 0) is
    // never read from its slot.
    TC imm = TC(0);
#if defined(NXV_IMM) && !defined(U_ID)
    imm = nxv_imm(pc.imm);
#endif
    bool a_imm = (pc.flags & 8u) != 0u, b_imm = (pc.flags & 16u) != 0u;
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
#ifdef U_ID
      TC x = U_IS_A ? u_ld(pc.a, ia) : T_LD(pc.a.v[ia]);
      TC y = U_IS_A ? T_LD(pc.b.v[ib]) : u_ld(pc.b, ib);
#else
      TC x = a_imm ? imm : T_LD(pc.a.v[ia]);
      TC y = b_imm ? imm : T_LD(pc.b.v[ib]);
#endif
      pc.c.v[i] = T_ST(apply(x, y));
    }
  }
}
