#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
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
// Workgroups of 256 invocations, one per matrix (workgroup x + y * the
// grid's width, plus pc.b0).
//
// VARIANT 1 (n <= 32) and 3 (n <= 64): the matrix and perm in shared
// memory. VARIANT 2: in the workspace pc.work (n x n elements of the
// compute type per matrix, U's own buffer when that type is T) and
// pc.perm (n u32 per matrix), coherent, for any order.
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

layout(push_constant, std430) uniform PC {
  uint64_t a;       // input: batch x n x n, dense
  uint64_t p;       // results: batch x n x n each, dense
  uint64_t l;
  uint64_t u;
  uint64_t work;    // VARIANT 2: batch x n x n of R (u when R is T)
  uint64_t perm;    // VARIANT 2: batch x n u32
  uvec2 eps_bits;   // eps in the compute type: a double's bits, or a
                    // float's in x
  uint n;
  uint batch;
  uint b0;          // the first matrix of this dispatch
  uint pad;
} pc;

const bool SH = VARIANT != 2u;
const uint NS = VARIANT == 1u ? 32u : VARIANT == 3u ? 64u : 1u;
shared R Ws[NS * NS];
shared uint Ps[NS];
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

void main() {
  uint t = gl_LocalInvocationID.x;
  uint mat = pc.b0 + gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (mat >= pc.batch) return;  // the whole workgroup
  uint n = pc.n, nn = n * n;
  uint64_t base = uint64_t(mat) * uint64_t(nn);
  InT A = InT(pc.a + base * uint64_t(T_ALIGN));
  WorkR W = WorkR(pc.work + base * uint64_t(R_BYTES));
  PermU PG = PermU(pc.perm + uint64_t(mat) * uint64_t(n) * 4ul);
  R eps = EPS_R(pc.eps_bits);

#define WLD(e) wld(W, e)
#define WST(e, x) wst(W, e, x)
#define PLD(i) pld(PG, i)
#define PST(i, x) pst(PG, i, x)
#define SYNC()             \
  {                        \
    memoryBarrierBuffer(); \
    barrier();             \
  }

  for (uint e = t; e < nn; e += 256u) {
    R x = R(A.v[e]);
    WST(e, x);
  }
  for (uint i = t; i < n; i += 256u) PST(i, i);
  SYNC();

  // Thread (ti, tk) of a 16 x 16 grid updates rows ti + 16 r and columns
  // tk + 16 s of the trailing submatrix; the threads of column tk == 0
  // also look for the next pivot among the elements they update.
  uint ti = t >> 4, tk = t & 15u;
  R bv = R(-1);
  uint bi = NONE;
  for (uint i = t; i < n; i += 256u) better(abs(WLD(i * n)), i, bv, bi);

  for (uint j = 0u; j < n; ++j) {
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

    // Rows j and p swap, as do their entries of perm.
    if (p != j) {
      for (uint k = t; k < n; k += 256u) {
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
    SYNC();

    // Column j below the pivot divided by it.
    R piv = WLD(j * n + j);
    if (piv != R(0)) {
      for (uint i = j + 1u + t; i < n; i += 256u) {
        R x = WLD(i * n + j) / piv;
        WST(i * n + j, x);
      }
    }
    SYNC();

    // The trailing update; column j + 1's candidates on the way.
    bv = R(-1);
    bi = NONE;
    for (uint i = j + 1u + ti; i < n; i += 16u) {
      R m = WLD(i * n + j);
      for (uint k = j + 1u + tk; k < n; k += 16u) {
        R x = WLD(i * n + k) - m * WLD(j * n + k);
        WST(i * n + k, x);
        if (k == j + 1u) better(abs(x), i, bv, bi);
      }
    }
    SYNC();
  }

  // P, L and U; entries below eps as zero.
  OutT P = OutT(pc.p + base * uint64_t(T_ALIGN)), L = OutT(pc.l + base * uint64_t(T_ALIGN)),
       U = OutT(pc.u + base * uint64_t(T_ALIGN));
  for (uint e = t; e < nn; e += 256u) {
    uint i = e / n, k = e - i * n;
    R x = WLD(e);
    R f = abs(x) < eps ? R(0) : x;
    L.v[e] = T(i > k ? f : i == k ? R(1) : R(0));
    U.v[e] = T(i <= k ? f : R(0));
    P.v[e] = T(PLD(k) == i ? 1.0 : 0.0);
  }
}
