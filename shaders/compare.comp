#version 460
#extension GL_GOOGLE_include_directive : require
#define NEED_8BIT 1
#include "types.glsl"
#extension GL_EXT_control_flow_attributes : require
// compare.comp - c[i] = (a[i] OP b[i]) ? 1 : 0 as u8, for inputs of type T
// (T_ID; loaded and compared as TC). OP follows nxv_compare_op in include/nxv.h:
// comparisons follow IEEE 754 (any comparison with NaN is false, except
// not_equal); logical ops treat every non-zero value (NaN too) as true.
// VARIANT 0: contiguous (flags bit0/bit1: a/b is a broadcast scalar;
// bit3/bit4: a/b is an immediate scalar, its bits in pc.args, nxv_imm;
// bit2: 4 elements per thread, their 4 results stored as one word, every
// operand read in place 4-element aligned; bit7, 8- and 16-bit types: 16
// bytes of each operand per thread, their 16 or 8 results stored at once,
// every operand read in place 16-byte aligned);
// VARIANT 1: strided, the arena holds shape[rank], a_strides[rank],
// b_strides[rank], a_off, b_off (flags bit3/bit4: a/b is an immediate, its
// bits in pc.imm).
#include "common.glsl"

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT { T v[]; };
layout(buffer_reference, std430, buffer_reference_align = 1) buffer BufU8 { uint8_t v[]; };
// The wide paths (not for complex types): T4 groups, read through T_LD4
// (bf16 as its bits); 4 results as the bytes of a word.
#if T_VEC || defined(T_BF16)
#define WIDE 1
layout(buffer_reference, std430, buffer_reference_align = 4 * T_ALIGN) readonly buffer BufT4 { T4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer BufW1 { uint v[]; };
#if T_BITS <= 16
const uint Q = 4u / T_ALIGN;  // groups of 4 in 16 bytes
struct T16 { T4 q[Q]; };
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer BufT16 { T16 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) writeonly buffer BufW2 { uvec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer BufW4 { uvec4 v[]; };
#endif
#else
#define WIDE 0
#endif

layout(push_constant, std430) uniform PC {
  BufT a;
  BufT b;
  BufU8 c;
  ArgsRef args;
  uint n;
  uint rank;
  uint flags;
  uint pad;
  uint64_t imm;  // VARIANT 1: an immediate operand's bits
} pc;

#define COMPARE_FN apply
#define COMPARE_ARGS
#define COMPARE_SEL OP
#include "compare_ops.glsl"

shared uint s_args[3 * NXV_MAX_RANK + 2];

#if WIDE
// The results of 4 element pairs as the bytes of a word (0 or 1 each).
uint apply4(TC4 x, TC4 y) {
  return uint(apply(x.x, y.x)) | (uint(apply(x.y, y.y)) << 8) |
         (uint(apply(x.z, y.z)) << 16) | (uint(apply(x.w, y.w)) << 24);
}
#endif

void main() {
  uint gid = nxv_gid();
  uint stride = nxv_nthreads();
  if (VARIANT == 0) {
    // A scalar operand comes from its buffer (flag bit 0 / 1) or, as an
    // immediate, from pc.args's bits (bit 3 / 4; its slot then holds a
    // valid address that is never read).
    bool a_scalar = (pc.flags & 9u) != 0u;
    bool b_scalar = (pc.flags & 18u) != 0u;
    TC sa = (pc.flags & 1u) != 0u ? T_LD(pc.a.v[0]) : TC(0);
    TC sb = (pc.flags & 2u) != 0u ? T_LD(pc.b.v[0]) : TC(0);
#ifdef NXV_IMM
    if ((pc.flags & 8u) != 0u) sa = nxv_imm(uint64_t(pc.args));
    if ((pc.flags & 16u) != 0u) sb = nxv_imm(uint64_t(pc.args));
#endif
    uint start = 0u;
#if WIDE
#if T_BITS <= 16
    if ((pc.flags & 128u) != 0u) {
      uint n16 = pc.n / (4u * Q);
      BufT16 a16 = BufT16(pc.a), b16 = BufT16(pc.b);
      for (uint i = gid; i < n16; i += stride) {
        uint w[Q];
        [[unroll]] for (uint q = 0u; q < Q; ++q)
          w[q] = apply4(a_scalar ? TC4(sa) : T_LD4(a16.v[i].q[q]),
                        b_scalar ? TC4(sb) : T_LD4(b16.v[i].q[q]));
#if T_BITS == 16
        BufW2(pc.c).v[i] = uvec2(w[0], w[1]);
#else
        BufW4(pc.c).v[i] = uvec4(w[0], w[1], w[2], w[3]);
#endif
      }
      start = n16 * 4u * Q;
    }
#endif
    if ((pc.flags & 4u) != 0u) {
      uint n4 = pc.n / 4u;
      BufT4 a4 = BufT4(pc.a), b4 = BufT4(pc.b);
      for (uint i = start / 4u + gid; i < n4; i += stride)
        BufW1(pc.c).v[i] = apply4(a_scalar ? TC4(sa) : T_LD4(a4.v[i]),
                                  b_scalar ? TC4(sb) : T_LD4(b4.v[i]));
      start = max(start, n4 * 4u);
    }
#endif
    for (uint i = start + gid; i < pc.n; i += stride) {
      TC x = a_scalar ? sa : T_LD(pc.a.v[i]);
      TC y = b_scalar ? sb : T_LD(pc.b.v[i]);
      pc.c.v[i] = uint8_t(apply(x, y) ? 1u : 0u);
    }
  } else {
    uint rank = pc.rank;
    uint nargs = 3u * rank + 2u;
    for (uint j = gl_LocalInvocationID.x; j < nargs; j += gl_WorkGroupSize.x)
      s_args[j] = pc.args.d[j];
    barrier();
    // An immediate operand (flag bit 3 / 4) has strides and offset 0.
    TC imm = TC(0);
#ifdef NXV_IMM
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
      TC x = a_imm ? imm : T_LD(pc.a.v[ia]);
      TC y = b_imm ? imm : T_LD(pc.b.v[ib]);
      pc.c.v[i] = uint8_t(apply(x, y) ? 1u : 0u);
    }
  }
}
