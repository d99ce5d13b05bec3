#version 460
// split_gemm.comp - C = A (m x k) * B (k x n) for f32 operands on bf16
// tensor cores: each element x is split into three bfloat16 terms (hi =
// x rounded to bf16, mid = the rest rounded, lo = what is left rounded,
// 24 significant bits in all), and the product keeps the six partial
// products down to 2^-16 of the leading one (hi.hi, hi.mid, mid.hi, hi.lo,
// mid.mid, lo.hi), accumulated in f32: the f32 product emulated with
// bfloat16 multiplies, as XLA's bf16_6x. Row-major f32 operands and result,
// every dimension a multiple of the tile (the benchmark's shapes).
// Written for GL_NV_cooperative_matrix with float16_t matrices; the build
// rewrites the module (tools/spv_coopmat_khr.c khr-bf16) so the 16-bit
// matrices are bfloat16; the shader moves them as raw 16-bit words only.
// A workgroup of 4 subgroups computes a 128x128 tile, each subgroup 64x64
// as 4x4 accumulators; k advances in slices of 16 staged in shared memory
// (three planes per operand, rows padded by 8 elements).
// Push constants: the three buffer addresses, then m, n, k.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 128) in;
layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufF4 { vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufF { float v[]; };
layout(push_constant, std430) uniform PC { BufF4 a; BufF4 b; BufF c; uint m, n, k; } pc;

const uint BM = 128u, BN = 128u, BK = 16u, NT = 128u;
const uint AROW = (BK + 8u) / 8u, BROW = (BN + 8u) / 8u;  // uvec4s per shared row
const uint APLANE = BM * AROW, BPLANE = BK * BROW;
shared uvec4 As[3u * APLANE];
shared uvec4 Bs[3u * BPLANE];

// x's three bfloat16 terms (round to nearest even), each in the low 16 bits.
uvec3 split3(float x) {
  uvec3 r;
  float rest = x;
  [[unroll]] for (uint t = 0u; t < 3u; ++t) {
    uint u = floatBitsToUint(rest);
    uint h = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    r[t] = h >> 16;
    rest -= uintBitsToFloat(h);
  }
  return r;
}

void main() {
  uint lid = gl_LocalInvocationID.x;
  uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  uint sg = gl_SubgroupID, wm = sg / 2u, wn = sg % 2u;
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[4][4];
  [[unroll]] for (uint i = 0u; i < 4u; ++i)
    [[unroll]] for (uint j = 0u; j < 4u; ++j)
      acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

  for (uint k0 = 0u; k0 < pc.k; k0 += BK) {
    // A slice: 128 rows x 16 k = 512 vec4, 4 per thread; B slice: 16 x 128.
    vec4 ra[4], rb[4];
    [[unroll]] for (uint q = 0u; q < 4u; ++q) {
      uint g = lid + NT * q;
      ra[q] = pc.a.v[((row0 + g / 4u) * pc.k + k0 + (g % 4u) * 4u) / 4u];
      rb[q] = pc.b.v[((k0 + g / 32u) * pc.n + col0 + (g % 32u) * 4u) / 4u];
    }
    barrier();  // the previous slice's fragments are loaded
    [[unroll]] for (uint q = 0u; q < 4u; ++q) {
      uint g = lid + NT * q;
      uvec3 a0 = split3(ra[q].x), a1 = split3(ra[q].y), a2 = split3(ra[q].z), a3 = split3(ra[q].w);
      uvec3 b0 = split3(rb[q].x), b1 = split3(rb[q].y), b2 = split3(rb[q].z), b3 = split3(rb[q].w);
      // 4 elements = 8 bytes = half a uvec4: element index in halves.
      uint ia = (g / 4u) * AROW * 8u + (g % 4u) * 4u;
      uint ib = (g / 32u) * BROW * 8u + (g % 32u) * 4u;
      [[unroll]] for (uint t = 0u; t < 3u; ++t) {
        uvec2 wa = uvec2(a0[t] | (a1[t] << 16), a2[t] | (a3[t] << 16));
        uvec2 wb = uvec2(b0[t] | (b1[t] << 16), b2[t] | (b3[t] << 16));
        uint ua = t * APLANE + ia / 8u, ub = t * BPLANE + ib / 8u;
        if ((ia & 4u) == 0u) { As[ua].xy = wa; } else { As[ua].zw = wa; }
        if ((ib & 4u) == 0u) { Bs[ub].xy = wb; } else { Bs[ub].zw = wb; }
      }
    }
    barrier();
    // Plane pairs (a, b) with a + b <= 2.
    [[unroll]] for (uint pa = 0u; pa < 3u; ++pa) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[4];
      [[unroll]] for (uint i = 0u; i < 4u; ++i)
        coopMatLoadNV(fa[i], As, pa * APLANE + (wm * 64u + i * 16u) * AROW, AROW, false);
      [[unroll]] for (uint pb = 0u; pb + pa < 3u; ++pb) {
        fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fb[4];
        [[unroll]] for (uint j = 0u; j < 4u; ++j)
          coopMatLoadNV(fb[j], Bs, pb * BPLANE + (wn * 64u + j * 16u) / 8u, BROW, false);
        [[unroll]] for (uint i = 0u; i < 4u; ++i)
          [[unroll]] for (uint j = 0u; j < 4u; ++j)
            acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
      }
    }
  }
  [[unroll]] for (uint i = 0u; i < 4u; ++i)
    [[unroll]] for (uint j = 0u; j < 4u; ++j) {
      uint r = row0 + wm * 64u + i * 16u, c = col0 + wn * 64u + j * 16u;
      coopMatStoreNV(acc[i][j], pc.c.v, r * pc.n + c, pc.n, false);
    }
}
