#version 460
#extension GL_GOOGLE_include_directive : require
#include "types.glsl"
// winscatter.comp - window scatter (the gradient of window max/min) in two
// passes, deterministic and without atomics. OP 0 selects the maximum,
// OP 1 the minimum.
//
// Window w covers input coordinates w[d] * stride[d] - pad_lo[d] + j[d],
// 0 <= j[d] < win[d]; positions outside the input (padding) are never
// selected.
//
// VARIANT 0 (select; T is the operand's type): one thread per window scans
// its positions in row-major order: the first position inside the input
// starts the selection, and each later one whose value is >= (max) or <=
// (min) the selected value, compared in TC, takes it over. Ties therefore
// go to the last position, and NaN neither displaces nor is displaced by
// anything (a NaN first position stays selected). Writes the selected
// position's flat input index to sel[w], or 0xFFFFFFFF when the window
// lies wholly in the padding.
//
// VARIANT 1 (scatter; T is the result's type): one thread per input
// element sums, starting from init, the source values of the windows that
// selected it, in window order (row-major over the windows).
//
// VARIANT 2 (select and scatter in one pass, for windows that tile the
// last two axes exactly, every other axis a plain batch axis, and an
// operand of the result's type T): one thread per window selects as
// VARIANT 0 does and writes every position of its window: init + source
// at the selected one, init elsewhere (each position lies in exactly one
// window, so these are VARIANT 1's sums). sel holds the source's address.
//
// The arena holds per axis d: in_dim, in_stride, win, stride, pad_lo
// (signed), src_dim (windows along the axis), src_stride: 7 words each.
#include "common.glsl"

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT { T v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer BufU { uint v[]; };

layout(push_constant, std430) uniform PC {
  BufT a;        // select: the operand; scatter: the source (one per window)
  BufU sel;      // selected flat input index per window
  BufT c;        // scatter: the result, dense over the input's shape
  BufT init;     // scatter: one element, the starting value
  ArgsRef args;
  uint n;        // threads: windows (select) or input elements (scatter)
  uint rank;
  uint win_count;
  uint planes;   // nonzero: every axis but the last two is a plain batch
                 // axis (window 1, stride 1, no padding): two-axis walks
} pc;

#define AXW 7
shared int s_args[AXW * NXV_MAX_RANK];

#define NONE 0xFFFFFFFFu

void select_window(uint w) {
  uint R = pc.rank;
  int base[NXV_MAX_RANK];
  uint rem = w;
  for (int d = int(R) - 1; d >= 0; --d) {
    uint ax = AXW * uint(d);
    uint dim = uint(s_args[ax + 5u]);
    uint q = rem / dim;
    base[d] = int(rem - q * dim) * s_args[ax + 3u] - s_args[ax + 4u];
    rem = q;
  }
  uint best = NONE;
  TC acc = TC(0);
  for (uint j = 0u; j < pc.win_count; ++j) {
    uint jr = j;
    uint off = 0u;
    bool inside = true;
    for (int d = int(R) - 1; d >= 0; --d) {
      uint ax = AXW * uint(d);
      uint wd = uint(s_args[ax + 2u]);
      uint q = jr / wd;
      int p = base[d] + int(jr - q * wd);
      jr = q;
      inside = inside && p >= 0 && p < s_args[ax];
      off += uint(p) * uint(s_args[ax + 1u]);
    }
    if (!inside) continue;
    TC x = T_LD(pc.a.v[off]);
    if (best == NONE || (OP == 0u ? x >= acc : x <= acc)) {
      best = off;
      acc = x;
    }
  }
  pc.sel.v[w] = best;
}

void scatter_element(uint o) {
  uint R = pc.rank;
  // Per axis, the windows that contain coordinate y: those w with
  // w * stride - pad_lo <= y < w * stride - pad_lo + win, within
  // [0, src_dim).
  int lo[NXV_MAX_RANK], cnt[NXV_MAX_RANK];
  uint total = 1u;
  uint rem = o;
  for (int d = int(R) - 1; d >= 0; --d) {
    uint ax = AXW * uint(d);
    uint dim = uint(s_args[ax]);
    uint q = rem / dim;
    int y = int(rem - q * dim) + s_args[ax + 4u];
    rem = q;
    int s = s_args[ax + 3u];
    int first = y - s_args[ax + 2u] + 1;
    int l = first <= 0 ? 0 : (first - 1) / s + 1;
    int h = y < 0 ? -1 : y / s;
    h = min(h, s_args[ax + 5u] - 1);
    lo[d] = l;
    cnt[d] = max(h - l + 1, 0);
    total *= uint(cnt[d]);
  }
  TC acc = T_LD(pc.init.v[0]);
  for (uint t = 0u; t < total; ++t) {
    uint tr = t;
    uint w = 0u;
    for (int d = int(R) - 1; d >= 0; --d) {
      uint q = tr / uint(cnt[d]);
      w += uint(lo[d] + int(tr - q * uint(cnt[d]))) * uint(s_args[AXW * uint(d) + 6u]);
      tr = q;
    }
    if (pc.sel.v[w] == o) acc += T_LD(pc.a.v[w]);
  }
  pc.c.v[o] = T_ST(acc);
}

// select_window and scatter_element for images (pc.planes): the same
// orders, walking the last two axes without index arrays.
void select_window2(uint w, uint A, uint B) {
  uint nh = uint(s_args[A + 5u]), nw = uint(s_args[B + 5u]);
  uint ih = uint(s_args[A]), iw = uint(s_args[B]);
  uint plane = w / (nh * nw), r = w - plane * (nh * nw);
  uint y = r / nw, x = r - y * nw;
  int c0 = int(y) * s_args[A + 3u] - s_args[A + 4u];
  int c1 = int(x) * s_args[B + 3u] - s_args[B + 4u];
  uint wh = uint(s_args[A + 2u]), ww = uint(s_args[B + 2u]);
  uint base = plane * ih * iw;
  uint best = NONE;
  TC acc = TC(0);
  for (uint i = 0u; i < wh; ++i, ++c0) {
    if (c0 < 0 || c0 >= int(ih)) continue;
    for (uint j = 0u; j < ww; ++j) {
      int cc = c1 + int(j);
      if (cc < 0 || cc >= int(iw)) continue;
      uint off = base + uint(c0) * iw + uint(cc);
      TC v = T_LD(pc.a.v[off]);
      if (best == NONE || (OP == 0u ? v >= acc : v <= acc)) {
        best = off;
        acc = v;
      }
    }
  }
  pc.sel.v[w] = best;
}

void select_scatter2(uint w, uint A, uint B) {
  uint nh = uint(s_args[A + 5u]), nw = uint(s_args[B + 5u]);
  uint iw = uint(s_args[B]);
  uint wh = uint(s_args[A + 2u]), ww = uint(s_args[B + 2u]);
  uint plane = w / (nh * nw), r = w - plane * (nh * nw);
  uint y = r / nw, x = r - y * nw;
  uint base = (plane * nh * wh + y * wh) * iw + x * ww;
  uint best = 0u;
  TC acc = TC(0);
  for (uint i = 0u; i < wh; ++i)
    for (uint j = 0u; j < ww; ++j) {
      uint off = base + i * iw + j;
      TC v = T_LD(pc.a.v[off]);
      if ((i == 0u && j == 0u) || (OP == 0u ? v >= acc : v <= acc)) {
        best = off;
        acc = v;
      }
    }
  TC init = T_LD(pc.init.v[0]);
  TC hit = init + T_LD(BufT(uint64_t(pc.sel)).v[w]);
  for (uint i = 0u; i < wh; ++i)
    for (uint j = 0u; j < ww; ++j) {
      uint off = base + i * iw + j;
      pc.c.v[off] = T_ST(off == best ? hit : init);
    }
}

// The windows along one axis that contain coordinate y (after padding):
// [lo, lo + count).
void axis_windows(uint ax, int y, out int lo, out int count) {
  int s = s_args[ax + 3u];
  int first = y - s_args[ax + 2u] + 1;
  lo = first <= 0 ? 0 : (first - 1) / s + 1;
  int h = min(y < 0 ? -1 : y / s, s_args[ax + 5u] - 1);
  count = max(h - lo + 1, 0);
}

void scatter_element2(uint o, uint A, uint B) {
  uint ih = uint(s_args[A]), iw = uint(s_args[B]);
  uint nh = uint(s_args[A + 5u]), nw = uint(s_args[B + 5u]);
  uint plane = o / (ih * iw), r = o - plane * (ih * iw);
  uint y = r / iw, x = r - y * iw;
  int l0, n0, l1, n1;
  axis_windows(A, int(y) + s_args[A + 4u], l0, n0);
  axis_windows(B, int(x) + s_args[B + 4u], l1, n1);
  TC acc = T_LD(pc.init.v[0]);
  uint wbase = plane * nh * nw;
  for (int i = 0; i < n0; ++i)
    for (int j = 0; j < n1; ++j) {
      uint w = wbase + uint(l0 + i) * nw + uint(l1 + j);
      if (pc.sel.v[w] == o) acc += T_LD(pc.a.v[w]);
    }
  pc.c.v[o] = T_ST(acc);
}

void main() {
  uint R = pc.rank;
  for (uint j = gl_LocalInvocationID.x; j < AXW * R; j += gl_WorkGroupSize.x)
    s_args[j] = int(pc.args.d[j]);
  barrier();
  if (pc.planes != 0u) {
    uint A = AXW * (R - 2u), B = AXW * (R - 1u);
    for (uint i = nxv_gid(); i < pc.n; i += nxv_nthreads()) {
      if (VARIANT == 0u) select_window2(i, A, B);
      else if (VARIANT == 1u) scatter_element2(i, A, B);
      else select_scatter2(i, A, B);
    }
    return;
  }
  for (uint i = nxv_gid(); i < pc.n; i += nxv_nthreads()) {
    if (VARIANT == 0u) select_window(i);
    else scatter_element(i);
  }
}
