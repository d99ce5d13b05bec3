#version 460
#extension GL_GOOGLE_include_directive : require
#include "types.glsl"
// iota.comp - c[i] = T((i / inner) % axis_size): the index along one axis
// of a dense tensor, inner being the product of the later dimensions.
#include "common.glsl"

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT { T v[]; };

layout(push_constant, std430) uniform PC {
  BufT c;
  uint n;
  uint axis_size;
  uint inner;
} pc;

void main() {
  for (uint i = nxv_gid(); i < pc.n; i += nxv_nthreads())
    pc.c.v[i] = T_ST(T_FROM_REAL((i / pc.inner) % pc.axis_size));
}
