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
// definite gets NaN where the square root's argument is negative.
//
// With WIDE (f32 on devices with f64) the factorization runs in double in
// a workspace of pc.work (batch x n x n doubles) and each entry of L is
// rounded to f32 once, as it is final; otherwise pc.work is pc.dst.
//
// One workgroup of 256 invocations per matrix (workgroup id x + y * the
// grid's width), right-looking (orders up to 64: see factor_small): step j takes the square root of the
// updated diagonal element, scales column j below it and subtracts the
// outer product of that column from the trailing lower triangle. Element
// (i, k) of the result belongs to invocation (i mod 16) * 16 + k mod 16
// throughout, which alone reads and writes it in the output buffer, so the
// buffer needs no coherence; what crosses invocations (the diagonal
// element, the scaled column) goes through shared memory, two barriers a
// step.
#include "common.glsl"
#if T_ID != 10 && T_ID != 11
#error "cholesky.comp is built for f32 and f64"
#endif

#ifdef WIDE
#define R double
#define R_BYTES 8
// Final values go to the result; without WIDE that is the workspace
// itself, written through the one pointer.
#define STORE_OUT(e, x) L.v[e] = T(x)
#else
#define R T
#define R_BYTES T_ALIGN
#define STORE_OUT(e, x) W.v[e] = (x)
#endif

// The longest column shared memory holds: 16 KiB (NXV_CHOLESKY_MAX_BYTES).
#define MAX_N (16384 / R_BYTES)

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) readonly buffer InT { T v[]; };
layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) writeonly buffer OutT { T v[]; };
layout(buffer_reference, std430, buffer_reference_align = R_BYTES) buffer WorkR { R v[]; };

layout(push_constant, std430) uniform PC {
  uint64_t a;     // input: batch x n x n, dense
  uint64_t dst;   // result: batch x n x n, dense
  uint64_t work;  // the matrix being factored, in R: dst unless WIDE
  uvec2 eps_bits; // eps as a double's bits
  uint n;
  uint batch;
} pc;

shared R diag;
shared R col[MAX_N];

// Orders up to SMALL_N (VARIANT 1): each invocation holds its elements of
// the matrix in registers (w[bi][bk] is element (bi * 16 + ty, bk * 16 +
// tx)), so a step touches no global memory but the result's stores. The
// loops over blocks are unrolled and test the block against j instead of
// indexing with it, which keeps w in registers.
#define NB 4
#define SMALL_N (16 * NB)

void factor_small(uint n, R eps, InT A, OutT L, uint ty, uint tx) {
  R w[NB][NB];
  [[unroll]] for (uint bi = 0u; bi < NB; bi++) {
    [[unroll]] for (uint bk = 0u; bk < NB; bk++) {
      uint i = bi * 16u + ty, k = bk * 16u + tx;
      w[bi][bk] = R(0);
      if (i < n && k < n) {
        if (k <= i)
          w[bi][bk] = R(A.v[i * n + k]);
        else
          L.v[i * n + k] = T(0);
      }
    }
  }
  for (uint j = 0u; j < n; j++) {
    uint r = j & 15u, bj = j >> 4;
    if (ty == r && tx == r) {
      [[unroll]] for (uint bi = 0u; bi < NB; bi++)
        if (bi == bj) diag = sqrt(w[bi][bi]);
    }
    barrier();
    R d = diag;
    R den = d + eps;
    if (tx == r) {
      [[unroll]] for (uint bi = 0u; bi < NB; bi++) {
        uint i = bi * 16u + ty;
        [[unroll]] for (uint bk = 0u; bk < NB; bk++) {
          if (bk == bj && i > j && i < n) {
            R v = w[bi][bk] / den;
            col[i] = v;
            L.v[i * n + j] = T(abs(v) <= eps ? R(0) : v);
          }
        }
      }
      if (ty == r) L.v[j * n + j] = T(abs(d) <= eps ? R(0) : d);
    }
    barrier();
    [[unroll]] for (uint bi = 0u; bi < NB; bi++) {
      uint i = bi * 16u + ty;
      if (i > j && i < n) {
        R ci = col[i];
        [[unroll]] for (uint bk = 0u; bk < NB; bk++) {
          uint k = bk * 16u + tx;
          if (k > j && k <= i) w[bi][bk] -= ci * col[k];
        }
      }
    }
  }
}

void main() {
  uint b = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (b >= pc.batch) return; // uniform across the workgroup
  uint n = pc.n;
  R eps = R(packDouble2x32(pc.eps_bits));
  uint64_t elems = uint64_t(b) * n * n;
  InT A = InT(pc.a + elems * uint64_t(T_ALIGN));
  uint ty = gl_LocalInvocationID.x >> 4, tx = gl_LocalInvocationID.x & 15u;
  if (VARIANT == 1u) {
    factor_small(n, eps, A, OutT(pc.dst + elems * uint64_t(T_ALIGN)), ty, tx);
    return;
  }
#ifdef WIDE
  OutT L = OutT(pc.dst + elems * uint64_t(T_ALIGN));
#endif
  WorkR W = WorkR(pc.work + elems * uint64_t(R_BYTES));

  for (uint i = ty; i < n; i += 16u)
    for (uint k = tx; k < n; k += 16u) {
      uint e = i * n + k;
      if (k <= i)
        W.v[e] = R(A.v[e]);
      else
        STORE_OUT(e, R(0));
    }

  for (uint j = 0u; j < n; j++) {
    uint r = j & 15u;
    uint row_j = j * n;
    if (ty == r && tx == r) diag = sqrt(W.v[row_j + j]);
    barrier();
    R d = diag;
    R den = d + eps;
    // The first row after j that this invocation's rows reach.
    uint i0 = j + 1u + ((ty + 16u - ((j + 1u) & 15u)) & 15u);
    if (tx == r) {
      for (uint i = i0; i < n; i += 16u) {
        uint e = i * n + j;
        R v = W.v[e] / den;
        col[i] = v;
        STORE_OUT(e, abs(v) <= eps ? R(0) : v);
      }
      if (ty == r) STORE_OUT(row_j + j, abs(d) <= eps ? R(0) : d);
    }
    barrier();
    uint k0 = j + 1u + ((tx + 16u - ((j + 1u) & 15u)) & 15u);
    for (uint i = i0; i < n; i += 16u) {
      R ci = col[i];
      uint row_i = i * n;
      for (uint k = k0; k <= i; k += 16u) W.v[row_i + k] -= ci * col[k];
    }
  }
}
