#version 460
#extension GL_GOOGLE_include_directive : require
#include "types.glsl"
// coopmat.comp - batched C[b] = A[b] (m x k) * B[b] (k x n) for f16 on
// tensor cores (GL_NV_cooperative_matrix, 16x16x16 f16 products
// accumulated in f32), result rounded to f16. Same push constants as
// matmul.comp.
//
// A workgroup (256 threads, 8 subgroups of 32) computes a 128x128 tile of
// C; subgroup (wm, wn) in a 2x4 grid owns 64x32 of it (4x2 accumulator
// matrices). k advances in slices of 32, staged in shared memory and
// double-buffered: the next slice is read from memory into registers (two
// 16-byte loads per operand and thread) while the current one is
// multiplied. Memory is read along each operand's contiguous axis, 8
// halves at a time, which the host guarantees is possible: that axis has
// stride 1, the other strides, the offset and the contiguous extent are
// multiples of 8 elements.
// VARIANT bit 0: A is m-contiguous (stored transposed), else k-contiguous.
// VARIANT bit 1: B is k-contiguous (stored transposed), else n-contiguous.
// Dispatch: (ceil(n/128), ceil(m/128), batch); spec constant 0 must be 256.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(buffer_reference, std430, buffer_reference_align = 2) buffer BufT { float16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer BufV { uvec4 v[]; };

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
const uint BM = 128u, BN = 128u, BK = 32u;
// Shared tiles in uvec4 units (8 halves), rows padded by 8 halves so the
// 16-row fragment loads spread over the banks.
// A: [BM][BK + 8] (k-contiguous) or [BK][BM + 8] (m-contiguous).
// B: [BK][BN + 8] (n-contiguous) or [BN][BK + 8] (k-contiguous).
const uint A_ROW = A_T ? (BM + 8u) / 8u : (BK + 8u) / 8u;
const uint B_ROW = B_T ? (BK + 8u) / 8u : (BN + 8u) / 8u;
const uint A_SIZE = A_T ? BK * A_ROW : BM * A_ROW;
const uint B_SIZE = B_T ? BN * B_ROW : BK * B_ROW;
shared uvec4 As[2u * ((BM + 8u) / 8u) * BK > 2u * BM * ((BK + 8u) / 8u)
                    ? 2u * ((BM + 8u) / 8u) * BK : 2u * BM * ((BK + 8u) / 8u)];
shared uvec4 Bs[2u * ((BN + 8u) / 8u) * BK > 2u * BN * ((BK + 8u) / 8u)
                    ? 2u * ((BN + 8u) / 8u) * BK : 2u * BN * ((BK + 8u) / 8u)];
shared float Cs[8u * 256u];  // per subgroup: one 16x16 f32 tile in the epilogue

