// math64.glsl - double-precision exp, log, sin, cos, tanh and sigmoid.
//
// GLSL has no double transcendental functions. These are built from
// Cody-Waite range reduction and Taylor/atanh series evaluated in double,
// accurate to a few ulp of double for arguments of ordinary size (sin and
// cos reduce by pi/2 in three parts: exact up to |x| ~ 1e9, degrading
// beyond). Rounded to float they give the correctly rounded f32 result in
// practice, as a host libm does.

const double M64_LN2_HI = 6.93147180369123816490e-01LF;
const double M64_LN2_LO = 1.90821492927058770002e-10LF;
const double M64_LOG2E = 1.44269504088896338700e+00LF;
const double M64_PIO2_1 = 1.57079632673412561417e+00LF;
const double M64_PIO2_2 = 6.07710050650619224932e-11LF;
const double M64_PIO2_3 = 2.02226624879595063154e-21LF;
const double M64_2OPI = 6.36619772367581382433e-01LF;

double m64_inf() { return 1.0LF / 0.0LF; }
double m64_nan() { return 0.0LF / 0.0LF; }

// e^r - 1 for |r| <= 0.5 (Taylor to r^17/17!: < 2e-17 relative).
double m64_expm1_small(double r) {
  double t = r, s = r;
  for (int k = 2; k <= 17; ++k) {
    t *= r / double(k);
    s += t;
  }
  return s;
}

double exp64(double x) {
  if (isnan(x)) return x;
  if (x > 709.782712893384LF) return m64_inf();
  if (x < -745.1332191019412LF) return 0.0LF;
  double k = floor(x * M64_LOG2E + 0.5LF);
  double r = (x - k * M64_LN2_HI) - k * M64_LN2_LO;  // |r| <= 0.35
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
  double f = m - 1.0LF;              // [-0.293, 0.414]
  double s = f / (2.0LF + f);        // |s| <= 0.1716
  double s2 = s * s, t = s, sum = 0.0LF;
  for (int k = 1; k <= 27; k += 2) {
    sum += t / double(k);
    t *= s2;
  }
  double de = double(e);
  return de * M64_LN2_HI + (de * M64_LN2_LO + 2.0LF * sum);
}

// sin and cos of r in [-pi/4, pi/4].
double m64_sin_kernel(double r) {
  double r2 = r * r, t = r, s = r;
  for (int k = 3; k <= 21; k += 2) {
    t *= -r2 / double((k - 1) * k);
    s += t;
  }
  return s;
}
double m64_cos_kernel(double r) {
  double r2 = r * r, t = 1.0LF, s = 1.0LF;
  for (int k = 2; k <= 22; k += 2) {
    t *= -r2 / double((k - 1) * k);
    s += t;
  }
  return s;
}

// Reduces x to r in [-pi/4, pi/4] and the quadrant q (mod 4).
double m64_reduce(double x, out int q) {
  double k = floor(x * M64_2OPI + 0.5LF);
  double r = ((x - k * M64_PIO2_1) - k * M64_PIO2_2) - k * M64_PIO2_3;
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
  double t = em / (em + 2.0LF);
  return x < 0.0LF ? -t : t;
}

double sigmoid64(double x) {
  if (isnan(x)) return x;
  if (x >= 0.0LF) return 1.0LF / (1.0LF + exp64(-x));
  double e = exp64(x);
  return e / (1.0LF + e);
}
