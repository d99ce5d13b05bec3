// tile2d.glsl - the tiled path of the elementwise kernels (binary.comp
// VARIANT 2, unary.comp VARIANT 3), for operands that are broadcast,
// transposed or otherwise strided.
//
// The dense output, its axes collapsed to [D, R, C] (D batches of R x C),
// is covered by tiles of 32 rows and T2_COLS columns (32, or 64 for types
// of 16 bits or less, whose rows would otherwise be read 64 bytes at a
// time): workgroup (x, y, z) of 256 threads takes columns T2_COLS x..,
// rows 32y.. of batch z; thread t, in tile row t / 8, the T2_PER / 4
// groups of 4 consecutive columns 4 (t % 8) + 32 q, so that the 8 threads
// of a row access one contiguous run per load. Indices need no division,
// and the output is written row by row, 4 wide where rows allow it.
//
// Argument arena: R, C, then for operand o at word 2 + 4o its strides
// along D, R and C and its offset, in elements (two's complement: negative
// strides wrap). Operand o's mode is in bits 2o..2o+1 of pc.flags:
//   0  direct loads, any strides (stride 0 along C loads once per row)
//   1  4-wide loads: stride 1 along C and every row start 4-aligned
//   2  transposed (stride 1 along R): the workgroup first reads the tile
//      along R into shared memory, so that reads stay coalesced
//   3  an immediate (binary.comp reads it from push constants; t2_load
//      is not called for it)
// Bit 6 of pc.flags: the output may be written 4 wide (C % 4 == 0).
// Bit 8 + o (16-bit types): operand o, transposed, is read 8 rows per
// 16-byte load (mode 2's wide form): its offset and its strides along D
// and C are multiples of 8 elements, its buffer address of 16 bytes, and
// R % 8 == 0.
//
// The 16-byte form (t16_*, the includers' VARIANT 4) serves 16-bit inputs
// and outputs where C % 8 == 0, some operand is transposed in the wide
// form and every other one is an immediate or has rows of 16-byte aligned
// groups of 8 (stride 1 along C, strides along R and D multiples of 8):
// thread t takes 8 consecutive columns of row t / 8, so that every access
// moves 16 bytes and 8 threads cover 128 contiguous bytes, as the 32-bit
// tiles' 4-wide accesses do. On an H200 f16 x + transpose(y) on 8192x8192
// operands went from 3625-3642 to 3710-3729 GPU GB/s (86% -> 88% of copy);
// the same form with 64-row tiles of 512 threads (a transposed column's
// 128 bytes per load pair) measured 3570-3577.
//
// The includer defines T, TC, T_LD, BufT, T_VEC (and BufT4, TC4 where
// T_VEC) and a push-constant block pc with members args and flags.
#extension GL_EXT_control_flow_attributes : enable
#define T2_TILE 32u
#if T_BITS <= 16
#define T2_PER 8u
#else
#define T2_PER 4u
#endif
#define T2_COLS (8u * T2_PER)
// Columns staged at a time by the transposed mode: 32 (two passes for
// types of 16 bits or less), so that the workgroup's shared memory stays
// at 33 x 32 compute-type elements (16-bit types: 64 x 17 32-bit words,
// for the wide form below).
#define T2_SCOLS 32u
#define T2_FLAG_VEC_OUT 64u
#define T2_FLAG_WIDE 256u

#define T2_SSIZE (T2_SCOLS * (T2_TILE + 1u))
#if T_BITS == 16
// Mode 2's wide form stages the whole tile at once as packed pairs of
// rows: column c's rows 2i and 2i + 1 in word c * T2_WROW + i. With
// T2_WROW = 17 the 8 columns a warp reads at a time fall on distinct banks.
// For 16-bit types t2_s holds 32-bit words: the packed pairs, or in the
// two-pass form the bits of TC values (T2_PUT, T2_GET).
#define T2_WROW (T2_TILE / 2u + 1u)
#define T2_SWORDS (T2_COLS * T2_WROW)
shared uint t2_s[T2_SWORDS > T2_SSIZE ? T2_SWORDS : T2_SSIZE];
#if T_KIND == 0
#define T2_PUT(x) floatBitsToUint(x)
#define T2_GET(w) uintBitsToFloat(w)
#else
#define T2_PUT(x) uint(x)
#define T2_GET(w) TC(w)
#endif
#else
shared TC t2_s[T2_SSIZE];
#define T2_PUT(x) (x)
#define T2_GET(w) (w)
#endif

