#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "types.glsl"
// cholesky.comp - the Cholesky factor L (A = L L^T, L lower triangular)
// of each of pc.batch dense n x n matrices (T_ID 10: f32, 11: f64), as
// Nx's default implementation defines it:
//   L[j][j] = sqrt(A[j][j] - sum_{k<j} L[j][k]^2)
//   L[i][j] = (A[i][j] - sum_{k<j} L[i][k] L[j][k]) / (L[j][j] + eps), i > j
// with zeros above the diagonal and every |L[i][j]| <= eps set to 0 at the
// end. Only A's lower triangle is read; a matrix that is not positive
// definite gets NaN where the square root's argument is negative. Computed
// in the type itself, as Nx's implementation computes it. Workgroups of
// 256 invocations.
//
// Orders up to 64 take one dispatch of VARIANT 1 on the whole matrix
// (VARIANT 7 up to 32).
// Larger orders are factored in place in the result, right-looking in
// panels of PB columns: VARIANT 4 copies A's lower triangle (zeros above);
// then for each panel, VARIANT 7 factors its diagonal block, VARIANT 2
// solves the panel's rows below the block, VARIANT 3 subtracts the
// panel's outer product from the trailing lower triangle; VARIANT 5 then
// sets the entries of at most eps to zero.
//
// VARIANT 1: one workgroup per matrix (workgroup id x + y * the grid's
// width) factors the m x m block at (c0, c0), right-looking: step j takes
// the square root of the updated diagonal element, scales column j below
// it by the reciprocal of L[j][j] + eps (within an ulp of the quotient)
// and subtracts the outer product of that column from the trailing lower
// triangle. Element (i, k) belongs to invocation (i mod 16) * 16 + k mod
// 16 and stays in its registers; column j + 1, final once step j has
// updated it, is published unscaled through shared memory during step j:
// one barrier a step.
#include "common.glsl"
#if T_ID != 10 && T_ID != 11
#error "cholesky.comp is built for f32 and f64"
#endif

// Panel width of the blocked factorization (kernels/ops.c's
// CHOLESKY_PANEL).
#define PB 32

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) readonly buffer InT { T v[]; };
layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer OutT { T v[]; };

layout(push_constant, std430) uniform PC {
  uint64_t a;     // input: batch x n x n, dense (the result itself in place)
  uint64_t dst;   // result: batch x n x n, dense
  uvec2 eps_bits; // eps as a double's bits
  uint n;         // the matrices' order
  uint batch;
  uint m;         // VARIANT 1: the block's order; 2, 3: rows below the panel
  uint c0;        // the block's or panel's first row and column
  uint flags;     // VARIANT 1 bit0: set entries of at most eps to zero
  uint b0;        // VARIANTS 2-5: the first matrix, workgroup y adds to it
} pc;

// VARIANT 1: w[bi][bk] is element (bi * 16 + ty, bk * 16 + tx) of the
// block. The loops over blocks are unrolled and test a block against j
// instead of indexing with it, which keeps w in registers. raw[j & 1]
// holds column j of the updated block, unscaled. VARIANT 7 is the same
// for blocks of order at most 32 (every diagonal block of the blocked
// form): the specialization constant VB drops the blocks beyond, a
// quarter of the instructions a step.
#define NB 4
const uint VB = VARIANT == 7u ? 2u : NB;
shared T raw[2][16 * NB];

