#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "types.glsl"
// trsm.comp - triangular solves (T_ID 10: f32, 11: f64): for each of
// pc.batch systems, M Y = C with M an n x n triangular matrix and C n x
// pc.cols right-hand sides, every operand addressed through strides so
// that Nx's options (lower or upper, A transposed, A on either side, whose
// right-side form X op(A) = B is op(A)^T X^T = B^T) need no copies:
//   M[i][k] = a[b * n * n + i * pc.m_row + k * pc.m_col]
// (offsets within a system below 2^32 elements)
//   C[i][c] = c_in[b * pc.c_batch + i * pc.c_row + c * pc.c_col]
//   Y[i][c] = y[b * pc.c_batch + i * pc.c_row + c * pc.c_col]
// M is lower triangular when pc.flags bit0 is set (forward substitution:
// row p is row p), upper otherwise (backward: row p is row n - 1 - p);
// only that triangle is read. Y[i] = (C[i] - sum_{k before i} M[i][k]
// Y[k]) / M[i][i], as Nx.BinaryBackend defines it, computed right-looking.
//
// With WIDE (f32 on devices with f64) the solve runs in double, as
// Nx.BinaryBackend computes, and each solution is rounded to f32 once: in
// registers (VARIANT 1) or in a workspace at pc.work laid out as Y with
// 8-byte elements (the panel form); otherwise pc.work is pc.y.
//
// VARIANT 1 (at most 4 rows per invocation, orders up to 128): one
// dispatch. Workgroup (x, y): system pc.b0 + y, right-hand sides x *
// pc.nc .. + pc.nc - 1 (pc.nc a power of two up to 256). Invocation t
// takes column t mod nc and the rows p = t / nc mod (256 / nc), which stay
// in its registers; only the solved value of each row crosses
// invocations, through a double-buffered shared array, one barrier a row.
// Workgroup x 0 also writes singular[b]: 1 when M has a zero on its
// diagonal (the host raises Nx's error), else 0.
//
// VARIANT 5 (orders up to RS / nc; the host picks it up to order 512,
// kernels/ops.c's TRSM_STREAM_MAX): one dispatch, one workgroup per
// system (y) and nc right-hand sides (x; nc a power of two up to 8), the
// residuals C - M Y of its columns in shared memory. Panels of PB rows in
// p's order: invocation j < nc solves column j of the panel against the
// diagonal block (in shared memory), then invocation t subtracts the panel's
// contribution from rows t, t + 256, ... below it, reading each element of
// M once for all nc columns, while the next diagonal block's loads are in
// flight. Workgroup x 0 writes the flags.
//
// Larger systems are solved in panels of PB rows (in p's order) in the
// workspace: VARIANT 4 copies C into it (and writes the flags); then for
// each panel, VARIANT 2 solves the panel's rows against its diagonal
// block, one invocation per right-hand side, and VARIANT 3 subtracts the
// panel's contribution from every later row, TRB rows of M and TCW
// right-hand sides a workgroup, M read through shared memory, one
// invocation per element.
// Workgroup y is system pc.b0 + y in those.
#include "common.glsl"
#if T_ID != 10 && T_ID != 11
#error "trsm.comp is built for f32 and f64"
#endif

