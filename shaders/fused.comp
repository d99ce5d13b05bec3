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
// A program may have a second result (nxv_fused_pair): register OUT2 - 1,
// stored to pc.c2 at the same element.
//
// The program is in specialization constants (one pipeline per program):
//   3 NIN, 4 NINS_W (bits 0-7 the instruction count NINS, bits 8-15 OUT2:
//     the second result's register plus one, 0 for none),
//   5 SCALAR (bit k: input k is one element, broadcast),
//   6 STRIDED (bit k: input k is read through strides in the arena),
//   7 IMM (bit k: input k is an immediate, its bits of T in the low bits
//     of pc.in_[k] instead of an address),
//   8 .. 119 the instruction words P0 .. P111 (nxv_fused in nxv.h), each
//     bits 0-1 class (0 unary, 1 binary, 2 compare, 3 select),
//     bits 2-7 op (nxv_unary_op, nxv_binary_op, nxv_compare_op),
//     bit 8 LIT: operand b is the literal in bits 16-31 (lit_value),
//     bits 9-15, 16-22, 23-29 operand registers a, b, c.
// A compare writes 1 or 0; select(a, b, c) is b where a != 0, else c.
// With INTERP defined a program of at most MAX_INS_INTERP basic ops (unary
// copy, negate, abs and square; binary add, subtract, multiply, divide,
// max and min; no compare or select) is interpreted instead: NIN, NINS,
// SCALAR, STRIDED, IMM and P0 .. P15 are words 0 .. 20 of the arena (a
// word may carry a literal) and the strided layout below starts at word
// 21, so one small pipeline runs every such program (none to create per
// program; each op costs a uniform branch per element).
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
#define MAX_INS 112
#define MAX_INS_INTERP 16

