#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_memory_scope_semantics : require
#include "types.glsl"
// qr.comp - QR factorization by Householder reflections of each of
// pc.batch dense m x n matrices (T_ID 10: f32, 11: f64), as Nx's default
// implementation (Nx.LinAlg.QR) defines it. Reflection i (i = 0 .. kr - 1)
// takes x, column i of the current R at rows i .. m - 1, s the sum of
// x_r^2 below row i and norm = sqrt(x_i^2 + s):
//   s < eps: H_i is the identity (the column stays as it is);
//   else v_0 = x_i <= 0 ? x_i - norm : -s / (x_i + norm), v = x / v_0
//        (v_i = 1), tau = 2 / (1 + s / v_0^2), H_i = I - tau v v^T, and
//        column i of R becomes norm at row i, zeros below.
// R = H_kr-1 ... H_0 A and Q = H_0 ... H_kr-1 restricted to its first qc
// columns; kr = min(m, n), less one for square matrices (Nx reflects
// columns 0 .. n - 2 there). Every entry of Q and R of magnitude at most
// eps is written as zero, as Nx's implementation flushes them; R keeps
// rr rows.
//
// With WIDE (f32 on devices with f64) the factorization runs in double and
// each output element is rounded once. Workgroups of 256 invocations.
//
// The work happens in pc.work (m x n of the compute type per matrix: R
// with x / v0 = v below the diagonal, x kept there), pc.tau (2 kr per
// matrix: tau, then 1 / v0) and pc.qw
// (m x qc of the compute type: Q itself when that type is T):
//   VARIANT 3 with pc.mode 0 copies A into the workspace and sets Q to
//     the identity; with mode 1 writes R (v's entries as zeros) and Q,
//     flushing entries of at most eps (grid-stride over x, a matrix per
//     workgroup row y plus b0);
//   VARIANT 1 computes reflection 0, a workgroup per matrix (workgroup
//     x + y * the grid's width, plus b0);
//   VARIANT 2 applies reflection pc.i to R's columns right of it (and
//     to those left of it left alone by their own reflection), CW
//     columns a workgroup (x) of one matrix (y, plus b0); the workgroup
//     holding column i + 1 then computes reflection i + 1;
//   VARIANT 4 applies reflections pc.i - 1 down to pc.mode to Q, CW
//     columns a workgroup (x) of one matrix (y, plus b0): Q is accumulated
//     backwards, H_kr-1 first, from the identity, and each column on its
//     own (H_i leaves Q's columns left of i and rows above it as they
//     are, so a workgroup skips the reflections right of its columns);
//   VARIANT 5 (m, n <= 64) runs every reflection on R and then on Q in one
//     dispatch, a workgroup per matrix;
//   VARIANT 6 (m = n <= 64) runs pc.i steps of eigh's unshifted QR
//     iteration (Nx.BinaryBackend's): {Q', R} = qr(A) as the other
//     variants compute it (entries of at most eps flushed), A <- R Q',
//     Q <- Q Q', a matrix stopping after the step that moved Q by at most
//     eps in every entry (NaN counts as not moved). Its workspace, at
//     pc.work + 6 m n + 4 m per matrix: A, Q, R, Q', the next A and the
//     next Q, and 4 m of scratch (eigh_steps);
//     pc.tau holds 2 kr + 1 per matrix, the last its stop flag. pc.mode
//     bit 0: first load A from pc.a and Q from pc.qw (both T) and clear
//     the flag, with bit 2 instead reduce A to tridiagonal form as eigh
//     does, Q from the identity (tridiagonalize); bit 1: then write A to
//     pc.r and Q to pc.q (T).
//   VARIANTS 7 and 8 (m = n <= SN: 32, 48) are VARIANT 6 with each
//     step's R, Q' and reflection scalars in shared memory (sW, sQ, sT;
//     rows padded to n + 1), where every reflection's barriers wait on
//     shared rather than device memory, and reflection i + 1's squares
//     summed while reflection i updates its column; the host picks them
//     where the device has the shared memory (qr_eigh_variant in ops.c).
//     The next A goes straight to A's place; their workspace, at
//     pc.work + 3 m n + 4 m per matrix, holds A, Q and the next Q (the
//     tridiagonal reduction's scratch before the steps), and 4 m of
//     scratch.
// Invocations share workspace memory within a dispatch only within their
// workgroup: its barriers make those writes visible at workgroup scope.
#include "common.glsl"
#if T_ID != 10 && T_ID != 11
#error "qr.comp is built for f32 and f64"
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

