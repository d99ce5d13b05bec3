#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_memory_scope_semantics : require
#include "types.glsl"
// lu.comp - LU factorization with partial pivoting (LAPACK's getrf) of
// each of pc.batch dense n x n matrices (T_ID 10: f32, 11: f64), returned
// as Nx.LinAlg.lu returns it: A = P L U, P a permutation matrix, L unit
// lower triangular, U upper triangular, each a dense n x n matrix of T.
//
// Step j takes as pivot the first row i >= j whose element in column j
// has the largest magnitude, swaps rows j and i (whole rows: the
// multipliers already in columns < j move with them), divides column j
// below the diagonal by the pivot (a zero pivot, whose column is zero
// below it, leaves it as it is), and subtracts the outer product of that
// column and row j from the trailing submatrix. Every |L[i][j]| (i > j)
// and |U[i][j]| below eps is written as zero, as Nx.BinaryBackend
// flushes them. perm[j] is the row of A that ends at row j, and P[perm[j]][j]
// is 1.
//
// With WIDE (f32 on devices with f64) the factorization runs in double and
// each output element is rounded once, as Nx.BinaryBackend computes it.
// Workgroups of 256 invocations.
//
// VARIANT 1 (n <= 32) and 3 (n <= 64): one dispatch, a workgroup per
// matrix (workgroup x + y * the grid's width, plus pc.b0) holding it and
// perm in shared memory.
// Larger orders are factored right-looking in panels of PB columns, in
// the workspace pc.work (n x n elements of the compute type per matrix,
// U's own buffer when that type is T) with perm and the panel's pivots in
// pc.perm (2n u32 per matrix), one matrix per workgroup row y (plus b0):
//   VARIANT 7 with pc.mode 0 copies A into the workspace, perm = identity
//     (grid-stride over x);
//   VARIANT 2 factors the panel of columns c0 .. c0 + w - 1 (rows c0 and
//     down) with partial pivoting, a workgroup per matrix, in a
//     column-major copy (pc.scratch): its rows swap within the panel,
//     perm follows, pivot j is recorded at perm[n + j];
//   VARIANT 5 applies the panel's swaps to every column outside it and
//     solves L11 X = A12 for the columns right of it (unit lower L11),
//     an invocation per column;
//   VARIANT 6 subtracts L21 X from the trailing submatrix, a workgroup per
//     32 x 64 tile (x);
//   VARIANT 7 with pc.mode 1 writes P, L and U.
// Only VARIANT 2's invocations share workspace memory within a dispatch,
// and only within their workgroup: its barriers make those writes
// visible at workgroup scope (no coherent qualifier, no device-scope
// fence).
#include "common.glsl"
#if T_ID != 10 && T_ID != 11
#error "lu.comp is built for f32 and f64"
#endif

