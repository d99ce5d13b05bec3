#version 460
#extension GL_GOOGLE_include_directive : require
// transpose.comp - a transposed operand made dense: c[d][r][c] = a[off +
// d * sb + r + c * sc] for elements of W bits (16, 32 or 64), moved as
// bits (the unary copy of a view whose rows are the source's contiguous
// axis: what materializing Nx.transpose/1 costs).
//
// Every access moves 16 bytes: VE = 128 / W elements. The host takes this
// kernel only where that is possible: the source's address of (d, 0, c)
// 16-byte aligned for every d and c (its offset, sb and sc multiples of
// VE), R and C multiples of VE (a 16-byte group is wholly inside a tile's
// rows or columns or wholly past them), the output dense from a 16-byte
// aligned address.
//
// A workgroup of 256 threads moves a tile of TR output rows by TC output
// columns: it reads the tile's TC source runs of TR contiguous elements
// (TR * W / 8 bytes each, 256 bytes in the default tiles) into shared
// memory, then writes TR output rows of TC elements, each 16 bytes per
// thread. Shared memory holds the tile in [column][row] order, one
// element per word (two words for 64-bit elements; for 16-bit ones a word
// holds two rows, as the source's words do), columns padded by one word,
// so that the staging stores and the transposed reads are at most two-way
// bank conflicts.
//
// On an H200 (8192x8192, GPU time, three runs alternating with the tiled
// kernel it replaced, tile2d.glsl's 32x32 tiles of 128-byte runs): f32
// 3833-3835 -> 4152-4157 GB/s (89% -> 97% of a buffer copy), f64
// 3760-3765 -> 4176-4180 (88% -> 98%), f16 3559-3571 -> 4031-4038 in the
// machine's fast f16 spells (84% -> 95%) and 970-1372 -> 1621-1749 in its
// slow ones (copies at 1.63-1.82 TB/s). Other tiles measured slower: f32 128x64, 64x128 and 128x32
// 4079-4148, 32x32 3899; f64 64x32 and 32x64 about the same, 16x32 3915;
// f16 128x128 and 64x128 (four-way bank conflicts in the transposed
// reads) 886 and 1146-1245, 256x32 and 128x32 (64-byte output runs) 515
// and 782; one half per shared word 1225 (packed pairs 1242-1443 in the
// next lease). Warps covering 4 columns of 128 bytes when reading and 4 or 8
// rows when writing, which has no bank conflicts at all, measured 0.5%
// (f32, f64) to 20% (f16) slower.
//
// Dispatch: (C / TC, R / TR, D) rounded up; spec constant 0 must be 256.
// The host's transpose_tile() (kernels/ops.c) mirrors TR and TC.
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

#ifndef W
#define W 32
#endif
#if W == 16
#ifndef TR
#define TR 128u
#define TC 64u
#endif
#elif W == 32
#ifndef TR
#define TR 64u
#define TC 64u
#endif
#else
#ifndef TR
#define TR 32u
#define TC 32u
#endif
#endif
const uint VE = 128u / W;             // elements per 16-byte access
const uint NT = 256u;                 // threads
const uint NG = TR * TC / VE / NT;    // 16-byte groups per thread
#if W == 16
const uint SROW = TR / 2u + 1u;       // shared words per column (row pairs)
#else
const uint SROW = TR + 1u;            // shared words (or pairs) per column
#endif

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer BufIn { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer BufOut { uvec4 v[]; };

layout(push_constant, std430) uniform PC {
  BufIn a;
  BufOut c;
  uint rows;   // R
  uint cols;   // C
  uint off;    // the source's first element
  uint sb;     // source stride between batches (elements)
  uint sc;     // source stride between output columns (elements)
  uint pad;
} pc;

#if W == 64
shared uvec2 s[TC * SROW];
#else
shared uint s[TC * SROW];
#endif

void main() {
  uint lid = gl_LocalInvocationID.x;
  uint r0 = gl_WorkGroupID.y * TR, c0 = gl_WorkGroupID.x * TC, d = gl_WorkGroupID.z;
  uint R = pc.rows, C = pc.cols;
  uint base = pc.off + d * pc.sb;

  // Source runs: group i of the tile is column i / (TR / VE), rows
  // (i % (TR / VE)) * VE.. of it: a warp reads two runs of 256 bytes.
  uvec4 g[NG];
  [[unroll]] for (uint q = 0u; q < NG; ++q) {
    uint i = lid + NT * q;
    uint cl = i / (TR / VE), rg = (i % (TR / VE)) * VE;
    g[q] = uvec4(0u);
    if (r0 + rg < R && c0 + cl < C) g[q] = pc.a.v[(base + r0 + rg + (c0 + cl) * pc.sc) / VE];
  }
  [[unroll]] for (uint q = 0u; q < NG; ++q) {
    uint i = lid + NT * q;
    uint cl = i / (TR / VE), rg = (i % (TR / VE)) * VE;
#if W == 16
    uint o = cl * SROW + rg / 2u;
    [[unroll]] for (uint k = 0u; k < 4u; ++k) s[o + k] = g[q][k];
#elif W == 32
    uint o = cl * SROW + rg;
    [[unroll]] for (uint k = 0u; k < 4u; ++k) s[o + k] = g[q][k];
#else
    uint o = cl * SROW + rg;
    s[o] = g[q].xy;
    s[o + 1u] = g[q].zw;
#endif
  }
  barrier();

  // Output rows: group i is row i / (TC / VE), columns (i % (TC / VE)) *
  // VE.. of it: a warp writes whole rows of the tile.
  uint obase = d * R * C;
  [[unroll]] for (uint q = 0u; q < NG; ++q) {
    uint i = lid + NT * q;
    uint rl = i / (TC / VE), cg = (i % (TC / VE)) * VE;
    if (r0 + rl >= R || c0 + cg >= C) continue;
#if W == 16
    // Row rl is half rl % 2 of its pair's word in each column.
    uint o = cg * SROW + rl / 2u, h = 16u * (rl & 1u);
    uvec4 v;
    [[unroll]] for (uint k = 0u; k < 4u; ++k)
      v[k] = bitfieldExtract(s[o + 2u * k * SROW], int(h), 16) |
             (bitfieldExtract(s[o + (2u * k + 1u) * SROW], int(h), 16) << 16u);
#elif W == 32
    uint o = cg * SROW + rl;
    uvec4 v = uvec4(s[o], s[o + SROW], s[o + 2u * SROW], s[o + 3u * SROW]);
#else
    uint o = cg * SROW + rl;
    uvec4 v = uvec4(s[o], s[o + SROW]);
#endif
    pc.c.v[(obase + (r0 + rl) * C + c0 + cg) / VE] = v;
  }
}