void main() {
  uint lid = gl_LocalInvocationID.x;
  uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  uint bat = gl_WorkGroupID.z + pc.batch_base;
  uint abase = pc.a_off + bat * uint(pc.a_sb);
  uint bbase = pc.b_off + bat * uint(pc.b_sb);
  BufV av = BufV(uint64_t(pc.a)), bv = BufV(uint64_t(pc.b));

  // Group g (0..511) of a slice: 8 halves along the contiguous axis.
  // A k-contiguous: row g / 4, k (g % 4) * 8; m-contiguous: k g / 16,
  // m (g % 16) * 8. B n-contiguous: k g / 16, n (g % 16) * 8;
  // k-contiguous: n g / 4, k (g % 4) * 8.
  uvec4 ra[2], rb[2];
#define LOAD_SLICE(k0)                                                          \
  [[unroll]] for (uint q = 0u; q < 2u; ++q) {                                  \
    uint g = lid + 256u * q;                                                   \
    uint gr, gp;                                                               \
    if (A_T) { gp = (k0) + g / 16u; gr = row0 + (g % 16u) * 8u; }              \
    else { gr = row0 + g / 4u; gp = (k0) + (g % 4u) * 8u; }                    \
    bool in_a = gp < pc.k && gr < pc.m;                                        \
    uint ea = abase + (A_T ? gp * uint(pc.a_sk) + gr : gr * uint(pc.a_sm) + gp); \
    ra[q] = in_a ? av.v[ea / 8u] : uvec4(0u);                                  \
    uint gs, gq;                                                               \
    if (B_T) { gs = col0 + g / 4u; gq = (k0) + (g % 4u) * 8u; }                \
    else { gq = (k0) + g / 16u; gs = col0 + (g % 16u) * 8u; }                  \
    bool in_b = gq < pc.k && gs < pc.n;                                        \
    uint eb = bbase + (B_T ? gs * uint(pc.b_sn) + gq : gq * uint(pc.b_sk) + gs); \
    rb[q] = in_b ? bv.v[eb / 8u] : uvec4(0u);                                  \
  }
#define STORE_SLICE(buf)                                                        \
  [[unroll]] for (uint q = 0u; q < 2u; ++q) {                                  \
    uint g = lid + 256u * q;                                                   \
    uint ia = A_T ? (g / 16u) * A_ROW + g % 16u : (g / 4u) * A_ROW + g % 4u;   \
    uint ib = B_T ? (g / 4u) * B_ROW + g % 4u : (g / 16u) * B_ROW + g % 16u;   \
    As[(buf) * A_SIZE + ia] = ra[q];                                           \
    Bs[(buf) * B_SIZE + ib] = rb[q];                                           \
  }

  uint sg = gl_SubgroupID;
  uint wm = sg / 4u, wn = sg % 4u;  // this subgroup's 64x32 block
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[4][2];
  [[unroll]] for (uint i = 0u; i < 4u; ++i)
    [[unroll]] for (uint j = 0u; j < 2u; ++j)
      acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

  LOAD_SLICE(0u)
  STORE_SLICE(0u)
  barrier();
  uint nslices = (pc.k + BK - 1u) / BK;
  for (uint slice = 0u; slice < nslices; ++slice) {
    uint cur = slice & 1u;
    bool more = slice + 1u < nslices;
    if (more) { LOAD_SLICE((slice + 1u) * BK) }
    [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[4];
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fb[2];
      [[unroll]] for (uint i = 0u; i < 4u; ++i) {
        uint r = wm * 64u + i * 16u;
        // Offsets and strides in uvec4 units (8 halves).
        if (A_T)
          coopMatLoadNV(fa[i], As, cur * A_SIZE + kk * A_ROW + r / 8u, A_ROW, true);
        else
          coopMatLoadNV(fa[i], As, cur * A_SIZE + r * A_ROW + kk / 8u, A_ROW, false);
      }
      [[unroll]] for (uint j = 0u; j < 2u; ++j) {
        uint s = wn * 32u + j * 16u;
        if (B_T)
          coopMatLoadNV(fb[j], Bs, cur * B_SIZE + s * B_ROW + kk / 8u, B_ROW, true);
        else
          coopMatLoadNV(fb[j], Bs, cur * B_SIZE + kk * B_ROW + s / 8u, B_ROW, false);
      }
      [[unroll]] for (uint i = 0u; i < 4u; ++i)
        [[unroll]] for (uint j = 0u; j < 2u; ++j)
          acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
    }
    if (more) { STORE_SLICE(cur ^ 1u) }
    barrier();
  }

  // Epilogue: each subgroup stages one accumulator at a time in its slice
  // of Cs and writes it out with bounds checks, rounding to f16.
  uint lane = gl_SubgroupInvocationID;
  uint cbase = bat * pc.m * pc.n;
  [[unroll]] for (uint i = 0u; i < 4u; ++i)
    [[unroll]] for (uint j = 0u; j < 2u; ++j) {
      coopMatStoreNV(acc[i][j], Cs, sg * 256u, 16u, false);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      uint r0 = row0 + wm * 64u + i * 16u, c0 = col0 + wn * 32u + j * 16u;
      for (uint e = lane; e < 256u; e += gl_SubgroupSize) {
        uint gr = r0 + e / 16u, gc = c0 + e % 16u;
        if (gr < pc.m && gc < pc.n) pc.c.v[cbase + gr * pc.n + gc] = float16_t(Cs[sg * 256u + e]);
      }
      subgroupBarrier();
    }
}