layout(push_constant, std430) uniform PC {
  uint64_t a;     // input: batch x m x n, dense
  uint64_t q;     // results: batch x m x qc and batch x rr x n, dense
  uint64_t r;
  uint64_t work;  // batch x m x n of R
  uint64_t tau;   // batch x 2 kr of R
  uint64_t qw;    // batch x m x qc of R (q when R is T)
  uvec2 eps_bits; // eps in the compute type: a double's bits, or a
                  // float's in x
  uint m;
  uint n;
  uint qc;        // Q's columns
  uint rr;        // R's rows
  uint kr;        // reflections
  uint batch;
  uint b0;        // the first matrix of this dispatch
  uint i;         // VARIANT 2: the reflection; 4: one past the last
  uint mode;      // VARIANT 3: 0 in, 1 out; 4: the first reflection
  uint pad;
} pc;

// VARIANTS 2 and 4: columns a workgroup (a warp of 32 covers 4 rows of
// them, 32-byte runs), and row groups (256 / CW) splitting each column's
// rows, which keeps each invocation's chain of loads short; VARIANT 5
// and 6 cover up to 64 columns at once.
const uint CW = VARIANT >= 5u ? 64u : 8u;
const uint RG = 256u / CW;
// Rows an invocation loads at once in apply.
const uint UR = 8u;
shared R red[256];
shared R red2[16];
shared R wsum[CW];
// apply with squares: each row group's sum of squares of column i + 1.
shared R sqg[RG];
// VARIANTS 7 and 8: each step's R (sW) and Q' (sQ), n x n with rows of n + 1,
// and the reflection scalars tau and 1 / v0 (sT, 2 kr).
const bool SH = VARIANT >= 7u;
const uint SN = VARIANT == 7u ? 32u : VARIANT == 8u ? 48u : 1u;
shared R sW[SN * (SN + 1u)];
shared R sQ[SN * (SN + 1u)];
shared R sT[2u * SN];

// An element of a workspace matrix: B's in device memory, or with SH
// sW's (which 0) or sQ's (1).
R wget(WorkR B, uint which, uint idx) {
  if (SH) return which == 0u ? sW[idx] : sQ[idx];
  return B.v[idx];
}
void wset(WorkR B, uint which, uint idx, R x) {
  if (!SH)
    B.v[idx] = x;
  else if (which == 0u)
    sW[idx] = x;
  else
    sQ[idx] = x;
}
// A reflection scalar: TA's in device memory, or with SH sT's.
R tget(WorkR TA, uint idx) { return SH ? sT[idx] : TA.v[idx]; }
void tset(WorkR TA, uint idx, R x) {
  if (SH)
    sT[idx] = x;
  else
    TA.v[idx] = x;
}

// A workgroup barrier that also makes the workspace's writes visible to
// the workgroup (no device-scope fence: the matrix is the workgroup's own).
void sync_wg() {
  controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup,
                 gl_StorageSemanticsBuffer | gl_StorageSemanticsShared,
                 gl_SemanticsAcquireRelease);
}

// The workgroup's sum of every invocation's x (two barriers).
R sum_wg(R x) {
  uint t = gl_LocalInvocationID.x;
  red[t] = x;
  sync_wg();
  if (t < 16u) {
    R s = R(0);
    for (uint k = 0u; k < 16u; ++k) s += red[t * 16u + k];
    red2[t] = s;
  }
  sync_wg();
  R s = R(0);
  for (uint k = 0u; k < 16u; ++k) s += red2[k];
  return s;
}

