#version 460
#extension GL_GOOGLE_include_directive : require
#include "types.glsl"
// coopmat.comp - batched C[b] = A[b] (m x k) * B[b] (k x n) for f16 and
// bf16 (T_ID 8, 9) on tensor cores: 16x16x16 products accumulated in f32,
// result rounded to T. Same push constants as matmul.comp.
// Written for GL_NV_cooperative_matrix (what Debian's glslang compiles):
// the f16 module runs as compiled through VK_NV_cooperative_matrix, or
// rewritten at build time by tools/spv_coopmat_khr.c into
// SPV_KHR_cooperative_matrix; the bf16 module is rewritten into
// SPV_KHR_cooperative_matrix with bfloat16 matrix elements (its 16-bit
// float type is only ever a matrix component; the operands move through
// memory as raw 16-bit words), and runs through VK_KHR_cooperative_matrix
// and VK_KHR_shader_bfloat16.
//
// A workgroup (CM_WGM x CM_WGN subgroups of 32) computes a CM_BM x CM_BN
// tile of C; each subgroup owns a (CM_BM / CM_WGM) x (CM_BN / CM_WGN)
// block of it, as 16x16 accumulator matrices. k advances in slices of
// CM_BK staged in shared memory: the next slice is read from memory into
// registers (16-byte loads) while the current one is multiplied, then
// stored to shared memory, double-buffered when CM_STAGES is 2 (one
// barrier per slice) or in place when 1 (two). Tiles inside C with k a
// multiple of CM_BK load without bounds checks, each operand from one
// index advanced by a slice (a thread's groups a fixed step apart): on an
// H100 (f16 TFLOP/s) 4096^3 265 -> 300, 8192^3 281 -> 325, 2048^3 217 ->
// 246, 1024^3 176 -> 194, both operands transposed 268 -> 305, one
// transposed within 2%; the driver reported 254 registers instead of 255
// for the plain layout, 245-250 instead of 253-255 for the others. Slices
// of 32, double-buffered, with the same loads measured 290 / 305 at
// 4096^3 / 8192^3 and lost on every shape. Memory is read along each
// operand's contiguous axis, 8 halves at a time, which the host
// guarantees is possible: that axis has stride 1, the other strides, the
// offset and the contiguous extent are multiples of 8 elements.
// VARIANT bit 0: A is m-contiguous (stored transposed), else k-contiguous.
// VARIANT bit 1: B is k-contiguous (stored transposed), else n-contiguous.
// Dispatch: (ceil(n / CM_BN), ceil(m / CM_BM), batch); spec constant 0
// must be 32 CM_WGM CM_WGN. The host's COOPMAT_* constants (ops.c,
// registry.c) mirror these.
// The tile: 128x128, 4 subgroups of 64x64, k slices of 64, single-buffered
// (40 KiB of shared memory with the epilogue's: NXV_COOPMAT_SHARED; two
// workgroups share a multiprocessor, so one computes while the other
// stages its next slice). Through the KHR extension on an H200 (f16,
// TFLOP/s, two runs each: 4096^3 / 8192^3 / 4096^3 A transposed / B
// transposed) it measured 252-253 / 261-275 / 276-288 / 285-286 against
// 250 / 255-258 / 250-254 / 224 for the previous tile (128x256, 8
// subgroups of 64x64, slices of 32), 259-260 / 270-281 / 260-266 /
// 234-238 for 128x128 with slices of 32 double-buffered, 254 / 257-265 /
// 260-264 / 235 for the same single-buffered, and 172-175 for 128x256
// with slices of 16 double-buffered; 1024^3 164 against 153. On an H100
// in a later lease (f16, this tile against the previous one): 260 / 281 /
// 292 / 296 against 255 / 275 / 258 / 227. Earlier,
// through the KHR extension on an H100, 128x256 had won against 128x128
// with subgroups of 64x32 and slices of 64 (the best tile through the NV
// extension), 256x128, and 128x128 with subgroups of 32x64. Reading the
// next slice after the products instead of before them (either operand or
// both) left the driver at 232-242 registers, short of the 168 a third
// workgroup per multiprocessor needs, and lost at 4096^3 and 8192^3 on an
// H200 (300 / 313 TFLOP/s at best against 312 / 330). On an H200 the
// staging alone (this kernel without its products) takes 252 of its 436
// us at 4096^3; 256x128 and 128x256 tiles of 64x64 subgroup blocks (one
// 256-thread workgroup per multiprocessor), 64x32 blocks, and a ring of
// three 16-deep slices all measured slower (docs/benchmarks.md), and so
// did subgroups that only load (the slices handed to the multiplying
// subgroups by a barrier per slice or by counters in shared memory:
// 79-199 TFLOP/s against 305-321); slice boundaries shifted by half a
// slice in half of the workgroups measured within 3%; 32-deep slices
// copied straight from memory into two shared buffers (no staging
// registers, in case the driver made them asynchronous copies) lost
// 16-35%.
#ifndef CM_BM
#define CM_BM 128u
#define CM_BN 128u
#define CM_BK 64u
#define CM_WGM 2u
#define CM_WGN 2u
#define CM_STAGES 1u
#endif
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(buffer_reference, std430, buffer_reference_align = 2) buffer BufT { T v[]; };
// The operands' 16-byte loads are volatile: NVIDIA's compiler then reads
// them from L2 past the L1 cache (LDG.E.128.STRONG.GPU instead of
// LDG.E.128.CONSTANT), which the staging would otherwise fill with lines
// no other workgroup of the multiprocessor reads again, taking bandwidth
// from the shared-memory stores and fragment loads that share its data
// path. On an H200 (f16 TFLOP/s, binaries alternating, two rounds each in
// three leases): 2048^3 258-261 -> 261-266, 4096^3 305-308 -> 308-314,
// B transposed 294-295 -> 295-300, 8 x 1024^3 244-246 -> 247-250 (bf16
// 4096^3 305-306 -> 307-308): best against best 0.6-2.2% in the first two
// leases, 0.1-0.9% in the third. Coherent loads gained about half as
// much, restrict nothing, and the same volatile loads in gemm.comp (f32)
// nothing.
layout(buffer_reference, std430, buffer_reference_align = 16) volatile readonly buffer BufV { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer BufO { uvec4 v[]; };

// Two results rounded to T, as one word (the first in the low half).
uint cm_pack2(float x, float y) {
#if defined(T_BF16)
  return uint(T_ST(x)) | (uint(T_ST(y)) << 16);
#else
  return packFloat2x16(f16vec2(T_ST(x), T_ST(y)));
#endif
}

layout(push_constant, std430) uniform PC {
  BufT a;
  BufT b;
  BufT c;
  uint m, n, k, batch_base;
  int a_sb, a_sm, a_sk;
  int b_sb, b_sk, b_sn;
  uint a_off, b_off;
} pc;

const bool A_T = (VARIANT & 1u) != 0u;
const bool B_T = (VARIANT & 2u) != 0u;
const uint BM = CM_BM, BN = CM_BN, BK = CM_BK, STAGES = CM_STAGES;
const uint NSG = CM_WGM * CM_WGN, NT = 32u * NSG;
const uint SM = BM / CM_WGM, SN = BN / CM_WGN;  // one subgroup's block
const uint FM = SM / 16u, FN = SN / 16u;         // its accumulators
// 16-byte groups of a slice, and per thread.
const uint GA = BM * BK / 8u, GB = BK * BN / 8u;
const uint QA = GA / NT, QB = GB / NT;
// Shared tiles in uvec4 units (8 halves), rows padded by 8 halves so the
// 16-row fragment loads spread over the banks.
// A: [BM][BK + 8] (k-contiguous) or [BK][BM + 8] (m-contiguous).
// B: [BK][BN + 8] (n-contiguous) or [BN][BK + 8] (k-contiguous).
const uint A_ROW = A_T ? BM / 8u + 1u : BK / 8u + 1u;
const uint B_ROW = B_T ? BK / 8u + 1u : BN / 8u + 1u;
const uint A_SIZE = A_T ? BK * A_ROW : BM * A_ROW;
const uint B_SIZE = B_T ? BN * B_ROW : BK * B_ROW;
const uint A_MAX = BK * (BM / 8u + 1u) > BM * (BK / 8u + 1u) ? BK * (BM / 8u + 1u) : BM * (BK / 8u + 1u);
const uint B_MAX = BK * (BN / 8u + 1u) > BN * (BK / 8u + 1u) ? BK * (BN / 8u + 1u) : BN * (BK / 8u + 1u);
shared uvec4 As[STAGES * A_MAX];
shared uvec4 Bs[STAGES * B_MAX];
shared float Cs[NSG * 256u];  // per subgroup: one 16x16 f32 tile in the epilogue

void main() {
  uint lid = gl_LocalInvocationID.x;
  uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  uint bat = gl_WorkGroupID.z + pc.batch_base;
  uint abase = pc.a_off + bat * uint(pc.a_sb);
  uint bbase = pc.b_off + bat * uint(pc.b_sb);
  BufV av = BufV(uint64_t(pc.a)), bv = BufV(uint64_t(pc.b));

  // Group g of a slice: 8 halves along the contiguous axis.
  // A k-contiguous: row g / (BK / 8), k (g % (BK / 8)) * 8; m-contiguous:
  // k g / (BM / 8), m (g % (BM / 8)) * 8. B n-contiguous: k g / (BN / 8),
  // n (g % (BN / 8)) * 8; k-contiguous: n g / (BK / 8), k (g % (BK / 8)) * 8.
  uvec4 ra[QA], rb[QB];
#define LOAD_SLICE(k0)                                                          \
  [[unroll]] for (uint q = 0u; q < QA; ++q) {                                  \
    uint g = lid + NT * q;                                                     \
    uint gr, gp;                                                               \
    if (A_T) { gp = (k0) + g / (BM / 8u); gr = row0 + (g % (BM / 8u)) * 8u; }  \
    else { gr = row0 + g / (BK / 8u); gp = (k0) + (g % (BK / 8u)) * 8u; }      \
    bool in_a = gp < pc.k && gr < pc.m;                                        \
    uint ea = abase + (A_T ? gp * uint(pc.a_sk) + gr : gr * uint(pc.a_sm) + gp); \
    ra[q] = in_a ? av.v[ea / 8u] : uvec4(0u);                                  \
  }                                                                            \
  [[unroll]] for (uint q = 0u; q < QB; ++q) {                                  \
    uint g = lid + NT * q;                                                     \
    uint gs, gq;                                                               \
    if (B_T) { gs = col0 + g / (BK / 8u); gq = (k0) + (g % (BK / 8u)) * 8u; }  \
    else { gq = (k0) + g / (BN / 8u); gs = col0 + (g % (BN / 8u)) * 8u; }      \
    bool in_b = gq < pc.k && gs < pc.n;                                        \
    uint eb = bbase + (B_T ? gs * uint(pc.b_sn) + gq : gq * uint(pc.b_sk) + gs); \
    rb[q] = in_b ? bv.v[eb / 8u] : uvec4(0u);                                  \
  }
#define STORE_SLICE(buf)                                                        \
  [[unroll]] for (uint q = 0u; q < QA; ++q) {                                  \
    uint g = lid + NT * q;                                                     \
    uint ia = A_T ? (g / (BM / 8u)) * A_ROW + g % (BM / 8u)                    \
                  : (g / (BK / 8u)) * A_ROW + g % (BK / 8u);                   \
    As[(buf) * A_SIZE + ia] = ra[q];                                           \
  }                                                                            \
  [[unroll]] for (uint q = 0u; q < QB; ++q) {                                  \
    uint g = lid + NT * q;                                                     \
    uint ib = B_T ? (g / (BK / 8u)) * B_ROW + g % (BK / 8u)                    \
                  : (g / (BN / 8u)) * B_ROW + g % (BN / 8u);                   \
    Bs[(buf) * B_SIZE + ib] = rb[q];                                           \
  }

  // Interior tiles (the whole tile inside C, k a multiple of BK) load
  // without bounds checks: group q of a thread sits a fixed step after
  // group 0 (NT is a multiple of the groups per row), and one index per
  // operand advances by a slice.
  bool interior = row0 + BM <= pc.m && col0 + BN <= pc.n && pc.k % BK == 0u;
  uint ia, ib, a_step, b_step, a_slice, b_slice;
  if (A_T) {
    ia = abase + (lid / (BM / 8u)) * uint(pc.a_sk) + row0 + (lid % (BM / 8u)) * 8u;
    a_step = (NT / (BM / 8u)) * uint(pc.a_sk);
    a_slice = BK * uint(pc.a_sk);
  } else {
    ia = abase + (row0 + lid / (BK / 8u)) * uint(pc.a_sm) + (lid % (BK / 8u)) * 8u;
    a_step = (NT / (BK / 8u)) * uint(pc.a_sm);
    a_slice = BK;
  }
  if (B_T) {
    ib = bbase + (col0 + lid / (BK / 8u)) * uint(pc.b_sn) + (lid % (BK / 8u)) * 8u;
    b_step = (NT / (BK / 8u)) * uint(pc.b_sn);
    b_slice = BK;
  } else {
    ib = bbase + (lid / (BN / 8u)) * uint(pc.b_sk) + col0 + (lid % (BN / 8u)) * 8u;
    b_step = (NT / (BN / 8u)) * uint(pc.b_sk);
    b_slice = BK * uint(pc.b_sk);
  }
#define LOAD_NEXT(k0)                                                           \
  if (interior) {                                                              \
    [[unroll]] for (uint q = 0u; q < QA; ++q) ra[q] = av.v[(ia + q * a_step) / 8u]; \
    [[unroll]] for (uint q = 0u; q < QB; ++q) rb[q] = bv.v[(ib + q * b_step) / 8u]; \
    ia += a_slice;                                                             \
    ib += b_slice;                                                             \
  } else {                                                                     \
    LOAD_SLICE(k0)                                                             \
  }

  uint sg = gl_SubgroupID;
  uint wm = sg / CM_WGN, wn = sg % CM_WGN;  // this subgroup's block
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[FM][FN];
  [[unroll]] for (uint i = 0u; i < FM; ++i)
    [[unroll]] for (uint j = 0u; j < FN; ++j)
      acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

  LOAD_NEXT(0u)
  STORE_SLICE(0u)
  barrier();
  uint nslices = (pc.k + BK - 1u) / BK;
  for (uint slice = 0u; slice < nslices; ++slice) {
    uint cur = STAGES == 2u ? slice & 1u : 0u;
    bool more = slice + 1u < nslices;
    if (more) { LOAD_NEXT((slice + 1u) * BK) }
    [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[FM];
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fb[FN];
      [[unroll]] for (uint i = 0u; i < FM; ++i) {
        uint r = wm * SM + i * 16u;
        // Offsets and strides in uvec4 units (8 halves).
        if (A_T)
          coopMatLoadNV(fa[i], As, cur * A_SIZE + kk * A_ROW + r / 8u, A_ROW, true);
        else
          coopMatLoadNV(fa[i], As, cur * A_SIZE + r * A_ROW + kk / 8u, A_ROW, false);
      }
      [[unroll]] for (uint j = 0u; j < FN; ++j) {
        uint s = wn * SN + j * 16u;
        if (B_T)
          coopMatLoadNV(fb[j], Bs, cur * B_SIZE + s * B_ROW + kk / 8u, B_ROW, true);
        else
          coopMatLoadNV(fb[j], Bs, cur * B_SIZE + kk * B_ROW + s / 8u, B_ROW, false);
      }
      [[unroll]] for (uint i = 0u; i < FM; ++i)
        [[unroll]] for (uint j = 0u; j < FN; ++j)
          acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
    }
    if (STAGES == 2u) {
      if (more) { STORE_SLICE(cur ^ 1u) }
      barrier();
    } else if (more) {
      barrier();  // every subgroup is done with the slice
      STORE_SLICE(0u)
      barrier();
    }
  }

  // Epilogue: each subgroup stages one accumulator at a time in its slice
  // of Cs and writes it out rounded to T: in tiles inside C whose rows are
  // 16-byte multiples, 8 elements per invocation in one 16-byte store;
  // elsewhere element by element with bounds checks. On an H200 (f16
  // TFLOP/s, element stores -> 16-byte stores, binaries alternating):
  // 8192^3 319.4-319.6 -> 322.5-323.6, 4096^3 296-298 -> 306, A
  // transposed 292.3-292.7 -> 303.9-305.0, B transposed 306-307 -> 318.
  uint lane = gl_SubgroupInvocationID;
  uint cbase = bat * pc.m * pc.n;
  bool wide = row0 + BM <= pc.m && col0 + BN <= pc.n && pc.n % 8u == 0u &&
              gl_SubgroupSize == 32u;
  BufO cv = BufO(uint64_t(pc.c));
  [[unroll]] for (uint i = 0u; i < FM; ++i)
    [[unroll]] for (uint j = 0u; j < FN; ++j) {
      coopMatStoreNV(acc[i][j], Cs, sg * 256u, 16u, false);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      uint r0 = row0 + wm * SM + i * 16u, c0 = col0 + wn * SN + j * 16u;
      if (wide) {
        uint e = lane * 8u, o = sg * 256u + e;
        cv.v[(cbase + (r0 + e / 16u) * pc.n + c0 + e % 16u) / 8u] =
            uvec4(cm_pack2(Cs[o], Cs[o + 1u]), cm_pack2(Cs[o + 2u], Cs[o + 3u]),
                  cm_pack2(Cs[o + 4u], Cs[o + 5u]), cm_pack2(Cs[o + 6u], Cs[o + 7u]));
        subgroupBarrier();
        continue;
      }
      for (uint e = lane; e < 256u; e += gl_SubgroupSize) {
        uint gr = r0 + e / 16u, gc = c0 + e % 16u;
        if (gr < pc.m && gc < pc.n) pc.c.v[cbase + gr * pc.n + gc] = T_ST(Cs[sg * 256u + e]);
      }
      subgroupBarrier();
    }
}