#if T_BITS == 16
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer T2BufW { uvec4 v[]; };
// Half h (0 low, 1 high) of a packed word, as TC (what T_LD gives).
TC t2_half(uint w, uint h) {
  uint b = (w >> (16u * h)) & 0xFFFFu;
#if defined(T_BF16)
  return uintBitsToFloat(b << 16);
#elif T_KIND == 0
  return unpackHalf2x16(b).x;
#elif T_KIND == 1
  return int(b << 16) >> 16;
#else
  return b;
#endif
}
#endif

uint t2_rows() { return pc.args.d[0]; }
uint t2_cols() { return pc.args.d[1]; }
uint t2_row() { return gl_WorkGroupID.y * T2_TILE + gl_LocalInvocationID.x / 8u; }
// This thread's first column, and the offset of its element j from it.
uint t2_col() { return gl_WorkGroupID.x * T2_COLS + (gl_LocalInvocationID.x % 8u) * 4u; }
uint t2_dc(uint j) { return (j / 4u) * 32u + j % 4u; }

// Declares, for operand o of a load function, its mode, the output's
// rows R and columns C, its strides sb, sr, sc along D, R and C, the index
// base of its element (0, 0) in this workgroup's batch, and lid. A macro,
// not a function returning them: both tile forms compile to the code they
// had when each spelled this out (a helper function measured 0.4-1.3%
// slower on an H200).
#define T2_OPERAND_ARGS(o)                                                   \
  uint mode = (pc.flags >> (2u * (o))) & 3u;                                \
  uint R = t2_rows(), C = t2_cols();                                        \
  uint w = 2u + 4u * (o);                                                   \
  uint sb = pc.args.d[w], sr = pc.args.d[w + 1u], sc = pc.args.d[w + 2u];   \
  uint base = pc.args.d[w + 3u] + gl_WorkGroupID.z * sb;                    \
  uint lid = gl_LocalInvocationID.x

// The T2_PER elements of operand o (buffer p) at this thread's row and
// columns. Elements outside the output are left unspecified. Call from
// uniform control flow: mode 2 synchronizes the workgroup.
void t2_load(BufT p, uint o, out TC v[T2_PER]) {
  T2_OPERAND_ARGS(o);
  [[unroll]] for (uint j = 0u; j < T2_PER; ++j) v[j] = TC(0);
#if T_BITS == 16
  if (mode == 2u && (pc.flags & (T2_FLAG_WIDE << o)) != 0u) {
    // Thread t reads column t / 4 of the tile, rows 8 (t % 4).. (R % 8 ==
    // 0: a group is wholly inside the rows or wholly past them), in one
    // 16-byte load issued before the barrier: 4 loads instead of 32
    // two-byte ones per 64 bytes of a column (on an H200, f16 x +
    // transpose(y) 72% -> 86% of copy).
    uint r0 = gl_WorkGroupID.y * T2_TILE, cc = lid / 4u, rg = (lid % 4u) * 8u;
    uint c0 = gl_WorkGroupID.x * T2_COLS;
    uvec4 g = uvec4(0u);
    if (r0 + rg < R && c0 + cc < C)
      g = T2BufW(p).v[(base + r0 + rg + (c0 + cc) * sc) / 8u];
    barrier();  // an earlier operand's readers are done with t2_s
    uint s = cc * T2_WROW + rg / 2u;
    t2_s[s] = g.x;
    t2_s[s + 1u] = g.y;
    t2_s[s + 2u] = g.z;
    t2_s[s + 3u] = g.w;
    barrier();
    uint rl = lid / 8u, cl = (lid % 8u) * 4u;
    [[unroll]] for (uint j = 0u; j < T2_PER; ++j)
      v[j] = t2_half(t2_s[(cl + t2_dc(j)) * T2_WROW + rl / 2u], rl & 1u);
    return;
  }
#endif
  if (mode == 2u) {
    uint r0 = gl_WorkGroupID.y * T2_TILE, rr = lid % T2_TILE, cc = lid / T2_TILE;
    uint rl = lid / 8u, cl = (lid % 8u) * 4u;
    // Pass h stages columns [32 h, 32 h + 32) of the tile: this thread's
    // elements 4h..4h+3.
    [[unroll]] for (uint h = 0u; h < T2_COLS / T2_SCOLS; ++h) {
      uint c0 = gl_WorkGroupID.x * T2_COLS + h * T2_SCOLS;
      barrier();  // an earlier operand's or pass's readers are done with t2_s
      [[unroll]] for (uint k = 0u; k < T2_SCOLS / 8u; ++k) {
        uint c = cc + 8u * k;
        if (r0 + rr < R && c0 + c < C)
          t2_s[c * (T2_TILE + 1u) + rr] = T2_PUT(T_LD(p.v[base + (r0 + rr) * sr + (c0 + c) * sc]));
      }
      barrier();
      [[unroll]] for (uint j = 4u * h; j < 4u * h + 4u; ++j)
        v[j] = T2_GET(t2_s[(cl + j % 4u) * (T2_TILE + 1u) + rl]);
    }
    return;
  }
  uint r = t2_row(), c = t2_col();
  if (r >= R || c >= C) return;
  uint i = base + r * sr + c * sc;
#if T_VEC
  if (mode == 1u) {  // C % 4 == 0: a 4-vector is in the row or wholly past it
    [[unroll]] for (uint q = 0u; q < T2_PER; q += 4u) {
      if (c + t2_dc(q) >= C) break;
      TC4 x = TC4(BufT4(p).v[(i + t2_dc(q)) / 4u]);
      v[q] = x.x;
      v[q + 1u] = x.y;
      v[q + 2u] = x.z;
      v[q + 3u] = x.w;
    }
    return;
  }
#endif
  if (sc == 0u) {
    TC x = T_LD(p.v[i]);
    [[unroll]] for (uint j = 0u; j < T2_PER; ++j) v[j] = x;
    return;
  }
  [[unroll]] for (uint j = 0u; j < T2_PER; ++j)
    if (c + t2_dc(j) < C) v[j] = T_LD(p.v[i + t2_dc(j) * sc]);
}