void factor_block(uint n, uint m, uint c0, bool flush, T eps, InT A, OutT L) {
  uint ty = gl_LocalInvocationID.x >> 4, tx = gl_LocalInvocationID.x & 15u;
  uint base = c0 * n + c0;
  // In place (a blocked factorization's step) the block is read through L.
  bool in_place = pc.a == pc.dst;
  T w[NB][NB];
  [[unroll]] for (uint bi = 0u; bi < NB; bi++) {
    [[unroll]] for (uint bk = 0u; bk < NB; bk++) {
      uint i = bi * 16u + ty, k = bk * 16u + tx;
      w[bi][bk] = T(0);
      if (bi < VB && bk < VB && i < m && k < m) {
        if (k <= i)
          w[bi][bk] = in_place ? L.v[base + i * n + k] : A.v[base + i * n + k];
        else
          L.v[base + i * n + k] = T(0);
      }
      if (tx == 0u && bk == 0u && i < m) raw[0][i] = w[bi][bk];
    }
  }
  barrier();
  for (uint j = 0u; j < m; j++) {
    uint cur = j & 1u, r = j & 15u;
    T d = sqrt(raw[cur][j]);
    T inv = T(1) / (d + eps);
    // The scaled column at this invocation's rows and columns.
    T ci[NB], ck[NB];
    [[unroll]] for (uint b = 0u; b < NB; b++) {
      uint i = b * 16u + ty, k = b * 16u + tx;
      ci[b] = b < VB && i > j && i < m ? raw[cur][i] * inv : T(0);
      ck[b] = b < VB && k > j && k < m ? raw[cur][k] * inv : T(0);
    }
    if (tx == r) {
      [[unroll]] for (uint bi = 0u; bi < NB; bi++) {
        uint i = bi * 16u + ty;
        if (bi < VB && i > j && i < m)
          L.v[base + i * n + j] = flush && abs(ci[bi]) <= eps ? T(0) : ci[bi];
      }
      if (ty == r) L.v[base + j * n + j] = flush && abs(d) <= eps ? T(0) : d;
    }
    uint next = j + 1u;
    [[unroll]] for (uint bi = 0u; bi < NB; bi++) {
      uint i = bi * 16u + ty;
      if (bi < VB && i > j && i < m) {
        [[unroll]] for (uint bk = 0u; bk < NB; bk++) {
          uint k = bk * 16u + tx;
          if (bk < VB && k > j && k <= i) w[bi][bk] -= ci[bi] * ck[bk];
          if (bk < VB && k == next) raw[cur ^ 1u][i] = w[bi][bk];
        }
      }
    }
    barrier();
  }
}

// VARIANT 2: rows c0 + PB + r, r in [64 x, 64 x + 64) and below m, of
// the panel for workgroup x: x = w L11^-T by forward substitution against
// the factored diagonal block L11 (in shared memory), with Nx's divisor
// L[k][k] + eps. The rows pass through shared memory (tile), so that the
// workgroup reads and writes them a row of PB elements at a time (one
// invocation per row would touch a cache line per invocation).
shared T l11[PB][PB + 1];
// VARIANT 2: 64 rows of the panel; VARIANT 3: the two 32-row tiles.
shared T tile[64][PB + 1];

void solve_panel(uint n, uint m, uint c0, T eps, OutT L) {
  uint lid = gl_LocalInvocationID.x;
  for (uint e = lid; e < PB * PB; e += 256u) {
    uint a = e / PB, b = e % PB;
    l11[a][b] = b <= a ? L.v[(c0 + a) * n + c0 + b] : T(0);
  }
  uint r0 = gl_WorkGroupID.x * 64u, base = (c0 + PB + r0) * n + c0;
  for (uint e = lid; e < 64u * PB; e += 256u) {
    uint r = e / PB, c = e % PB;
    tile[r][c] = r0 + r < m ? L.v[base + r * n + c] : T(0);
  }
  barrier();
  if (lid < 64u && r0 + lid < m) {
    T x[PB];
    [[unroll]] for (uint k = 0u; k < PB; k++) x[k] = tile[lid][k];
    [[unroll]] for (uint k = 0u; k < PB; k++) {
      T v = x[k];
      [[unroll]] for (uint q = 0u; q < k; q++) v -= x[q] * l11[k][q];
      x[k] = v / (l11[k][k] + eps);
    }
    [[unroll]] for (uint k = 0u; k < PB; k++) tile[lid][k] = x[k];
  }
  barrier();
  for (uint e = lid; e < 64u * PB; e += 256u) {
    uint r = e / PB, c = e % PB;
    if (r0 + r < m) L.v[base + r * n + c] = tile[r][c];
  }
}