// Reflection i's scalars from s, the sum of squares below row i, by
// invocation 0: tau (TA[i]), 1 / v0 (TA[kr + i]) and R's diagonal element;
// the column below row i keeps x (v = x / v0 there, scaled where read).
// tau and 1 / v0 are 0 where the reflection is the identity.
// W's rows are ws apart (n, or n + 1 in shared memory).
void finish_reflection(WorkR W, WorkR TA, uint ws, uint kr, uint i, R s, R eps) {
  if (gl_LocalInvocationID.x != 0u) return;
  R xi = wget(W, 0u, i * ws + i);
  R nrm = sqrt(xi * xi + s);
  bool ident = s < eps;
  R v0 = xi <= R(0) ? xi - nrm : -s / (xi + nrm);
  tset(TA, i, ident ? R(0) : R(2) / (R(1) + s / (v0 * v0)));
  tset(TA, kr + i, ident ? R(0) : R(1) / v0);
  if (!ident) wset(W, 0u, i * ws + i, nrm);
}

// Reflection i of matrix W (m x n at W), its sum of squares read from the
// column (two barriers).
void reflect(WorkR W, WorkR TA, uint m, uint ws, uint kr, uint i, R eps) {
  uint t = gl_LocalInvocationID.x;
  R part = R(0);
  for (uint r = i + 1u + t; r < m; r += 256u) {
    R x = wget(W, 0u, r * ws + i);
    part += x * x;
  }
  finish_reflection(W, TA, ws, kr, i, sum_wg(part), eps);
}

// Whether reflection i changes column c of R: those right of it, and
// those left of it whose own reflection was the identity (their entries
// below the diagonal are R's, as Nx's H R changes them; a reflected
// column holds v there).
bool r_column(WorkR TA, uint i, uint c, uint lim) {
  return c < lim && c != i && (c > i || tget(TA, c) == R(0));
}

// X -= tau v (v^T X) over rows i .. m - 1 of X's columns c0 .. c0 + CW - 1
// below lim (X m x ld: with SH sW or sQ as xw is 0 or 1), v 1 at row i and
// column i of W (m rows ws apart) times inv below it; with rcols (X is R)
// only the columns r_column takes. With squares, the invocations of column
// i + 1 add the squares of its updated entries below row i + 1 into sq
// (else sq is 0) and put them in sqg by row group. Three barriers
// (sync_wg) unless tau is zero or no column is taken.
void apply(WorkR W, WorkR TA, R tau, R inv, WorkR X, uint xw, uint m, uint ws, uint ld, uint i,
           uint c0, uint lim, bool rcols, bool squares, out R sq) {
  sq = R(0);
  if (tau == R(0)) return;  // uniform: the identity
  // Columns right of i first; those left of it only where none is.
  bool any = !rcols || max(c0, i + 1u) < min(c0 + CW, lim);
  for (uint k = 0u; k < CW && !any; ++k) any = r_column(TA, i, c0 + k, lim);
  if (!any) return;  // uniform: nothing to change
  uint t = gl_LocalInvocationID.x;
  uint c = c0 + t % CW, g = t / CW;
  bool live = rcols ? r_column(TA, i, c, lim) : c < lim;
  R part = R(0);
  // UR rows an iteration, their loads issued together: each invocation's
  // loop is a chain of dependent memory latencies otherwise.
  uint r = i + g;
  if (live) {
    for (; r + (UR - 1u) * RG < m; r += UR * RG) {
      R v[UR], x[UR];
      [[unroll]] for (uint u = 0u; u < UR; ++u) {
        uint ru = r + u * RG;
        v[u] = ru == i ? R(1) : wget(W, 0u, ru * ws + i) * inv;
        x[u] = wget(X, xw, ru * ld + c);
      }
      [[unroll]] for (uint u = 0u; u < UR; ++u) part += v[u] * x[u];
    }
    for (; r < m; r += RG) {
      R v = r == i ? R(1) : wget(W, 0u, r * ws + i) * inv;
      part += v * wget(X, xw, r * ld + c);
    }
  }
  red[t] = part;
  sync_wg();
  if (t < CW) {
    R s = R(0);
    for (uint k = 0u; k < RG; ++k) s += red[k * CW + t];
    wsum[t] = tau * s;
  }
  sync_wg();
  R f = wsum[t % CW];
  bool sqs = squares && c == i + 1u;
  if (live && f != R(0)) {
    r = i + g;
    for (; r + (UR - 1u) * RG < m; r += UR * RG) {
      R v[UR], x[UR];
      [[unroll]] for (uint u = 0u; u < UR; ++u) {
        uint ru = r + u * RG;
        v[u] = ru == i ? R(1) : wget(W, 0u, ru * ws + i) * inv;
        x[u] = wget(X, xw, ru * ld + c);
      }
      [[unroll]] for (uint u = 0u; u < UR; ++u) {
        uint ru = r + u * RG;
        R y = x[u] - f * v[u];
        wset(X, xw, ru * ld + c, y);
        if (sqs && ru > i + 1u) sq += y * y;
      }
    }
    for (; r < m; r += RG) {
      R v = r == i ? R(1) : wget(W, 0u, r * ws + i) * inv;
      R x = wget(X, xw, r * ld + c) - f * v;
      wset(X, xw, r * ld + c, x);
      if (sqs && r > i + 1u) sq += x * x;
    }
  } else if (live && sqs) {
    // Column c0 unchanged: its squares as they are.
    for (r = i + g; r < m; r += RG) {
      R x = wget(X, xw, r * ld + c);
      if (r > i + 1u) sq += x * x;
    }
  }
  if (sqs) sqg[g] = sq;
  sync_wg();
}

