#version 460
#extension GL_GOOGLE_include_directive : require
#include "types.glsl"
// fused.comp - c[i] = the result of a fused elementwise program at element
// i, for T (T_ID) f16, bf16, f32, f64, s32, s64, u32 or u64 (integers wrap
// as their own kernels do): up to MAX_IN inputs of type T and up to
// MAX_INS instructions over registers of the compute type TC. Registers
// 0 .. NIN-1 hold the inputs' elements; instruction k writes register
// NIN + k; the result is the last register, rounded to T on store.
// Intermediate results round to T as separate kernels would store them
// (f16 to nearest even, bf16 by truncation), and sums and products are not contracted into fmas, so a
// program computes exactly what its ops compute one kernel each.
//
// The program is in specialization constants (one pipeline per program):
//   3 NIN, 4 NINS, 5 SCALAR (bit k: input k is one element, broadcast),
//   6 STRIDED (bit k: input k is read through strides in the arena),
//   7 .. 22 the instruction words P0 .. P15, each
//     bits 0-1 class (0 unary, 1 binary, 2 compare, 3 select),
//     bits 2-7 op (nxv_unary_op, nxv_binary_op, nxv_compare_op),
//     bits 8-12, 13-17, 18-22 operand registers a, b, c,
//   23 IMM (bit k: input k is an immediate, its bits of T in the low bits
//     of pc.in_[k] instead of an address).
// A compare writes 1 or 0; select(a, b, c) is b where a != 0, else c.
// With INTERP defined a program of the basic ops (unary copy, negate, abs
// and square; binary add, subtract, multiply, divide, max and min; no
// compare or select) is interpreted instead: NIN, NINS, SCALAR, STRIDED,
// IMM and P0 .. P15 are words 0 .. 20 of the arena and the strided layout below starts at word 21, so one small
// pipeline runs every such program (none to create per program; each op
// costs a uniform branch per element).
// Inputs that are neither scalar nor strided are contiguous; their
// addresses in push constants include their views' offsets. When STRIDED
// is not 0, the arena holds dims[rank] then, for each input k,
// offset_k and strides_k[rank] (rank + 1 words at rank + k (rank + 1)).
#extension GL_EXT_control_flow_attributes : enable
#include "common.glsl"
#if T_KIND == KIND_FLOAT && (TC_BITS == 64 || defined(PRECISE32))
#include "math64.glsl"
#endif
#include "binary_ops.glsl"

#define MAX_IN 12
#define MAX_INS 16

layout(constant_id = 3) const uint NIN = 1;
layout(constant_id = 4) const uint NINS = 1;
layout(constant_id = 5) const uint SCALAR = 0;
layout(constant_id = 6) const uint STRIDED = 0;
layout(constant_id = 7) const uint P0 = 0;
layout(constant_id = 8) const uint P1 = 0;
layout(constant_id = 9) const uint P2 = 0;
layout(constant_id = 10) const uint P3 = 0;
layout(constant_id = 11) const uint P4 = 0;
layout(constant_id = 12) const uint P5 = 0;
layout(constant_id = 13) const uint P6 = 0;
layout(constant_id = 14) const uint P7 = 0;
layout(constant_id = 15) const uint P8 = 0;
layout(constant_id = 16) const uint P9 = 0;
layout(constant_id = 17) const uint P10 = 0;
layout(constant_id = 18) const uint P11 = 0;
layout(constant_id = 19) const uint P12 = 0;
layout(constant_id = 20) const uint P13 = 0;
layout(constant_id = 21) const uint P14 = 0;
layout(constant_id = 22) const uint P15 = 0;
layout(constant_id = 23) const uint IMM = 0;  // bit k: input k is an immediate

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT { T v[]; };

layout(push_constant, std430) uniform PC {
  BufT c;
  ArgsRef args;
  uint n;
  uint rank;
  uint64_t in_[MAX_IN]; /* addresses (BufT); interpreted, also an
                           immediate's bits */
} pc;

// An immediate input's value: the low T_BITS of its word are its bits.
TC imm_value(uint64_t b) {
#if T_KIND != KIND_FLOAT && TC_BITS == 64
  return TC(b);
#elif T_KIND != KIND_FLOAT
  return TC(uint(b));
#elif T_ID == 8
  return TC(unpackHalf2x16(uint(b) & 0xFFFFu).x);
#elif T_ID == 9
  return T_LD(uint16_t(uint(b) & 0xFFFFu));
#elif T_ID == 10
  return TC(uintBitsToFloat(uint(b)));
#else
  return TC(packDouble2x32(uvec2(uint(b), uint(b >> 32))));
#endif
}

