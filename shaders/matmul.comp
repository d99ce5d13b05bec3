#version 460
#extension GL_GOOGLE_include_directive : require
#include "types.glsl"
// matmul.comp - batched C[b] = A[b] (m x k) * B[b] (k x n), C dense, for
// type T (T_ID), accumulated in its compute type TC.
// Operands are addressed through arbitrary element strides (batch, row,
// column), so transposed and broadcast operands need no copy. Each
// workgroup (256 threads, spec constant 0 must be 256) computes a 64x64
// tile of C, 4x4 elements per thread, staging 64x16 / 16x64 tiles of A and
// B in shared memory (f64: read from memory a slice ahead, see below).
// Dispatch: (ceil(n/64), ceil(m/64), batch).
#include "common.glsl"

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT { T v[]; };

layout(push_constant, std430) uniform PC {
  BufT a;
  BufT b;
  BufT c;
  uint m, n, k, batch_base;
  int a_sb, a_sm, a_sk;
  int b_sb, b_sk, b_sn;
  uint a_off, b_off;
} pc;

#define BM 64
#define BN 64
#if T_BITS >= 128
#define BK 8  // c128: keeps the tiles within 16.6 KiB of shared memory, as f64's
#else
#define BK 16
#endif
#if T_KIND == KIND_COMPLEX
#include "complex.glsl"
#define MUL(x, y) c_mul_plain(x, y)
#else
#define MUL(x, y) ((x) * (y))
#endif

#if T_ID == 11
// f64: shared memory as pairs of doubles, so that one 16-byte read gives a
// thread two of its rows (2 ty, 2 ty + 1, then 32 on) or columns (H200:
// 0.5-5% faster than a double per read).
#define F64_PAIRS 1
shared dvec2 As[BK][BM / 2 + 1];
shared dvec2 Bs[BK][BN / 2 + 1];
#define SM_STORE(arr, p, r, v) arr[p][(r) >> 1u][(r) & 1u] = (v)
#define RC_OF(t, i) (2u * (t) + ((i) & 1u) + 32u * ((i) >> 1u))
#else
shared TC As[BK][BM + 1];
shared TC Bs[BK][BN + 1];
#define SM_STORE(arr, p, r, v) arr[p][r] = (v)
#define RC_OF(t, i) ((t) + 16u * (i))
#endif

