#version 460
#extension GL_GOOGLE_include_directive : require
#include "types.glsl"
// gather.comp - indexed reads and writes for element type T (T_ID).
//
// VARIANT 0 (gather): c[o] = a[src(o)] over a dense output of rank R. The
// arena holds, for each output axis d: dims[d], src_strides[d],
// idx_strides[d]; then per indexed source axis j < depth: axis_dims[j],
// axis_strides[j]; then a_off. For output coordinates x:
//   p   = sum_d x[d] * idx_strides[d]                (index tuple position)
//   src = a_off + sum_d x[d] * src_strides[d]
//             + sum_j clamp(idx[p + j], 0, axis_dims[j] - 1) * axis_strides[j]
// Out-of-range indices are clamped (as XLA does).
//
// VARIANT 1 (scatter into c; OP 0 put, OP 1 add): n = slice elements; one
// thread per slice position walks the updates in order, so updates of one
// destination are applied in sequence (the last put wins; adds accumulate
// in order) with no atomics: distinct slice positions never share a
// destination. The arena holds: slice rank R, slice dims[R], dst
// strides[R], then per indexed axis j: axis_dims[j], axis_strides[j].
// Update u of slice position s is upd[u * n + s]; updates whose index is
// out of range are skipped (as XLA does).
#include "common.glsl"

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT { T v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer BufI { int64_t v[]; };

layout(push_constant, std430) uniform PC {
  BufT a;       // gather: the source; scatter: the updates
  BufI idx;     // int64 index tuples
  BufT c;       // the output (gather) or the destination (scatter)
  ArgsRef args;
  uint n;       // gather: output elements; scatter: slice elements
  uint rank;
  uint depth;
  uint count;   // scatter: number of updates
} pc;

int sarg(uint i) { return int(pc.args.d[i]); }
uint uarg(uint i) { return pc.args.d[i]; }

void main() {
  uint R = pc.rank, D = pc.depth;
  if (VARIANT == 0u) {
    uint ax = 3u * R;
    uint a_off = uarg(ax + 2u * D);
    for (uint o = nxv_gid(); o < pc.n; o += nxv_nthreads()) {
      uint rem = o;
      int src = int(a_off), p = 0;
      for (int d = int(R) - 1; d >= 0; --d) {
        uint dim = uarg(3u * uint(d));
        uint q = rem / dim;
        int x = int(rem - q * dim);
        rem = q;
        src += x * sarg(3u * uint(d) + 1u);
        p += x * sarg(3u * uint(d) + 2u);
      }
      for (uint j = 0u; j < D; ++j) {
        int64_t dim = int64_t(uarg(ax + 2u * j));
        int64_t i = clamp(pc.idx.v[uint(p) + j], 0l, dim - 1l);
        src += int(i) * sarg(ax + 2u * j + 1u);
      }
      pc.c.v[o] = pc.a.v[uint(src)];
    }
  } else {
    uint ax = 1u + 2u * R;
    for (uint s = nxv_gid(); s < pc.n; s += nxv_nthreads()) {
      uint rem = s;
      int off = 0;
      for (int d = int(R) - 1; d >= 0; --d) {
        uint dim = uarg(1u + uint(d));
        uint q = rem / dim;
        off += int(rem - q * dim) * sarg(1u + R + uint(d));
        rem = q;
      }
      for (uint u = 0u; u < pc.count; ++u) {
        int dst = off;
        bool inside = true;
        for (uint j = 0u; j < D; ++j) {
          int64_t i = pc.idx.v[u * D + j];
          int64_t dim = int64_t(uarg(ax + 2u * j));
          inside = inside && i >= 0l && i < dim;
          dst += int(clamp(i, 0l, dim - 1l)) * sarg(ax + 2u * j + 1u);
        }
        if (!inside) continue;
        if (OP == 0u) {
          pc.c.v[uint(dst)] = pc.a.v[u * pc.n + s];
        } else {
          pc.c.v[uint(dst)] = T_ST(T_LD(pc.c.v[uint(dst)]) + T_LD(pc.a.v[u * pc.n + s]));
        }
      }
    }
  }
}
