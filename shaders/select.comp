#version 460
#extension GL_GOOGLE_include_directive : require
#define NEED_8BIT 1
#include "types.glsl"
// select.comp - c[i] = p[i] != 0 ? a[i] : b[i]; p is u8, a, b and c are T
// (T_ID; only moved, never computed).
// VARIANT 0: contiguous (flags bit0/1/2: p/a/b is a broadcast scalar);
// VARIANT 1: strided, the arena holds shape[rank], p_strides[rank],
// a_strides[rank], b_strides[rank], p_off, a_off, b_off.
#include "common.glsl"

layout(buffer_reference, std430, buffer_reference_align = 1) buffer BufU8 { uint8_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT { T v[]; };

layout(push_constant, std430) uniform PC {
  BufU8 p;
  BufT a;
  BufT c;
  ArgsRef args;
  uint n;
  uint rank;
  uint flags;
  uint pad;
  BufT b;
} pc;

shared uint s_args[4 * NXV_MAX_RANK + 3];

void main() {
  uint gid = nxv_gid();
  uint stride = nxv_nthreads();
  if (VARIANT == 0) {
    bool ps = (pc.flags & 1u) != 0u, as = (pc.flags & 2u) != 0u,
         bs = (pc.flags & 4u) != 0u;
    for (uint i = gid; i < pc.n; i += stride) {
      bool take = uint(pc.p.v[ps ? 0u : i]) != 0u;
      // Branches, not a ternary: 8- and 16-bit storage types may only be
      // loaded and stored, without arithmetic support.
      if (take) pc.c.v[i] = pc.a.v[as ? 0u : i];
      else pc.c.v[i] = pc.b.v[bs ? 0u : i];
    }
  } else {
    uint rank = pc.rank;
    uint nargs = 4u * rank + 3u;
    for (uint j = gl_LocalInvocationID.x; j < nargs; j += gl_WorkGroupSize.x)
      s_args[j] = pc.args.d[j];
    barrier();
    for (uint i = gid; i < pc.n; i += stride) {
      uint ip = s_args[4u * rank], ia = s_args[4u * rank + 1u],
           ib = s_args[4u * rank + 2u], rem = i;
      for (int d = int(rank) - 1; d >= 0; --d) {
        uint dim = s_args[d];
        uint q = rem / dim;
        uint r = rem - q * dim;
        rem = q;
        ip += r * s_args[rank + uint(d)];
        ia += r * s_args[2u * rank + uint(d)];
        ib += r * s_args[3u * rank + uint(d)];
      }
      if (uint(pc.p.v[ip]) != 0u) pc.c.v[i] = pc.a.v[ia];
      else pc.c.v[i] = pc.b.v[ib];
    }
  }
}
