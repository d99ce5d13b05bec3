#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "types.glsl"
// trsv.comp - triangular solves with few right-hand sides in one dispatch
// whose workgroups hand solved rows to one another through memory (T_ID
// 10: f32, 11: f64). The systems are those of trsm.comp, addressed the same
// way (pc.flags bit0: M lower triangular; row p in the order of
// substitution is row p when lower, n - 1 - p otherwise):
//   M[i][k] = a[b * n * n + i * pc.m_row + k * pc.m_col]
//   C[i][c] = c_in[b * pc.c_batch + i * pc.c_row + c * pc.c_col]
//   Y[i][c] = y[b * pc.c_batch + i * pc.c_row + c * pc.c_col]
// with pc.cols right-hand sides, taken in chunks of NC (1..NCMAX): each
// chunk of each system is an independent chain of blocks.
//
// Workgroup y is system pc.b0 + y; workgroups x = chunk * nblk .. chunk *
// nblk + nblk - 1 take that chunk's blocks of B rows (in p's order) in
// the order they start, by an atomic ticket per chunk, not by their ids:
// the workgroup holding block k waits only on blocks 0..k-1 of its chunk,
// whose workgroups had started before it, so the solve progresses on any
// device that keeps running the workgroups it has started, however few
// of them run at once.
//
// Solved values cross workgroups by themselves: the workspace (pc.work, Y
// itself unless WIDE) holds SENTINEL, a signalling NaN that no arithmetic
// produces, before the dispatch (the host fills it), and an invocation
// that needs a solved value polls its element until it differs. So each
// value is its own flag: no flag word, no ordering between values. Block
// k:
// - loads its diagonal block into shared memory and its right-hand sides;
// - subtracts M[block k][block j] Y[block j] for the blocks j < k - 1
//   (without SUBGROUP_ROWS: j < k), each invocation loading the block's values it
//   multiplies together and polling those not yet solved, then sums the
//   invocations' parts through shared memory;
// - SUBGROUP_ROWS (subgroups of at least 32; the host checks): one subgroup of
//   32 invocations per right-hand side, invocation r holding row r, polls
//   block k - 1's values (one each, exchanged by shuffles), subtracts that
//   block's part (row r of M's block loaded before the wait), then solves
//   the block's rows, each solved value shuffled to the later rows;
//   otherwise block k - 1 with the others, and the solved values through
//   shared memory, a barrier a row;
// - writes its solved values.
// A row is solved as its sum, then the quotient over M's diagonal element:
// y = x * r corrected once by the residual x - y d (r = 1 / d computed
// before the sums are known, so the division leaves the chain of
// dependent rows), which gives the quotient within an ulp; a block with a
// diagonal element of magnitude outside [2^-(RANGE), 2^RANGE] (zero, NaN,
// subnormal or huge, where the reciprocal loses precision) divides
// instead.
//
// pc.sync holds 2 + chunks u32 words per system, zero before the
// dispatch: the bits of the waits that gave up (LATE: after SPIN_LIMIT
// polls, or when llvmpipe ended the loop: gallivm ends an invocation's
// loops after 65535 iterations in all), the chunks finished, and each
// chunk's ticket counter. A chunk's last block also checks the whole
// diagonal; the last of them to finish writes singular[b]: 1 for a zero
// on it (the host raises Nx's error), | 2 when a wait gave up (the
// solution is then not valid).
//
// With WIDE (f32 on devices with f64) the solve runs in double: each
// solution is rounded to f32 once into Y and kept in double in the
// workspace (laid out as Y with 8-byte elements), which later blocks read.
#include "common.glsl"
#if T_ID != 10 && T_ID != 11
#error "trsv.comp is built for f32 and f64"
#endif

