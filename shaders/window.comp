#version 460
#extension GL_GOOGLE_include_directive : require
#include "types.glsl"
// window.comp - window reductions (OP 0 sum, 1 product, 2 max, 3 min) of a
// dense input of type T (T_ID), accumulated in TC. For each output
// coordinate x the window covers input coordinates
//   x[d] * stride[d] + w[d] * dilation[d] - pad_lo[d],  0 <= w[d] < win[d]
// and positions outside the input (padding) contribute the identity. The
// arena holds, per axis d: out_dims, in_dims, in_strides, win, stride,
// dilation, pad_lo (7 words each; pad_lo signed).
#include "common.glsl"

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT { T v[]; };

layout(push_constant, std430) uniform PC {
  BufT a;
  BufT c;
  ArgsRef args;
  uint n_out;
  uint win_count;
  uint rank;
  uint planes;   // nonzero: every axis but the last two is a plain batch
                 // axis (window 1, stride 1, no padding): the two-axis walk
} pc;

#include "reduce_ops.glsl"

shared int s_args[7 * NXV_MAX_RANK];

void main() {
  uint R = pc.rank;
  for (uint j = gl_LocalInvocationID.x; j < 7u * R; j += gl_WorkGroupSize.x)
    s_args[j] = int(pc.args.d[j]);
  barrier();
  if (pc.planes != 0u) {
    // Images: plane index, then rows and columns of the window in the
    // same row-major order as the general walk below.
    uint A = 7u * (R - 2u), B = 7u * (R - 1u);
    uint oh = uint(s_args[A]), ow = uint(s_args[B]);
    uint ih = uint(s_args[A + 1u]), iw = uint(s_args[B + 1u]);
    uint wh = uint(s_args[A + 3u]), ww = uint(s_args[B + 3u]);
    int dil0 = s_args[A + 5u], dil1 = s_args[B + 5u];
    for (uint o = nxv_gid(); o < pc.n_out; o += nxv_nthreads()) {
      uint plane = o / (oh * ow), r = o - plane * (oh * ow);
      uint y = r / ow, x = r - y * ow;
      int c0 = int(y) * s_args[A + 4u] - s_args[A + 6u];
      int c1 = int(x) * s_args[B + 4u] - s_args[B + 6u];
      uint base = plane * ih * iw;
      TC acc = identity();
      for (uint i = 0u; i < wh; ++i, c0 += dil0) {
        if (c0 < 0 || c0 >= int(ih)) continue;
        int cc = c1;
        for (uint j = 0u; j < ww; ++j, cc += dil1)
          if (cc >= 0 && cc < int(iw)) acc = combine(acc, T_LD(pc.a.v[base + uint(c0) * iw + uint(cc)]));
      }
      pc.c.v[o] = T_ST(acc);
    }
    return;
  }
  for (uint o = nxv_gid(); o < pc.n_out; o += nxv_nthreads()) {
    int base[NXV_MAX_RANK];
    uint rem = o;
    for (int d = int(R) - 1; d >= 0; --d) {
      uint dim = uint(s_args[7 * d]);
      uint q = rem / dim;
      base[d] = int(rem - q * dim) * s_args[7 * d + 4] - s_args[7 * d + 6];
      rem = q;
    }
    TC acc = identity();
    for (uint w = 0u; w < pc.win_count; ++w) {
      uint wr = w;
      int off = 0;
      bool inside = true;
      for (int d = int(R) - 1; d >= 0; --d) {
        uint wd = uint(s_args[7 * d + 3]);
        uint q = wr / wd;
        int c = base[d] + int(wr - q * wd) * s_args[7 * d + 5];
        wr = q;
        inside = inside && c >= 0 && c < s_args[7 * d + 1];
        off += c * s_args[7 * d + 2];
      }
      if (inside) acc = combine(acc, T_LD(pc.a.v[uint(off)]));
    }
    pc.c.v[o] = T_ST(acc);
  }
}
