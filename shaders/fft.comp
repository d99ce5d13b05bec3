#version 460
#extension GL_GOOGLE_include_directive : require
#include "types.glsl"
// fft.comp - one stage of the discrete Fourier transform of each row of a
// dense rows x n complex tensor (T_ID 12 or 13), the decimation in time
// that Nx.BinaryBackend uses: n = 2^p * m with m odd.
//   Stage 0 (flags bit0): the 2^p interleaved subsequences x[j + t 2^p]
//     (t < m) are transformed directly: Y[j][k] = sum_t x[j + t 2^p] w_m^tk,
//     w_m = exp(-2 pi i / m), twiddles from (t k mod m) exactly.
//   Stage s > 0: subsequences of length len (and count n / len) combine in
//     pairs (j, j + n / (2 len)) into length 2 len:
//     Y'[j][k] = E[k'] +- exp(-2 pi i k' / (2 len)) O[k'], k' = k mod len.
// The inverse (flags bit2) conjugates the input of stage 0 and the output
// of the last stage (flags bit1), which it divides by n. The last stage
// flushes components of magnitude <= eps to zero (Nx's :eps).
// Arithmetic is in double for c128 and, with WIDE, c64; intermediate
// stages then read and write dvec2 buffers (flags bit3: src is dvec2,
// bit4: dst is dvec2), so that only the result is rounded to c64.
#include "common.glsl"
#if T_ID != 12 && T_ID != 13
#error "fft.comp is built for complex types"
#endif
#if T_ID == 13 || defined(WIDE)
#include "math64.glsl"
#define R double
#define CV dvec2
R r_cos(R x) { return cos64(x); }
R r_sin(R x) { return sin64(x); }
const R TWO_PI = 6.28318530717958647692LF;
#else
#define R float
#define CV vec2
R r_cos(R x) { return cos(x); }
R r_sin(R x) { return sin(x); }
const R TWO_PI = 6.28318530717958647692;
#endif

layout(buffer_reference, std430, buffer_reference_align = T_ALIGN) buffer BufT { T v[]; };
#if T_ID == 13 || defined(WIDE)
layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufW { dvec2 v[]; };
#endif

layout(push_constant, std430) uniform PC {
  uint64_t src;
  uint64_t dst;
  uvec2 eps_bits;  // eps as a double's bits
  float eps_f;     // eps as a float (c64 without double arithmetic)
  uint rows;
  uint n;
  uint m;      // the odd factor of n
  uint len;    // stage > 0: the length of the subsequences read
  uint flags;  // bit0 stage 0, bit1 last stage, bit2 inverse
} pc;

CV cmul(CV a, CV b) {
  precise R re = a.x * b.x - a.y * b.y;
  precise R im = a.y * b.x + a.x * b.y;
  return CV(re, im);
}

// exp(-2 pi i num / den) as Complex.exp(Complex.new(0, -2 * pi * num / den)).
CV twiddle(uint num, uint den) {
  precise R theta = (-TWO_PI * R(num)) / R(den);
  return CV(r_cos(theta), r_sin(theta));
}

CV load(uint i) {
#if T_ID == 13 || defined(WIDE)
  if ((pc.flags & 8u) != 0u) return CV(BufW(pc.src).v[i]);
#endif
  return CV(BufT(pc.src).v[i]);
}

void store(uint i, CV v) {
#if T_ID == 13 || defined(WIDE)
  if ((pc.flags & 16u) != 0u) {
    BufW(pc.dst).v[i] = dvec2(v);
    return;
  }
#endif
  BufT(pc.dst).v[i] = T(v);
}

void main() {
  bool first = (pc.flags & 1u) != 0u, last = (pc.flags & 2u) != 0u;
  bool inverse = (pc.flags & 4u) != 0u;
  uint n = pc.n, total = pc.rows * n;
  for (uint i = nxv_gid(); i < total; i += nxv_nthreads()) {
    uint row = i / n, q = i - row * n, base = row * n;
    CV v;
    if (first) {
      uint m = pc.m, L = n / m, j = q / m, k = q - j * m;
      v = CV(0);
      for (uint t = 0u; t < m; ++t) {
        CV x = load(base + j + t * L);
        if (inverse) x.y = -x.y;
        uint e = uint((uint64_t(t) * uint64_t(k)) % uint64_t(m));
        v += e == 0u ? x : cmul(x, twiddle(e, m));
      }
    } else {
      uint len = pc.len, half_count = n / (2u * len);
      uint j = q / (2u * len), k = q - j * 2u * len;
      uint kk = k < len ? k : k - len;
      CV e = load(base + j * len + kk);
      CV o = load(base + (j + half_count) * len + kk);
      CV t = kk == 0u ? o : cmul(twiddle(kk, 2u * len), o);
      v = k < len ? e + t : e - t;
    }
    if (last) {
      if (inverse) v = CV(v.x, -v.y) / R(n);
#if T_ID == 13 || defined(WIDE)
      R eps = packDouble2x32(pc.eps_bits);
#else
      R eps = pc.eps_f;
#endif
      if (abs(v.x) <= eps) v.x = R(0);
      if (abs(v.y) <= eps) v.y = R(0);
    }
    store(base + q, v);
  }
}