// eigh's reduction of the symmetric H (n x n) to tridiagonal form, as
// Nx.BinaryBackend computes it: for i = 0 .. n - 3 the reflection
// R = I - scale v v^T of column i below row i + 1 (x, a0 its first entry,
// rest = |x|^2 - a0^2; v0 = a0 <= 0 ? a0 - |x| : -rest / (a0 + |x|);
// v = 1 at row i + 1, x / v0 below; scale = 2 v0^2 / (rest + v0^2), 0
// where rest < eps), H <- R H R and Q <- Q R (rank-one updates); then
// entries under eps in magnitude become zeros of their sign. P (n x n)
// and VS (4 n) are scratch.
void tridiagonalize(WorkR H, WorkR Q, WorkR P, WorkR VS, uint n, R eps) {
  uint t = gl_LocalInvocationID.x, nn = n * n;
  for (uint i = 0u; i + 2u < n; ++i) {
    R part = R(0);
    for (uint r = i + 1u + t; r < n; r += 256u) {
      R x = H.v[r * n + i];
      part += x * x;
    }
    R norm_sq = sum_wg(part);
    R a0 = H.v[(i + 1u) * n + i];
    R rest = norm_sq - a0 * a0, nrm = sqrt(norm_sq);
    R v0 = a0 <= R(0) ? a0 - nrm : -rest / (a0 + nrm);
    R scale = rest < eps ? R(0) : R(2) * v0 * v0 / (rest + v0 * v0);
    if (scale == R(0)) continue;  // uniform: the identity
    // v (VS[0, n)), then v^T H (VS[n, 2n)) and Q v (VS[2n, 3n)).
    for (uint r = t; r < n; r += 256u)
      VS.v[r] = r <= i ? R(0) : r == i + 1u ? R(1) : H.v[r * n + i] / v0;
    sync_wg();
    for (uint c = t; c < n; c += 256u) {
      R w = R(0), qv = R(0);
      for (uint k = i + 1u; k < n; ++k) {
        R vk = VS.v[k];
        w += vk * H.v[k * n + c];
        qv += Q.v[c * n + k] * vk;
      }
      VS.v[n + c] = w;
      VS.v[2u * n + c] = qv;
    }
    sync_wg();
    // P = R H = H - scale v (v^T H); Q <- Q R = Q - scale (Q v) v^T.
    for (uint e = t; e < nn; e += 256u) {
      uint r = e / n, c = e - r * n;
      P.v[e] = H.v[e] - scale * VS.v[r] * VS.v[n + c];
      Q.v[e] = Q.v[e] - scale * VS.v[2u * n + r] * VS.v[c];
    }
    sync_wg();
    // P v (VS[3n, 4n)), then H = P R = P - scale (P v) v^T.
    for (uint r = t; r < n; r += 256u) {
      R u = R(0);
      for (uint k = i + 1u; k < n; ++k) u += P.v[r * n + k] * VS.v[k];
      VS.v[3u * n + r] = u;
    }
    sync_wg();
    for (uint e = t; e < nn; e += 256u) {
      uint r = e / n, c = e - r * n;
      H.v[e] = P.v[e] - scale * VS.v[3u * n + r] * VS.v[c];
    }
    sync_wg();
  }
  for (uint e = t; e < nn; e += 256u) {
    R h = H.v[e], q = Q.v[e];
    H.v[e] = abs(h) < eps ? h * R(0) : h;
    Q.v[e] = abs(q) < eps ? q * R(0) : q;
  }
  sync_wg();
}