#if T_ID == 8
// f32 -> nearest f16 value (ties to even), kept in f32: what a store of
// an f16 result rounds to. Done with additions whose rounding the IEEE
// rules fix, because a driver may drop a conversion to f16 and back
// between registers. Adding m = 1.5 * 2^(e + 13) to x of exponent e
// rounds x to a multiple of 2^(e - 10), f16's spacing there; below 2^-14
// the spacing is 2^-24, that of 0.75.
float f16_round(float x) {
  float ax = abs(x);
  if (isnan(x)) return x;
  if (ax >= 65520.0) return x > 0.0 ? 1.0 / 0.0 : -1.0 / 0.0;
  float m = ax < 6.103515625e-05
                ? 0.75
                : uintBitsToFloat((floatBitsToUint(ax) & 0x7F800000u) + (13u << 23)) * 1.5;
  precise float t = x + m;
  precise float r = t - m;
  return r == 0.0 ? uintBitsToFloat(floatBitsToUint(x) & 0x80000000u) : r;
}
#define ROUND(v) f16_round(v)
#elif T_BITS == 16  // bf16: truncation, in integer bits
#define ROUND(v) T_LD(T_ST(v))
#else
#define ROUND(v) (v)
#endif

// Instruction K (word W) calls UN, BIN or CMP, the ops of its slot: each
// switches on the op bits of W (fused_slot.glsl), and the class, op and
// registers are constants, so once the runtime has pruned the module
// (kernels/spv_prune.c) a slot holds its one op.
#define STEP(K, W, UN, BIN, CMP)                                           \
  if (NINS > uint(K)) {                                                    \
    const uint cls = (W) & 3u, ra = ((W) >> 8) & 31u,                      \
               rb = ((W) >> 13) & 31u, rc = ((W) >> 18) & 31u;             \
    TC v;                                                                  \
    if (cls == 0u) v = UN(r[ra]);                                          \
    else if (cls == 1u) v = BIN(r[ra], r[rb]);                             \
    else if (cls == 2u) v = CMP(r[ra], r[rb]) ? TC(1) : TC(0);             \
    else v = r[ra] != TC(0) ? r[rb] : r[rc];                               \
    r[NIN + uint(K)] = ROUND(v);                                           \
  }

#ifndef INTERP
#define SLOT_W P0
#define SLOT_UN un0
#define SLOT_BIN bin0
#define SLOT_CMP cmp0
#include "fused_slot.glsl"
#define SLOT_W P1
#define SLOT_UN un1
#define SLOT_BIN bin1
#define SLOT_CMP cmp1
#include "fused_slot.glsl"
#define SLOT_W P2
#define SLOT_UN un2
#define SLOT_BIN bin2
#define SLOT_CMP cmp2
#include "fused_slot.glsl"
#define SLOT_W P3
#define SLOT_UN un3
#define SLOT_BIN bin3
#define SLOT_CMP cmp3
#include "fused_slot.glsl"
#define SLOT_W P4
#define SLOT_UN un4
#define SLOT_BIN bin4
#define SLOT_CMP cmp4
#include "fused_slot.glsl"
#define SLOT_W P5
#define SLOT_UN un5
#define SLOT_BIN bin5
#define SLOT_CMP cmp5
#include "fused_slot.glsl"
#define SLOT_W P6
#define SLOT_UN un6
#define SLOT_BIN bin6
#define SLOT_CMP cmp6
#include "fused_slot.glsl"
#define SLOT_W P7
#define SLOT_UN un7
#define SLOT_BIN bin7
#define SLOT_CMP cmp7
#include "fused_slot.glsl"
#define SLOT_W P8
#define SLOT_UN un8
#define SLOT_BIN bin8
#define SLOT_CMP cmp8
#include "fused_slot.glsl"
#define SLOT_W P9
#define SLOT_UN un9
#define SLOT_BIN bin9
#define SLOT_CMP cmp9
#include "fused_slot.glsl"
#define SLOT_W P10
#define SLOT_UN un10
#define SLOT_BIN bin10
#define SLOT_CMP cmp10
#include "fused_slot.glsl"
#define SLOT_W P11
#define SLOT_UN un11
#define SLOT_BIN bin11
#define SLOT_CMP cmp11
#include "fused_slot.glsl"
#define SLOT_W P12
#define SLOT_UN un12
#define SLOT_BIN bin12
#define SLOT_CMP cmp12
#include "fused_slot.glsl"
#define SLOT_W P13
#define SLOT_UN un13
#define SLOT_BIN bin13
#define SLOT_CMP cmp13
#include "fused_slot.glsl"
#define SLOT_W P14
#define SLOT_UN un14
#define SLOT_BIN bin14
#define SLOT_CMP cmp14
#include "fused_slot.glsl"
#define SLOT_W P15
#define SLOT_UN un15
#define SLOT_BIN bin15
#define SLOT_CMP cmp15
#include "fused_slot.glsl"

shared uint s_args[NXV_MAX_RANK + MAX_IN * (NXV_MAX_RANK + 1)];

