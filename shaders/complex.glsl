// complex.glsl - arithmetic on the complex types of types.glsl (TC is vec2
// or dvec2 holding re, im; TR its component type) with the formulas of
// Elixir's Complex library, which Nx.BinaryBackend computes with. Include
// after types.glsl and common.glsl. The real functions (cr_*) evaluate in
// double through math64.glsl for c128 and, with PRECISE32, for c64; with
// GLSL's float built-ins otherwise.
#if T_KIND == KIND_COMPLEX && !defined(NXV_COMPLEX_GLSL)
#define NXV_COMPLEX_GLSL 1

#if TC_BITS == 64 || defined(PRECISE32)
#define C_WIDE 1
#include "math64.glsl"
TR cr_exp(TR x) { return TR(exp64(double(x))); }
TR cr_log(TR x) { return TR(log64(double(x))); }
TR cr_sin(TR x) { return TR(sin64(double(x))); }
TR cr_cos(TR x) { return TR(cos64(double(x))); }
TR cr_sinh(TR x) { return TR(sinh64(double(x))); }
TR cr_cosh(TR x) { return TR(cosh64(double(x))); }
TR cr_sqrt(TR x) { return TR(m64_sqrt(double(x))); }
TR cr_atan2(TR y, TR x) { return TR(atan2_64(double(y), double(x))); }
// x >= 0 (a modulus).
TR cr_pow(TR x, TR y) {
  if (y == TR(0) || x == TR(1)) return TR(1);
  if (x == TR(0)) return y > TR(0) ? TR(0) : TR(1) / TR(0);
  return TR(exp64(double(y) * log64(double(x))));
}
#else
TR cr_exp(TR x) { return exp(x); }
TR cr_log(TR x) { return log(x); }
TR cr_sin(TR x) { return sin(x); }
TR cr_cos(TR x) { return cos(x); }
// GLSL's sinh may be (e^x - e^-x) / 2, which cancels near 0: a series there.
TR cr_sinh(TR x) {
  if (!(abs(x) < TR(0.5))) return sinh(x);
  TR x2 = x * x;
  return x + x * x2 * (TR(1.0 / 6.0) + x2 * (TR(1.0 / 120.0) + x2 * (TR(1.0 / 5040.0) +
                                                                      x2 * TR(1.0 / 362880.0))));
}
TR cr_cosh(TR x) { return cosh(x); }
TR cr_sqrt(TR x) { return sqrt(x); }
TR cr_atan2(TR y, TR x) {
  if (isnan(x) || isnan(y)) return TR(0) / TR(0);
  const TR PI = TR(3.14159265358979323846);
  bool xneg = (floatBitsToUint(x) >> 31) != 0u;
  TR r;
  if (y == TR(0)) r = xneg ? PI : TR(0);
  else if (isinf(x) && isinf(y)) r = xneg ? TR(0.75) * PI : TR(0.25) * PI;
  else if (isinf(x)) r = xneg ? PI : TR(0);
  else if (isinf(y) || x == TR(0)) r = TR(0.5) * PI;
  else return atan(y, x);
  return (floatBitsToUint(y) >> 31) != 0u ? -r : r;
}
TR cr_pow(TR x, TR y) {
  if (y == TR(0) || x == TR(1)) return TR(1);
  if (x == TR(0)) return y > TR(0) ? TR(0) : TR(1) / TR(0);
  return pow(x, y);
}
#endif

// a b by the textbook formula: what products inside sums (matmul.comp,
// conv.comp) use.
TC c_mul_plain(TC a, TC b) {
  precise TR re = a.x * b.x - a.y * b.y;
  precise TR im = a.y * b.x + a.x * b.y;
  return TC(re, im);
}