layout(constant_id = 3) const uint NIN = 1;
layout(constant_id = 4) const uint NINS_W = 1;
const uint NINS = NINS_W & 255u;
const uint OUT2 = NINS_W >> 8;
layout(constant_id = 5) const uint SCALAR = 0;
layout(constant_id = 6) const uint STRIDED = 0;
layout(constant_id = 7) const uint IMM = 0;  // bit k: input k is an immediate
layout(constant_id = 8) const uint P0 = 0;
layout(constant_id = 9) const uint P1 = 0;
layout(constant_id = 10) const uint P2 = 0;
layout(constant_id = 11) const uint P3 = 0;
layout(constant_id = 12) const uint P4 = 0;
layout(constant_id = 13) const uint P5 = 0;
layout(constant_id = 14) const uint P6 = 0;
layout(constant_id = 15) const uint P7 = 0;
layout(constant_id = 16) const uint P8 = 0;
layout(constant_id = 17) const uint P9 = 0;
layout(constant_id = 18) const uint P10 = 0;
layout(constant_id = 19) const uint P11 = 0;
layout(constant_id = 20) const uint P12 = 0;
layout(constant_id = 21) const uint P13 = 0;
layout(constant_id = 22) const uint P14 = 0;
layout(constant_id = 23) const uint P15 = 0;
layout(constant_id = 24) const uint P16 = 0;
layout(constant_id = 25) const uint P17 = 0;
layout(constant_id = 26) const uint P18 = 0;
layout(constant_id = 27) const uint P19 = 0;
layout(constant_id = 28) const uint P20 = 0;
layout(constant_id = 29) const uint P21 = 0;
layout(constant_id = 30) const uint P22 = 0;
layout(constant_id = 31) const uint P23 = 0;
layout(constant_id = 32) const uint P24 = 0;
layout(constant_id = 33) const uint P25 = 0;
layout(constant_id = 34) const uint P26 = 0;
layout(constant_id = 35) const uint P27 = 0;
layout(constant_id = 36) const uint P28 = 0;
layout(constant_id = 37) const uint P29 = 0;
layout(constant_id = 38) const uint P30 = 0;
layout(constant_id = 39) const uint P31 = 0;
layout(constant_id = 40) const uint P32 = 0;
layout(constant_id = 41) const uint P33 = 0;
layout(constant_id = 42) const uint P34 = 0;
layout(constant_id = 43) const uint P35 = 0;
layout(constant_id = 44) const uint P36 = 0;
layout(constant_id = 45) const uint P37 = 0;
layout(constant_id = 46) const uint P38 = 0;
layout(constant_id = 47) const uint P39 = 0;
layout(constant_id = 48) const uint P40 = 0;
layout(constant_id = 49) const uint P41 = 0;
layout(constant_id = 50) const uint P42 = 0;
layout(constant_id = 51) const uint P43 = 0;
layout(constant_id = 52) const uint P44 = 0;
layout(constant_id = 53) const uint P45 = 0;
layout(constant_id = 54) const uint P46 = 0;
layout(constant_id = 55) const uint P47 = 0;
layout(constant_id = 56) const uint P48 = 0;
layout(constant_id = 57) const uint P49 = 0;
layout(constant_id = 58) const uint P50 = 0;
layout(constant_id = 59) const uint P51 = 0;
layout(constant_id = 60) const uint P52 = 0;
layout(constant_id = 61) const uint P53 = 0;
layout(constant_id = 62) const uint P54 = 0;
layout(constant_id = 63) const uint P55 = 0;
layout(constant_id = 64) const uint P56 = 0;
layout(constant_id = 65) const uint P57 = 0;
layout(constant_id = 66) const uint P58 = 0;
layout(constant_id = 67) const uint P59 = 0;
layout(constant_id = 68) const uint P60 = 0;
layout(constant_id = 69) const uint P61 = 0;
layout(constant_id = 70) const uint P62 = 0;
layout(constant_id = 71) const uint P63 = 0;
layout(constant_id = 72) const uint P64 = 0;
layout(constant_id = 73) const uint P65 = 0;
layout(constant_id = 74) const uint P66 = 0;
layout(constant_id = 75) const uint P67 = 0;
layout(constant_id = 76) const uint P68 = 0;
layout(constant_id = 77) const uint P69 = 0;
layout(constant_id = 78) const uint P70 = 0;
layout(constant_id = 79) const uint P71 = 0;
layout(constant_id = 80) const uint P72 = 0;
layout(constant_id = 81) const uint P73 = 0;
layout(constant_id = 82) const uint P74 = 0;
layout(constant_id = 83) const uint P75 = 0;
layout(constant_id = 84) const uint P76 = 0;
layout(constant_id = 85) const uint P77 = 0;
layout(constant_id = 86) const uint P78 = 0;
layout(constant_id = 87) const uint P79 = 0;
layout(constant_id = 88) const uint P80 = 0;
layout(constant_id = 89) const uint P81 = 0;
layout(constant_id = 90) const uint P82 = 0;
layout(constant_id = 91) const uint P83 = 0;
layout(constant_id = 92) const uint P84 = 0;
layout(constant_id = 93) const uint P85 = 0;
layout(constant_id = 94) const uint P86 = 0;
layout(constant_id = 95) const uint P87 = 0;
layout(constant_id = 96) const uint P88 = 0;
layout(constant_id = 97) const uint P89 = 0;
layout(constant_id = 98) const uint P90 = 0;
layout(constant_id = 99) const uint P91 = 0;
layout(constant_id = 100) const uint P92 = 0;
layout(constant_id = 101) const uint P93 = 0;
layout(constant_id = 102) const uint P94 = 0;
layout(constant_id = 103) const uint P95 = 0;
layout(constant_id = 104) const uint P96 = 0;
layout(constant_id = 105) const uint P97 = 0;
layout(constant_id = 106) const uint P98 = 0;
layout(constant_id = 107) const uint P99 = 0;
layout(constant_id = 108) const uint P100 = 0;
layout(constant_id = 109) const uint P101 = 0;
layout(constant_id = 110) const uint P102 = 0;
layout(constant_id = 111) const uint P103 = 0;
layout(constant_id = 112) const uint P104 = 0;
layout(constant_id = 113) const uint P105 = 0;
layout(constant_id = 114) const uint P106 = 0;
layout(constant_id = 115) const uint P107 = 0;
layout(constant_id = 116) const uint P108 = 0;
layout(constant_id = 117) const uint P109 = 0;
layout(constant_id = 118) const uint P110 = 0;
layout(constant_id = 119) const uint P111 = 0;

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT { T v[]; };