// VARIANTS 6, 7 and 8: pc.i steps of eigh's QR iteration on matrix mat
// (n x n).
void eigh_steps(uint mat, uint n, uint kr, R eps) {
  uint t = gl_LocalInvocationID.x, nn = n * n;
  // Device workspace per matrix (mats n x n matrices, then 4 n): VARIANT
  // 6 A, Q, R, Q', the next A, the next Q. The shared forms keep R and Q'
  // in shared memory and write the next A in A's place: theirs is A, Q
  // and the next Q, which is also the tridiagonal reduction's scratch
  // (AN: dead once the steps start). W and QW only name a workspace
  // there, never read.
  uint mats = SH ? 3u : 6u;
  uint64_t base = pc.work + uint64_t(mat) * (mats * nn + 4u * n) * uint64_t(R_BYTES);
  uint64_t step = uint64_t(nn) * uint64_t(R_BYTES);
  WorkR AW = WorkR(base), QA = WorkR(base + step);
  WorkR W = WorkR(base + (SH ? 0u : 2u) * step), QW = WorkR(base + (SH ? 0u : 3u) * step);
  WorkR AN = WorkR(base + (SH ? 2u : 4u) * step), QN = WorkR(base + (SH ? 2u : 5u) * step);
  WorkR TA = WorkR(pc.tau + uint64_t(mat) * (2u * kr + 1u) * uint64_t(R_BYTES));
  // R's and Q''s rows: n apart in device memory, n + 1 in shared memory.
  uint ws = SH ? n + 1u : n;
  if ((pc.mode & 1u) != 0u) {
    uint64_t off = uint64_t(mat) * nn * uint64_t(T_ALIGN);
    bool tri = (pc.mode & 4u) != 0u;
    for (uint e = t; e < nn; e += 256u) {
      AW.v[e] = R(InT(pc.a + off).v[e]);
      QA.v[e] = tri ? (e / n == e % n ? R(1) : R(0)) : R(InT(pc.qw + off).v[e]);
    }
    if (t == 0u) TA.v[2u * kr] = R(0);
    sync_wg();
    if (tri) tridiagonalize(AW, QA, AN, WorkR(base + uint64_t(mats) * step), n, eps);
  }
  bool done = TA.v[2u * kr] != R(0);  // uniform
  R sq;
  for (uint it = 0u; it < pc.i && !done; ++it) {
    // {Q', R} = qr(A): VARIANT 5's reflections on a copy of A, Q' from
    // the identity.
    for (uint e = t; e < nn; e += 256u) {
      uint row = e / n, col = e - row * n;
      wset(W, 0u, row * ws + col, AW.v[e]);
      wset(QW, 1u, row * ws + col, row == col ? R(1) : R(0));
    }
    sync_wg();
    // VARIANT 6 sums each reflection's squares from its column; the
    // shared forms take reflection i + 1's from reflection i's update (as
    // VARIANT 2 does), unless reflection i was the identity. (On an H200
    // that made the shared forms 3-9% faster and VARIANT 6 at order 64
    // 2-7% slower.)
    for (uint i = 0u; i < kr; ++i) {
      if (!SH || i == 0u) {
        reflect(W, TA, n, ws, kr, i, eps);
        sync_wg();
      }
      bool next = SH && i + 1u < kr;
      R tau = tget(TA, i);
      apply(W, TA, tau, tget(TA, kr + i), W, 0u, n, ws, ws, i, 0u, n, true, next, sq);
      if (!next) continue;
      if (tau == R(0)) {  // uniform
        reflect(W, TA, n, ws, kr, i + 1u, eps);
      } else if (t == 0u) {
        R s = R(0);
        for (uint k = 0u; k < RG; ++k) s += sqg[k];
        finish_reflection(W, TA, ws, kr, i + 1u, s, eps);
      }
      sync_wg();
    }
    for (uint i = kr; i-- > 0u;)
      apply(W, TA, tget(TA, i), tget(TA, kr + i), QW, 1u, n, ws, ws, i, i, n, false, false, sq);
    // R and Q' as VARIANT 3 writes them: v's entries zero, entries of at
    // most eps flushed.
    for (uint e = t; e < nn; e += 256u) {
      uint row = e / n, col = e - row * n, at = row * ws + col;
      R x = wget(W, 0u, at);
      if (row > col && col < kr && tget(TA, col) != R(0)) x = R(0);
      wset(W, 0u, at, abs(x) <= eps ? R(0) : x);
      R y = wget(QW, 1u, at);
      wset(QW, 1u, at, abs(y) <= eps ? R(0) : y);
    }
    sync_wg();
    // The next A = R Q' and Q = Q Q'; how many entries of Q moved by more
    // than eps. With R in shared memory the next A goes straight to A's
    // place.
    uint moved = 0u;
    for (uint e = t; e < nn; e += 256u) {
      uint row = e / n, col = e - row * n;
      R a = R(0), q = R(0);
      for (uint k = 0u; k < n; ++k) {
        R qk = wget(QW, 1u, k * ws + col);
        a += wget(W, 0u, row * ws + k) * qk;
        q += QA.v[row * n + k] * qk;
      }
      if (SH)
        AW.v[e] = a;
      else
        AN.v[e] = a;
      QN.v[e] = q;
      if (abs(QA.v[e] - q) > eps) moved++;
    }
    done = sum_wg(R(moved)) == R(0);
    for (uint e = t; e < nn; e += 256u) {
      if (!SH) AW.v[e] = AN.v[e];
      QA.v[e] = QN.v[e];
    }
    sync_wg();
  }
  if (t == 0u) TA.v[2u * kr] = done ? R(1) : R(0);
  if ((pc.mode & 2u) != 0u) {
    uint64_t off = uint64_t(mat) * nn * uint64_t(T_ALIGN);
    for (uint e = t; e < nn; e += 256u) {
      OutT(pc.r + off).v[e] = T(AW.v[e]);
      OutT(pc.q + off).v[e] = T(QA.v[e]);
    }
  }
}