void main() {
  uint lid = gl_LocalInvocationID.x;
  uint tx = lid % 16u, ty = lid / 16u;
  uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  uint bat = gl_WorkGroupID.z + pc.batch_base;
  uint abase = pc.a_off + bat * uint(pc.a_sb);
  uint bbase = pc.b_off + bat * uint(pc.b_sb);
  bool a_kmajor = pc.a_sk == 1;  // consecutive threads walk k
  bool b_nmajor = pc.b_sn == 1;  // consecutive threads walk n

#if TC_BITS == 64
  // 64-bit compute types keep their 4x4 results in sixteen named variables:
  // the NVIDIA driver (580) placed the array form's doubles in local
  // memory, which held f64 products to 1.1 TFLOP/s on an H200 (14.2 with
  // this form). 32-bit types keep the array form, which the driver unrolls
  // into registers (and which ran the step shapes up to 5% faster).
#define ACC_DECL(i) TC acc##i##0 = TC(0), acc##i##1 = TC(0), acc##i##2 = TC(0), acc##i##3 = TC(0);
  ACC_DECL(0) ACC_DECL(1) ACC_DECL(2) ACC_DECL(3)
#else
  TC acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = TC(0);
#endif

  // Element t (0 .. BM*BK/256 - 1) of this thread's share of a k slice:
  // its place in the A and B tiles, its value read from memory (0 outside
  // the operands), and its store to shared memory.
#define A_POS(t, r, p)                                                        \
  {                                                                           \
    uint e_ = lid + 256u * (t);                                               \
    if (a_kmajor) { r = e_ / BK; p = e_ % BK; } else { r = e_ % BM; p = e_ / BM; } \
  }
#define B_POS(t, q, s)                                                        \
  {                                                                           \
    uint e_ = lid + 256u * (t);                                               \
    if (b_nmajor) { q = e_ / BN; s = e_ % BN; } else { q = e_ % BK; s = e_ / BK; } \
  }
#define A_LOAD(t, kk, val)                                                    \
  {                                                                           \
    uint r_, p_;                                                              \
    A_POS(t, r_, p_)                                                          \
    uint gr_ = row0 + r_, gp_ = (kk) + p_;                                    \
    val = (gr_ < pc.m && gp_ < pc.k)                                          \
        ? T_LD(pc.a.v[abase + gr_ * uint(pc.a_sm) + gp_ * uint(pc.a_sk)]) : TC(0); \
  }
#define B_LOAD(t, kk, val)                                                    \
  {                                                                           \
    uint q_, s_;                                                              \
    B_POS(t, q_, s_)                                                          \
    uint gq_ = (kk) + q_, gs_ = col0 + s_;                                    \
    val = (gq_ < pc.k && gs_ < pc.n)                                          \
        ? T_LD(pc.b.v[bbase + gq_ * uint(pc.b_sk) + gs_ * uint(pc.b_sn)]) : TC(0); \
  }
#define A_STORE(t, val) { uint r_, p_; A_POS(t, r_, p_) SM_STORE(As, p_, r_, val); }
#define B_STORE(t, val) { uint q_, s_; B_POS(t, q_, s_) SM_STORE(Bs, q_, s_, val); }
#if defined(F64_PAIRS)
  // The next k slice is read from memory into registers (4 elements of A
  // and 4 of B per thread) while the current one is multiplied (H200:
  // 4096^3 14.6 -> 16.5 TFLOP/s, 128x784x512 10.9 -> 11.7).
#define FETCH(kk)                                                             \
  A_LOAD(0u, kk, pa0) A_LOAD(1u, kk, pa1) A_LOAD(2u, kk, pa2) A_LOAD(3u, kk, pa3) \
  B_LOAD(0u, kk, pb0) B_LOAD(1u, kk, pb1) B_LOAD(2u, kk, pb2) B_LOAD(3u, kk, pb3)
  TC pa0, pa1, pa2, pa3, pb0, pb1, pb2, pb3;
  FETCH(0u)
#endif
  for (uint k0 = 0u; k0 < pc.k; k0 += BK) {
#if defined(F64_PAIRS)
    A_STORE(0u, pa0) A_STORE(1u, pa1) A_STORE(2u, pa2) A_STORE(3u, pa3)
    B_STORE(0u, pb0) B_STORE(1u, pb1) B_STORE(2u, pb2) B_STORE(3u, pb3)
    barrier();
    if (k0 + BK < pc.k) FETCH(k0 + BK)
#else
    for (uint t = 0u; t < BM * BK / 256u; ++t) {  // each thread loads BM*BK/256
      TC va, vb;
      A_LOAD(t, k0, va) A_STORE(t, va)
      B_LOAD(t, k0, vb) B_STORE(t, vb)
    }
    barrier();
#endif
    for (uint p = 0u; p < BK; ++p) {
#if defined(F64_PAIRS)
      dvec2 a01 = As[p][ty], a23 = As[p][ty + 16u], b01 = Bs[p][tx], b23 = Bs[p][tx + 16u];
      TC a0 = a01.x, a1 = a01.y, a2 = a23.x, a3 = a23.y;
      TC b0 = b01.x, b1 = b01.y, b2 = b23.x, b3 = b23.y;
#elif TC_BITS == 64
      TC a0 = As[p][ty], a1 = As[p][ty + 16u], a2 = As[p][ty + 32u], a3 = As[p][ty + 48u];
      TC b0 = Bs[p][tx], b1 = Bs[p][tx + 16u], b2 = Bs[p][tx + 32u], b3 = Bs[p][tx + 48u];
#endif
#if TC_BITS == 64
#define ACC_ROW(i)                                                            \
  acc##i##0 += MUL(a##i, b0); acc##i##1 += MUL(a##i, b1);                     \
  acc##i##2 += MUL(a##i, b2); acc##i##3 += MUL(a##i, b3);
      ACC_ROW(0) ACC_ROW(1) ACC_ROW(2) ACC_ROW(3)
#else
      TC av[4], bv[4];
      for (uint i = 0u; i < 4u; ++i) av[i] = As[p][ty + 16u * i];
      for (uint j = 0u; j < 4u; ++j) bv[j] = Bs[p][tx + 16u * j];
      for (uint i = 0u; i < 4u; ++i)
        for (uint j = 0u; j < 4u; ++j) acc[i][j] += MUL(av[i], bv[j]);
#endif
    }
    barrier();
  }
  uint cbase = bat * pc.m * pc.n;
#if TC_BITS == 64
#define ST(i, j)                                                              \
  if (gr < pc.m && col0 + RC_OF(tx, j) < pc.n)                                \
    pc.c.v[cbase + gr * pc.n + col0 + RC_OF(tx, j)] = T_ST(acc##i##j);
#define ST_ROW(i)                                                             \
  {                                                                           \
    uint gr = row0 + RC_OF(ty, i);                                            \
    ST(i, 0) ST(i, 1) ST(i, 2) ST(i, 3)                                       \
  }
  ST_ROW(0) ST_ROW(1) ST_ROW(2) ST_ROW(3)
#else
  for (uint i = 0u; i < 4u; ++i) {
    uint gr = row0 + ty + 16u * i;
    if (gr >= pc.m) continue;
    for (uint j = 0u; j < 4u; ++j) {
      uint gc = col0 + tx + 16u * j;
      if (gc < pc.n) pc.c.v[cbase + gr * pc.n + gc] = T_ST(acc[i][j]);
    }
  }
#endif
}
