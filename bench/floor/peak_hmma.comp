#version 460
// peak_hmma.comp - tensor-core throughput through GL_NV_cooperative_matrix
// (16x16x16 f16 products accumulated in f32), the ceiling under
// coopmat.comp. 8 subgroups of 32 per workgroup; each keeps FM x FN
// accumulators (spec constants 0 and 1) and per iteration multiplies FM A
// fragments by FN B fragments into them:
//   FROM_SHARED 0: the fragments stay in registers (the tensor cores alone);
//   FROM_SHARED 1: they are loaded from shared memory before every product,
//   laid out as coopmat.comp lays out a k-contiguous A and an n-contiguous B
//   slice (rows padded by 8 halves), k advancing by 16 through a slice of
//   32, as coopmat.comp's inner loop does, without its global loads.
// Each subgroup stores its accumulators to shared memory at the end and
// one lane writes their sum, so nothing is dead. vk_ceiling.c counts
// 8192 FLOPs per product.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint FM = 4u;
layout(constant_id = 1) const uint FN = 2u;
layout(buffer_reference, std430) buffer Buf { float v[]; };
layout(push_constant) uniform PC {
  Buf dst;
  uint iters;
  float x, y;
} pc;

const uint WGM = 2u, WGN = 4u, BK = 32u;
const uint BM = WGM * FM * 16u, BN = WGN * FN * 16u;
const uint A_ROW = BK / 8u + 1u, B_ROW = BN / 8u + 1u;  // uvec4 units
shared uvec4 As[BM * A_ROW];
shared uvec4 Bs[BK * B_ROW];
shared float Cs[8u * 256u];

void main() {
  uint lid = gl_LocalInvocationID.x, sg = gl_SubgroupID;
  uint wm = sg / WGN, wn = sg % WGN;
  fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[FM];
  fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fb[FN];
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[FM][FN];
  [[unroll]] for (uint i = 0u; i < FM; ++i)
    [[unroll]] for (uint j = 0u; j < FN; ++j)
      acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
#if FROM_SHARED
  f16vec2 h = f16vec2(float16_t(pc.x), float16_t(pc.y));
  uvec4 fill = uvec4(packFloat2x16(h));
  for (uint e = lid; e < BM * A_ROW; e += 256u) As[e] = fill;
  for (uint e = lid; e < BK * B_ROW; e += 256u) Bs[e] = fill;
  barrier();
  for (uint it = 0u; it < pc.iters; ++it)
    [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
      [[unroll]] for (uint i = 0u; i < FM; ++i)
        coopMatLoadNV(fa[i], As, (wm * FM * 16u + i * 16u) * A_ROW + kk / 8u, A_ROW, false);
      [[unroll]] for (uint j = 0u; j < FN; ++j)
        coopMatLoadNV(fb[j], Bs, kk * B_ROW + (wn * FN * 16u + j * 16u) / 8u, B_ROW, false);
      [[unroll]] for (uint i = 0u; i < FM; ++i)
        [[unroll]] for (uint j = 0u; j < FN; ++j)
          acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
    }
#else
  [[unroll]] for (uint i = 0u; i < FM; ++i)
    fa[i] = fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>(float16_t(pc.x * float(i + 1u)));
  [[unroll]] for (uint j = 0u; j < FN; ++j)
    fb[j] = fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>(float16_t(pc.y * float(j + 1u)));
  for (uint it = 0u; it < pc.iters; ++it)
    [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u)
      [[unroll]] for (uint i = 0u; i < FM; ++i)
        [[unroll]] for (uint j = 0u; j < FN; ++j)
          acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
#endif
  float s = 0.0;
  [[unroll]] for (uint i = 0u; i < FM; ++i)
    [[unroll]] for (uint j = 0u; j < FN; ++j) {
      coopMatStoreNV(acc[i][j], Cs, sg * 256u, 16u, false);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      s += Cs[sg * 256u + gl_SubgroupInvocationID];
      subgroupBarrier();
    }
  pc.dst.v[gl_GlobalInvocationID.x] = s;
}
