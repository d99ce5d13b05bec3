#version 460
#extension GL_GOOGLE_include_directive : require
#include "types.glsl"
// reduce.comp - out[o] = OP over the reduced axes of in, for type T (T_ID),
// accumulated in its compute type TC.
// The arena holds kept_shape[rk], kept_strides[rk], red_shape[rr],
// red_strides[rr], in_off (elements). OP: 0 sum, 1 product, 2 max, 3 min.
// VARIANT 0: one thread per output (short reductions).
// VARIANT 1: one workgroup per output, tree reduction in shared memory
//            (the workgroup size must be a power of two).
#include "common.glsl"

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT { T v[]; };

layout(push_constant, std430) uniform PC {
  BufT a;
  BufT c;
  ArgsRef args;
  uint n_out;
  uint k;
  uint rank_kept;
  uint rank_red;
} pc;

#include "reduce_ops.glsl"

shared TC s_acc[gl_WorkGroupSize.x];

#include "reduce_axes.glsl"

void main() {
  uint nargs = 2u * pc.rank_kept + 2u * pc.rank_red + 1u;
  for (uint j = gl_LocalInvocationID.x; j < nargs; j += gl_WorkGroupSize.x)
    s_args[j] = pc.args.d[j];
  barrier();
  if (VARIANT == 0) {
    for (uint o = nxv_gid(); o < pc.n_out; o += nxv_nthreads()) {
      uint base = kept_offset(o);
      TC acc = identity();
      for (uint k = 0u; k < pc.k; ++k) acc = combine(acc, T_LD(pc.a.v[base + red_offset(k)]));
      pc.c.v[o] = T_ST(acc);
    }
  } else {
    uint lid = gl_LocalInvocationID.x;
    for (uint o = gl_WorkGroupID.x; o < pc.n_out; o += gl_NumWorkGroups.x) {
      uint base = kept_offset(o);
      TC acc = identity();
      for (uint k = lid; k < pc.k; k += gl_WorkGroupSize.x)
        acc = combine(acc, T_LD(pc.a.v[base + red_offset(k)]));
      s_acc[lid] = acc;
      barrier();
      for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1) {
        if (lid < s) s_acc[lid] = combine(s_acc[lid], s_acc[lid + s]);
        barrier();
      }
      if (lid == 0u) pc.c.v[o] = T_ST(s_acc[0]);
      barrier();
    }
  }
}