#if T_BITS == 16
// The 16-byte form (see the header). Elements travel as packed words:
// element j of a thread's 8 in half j % 2 of word j / 2.
uint t16_col() { return gl_WorkGroupID.x * T2_COLS + (gl_LocalInvocationID.x % 8u) * 8u; }

// Word w (columns 2w, 2w + 1) of row r of the staged tile: rows of 32
// words whose 16-byte chunks are permuted by row ((chunk ^ (r / 4)) % 8),
// so that the stores below (8 rows 4 apart, one chunk) and the 16-byte
// reads (8 chunks of one row per 8 threads) both fall on distinct banks.
uint t16_word(uint r, uint w) { return r * 32u + (((w >> 2u) ^ ((r >> 2u) & 7u)) << 2u) + (w & 3u); }

layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer T16BufD { uvec2 v[]; };

// Operand o's 8 elements at this thread's row and columns, packed; zeros
// past the tile's rows or columns. Mode 2 (the wide form only): thread t
// reads rows 4 (t % 8).. of the tile's columns 2 (t / 8) and 2 (t / 8) + 1
// (8 bytes each), pairs them into the words of 4 rows and stages them in
// t2_s; any other mode (never 3: the includer supplies immediates) reads
// 16 bytes of the operand's row. Call from uniform control flow: mode 2
// synchronizes the workgroup.
uvec4 t16_load(BufT p, uint o) {
  T2_OPERAND_ARGS(o);
  if (mode == 2u) {
    uint r0 = gl_WorkGroupID.y * T2_TILE, pr = lid / 8u, rq = (lid % 8u) * 4u;
    uint c = gl_WorkGroupID.x * T2_COLS + 2u * pr;
    uvec2 a = uvec2(0u), b = uvec2(0u);
    if (r0 + rq < R) {  // R % 8 == 0: the 4 rows are all inside or all past
      uint i = base + r0 + rq + c * sc;
      if (c < C) a = T16BufD(p).v[i / 4u];
      if (c + 1u < C) b = T16BufD(p).v[(i + sc) / 4u];
    }
    barrier();  // an earlier operand's readers are done with t2_s
    t2_s[t16_word(rq, pr)] = (a.x & 0xFFFFu) | (b.x << 16u);
    t2_s[t16_word(rq + 1u, pr)] = (a.x >> 16u) | (b.x & 0xFFFF0000u);
    t2_s[t16_word(rq + 2u, pr)] = (a.y & 0xFFFFu) | (b.y << 16u);
    t2_s[t16_word(rq + 3u, pr)] = (a.y >> 16u) | (b.y & 0xFFFF0000u);
    barrier();
    uint rl = lid / 8u, s0 = t16_word(rl, (lid % 8u) * 4u);
    return uvec4(t2_s[s0], t2_s[s0 + 1u], t2_s[s0 + 2u], t2_s[s0 + 3u]);
  }
  uint r = t2_row(), c = t16_col();
  if (r >= R || c >= C) return uvec4(0u);
  return T2BufW(p).v[(base + r * sr + c) / 8u];
}
#endif