// VARIANT 3: tile (ti, tk), tk <= ti, of 32 x 32 trailing elements (rows
// and columns from c0 + PB on, m of them) per workgroup, tile index
// ti (ti + 1) / 2 + tk = workgroup x: element (i, k), k <= i, less the sum
// over the panel's PB columns of L[i][c] L[k][c]. Invocation t takes row
// t / 8 of the tile and its 4 columns from (t mod 8) * 4. The panel's
// columns of the tile's rows i are in tile[0..31], of its rows k in
// tile[32..63].

void update_trailing(uint n, uint m, uint c0, OutT L) {
  uint t = gl_WorkGroupID.x;
  // ti: the largest with ti (ti + 1) / 2 <= t.
  uint ti = uint((sqrt(8.0 * float(t) + 1.0) - 1.0) * 0.5);
  while (ti * (ti + 1u) / 2u > t) ti--;
  while ((ti + 1u) * (ti + 2u) / 2u <= t) ti++;
  uint tk = t - ti * (ti + 1u) / 2u;
  uint first = c0 + PB, lid = gl_LocalInvocationID.x;
  for (uint e = lid; e < 32u * PB; e += 256u) {
    uint a = e / PB, c = e % PB;
    uint gi = ti * 32u + a, gk = tk * 32u + a;
    tile[a][c] = gi < m ? L.v[(first + gi) * n + c0 + c] : T(0);
    tile[32u + a][c] = gk < m ? L.v[(first + gk) * n + c0 + c] : T(0);
  }
  barrier();
  uint er = lid >> 3, ec = (lid & 7u) * 4u;
  T acc[4] = T[4](T(0), T(0), T(0), T(0));
  [[unroll]] for (uint c = 0u; c < PB; c++) {
    T a = tile[er][c];
    [[unroll]] for (uint u = 0u; u < 4u; u++) acc[u] += a * tile[32u + ec + u][c];
  }
  uint i = ti * 32u + er;
  if (i >= m) return;
  [[unroll]] for (uint u = 0u; u < 4u; u++) {
    uint k = tk * 32u + ec + u;
    if (k <= i) L.v[(first + i) * n + first + k] -= acc[u];
  }
}

void main() {
  uint n = pc.n;
  T eps = T(packDouble2x32(pc.eps_bits));
  uint b = VARIANT == 1u || VARIANT == 7u ? gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x
                                         : pc.b0 + gl_WorkGroupID.y;
  if (b >= pc.batch) return; // uniform across the workgroup
  uint64_t bytes = uint64_t(b) * n * n * uint64_t(T_ALIGN);
  InT A = InT(pc.a + bytes);
  OutT L = OutT(pc.dst + bytes);
  if (VARIANT == 1u || VARIANT == 7u) {
    factor_block(n, pc.m, pc.c0, (pc.flags & 1u) != 0u, eps, A, L);
  } else if (VARIANT == 2u) {
    solve_panel(n, pc.m, pc.c0, eps, L);
  } else if (VARIANT == 3u) {
    update_trailing(n, pc.m, pc.c0, L);
  } else {
    // VARIANT 4 (copy the lower triangle, zeros above) and 5 (flush),
    // grid-stride over the matrix's elements.
    uint total = n * n;
    for (uint e = gl_WorkGroupID.x * 256u + gl_LocalInvocationID.x; e < total;
         e += gl_NumWorkGroups.x * 256u) {
      uint i = e / n, k = e - i * n;
      if (VARIANT == 4u)
        L.v[e] = k <= i ? A.v[e] : T(0);
      else if (k <= i && abs(L.v[e]) <= eps)
        L.v[e] = T(0);
    }
  }
}
