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
// in the type itself, as Nx's implementation computes it.
//
// One workgroup of 256 invocations per matrix (workgroup id x + y * the
// grid's width), right-looking: step j takes the square root of the
// updated diagonal element, scales column j below it and subtracts the
// outer product of that column from the trailing lower triangle. Element
// (i, k) belongs to invocation (i mod 16) * 16 + k mod 16 throughout,
// which alone reads and writes it, so only column j crosses invocations,
// through shared memory.
//   VARIANT 1, orders up to 64: the elements stay in registers, and column
//   j + 1, final once step j has updated it, is published unscaled during
//   step j: one barrier a step; the column is scaled by the reciprocal of
//   L[j][j] + eps (within an ulp of the quotient).
//   VARIANT 0, larger orders: the elements live in the result buffer; two
//   barriers a step (the diagonal, then the scaled column).
#include "common.glsl"
#if T_ID != 10 && T_ID != 11
#error "cholesky.comp is built for f32 and f64"
#endif

// The longest column shared memory holds: 16 KiB (NXV_CHOLESKY_MAX_BYTES).
#define MAX_N (16384 / T_ALIGN)

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) readonly buffer InT { T v[]; };
layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer OutT { T v[]; };

layout(push_constant, std430) uniform PC {
  uint64_t a;     // input: batch x n x n, dense
  uint64_t dst;   // result: batch x n x n, dense
  uvec2 eps_bits; // eps as a double's bits
  uint n;
  uint batch;
} pc;

shared T diag;
shared T col[MAX_N];

// VARIANT 1: w[bi][bk] is element (bi * 16 + ty, bk * 16 + tx). The loops
// over blocks are unrolled and test a block against j instead of indexing
// with it, which keeps w in registers. raw[j & 1] holds column j of the
// updated matrix, unscaled.
#define NB 4
shared T raw[2][16 * NB];

void factor_small(uint n, T eps, InT A, OutT L, uint ty, uint tx) {
  T w[NB][NB];
  [[unroll]] for (uint bi = 0u; bi < NB; bi++) {
    [[unroll]] for (uint bk = 0u; bk < NB; bk++) {
      uint i = bi * 16u + ty, k = bk * 16u + tx;
      w[bi][bk] = T(0);
      if (i < n && k < n) {
        if (k <= i)
          w[bi][bk] = A.v[i * n + k];
        else
          L.v[i * n + k] = T(0);
      }
      if (tx == 0u && bk == 0u && i < n) raw[0][i] = w[bi][bk];
    }
  }
  barrier();
  for (uint j = 0u; j < n; j++) {
    uint cur = j & 1u, r = j & 15u;
    T d = sqrt(raw[cur][j]);
    // The scaled column at this invocation's rows and columns, through one
    // reciprocal (within an ulp of dividing each).
    T inv = T(1) / (d + eps);
    T ci[NB], ck[NB];
    [[unroll]] for (uint b = 0u; b < NB; b++) {
      uint i = b * 16u + ty, k = b * 16u + tx;
      ci[b] = i > j && i < n ? raw[cur][i] * inv : T(0);
      ck[b] = k > j && k < n ? raw[cur][k] * inv : T(0);
    }
    if (tx == r) {
      [[unroll]] for (uint bi = 0u; bi < NB; bi++) {
        uint i = bi * 16u + ty;
        if (i > j && i < n) L.v[i * n + j] = abs(ci[bi]) <= eps ? T(0) : ci[bi];
      }
      if (ty == r) L.v[j * n + j] = abs(d) <= eps ? T(0) : d;
    }
    uint next = j + 1u, bn = next >> 4;
    [[unroll]] for (uint bi = 0u; bi < NB; bi++) {
      uint i = bi * 16u + ty;
      if (i > j && i < n) {
        [[unroll]] for (uint bk = 0u; bk < NB; bk++) {
          uint k = bk * 16u + tx;
          if (k > j && k <= i) w[bi][bk] -= ci[bi] * ck[bk];
          if (k == next && bk == bn) raw[cur ^ 1u][i] = w[bi][bk];
        }
      }
    }
    barrier();
  }
}

void main() {
  uint b = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (b >= pc.batch) return; // uniform across the workgroup
  uint n = pc.n;
  T eps = T(packDouble2x32(pc.eps_bits));
  uint64_t bytes = uint64_t(b) * n * n * uint64_t(T_ALIGN);
  InT A = InT(pc.a + bytes);
  OutT L = OutT(pc.dst + bytes);
  uint ty = gl_LocalInvocationID.x >> 4, tx = gl_LocalInvocationID.x & 15u;
  if (VARIANT == 1u) {
    factor_small(n, eps, A, L, ty, tx);
    return;
  }

  for (uint i = ty; i < n; i += 16u)
    for (uint k = tx; k < n; k += 16u) {
      uint e = i * n + k;
      L.v[e] = k <= i ? A.v[e] : T(0);
    }

  for (uint j = 0u; j < n; j++) {
    uint r = j & 15u;
    uint row_j = j * n;
    if (ty == r && tx == r) diag = sqrt(L.v[row_j + j]);
    barrier();
    T d = diag;
    T den = d + eps;
    // The first row after j that this invocation's rows reach.
    uint i0 = j + 1u + ((ty + 16u - ((j + 1u) & 15u)) & 15u);
    if (tx == r) {
      for (uint i = i0; i < n; i += 16u) {
        uint e = i * n + j;
        T v = L.v[e] / den;
        col[i] = v;
        L.v[e] = abs(v) <= eps ? T(0) : v;
      }
      if (ty == r) L.v[row_j + j] = abs(d) <= eps ? T(0) : d;
    }
    barrier();
    // Each row's elements four at a time: their loads issue before any
    // store, so they overlap instead of waiting on each other.
    uint k0 = j + 1u + ((tx + 16u - ((j + 1u) & 15u)) & 15u);
    for (uint i = i0; i < n; i += 16u) {
      T c = col[i];
      uint row_i = i * n;
      uint k = k0;
      for (; k + 48u <= i; k += 64u) {
        T x0 = L.v[row_i + k], x1 = L.v[row_i + k + 16u];
        T x2 = L.v[row_i + k + 32u], x3 = L.v[row_i + k + 48u];
        L.v[row_i + k] = x0 - c * col[k];
        L.v[row_i + k + 16u] = x1 - c * col[k + 16u];
        L.v[row_i + k + 32u] = x2 - c * col[k + 32u];
        L.v[row_i + k + 48u] = x3 - c * col[k + 48u];
      }
      for (; k <= i; k += 16u) L.v[row_i + k] -= c * col[k];
    }
  }
}
