// math64.glsl - double-precision exp, log, trigonometric, hyperbolic and
// special functions, atan2 and pow.
//
// GLSL has no double transcendental functions. These are built from
// Cody-Waite range reduction and Taylor/atanh series evaluated in double,
// accurate to a few ulp of double for arguments of ordinary size (sin and
// cos reduce by pi/2 in three parts: exact up to |x| ~ 1e9, degrading
// beyond). Rounded to float they give the correctly rounded f32 result in
// practice, as a host libm does.

#ifndef NXV_MATH64_GLSL
#define NXV_MATH64_GLSL 1
const double M64_LN2_HI = 6.93147180369123816490e-01LF;
const double M64_LN2_LO = 1.90821492927058770002e-10LF;
const double M64_LOG2E = 1.44269504088896338700e+00LF;
const double M64_PIO2_1 = 1.57079632673412561417e+00LF;
const double M64_PIO2_2 = 6.07710050650619224932e-11LF;
const double M64_PIO2_3 = 2.02226624879595063154e-21LF;
const double M64_2OPI = 6.36619772367581382433e-01LF;

double m64_inf() { return 1.0LF / 0.0LF; }

// a / b refined by one fma correction: drivers may divide doubles through
// an approximate reciprocal (seen 15 ulp off); this is within an ulp.
double m64_div(double a, double b) {
  precise double q = a / b;
  if (isinf(q) || isnan(q) || q == 0.0LF || isinf(b)) return q;
  precise double rem = fma(-q, b, a);
  precise double res = fma(rem, 1.0LF / b, q);
  return res;
}
double m64_nan() { return 0.0LF / 0.0LF; }

// Series coefficients (exact decimal expansions; no division at run
// time: some drivers divide in double through an approximate reciprocal).
const double M64_INV_FACT[18] = double[](
    1.00000000000000000000e+0LF,
    1.00000000000000000000e+0LF,
    5.00000000000000000000e-1LF,
    1.66666666666666666667e-1LF,
    4.16666666666666666667e-2LF,
    8.33333333333333333333e-3LF,
    1.38888888888888888889e-3LF,
    1.98412698412698412698e-4LF,
    2.48015873015873015873e-5LF,
    2.75573192239858906526e-6LF,
    2.75573192239858906526e-7LF,
    2.50521083854417187751e-8LF,
    2.08767569878680989792e-9LF,
    1.60590438368216145994e-10LF,
    1.14707455977297247139e-11LF,
    7.64716373181981647590e-13LF,
    4.77947733238738529744e-14LF,
    2.81145725434552076320e-15LF);
const double M64_SIN_C[10] = double[](
    -1.66666666666666666667e-1LF,
    8.33333333333333333333e-3LF,
    -1.98412698412698412698e-4LF,
    2.75573192239858906526e-6LF,
    -2.50521083854417187751e-8LF,
    1.60590438368216145994e-10LF,
    -7.64716373181981647590e-13LF,
    2.81145725434552076320e-15LF,
    -8.22063524662432971696e-18LF,
    1.95729410633912612308e-20LF);
const double M64_COS_C[11] = double[](
    -5.00000000000000000000e-1LF,
    4.16666666666666666667e-2LF,
    -1.38888888888888888889e-3LF,
    2.48015873015873015873e-5LF,
    -2.75573192239858906526e-7LF,
    2.08767569878680989792e-9LF,
    -1.14707455977297247139e-11LF,
    4.77947733238738529744e-14LF,
    -1.56192069685862264622e-16LF,
    4.11031762331216485848e-19LF,
    -8.89679139245057328675e-22LF);
const double M64_ODD_INV[14] = double[](
    3.33333333333333333333e-1LF,
    2.00000000000000000000e-1LF,
    1.42857142857142857143e-1LF,
    1.11111111111111111111e-1LF,
    9.09090909090909090909e-2LF,
    7.69230769230769230769e-2LF,
    6.66666666666666666667e-2LF,
    5.88235294117647058824e-2LF,
    5.26315789473684210526e-2LF,
    4.76190476190476190476e-2LF,
    4.34782608695652173913e-2LF,
    4.00000000000000000000e-2LF,
    3.70370370370370370370e-2LF,
    3.44827586206896551724e-2LF);

// e^r - 1 for |r| <= 0.5 (Taylor to r^17/17!, Horner: < 2e-17 relative).
double m64_expm1_small(double r) {
  double p = M64_INV_FACT[17];
  for (int k = 16; k >= 1; --k) p = fma(p, r, M64_INV_FACT[k]);
  return p * r;
}