#if defined(WIDE) || T_ID == 11
#define R double
#define R_BYTES 8
#define RBITS uint64_t
#define R_TO_BITS(x) doubleBitsToUint64(x)
#define BITS_TO_R(x) uint64BitsToDouble(x)
// kernels/ops.c's TRSV_SENTINEL_F64.
#define SENTINEL 0x7FF00000DEADBEEFul
#define RANGE 500
#else
#define R float
#define R_BYTES 4
#define RBITS uint
#define R_TO_BITS(x) floatBitsToUint(x)
#define BITS_TO_R(x) uintBitsToFloat(x)
// kernels/ops.c's TRSV_SENTINEL_F32.
#define SENTINEL 0x7F80BEEFu
#define RANGE 60
#endif

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) readonly buffer InT { T v[]; };
layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) writeonly buffer OutT { T v[]; };
// Solved values, as bits (SENTINEL until written); polled, so volatile.
layout(buffer_reference, std430, buffer_reference_align = R_BYTES) coherent volatile buffer WorkR { RBITS v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer SyncRef { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer FlagRef { uint v[]; };

layout(push_constant, std430) uniform PC {
  uint64_t a;        // M's matrices, batch x n x n
  uint64_t c;        // right-hand sides
  uint64_t y;        // solutions, laid out as the right-hand sides
  uint64_t work;     // solved values in R, laid out as Y: y unless WIDE
  uint64_t singular; // batch u32 flags
  uint64_t sync;     // batch x (2 + chunks) u32: bits of waits given up,
                     // chunks finished, a ticket counter per chunk
  uint64_t c_batch;  // elements between systems of C and Y
  uint m_row, m_col; // M's strides
  uint c_row, c_col; // C's and Y's strides
  uint n;
  uint cols;         // right-hand sides, taken NC at a time
  uint batch;
  uint flags;        // bit0: M lower triangular
  uint b0;           // the first system of this dispatch
  uint nblk;         // blocks of B rows: ceil(n / B)
  uint chunks;       // chunks of NC right-hand sides: ceil(cols / NC)
  uint pad;
} pc;

#define B 32u
#define NCMAX 8u
// The right-hand sides a workgroup takes (1..NCMAX), a specialization
// constant (the op's) so that the per-right-hand-side arrays and loops
// have their exact size.
#define NC OP
// VARIANT bit 0: a block's rows in one subgroup (the host checks that
// subgroups have at least 32 invocations); else through shared memory.
// Bit 1: the last chunk may hold fewer than NC right-hand sides (else
// every chunk is full, and that count too is a constant).
#define SUBGROUP_ROWS ((VARIANT & 1u) != 0u)
#define PARTIAL ((VARIANT & 2u) != 0u)
// Polls of a value before a wait gives up (far longer than any solve).
#define SPIN_LIMIT (1u << 22)
#define LATE 2u

shared R dblk[B][B + 1];  // the diagonal block; rows from pw on: identity
shared R red[NCMAX * B * 8u]; // partial sums of the rows (B x (B + 1) or
                              // NCMAX x B x 8, see the sums)
shared R sol[NCMAX][B];   // without SUBGROUP_ROWS: each row's solution
shared R rdg[B];          // reciprocals of the diagonal block's diagonal
shared uint sh_k;         // this workgroup's block
shared uint sh_flags;     // 1: a zero on the diagonal (last block); 2: the
                          // block divides (an extreme diagonal element)

uint row_of(uint p, uint n, bool lower) { return lower ? p : n - 1u - p; }

// The solved value at element at of W, once written: polls it (at most
// SPIN_LIMIT times; then records LATE in sync and returns 0).
R await_value(WorkR W, uint at, SyncRef S) {
  RBITS v = W.v[at];
  uint spins = 0u;
  while (v == SENTINEL && ++spins < SPIN_LIMIT) v = W.v[at];
  if (v == SENTINEL) {
    atomicOr(S.v[0], LATE);
    return R(0);
  }
  return BITS_TO_R(v);
}

// x / d through d's reciprocal rd: the product, corrected once by its
// residual (exact by fma).
R quotient(R x, R d, R rd) {
  R y = x * rd;
  return fma(fma(-y, d, x), rd, y);
}

void main() {
  uint b = gl_WorkGroupID.y + pc.b0;
  if (b >= pc.batch) return; // uniform across the workgroup
  uint lid = gl_LocalInvocationID.x;
  uint n = pc.n, nc = NC, nblk = pc.nblk;
  // Right-hand sides c0 .. c0 + ncw - 1: an independent chain of blocks.
  uint chunk = gl_WorkGroupID.x / nblk, c0 = chunk * NC;
  uint ncw = PARTIAL ? min(NC, pc.cols - c0) : NC;
  bool lower = (pc.flags & 1u) != 0u;
  SyncRef S = SyncRef(pc.sync + uint64_t(b) * (2u + pc.chunks) * 4u);
  if (lid == 0u) {
    sh_k = atomicAdd(S.v[2u + chunk], 1u);
    sh_flags = 0u;
  }
  barrier();
  uint k = sh_k;
  uint p0 = k * B, pw = min(B, n - p0);
  bool last = k == nblk - 1u;
  InT M = InT(pc.a + uint64_t(b) * n * n * uint64_t(T_BITS / 8));
  uint64_t celems = uint64_t(b) * pc.c_batch + uint64_t(c0) * pc.c_col;
  InT C = InT(pc.c + celems * uint64_t(T_ALIGN));
  WorkR W = WorkR(pc.work + celems * uint64_t(R_BYTES));
  bool by_row = pc.m_col == 1u; // M's rows contiguous, else its columns

  // The last block checks the whole diagonal (uniform branch), the others
  // having started before it; every block loads its diagonal block (rows
  // from pw on: identity), read along whichever of M's strides is 1.
  if (last) {
    for (uint i = lid; i < n; i += 256u)
      if (M.v[i * (pc.m_row + pc.m_col)] == T(0)) atomicOr(sh_flags, 1u);
  }
  for (uint e = lid; e < B * B; e += 256u) {
    uint a = by_row ? e / B : e % B, q = by_row ? e % B : e / B;
    R v = a == q ? R(1) : R(0);
    if (a < pw && q <= a) {
      v = R(M.v[row_of(p0 + a, n, lower) * pc.m_row + row_of(p0 + q, n, lower) * pc.m_col]);
      if (a == q && !(abs(v) >= ldexp(R(1), -RANGE) && abs(v) <= ldexp(R(1), RANGE)))
        atomicOr(sh_flags, 2u);
    }
    dblk[a][q] = v;
    if (a == q) rdg[a] = R(1) / v;
  }
  // Invocation (r, jr) = (lid % B, lid / B) solves row r of the block for
  // right-hand side jr: its right-hand side, loaded now.
  uint r = lid % B, jr = lid / B;
  bool solver = jr < ncw;
  R x = R(0);
  if (solver && r < pw)
    x = R(C.v[row_of(p0 + r, n, lower) * pc.c_row + jr * pc.c_col]);

  // Blocks 0 .. first_late - 1 by every invocation: acc[s][j], its parts
  // of M[block k][block j] Y for right-hand side j. by_row: rows l8 + 8s,
  // column lane (a warp reads a row's 32 contiguous elements); otherwise
  // row lane, columns l8 + 8s.
  uint first_late = SUBGROUP_ROWS && k > 0u ? k - 1u : k;
  uint lane = lid % B, l8 = lid / B;
  R acc[4][NCMAX];
  [[unroll]] for (uint s = 0u; s < 4u; s++)
    [[unroll]] for (uint j = 0u; j < NCMAX; j++) acc[s][j] = R(0);
  for (uint jb = 0u; jb < first_late; jb++) {
    T mv[4];
    [[unroll]] for (uint s = 0u; s < 4u; s++) {
      uint rr = by_row ? l8 + 8u * s : lane, q = by_row ? lane : l8 + 8u * s;
      mv[s] = rr < pw ? M.v[row_of(p0 + rr, n, lower) * pc.m_row +
                            row_of(jb * B + q, n, lower) * pc.m_col]
                      : T(0);
    }
    // The block's values this invocation multiplies (by_row: row lane of
    // the block, else rows l8 + 8s), all loads issued before any is
    // waited on; blocks before the last are full.
    RBITS yb[4][NCMAX];
    [[unroll]] for (uint s = 0u; s < 4u; s++) {
      uint yrow = row_of(jb * B + (by_row ? lane : l8 + 8u * s), n, lower) * pc.c_row;
      [[unroll]] for (uint j = 0u; j < NCMAX; j++)
        if ((s == 0u || !by_row) && j < ncw) yb[s][j] = W.v[yrow + j * pc.c_col];
    }
    [[unroll]] for (uint s = 0u; s < 4u; s++) {
      uint yrow = row_of(jb * B + (by_row ? lane : l8 + 8u * s), n, lower) * pc.c_row;
      [[unroll]] for (uint j = 0u; j < NCMAX; j++) {
        if ((s == 0u || !by_row) && j < ncw) {
          R yv = yb[s][j] == SENTINEL ? await_value(W, yrow + j * pc.c_col, S)
                                      : BITS_TO_R(yb[s][j]);
          if (by_row) {
            [[unroll]] for (uint t = 0u; t < 4u; t++) acc[t][j] += R(mv[t]) * yv;
          } else {
            acc[s][j] += R(mv[s]) * yv;
          }
        }
      }
    }
  }
  // Each right-hand side's row sums, in a fixed order, taken from the
  // solvers' residuals: by_row through red, a right-hand side at a time (on
  // the H200 this took less time than subgroupAdd over a subgroup's
  // parts); with rows in lanes, each invocation's four parts summed, then
  // the eight invocations' sums of a row.
  if (first_late > 0u) {
    if (by_row) {
      for (uint j = 0u; j < nc; j++) { // uniform
        [[unroll]] for (uint t = 0u; t < 4u; t++) {
          R v = R(0);
          [[unroll]] for (uint jj = 0u; jj < NCMAX; jj++)
            if (jj == j) v = acc[t][jj];
          red[(l8 + 8u * t) * (B + 1u) + lane] = v;
        }
        barrier();
        if (jr == j) {
          R t = R(0);
          [[unroll]] for (uint e = 0u; e < B; e++) t += red[r * (B + 1u) + e];
          x -= t;
        }
        barrier();
      }
    } else {
      [[unroll]] for (uint j = 0u; j < NCMAX; j++)
        if (j < nc) red[(j * B + lane) * 8u + l8] = (acc[0][j] + acc[1][j]) + (acc[2][j] + acc[3][j]);
      barrier();
      if (solver) {
        R t = R(0);
        [[unroll]] for (uint e = 0u; e < 8u; e++) t += red[(jr * B + r) * 8u + e];
        x -= t;
      }
    }
  } else {
    barrier(); // dblk's and sh_flags' stores before their reads
  }
  bool divide = (sh_flags & 2u) != 0u;

  // The block's solve: row q's solution is its residual over M[q][q], then
  // taken from every later row's residual.
  R y = R(0);
  if (SUBGROUP_ROWS) {
    if (solver) { // whole subgroups
      uint base = gl_SubgroupInvocationID & ~(B - 1u);
      if (k > 0u) {
        // Block k - 1: row r of M's block first, then the values.
        uint jb = k - 1u;
        R m[B];
        [[unroll]] for (uint q = 0u; q < B; q++)
          m[q] = r < pw ? R(M.v[row_of(p0 + r, n, lower) * pc.m_row +
                                 row_of(jb * B + q, n, lower) * pc.m_col])
                        : R(0);
        R yv = await_value(W, row_of(jb * B + r, n, lower) * pc.c_row + jr * pc.c_col, S);
        R t[4] = R[4](R(0), R(0), R(0), R(0));
        [[unroll]] for (uint q = 0u; q < B; q++)
          t[q & 3u] += m[q] * subgroupShuffle(yv, base | q);
        x -= (t[0] + t[1]) + (t[2] + t[3]);
      }
      if (divide) {
        [[unroll]] for (uint q = 0u; q < B; q++) {
          R yq = subgroupShuffle(x, base | q) / dblk[q][q];
          if (r == q) y = yq;
          if (r > q) x -= dblk[r][q] * yq;
        }
      } else {
        [[unroll]] for (uint q = 0u; q < B; q++) {
          R yq = quotient(subgroupShuffle(x, base | q), dblk[q][q], rdg[q]);
          if (r == q) y = yq;
          if (r > q) x -= dblk[r][q] * yq;
        }
      }
    }
  } else {
    for (uint q = 0u; q < B; q++) {
      if (solver && r == q) {
        y = divide ? x / dblk[q][q] : quotient(x, dblk[q][q], rdg[q]);
        sol[jr][q] = y;
      }
      barrier();
      if (solver && r > q) x -= dblk[r][q] * sol[jr][q];
    }
  }
  if (solver && r < pw) {
    uint at = row_of(p0 + r, n, lower) * pc.c_row + jr * pc.c_col;
#ifdef WIDE
    OutT(pc.y + celems * uint64_t(T_ALIGN)).v[at] = T(y);
#endif
    W.v[at] = R_TO_BITS(y);
  }
  if (last) { // uniform
    // Every other block of the chunk was read (so their waits ended)
    // before this barrier; the last chunk to finish writes the flag.
    memoryBarrierBuffer();
    barrier();
    if (lid == 0u && atomicAdd(S.v[1], 1u) == pc.chunks - 1u) {
      memoryBarrierBuffer();
      uint late = atomicOr(S.v[0], 0u);
      FlagRef(pc.singular).v[b] = (sh_flags & 1u) | (late & LATE);
    }
  }
}