#ifdef WIDE
#define R double
#define R_BYTES 8
// Final values go to the result; without WIDE that is the workspace
// itself, written through the one pointer.
#define STORE_OUT(e, x) Y.v[e] = T(x)
#else
#define R T
#define R_BYTES T_ALIGN
#define STORE_OUT(e, x) W.v[e] = (x)
#endif

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) readonly buffer InT { T v[]; };
layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) writeonly buffer OutT { T v[]; };
layout(buffer_reference, std430, buffer_reference_align = R_BYTES) buffer WorkR { R v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer FlagRef { uint v[]; };

layout(push_constant, std430) uniform PC {
  uint64_t a;        // M's matrices, batch x n x n
  uint64_t c;        // right-hand sides
  uint64_t y;        // solutions, laid out as the right-hand sides
  uint64_t work;     // the solve's workspace in R: y unless WIDE
  uint64_t singular; // batch u32 flags
  uint64_t c_batch;  // elements between systems of C and Y
  uint m_row, m_col; // M's strides
  uint c_row, c_col; // C's and Y's strides
  uint n;
  uint cols;
  uint batch;
  uint nc;           // right-hand sides a workgroup takes
  uint flags;        // bit0: M lower triangular
  uint b0;           // the first system of this dispatch
  uint p0;           // VARIANTS 2, 3: the panel's first row (in p's order)
  uint pad;
} pc;

shared R solved[2][256];

// At most REG rows per invocation (VARIANT 1: n <= REG * 256 / nc): the
// invocation's elements of Y stay in registers (w[s] is row p = ry + s *
// rows), unrolled loops testing s instead of indexing with it.
#define REG 4

// Row p (in the order of substitution) of M's rows.
uint row_of(uint p, uint n, bool lower) { return lower ? p : n - 1u - p; }

// Panel width of the blocked solve (kernels/ops.c's TRSM_PANEL).
#define PB 32
shared R block[PB][PB + 1];

// VARIANT 5: residual (p, j) at rs[p * nc + j]; VARIANT 3: TRB rows of M
// times the panel's PB columns, rs[r * (PB + 1) + a]. 16 KiB
// (kernels/ops.c's TRSM_STREAM_BYTES).
#define RS (16384 / R_BYTES)
shared R rs[RS];
// kernels/ops.c's TRSM_UPDATE_ROWS and TRSM_UPDATE_COLS; TRB * (PB + 1)
// <= RS for 8-byte R.
#define TRB 56u
#define TCW 32u
shared uint zero_diag;
#define NCMAX 8

// Loads the diagonal block of the panel at p0 (pw rows) into block; the
// caller holds a barrier after it.
void load_block(InT M, uint p0, uint pw, uint n, bool lower) {
  uint lid = gl_LocalInvocationID.x;
  for (uint e = lid; e < PB * PB; e += 256u) {
    uint a = e / PB, q = e % PB;
    R v = a < pw && q <= a ? R(M.v[row_of(p0 + a, n, lower) * pc.m_row +
                                     row_of(p0 + q, n, lower) * pc.m_col])
                           : R(0);
    block[a][q] = v;
  }
}

// Solves the panel's pw rows of one column in x against block, each row's
// sum first and then one division, as Nx.BinaryBackend computes (a
// right-looking form with reciprocals took 40% longer on the H200: the
// quotient's correction and its fallback lengthened every row); rows from
// pw on become 0.
void solve_block(inout R x[PB], uint pw) {
  [[unroll]] for (uint a = 0u; a < PB; a++) {
    R v = x[a];
    [[unroll]] for (uint q = 0u; q < a; q++) v -= block[a][q] * x[q];
    x[a] = a < pw ? v / block[a][a] : R(0);
  }
}

void main() {
  uint b = gl_WorkGroupID.y + pc.b0;
  if (b >= pc.batch) return; // uniform across the workgroup
  uint n = pc.n, nc = pc.nc, rows = 256u / nc;
  uint lid = gl_LocalInvocationID.x;
  bool lower = (pc.flags & 1u) != 0u;
  InT M = InT(pc.a + uint64_t(b) * n * n * uint64_t(T_BITS / 8));
  uint64_t celems = uint64_t(b) * pc.c_batch;
  InT C = InT(pc.c + celems * uint64_t(T_ALIGN));
#ifdef WIDE
  OutT Y = OutT(pc.y + celems * uint64_t(T_ALIGN));
#endif
  WorkR W = WorkR(pc.work + celems * uint64_t(R_BYTES));

  // Workgroup x 0 of VARIANTS 1, 4 and 5 writes the system's flag, the
  // diagonal read by every invocation (uniform: the condition holds for
  // the whole workgroup).
  if ((VARIANT == 1u || VARIANT == 4u || VARIANT == 5u) && gl_WorkGroupID.x == 0u) {
    if (lid == 0u) zero_diag = 0u;
    barrier();
    for (uint i = lid; i < n; i += 256u)
      if (M.v[i * (pc.m_row + pc.m_col)] == T(0)) atomicOr(zero_diag, 1u);
    barrier();
    if (lid == 0u) FlagRef(pc.singular).v[b] = zero_diag;
  }
  if (VARIANT == 5u) {
    uint c0 = gl_WorkGroupID.x * nc;
    uint ncw = c0 < pc.cols ? min(nc, pc.cols - c0) : 0u;
    if (ncw == 0u) return; // uniform
    for (uint e = lid; e < n * nc; e += 256u) {
      uint p = e / nc, j = e - p * nc;
      rs[e] = j < ncw ? R(C.v[(c0 + j) * pc.c_col + row_of(p, n, lower) * pc.c_row]) : R(0);
    }
    load_block(M, 0u, min(PB, n), n, lower);
    barrier();
    for (uint p0 = 0u; p0 < n; p0 += PB) {
      uint pw = min(PB, n - p0);
      if (lid < ncw) {
        R x[PB];
        [[unroll]] for (uint a = 0u; a < PB; a++) x[a] = a < pw ? rs[(p0 + a) * nc + lid] : R(0);
        solve_block(x, pw);
        uint cbase = (c0 + lid) * pc.c_col;
        [[unroll]] for (uint a = 0u; a < PB; a++) {
          if (a < pw) {
            rs[(p0 + a) * nc + lid] = x[a];
            OutT(pc.y + celems * uint64_t(T_ALIGN)).v[cbase + row_of(p0 + a, n, lower) * pc.c_row] =
                T(x[a]);
          }
        }
      }
      barrier();
      uint np = p0 + PB;
      if (np >= n) break; // uniform
      // The next diagonal block's elements, in flight during the update.
      uint npw = min(PB, n - np);
      T pre[PB * PB / 256];
      [[unroll]] for (uint u = 0u; u < PB * PB / 256; u++) {
        uint e = lid + u * 256u, a = e / PB, q = e % PB;
        pre[u] = a < npw && q <= a ? M.v[row_of(np + a, n, lower) * pc.m_row +
                                         row_of(np + q, n, lower) * pc.m_col]
                                   : T(0);
      }
      // Rows q and q + 256 below the panel per pass, their loads together.
      for (uint q = np + lid; q < n; q += 512u) {
        uint q2 = q + 256u;
        uint k = row_of(q, n, lower), k2 = q2 < n ? row_of(q2, n, lower) : k;
        T m1[PB], m2[PB];
        [[unroll]] for (uint a = 0u; a < PB; a++) {
          uint col = row_of(p0 + a, n, lower) * pc.m_col;
          m1[a] = M.v[k * pc.m_row + col];
          m2[a] = M.v[k2 * pc.m_row + col];
        }
        R acc1[NCMAX], acc2[NCMAX];
        [[unroll]] for (uint j = 0u; j < NCMAX; j++) {
          acc1[j] = R(0);
          acc2[j] = R(0);
        }
        [[unroll]] for (uint a = 0u; a < PB; a++) {
          [[unroll]] for (uint j = 0u; j < NCMAX; j++) {
            if (j < nc) {
              R xv = rs[(p0 + a) * nc + j];
              acc1[j] += R(m1[a]) * xv;
              acc2[j] += R(m2[a]) * xv;
            }
          }
        }
        [[unroll]] for (uint j = 0u; j < NCMAX; j++) {
          if (j < nc) {
            rs[q * nc + j] -= acc1[j];
            if (q2 < n) rs[q2 * nc + j] -= acc2[j];
          }
        }
      }
      // The panel's solve, the last reader of block, ended at the barrier.
      [[unroll]] for (uint u = 0u; u < PB * PB / 256; u++) {
        uint e = lid + u * 256u, a = e / PB, q = e % PB;
        block[a][q] = R(pre[u]);
      }
      barrier();
    }
    return;
  }
  if (VARIANT == 4u) {
    uint total = n * pc.cols;
    for (uint e = gl_WorkGroupID.x * 256u + lid; e < total; e += gl_NumWorkGroups.x * 256u) {
      uint i = e / pc.cols, c = e - i * pc.cols;
      uint at = i * pc.c_row + c * pc.c_col;
      W.v[at] = R(C.v[at]);
    }
    return;
  }
  if (VARIANT == 2u) {
    uint p0 = pc.p0, pw = min(PB, n - p0);
    load_block(M, p0, pw, n, lower);
    barrier();
    uint c = gl_WorkGroupID.x * 256u + lid;
    if (c >= pc.cols) return;
    uint cbase = c * pc.c_col;
    R x[PB];
    [[unroll]] for (uint a = 0u; a < PB; a++)
      x[a] = a < pw ? W.v[cbase + row_of(p0 + a, n, lower) * pc.c_row] : R(0);
    solve_block(x, pw);
    [[unroll]] for (uint a = 0u; a < PB; a++) {
      if (a < pw) STORE_OUT(cbase + row_of(p0 + a, n, lower) * pc.c_row, x[a]);
#ifdef WIDE
      if (a < pw) W.v[cbase + row_of(p0 + a, n, lower) * pc.c_row] = x[a];
#endif
    }
    return;
  }
  if (VARIANT == 3u) {
    // Rows q from p0 + PB on, TRB at a time, and right-hand sides TCW at
    // a time (workgroup x, grid-stride over both): the block of
    // M[q][panel] staged through shared memory (rs), read along whichever
    // of M's strides is 1, then element (q, c) less that row of the block
    // times column c of the panel's solutions.
    uint p0 = pc.p0, first = p0 + PB, cols = pc.cols;
    uint nblk = (n - first + TRB - 1u) / TRB, nchunk = (cols + TCW - 1u) / TCW;
    bool by_row = pc.m_col == 1u;
    for (uint job = gl_WorkGroupID.x; job < nblk * nchunk; job += gl_NumWorkGroups.x) {
      uint blk = job / nchunk, c0 = (job - blk * nchunk) * TCW, cw = min(TCW, cols - c0);
      uint q0 = first + blk * TRB;
      for (uint e = lid; e < TRB * PB; e += 256u) {
        uint r = by_row ? e / PB : e % TRB, a = by_row ? e % PB : e / TRB;
        rs[r * (PB + 1u) + a] = q0 + r < n ? R(M.v[row_of(q0 + r, n, lower) * pc.m_row +
                                                  row_of(p0 + a, n, lower) * pc.m_col])
                                           : R(0);
      }
      barrier();
      uint total = min(TRB, n - q0) * cw;
      for (uint e = lid; e < total; e += 256u) {
        uint r = e / cw, c = c0 + e - r * cw;
        uint cbase = c * pc.c_col;
        R acc[4] = R[4](R(0), R(0), R(0), R(0));
        [[unroll]] for (uint a = 0u; a < PB; a++)
          acc[a & 3u] += rs[r * (PB + 1u) + a] * W.v[cbase + row_of(p0 + a, n, lower) * pc.c_row];
        W.v[cbase + row_of(q0 + r, n, lower) * pc.c_row] -= (acc[0] + acc[1]) + (acc[2] + acc[3]);
      }
      barrier();
    }
    return;
  }

  // VARIANT 1.
  uint cx = lid & (nc - 1u), ry = lid / nc;
  uint c = gl_WorkGroupID.x * nc + cx;
  bool live = c < pc.cols;
  uint cbase = c * pc.c_col;
  R w[REG];
  [[unroll]] for (uint s = 0u; s < REG; s++) {
    uint q = ry + s * rows;
    w[s] = R(0);
    if (live && q < n) w[s] = R(C.v[cbase + row_of(q, n, lower) * pc.c_row]);
  }
  for (uint p = 0u; p < n; p++) {
    uint i = row_of(p, n, lower);
    uint buf = p & 1u;
    if (live && p % rows == ry) {
      uint sp = p / rows;
      R mii = R(M.v[i * (pc.m_row + pc.m_col)]);
      [[unroll]] for (uint s = 0u; s < REG; s++) {
        if (s == sp) {
          R v = w[s] / mii;
#ifdef WIDE
          Y.v[cbase + i * pc.c_row] = T(v);
#else
          OutT(pc.y + celems * uint64_t(T_ALIGN)).v[cbase + i * pc.c_row] = v;
#endif
          solved[buf][cx] = v;
        }
      }
    }
    barrier();
    if (live) {
      R v = solved[buf][cx];
      [[unroll]] for (uint s = 0u; s < REG; s++) {
        uint q = ry + s * rows;
        if (q > p && q < n) w[s] -= R(M.v[row_of(q, n, lower) * pc.m_row + i * pc.m_col]) * v;
      }
    }
  }
}
