#version 460
#extension GL_GOOGLE_include_directive : require
#include "types.glsl"
// reduce.comp - out[o] = OP over the reduced axes of in, for type T (T_ID),
// accumulated in its compute type TC. With O_ID (a 64-bit integer type of
// T's signedness, T an 8-, 16- or 32-bit integer; sum and product only)
// the result has type O and accumulates in 64 bits, each element widened
// as it is read: Nx's sums of narrow integers without a converted copy.
// The arena holds kept_shape[rk], kept_strides[rk], red_shape[rr],
// red_strides[rr], in_off (elements). OP: 0 sum, 1 product, 2 max, 3 min.
// VARIANT 0: one thread per output (short reductions, or reductions whose
//            outputs are contiguous: neighbouring threads read neighbouring
//            elements).
// VARIANT 1: one workgroup per output, tree reduction in shared memory
//            (the workgroup size must be a power of two).
// Split reductions, for too few outputs to fill the device: the reduced
// elements are cut into nsplit chunks of kchunk; partial results (RC)
// go to part[s * n_out + o], then a second dispatch combines them in
// chunk order (so results do not depend on scheduling):
// VARIANT 2: as 0, chunk s = gl_WorkGroupID.y.
// VARIANT 3: as 1, chunk s = gl_WorkGroupID.y.
// VARIANT 4: one thread per output combines its nsplit partials.
// VARIANT 5: one workgroup per output combines its nsplit partials (tree
//            order; for few outputs with many chunks).
// flags bit 0 (VARIANTS 1 and 3, one reduced axis of stride 1): every
// output's run, and every chunk of it (kchunk a multiple of 4), starts
// 4-aligned; threads read 4 elements at a time.
// flags bit 1 (VARIANTS 0 and 2, results contiguous along the last kept
// axis, whose extent is a multiple of 4; the other strides and the offset
// multiples of 4): a thread reduces 4 neighbouring results, reading 4
// elements at a time (results 4q .. 4q + 3 for q < n_out / 4).
// flags bit 2 (the same for 16-bit types, with 8 and 16-byte alignment):
// a thread reduces 8 neighbouring results, reading 16 bytes at a time.
#include "common.glsl"

