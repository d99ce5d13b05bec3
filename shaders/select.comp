#version 460
#extension GL_GOOGLE_include_directive : require
#define NEED_8BIT 1
#include "types.glsl"
// select.comp - c[i] = p[i] != 0 ? a[i] : b[i]; p is u8, a, b and c are T
// (T_ID; only moved, never computed).
// VARIANT 0: contiguous (flags bit0/1/2: p/a/b is a broadcast scalar;
// bit7, types of at most 8 bytes: 16 bytes of a, b and c per thread, W =
// 16 / size elements, moved as words under a byte mask made from their W
// predicate bytes: a's bytes where an element's predicate is non-zero,
// b's elsewhere, so the bits move unchanged; a and b read in place 16-byte
// aligned, p W-byte aligned);
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

#if T_BITS <= 64
#define WORDS 1
const uint W = 128u / T_BITS;  // elements per 16 bytes
layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufV { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer BufP2 { uvec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer BufP1 { uint v[]; };
#if T_BITS == 64
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer BufS { uvec2 v[]; };
#elif T_BITS == 32
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer BufS { uint v[]; };
#elif T_BITS == 16
layout(buffer_reference, std430, buffer_reference_align = 2) readonly buffer BufS { uint16_t v[]; };
#else
layout(buffer_reference, std430, buffer_reference_align = 1) readonly buffer BufS { uint8_t v[]; };
#endif

// 0xFF in each byte of w that is non-zero, 0 in the others.
uint nz_bytes(uint w) {
  uint t = w | (w >> 4);
  t |= t >> 2;
  t |= t >> 1;
  return (t & 0x01010101u) * 0xFFu;
}

// Byte k of m (0 or 0xFF) spread over bytes 2k and 2k + 1 of a word:
// the masks of two 16-bit elements from their predicate bytes k, k + 1.
uint spread2(uint m, uint k) {
  uint lo = (m >> (8u * k)) & 0xFFu, hi = (m >> (8u * k + 8u)) & 0xFFu;
  return lo * 0x0101u | (hi * 0x0101u) << 16;
}

// The 16 bytes of the scalar element at p, repeated.
uvec4 splat(BufT p) {
#if T_BITS == 64
  uvec2 x = BufS(p).v[0];
  return uvec4(x, x);
#elif T_BITS == 32
  return uvec4(BufS(p).v[0]);
#elif T_BITS == 16
  uint x = uint(BufS(p).v[0]);
  return uvec4(x | (x << 16));
#else
  return uvec4(uint(BufS(p).v[0]) * 0x01010101u);
#endif
}

// The byte masks of the 16 bytes of group i from its W predicate bytes
// (one scalar predicate when ps).
uvec4 group_mask(uint i, bool ps) {
  if (ps) return uvec4(uint(pc.p.v[0]) != 0u ? 0xFFFFFFFFu : 0u);
#if T_BITS == 8
  uvec4 w = BufV(pc.p).v[i];
  return uvec4(nz_bytes(w.x), nz_bytes(w.y), nz_bytes(w.z), nz_bytes(w.w));
#elif T_BITS == 16
  uvec2 w = BufP2(pc.p).v[i];
  uint m0 = nz_bytes(w.x), m1 = nz_bytes(w.y);
  return uvec4(spread2(m0, 0u), spread2(m0, 2u), spread2(m1, 0u), spread2(m1, 2u));
#elif T_BITS == 32
  uint m = nz_bytes(BufP1(pc.p).v[i]);
  return uvec4((m & 0xFFu) * 0x01010101u, ((m >> 8) & 0xFFu) * 0x01010101u,
               ((m >> 16) & 0xFFu) * 0x01010101u, (m >> 24) * 0x01010101u);
#else
  uint m0 = uint(pc.p.v[2u * i]) != 0u ? 0xFFFFFFFFu : 0u;
  uint m1 = uint(pc.p.v[2u * i + 1u]) != 0u ? 0xFFFFFFFFu : 0u;
  return uvec4(m0, m0, m1, m1);
#endif
}
#else
#define WORDS 0
#endif

void main() {
  uint gid = nxv_gid();
  uint stride = nxv_nthreads();
  if (VARIANT == 0) {
    bool ps = (pc.flags & 1u) != 0u, as = (pc.flags & 2u) != 0u,
         bs = (pc.flags & 4u) != 0u;
    uint start = 0u;
#if WORDS
    if ((pc.flags & 128u) != 0u) {
      uint ng = pc.n / W;
      uvec4 sa = as ? splat(pc.a) : uvec4(0u), sb = bs ? splat(pc.b) : uvec4(0u);
      BufV a16 = BufV(pc.a), b16 = BufV(pc.b), c16 = BufV(pc.c);
      for (uint i = gid; i < ng; i += stride) {
        uvec4 m = group_mask(i, ps);
        uvec4 x = as ? sa : a16.v[i], y = bs ? sb : b16.v[i];
        c16.v[i] = (x & m) | (y & ~m);
      }
      start = ng * W;
    }
#endif
    for (uint i = start + gid; i < pc.n; i += stride) {
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