// The matrix of this workgroup (x + y * width plus b0), or batch.
uint matrix_of_group() {
  return pc.b0 + gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
}

void main() {
  R eps = EPS_R(pc.eps_bits);
  uint m = pc.m, n = pc.n, qc = pc.qc, kr = pc.kr;
  if (VARIANT == 3u) {
    // Copy in (mode 0) or out (mode 1), a matrix per workgroup row.
    uint mat = pc.b0 + gl_WorkGroupID.y;
    uint an = m * n, qn = m * qc, rn = pc.rr * n;
    uint total = pc.mode == 0u ? max(an, qn) : max(rn, qn);
    WorkR W = WorkR(pc.work + uint64_t(mat) * an * uint64_t(R_BYTES));
    WorkR TA = WorkR(pc.tau + uint64_t(mat) * (2u * kr) * uint64_t(R_BYTES));
    WorkR QW = WorkR(pc.qw + uint64_t(mat) * qn * uint64_t(R_BYTES));
    for (uint e = gl_GlobalInvocationID.x; e < total; e += gl_NumWorkGroups.x * 256u) {
      if (pc.mode == 0u) {
        if (e < an) W.v[e] = R(InT(pc.a + uint64_t(mat) * an * uint64_t(T_ALIGN)).v[e]);
        if (e < qn) QW.v[e] = e / qc == e % qc ? R(1) : R(0);
      } else {
        if (e < rn) {
          uint row = e / n, col = e - row * n;
          R x = W.v[e];
          // Below the diagonal: v of a reflected column, zero in R.
          if (row > col && col < kr && TA.v[col] != R(0)) x = R(0);
          OutT(pc.r + uint64_t(mat) * rn * uint64_t(T_ALIGN)).v[e] = T(abs(x) <= eps ? R(0) : x);
        }
        if (e < qn) {
          R x = QW.v[e];
          OutT(pc.q + uint64_t(mat) * qn * uint64_t(T_ALIGN)).v[e] = T(abs(x) <= eps ? R(0) : x);
        }
      }
    }
    return;
  }
  uint mat = VARIANT == 2u || VARIANT == 4u ? pc.b0 + gl_WorkGroupID.y : matrix_of_group();
  if (mat >= pc.batch) return;  // the whole workgroup
  if (VARIANT == 6u || SH) {
    eigh_steps(mat, n, kr, eps);
    return;
  }
  WorkR W = WorkR(pc.work + uint64_t(mat) * (m * n) * uint64_t(R_BYTES));
  WorkR TA = WorkR(pc.tau + uint64_t(mat) * (2u * kr) * uint64_t(R_BYTES));
  WorkR QW = WorkR(pc.qw + uint64_t(mat) * (m * qc) * uint64_t(R_BYTES));
  R sq;
  if (VARIANT == 1u) {
    reflect(W, TA, m, n, kr, 0u, eps);
  } else if (VARIANT == 2u) {
    uint i = pc.i;
    // The workgroup holding column i + 1 (final once i is applied)
    // computes the next reflection, its squares summed on the way.
    bool next = gl_WorkGroupID.x == (i + 1u) / CW && i + 1u < kr;
    apply(W, TA, TA.v[i], TA.v[kr + i], W, 0u, m, n, n, i, gl_WorkGroupID.x * CW, n, true, next,
          sq);
    if (next) {
      if (TA.v[i] == R(0))
        reflect(W, TA, m, n, kr, i + 1u, eps);
      else
        finish_reflection(W, TA, n, kr, i + 1u, sum_wg(sq), eps);
    }
  } else if (VARIANT == 4u) {
    uint c0 = gl_WorkGroupID.x * CW;
    for (uint i = min(pc.i, c0 + CW); i-- > pc.mode;)
      apply(W, TA, TA.v[i], TA.v[kr + i], QW, 1u, m, n, qc, i, c0, qc, false, false, sq);
  } else if (VARIANT == 5u) {
    for (uint i = 0u; i < kr; ++i) {
      reflect(W, TA, m, n, kr, i, eps);
      sync_wg();
      apply(W, TA, TA.v[i], TA.v[kr + i], W, 0u, m, n, n, i, 0u, n, true, false, sq);
    }
    for (uint i = kr; i-- > 0u;)
      apply(W, TA, TA.v[i], TA.v[kr + i], QW, 1u, m, n, qc, i, i, qc, false, false, sq);
  }
}