// RC: the accumulator (and partials') type; R: the result's storage type.
#if defined(O_ID)
#define RC OC
#define RC4 OC4
#define R O
#define R_ALIGN O_ALIGN
#define A_LD(v) RC(T_LD(v))
#define A_LD4(v) RC4(TC4(v))
#define R_ST(c) O(c)
#else
#define RC TC
#define RC4 TC4
#define R T
#define R_ALIGN T_ALIGN
#define A_LD(v) T_LD(v)
#define A_LD4(v) T_LD4(v)
#define R_ST(c) T_ST(c)
#endif
// The 4-wide and 16-byte paths (flags bits 0-2): types with 4-vectors, and
// bf16, whose bits T_LD4 reads (types.glsl).
#if T_VEC || defined(T_BF16)
#define RED_VEC 1
#else
#define RED_VEC 0
#endif

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT { T v[]; };
layout(buffer_reference, std430, buffer_reference_align = R_ALIGN) buffer BufR { R v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufRC { RC v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4 * T_ALIGN) readonly buffer BufT4 { T4 v[]; };
#if RED_VEC && T_BITS == 16
// 8 elements of a 16-bit type, read at once (flags bit 2).
struct T16 { T4 q[2]; };
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer BufT16 { T16 v[]; };
#endif

layout(push_constant, std430) uniform PC {
  BufT a;
  BufR c;
  ArgsRef args;
  uint n_out;
  uint k;
  uint rank_kept;
  uint rank_red;
  BufRC part;
  uint kchunk;
  uint nsplit;
  uint flags;
} pc;

#include "reduce_ops.glsl"

shared RC s_acc[gl_WorkGroupSize.x];

#include "reduce_axes.glsl"

#if RED_VEC
RC4 combine4(RC4 a, RC4 x) {
  return RC4(combine(a.x, x.x), combine(a.y, x.y), combine(a.z, x.z), combine(a.w, x.w));
}
#endif

void main() {
  uint nargs = VARIANT >= 4u ? 0u : 2u * pc.rank_kept + 2u * pc.rank_red + 1u;
  for (uint j = gl_LocalInvocationID.x; j < nargs; j += gl_WorkGroupSize.x)
    s_args[j] = pc.args.d[j];  // (the combining pass has no arguments)
  barrier();
  uint split = (VARIANT == 2u || VARIANT == 3u) ? gl_WorkGroupID.y : 0u;
  uint k0 = 0u, k1 = pc.k;
  if (VARIANT == 2u || VARIANT == 3u) {
    k0 = split * pc.kchunk;
    k1 = min(pc.k, k0 + pc.kchunk);
  }
#if RED_VEC && T_BITS == 16
  if ((VARIANT == 0u || VARIANT == 2u) && (pc.flags & 4u) != 0u) {
    BufT16 a16 = BufT16(pc.a);
    uint st = s_args[2u * pc.rank_kept + 1u];
    for (uint q = nxv_gid(); q < pc.n_out / 8u; q += nxv_nthreads()) {
      uint base = kept_offset(8u * q);
      RC4 lo = RC4(identity()), hi = RC4(identity());
      uint k = k0;
      if (pc.rank_red == 1u) {  // 4 rows in flight, combined in order
        for (; k + 4u <= k1; k += 4u) {
          uint e = (base + k * st) / 8u, s8 = st / 8u;
          RC4 x0 = A_LD4(a16.v[e].q[0]), y0 = A_LD4(a16.v[e].q[1]);
          RC4 x1 = A_LD4(a16.v[e + s8].q[0]), y1 = A_LD4(a16.v[e + s8].q[1]);
          RC4 x2 = A_LD4(a16.v[e + 2u * s8].q[0]), y2 = A_LD4(a16.v[e + 2u * s8].q[1]);
          RC4 x3 = A_LD4(a16.v[e + 3u * s8].q[0]), y3 = A_LD4(a16.v[e + 3u * s8].q[1]);
          lo = combine4(combine4(combine4(combine4(lo, x0), x1), x2), x3);
          hi = combine4(combine4(combine4(combine4(hi, y0), y1), y2), y3);
        }
      }
      for (; k < k1; ++k) {
        uint e = (base + (pc.rank_red == 1u ? k * st : red_offset(k))) / 8u;
        lo = combine4(lo, A_LD4(a16.v[e].q[0]));
        hi = combine4(hi, A_LD4(a16.v[e].q[1]));
      }
      for (uint j = 0u; j < 4u; ++j) {
        if (VARIANT == 0u) {
          pc.c.v[8u * q + j] = R_ST(lo[j]);
          pc.c.v[8u * q + 4u + j] = R_ST(hi[j]);
        } else {
          pc.part.v[split * pc.n_out + 8u * q + j] = lo[j];
          pc.part.v[split * pc.n_out + 8u * q + 4u + j] = hi[j];
        }
      }
    }
    return;
  }
#endif
#if RED_VEC
  if ((VARIANT == 0u || VARIANT == 2u) && (pc.flags & 2u) != 0u) {
    BufT4 a4 = BufT4(pc.a);
    uint st = s_args[2u * pc.rank_kept + 1u];
    for (uint q = nxv_gid(); q < pc.n_out / 4u; q += nxv_nthreads()) {
      uint base = kept_offset(4u * q);
      RC4 acc = RC4(identity());
      uint k = k0;
      if (pc.rank_red == 1u) {  // 4 rows in flight, combined in order
        for (; k + 4u <= k1; k += 4u) {
          uint e = base + k * st;
          RC4 x0 = A_LD4(a4.v[e / 4u]), x1 = A_LD4(a4.v[(e + st) / 4u]);
          RC4 x2 = A_LD4(a4.v[(e + 2u * st) / 4u]), x3 = A_LD4(a4.v[(e + 3u * st) / 4u]);
          acc = combine4(combine4(combine4(combine4(acc, x0), x1), x2), x3);
        }
      }
      for (; k < k1; ++k) {
        uint e = base + (pc.rank_red == 1u ? k * st : red_offset(k));
        acc = combine4(acc, A_LD4(a4.v[e / 4u]));
      }
      for (uint j = 0u; j < 4u; ++j) {
        if (VARIANT == 0u) pc.c.v[4u * q + j] = R_ST(acc[j]);
        else pc.part.v[split * pc.n_out + 4u * q + j] = acc[j];
      }
    }
    return;
  }
#endif
  if (VARIANT == 0u || VARIANT == 2u) {
    for (uint o = nxv_gid(); o < pc.n_out; o += nxv_nthreads()) {
      uint base = kept_offset(o);
      RC acc = identity();
      if (pc.rank_red == 1u) {  // one reduced axis: no index arithmetic
        uint st = s_args[2u * pc.rank_kept + 1u];
        for (uint k = k0; k < k1; ++k) acc = combine(acc, A_LD(pc.a.v[base + k * st]));
      } else {
        for (uint k = k0; k < k1; ++k) acc = combine(acc, A_LD(pc.a.v[base + red_offset(k)]));
      }
      if (VARIANT == 0u) pc.c.v[o] = R_ST(acc);
      else pc.part.v[split * pc.n_out + o] = acc;
    }
  } else if (VARIANT == 1u || VARIANT == 3u || VARIANT == 5u) {
    uint lid = gl_LocalInvocationID.x;
    for (uint o = gl_WorkGroupID.x; o < pc.n_out; o += gl_NumWorkGroups.x) {
      uint base = VARIANT == 5u ? 0u : kept_offset(o);
      RC acc = identity();
      if (VARIANT == 5u) {
        for (uint s = lid; s < pc.nsplit; s += gl_WorkGroupSize.x)
          acc = combine(acc, pc.part.v[s * pc.n_out + o]);
      } else if (pc.rank_red == 1u) {
        uint st = s_args[2u * pc.rank_kept + 1u];
        uint kv = k0;
#if RED_VEC
        if ((pc.flags & 1u) != 0u) {  // st == 1, base and k0 4-aligned
          kv = k0 + ((k1 - k0) & ~3u);
          BufT4 a4 = BufT4(pc.a);
          for (uint k = k0 + 4u * lid; k < kv; k += 4u * gl_WorkGroupSize.x) {
            RC4 x = A_LD4(a4.v[(base + k) / 4u]);
            acc = combine(combine(combine(combine(acc, x.x), x.y), x.z), x.w);
          }
        }
#endif
        for (uint k = kv + lid; k < k1; k += gl_WorkGroupSize.x)
          acc = combine(acc, A_LD(pc.a.v[base + k * st]));
      } else {
        for (uint k = k0 + lid; k < k1; k += gl_WorkGroupSize.x)
          acc = combine(acc, A_LD(pc.a.v[base + red_offset(k)]));
      }
      s_acc[lid] = acc;
      barrier();
      for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1) {
        if (lid < s) s_acc[lid] = combine(s_acc[lid], s_acc[lid + s]);
        barrier();
      }
      if (lid == 0u) {
        if (VARIANT != 3u) pc.c.v[o] = R_ST(s_acc[0]);
        else pc.part.v[split * pc.n_out + o] = s_acc[0];
      }
      barrier();
    }
  } else {
    for (uint o = nxv_gid(); o < pc.n_out; o += nxv_nthreads()) {
      RC acc = identity();
      for (uint s = 0u; s < pc.nsplit; ++s) acc = combine(acc, pc.part.v[s * pc.n_out + o]);
      pc.c.v[o] = R_ST(acc);
    }
  }
}
