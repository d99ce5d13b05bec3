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
// with pc.cols <= NCMAX right-hand sides, all taken by each workgroup.
//
// Workgroup y is system pc.b0 + y; its pc.nblk workgroups along x take
// the blocks of B rows (in p's order) in the order they start, by an
// atomic ticket, not by their ids: the workgroup holding block k waits
// only on blocks 0..k-1, whose workgroups had started before it, so the
// solve progresses on any device that keeps running the workgroups it has
// started, however few of them run at once. Block k:
// - loads its diagonal block into shared memory and its right-hand sides;
// - for the blocks j < k in order, as soon as block j's flag is set (one
//   invocation polls it), subtracts M[block k][block
//   j] Y[block j] from its residuals; M's elements of the next block are
//   loaded before the wait, so only Y's loads follow the flag;
// - solves its rows against the diagonal block, each row's sum first and
//   then one division (Nx.BinaryBackend's quotient), the rows of the block
//   in one subgroup of 32 invocations per right-hand side exchanging each
//   solved value by a shuffle (VARIANT 1; devices with subgroups of 32 or
//   more), or through shared memory with a barrier a row (VARIANT 0);
// - writes its rows of Y (and of the workspace), then, after a buffer
//   memory barrier and the workgroup's barrier, sets its flag.
// Flags are u32 words at pc.sync, per system: the ticket counter, then one
// flag per block (all zero before the dispatch): 1, | 2 when a block up to
// this one has a zero on M's diagonal, | 4 when a wait up to this one gave
// up. The last block writes singular[b]: 1 for a zero on the diagonal (the
// host raises Nx's error), | 2 when a wait gave up after SPIN_LIMIT polls
// (or llvmpipe ended the loop: gallivm ends an invocation's loops after
// 65535 iterations in all), in which case the solution is not valid.
//
// With WIDE (f32 on devices with f64) the solve runs in double: each
// solution is rounded to f32 once into Y, and kept in double in the
// workspace at pc.work (laid out as Y with 8-byte elements), which the
// later blocks read; otherwise pc.work is pc.y.
#include "common.glsl"
#if T_ID != 10 && T_ID != 11
#error "trsv.comp is built for f32 and f64"
#endif

