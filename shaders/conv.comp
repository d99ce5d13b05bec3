#version 460
#extension GL_GOOGLE_include_directive : require
#include "types.glsl"
// conv.comp - direct convolution of element type T (T_ID), accumulated in
// the compute type TC (f16 and bf16 in f32, narrow integers in 32 bits and
// wrapped on store, complex types as complex products).
// VARIANT 0: one thread per output element, channels and taps in order.
// VARIANT 1: one workgroup per output element (few outputs, long sums, as
//            in a kernel gradient): its threads split the taps and, when
//            there are fewer taps than threads, the channels; then a tree
//            reduction in shared memory (the workgroup size must be a power
//            of two).
// VARIANT 2: VARIANT 1 over a chunk of the channels: workgroup (x, y) sums
//            channels y * c_chunk .. + c_chunk of output x (and of x +
//            gl_NumWorkGroups.x, ...) into part[y * n_out + x], in the
//            compute type. For very few outputs, whose workgroups alone
//            would leave most of the device idle.
// VARIANT 3: out[o] = the n_split partials of o added in order (one
//            thread per output).
// VARIANT 4: two spatial axes, no groups: one thread per (image, block of
//            CONV_OCB output channels, output position), each input tap
//            read once for the block's channels (many outputs, short sums:
//            a thread per output would re-read every tap per channel and
//            leave each thread a chain of dependent loads).
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
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#if T_KIND == KIND_COMPLEX
#include "complex.glsl"
#define MUL(x, y) c_mul_plain(x, y)
#else
#define MUL(x, y) ((x) * (y))
#endif

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT { T v[]; };
#if T_KIND == KIND_COMPLEX
#define TC_ALIGN T_ALIGN
#elif TC_BITS == 64
#define TC_ALIGN 8
#else
#define TC_ALIGN 4
#endif
layout(buffer_reference, std430, buffer_reference_align = TC_ALIGN) buffer BufTC { TC v[]; };

layout(push_constant, std430) uniform PC {
  BufT a;        // input
  BufT k;        // kernel
  BufT c;        // output
  ArgsRef args;
  BufTC part;    // VARIANT 2 and 3: n_split x n_out partial sums
  uint n_out;    // output elements
  uint srank;    // spatial rank
  uint k_count;  // kernel spatial elements (taps per channel)
  uint c_chunk;  // VARIANT 2: channels per chunk
  uint n_split;  // VARIANT 2 and 3: chunks
  uint pad;
} pc;

#define HDR 8
#define AXW 8
#define CONV_OCB 8u  // VARIANT 4's output channels per thread (ops.c mirrors it)
shared int s_args[HDR + AXW * NXV_MAX_RANK];
shared TC s_acc[gl_WorkGroupSize.x];

// Input index i along spatial axis ax (its arena block) of padded, dilated
// position p; false for padding and the holes of input dilation.
bool axis_pos(uint ax, int p, out int i) {
  int dil = s_args[ax + 5u];
  i = dil == 1 ? p : p / dil;
  return p >= 0 && i * dil == p && i < s_args[ax + 1u];
}

// Offset within the input's spatial block of the taps kr (a flat index
// over the spatial axes below S) for the output whose tap-0 positions are
// base; false when one reads padding or a hole of the input dilation.
bool taps_offset(uint S, int base[NXV_MAX_RANK], uint kr, out uint off) {
  off = 0u;
  bool inside = true;
  for (int d = int(S) - 1; d >= 0; --d) {
    uint ax = HDR + AXW * uint(d);
    uint kd = uint(s_args[ax + 2u]);
    uint q = kr / kd;
    int i;
    inside = axis_pos(ax, base[d] + int(kr - q * kd) * s_args[ax + 6u], i) && inside;
    kr = q;
    off += uint(i) * uint(s_args[ax + 7u]);
  }
  return inside;
}