layout(push_constant, std430) uniform PC {
  BufT c;
  ArgsRef args;
  uint n;
  uint rank;
  uint64_t in_[MAX_IN]; /* addresses (BufT); interpreted, also an
                           immediate's bits */
  BufT c2;              /* the second result (OUT2 != 0) */
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

// A literal operand's value (bits 16-31 of its word, as l): for float
// types the f16 number of those bits rounded to T as an intermediate
// result is (exact but for bf16, which truncates), for signed integers
// their int16_t value, for unsigned ones their uint16_t value. A float
// literal's bits are or-ed with pc.rank >> 16, which is 0 (ranks are
// small) but not known to the compiler: with a constant operand a driver
// may fold x + 0 into x or x * 0 into 0, dropping a zero's sign or an
// infinity (lavapipe did), where the op's own kernel, given the value at
// run time, computes it as IEEE 754 says.
TC lit_value(uint l) {
#if T_KIND == KIND_FLOAT
  return ROUND(TC(unpackHalf2x16((l | (pc.rank >> 16)) & 0xFFFFu).x));
#elif T_KIND == KIND_SINT
  return TC(int(l << 16) >> 16);
#else
  return TC(l & 0xFFFFu);
#endif
}

// Instruction K (word W) calls UN, BIN or CMP, the ops of its slot: each
// switches on the op bits of W (fused_slot.glsl), and the class, op and
// registers are constants, so once the runtime has pruned the module
// (kernels/spv_prune.c) a slot holds its one op.
#define STEP(K, W, UN, BIN, CMP)                                           \
  if (NINS > uint(K)) {                                                    \
    const uint cls = (W) & 3u, ra = ((W) >> 9) & 127u,                     \
               rb = ((W) >> 16) & 127u, rc = ((W) >> 23) & 127u;           \
    const bool lit = (((W) >> 8) & 1u) != 0u;                              \
    TC v;                                                                  \
    if (cls == 0u) v = UN(r[ra]);                                          \
    else if (cls == 1u) v = BIN(r[ra], lit ? lit_value((W) >> 16) : r[lit ? 0u : rb]); \
    else if (cls == 2u)                                                    \
      v = CMP(r[ra], lit ? lit_value((W) >> 16) : r[lit ? 0u : rb]) ? TC(1) : TC(0); \
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
#define SLOT_W P16
#define SLOT_UN un16
#define SLOT_BIN bin16
#define SLOT_CMP cmp16
#include "fused_slot.glsl"
#define SLOT_W P17
#define SLOT_UN un17
#define SLOT_BIN bin17
#define SLOT_CMP cmp17
#include "fused_slot.glsl"
#define SLOT_W P18
#define SLOT_UN un18
#define SLOT_BIN bin18
#define SLOT_CMP cmp18
#include "fused_slot.glsl"
#define SLOT_W P19
#define SLOT_UN un19
#define SLOT_BIN bin19
#define SLOT_CMP cmp19
#include "fused_slot.glsl"
#define SLOT_W P20
#define SLOT_UN un20
#define SLOT_BIN bin20
#define SLOT_CMP cmp20
#include "fused_slot.glsl"
#define SLOT_W P21
#define SLOT_UN un21
#define SLOT_BIN bin21
#define SLOT_CMP cmp21
#include "fused_slot.glsl"
#define SLOT_W P22
#define SLOT_UN un22
#define SLOT_BIN bin22
#define SLOT_CMP cmp22
#include "fused_slot.glsl"
#define SLOT_W P23
#define SLOT_UN un23
#define SLOT_BIN bin23
#define SLOT_CMP cmp23
#include "fused_slot.glsl"
#define SLOT_W P24
#define SLOT_UN un24
#define SLOT_BIN bin24
#define SLOT_CMP cmp24
#include "fused_slot.glsl"
#define SLOT_W P25
#define SLOT_UN un25
#define SLOT_BIN bin25
#define SLOT_CMP cmp25
#include "fused_slot.glsl"
#define SLOT_W P26
#define SLOT_UN un26
#define SLOT_BIN bin26
#define SLOT_CMP cmp26
#include "fused_slot.glsl"
#define SLOT_W P27
#define SLOT_UN un27
#define SLOT_BIN bin27
#define SLOT_CMP cmp27
#include "fused_slot.glsl"
#define SLOT_W P28
#define SLOT_UN un28
#define SLOT_BIN bin28
#define SLOT_CMP cmp28
#include "fused_slot.glsl"
#define SLOT_W P29
#define SLOT_UN un29
#define SLOT_BIN bin29
#define SLOT_CMP cmp29
#include "fused_slot.glsl"
#define SLOT_W P30
#define SLOT_UN un30
#define SLOT_BIN bin30
#define SLOT_CMP cmp30
#include "fused_slot.glsl"
#define SLOT_W P31
#define SLOT_UN un31
#define SLOT_BIN bin31
#define SLOT_CMP cmp31
#include "fused_slot.glsl"
#define SLOT_W P32
#define SLOT_UN un32
#define SLOT_BIN bin32
#define SLOT_CMP cmp32
#include "fused_slot.glsl"
#define SLOT_W P33
#define SLOT_UN un33
#define SLOT_BIN bin33
#define SLOT_CMP cmp33
#include "fused_slot.glsl"
#define SLOT_W P34
#define SLOT_UN un34
#define SLOT_BIN bin34
#define SLOT_CMP cmp34
#include "fused_slot.glsl"
#define SLOT_W P35
#define SLOT_UN un35
#define SLOT_BIN bin35
#define SLOT_CMP cmp35
#include "fused_slot.glsl"
#define SLOT_W P36
#define SLOT_UN un36
#define SLOT_BIN bin36
#define SLOT_CMP cmp36
#include "fused_slot.glsl"
#define SLOT_W P37
#define SLOT_UN un37
#define SLOT_BIN bin37
#define SLOT_CMP cmp37
#include "fused_slot.glsl"
#define SLOT_W P38
#define SLOT_UN un38
#define SLOT_BIN bin38
#define SLOT_CMP cmp38
#include "fused_slot.glsl"
#define SLOT_W P39
#define SLOT_UN un39
#define SLOT_BIN bin39
#define SLOT_CMP cmp39
#include "fused_slot.glsl"
#define SLOT_W P40
#define SLOT_UN un40
#define SLOT_BIN bin40
#define SLOT_CMP cmp40
#include "fused_slot.glsl"
#define SLOT_W P41
#define SLOT_UN un41
#define SLOT_BIN bin41
#define SLOT_CMP cmp41
#include "fused_slot.glsl"
#define SLOT_W P42
#define SLOT_UN un42
#define SLOT_BIN bin42
#define SLOT_CMP cmp42
#include "fused_slot.glsl"
#define SLOT_W P43
#define SLOT_UN un43
#define SLOT_BIN bin43
#define SLOT_CMP cmp43
#include "fused_slot.glsl"
#define SLOT_W P44
#define SLOT_UN un44
#define SLOT_BIN bin44
#define SLOT_CMP cmp44
#include "fused_slot.glsl"
#define SLOT_W P45
#define SLOT_UN un45
#define SLOT_BIN bin45
#define SLOT_CMP cmp45
#include "fused_slot.glsl"
#define SLOT_W P46
#define SLOT_UN un46
#define SLOT_BIN bin46
#define SLOT_CMP cmp46
#include "fused_slot.glsl"
#define SLOT_W P47
#define SLOT_UN un47
#define SLOT_BIN bin47
#define SLOT_CMP cmp47
#include "fused_slot.glsl"
#define SLOT_W P48
#define SLOT_UN un48
#define SLOT_BIN bin48
#define SLOT_CMP cmp48
#include "fused_slot.glsl"
#define SLOT_W P49
#define SLOT_UN un49
#define SLOT_BIN bin49
#define SLOT_CMP cmp49
#include "fused_slot.glsl"
#define SLOT_W P50
#define SLOT_UN un50
#define SLOT_BIN bin50
#define SLOT_CMP cmp50
#include "fused_slot.glsl"
#define SLOT_W P51
#define SLOT_UN un51
#define SLOT_BIN bin51
#define SLOT_CMP cmp51
#include "fused_slot.glsl"
#define SLOT_W P52
#define SLOT_UN un52
#define SLOT_BIN bin52
#define SLOT_CMP cmp52
#include "fused_slot.glsl"
#define SLOT_W P53
#define SLOT_UN un53
#define SLOT_BIN bin53
#define SLOT_CMP cmp53
#include "fused_slot.glsl"
#define SLOT_W P54
#define SLOT_UN un54
#define SLOT_BIN bin54
#define SLOT_CMP cmp54
#include "fused_slot.glsl"
#define SLOT_W P55
#define SLOT_UN un55
#define SLOT_BIN bin55
#define SLOT_CMP cmp55
#include "fused_slot.glsl"
#define SLOT_W P56
#define SLOT_UN un56
#define SLOT_BIN bin56
#define SLOT_CMP cmp56
#include "fused_slot.glsl"
#define SLOT_W P57
#define SLOT_UN un57
#define SLOT_BIN bin57
#define SLOT_CMP cmp57
#include "fused_slot.glsl"
#define SLOT_W P58
#define SLOT_UN un58
#define SLOT_BIN bin58
#define SLOT_CMP cmp58
#include "fused_slot.glsl"
#define SLOT_W P59
#define SLOT_UN un59
#define SLOT_BIN bin59
#define SLOT_CMP cmp59
#include "fused_slot.glsl"
#define SLOT_W P60
#define SLOT_UN un60
#define SLOT_BIN bin60
#define SLOT_CMP cmp60
#include "fused_slot.glsl"
#define SLOT_W P61
#define SLOT_UN un61
#define SLOT_BIN bin61
#define SLOT_CMP cmp61
#include "fused_slot.glsl"
#define SLOT_W P62
#define SLOT_UN un62
#define SLOT_BIN bin62
#define SLOT_CMP cmp62
#include "fused_slot.glsl"
#define SLOT_W P63
#define SLOT_UN un63
#define SLOT_BIN bin63
#define SLOT_CMP cmp63
#include "fused_slot.glsl"
#define SLOT_W P64
#define SLOT_UN un64
#define SLOT_BIN bin64
#define SLOT_CMP cmp64
#include "fused_slot.glsl"
#define SLOT_W P65
#define SLOT_UN un65
#define SLOT_BIN bin65
#define SLOT_CMP cmp65
#include "fused_slot.glsl"
#define SLOT_W P66
#define SLOT_UN un66
#define SLOT_BIN bin66
#define SLOT_CMP cmp66
#include "fused_slot.glsl"
#define SLOT_W P67
#define SLOT_UN un67
#define SLOT_BIN bin67
#define SLOT_CMP cmp67
#include "fused_slot.glsl"
#define SLOT_W P68
#define SLOT_UN un68
#define SLOT_BIN bin68
#define SLOT_CMP cmp68
#include "fused_slot.glsl"
#define SLOT_W P69
#define SLOT_UN un69
#define SLOT_BIN bin69
#define SLOT_CMP cmp69
#include "fused_slot.glsl"
#define SLOT_W P70
#define SLOT_UN un70
#define SLOT_BIN bin70
#define SLOT_CMP cmp70
#include "fused_slot.glsl"
#define SLOT_W P71
#define SLOT_UN un71
#define SLOT_BIN bin71
#define SLOT_CMP cmp71
#include "fused_slot.glsl"
#define SLOT_W P72
#define SLOT_UN un72
#define SLOT_BIN bin72
#define SLOT_CMP cmp72
#include "fused_slot.glsl"
#define SLOT_W P73
#define SLOT_UN un73
#define SLOT_BIN bin73
#define SLOT_CMP cmp73
#include "fused_slot.glsl"
#define SLOT_W P74
#define SLOT_UN un74
#define SLOT_BIN bin74
#define SLOT_CMP cmp74
#include "fused_slot.glsl"
#define SLOT_W P75
#define SLOT_UN un75
#define SLOT_BIN bin75
#define SLOT_CMP cmp75
#include "fused_slot.glsl"
#define SLOT_W P76
#define SLOT_UN un76
#define SLOT_BIN bin76
#define SLOT_CMP cmp76
#include "fused_slot.glsl"
#define SLOT_W P77
#define SLOT_UN un77
#define SLOT_BIN bin77
#define SLOT_CMP cmp77
#include "fused_slot.glsl"
#define SLOT_W P78
#define SLOT_UN un78
#define SLOT_BIN bin78
#define SLOT_CMP cmp78
#include "fused_slot.glsl"
#define SLOT_W P79
#define SLOT_UN un79
#define SLOT_BIN bin79
#define SLOT_CMP cmp79
#include "fused_slot.glsl"
#define SLOT_W P80
#define SLOT_UN un80
#define SLOT_BIN bin80
#define SLOT_CMP cmp80
#include "fused_slot.glsl"
#define SLOT_W P81
#define SLOT_UN un81
#define SLOT_BIN bin81
#define SLOT_CMP cmp81
#include "fused_slot.glsl"
#define SLOT_W P82
#define SLOT_UN un82
#define SLOT_BIN bin82
#define SLOT_CMP cmp82
#include "fused_slot.glsl"
#define SLOT_W P83
#define SLOT_UN un83
#define SLOT_BIN bin83
#define SLOT_CMP cmp83
#include "fused_slot.glsl"
#define SLOT_W P84
#define SLOT_UN un84
#define SLOT_BIN bin84
#define SLOT_CMP cmp84
#include "fused_slot.glsl"
#define SLOT_W P85
#define SLOT_UN un85
#define SLOT_BIN bin85
#define SLOT_CMP cmp85
#include "fused_slot.glsl"
#define SLOT_W P86
#define SLOT_UN un86
#define SLOT_BIN bin86
#define SLOT_CMP cmp86
#include "fused_slot.glsl"
#define SLOT_W P87
#define SLOT_UN un87
#define SLOT_BIN bin87
#define SLOT_CMP cmp87
#include "fused_slot.glsl"
#define SLOT_W P88
#define SLOT_UN un88
#define SLOT_BIN bin88
#define SLOT_CMP cmp88
#include "fused_slot.glsl"
#define SLOT_W P89
#define SLOT_UN un89
#define SLOT_BIN bin89
#define SLOT_CMP cmp89
#include "fused_slot.glsl"
#define SLOT_W P90
#define SLOT_UN un90
#define SLOT_BIN bin90
#define SLOT_CMP cmp90
#include "fused_slot.glsl"
#define SLOT_W P91
#define SLOT_UN un91
#define SLOT_BIN bin91
#define SLOT_CMP cmp91
#include "fused_slot.glsl"
#define SLOT_W P92
#define SLOT_UN un92
#define SLOT_BIN bin92
#define SLOT_CMP cmp92
#include "fused_slot.glsl"
#define SLOT_W P93
#define SLOT_UN un93
#define SLOT_BIN bin93
#define SLOT_CMP cmp93
#include "fused_slot.glsl"
#define SLOT_W P94
#define SLOT_UN un94
#define SLOT_BIN bin94
#define SLOT_CMP cmp94
#include "fused_slot.glsl"
#define SLOT_W P95
#define SLOT_UN un95
#define SLOT_BIN bin95
#define SLOT_CMP cmp95
#include "fused_slot.glsl"
#define SLOT_W P96
#define SLOT_UN un96
#define SLOT_BIN bin96
#define SLOT_CMP cmp96
#include "fused_slot.glsl"
#define SLOT_W P97
#define SLOT_UN un97
#define SLOT_BIN bin97
#define SLOT_CMP cmp97
#include "fused_slot.glsl"
#define SLOT_W P98
#define SLOT_UN un98
#define SLOT_BIN bin98
#define SLOT_CMP cmp98
#include "fused_slot.glsl"
#define SLOT_W P99
#define SLOT_UN un99
#define SLOT_BIN bin99
#define SLOT_CMP cmp99
#include "fused_slot.glsl"
#define SLOT_W P100
#define SLOT_UN un100
#define SLOT_BIN bin100
#define SLOT_CMP cmp100
#include "fused_slot.glsl"
#define SLOT_W P101
#define SLOT_UN un101
#define SLOT_BIN bin101
#define SLOT_CMP cmp101
#include "fused_slot.glsl"
#define SLOT_W P102
#define SLOT_UN un102
#define SLOT_BIN bin102
#define SLOT_CMP cmp102
#include "fused_slot.glsl"
#define SLOT_W P103
#define SLOT_UN un103
#define SLOT_BIN bin103
#define SLOT_CMP cmp103
#include "fused_slot.glsl"
#define SLOT_W P104
#define SLOT_UN un104
#define SLOT_BIN bin104
#define SLOT_CMP cmp104
#include "fused_slot.glsl"
#define SLOT_W P105
#define SLOT_UN un105
#define SLOT_BIN bin105
#define SLOT_CMP cmp105
#include "fused_slot.glsl"
#define SLOT_W P106
#define SLOT_UN un106
#define SLOT_BIN bin106
#define SLOT_CMP cmp106
#include "fused_slot.glsl"
#define SLOT_W P107
#define SLOT_UN un107
#define SLOT_BIN bin107
#define SLOT_CMP cmp107
#include "fused_slot.glsl"
#define SLOT_W P108
#define SLOT_UN un108
#define SLOT_BIN bin108
#define SLOT_CMP cmp108
#include "fused_slot.glsl"
#define SLOT_W P109
#define SLOT_UN un109
#define SLOT_BIN bin109
#define SLOT_CMP cmp109
#include "fused_slot.glsl"
#define SLOT_W P110
#define SLOT_UN un110
#define SLOT_BIN bin110
#define SLOT_CMP cmp110
#include "fused_slot.glsl"
#define SLOT_W P111
#define SLOT_UN un111
#define SLOT_BIN bin111
#define SLOT_CMP cmp111
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
    STEP(16, P16, un16, bin16, cmp16)
    STEP(17, P17, un17, bin17, cmp17)
    STEP(18, P18, un18, bin18, cmp18)
    STEP(19, P19, un19, bin19, cmp19)
    STEP(20, P20, un20, bin20, cmp20)
    STEP(21, P21, un21, bin21, cmp21)
    STEP(22, P22, un22, bin22, cmp22)
    STEP(23, P23, un23, bin23, cmp23)
    STEP(24, P24, un24, bin24, cmp24)
    STEP(25, P25, un25, bin25, cmp25)
    STEP(26, P26, un26, bin26, cmp26)
    STEP(27, P27, un27, bin27, cmp27)
    STEP(28, P28, un28, bin28, cmp28)
    STEP(29, P29, un29, bin29, cmp29)
    STEP(30, P30, un30, bin30, cmp30)
    STEP(31, P31, un31, bin31, cmp31)
    STEP(32, P32, un32, bin32, cmp32)
    STEP(33, P33, un33, bin33, cmp33)
    STEP(34, P34, un34, bin34, cmp34)
    STEP(35, P35, un35, bin35, cmp35)
    STEP(36, P36, un36, bin36, cmp36)
    STEP(37, P37, un37, bin37, cmp37)
    STEP(38, P38, un38, bin38, cmp38)
    STEP(39, P39, un39, bin39, cmp39)
    STEP(40, P40, un40, bin40, cmp40)
    STEP(41, P41, un41, bin41, cmp41)
    STEP(42, P42, un42, bin42, cmp42)
    STEP(43, P43, un43, bin43, cmp43)
    STEP(44, P44, un44, bin44, cmp44)
    STEP(45, P45, un45, bin45, cmp45)
    STEP(46, P46, un46, bin46, cmp46)
    STEP(47, P47, un47, bin47, cmp47)
    STEP(48, P48, un48, bin48, cmp48)
    STEP(49, P49, un49, bin49, cmp49)
    STEP(50, P50, un50, bin50, cmp50)
    STEP(51, P51, un51, bin51, cmp51)
    STEP(52, P52, un52, bin52, cmp52)
    STEP(53, P53, un53, bin53, cmp53)
    STEP(54, P54, un54, bin54, cmp54)
    STEP(55, P55, un55, bin55, cmp55)
    STEP(56, P56, un56, bin56, cmp56)
    STEP(57, P57, un57, bin57, cmp57)
    STEP(58, P58, un58, bin58, cmp58)
    STEP(59, P59, un59, bin59, cmp59)
    STEP(60, P60, un60, bin60, cmp60)
    STEP(61, P61, un61, bin61, cmp61)
    STEP(62, P62, un62, bin62, cmp62)
    STEP(63, P63, un63, bin63, cmp63)
    STEP(64, P64, un64, bin64, cmp64)
    STEP(65, P65, un65, bin65, cmp65)
    STEP(66, P66, un66, bin66, cmp66)
    STEP(67, P67, un67, bin67, cmp67)
    STEP(68, P68, un68, bin68, cmp68)
    STEP(69, P69, un69, bin69, cmp69)
    STEP(70, P70, un70, bin70, cmp70)
    STEP(71, P71, un71, bin71, cmp71)
    STEP(72, P72, un72, bin72, cmp72)
    STEP(73, P73, un73, bin73, cmp73)
    STEP(74, P74, un74, bin74, cmp74)
    STEP(75, P75, un75, bin75, cmp75)
    STEP(76, P76, un76, bin76, cmp76)
    STEP(77, P77, un77, bin77, cmp77)
    STEP(78, P78, un78, bin78, cmp78)
    STEP(79, P79, un79, bin79, cmp79)
    STEP(80, P80, un80, bin80, cmp80)
    STEP(81, P81, un81, bin81, cmp81)
    STEP(82, P82, un82, bin82, cmp82)
    STEP(83, P83, un83, bin83, cmp83)
    STEP(84, P84, un84, bin84, cmp84)
    STEP(85, P85, un85, bin85, cmp85)
    STEP(86, P86, un86, bin86, cmp86)
    STEP(87, P87, un87, bin87, cmp87)
    STEP(88, P88, un88, bin88, cmp88)
    STEP(89, P89, un89, bin89, cmp89)
    STEP(90, P90, un90, bin90, cmp90)
    STEP(91, P91, un91, bin91, cmp91)
    STEP(92, P92, un92, bin92, cmp92)
    STEP(93, P93, un93, bin93, cmp93)
    STEP(94, P94, un94, bin94, cmp94)
    STEP(95, P95, un95, bin95, cmp95)
    STEP(96, P96, un96, bin96, cmp96)
    STEP(97, P97, un97, bin97, cmp97)
    STEP(98, P98, un98, bin98, cmp98)
    STEP(99, P99, un99, bin99, cmp99)
    STEP(100, P100, un100, bin100, cmp100)
    STEP(101, P101, un101, bin101, cmp101)
    STEP(102, P102, un102, bin102, cmp102)
    STEP(103, P103, un103, bin103, cmp103)
    STEP(104, P104, un104, bin104, cmp104)
    STEP(105, P105, un105, bin105, cmp105)
    STEP(106, P106, un106, bin106, cmp106)
    STEP(107, P107, un107, bin107, cmp107)
    STEP(108, P108, un108, bin108, cmp108)
    STEP(109, P109, un109, bin109, cmp109)
    STEP(110, P110, un110, bin110, cmp110)
    STEP(111, P111, un111, bin111, cmp111)
    pc.c.v[i] = T_ST(r[NIN + NINS - 1u]);
    if (OUT2 != 0u) pc.c2.v[i] = T_ST(r[OUT2 - 1u]);
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
#define HDR (5u + MAX_INS_INTERP)
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
    TC r[MAX_IN + MAX_INS_INTERP];
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
      bool lit = ((w >> 8) & 1u) != 0u;
      TC b = lit ? lit_value(w >> 16) : r[lit ? 0u : (w >> 16) & 127u];
      r[nin + k] = ROUND(basic_apply(w & 3u, (w >> 2) & 63u, r[(w >> 9) & 127u], b));
    }
    pc.c.v[i] = T_ST(r[nin + nins - 1u]);
  }
}
#endif  // INTERP
