#version 460
#extension GL_GOOGLE_include_directive : require
#include "types.glsl"
// sort.comp - stable sort of each row of a dense rows x len tensor of type
// T (T_ID), as a bitonic network over rows x p (p = len rounded up to a
// power of two) (key, index) pairs in scratch buffers; the index breaks
// ties, which makes it stable, and padding (index -1) sorts last.
// Order (Nx.BinaryBackend's): ascending -inf < ... < +inf < NaN;
// descending NaN, +inf, ..., -inf; equal keys keep their order either way.
// VARIANT 0: load the pairs; VARIANT 1: one compare-exchange step (k, j);
// VARIANT 2: write the sorted values (flags bit1) and/or the indices as
// s64 (flags bit2). flags bit0: descending.
#include "common.glsl"

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT { T v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer BufI { int v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer BufL { int64_t v[]; };

layout(push_constant, std430) uniform PC {
  BufT a;      // the input rows
  BufT keys;   // rows x p scratch keys
  BufI idx;    // rows x p scratch indices
  BufT vals;   // sorted values out (dense rows x len)
  BufL inds;   // sorted indices out (dense rows x len)
  uint rows;
  uint len;
  uint p;
  uint k;
  uint j;
  uint flags;
} pc;

// x sorts before y (both real elements).
bool before(TC x, int ix, TC y, int iy, bool desc) {
#if T_KIND == KIND_FLOAT
  bool nx = isnan(x), ny = isnan(y);
  if (nx || ny) {
    if (nx && ny) return ix < iy;
    return desc ? nx : ny;  // NaN is the largest
  }
#endif
  if (x == y) return ix < iy;
  return desc ? x > y : x < y;
}

void main() {
  bool desc = (pc.flags & 1u) != 0u;
  if (VARIANT == 0u) {
    uint total = pc.rows * pc.p;
    for (uint t = nxv_gid(); t < total; t += nxv_nthreads()) {
      uint r = t / pc.p, i = t - r * pc.p;
      if (i < pc.len) {
        pc.keys.v[t] = pc.a.v[r * pc.len + i];
        pc.idx.v[t] = int(i);
      } else {
        pc.idx.v[t] = -1;
      }
    }
  } else if (VARIANT == 1u) {
    uint half_p = pc.p / 2u, total = pc.rows * half_p;
    for (uint t = nxv_gid(); t < total; t += nxv_nthreads()) {
      uint r = t / half_p, w = t - r * half_p;
      uint i = 2u * pc.j * (w / pc.j) + (w % pc.j);
      uint a = r * pc.p + i, b = a + pc.j;
      bool up = (i & pc.k) == 0u;
      int ia = pc.idx.v[a], ib = pc.idx.v[b];
      // b before a (so they swap in an ascending block)?
      bool b_first;
      if (ia < 0) b_first = ib >= 0;
      else if (ib < 0) b_first = false;
      else b_first = before(T_LD(pc.keys.v[b]), ib, T_LD(pc.keys.v[a]), ia, desc);
      if (b_first == up) {
        // Through the compute type: narrow types have no local variables;
        // the round trip is exact.
        TC ka = T_LD(pc.keys.v[a]);
        pc.keys.v[a] = pc.keys.v[b];
        pc.keys.v[b] = T_ST(ka);
        pc.idx.v[a] = ib;
        pc.idx.v[b] = ia;
      }
    }
  } else {
    uint total = pc.rows * pc.len;
    for (uint t = nxv_gid(); t < total; t += nxv_nthreads()) {
      uint r = t / pc.len, i = t - r * pc.len;
      uint s = r * pc.p + i;
      if ((pc.flags & 2u) != 0u) pc.vals.v[t] = pc.keys.v[s];
      if ((pc.flags & 4u) != 0u) pc.inds.v[t] = int64_t(pc.idx.v[s]);
    }
  }
}