double exp64(double x) {
  if (isnan(x)) return x;
  if (x > 709.782712893384LF) return m64_inf();
  if (x < -745.1332191019412LF) return 0.0LF;
  double k = floor(x * M64_LOG2E + 0.5LF);
  precise double r = (x - k * M64_LN2_HI) - k * M64_LN2_LO;  // |r| <= 0.35
  double p = 1.0LF + m64_expm1_small(r);
  // Scale in two steps so neither overflows near the range ends.
  int ki = int(k);
  int h = ki / 2;
  return ldexp(ldexp(p, h), ki - h);
}

double expm1_64(double x) {
  if (abs(x) <= 0.5LF) return m64_expm1_small(x);
  return exp64(x) - 1.0LF;
}

double log64(double x) {
  if (isnan(x) || x < 0.0LF) return m64_nan();
  if (x == 0.0LF) return -m64_inf();
  if (isinf(x)) return x;
  int e;
  double m = frexp(x, e);  // x = m * 2^e, m in [0.5, 1)
  if (m < 0.70710678118654752440LF) {
    m *= 2.0LF;
    e -= 1;
  }
  precise double f = m - 1.0LF;      // [-0.293, 0.414]
  double s = m64_div(f, 2.0LF + f);  // |s| <= 0.1716
  // log(m) = 2 atanh(s) = 2 s (1 + s^2/3 + s^4/5 + ...), to s^29.
  double s2 = s * s, p = M64_ODD_INV[13];
  for (int k = 12; k >= 0; --k) p = fma(p, s2, M64_ODD_INV[k]);
  double sum = fma(s * s2, p, s);
  double de = double(e);
  return de * M64_LN2_HI + (de * M64_LN2_LO + 2.0LF * sum);
}

// sin and cos of r in [-pi/4, pi/4].
double m64_sin_kernel(double r) {
  double r2 = r * r, p = M64_SIN_C[9];
  for (int k = 8; k >= 0; --k) p = fma(p, r2, M64_SIN_C[k]);
  return fma(r * r2, p, r);
}
double m64_cos_kernel(double r) {
  double r2 = r * r, p = M64_COS_C[10];
  for (int k = 9; k >= 0; --k) p = fma(p, r2, M64_COS_C[k]);
  return fma(r2, p, 1.0LF);
}

// Reduces x to r in [-pi/4, pi/4] and the quadrant q (mod 4).
double m64_reduce(double x, out int q) {
  double k = floor(x * M64_2OPI + 0.5LF);
  precise double r = ((x - k * M64_PIO2_1) - k * M64_PIO2_2) - k * M64_PIO2_3;
  q = int(mod(k, 4.0LF));
  return r;
}

double sin64(double x) {
  if (isinf(x) || isnan(x)) return m64_nan();
  int q;
  double r = m64_reduce(x, q);
  double v = (q & 1) == 0 ? m64_sin_kernel(r) : m64_cos_kernel(r);
  return q >= 2 ? -v : v;
}

double cos64(double x) {
  if (isinf(x) || isnan(x)) return m64_nan();
  int q;
  double r = m64_reduce(x, q);
  double v = (q & 1) == 0 ? m64_cos_kernel(r) : m64_sin_kernel(r);
  return (q == 1 || q == 2) ? -v : v;
}

double tanh64(double x) {
  if (isnan(x)) return x;
  double a = abs(x);
  if (a > 20.0LF) return sign(x);
  double em = expm1_64(2.0LF * a);   // no cancellation near 0
  double t = m64_div(em, em + 2.0LF);
  return x < 0.0LF ? -t : t;
}

double sigmoid64(double x) {
  if (isnan(x)) return x;
  if (x >= 0.0LF) return m64_div(1.0LF, 1.0LF + exp64(-x));
  double e = exp64(x);
  return m64_div(e, 1.0LF + e);
}

double log1p64(double x) {
  if (isnan(x) || x < -1.0LF) return m64_nan();
  if (x == -1.0LF) return -m64_inf();
  if (isinf(x)) return x;
  // precise: the compiler must not simplify (1 + x) - 1 to x.
  precise double u = 1.0LF + x;
  if (u == 1.0LF) return x;
  precise double um1 = u - 1.0LF;
  // log(u) * x / (u - 1): cancels the rounding error of 1 + x.
  return log64(u) * m64_div(x, um1);
}

double tan64(double x) { return m64_div(sin64(x), cos64(x)); }

double sinh64(double x) {
  if (isnan(x)) return x;
  double a = abs(x);
  if (a > 710.0LF) return x > 0.0LF ? m64_inf() : -m64_inf();
  double em = expm1_64(a);
  double s = 0.5LF * (em + m64_div(em, em + 1.0LF));
  return x < 0.0LF ? -s : s;
}

