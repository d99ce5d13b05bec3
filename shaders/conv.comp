#version 460
#extension GL_GOOGLE_include_directive : require
#include "types.glsl"
// conv.comp - direct convolution of element type T (T_ID), accumulated in
// the compute type TC (f16 and bf16 in f32, narrow integers in 32 bits and
// wrapped on store, complex types as complex products), one thread per
// output element.
//
// Layouts are dense and canonical: input [N_in, C_in, in spatial...],
// kernel [O, Ck, kernel spatial...], output [N_out, O, out spatial...].
// Output channel o belongs to group g = o / group_out (group_out output
// channels per group); its input is batch n + g * batch_step and channels
// g * chan_step .. + Ck (batch groups set batch_step = N_out, feature
// groups chan_step = Ck; without groups g is 0). Along spatial axis d the
// kernel tap k of output coordinate x reads padded, dilated input position
//   p = x * stride[d] + k * k_dil[d] - pad_lo[d]
// which holds input element p / in_dil[d] when p >= 0, p is a multiple of
// in_dil[d] and p / in_dil[d] < in_dim[d]; other positions (padding, the
// holes of input dilation) are zeros and skipped.
//
// The arena holds a header of 8 words: O, Ck, C_in, group_out, batch_step,
// chan_step, in_sp (input spatial elements), out_sp (output spatial
// elements); then per spatial axis d: out_dim, in_dim, k_dim, stride,
// pad_lo (signed), in_dil, k_dil, in_stride (the axis's row-major stride
// within the input's spatial block): 8 words each.
#include "common.glsl"
#if T_KIND == KIND_COMPLEX
#include "complex.glsl"
#define MUL(x, y) c_mul(x, y)
#else
#define MUL(x, y) ((x) * (y))
#endif

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT { T v[]; };

layout(push_constant, std430) uniform PC {
  BufT a;        // input
  BufT k;        // kernel
  BufT c;        // output
  ArgsRef args;
  uint n_out;    // output elements
  uint srank;    // spatial rank
  uint k_count;  // kernel spatial elements (taps per channel)
  uint pad;
} pc;

#define HDR 8
#define AXW 8
shared int s_args[HDR + AXW * NXV_MAX_RANK];

void main() {
  uint S = pc.srank;
  for (uint j = gl_LocalInvocationID.x; j < HDR + AXW * S; j += gl_WorkGroupSize.x)
    s_args[j] = int(pc.args.d[j]);
  barrier();
  uint O = uint(s_args[0]), Ck = uint(s_args[1]), Cin = uint(s_args[2]);
  uint group_out = uint(s_args[3]), batch_step = uint(s_args[4]);
  uint chan_step = uint(s_args[5]), in_sp = uint(s_args[6]), out_sp = uint(s_args[7]);
  uint K = pc.k_count;
  for (uint o = nxv_gid(); o < pc.n_out; o += nxv_nthreads()) {
    uint rest = o / out_sp;
    uint sp = o - rest * out_sp;
    uint n = rest / O;
    uint oc = rest - n * O;
    uint g = oc / group_out;
    uint in_base = ((n + g * batch_step) * Cin + g * chan_step) * in_sp;
    uint k_base = oc * Ck * K;
    int base[NXV_MAX_RANK];
    uint rem = sp;
    for (int d = int(S) - 1; d >= 0; --d) {
      uint ax = HDR + AXW * uint(d);
      uint dim = uint(s_args[ax]);
      uint q = rem / dim;
      base[d] = int(rem - q * dim) * s_args[ax + 3u] - s_args[ax + 4u];
      rem = q;
    }
    TC acc = TC(0);
    for (uint kk = 0u; kk < K; ++kk) {
      uint kr = kk;
      uint off = 0u;
      bool inside = true;
      for (int d = int(S) - 1; d >= 0; --d) {
        uint ax = HDR + AXW * uint(d);
        uint kd = uint(s_args[ax + 2u]);
        uint q = kr / kd;
        int p = base[d] + int(kr - q * kd) * s_args[ax + 6u];
        kr = q;
        int dil = s_args[ax + 5u];
        int i = p / dil;
        inside = inside && p >= 0 && i * dil == p && i < s_args[ax + 1u];
        off += uint(i) * uint(s_args[ax + 7u]);
      }
      if (!inside) continue;
      uint ai = in_base + off, ki = k_base + kk;
      for (uint c = 0u; c < Ck; ++c) {
        acc += MUL(T_LD(pc.a.v[ai]), T_LD(pc.k.v[ki]));
        ai += in_sp;
        ki += K;
      }
    }
    pc.c.v[o] = T_ST(acc);
  }
}
