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
//     down) with partial pivoting, a workgroup per matrix: its rows swap
//     within the panel, perm follows, pivot j is recorded at perm[n + j];
//   VARIANT 5 applies the panel's swaps to every column outside it and
//     solves L11 X = A12 for the columns right of it (unit lower L11),
//     an invocation per column;
//   VARIANT 6 subtracts L21 X from the trailing submatrix, a workgroup per
//     32 x 64 tile (x);
//   VARIANT 7 with pc.mode 1 writes P, L and U.
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
layout(buffer_reference, std430, buffer_reference_align = R_BYTES) coherent buffer WorkR { R v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer PermU { uint v[]; };
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
shared R red_v[256];
shared uint red_i[256];
shared R red2_v[16];
shared uint red2_i[16];

#define NONE 0xFFFFFFFFu

// The working matrix and perm: shared memory (VARIANT 1, 3) or the
// workspace (2). Never both: SH is a specialization constant.
R wld(WorkR w, uint e) {
  if (SH) return Ws[e];
  return w.v[e];
}
void wst(WorkR w, uint e, R x) {
  if (SH)
    Ws[e] = x;
  else
    w.v[e] = x;
}
uint pld(PermU pg, uint i) {
  if (SH) return Ps[i];
  return pg.v[i];
}
void pst(PermU pg, uint i, uint x) {
  if (SH)
    Ps[i] = x;
  else
    pg.v[i] = x;
}

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

// VARIANTS 1, 3 (the whole matrix in shared memory) and 2 (a panel in the
// workspace): a workgroup per matrix.
void factor() {
  uint t = gl_LocalInvocationID.x;
  uint mat = pc.b0 + gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (mat >= pc.batch) return;  // the whole workgroup
  uint n = pc.n, nn = n * n;
  // The columns factored: all of them in shared memory, else the panel's.
  uint c0 = SH ? 0u : pc.c0, c1 = SH ? n : pc.c0 + pc.w;
  uint64_t base = uint64_t(mat) * uint64_t(nn);
  WorkR W = WorkR(pc.work + base * uint64_t(R_BYTES));
  PermU PG = PermU(pc.perm + uint64_t(mat) * uint64_t(2u * n) * 4ul);

#define WLD(e) wld(W, e)
#define WST(e, x) wst(W, e, x)
#define PLD(i) pld(PG, i)
#define PST(i, x) pst(PG, i, x)

  if (SH) {
    InT A = InT(pc.a + base * uint64_t(T_ALIGN));
    for (uint e = t; e < nn; e += 256u) Ws[e] = R(A.v[e]);
    for (uint i = t; i < n; i += 256u) Ps[i] = i;
    barrier();
  }

  // Shared memory: thread (ti, tk) of a 16 x 16 grid updates rows ti + 16 r
  // and columns tk + 16 s of the trailing submatrix. A panel: a thread
  // updates rows t + 256 r across the panel's columns. Those updating
  // column j + 1 also look for the next pivot among its elements.
  uint ti = t >> 4, tk = t & 15u;
  R bv = R(-1);
  uint bi = NONE;
  for (uint i = c0 + t; i < n; i += 256u) better(abs(WLD(i * n + c0)), i, bv, bi);

  for (uint j = c0; j < c1; ++j) {
    // The pivot: the first row of the largest magnitude (a column of NaN
    // or of nothing keeps row j).
    red_v[t] = bv;
    red_i[t] = bi;
    barrier();
    if (t < 16u) {
      R v = red_v[t * 16u];
      uint ix = red_i[t * 16u];
      for (uint q = 1u; q < 16u; ++q) better(red_v[t * 16u + q], red_i[t * 16u + q], v, ix);
      red2_v[t] = v;
      red2_i[t] = ix;
    }
    barrier();
    R pv = red2_v[0];
    uint p = red2_i[0];
    for (uint q = 1u; q < 16u; ++q) better(red2_v[q], red2_i[q], pv, p);
    if (p == NONE) p = j;

    // Rows j and p swap (within the panel), as do their entries of perm;
    // a panel records its pivot.
    if (p != j) {
      for (uint k = c0 + t; k < c1; k += 256u) {
        R x = WLD(j * n + k), y = WLD(p * n + k);
        WST(j * n + k, y);
        WST(p * n + k, x);
      }
      if (t == 0u) {
        uint x = PLD(j), y = PLD(p);
        PST(j, y);
        PST(p, x);
      }
    }
    if (!SH && t == 0u) PG.v[n + j] = p;
    sync_wg();

    // Column j below the pivot divided by it.
    R piv = WLD(j * n + j);
    if (piv != R(0)) {
      for (uint i = j + 1u + t; i < n; i += 256u) {
        R x = WLD(i * n + j) / piv;
        WST(i * n + j, x);
      }
    }
    sync_wg();

    // The update; column j + 1's candidates on the way.
    bv = R(-1);
    bi = NONE;
    if (SH) {
      for (uint i = j + 1u + ti; i < n; i += 16u) {
        R m = Ws[i * n + j];
        for (uint k = j + 1u + tk; k < n; k += 16u) {
          R x = Ws[i * n + k] - m * Ws[j * n + k];
          Ws[i * n + k] = x;
          if (k == j + 1u) better(abs(x), i, bv, bi);
        }
      }
    } else {
      for (uint i = j + 1u + t; i < n; i += 256u) {
        R m = W.v[i * n + j];
        for (uint k = j + 1u; k < c1; ++k) {
          R x = W.v[i * n + k] - m * W.v[j * n + k];
          W.v[i * n + k] = x;
          if (k == j + 1u) better(abs(x), i, bv, bi);
        }
      }
    }
    sync_wg();
  }

  // P, L and U; entries below eps as zero.
  if (SH) {
    R eps = EPS_R(pc.eps_bits);
    for (uint e = t; e < nn; e += 256u) store_plu(base, e, n, Ws[e], Ps[e % n], eps);
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
// panel's row swaps in order, then, right of the panel, solves the unit
// lower L11 x = column k's panel rows.
void swap_solve() {
  uint mat = pc.b0 + gl_WorkGroupID.y;
  uint k = gl_GlobalInvocationID.x;
  uint n = pc.n, c0 = pc.c0, c1 = pc.c0 + pc.w;
  if (mat >= pc.batch || k >= n || (k >= c0 && k < c1)) return;
  uint64_t base = uint64_t(mat) * uint64_t(n * n);
  WorkR W = WorkR(pc.work + base * uint64_t(R_BYTES));
  PermIn PG = PermIn(pc.perm + uint64_t(mat) * uint64_t(2u * n) * 4ul);
  for (uint j = c0; j < c1; ++j) {
    uint p = PG.v[n + j];
    if (p != j) {
      R x = W.v[j * n + k];
      W.v[j * n + k] = W.v[p * n + k];
      W.v[p * n + k] = x;
    }
  }
  if (k < c1) return;
  for (uint j = c0; j < c1; ++j) {
    R x = W.v[j * n + k];
    for (uint i = j + 1u; i < c1; ++i) W.v[i * n + k] -= W.v[i * n + j] * x;
  }
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
  factor();
}