double cosh64(double x) {
  if (isnan(x)) return x;
  double a = abs(x);
  if (a > 710.0LF) return m64_inf();
  double e = exp64(a);
  return 0.5LF * (e + m64_div(1.0LF, e));
}

const double M64_2_SQRTPI = 1.12837916709551257390e+00LF;

// erfc(x) for x >= 2 by the continued fraction
// erfc(x) = exp(-x^2) / sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))
// evaluated bottom-up.
double m64_erfc_cf(double x) {
  double f = x;
  for (int k = 60; k >= 1; --k) f = x + m64_div(0.5LF * double(k), f);
  return exp64(-x * x) * m64_div(M64_2_SQRTPI * 0.5LF, f);
}

// erf(x) for |x| < 2 by its Taylor series sum (-1)^n x^(2n+1) / (n! (2n+1)).
double m64_erf_series(double x) {
  double x2 = x * x, t = x, s = x;
  for (int n = 1; n < 60; ++n) {
    t *= -x2 / double(n);
    double term = t / double(2 * n + 1);
    s += term;
    if (abs(term) < 1e-18LF * abs(s)) break;
  }
  return M64_2_SQRTPI * s;
}

double erf64(double x) {
  if (isnan(x)) return x;
  double a = abs(x);
  if (a >= 6.0LF) return x > 0.0LF ? 1.0LF : -1.0LF;
  double r = a < 2.0LF ? m64_erf_series(a) : 1.0LF - m64_erfc_cf(a);
  return x < 0.0LF ? -r : r;
}

double erfc64(double x) {
  if (isnan(x)) return x;
  if (x >= 27.0LF) return 0.0LF;
  if (x <= -6.0LF) return 2.0LF;
  double a = abs(x);
  double r = a < 2.0LF ? 1.0LF - m64_erf_series(a) : m64_erfc_cf(a);
  return x < 0.0LF ? 2.0LF - r : r;
}

// Inverse of erf: Giles' single-precision approximation (what Nx's host
// implementation computes, in double), refined by Newton steps on erf64
// when refine (f64 results).
double erf_inv64(double y, bool refine) {
  if (isnan(y) || abs(y) > 1.0LF) return m64_nan();
  if (abs(y) == 1.0LF) return y > 0.0LF ? m64_inf() : -m64_inf();
  double w = -log64((1.0LF - y) * (1.0LF + y)), p;
  if (w < 5.0LF) {
    w -= 2.5LF;
    p = 2.81022636e-08LF;
    p = 3.43273939e-07LF + p * w;
    p = -3.5233877e-06LF + p * w;
    p = -4.39150654e-06LF + p * w;
    p = 0.00021858087LF + p * w;
    p = -0.00125372503LF + p * w;
    p = -0.00417768164LF + p * w;
    p = 0.246640727LF + p * w;
    p = 1.50140941LF + p * w;
  } else {
    w = sqrt(w) - 3.0LF;
    p = -0.000200214257LF;
    p = 0.000100950558LF + p * w;
    p = 0.00134934322LF + p * w;
    p = -0.00367342844LF + p * w;
    p = 0.00573950773LF + p * w;
    p = -0.0076224613LF + p * w;
    p = 0.00943887047LF + p * w;
    p = 1.00167406LF + p * w;
    p = 2.83297682LF + p * w;
  }
  double x = p * y;
  for (int i = 0; refine && i < 3; ++i) {
    double err = erf64(x) - y;
    x -= m64_div(err, M64_2_SQRTPI * exp64(-x * x));
  }
  return x;
}

// sqrt with one Newton correction (drivers may take double sqrt through
// an approximate reciprocal square root).
double m64_sqrt(double x) {
  precise double s = sqrt(x);
  if (!(x > 0.0LF) || isinf(x)) return s;
  precise double r = fma(-s, s, x);
  return fma(r, m64_div(0.5LF, s), s);
}

// atan: Cephes' reduction to |x| <= 0.66 and rational approximation.
const double M64_ATAN_P[5] = double[](
    -8.750608600031904122785e-1LF, -1.615753718733365076637e1LF,
    -7.500855792314704667340e1LF, -1.228866684490136173410e2LF,
    -6.485021904942025371773e1LF);
const double M64_ATAN_Q[5] = double[](
    2.485846490142306297962e1LF, 1.650270098316988542046e2LF,
    4.328810604912902668951e2LF, 4.853903996359136964868e2LF,
    1.945506571482613964425e2LF);