#ifdef WIDE
#define R double
#define R_BYTES 8
#else
#define R T
#define R_BYTES T_ALIGN
#endif

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) readonly buffer InT { T v[]; };
layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) writeonly buffer OutT { T v[]; };
// Solved rows cross workgroups: coherent, written before a buffer memory
// barrier and the flag, read after the flag and a buffer memory barrier.
layout(buffer_reference, std430, buffer_reference_align = R_BYTES) coherent buffer WorkR { R v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) coherent volatile buffer SyncRef { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer FlagRef { uint v[]; };

layout(push_constant, std430) uniform PC {
  uint64_t a;        // M's matrices, batch x n x n
  uint64_t c;        // right-hand sides
  uint64_t y;        // solutions, laid out as the right-hand sides
  uint64_t work;     // solved rows in R, laid out as Y: y unless WIDE
  uint64_t singular; // batch u32 flags
  uint64_t sync;     // batch x (nblk + 1) u32: ticket, then block flags
  uint64_t c_batch;  // elements between systems of C and Y
  uint m_row, m_col; // M's strides
  uint c_row, c_col; // C's and Y's strides
  uint n;
  uint cols;         // right-hand sides, 1..NCMAX
  uint batch;
  uint flags;        // bit0: M lower triangular
  uint b0;           // the first system of this dispatch
  uint nblk;         // blocks of B rows: ceil(n / B)
  uint pad0, pad1;
} pc;

#define B 32u
#define NCMAX 8u
// Polls of a flag before a wait gives up (far longer than any solve).
#define SPIN_LIMIT (1u << 22)
#define F_DONE 1u
#define F_ZERO 2u
#define F_LATE 4u

shared R dblk[B][B + 1];  // the diagonal block; rows from pw on: identity
shared R red[B][B + 1];   // partial sums of one right-hand side's rows
shared R sol[NCMAX][B];   // VARIANT 0: each row's solution as it is found
shared uint sh_k;         // this workgroup's block
shared uint sh_upto[2];   // blocks below this one known solved, by pass
shared uint sh_bits;      // F_ZERO and F_LATE bits seen

uint row_of(uint p, uint n, bool lower) { return lower ? p : n - 1u - p; }

void main() {
  uint b = gl_WorkGroupID.y + pc.b0;
  if (b >= pc.batch) return; // uniform across the workgroup
  uint lid = gl_LocalInvocationID.x;
  uint n = pc.n, nc = pc.cols, nblk = pc.nblk;
  bool lower = (pc.flags & 1u) != 0u;
  SyncRef S = SyncRef(pc.sync + uint64_t(b) * (nblk + 1u) * 4u);
  if (lid == 0u) {
    sh_k = atomicAdd(S.v[0], 1u);
    sh_bits = 0u;
  }
  barrier();
  uint k = sh_k;
  uint p0 = k * B, pw = min(B, n - p0);
  InT M = InT(pc.a + uint64_t(b) * n * n * uint64_t(T_BITS / 8));
  uint64_t celems = uint64_t(b) * pc.c_batch;
  InT C = InT(pc.c + celems * uint64_t(T_ALIGN));
  OutT Y = OutT(pc.y + celems * uint64_t(T_ALIGN));
  WorkR W = WorkR(pc.work + celems * uint64_t(R_BYTES));
  bool by_row = pc.m_col == 1u; // M's rows contiguous, else its columns

  // The diagonal block (rows from pw on: identity), read along whichever
  // of M's strides is 1, and its zero check.
  for (uint e = lid; e < B * B; e += 256u) {
    uint a = by_row ? e / B : e % B, q = by_row ? e % B : e / B;
    R v = a == q ? R(1) : R(0);
    if (a < pw && q <= a) {
      v = R(M.v[row_of(p0 + a, n, lower) * pc.m_row + row_of(p0 + q, n, lower) * pc.m_col]);
      if (a == q && v == R(0)) atomicOr(sh_bits, F_ZERO);
    }
    dblk[a][q] = v;
  }
  // Invocation (r, j) = (lid % B, lid / B) solves row r of the block for
  // right-hand side j: its right-hand side, loaded now.
  uint r = lid % B, jr = lid / B;
  bool solver = jr < nc;
  R x = R(0);
  if (solver && r < pw)
    x = R(C.v[row_of(p0 + r, n, lower) * pc.c_row + jr * pc.c_col]);

  // acc[s][j]: invocation lid's partial sums of M[block k][block j] Y for
  // right-hand side j. by_row: rows l8 + 8s, column lane (a warp reads a
  // row's 32 contiguous elements); otherwise row lane, columns l8 + 8s.
  uint lane = lid % B, l8 = lid / B;
  R acc[4][NCMAX];
  [[unroll]] for (uint s = 0u; s < 4u; s++)
    [[unroll]] for (uint j = 0u; j < NCMAX; j++) acc[s][j] = R(0);
  uint done = 0u, pass = 0u;
  uint bits = 0u; // invocation 0: the flags' bits it has read
  while (done < k) { // uniform: done and k are the workgroup's
    // M's elements of block `done`, in flight during the wait.
    T mv[4];
    [[unroll]] for (uint s = 0u; s < 4u; s++) {
      uint rr = by_row ? l8 + 8u * s : lane, q = by_row ? lane : l8 + 8u * s;
      mv[s] = rr < pw ? M.v[row_of(p0 + rr, n, lower) * pc.m_row +
                            row_of(done * B + q, n, lower) * pc.m_col]
                      : T(0);
    }
    if (lid == 0u) {
      uint s = done, v = 0u, spins = 0u;
      for (;;) {
        v = S.v[1u + s];
        if (v != 0u || ++spins >= SPIN_LIMIT) break;
      }
      if (v == 0u) {
        bits |= F_LATE; // go on: the flags report the solution invalid
        s = k;
      } else {
        bits |= v;
        s++;
        // Every later block already solved, without waiting.
        while (s < k) {
          v = S.v[1u + s];
          if (v == 0u) break;
          bits |= v;
          s++;
        }
      }
      sh_upto[pass & 1u] = s;
      memoryBarrierBuffer(); // the flags read before the rows they guard
    }
    barrier();
    uint upto = sh_upto[pass & 1u];
    pass++;
    for (uint jb = done; jb < upto; jb++) {
      if (jb != done) {
        [[unroll]] for (uint s = 0u; s < 4u; s++) {
          uint rr = by_row ? l8 + 8u * s : lane, q = by_row ? lane : l8 + 8u * s;
          mv[s] = rr < pw ? M.v[row_of(p0 + rr, n, lower) * pc.m_row +
                                row_of(jb * B + q, n, lower) * pc.m_col]
                          : T(0);
        }
      }
      // Blocks before the last are full: every row jb * B + q exists.
      if (by_row) {
        uint yrow = row_of(jb * B + lane, n, lower) * pc.c_row;
        [[unroll]] for (uint j = 0u; j < NCMAX; j++) {
          if (j < nc) {
            R yv = W.v[yrow + j * pc.c_col];
            [[unroll]] for (uint s = 0u; s < 4u; s++) acc[s][j] += R(mv[s]) * yv;
          }
        }
      } else {
        [[unroll]] for (uint s = 0u; s < 4u; s++) {
          uint yrow = row_of(jb * B + l8 + 8u * s, n, lower) * pc.c_row;
          [[unroll]] for (uint j = 0u; j < NCMAX; j++)
            if (j < nc) acc[s][j] += R(mv[s]) * W.v[yrow + j * pc.c_col];
        }
      }
    }
    done = upto;
  }

  // Each right-hand side's row sums through shared memory, in a fixed
  // order, taken from the solvers' residuals.
  if (k > 0u) {
    for (uint j = 0u; j < nc; j++) { // uniform
      [[unroll]] for (uint s = 0u; s < 4u; s++) {
        R v = R(0);
        [[unroll]] for (uint jj = 0u; jj < NCMAX; jj++)
          if (jj == j) v = acc[s][jj];
        if (by_row) red[l8 + 8u * s][lane] = v;
        else red[lane][l8 * 4u + s] = v;
      }
      barrier();
      if (jr == j) {
        R t = R(0);
        [[unroll]] for (uint e = 0u; e < B; e++) t += red[r][e];
        x -= t;
      }
      barrier();
    }
  } else {
    barrier(); // dblk's stores before the solve's reads
  }

  // The block's solve: row q's solution is its residual over M[q][q], then
  // taken from every later row's residual.
  R y = R(0);
  if (VARIANT == 1u) {
    // Subgroups of at least 32 (the host checks): right-hand side jr's
    // rows in lanes base .. base + 31 of one subgroup.
    if (solver) {
      uint base = gl_SubgroupInvocationID & ~(B - 1u);
      [[unroll]] for (uint q = 0u; q < B; q++) {
        R yq = subgroupShuffle(x, base | q) / dblk[q][q];
        if (r == q) y = yq;
        if (r > q) x -= dblk[r][q] * yq;
      }
    }
  } else {
    for (uint q = 0u; q < B; q++) {
      if (solver && r == q) {
        y = x / dblk[q][q];
        sol[jr][q] = y;
      }
      barrier();
      if (solver && r > q) x -= dblk[r][q] * sol[jr][q];
    }
  }
  if (solver && r < pw) {
    uint at = row_of(p0 + r, n, lower) * pc.c_row + jr * pc.c_col;
#ifdef WIDE
    Y.v[at] = T(y);
#endif
    W.v[at] = y;
  }
  memoryBarrierBuffer(); // the rows written before the flag
  barrier();
  if (lid == 0u) {
    bits |= sh_bits;
    S.v[1u + k] = F_DONE | bits;
    // The last block has read every other block's flag.
    if (k == nblk - 1u)
      FlagRef(pc.singular).v[b] = ((bits & F_ZERO) != 0u ? 1u : 0u) | ((bits & F_LATE) != 0u ? 2u : 0u);
  }
}
