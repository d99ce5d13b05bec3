#version 460
// add_one.comp - dst[i] = src[i] + 1 for i < n (f32, buffer device
// addresses). The one kernel of vk_floor.c.
#extension GL_EXT_buffer_reference : require
layout(local_size_x = 64) in;
layout(buffer_reference, std430) buffer Buf { float v[]; };
layout(push_constant) uniform PC {
  Buf src;
  Buf dst;
  uint n;
} pc;

void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < pc.n) pc.dst.v[i] = pc.src.v[i] + 1.0;
}
