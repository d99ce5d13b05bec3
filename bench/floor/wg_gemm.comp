#version 460
// wg_gemm.comp - C = A (m x k) * B (k x n), f16 operands, f32
// accumulation, f16 result, all row-major and tile-aligned, on tensor cores
// through workgroup-scope cooperative matrices (VK_NV_cooperative_matrix2):
// one WG_TM x WG_TN accumulator per workgroup of WG_INV invocations, k in
// steps of WG_TK, the driver spreading each matrix over the workgroup.
// Written for GL_NV_cooperative_matrix (what Debian's glslang compiles) with
// gl_ScopeWorkgroup; the build rewrites it into SPV_KHR_cooperative_matrix
// (tools/spv_coopmat_khr.c), where workgroup scope and these sizes are what
// VK_NV_cooperative_matrix2's flexible dimensions allow.
// WG_MODE 0: A and B matrices loaded straight from memory each step.
// WG_MODE 1: each step's A and B slices staged in shared memory first
//            (16-byte loads, rows padded by 16 bytes), then loaded from there.
// WG_MODE 3: as 1, double-buffered: the next step's slices are read from
//            memory into registers before the current step's product and
//            stored to the other buffer after it (one barrier per step).
// WG_MODE 2: products only: A and B loaded once, then multiplied k / WG_TK
//            times into the accumulator (the result is not a product).
// Push constants: the three buffer addresses, then m, n, k.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = WG_INV) in;
layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufV { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufH { float16_t v[]; };
layout(push_constant, std430) uniform PC { BufV a; BufV b; BufH c; uint m, n, k; } pc;

const uint TM = WG_TM, TN = WG_TN, TK = WG_TK, NT = WG_INV;
const uint AROW = TK / 8u + 1u, BROW = TN / 8u + 1u;  // uvec4s per shared row
#if WG_MODE == 1
shared uvec4 As[TM * AROW];
shared uvec4 Bs[TK * BROW];
#elif WG_MODE == 3
shared uvec4 As[2u * TM * AROW];
shared uvec4 Bs[2u * TK * BROW];
#endif

void main() {
  fcoopmatNV<32, gl_ScopeWorkgroup, TM, TN> acc = fcoopmatNV<32, gl_ScopeWorkgroup, TM, TN>(0.0);
  uint r0 = gl_WorkGroupID.y * TM, c0 = gl_WorkGroupID.x * TN;
  fcoopmatNV<16, gl_ScopeWorkgroup, TM, TK> a;
  fcoopmatNV<16, gl_ScopeWorkgroup, TK, TN> b;
#if WG_MODE == 2
  coopMatLoadNV(a, pc.a.v, r0 * pc.k / 8u, pc.k / 8u, false);
  coopMatLoadNV(b, pc.b.v, c0 / 8u, pc.n / 8u, false);
  for (uint k0 = 0u; k0 < pc.k; k0 += TK) acc = coopMatMulAddNV(a, b, acc);
#elif WG_MODE == 3
  uint lid = gl_LocalInvocationID.x;
  const uint QA = TM * TK / 8u / NT, QB = TK * TN / 8u / NT;
  uvec4 ra[QA], rb[QB];
#define LOAD_STEP(k0)                                                                      \
  [[unroll]] for (uint q = 0u; q < QA; ++q) {                                              \
    uint g = lid + NT * q;                                                                 \
    ra[q] = pc.a.v[((r0 + g / (TK / 8u)) * pc.k + (k0) + (g % (TK / 8u)) * 8u) / 8u];      \
  }                                                                                        \
  [[unroll]] for (uint q = 0u; q < QB; ++q) {                                              \
    uint g = lid + NT * q;                                                                 \
    rb[q] = pc.b.v[(((k0) + g / (TN / 8u)) * pc.n + c0 + (g % (TN / 8u)) * 8u) / 8u];      \
  }
#define STORE_STEP(buf)                                                                    \
  [[unroll]] for (uint q = 0u; q < QA; ++q) {                                              \
    uint g = lid + NT * q;                                                                 \
    As[(buf) * TM * AROW + (g / (TK / 8u)) * AROW + g % (TK / 8u)] = ra[q];                \
  }                                                                                        \
  [[unroll]] for (uint q = 0u; q < QB; ++q) {                                              \
    uint g = lid + NT * q;                                                                 \
    Bs[(buf) * TK * BROW + (g / (TN / 8u)) * BROW + g % (TN / 8u)] = rb[q];                \
  }
  LOAD_STEP(0u)
  STORE_STEP(0u)
  barrier();
  uint steps = pc.k / TK;
  for (uint s = 0u; s < steps; ++s) {
    uint cur = s & 1u;
    bool more = s + 1u < steps;
    if (more) { LOAD_STEP((s + 1u) * TK) }
    coopMatLoadNV(a, As, cur * TM * AROW, AROW, false);
    coopMatLoadNV(b, Bs, cur * TK * BROW, BROW, false);
    acc = coopMatMulAddNV(a, b, acc);
    if (more) { STORE_STEP(cur ^ 1u) }
    barrier();
  }
#else
  uint lid = gl_LocalInvocationID.x;
  for (uint k0 = 0u; k0 < pc.k; k0 += TK) {
#if WG_MODE == 0
    coopMatLoadNV(a, pc.a.v, (r0 * pc.k + k0) / 8u, pc.k / 8u, false);
    coopMatLoadNV(b, pc.b.v, (k0 * pc.n + c0) / 8u, pc.n / 8u, false);
#else
    const uint QA = TM * TK / 8u / NT, QB = TK * TN / 8u / NT;
    uvec4 ra[QA], rb[QB];
    [[unroll]] for (uint q = 0u; q < QA; ++q) {
      uint g = lid + NT * q;
      ra[q] = pc.a.v[((r0 + g / (TK / 8u)) * pc.k + k0 + (g % (TK / 8u)) * 8u) / 8u];
    }
    [[unroll]] for (uint q = 0u; q < QB; ++q) {
      uint g = lid + NT * q;
      rb[q] = pc.b.v[((k0 + g / (TN / 8u)) * pc.n + c0 + (g % (TN / 8u)) * 8u) / 8u];
    }
    barrier();  // the previous step's loads from shared memory are done
    [[unroll]] for (uint q = 0u; q < QA; ++q) {
      uint g = lid + NT * q;
      As[(g / (TK / 8u)) * AROW + g % (TK / 8u)] = ra[q];
    }
    [[unroll]] for (uint q = 0u; q < QB; ++q) {
      uint g = lid + NT * q;
      Bs[(g / (TN / 8u)) * BROW + g % (TN / 8u)] = rb[q];
    }
    barrier();
    coopMatLoadNV(a, As, 0u, AROW, false);
    coopMatLoadNV(b, Bs, 0u, BROW, false);
#endif
    acc = coopMatMulAddNV(a, b, acc);
  }
#endif
  fcoopmatNV<16, gl_ScopeWorkgroup, TM, TN> o = fcoopmatNV<16, gl_ScopeWorkgroup, TM, TN>(acc);
  coopMatStoreNV(o, pc.c.v, r0 * pc.n + c0, pc.n, false);
}