// a b as Complex.multiply/2 computes it: a real b scales a's parts (so
// (inf + 3i) 2 is inf + 6i, not inf + NaN i); a real a scales b's, as
// Nx.BinaryBackend multiplies a number or a real tensor's elements (2 (inf
// + 3i) is inf + 6i too); an imaginary b rotates a; otherwise the textbook
// formula. The same as c_mul_plain for finite operands but for the signs
// of zeros.
TC c_mul(TC a, TC b) {
  if (b.y == TR(0)) return TC(b.x * a.x, b.x * a.y);
  if (a.y == TR(0)) return TC(a.x * b.x, a.x * b.y);
  if (b.x == TR(0)) {
    TR p = a.y * b.y;
    return TC(p == TR(0) ? TR(0) : -p, a.x * b.y);
  }
  return c_mul_plain(a, b);
}

TC c_div(TC a, TC b) {
  if (b.y == TR(0)) return TC(a.x / b.x, a.y / b.x);
  if (b.x == TR(0)) return TC(a.y / b.y, -(a.x / b.y));
  precise TR nre = a.x * b.x + a.y * b.y;
  precise TR nim = a.y * b.x - a.x * b.y;
  precise TR den = b.x * b.x + b.y * b.y;
  return TC(nre / den, nim / den);
}

TR c_abs(TC z) {
  TR x = abs(z.x), y = abs(z.y);
  if (isinf(x) || isinf(y)) return TR(1) / TR(0);
  if (x == TR(0)) return y;
  if (y == TR(0)) return x;
  if (x > y) { TR q = y / x; return x * cr_sqrt(TR(1) + q * q); }
  TR q = x / y;
  return y * cr_sqrt(TR(1) + q * q);
}

TR c_phase(TC z) { return cr_atan2(z.y, z.x); }

TC c_exp(TC z) {
  if (isinf(z.x) && z.x < TR(0)) return TC(0);
  TR rho = cr_exp(z.x);
  if (z.y == TR(0)) return TC(rho, TR(0));
  return TC(rho * cr_cos(z.y), rho * cr_sin(z.y));
}

TC c_log(TC z) { return TC(cr_log(c_abs(z)), c_phase(z)); }

TC c_sqrt(TC z) {
  if (isnan(z.x) || isnan(z.y)) return TC(TR(0) / TR(0));
  if (isinf(z.y)) return TC(TR(1) / TR(0), z.y);  // (inf, +-inf), as Complex.sqrt
  if (z.x == TR(0) && z.y == TR(0)) return z;
  TR x = abs(z.x), y = abs(z.y), w;
  if (x >= y) {
    TR q = y / x;
    w = cr_sqrt(x) * cr_sqrt(TR(0.5) * (TR(1) + cr_sqrt(TR(1) + q * q)));
  } else {
    TR q = x / y;
    w = cr_sqrt(y) * cr_sqrt(TR(0.5) * (q + cr_sqrt(TR(1) + q * q)));
  }
  if (z.x >= TR(0)) return TC(w, z.y / (TR(2) * w));
  TR i2 = z.y >= TR(0) ? w : -w;
  return TC(z.y / (TR(2) * i2), i2);
}

TC c_sin(TC z) { return TC(cr_sin(z.x) * cr_cosh(z.y), cr_cos(z.x) * cr_sinh(z.y)); }
TC c_cos(TC z) { return TC(cr_cos(z.x) * cr_cosh(z.y), -cr_sin(z.x) * cr_sinh(z.y)); }
TC c_sinh(TC z) { return (c_exp(z) - c_exp(-z)) / TR(2); }
TC c_cosh(TC z) { return (c_exp(z) + c_exp(-z)) / TR(2); }

TC c_pow(TC x, TC y) {
  if (x.x == TR(0) && x.y == TR(0))
    return (y.x == TR(0) && y.y == TR(0)) ? TC(TR(1), TR(0)) : TC(0);
  if (y.x == TR(1) && y.y == TR(0)) return x;
  if (y.x == TR(-1) && y.y == TR(0)) return c_div(TC(TR(1), TR(0)), x);
  TR rho = c_abs(x), theta = c_phase(x);
  TR s = cr_pow(rho, y.x) * cr_exp(-y.y * theta);
  TR r = y.x * theta + y.y * cr_log(rho);
  return TC(s * cr_cos(r), s * cr_sin(r));
}

#endif
