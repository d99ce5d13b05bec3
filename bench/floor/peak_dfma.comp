#version 460
// peak_dfma.comp - f64 fused multiply-add throughput: peak_ffma.comp in
// double (the same push constants; x and y widened from float). Each
// thread runs 16 independent chains acc = fma(acc, x, y), 64 FMAs per loop
// iteration, iters iterations, and writes the sum of its chains.
// vk_ceiling.c counts 128 FLOPs per thread per iteration.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 256) in;
layout(buffer_reference, std430) buffer Buf { double v[]; };
layout(push_constant) uniform PC {
  Buf dst;
  uint iters;
  float x, y;
} pc;

void main() {
  double x = double(pc.x), y = double(pc.y);
  double acc[16];
  [[unroll]] for (uint i = 0u; i < 16u; ++i) acc[i] = double(gl_LocalInvocationID.x + i);
  for (uint it = 0u; it < pc.iters; ++it)
    [[unroll]] for (uint r = 0u; r < 4u; ++r)
      [[unroll]] for (uint i = 0u; i < 16u; ++i) acc[i] = fma(acc[i], x, y);
  double s = 0.0LF;
  [[unroll]] for (uint i = 0u; i < 16u; ++i) s += acc[i];
  pc.dst.v[gl_GlobalInvocationID.x] = s;
}
