#version 460
#extension GL_GOOGLE_include_directive : require
// fill.comp - c[i] = value for n elements of W bits (W = 32 or 64); the
// value's bits are (lo, hi) in push constants.
#include "common.glsl"

#if W == 64
layout(buffer_reference, std430, buffer_reference_align = 8) buffer BufW { uvec2 v[]; };
#else
layout(buffer_reference, std430, buffer_reference_align = 4) buffer BufW { uint v[]; };
#endif

layout(push_constant, std430) uniform PC {
  BufW c;
  uint n;
  uint pad;
  uint lo;
  uint hi;
} pc;

void main() {
  for (uint i = nxv_gid(); i < pc.n; i += nxv_nthreads()) {
#if W == 64
    pc.c.v[i] = uvec2(pc.lo, pc.hi);
#else
    pc.c.v[i] = pc.lo;
#endif
  }
}