const double M64_PIO2 = 1.57079632679489661923e+00LF;
const double M64_PIO4 = 7.85398163397448309616e-01LF;
const double M64_ATAN_MOREBITS = 6.123233995736765886130e-17LF;

double atan64(double x) {
  if (isnan(x)) return x;
  double a = abs(x), y, off;
  if (a > 2.41421356237309504880LF) {
    y = M64_PIO2;
    off = M64_ATAN_MOREBITS;
    a = -m64_div(1.0LF, a);
  } else if (a <= 0.66LF) {
    y = 0.0LF;
    off = 0.0LF;
  } else {
    y = M64_PIO4;
    off = 0.5LF * M64_ATAN_MOREBITS;
    a = m64_div(a - 1.0LF, a + 1.0LF);
  }
  double z = a * a;
  double p = M64_ATAN_P[0], q = z + M64_ATAN_Q[0];
  for (int i = 1; i < 5; ++i) {
    p = p * z + M64_ATAN_P[i];
    q = q * z + M64_ATAN_Q[i];
  }
  precise double r = a * m64_div(z * p, q) + a;
  r = y + (r + off);
  return x < 0.0LF ? -r : r;
}

double asin64(double x) {
  if (isnan(x) || abs(x) > 1.0LF) return m64_nan();
  precise double d = m64_sqrt((1.0LF - x) * (1.0LF + x));
  if (d == 0.0LF) return x < 0.0LF ? -M64_PIO2 : M64_PIO2;
  return atan64(m64_div(x, d));
}

double acos64(double x) {
  if (isnan(x) || abs(x) > 1.0LF) return m64_nan();
  if (x == -1.0LF) return 2.0LF * M64_PIO2;
  precise double t = m64_div(1.0LF - x, 1.0LF + x);
  return 2.0LF * atan64(m64_sqrt(t));
}

const double M64_LN2 = 6.93147180559945309417e-01LF;

double asinh64(double x) {
  if (isnan(x) || isinf(x)) return x;
  double a = abs(x), r;
  if (a > 1.0e150LF) {
    r = log64(a) + M64_LN2;
  } else {
    precise double a2 = a * a;
    r = log1p64(a + m64_div(a2, 1.0LF + m64_sqrt(1.0LF + a2)));
  }
  return x < 0.0LF ? -r : r;
}

double acosh64(double x) {
  if (isnan(x) || x < 1.0LF) return m64_nan();
  if (isinf(x)) return x;
  if (x > 1.0e150LF) return log64(x) + M64_LN2;
  precise double t = x - 1.0LF;
  return log1p64(t + m64_sqrt(t * (x + 1.0LF)));
}

double atanh64(double x) {
  if (isnan(x) || abs(x) > 1.0LF) return m64_nan();
  double a = abs(x);
  double r = a == 1.0LF ? m64_inf() : 0.5LF * log1p64(m64_div(2.0LF * a, 1.0LF - a));
  return x < 0.0LF ? -r : r;
}

double cbrt64(double x) {
  if (isnan(x) || isinf(x) || x == 0.0LF) return x;
  double a = abs(x);
  double y = exp64(log64(a) * 3.33333333333333333333e-1LF);
  for (int i = 0; i < 2; ++i) {
    precise double y2 = y * y;
    y = y - m64_div(fma(y2, y, -a), 3.0LF * y2);
  }
  return x < 0.0LF ? -y : y;
}

// atan2(y, x) with the special cases of C's atan2 (signed zeros and
// infinities); the quotient's quadrant is restored with pi in two parts.
double atan2_64(double y, double x) {
  if (isnan(x) || isnan(y)) return m64_nan();
  const double PI_HI = 3.14159265358979311600e+00LF;
  const double PI_LO = 1.22464679914735317720e-16LF;
  bool xneg = (unpackDouble2x32(x).y >> 31) != 0u;
  bool yneg = (unpackDouble2x32(y).y >> 31) != 0u;
  double r;
  if (y == 0.0LF) r = xneg ? PI_HI : 0.0LF;
  else if (isinf(x) && isinf(y)) r = xneg ? 3.0LF * M64_PIO4 : M64_PIO4;
  else if (isinf(x)) r = xneg ? PI_HI : 0.0LF;
  else if (isinf(y) || x == 0.0LF) r = M64_PIO2;
  else {
    double ax = abs(x), ay = abs(y);
    if (ay <= ax) {
      r = atan64(m64_div(ay, ax));
      if (xneg) r = (PI_HI - r) + PI_LO;
    } else {
      r = M64_PIO2 - atan64(m64_div(ax, ay));
      if (xneg) r = M64_PIO2 + (M64_PIO2 - r);
    }
  }
  return yneg ? -r : r;
}

