#version 460
// peak_ffma.comp - fused multiply-add throughput in f32, or in f64 with
// -DF64=1 (peak_dfma_spv): each thread runs 16 independent chains
// acc = fma(acc, x, y), 64 FMAs per loop iteration, iters iterations, and
// writes the sum of its chains (so nothing is dead). vk_ceiling.c counts
// 128 FLOPs per thread per iteration. x and y come as float either way.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : require
#if F64
#define R double
#else
#define R float
#endif
layout(local_size_x = 256) in;
layout(buffer_reference, std430) buffer Buf { R v[]; };
layout(push_constant) uniform PC {
  Buf dst;
  uint iters;
  float x, y;
} pc;

void main() {
  R x = R(pc.x), y = R(pc.y);
  R acc[16];
  [[unroll]] for (uint i = 0u; i < 16u; ++i) acc[i] = R(gl_LocalInvocationID.x + i);
  for (uint it = 0u; it < pc.iters; ++it)
    [[unroll]] for (uint r = 0u; r < 4u; ++r)
      [[unroll]] for (uint i = 0u; i < 16u; ++i) acc[i] = fma(acc[i], x, y);
  R s = R(0);
  [[unroll]] for (uint i = 0u; i < 16u; ++i) s += acc[i];
  pc.dst.v[gl_GlobalInvocationID.x] = s;
}