void main() {
  uint gid = nxv_gid();
  uint stride = nxv_nthreads();
  uint rank = pc.rank;
  if (STRIDED != 0u) {
    uint nargs = rank + NIN * (rank + 1u);
    for (uint j = gl_LocalInvocationID.x; j < nargs; j += gl_WorkGroupSize.x)
      s_args[j] = pc.args.d[j];
    barrier();
  }
  for (uint i = gid; i < pc.n; i += stride) {
    uint idx[MAX_IN];
    [[unroll]] for (uint k = 0u; k < MAX_IN; ++k) {
      idx[k] = ((SCALAR >> k) & 1u) != 0u ? 0u : i;
      if (((STRIDED >> k) & 1u) != 0u) idx[k] = s_args[rank + k * (rank + 1u)];
    }
    if (STRIDED != 0u) {
      uint rem = i;
      for (int d = int(rank) - 1; d >= 0; --d) {
        uint dim = s_args[d];
        uint q = rem / dim;
        uint co = rem - q * dim;
        rem = q;
        [[unroll]] for (uint k = 0u; k < MAX_IN; ++k)
          if (((STRIDED >> k) & 1u) != 0u)
            idx[k] += co * s_args[rank + k * (rank + 1u) + 1u + uint(d)];
      }
    }
    TC r[MAX_IN + MAX_INS];
    [[unroll]] for (uint k = 0u; k < MAX_IN; ++k)
      r[k] = k >= NIN                ? TC(0)
             : ((IMM >> k) & 1u) != 0u ? imm_value(pc.in_[k])
                                       : T_LD(BufT(pc.in_[k]).v[idx[k]]);
    STEP(0, P0, un0, bin0, cmp0)
    STEP(1, P1, un1, bin1, cmp1)
    STEP(2, P2, un2, bin2, cmp2)
    STEP(3, P3, un3, bin3, cmp3)
    STEP(4, P4, un4, bin4, cmp4)
    STEP(5, P5, un5, bin5, cmp5)
    STEP(6, P6, un6, bin6, cmp6)
    STEP(7, P7, un7, bin7, cmp7)
    STEP(8, P8, un8, bin8, cmp8)
    STEP(9, P9, un9, bin9, cmp9)
    STEP(10, P10, un10, bin10, cmp10)
    STEP(11, P11, un11, bin11, cmp11)
    STEP(12, P12, un12, bin12, cmp12)
    STEP(13, P13, un13, bin13, cmp13)
    STEP(14, P14, un14, bin14, cmp14)
    STEP(15, P15, un15, bin15, cmp15)
    pc.c.v[i] = T_ST(r[NIN + NINS - 1u]);
  }
}

#else  // INTERP

// The basic ops, computed as binary_apply and unary_apply compute them.
TC basic_apply(uint cls, uint op, TC a, TC b) {
  if (cls == 0u) {
    if (op == 1u) return -a;
    if (op == 2u) return abs(a);
    if (op == 16u) { precise TC p = a * a; return p; }
    return a;
  }
  switch (op) {
  case 0u: { precise TC s = a + b; return s; }
  case 1u: { precise TC s = a - b; return s; }
  case 2u: { precise TC p = a * b; return p; }
  case 3u: return fdiv(a, b);
  case 4u: return (isnan(a) || isnan(b)) ? nxv_nan() : max(a, b);
  default: return (isnan(a) || isnan(b)) ? nxv_nan() : min(a, b);
  }
}

// Words of the arena before the strided layout.
#define HDR 21u
shared uint s_hdr[HDR + NXV_MAX_RANK + MAX_IN * (NXV_MAX_RANK + 1)];

void main() {
  uint gid = nxv_gid();
  uint stride = nxv_nthreads();
  uint rank = pc.rank;
  uint strided = pc.args.d[3];
  uint nwords = HDR + (strided != 0u ? rank + pc.args.d[0] * (rank + 1u) : 0u);
  for (uint j = gl_LocalInvocationID.x; j < nwords; j += gl_WorkGroupSize.x)
    s_hdr[j] = pc.args.d[j];
  barrier();
  uint nin = s_hdr[0], nins = s_hdr[1], scalar = s_hdr[2], imm = s_hdr[4];
  for (uint i = gid; i < pc.n; i += stride) {
    TC r[MAX_IN + MAX_INS];
    for (uint k = 0u; k < nin; ++k) {
      if (((imm >> k) & 1u) != 0u) {
        r[k] = imm_value(pc.in_[k]);
        continue;
      }
      uint idx = ((scalar >> k) & 1u) != 0u ? 0u : i;
      if (((strided >> k) & 1u) != 0u) {
        uint base = HDR + rank + k * (rank + 1u);
        idx = s_hdr[base];
        uint rem = i;
        for (int d = int(rank) - 1; d >= 0; --d) {
          uint dim = s_hdr[HDR + uint(d)];
          uint q = rem / dim;
          idx += (rem - q * dim) * s_hdr[base + 1u + uint(d)];
          rem = q;
        }
      }
      r[k] = T_LD(BufT(pc.in_[k]).v[idx]);
    }
    for (uint k = 0u; k < nins; ++k) {
      uint w = s_hdr[5u + k];
      r[nin + k] = ROUND(basic_apply(w & 3u, (w >> 2) & 63u, r[(w >> 8) & 31u],
                                     r[(w >> 13) & 31u]));
    }
    pc.c.v[i] = T_ST(r[nin + nins - 1u]);
  }
}
#endif  // INTERP