void main() {
  if (VARIANT == 3u) {
    for (uint o = nxv_gid(); o < pc.n_out; o += nxv_nthreads()) {
      TC acc = TC(0);
      for (uint g = 0u; g < pc.n_split; ++g) acc = acc + pc.part.v[g * pc.n_out + o];
      pc.c.v[o] = T_ST(acc);
    }
    return;
  }
  uint S = pc.srank;
  for (uint j = gl_LocalInvocationID.x; j < HDR + AXW * S; j += gl_WorkGroupSize.x)
    s_args[j] = int(pc.args.d[j]);
  barrier();
  uint O = uint(s_args[0]), Ck = uint(s_args[1]), Cin = uint(s_args[2]);
  uint group_out = uint(s_args[3]), batch_step = uint(s_args[4]);
  uint chan_step = uint(s_args[5]), in_sp = uint(s_args[6]), out_sp = uint(s_args[7]);
  uint K = pc.k_count;
  if (VARIANT == 4u) {
    // Items (n, ob, sp) in that order; output channels ob * CONV_OCB + j,
    // j < CONV_OCB, those past O clamped for loads and not stored.
    uint ax1 = HDR + AXW;
    uint ow = uint(s_args[ax1]), kh = uint(s_args[HDR + 2u]), kw2 = uint(s_args[ax1 + 2u]);
    uint row_st = uint(s_args[HDR + 7u]);
    int st0 = s_args[HDR + 3u], st1 = s_args[ax1 + 3u];
    int kd0 = s_args[HDR + 6u], kd1 = s_args[ax1 + 6u];
    uint nb = (O + CONV_OCB - 1u) / CONV_OCB;
    uint items = pc.n_out / O * nb;
    for (uint it = nxv_gid(); it < items; it += nxv_nthreads()) {
      uint rest = it / out_sp;
      uint sp = it - rest * out_sp;
      uint n = rest / nb;
      uint oc0 = (rest - n * nb) * CONV_OCB;
      uint y = sp / ow, x = sp - y * ow;
      uint in_base = n * Cin * in_sp;
      uint kb[CONV_OCB];
      TC acc4[CONV_OCB];
      [[unroll]] for (uint j = 0u; j < CONV_OCB; ++j) {
        kb[j] = min(oc0 + j, O - 1u) * Ck * K;
        acc4[j] = TC(0);
      }
      int p0 = int(y) * st0 - s_args[HDR + 4u];
      int p1 = int(x) * st1 - s_args[ax1 + 4u];
      for (uint a = 0u; a < kh; ++a, p0 += kd0) {
        int i0;
        if (!axis_pos(HDR, p0, i0)) continue;
        int q1 = p1;
        for (uint b = 0u; b < kw2; ++b, q1 += kd1) {
          int i1;
          if (!axis_pos(ax1, q1, i1)) continue;
          uint ai = in_base + uint(i0) * row_st + uint(i1), ki = a * kw2 + b;
          for (uint c = 0u; c < Ck; ++c) {
            TC v = T_LD(pc.a.v[ai]);
            [[unroll]] for (uint j = 0u; j < CONV_OCB; ++j)
              acc4[j] += MUL(v, T_LD(pc.k.v[kb[j] + ki]));
            ai += in_sp;
            ki += K;
          }
        }
      }
      uint obase = (n * O + oc0) * out_sp + sp;
      [[unroll]] for (uint j = 0u; j < CONV_OCB; ++j)
        if (oc0 + j < O) pc.c.v[obase + j * out_sp] = T_ST(acc4[j]);
    }
    return;
  }
  // The innermost spatial axis (none: a single tap): its taps, kernel
  // dilation and arena block.
  uint axl = HDR + AXW * (S > 0u ? S - 1u : 0u);
  uint kw = S > 0u ? uint(s_args[axl + 2u]) : 1u;
  int kdil = S > 0u ? s_args[axl + 6u] : 0;
  bool per_group = VARIANT == 1u || VARIANT == 2u;
  // VARIANT 2: this workgroup's channels c_lo .. c_hi - 1.
  uint c_lo = VARIANT == 2u ? gl_WorkGroupID.y * pc.c_chunk : 0u;
  uint c_hi = VARIANT == 2u ? min(Ck, c_lo + pc.c_chunk) : Ck;
  uint lid = gl_LocalInvocationID.x;
  // VARIANT 1 lanes: n_tl taps side by side, n_cl channel lanes each.
  uint n_tl = clamp(K, 1u, gl_WorkGroupSize.x), n_cl = gl_WorkGroupSize.x / n_tl;
  uint tl = lid % n_tl, cl = lid / n_tl;
  uint o0 = per_group ? gl_WorkGroupID.x : nxv_gid();
  uint ostep = per_group ? gl_NumWorkGroups.x : nxv_nthreads();
  for (uint o = o0; o < pc.n_out; o += ostep) {
    uint rest = o / out_sp;
    uint sp = o - rest * out_sp;
    uint n = rest / O;
    uint oc = rest - n * O;
    uint g = oc / group_out;
    uint in_base = ((n + g * batch_step) * Cin + g * chan_step) * in_sp;
    uint k_base = oc * Ck * K;
    if (!per_group && S == 2u) {
      // Two spatial axes (images): the same walk without index arrays.
      uint ax1 = HDR + AXW;
      uint ow = uint(s_args[ax1]), kh = uint(s_args[HDR + 2u]);
      uint row_st = uint(s_args[HDR + 7u]);
      uint y = sp / ow, x = sp - y * ow;
      int p0 = int(y) * s_args[HDR + 3u] - s_args[HDR + 4u];
      int p1 = int(x) * s_args[ax1 + 3u] - s_args[ax1 + 4u];
      int kdil0 = s_args[HDR + 6u];
      TC acc2 = TC(0);
      for (uint a = 0u; a < kh; ++a, p0 += kdil0) {
        int i0;
        if (!axis_pos(HDR, p0, i0)) continue;
        int q1 = p1;
        for (uint b = 0u; b < kw; ++b, q1 += kdil) {
          int i1;
          if (!axis_pos(ax1, q1, i1)) continue;
          uint ai = in_base + uint(i0) * row_st + uint(i1), ki = k_base + a * kw + b;
          for (uint c = 0u; c < Ck; ++c) {
            acc2 += MUL(T_LD(pc.a.v[ai]), T_LD(pc.k.v[ki]));
            ai += in_sp;
            ki += K;
          }
        }
      }
      pc.c.v[o] = T_ST(acc2);
      continue;
    }
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
    if (!per_group) {
      // Rows of taps along the outer axes, then the innermost axis's taps
      // one after another (no division per tap).
      uint outer = S > 0u ? S - 1u : 0u;
      uint rows = kw == 0u ? 0u : K / kw;
      for (uint kr = 0u; kr < rows; ++kr) {
        uint off;
        if (!taps_offset(outer, base, kr, off)) continue;
        int p = S > 0u ? base[S - 1u] : 0;
        for (uint b = 0u; b < kw; ++b, p += kdil) {
          int i = 0;
          if (S > 0u && !axis_pos(axl, p, i)) continue;
          uint ai = in_base + off + uint(i), ki = k_base + kr * kw + b;
          for (uint c = 0u; c < Ck; ++c) {
            acc += MUL(T_LD(pc.a.v[ai]), T_LD(pc.k.v[ki]));
            ai += in_sp;
            ki += K;
          }
        }
      }
      pc.c.v[o] = T_ST(acc);
      continue;
    }
    // Thread (tl, cl) takes taps tl, tl + n_tl, ... and for each the
    // channels c_lo + cl, c_lo + cl + n_cl, ...; then a tree reduction.
    if (cl < n_cl) {
      for (uint kk = tl; kk < K; kk += n_tl) {
        uint off;
        if (!taps_offset(S, base, kk, off)) continue;
        uint c = c_lo + cl;
        uint ai = in_base + off + c * in_sp, ki = k_base + c * K + kk;
        for (; c < c_hi; c += n_cl) {
          acc += MUL(T_LD(pc.a.v[ai]), T_LD(pc.k.v[ki]));
          ai += n_cl * in_sp;
          ki += n_cl * K;
        }
      }
    }
    s_acc[lid] = acc;
    barrier();
    for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1) {
      if (lid < s) s_acc[lid] = s_acc[lid] + s_acc[lid + s];
      barrier();
    }
    if (lid == 0u) {
      if (VARIANT == 2u) pc.part.v[gl_WorkGroupID.y * pc.n_out + o] = s_acc[0];
      else pc.c.v[o] = T_ST(s_acc[0]);
    }
    barrier();
  }
}
