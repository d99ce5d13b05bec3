#version 460
#extension GL_GOOGLE_include_directive : require
#include "types.glsl"
// gemm.comp - batched C[b] = A[b] (m x k) * B[b] (k x n) for f16, bf16 and
// f32 (T_ID), accumulated in f32: the register-blocked kernel for large
// products. Same push constants and operand addressing as matmul.comp
// (arbitrary element strides; C dense).
//
// VARIANT 0: 128x128 tile of C per workgroup, 256 threads.
// VARIANT 1: 64x64 tile, 64 threads (more workgroups for mid sizes).
// VARIANT 3: 128x256 tile, 256 threads of 8x16 results (the host's choice
// for large f32 products, A read along k or transposed).
// VARIANT 4 and 7: VARIANTS 0 and 3 with deep k slices (bit 2, below).
// VARIANT 15: VARIANT 7 with A's rows swizzled in shared memory (bit 3,
// below), the host's choice when A is read along k. On an H200 (f32
// TFLOP/s, five rounds over two leases) 2048^3 44.5-44.6 -> 44.9-45.0 (one
// product alone 377-380 -> 375 us of GPU time), 8 x 1024^3 44.7-44.9 ->
// 45.2-45.3; where A is read along m its stores do not conflict, and the
// same swizzle there cost 0.2-0.5% (4096^3 and 8192^3, whose A is copied
// [k][m] first), so those keep VARIANT 7.
// Split k (few tiles, long sums): with nsplit > 1 the k axis is cut into
// chunks of kchunk; workgroup z = batch * nsplit + chunk writes its f32
// partial tile to part[chunk * outs + b * m * n + ...] (outs = nbatch * m
// * n), and VARIANT 2 (64 threads, one per result, or one per 4 results
// when the host sets pc.combine4: n a multiple of 4 and a T with 4-wide
// stores) adds the partials of each result in chunk order and stores it
// (results do not depend on scheduling). The 4-wide pass reads and writes
// 16 bytes per access: on an H200 (f32 TFLOP/s, the product queued back to
// back) 512^3 13.7 -> 15.1, 1024^3 32.4 -> 36.6, 128x784x512 8.8 -> 9.05.
// Each thread accumulates an 8x(4 NGC) block: rows {ty*4 + i, BM/2 + ty*4
// + i}, columns {h*BN/NGC + tx*4 + j}, i, j < 4, h < NGC (2, or 4 for
// the 128x256 tile), so its shared-memory reads are 4-wide and
// conflict-free. A and B advance through k in slices of BK, staged in
// shared memory (double-buffered: the next slice is read from memory into
// registers while the current one is multiplied, one barrier per slice).
// BK is 8, with rows padded by 4 floats so that the transposed stores of
// an operand read along k are conflict-free, or, with VARIANT bit 2, 16
// without padding (32 KiB of shared memory for 128x128, 48 KiB for
// 128x256: the host takes them where the device allows that much). Deep
// slices halve the barriers, loop overhead and address arithmetic per
// product; on an H200 (f32 TFLOP/s, together with the separate interior
// loop below) 4096^3 40.2 -> 46.6, 8192^3 40.6 -> 47.0, 2048^3 39.3 ->
// 44.6, A transposed 41.9 -> 46.2, B transposed 39.4 -> 43.3, both 40.0 ->
// 43.7, 8 x 1024^3 39.2 -> 44.8. Padded deep slices (50 KiB for 128x256,
// over the 48 KiB Vulkan allows there) measured the same but with B
// transposed (45.0): its stores, like A's, conflict without padding; rows
// swizzled instead (column c of row p at c ^ 2 ((p / 4) mod 4)) recovered
// that (44.3) but cost the other layouts up to 8% (the inner loop's
// address XORs); so did loads of B transposed mapped one column per
// thread, or 16 columns of two neighbouring groups per warp (its stores
// conflict less, but B transposed measured 41.7-42.7).
// Within a slice the 128x128 and 64x64 tiles load the next k step's
// fragments from shared memory before multiplying the current ones (f32
// 4096^3 on an H200 with slices of 8: A transposed 40.4 -> 41.9 TFLOP/s,
// both transposed 38.7 -> 40.0); the 128x256 tile keeps the plain loop
// (the same change there: 40.2 -> 38.3, at 219 registers instead of 223).
// Each operand is read along its contiguous axis, whichever it is (k for
// a row-major A, m for a transposed one), so global reads stay coalesced,
// 4 elements per load where the base and the stride between runs are
// multiples of 4 (one load instead of four: 29 -> 37 TFLOP/s for f32
// 4096^3 on an H100). Results are stored 4 at a time where aligned.
// Warps covering 32x64 results instead of 16x128, which halves their
// shared-memory wavefronts, measured 2% slower.
// Dispatch: (ceil(n/BN), ceil(m/BM), batch * nsplit); spec constant 0
// must be 256 (VARIANTS 0, 3, 4, 7 and 15) or 64 (VARIANTS 1 and 2). The
// host's gemm_shared() (kernels/ops.c) mirrors the shared-memory sizes.
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT { T v[]; };
#if defined(T_BF16)
// 4 bf16 as two 32-bit words (no 16-bit arithmetic types needed).
layout(buffer_reference, std430, buffer_reference_align = 8) buffer BufT4 { uvec2 v[]; };
#else
layout(buffer_reference, std430, buffer_reference_align = 4 * T_ALIGN) buffer BufT4 { T4 v[]; };
#endif
layout(buffer_reference, std430, buffer_reference_align = 4) buffer BufF { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufF4 { vec4 v[]; };

layout(push_constant, std430) uniform PC {
  BufT a;
  BufT b;
  BufT c;
  uint m, n, k, batch_base;
  int a_sb, a_sm, a_sk;
  int b_sb, b_sk, b_sn;
  uint a_off, b_off;
  BufF part;     // split k: partial tiles (nsplit * outs floats)
  uint kchunk;   // split k: k elements per chunk
  uint nsplit;   // chunks of k (0 or 1: no split)
  uint nbatch;   // split k: batches in this dispatch
  uint combine4; // VARIANT 2: 1 when each thread combines 4 results
} pc;

const uint SHAPE = VARIANT & 3u;         // the tile: VARIANT less bits 2-3
const bool DEEP = (VARIANT & 4u) != 0u;  // slices of 16, rows unpadded
// Bit 3 (with SHAPE 3 and DEEP alone: VARIANT 15): A's rows swizzled in
// shared memory, element (p, r) at column group (r / 4) ^ 2 ((p / 4) mod 4),
// so that the transposed stores of an A read along k, 4 lanes per row of
// A, reach 4 banks instead of 1 (4-way conflicts otherwise).
const bool SWZA = (VARIANT & 8u) != 0u && SHAPE == 3u && DEEP;
const uint BM = SHAPE == 1u || SHAPE == 2u ? 64u : 128u;  // 2: no tile (64 threads)
const uint BN = SHAPE == 3u ? 256u : BM;
// Column groups of 4 per thread, BN / NGC apart.
const uint NGC = SHAPE == 3u ? 4u : 2u;
const uint TXN = BN / (4u * NGC), TYN = BM / 8u; // threads along n and m
const uint NT = TXN * TYN;                       // threads
const uint BK = DEEP ? 16u : 8u;
const uint GPR = BK / 4u;                // 4-element groups per row of a k slice
const uint PAD = DEEP ? 0u : 4u;         // keeps transposed stores conflict-free
const uint QTA = BM * BK / 4u / NT;      // 4-element groups per thread of A
const uint QTB = BN * BK / 4u / NT;      // and of B
// [buffer][k][m] and [buffer][k][n], row lengths BM + PAD and BN + PAD.
shared vec4 As[2u * BK * (BM + PAD) / 4u];
shared vec4 Bs[2u * BK * (BN + PAD) / 4u];
const uint ROW4A = (BM + PAD) / 4u;      // vec4s per shared row of A
const uint ROW4B = (BN + PAD) / 4u;      // and of B
// The column group of A's row p that holds group g (identity unless SWZA).
#define SWZ(p) (SWZA ? (((p) >> 2u) & 3u) * 2u : 0u)

uint k_end;  // end of this workgroup's k range

// Element (r, p) of A and (p, s) of B, 0 outside the matrices and the k
// range; sk is the k stride (1 when the caller walks a k-contiguous
// operand).
float load_a(uint base, uint r, uint p, uint sk) {
  return (r < pc.m && p < k_end) ? float(T_LD(pc.a.v[base + r * uint(pc.a_sm) + p * sk])) : 0.0;
}
float load_b(uint base, uint p, uint s, uint sk) {
  return (s < pc.n && p < k_end) ? float(T_LD(pc.b.v[base + p * sk + s * uint(pc.b_sn)])) : 0.0;
}

// The 4 elements of buf from element i (a multiple of 4) in one load; used
// where all 4 are in bounds and aligned.
vec4 load4(BufT buf, uint i) {
#if defined(T_BF16)
  uvec2 w = BufT4(buf).v[i / 4u];
  return vec4(uintBitsToFloat(w.x << 16), uintBitsToFloat(w.x & 0xFFFF0000u),
              uintBitsToFloat(w.y << 16), uintBitsToFloat(w.y & 0xFFFF0000u));
#else
  return vec4(TC4(BufT4(buf).v[i / 4u]));
#endif
}

void main() {
  uint nsplit = max(pc.nsplit, 1u);
  if (SHAPE == 2u) {  // combine the partials of split k, in chunk order
    uint outs = pc.nbatch * pc.m * pc.n;
    uint cbase0 = pc.batch_base * pc.m * pc.n;
#if T_VEC
    if (pc.combine4 == 1u) {  // outs and cbase0 multiples of 4
      uint outs4 = outs / 4u;
      for (uint o = nxv_gid(); o < outs4; o += nxv_nthreads()) {
        vec4 acc = vec4(0.0);
        for (uint s = 0u; s < nsplit; ++s) acc += BufF4(pc.part).v[s * outs4 + o];
        BufT4(pc.c).v[cbase0 / 4u + o] = T4(acc);
      }
      return;
    }
#endif
    for (uint o = nxv_gid(); o < outs; o += nxv_nthreads()) {
      float acc = 0.0;
      for (uint s = 0u; s < nsplit; ++s) acc += pc.part.v[s * outs + o];
      pc.c.v[cbase0 + o] = T_ST(acc);
    }
    return;
  }
  uint lid = gl_LocalInvocationID.x;
  uint tx = lid % TXN, ty = lid / TXN;
  uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  uint chunk = gl_WorkGroupID.z % nsplit;
  uint bat = gl_WorkGroupID.z / nsplit + pc.batch_base;
  uint k0 = nsplit > 1u ? chunk * pc.kchunk : 0u;
  k_end = nsplit > 1u ? min(pc.k, k0 + pc.kchunk) : pc.k;
  uint abase = pc.a_off + bat * uint(pc.a_sb);
  uint bbase = pc.b_off + bat * uint(pc.b_sb);
  // Which axis consecutive threads walk when loading: k for a row-major A
  // (k contiguous), m otherwise; n for a row-major B, k otherwise.
  bool a_walk_k = pc.a_sk == 1 && pc.a_sm != 1;
  bool b_walk_k = pc.b_sk == 1 && pc.b_sn != 1;
  // 4-wide loads where every group the walk reads starts 4-aligned: the
  // base and the stride between groups (the other axis's) multiples of 4.
  bool a_vec = abase % 4u == 0u && (uint(a_walk_k ? pc.a_sm : pc.a_sk) & 3u) == 0u &&
               (a_walk_k || pc.a_sm == 1);
  bool b_vec = bbase % 4u == 0u && (uint(b_walk_k ? pc.b_sn : pc.b_sk) & 3u) == 0u &&
               (b_walk_k || pc.b_sn == 1);

  vec4 ra[QTA], rb[QTB];  // the next slice, in registers

  // Loads slice k0 into ra/rb: group q of thread lid covers 4 consecutive
  // elements along the walked axis.
#define VEC_A_K(r, gp) (a_vec && (r) < pc.m && (gp) + 4u <= k_end)
#define VEC_A_M(gr, gp) (a_vec && (gr) + 4u <= pc.m && (gp) < k_end)
#define VEC_B_K(gs, gp) (b_vec && (gs) < pc.n && (gp) + 4u <= k_end)
#define VEC_B_N(gs, gp) (b_vec && (gs) + 4u <= pc.n && (gp) < k_end)
#define LOAD_SLICE(k0)                                                        \
  [[unroll]] for (uint q = 0u; q < QTA; ++q) {                                \
    uint g = lid + NT * q;                                                    \
    if (a_walk_k) {                                                           \
      uint r = g / GPR, gp = (k0) + (g % GPR) * 4u;                           \
      if (VEC_A_K(row0 + r, gp))                                              \
        ra[q] = load4(pc.a, abase + (row0 + r) * uint(pc.a_sm) + gp);         \
      else                                                                    \
        ra[q] = vec4(load_a(abase, row0 + r, gp, 1u), load_a(abase, row0 + r, gp + 1u, 1u), \
                     load_a(abase, row0 + r, gp + 2u, 1u), load_a(abase, row0 + r, gp + 3u, 1u)); \
    } else {                                                                  \
      uint gp = (k0) + g / (BM / 4u), gr = row0 + (g % (BM / 4u)) * 4u;       \
      uint sk = uint(pc.a_sk);                                                \
      if (VEC_A_M(gr, gp))                                                    \
        ra[q] = load4(pc.a, abase + gr + gp * sk);                            \
      else                                                                    \
        ra[q] = vec4(load_a(abase, gr, gp, sk), load_a(abase, gr + 1u, gp, sk), \
                     load_a(abase, gr + 2u, gp, sk), load_a(abase, gr + 3u, gp, sk)); \
    }                                                                         \
  }                                                                           \
  [[unroll]] for (uint q = 0u; q < QTB; ++q) {                                \
    uint g = lid + NT * q;                                                    \
    if (b_walk_k) {                                                           \
      uint gs = col0 + g / GPR, gp = (k0) + (g % GPR) * 4u;                   \
      if (VEC_B_K(gs, gp))                                                    \
        rb[q] = load4(pc.b, bbase + gp + gs * uint(pc.b_sn));                 \
      else                                                                    \
        rb[q] = vec4(load_b(bbase, gp, gs, 1u), load_b(bbase, gp + 1u, gs, 1u), \
                     load_b(bbase, gp + 2u, gs, 1u), load_b(bbase, gp + 3u, gs, 1u)); \
    } else {                                                                  \
      uint gp = (k0) + g / (BN / 4u), gs = col0 + (g % (BN / 4u)) * 4u;       \
      uint sk = uint(pc.b_sk);                                                \
      if (VEC_B_N(gs, gp))                                                    \
        rb[q] = load4(pc.b, bbase + gp * sk + gs);                            \
      else                                                                    \
        rb[q] = vec4(load_b(bbase, gp, gs, sk), load_b(bbase, gp, gs + 1u, sk), \
                     load_b(bbase, gp, gs + 2u, sk), load_b(bbase, gp, gs + 3u, sk)); \
    }                                                                         \
  }

  // Stores ra/rb into shared buffer buf ([k][m] and [k][n] layouts).
#define STORE_SLICE(buf)                                                      \
  [[unroll]] for (uint q = 0u; q < QTA; ++q) {                                \
    uint g = lid + NT * q, base = (buf) * BK * ROW4A;                         \
    if (a_walk_k) {                                                           \
      uint r = g / GPR, p = (g % GPR) * 4u;                                   \
      for (uint e = 0u; e < 4u; ++e)                                          \
        As[base + (p + e) * ROW4A + ((r / 4u) ^ SWZ(p))][r % 4u] = ra[q][e];  \
    } else {                                                                  \
      uint p = g / (BM / 4u), r4 = g % (BM / 4u);                             \
      As[base + p * ROW4A + (r4 ^ SWZ(p))] = ra[q];                           \
    }                                                                         \
  }                                                                           \
  [[unroll]] for (uint q = 0u; q < QTB; ++q) {                                \
    uint g = lid + NT * q, base = (buf) * BK * ROW4B;                         \
    if (b_walk_k) {                                                           \
      uint s = g / GPR, p = (g % GPR) * 4u;                                   \
      for (uint e = 0u; e < 4u; ++e)                                          \
        Bs[base + (p + e) * ROW4B + s / 4u][s % 4u] = rb[q][e];               \
    } else {                                                                  \
      uint p = g / (BN / 4u), s4 = g % (BN / 4u);                             \
      Bs[base + p * ROW4B + s4] = rb[q];                                      \
    }                                                                         \
  }

  // Interior tiles (every row and column inside the matrices, both
  // operands read 4 at a time, k a whole number of slices) run a loop of
  // their own that loads whole slices without bounds checks: each group's
  // element index is computed once and advanced by a fixed step per slice
  // instead of the checked path's index arithmetic and compares. The two
  // loads must not share one loop: merging their results made the driver
  // copy the fresh load's registers at the top of every slice, which waits
  // for the load (f32 4096^3 on an H200 40.2 -> 33.7 TFLOP/s for the wide
  // tile, while the 128x128 tile with A transposed gained 41.9 -> 44.4).
  bool interior = a_vec && b_vec && row0 + BM <= pc.m && col0 + BN <= pc.n &&
                  (k_end - k0) % BK == 0u;
  uint ia[QTA], ib[QTB];  // element index of group q in the slice at kf
  uint a_step = a_walk_k ? BK : BK * uint(pc.a_sk);
  uint b_step = b_walk_k ? BK : BK * uint(pc.b_sk);
  [[unroll]] for (uint q = 0u; q < QTA; ++q) {
    uint g = lid + NT * q;
    ia[q] = a_walk_k ? abase + (row0 + g / GPR) * uint(pc.a_sm) + k0 + (g % GPR) * 4u
                     : abase + row0 + (g % (BM / 4u)) * 4u + (k0 + g / (BM / 4u)) * uint(pc.a_sk);
  }
  [[unroll]] for (uint q = 0u; q < QTB; ++q) {
    uint g = lid + NT * q;
    ib[q] = b_walk_k ? bbase + (col0 + g / GPR) * uint(pc.b_sn) + k0 + (g % GPR) * 4u
                     : bbase + col0 + (g % (BN / 4u)) * 4u + (k0 + g / (BN / 4u)) * uint(pc.b_sk);
  }
  // Loads the slice ia/ib point at and advances them (interior tiles).
#define LOAD_FAST(kf)                                                         \
  [[unroll]] for (uint q = 0u; q < QTA; ++q) {                                \
    ra[q] = load4(pc.a, ia[q]);                                               \
    ia[q] += a_step;                                                          \
  }                                                                           \
  [[unroll]] for (uint q = 0u; q < QTB; ++q) {                                \
    rb[q] = load4(pc.b, ib[q]);                                               \
    ib[q] += b_step;                                                          \
  }

  vec4 acc[8][NGC];
  [[unroll]] for (uint i = 0u; i < 8u; ++i)
    [[unroll]] for (uint h = 0u; h < NGC; ++h) acc[i][h] = vec4(0.0);

  // The k loop, loading each next slice with LOAD (LOAD_FAST or
  // LOAD_SLICE) while the current one is multiplied.
#define K_LOOP(LOAD)                                                          \
  LOAD(k0)                                                                    \
  STORE_SLICE(0u)                                                             \
  barrier();                                                                  \
  for (uint slice = 0u; slice < nslices; ++slice) {                           \
    uint cur = slice & 1u;                                                    \
    bool more = slice + 1u < nslices;                                         \
    if (more) { LOAD(k0 + (slice + 1u) * BK) }                                \
    MULTIPLY_SLICE(cur)                                                       \
    if (more) { STORE_SLICE(cur ^ 1u) }                                       \
    barrier();                                                                \
  }

  // Multiplies shared buffer buf into acc.
#define MULTIPLY_SLICE(buf)                                                   \
  {                                                                           \
    uint base_a = (buf) * BK * ROW4A, base_b = (buf) * BK * ROW4B;            \
    if (SHAPE == 3u) {                                                        \
      [[unroll]] for (uint p = 0u; p < BK; ++p) {                             \
        vec4 a0 = As[base_a + p * ROW4A + (ty ^ SWZ(p))];                     \
        vec4 a1 = As[base_a + p * ROW4A + BM / 8u + (ty ^ SWZ(p))];           \
        vec4 b[NGC];                                                          \
        [[unroll]] for (uint h = 0u; h < NGC; ++h)                            \
          b[h] = Bs[base_b + p * ROW4B + h * (BN / NGC / 4u) + tx];           \
        [[unroll]] for (uint i = 0u; i < 4u; ++i)                             \
          [[unroll]] for (uint h = 0u; h < NGC; ++h) {                        \
            acc[i][h] += a0[i] * b[h];                                        \
            acc[4u + i][h] += a1[i] * b[h];                                   \
          }                                                                   \
      }                                                                       \
    } else {                                                                  \
      vec4 fa0[2], fa1[2], fb[2][NGC];                                        \
      fa0[0] = As[base_a + ty];                                               \
      fa1[0] = As[base_a + BM / 8u + ty];                                     \
      [[unroll]] for (uint h = 0u; h < NGC; ++h)                              \
        fb[0][h] = Bs[base_b + h * (BN / NGC / 4u) + tx];                     \
      [[unroll]] for (uint p = 0u; p < BK; ++p) {                             \
        uint c = p & 1u, nc = c ^ 1u;                                         \
        if (p + 1u < BK) {                                                    \
          fa0[nc] = As[base_a + (p + 1u) * ROW4A + ty];                       \
          fa1[nc] = As[base_a + (p + 1u) * ROW4A + BM / 8u + ty];             \
          [[unroll]] for (uint h = 0u; h < NGC; ++h)                          \
            fb[nc][h] = Bs[base_b + (p + 1u) * ROW4B + h * (BN / NGC / 4u) + tx]; \
        }                                                                     \
        [[unroll]] for (uint i = 0u; i < 4u; ++i)                             \
          [[unroll]] for (uint h = 0u; h < NGC; ++h) {                        \
            acc[i][h] += fa0[c][i] * fb[c][h];                                \
            acc[4u + i][h] += fa1[c][i] * fb[c][h];                           \
          }                                                                   \
      }                                                                       \
    }                                                                         \
  }

  uint nslices = (k_end - k0 + BK - 1u) / BK;
  if (interior) {
    K_LOOP(LOAD_FAST)
  } else {
    K_LOOP(LOAD_SLICE)
  }

  bool split = nsplit > 1u;
  uint cbase = split ? (chunk * pc.nbatch + bat - pc.batch_base) * pc.m * pc.n
                     : bat * pc.m * pc.n;
  [[unroll]] for (uint i = 0u; i < 8u; ++i) {
    uint gr = row0 + (i < 4u ? ty * 4u + i : BM / 2u + ty * 4u + (i - 4u));
    if (gr >= pc.m) continue;
    [[unroll]] for (uint h = 0u; h < NGC; ++h) {
      uint gc = col0 + h * (BN / NGC) + tx * 4u;
#if T_VEC
      uint o = cbase + gr * pc.n + gc;
      if (!split && gc + 4u <= pc.n && o % 4u == 0u) {  // 4 in bounds, aligned
        BufT4(pc.c).v[o / 4u] = T4(acc[i][h]);
        continue;
      }
#endif
      for (uint j = 0u; j < 4u; ++j) {
        if (gc + j >= pc.n) continue;
        if (split) pc.part.v[cbase + gr * pc.n + gc + j] = acc[i][h][j];
        else pc.c.v[cbase + gr * pc.n + gc + j] = T_ST(acc[i][h][j]);
      }
    }
  }
}