#if defined(WIDE) || T_ID == 11
#define R double
#define R_BYTES 8
#define EPS_R(b) packDouble2x32(b)
#else
#define R float
#define R_BYTES 4
#define EPS_R(b) uintBitsToFloat((b).x)
#endif

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) readonly buffer InT { T v[]; };
layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) writeonly buffer OutT { T v[]; };
layout(buffer_reference, std430, buffer_reference_align = R_BYTES) buffer WorkR { R v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer PermU { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = R_BYTES) readonly buffer WorkIn { R v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer PermIn { uint v[]; };

layout(push_constant, std430) uniform PC {
  uint64_t a;       // input: batch x n x n, dense
  uint64_t p;       // results: batch x n x n each, dense
  uint64_t l;
  uint64_t u;
  uint64_t work;    // VARIANTS 2, 5-7: batch x n x n of R (u when R is T)
  uint64_t perm;    // VARIANTS 2, 5, 7: batch x 2n u32, perm then the
                    // pivots of the panel's steps
  uint64_t scratch; // VARIANT 2: the panel's column-major copy, n x PB
                    // of R per matrix, from the first 8-byte boundary at
                    // or after matrix * sstride bytes
  uint64_t sstride;
  uvec2 eps_bits;   // eps in the compute type: a double's bits, or a
                    // float's in x
  uint n;
  uint batch;
  uint b0;          // the first matrix of this dispatch
  uint c0;          // VARIANTS 2, 5, 6: the panel's first column
  uint w;           // its width
  uint mode;        // VARIANT 7: 0 load, 1 store
} pc;

// kernels/ops.c's LU_PANEL.
#define PB 32u

const bool SH = VARIANT == 1u || VARIANT == 3u;
const uint NS = VARIANT == 1u ? 32u : VARIANT == 3u ? 64u : 1u;
shared R Ws[NS * NS];
shared uint Ps[NS];
// VARIANT 6: a tile's rows of L21 and columns of X.
const uint TM = VARIANT == 6u ? 32u : 1u, TN = VARIANT == 6u ? 64u : 1u;
const uint TK = VARIANT == 6u ? PB : 1u;
shared R Ls[TM * TK];
shared R Xs[TK * TN];
// VARIANT 2: a 32-row tile of the panel (padded); VARIANT 5: L11.
const uint TS = VARIANT == 2u ? 32u * 33u : VARIANT == 5u ? PB * PB : 1u;
shared R Ts[TS];
shared R prow[PB];
shared uint pv[PB], pdst[2u * PB], psrc[2u * PB];
shared R red_v[256];
shared uint red_i[256];
shared R red2_v[16];
shared uint red2_i[16];

#define NONE 0xFFFFFFFFu

// (v, i) replaces (bv, bi) when larger, or as large with a smaller row.
void better(R v, uint i, inout R bv, inout uint bi) {
  if (v > bv || (v == bv && i < bi)) {
    bv = v;
    bi = i;
  }
}

// Writes element e of P, L and U from the factored matrix element x and
// perm's entry for e's column.
void store_plu(uint64_t base, uint e, uint n, R x, uint pk, R eps) {
  OutT P = OutT(pc.p + base * uint64_t(T_ALIGN)), L = OutT(pc.l + base * uint64_t(T_ALIGN)),
       U = OutT(pc.u + base * uint64_t(T_ALIGN));
  uint i = e / n, k = e - i * n;
  R f = abs(x) < eps ? R(0) : x;
  L.v[e] = T(i > k ? f : i == k ? R(1) : R(0));
  U.v[e] = T(i <= k ? f : R(0));
  P.v[e] = T(pk == i ? 1.0 : 0.0);
}

// A workgroup barrier that also makes the workspace's writes visible to
// the workgroup (no device-scope fence: the matrix is the workgroup's own).
void sync_wg() {
  if (SH)
    barrier();
  else
    controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup,
                   gl_StorageSemanticsBuffer | gl_StorageSemanticsShared,
                   gl_SemanticsAcquireRelease);
}

// The pivot among the workgroup's candidates, each invocation's best
// (bv, bi) so far: the first row of the largest magnitude, NONE where
// there is none. Two workgroup barriers (sync_wg).
uint pivot_search(R bv, uint bi) {
  uint t = gl_LocalInvocationID.x;
  red_v[t] = bv;
  red_i[t] = bi;
  sync_wg();
  if (t < 16u) {
    R v = red_v[t * 16u];
    uint ix = red_i[t * 16u];
    for (uint q = 1u; q < 16u; ++q) better(red_v[t * 16u + q], red_i[t * 16u + q], v, ix);
    red2_v[t] = v;
    red2_i[t] = ix;
  }
  sync_wg();
  R pv = red2_v[0];
  uint p = red2_i[0];
  for (uint q = 1u; q < 16u; ++q) better(red2_v[q], red2_i[q], pv, p);
  return p;
}

// VARIANTS 1 and 3: the whole matrix in shared memory, a workgroup per
// matrix.
void factor_shared() {
  uint t = gl_LocalInvocationID.x;
  uint mat = pc.b0 + gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (mat >= pc.batch) return;  // the whole workgroup
  uint n = pc.n, nn = n * n;
  uint64_t base = uint64_t(mat) * uint64_t(nn);
  InT A = InT(pc.a + base * uint64_t(T_ALIGN));
  for (uint e = t; e < nn; e += 256u) Ws[e] = R(A.v[e]);
  for (uint i = t; i < n; i += 256u) Ps[i] = i;
  barrier();

  // Thread (ti, tk) of a 16 x 16 grid updates rows ti + 16 r and columns
  // tk + 16 s of the trailing submatrix; those updating column j + 1 also
  // look for the next pivot among its elements.
  uint ti = t >> 4, tk = t & 15u;
  R bv = R(-1);
  uint bi = NONE;
  for (uint i = t; i < n; i += 256u) better(abs(Ws[i * n]), i, bv, bi);

  for (uint j = 0u; j < n; ++j) {
    // A column of NaN or of nothing keeps row j.
    uint p = pivot_search(bv, bi);
    if (p == NONE) p = j;

    // Rows j and p swap, as do their entries of perm.
    if (p != j) {
      for (uint k = t; k < n; k += 256u) {
        R x = Ws[j * n + k], y = Ws[p * n + k];
        Ws[j * n + k] = y;
        Ws[p * n + k] = x;
      }
      if (t == 0u) {
        uint x = Ps[j], y = Ps[p];
        Ps[j] = y;
        Ps[p] = x;
      }
    }
    barrier();

    // Column j below the pivot divided by it.
    R piv = Ws[j * n + j];
    if (piv != R(0)) {
      for (uint i = j + 1u + t; i < n; i += 256u) Ws[i * n + j] /= piv;
    }
    barrier();

    // The update; column j + 1's candidates on the way.
    bv = R(-1);
    bi = NONE;
    for (uint i = j + 1u + ti; i < n; i += 16u) {
      R m = Ws[i * n + j];
      for (uint k = j + 1u + tk; k < n; k += 16u) {
        R x = Ws[i * n + k] - m * Ws[j * n + k];
        Ws[i * n + k] = x;
        if (k == j + 1u) better(abs(x), i, bv, bi);
      }
    }
    barrier();
  }

  // P, L and U; entries below eps as zero.
  R eps = EPS_R(pc.eps_bits);
  for (uint e = t; e < nn; e += 256u) store_plu(base, e, n, Ws[e], Ps[e % n], eps);
}

// VARIANT 2: the panel of columns c0 .. c0 + w - 1, rows c0 and down (m of
// them), a workgroup per matrix. The panel moves from the row-major
// workspace into a column-major copy S (pc.scratch: P's buffer, unused
// until the end, where a matrix's slot holds it, else a buffer of its
// own), through 32-row tiles in shared memory, so that the invocations
// owning neighbouring rows read and write neighbouring elements; it moves
// back once factored. A step: the pivot search (two barriers), the swap
// (rows jj and p of every panel column, the new row jj kept in prow),
// one barrier, then each invocation scales and updates its own rows,
// loading all of a row's elements before storing any, and finds the next
// column's candidates on the way.
void factor_panel() {
  uint t = gl_LocalInvocationID.x;
  uint mat = pc.b0 + gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (mat >= pc.batch) return;  // the whole workgroup
  uint n = pc.n, c0 = pc.c0, w = pc.w, m = n - c0;
  uint64_t base = uint64_t(mat) * uint64_t(n * n);
  WorkR W = WorkR(pc.work + base * uint64_t(R_BYTES));
  WorkR S = WorkR(pc.scratch + ((uint64_t(mat) * pc.sstride + 7ul) & ~7ul));
  PermU PG = PermU(pc.perm + uint64_t(mat) * uint64_t(2u * n) * 4ul);

  for (uint r0 = 0u; r0 < m; r0 += 32u) {
    for (uint e = t; e < 32u * PB; e += 256u) {
      uint rr = e / PB, k = e % PB;
      if (r0 + rr < m && k < w) Ts[rr * 33u + k] = W.v[(c0 + r0 + rr) * n + c0 + k];
    }
    barrier();
    for (uint e = t; e < 32u * PB; e += 256u) {
      uint k = e / 32u, rr = e % 32u;
      if (r0 + rr < m && k < w) S.v[k * m + r0 + rr] = Ts[rr * 33u + k];
    }
    barrier();
  }
  sync_wg();

  R bv = R(-1);
  uint bi = NONE;
  for (uint r = t; r < m; r += 256u) better(abs(S.v[r]), c0 + r, bv, bi);

  for (uint jj = 0u; jj < w; ++jj) {
    uint j = c0 + jj;
    uint p = pivot_search(bv, bi);
    if (p == NONE) p = j;
    uint pr = p - c0;
    if (t < w) {
      R x = S.v[t * m + jj], y = S.v[t * m + pr];
      if (pr != jj) {
        S.v[t * m + jj] = y;
        S.v[t * m + pr] = x;
      }
      prow[t] = y;
    }
    if (t == 0u) {
      if (p != j) {
        uint x = PG.v[j], y = PG.v[p];
        PG.v[j] = y;
        PG.v[p] = x;
      }
      PG.v[n + j] = p;
    }
    sync_wg();

    R piv = prow[jj];
    bv = R(-1);
    bi = NONE;
    for (uint r = jj + 1u + t; r < m; r += 256u) {
      R a = S.v[jj * m + r];
      R mult = piv != R(0) ? a / piv : a;
      R x[PB];
      [[unroll]] for (uint k = 0u; k < PB; ++k)
        if (k > jj && k < w) x[k] = S.v[k * m + r];
      if (piv != R(0)) S.v[jj * m + r] = mult;
      [[unroll]] for (uint k = 0u; k < PB; ++k) {
        if (k > jj && k < w) {
          R v = x[k] - mult * prow[k];
          S.v[k * m + r] = v;
          if (k == jj + 1u) better(abs(v), c0 + r, bv, bi);
        }
      }
    }
  }
  sync_wg();

  for (uint r0 = 0u; r0 < m; r0 += 32u) {
    for (uint e = t; e < 32u * PB; e += 256u) {
      uint k = e / 32u, rr = e % 32u;
      if (r0 + rr < m && k < w) Ts[rr * 33u + k] = S.v[k * m + r0 + rr];
    }
    barrier();
    for (uint e = t; e < 32u * PB; e += 256u) {
      uint rr = e / PB, k = e % PB;
      if (r0 + rr < m && k < w) W.v[(c0 + r0 + rr) * n + c0 + k] = Ts[rr * 33u + k];
    }
    barrier();
  }
}

// VARIANT 7: the blocked form's copy in (mode 0) or P, L and U out.
void copy_pass() {
  uint mat = pc.b0 + gl_WorkGroupID.y;
  if (mat >= pc.batch) return;
  uint n = pc.n, nn = n * n;
  uint64_t base = uint64_t(mat) * uint64_t(nn);
  uint stride = gl_NumWorkGroups.x * 256u;
  if (pc.mode == 0u) {
    InT A = InT(pc.a + base * uint64_t(T_ALIGN));
    WorkR W = WorkR(pc.work + base * uint64_t(R_BYTES));
    PermU PG = PermU(pc.perm + uint64_t(mat) * uint64_t(2u * n) * 4ul);
    for (uint e = gl_GlobalInvocationID.x; e < nn; e += stride) W.v[e] = R(A.v[e]);
    for (uint i = gl_GlobalInvocationID.x; i < n; i += stride) PG.v[i] = i;
  } else {
    WorkIn W = WorkIn(pc.work + base * uint64_t(R_BYTES));
    PermIn PG = PermIn(pc.perm + uint64_t(mat) * uint64_t(2u * n) * 4ul);
    R eps = EPS_R(pc.eps_bits);
    for (uint e = gl_GlobalInvocationID.x; e < nn; e += stride)
      store_plu(base, e, n, W.v[e], PG.v[e % n], eps);
  }
}

// VARIANT 5: an invocation per column k outside the panel applies the
// panel's row swaps, then, right of the panel, solves the unit lower
// L11 x = column k's panel rows. The swaps compose to one permutation of
// at most 2 PB rows (the panel's and the pivots below it): the workgroup
// first traces each such row's final source back through the swaps
// (pdst <- psrc), then each invocation loads every moved element of its
// column before storing any, the panel's rows kept in registers for the
// solve against L11 in shared memory.
void swap_solve() {
  uint mat = pc.b0 + gl_WorkGroupID.y;
  if (mat >= pc.batch) return;  // the whole workgroup
  uint t = gl_LocalInvocationID.x, k = gl_GlobalInvocationID.x;
  uint n = pc.n, c0 = pc.c0, w = pc.w, c1 = c0 + w;
  uint64_t base = uint64_t(mat) * uint64_t(n * n);
  WorkR W = WorkR(pc.work + base * uint64_t(R_BYTES));
  PermIn PG = PermIn(pc.perm + uint64_t(mat) * uint64_t(2u * n) * 4ul);
  if (t < w) pv[t] = PG.v[n + c0 + t];
  if (c1 < n) {
    for (uint e = t; e < PB * PB; e += 256u) {
      uint i = e / PB, q = e % PB;
      Ts[e] = i < w && q < i ? W.v[(c0 + i) * n + c0 + q] : R(0);
    }
  }
  barrier();
  if (t < 2u * PB) {
    // Slot t < PB: panel row c0 + t; slot PB + q: pivot q's row where it
    // lies below the panel (its first occurrence), else none.
    uint r = NONE;
    if (t < PB) {
      if (t < w) r = c0 + t;
    } else {
      uint q = t - PB;
      if (q < w) {
        r = pv[q];
        if (r < c1) r = NONE;
        for (uint q2 = 0u; q2 < q; ++q2)
          if (pv[q2] == r) r = NONE;
      }
    }
    uint src = r;
    if (r != NONE) {
      for (uint jj = w; jj-- > 0u;) {
        uint j = c0 + jj;
        if (src == j)
          src = pv[jj];
        else if (src == pv[jj])
          src = j;
      }
    }
    pdst[t] = r;
    psrc[t] = src;
  }
  barrier();
  if (k >= n || (k >= c0 && k < c1)) return;
  bool right = k >= c1;
  R x[PB], y[PB];
  [[unroll]] for (uint q = 0u; q < PB; ++q) {
    uint s = psrc[q], s2 = psrc[PB + q];
    x[q] = s != NONE && (right || s != c0 + q) ? W.v[s * n + k] : R(0);
    y[q] = s2 != NONE ? W.v[s2 * n + k] : R(0);
  }
  [[unroll]] for (uint q = 0u; q < PB; ++q) {
    uint d = pdst[PB + q];
    if (d != NONE) W.v[d * n + k] = y[q];
  }
  if (!right) {
    [[unroll]] for (uint q = 0u; q < PB; ++q) {
      uint s = psrc[q];
      if (s != NONE && s != c0 + q) W.v[(c0 + q) * n + k] = x[q];
    }
    return;
  }
  // L11 is zero past w (as x is), so the full PB x PB solve is exact.
  [[unroll]] for (uint jj = 0u; jj < PB; ++jj)
    [[unroll]] for (uint i = jj + 1u; i < PB; ++i) x[i] -= Ts[i * PB + jj] * x[jj];
  [[unroll]] for (uint q = 0u; q < PB; ++q)
    if (q < w) W.v[(c0 + q) * n + k] = x[q];
}

// VARIANT 6: the trailing submatrix (rows and columns c1 .. n - 1) minus
// L21 X, a workgroup per 32 x 64 tile, 2 x 4 results an invocation, the
// tile's L21 rows and X columns staged in shared memory.
void trailing_update() {
  uint mat = pc.b0 + gl_WorkGroupID.y;
  if (mat >= pc.batch) return;
  uint n = pc.n, c0 = pc.c0, w = pc.w, c1 = c0 + w, m = n - c1;
  uint tiles_n = (m + TN - 1u) / TN;
  uint r0 = c1 + (gl_WorkGroupID.x / tiles_n) * TM, q0 = c1 + (gl_WorkGroupID.x % tiles_n) * TN;
  uint64_t base = uint64_t(mat) * uint64_t(n * n);
  WorkR W = WorkR(pc.work + base * uint64_t(R_BYTES));
  uint t = gl_LocalInvocationID.x;
  for (uint e = t; e < TM * TK; e += 256u) {
    uint i = r0 + e / TK, q = e % TK;
    Ls[e] = i < n && q < w ? W.v[i * n + c0 + q] : R(0);
  }
  for (uint e = t; e < TK * TN; e += 256u) {
    uint q = e / TN, k = q0 + e % TN;
    Xs[e] = q < w && k < n ? W.v[(c0 + q) * n + k] : R(0);
  }
  barrier();
  uint ri = (t >> 4) * 2u, ci = t & 15u;  // rows ri, ri + 1; columns ci + 16 c
  R acc[2][4];
  [[unroll]] for (uint a = 0u; a < 2u; ++a)
    [[unroll]] for (uint c = 0u; c < 4u; ++c) acc[a][c] = R(0);
  for (uint q = 0u; q < TK; ++q) {
    R l0 = Ls[ri * TK + q], l1 = Ls[(ri + 1u) * TK + q];
    [[unroll]] for (uint c = 0u; c < 4u; ++c) {
      R x = Xs[q * TN + ci + 16u * c];
      acc[0][c] += l0 * x;
      acc[1][c] += l1 * x;
    }
  }
  [[unroll]] for (uint a = 0u; a < 2u; ++a)
    [[unroll]] for (uint c = 0u; c < 4u; ++c) {
      uint i = r0 + ri + a, k = q0 + ci + 16u * c;
      if (i < n && k < n) W.v[i * n + k] -= acc[a][c];
    }
}

void main() {
  if (VARIANT == 7u) {
    copy_pass();
    return;
  }
  if (VARIANT == 5u) {
    swap_solve();
    return;
  }
  if (VARIANT == 6u) {
    trailing_update();
    return;
  }
  if (SH)
    factor_shared();
  else
    factor_panel();
}
