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

TC identity() {
#if T_KIND == KIND_FLOAT
  if (OP == 2u) return TC(-1.0) / TC(0.0);
  if (OP == 3u) return TC(1.0) / TC(0.0);
#else
  if (OP == 2u) return TC(T_MIN);
  if (OP == 3u) return TC(T_MAX);
#endif
  return OP == 1u ? TC(1) : TC(0);
}

TC combine(TC x, TC y) {
  switch (OP) {
  case 0: return x + y;
  case 1: return x * y;
#if T_KIND == KIND_FLOAT
  case 2: return (isnan(x) || isnan(y)) ? x + y : max(x, y);
  case 3: return (isnan(x) || isnan(y)) ? x + y : min(x, y);
#else
  case 2: return max(x, y);
  case 3: return min(x, y);
#endif
  }
  return x;
}

shared uint s_args[4 * NXV_MAX_RANK + 1];
shared TC s_acc[gl_WorkGroupSize.x];

uint kept_offset(uint o) {
  uint rk = pc.rank_kept, off = s_args[2u * rk + 2u * pc.rank_red];
  for (int d = int(rk) - 1; d >= 0; --d) {
    uint dim = s_args[d];
    uint q = o / dim;
    off += (o - q * dim) * s_args[rk + uint(d)];
    o = q;
  }
  return off;
}

uint red_offset(uint k) {
  uint base = 2u * pc.rank_kept, rr = pc.rank_red, off = 0u;
  for (int d = int(rr) - 1; d >= 0; --d) {
    uint dim = s_args[base + uint(d)];
    uint q = k / dim;
    off += (k - q * dim) * s_args[base + rr + uint(d)];
    k = q;
  }
  return off;
}

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