// a * b = p + e exactly (Dekker's product with Veltkamp splitting: no
// fused multiply-add needed, which drivers need not provide for double).
void m64_two_prod(double a, double b, out double p, out double e) {
  precise double pp = a * b;
  precise double ca = 134217729.0LF * a;
  precise double ah = ca - (ca - a);
  precise double al = a - ah;
  precise double cb = 134217729.0LF * b;
  precise double bh = cb - (cb - b);
  precise double bl = b - bh;
  precise double ee = ((ah * bh - pp) + ah * bl + al * bh) + al * bl;
  p = pp;
  e = ee;
}

// log(x) of a finite x > 0 as a double-double hi + lo (about 100 bits):
// the argument of log64's series kept to double-double, the series' tail in
// double.
void m64_log_dd(double x, out double hi, out double lo) {
  int e;
  double m = frexp(x, e);
  if (m < 0.70710678118654752440LF) {
    m *= 2.0LF;
    e -= 1;
  }
  precise double f = m - 1.0LF;  // exact
  precise double d = 1.0LF + m;  // d + dl = 1 + m exactly (TwoSum)
  precise double dv = d - 1.0LF;
  precise double dl = (1.0LF - (d - dv)) + (m - dv);
  precise double s = f / d;      // s + sl = f / (d + dl)
  double sd, sde;
  m64_two_prod(s, d, sd, sde);
  precise double sl = (((f - sd) - sde) - s * dl) / d;
  double s2 = s * s, p = M64_ODD_INV[13];  // M64_ODD_INV[k] = 1 / (2k + 3)
  for (int k = 12; k >= 0; --k) p = fma(p, s2, M64_ODD_INV[k]);
  precise double tail = 2.0LF * s * s2 * p;  // 2 s^3 (1/3 + s^2/5 + ...)
  double de = double(e);
  precise double a = de * M64_LN2_HI;        // exact: LN2_HI ends in zeros
  precise double b = 2.0LF * s;
  precise double h = a + b;                  // TwoSum(a, b)
  precise double bv = h - a;
  precise double err = (a - (h - bv)) + (b - bv);
  precise double l = err + ((de * M64_LN2_LO + 2.0LF * sl) + tail);
  precise double sh = h + l;  // normalized (Fast2Sum); the out parameters
  precise double sl2 = l - (sh - h);  // themselves are not precise
  hi = sh;
  lo = sl2;
}

// x^y with the special cases of C's pow. Integer exponents up to 64 by
// squaring (exact where the result is representable); otherwise
// exp(y log|x|) with the product in double-double: a few ulp.
double pow64(double x, double y) {
  if (y == 0.0LF || x == 1.0LF) return 1.0LF;
  if (isnan(x) || isnan(y)) return m64_nan();
  bool yint = floor(y) == y;
  bool odd = yint && abs(y) < 9007199254740992.0LF && floor(y * 0.5LF) * 2.0LF != y;
  bool xneg = (unpackDouble2x32(x).y >> 31) != 0u;
  if (x == 0.0LF) {
    double z = y > 0.0LF ? 0.0LF : m64_inf();
    return odd && xneg ? -z : z;
  }
  if (isinf(y)) {
    double ax = abs(x);
    if (ax == 1.0LF) return 1.0LF;
    return (ax > 1.0LF) == (y > 0.0LF) ? m64_inf() : 0.0LF;
  }
  if (isinf(x)) {
    double z = y > 0.0LF ? m64_inf() : 0.0LF;
    return xneg && odd ? -z : z;
  }
  if (xneg && !yint) return m64_nan();
  double ax = abs(x), r;
  if (ax == 1.0LF) return odd ? x : 1.0LF;  // -1 to an even or huge power
  if (yint && abs(y) <= 64.0LF) {
    double b = ax;
    uint e = uint(abs(y));
    r = 1.0LF;
    while (e != 0u) {
      if ((e & 1u) != 0u) r *= b;
      b *= b;
      e >>= 1;
    }
    if (y < 0.0LF) r = m64_div(1.0LF, r);
  } else {
    double lh, ll;
    m64_log_dd(ax, lh, ll);
    double ph, pe;
    m64_two_prod(y, lh, ph, pe);
    precise double pl = pe + y * ll;
    if (ph > 710.0LF) r = m64_inf();
    else if (ph < -746.0LF) r = 0.0LF;
    else {
      r = exp64(ph);
      r = r + r * pl;
    }
  }
  return xneg && odd ? -r : r;
}

#endif
