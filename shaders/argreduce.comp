#version 460
#extension GL_GOOGLE_include_directive : require
#include "types.glsl"
// argreduce.comp - out[o] = the index (s64, row-major over the reduced
// axes) of the largest (OP 0, 2) or smallest (OP 1, 3) element of each
// output position, for input type T (T_ID). OP 0, 1 break ties towards the
// lowest index, OP 2, 3 towards the highest.
//
// NaN follows Nx.BinaryBackend's sequential scan: NaN never compares, so
// NaNs are skipped, except that a NaN first element is never displaced
// (the result is 0, or with ties towards the highest index, the last NaN,
// which equals it). That scan is computed associatively: the extreme of
// the non-NaN elements, the index of the last NaN and whether element 0 is
// NaN. Arena and variants as reduce.comp (VARIANT 0: a thread per output,
// VARIANT 1: a workgroup per output).
#include "common.glsl"

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT { T v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer BufI { int64_t v[]; };

layout(push_constant, std430) uniform PC {
  BufT a;
  BufI c;
  ArgsRef args;
  uint n_out;
  uint k;
  uint rank_kept;
  uint rank_red;
} pc;

const bool IS_MAX = (OP & 1u) == 0u;
const bool HIGH = OP >= 2u;

// A partial result: the best non-NaN value and its index (-1: none), and
// the index of the last NaN seen (-1: none).
struct Acc {
  TC v;
  int i;
  int nan_i;
};

bool is_nan_tc(TC x) {
#if T_KIND == KIND_FLOAT
  return isnan(x);
#else
  return false;
#endif
}

// a covers lower indices than b when the scan order matters (ties).
Acc combine(Acc a, Acc b) {
  Acc r;
  r.nan_i = max(a.nan_i, b.nan_i);
  if (a.i < 0) { r.v = b.v; r.i = b.i; return r; }
  if (b.i < 0) { r.v = a.v; r.i = a.i; return r; }
  bool take_b;
  if (a.v == b.v) take_b = HIGH ? b.i > a.i : b.i < a.i;
  else take_b = IS_MAX ? b.v > a.v : b.v < a.v;
  r.v = take_b ? b.v : a.v;
  r.i = take_b ? b.i : a.i;
  return r;
}

Acc ingest(Acc a, TC x, int k) {
  Acc e;
  e.v = x;
  e.i = is_nan_tc(x) ? -1 : k;
  e.nan_i = is_nan_tc(x) ? k : -1;
  return combine(a, e);
}

shared TC s_v[gl_WorkGroupSize.x];
shared int s_i[gl_WorkGroupSize.x];
shared int s_n[gl_WorkGroupSize.x];

#include "reduce_axes.glsl"

int64_t result(Acc a, uint base) {
  if (pc.k == 0u) return 0l;
  if (is_nan_tc(T_LD(pc.a.v[base]))) return HIGH ? int64_t(a.nan_i) : 0l;
  return int64_t(max(a.i, 0));
}

Acc empty_acc() {
  Acc a;
  a.v = TC(0);
  a.i = -1;
  a.nan_i = -1;
  return a;
}

void main() {
  uint nargs = 2u * pc.rank_kept + 2u * pc.rank_red + 1u;
  for (uint j = gl_LocalInvocationID.x; j < nargs; j += gl_WorkGroupSize.x)
    s_args[j] = pc.args.d[j];
  barrier();
  if (VARIANT == 0) {
    for (uint o = nxv_gid(); o < pc.n_out; o += nxv_nthreads()) {
      uint base = kept_offset(o);
      Acc acc = empty_acc();
      for (uint k = 0u; k < pc.k; ++k)
        acc = ingest(acc, T_LD(pc.a.v[base + red_offset(k)]), int(k));
      pc.c.v[o] = result(acc, base);
    }
  } else {
    uint lid = gl_LocalInvocationID.x;
    uint wg = gl_WorkGroupSize.x;
    for (uint o = gl_WorkGroupID.x; o < pc.n_out; o += gl_NumWorkGroups.x) {
      uint base = kept_offset(o);
      // Each thread scans a contiguous chunk, so partials stay in index
      // order for the tree below.
      uint chunk = (pc.k + wg - 1u) / wg;
      uint k0 = lid * chunk, k1 = min(pc.k, k0 + chunk);
      Acc acc = empty_acc();
      for (uint k = k0; k < k1; ++k)
        acc = ingest(acc, T_LD(pc.a.v[base + red_offset(k)]), int(k));
      s_v[lid] = acc.v;
      s_i[lid] = acc.i;
      s_n[lid] = acc.nan_i;
      barrier();
      for (uint s = wg / 2u; s > 0u; s >>= 1) {
        if (lid < s) {
          Acc x, y;
          x.v = s_v[lid]; x.i = s_i[lid]; x.nan_i = s_n[lid];
          y.v = s_v[lid + s]; y.i = s_i[lid + s]; y.nan_i = s_n[lid + s];
          Acc r = combine(x, y);
          s_v[lid] = r.v; s_i[lid] = r.i; s_n[lid] = r.nan_i;
        }
        barrier();
      }
      if (lid == 0u) {
        Acc r;
        r.v = s_v[0]; r.i = s_i[0]; r.nan_i = s_n[0];
        pc.c.v[o] = result(r, base);
      }
      barrier();
    }
  }
}
