/*
 * Linear algebra tests: nxv_cholesky, nxv_triangular_solve, nxv_lu, nxv_qr and
 * nxv_eigh_iterate on
 * f32 and f64 against references in long double, on random
 * well-conditioned inputs of many orders and batch sizes (1 to 100,
 * including orders that are not multiples of the kernels' 16-wide layout
 * or 32-column panels), every option of the triangular solve, and the
 * triangle the kernels must not read filled with NaN. The device fills new outputs with 0xFF bytes first (poison_outputs),
 * so a missed write fails. Wrong calls must fail with a message and leave
 * their output parameters alone.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

static const nxv_dtype kTypes[] = {NXV_F32, NXV_F64};

static long double unit_eps(nxv_dtype t) {
  return t == NXV_F32 ? 1.1920928955078125e-7L : 2.220446049250313e-16L;
}

static void put(nxv_dtype t, void *p, size_t i, long double v) {
  if (t == NXV_F32)
    ((float *)p)[i] = (float)v;
  else
    ((double *)p)[i] = (double)v;
}

/* The value put() stored: inputs are compared with what the device read. */
static long double get(nxv_dtype t, const void *p, size_t i) {
  return t == NXV_F32 ? (long double)((const float *)p)[i] : (long double)((const double *)p)[i];
}

static nxv_tensor *upload(nxv_device *d, nxv_dtype t, size_t n, const void *data) {
  nxv_tensor *x = NULL;
  nxv_status st = nxv_tensor_upload(d, t, n, data, &x);
  CHECK_MSG(st == NXV_OK, "upload: %s", nxv_last_error());
  return st == NXV_OK ? x : NULL;
}

static void *download(nxv_tensor *x, size_t n, size_t elem) {
  void *p = test_xcalloc(n, elem);
  nxv_status st = nxv_tensor_download(x, 0, n, p);
  CHECK_MSG(st == NXV_OK, "download: %s", nxv_last_error());
  if (st != NXV_OK) {
    free(p);
    return NULL;
  }
  return p;
}

/* Nx's Cholesky (Nx.LinAlg.Cholesky) of the n x n matrix a in long
 * double: sums first, the eps-shifted divisor, |x| <= eps flushed. */
static void ref_cholesky(const long double *a, size_t n, long double eps, long double *l) {
  for (size_t i = 0; i < n * n; i++) l[i] = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j <= i; j++) {
      long double s = 0;
      for (size_t k = 0; k < j; k++) s += l[i * n + k] * l[j * n + k];
      l[i * n + j] = i == j ? sqrtl(a[i * n + i] - s) : (a[i * n + j] - s) / (l[j * n + j] + eps);
    }
  for (size_t i = 0; i < n * n; i++)
    if (fabsl(l[i]) <= eps) l[i] = 0;
}

/* batch random symmetric positive definite n x n matrices (G G^T / n + I
 * with G's entries in [-1, 1]) into buf as t, the strict upper triangle
 * NaN (never read), and the values stored into a (long double). */
static void make_spd(uint64_t *rng, nxv_dtype t, size_t batch, size_t n, void *buf,
                     long double *a) {
  long double *g = test_xcalloc(n * n + 1, sizeof *g);
  for (size_t b = 0; b < batch; b++) {
    for (size_t i = 0; i < n * n; i++) g[i] = test_rand_uniform(rng, -1, 1);
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < n; j++) {
        size_t e = b * n * n + i * n + j;
        if (j > i) {
          put(t, buf, e, NAN);
          continue;
        }
        long double s = 0;
        for (size_t k = 0; k < n; k++) s += g[i * n + k] * g[j * n + k];
        put(t, buf, e, s / (long double)n + (i == j ? 1 : 0));
        a[e] = get(t, buf, e);
      }
    for (size_t i = 0; i < n; i++)
      for (size_t j = i + 1; j < n; j++) a[b * n * n + i * n + j] = a[b * n * n + j * n + i];
  }
  free(g);
}

/* Compares count results of t with ref: |got - ref| <= tol, or with
 * rounded set, within one ulp of f32 (a result computed in double and
 * rounded once); exact zeros where ref is 0 and exact is set, NaN where
 * ref is NaN. */
static size_t compare(const char *tag, nxv_dtype t, const void *got, const long double *ref,
                      size_t count, long double tol, bool exact_zero, bool rounded) {
  size_t bad = 0;
  for (size_t i = 0; i < count; i++) {
    long double g = get(t, got, i), r = ref[i];
    long double lim = rounded ? fabsl(r) * 0x1p-23L + 1e-30L : tol;
    bool ok = isnan(r) ? isnan(g)
                       : (exact_zero && r == 0 ? g == 0 : !isnan(g) && fabsl(g - r) <= lim);
    if (!ok && bad++ < 5)
      fprintf(stderr, "  %s: element %zu is %.10Lg, expected %.10Lg (tol %.3Lg)\n", tag, i, g,
              r, tol);
  }
  CHECK_MSG(bad == 0, "%s: %zu of %zu elements wrong", tag, bad, count);
  return bad;
}

/* f32 solutions the device computes in double and rounds once: the
 * default device where it has f64 (lavapipe does), not with fast_math. */
static bool rounded_once(nxv_device *d, nxv_dtype t, bool fast) {
  nxv_device_info info;
  return t == NXV_F32 && !fast && nxv_device_info_get(d, &info) == NXV_OK && info.float64;
}

static void check_cholesky(nxv_device *d, uint64_t *rng, nxv_dtype t, size_t batch, size_t n,
                           double eps) {
  char tag[96];
  snprintf(tag, sizeof tag, "cholesky %s %zu x %zu x %zu eps %g", nxv_dtype_name(t), batch, n,
           n, eps);
  size_t count = batch * n * n, es = nxv_dtype_size(t);
  void *buf = test_xcalloc(count + 1, es);
  long double *a = test_xcalloc(count + 1, sizeof *a);
  long double *ref = test_xcalloc(count + 1, sizeof *ref);
  make_spd(rng, t, batch, n, buf, a);
  for (size_t b = 0; b < batch; b++) ref_cholesky(a + b * n * n, n, eps, ref + b * n * n);
  nxv_tensor *x = upload(d, t, count, buf), *l = NULL;
  if (x) {
    nxv_status st = nxv_cholesky(d, x, batch, n, eps, &l);
    CHECK_MSG(st == NXV_OK, "%s: %s", tag, nxv_last_error());
    if (st == NXV_OK) {
      CHECK(nxv_tensor_count(l) == count && nxv_tensor_dtype(l) == t);
      void *got = download(l, count, es);
      /* L's entries are at most sqrt(max A[i][i]) <= sqrt(n + 1); the
       * factorization is backward stable on these matrices. */
      long double tol = 16 * (long double)n * unit_eps(t) * sqrtl((long double)n + 1);
      if (got) compare(tag, t, got, ref, count, tol, true, false);
      free(got);
      nxv_tensor_release(l);
    }
    nxv_tensor_release(x);
  }
  free(buf);
  free(a);
  free(ref);
}

NXV_TEST(linalg, cholesky) {
  /* Orders up to 64 in one dispatch, 65 and more in panels of 32 (96,
   * 256: a whole number of panels; 257, 513: a last panel of one column;
   * 300: more than 256 rows below the first panel). */
  static const size_t shapes[][2] = {{1, 1},  {1, 2},   {3, 5},   {2, 16}, {1, 17},
                                     {2, 33}, {1, 64},  {2, 100}, {40, 3}, {1, 130},
                                     {1, 65}, {3, 96},  {1, 256}, {1, 257}, {1, 300},
                                     {1, 513}};
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t rng = 0x11a1;
  for (size_t ti = 0; ti < 2; ti++)
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
      check_cholesky(d, &rng, kTypes[ti], shapes[s][0], shapes[s][1], 1e-10);
  CHECK(nxv_linalg_supported(d, NXV_F32) && nxv_linalg_supported(d, NXV_F64));
  CHECK(!nxv_linalg_supported(d, NXV_S32) && !nxv_linalg_supported(d, NXV_F16) &&
        !nxv_linalg_supported(d, NXV_C64));
  nxv_device_release(d);
}

/* A matrix that is not positive definite gets NaN from its first negative
 * square root on, its rows before that are exact; the other matrices of
 * the batch are unaffected. eps flushes small entries, and eps 0 keeps
 * them. Empty batches and orders give empty results. */
NXV_TEST(linalg, cholesky_edges) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  for (size_t ti = 0; ti < 2; ti++) {
    nxv_dtype t = kTypes[ti];
    size_t es = nxv_dtype_size(t);
    /* Batch of two 3 x 3: diag(4, -1, 9) (fails at row 1) and the identity
     * with A[1][0] = 1e-12 (a small entry of L). */
    static const double vals[18] = {4, 0, 0, 0, -1, 0, 0, 0, 9, 1, 0, 0, 1e-12, 1, 0, 0, 0, 1};
    void *buf = test_xcalloc(18, es);
    for (size_t i = 0; i < 18; i++) put(t, buf, i, vals[i]);
    nxv_tensor *x = upload(d, t, 18, buf), *l = NULL;
    REQUIRE(x);
    for (int flush = 0; flush < 2; flush++) {
      REQUIRE_OK(nxv_cholesky(d, x, 2, 3, flush ? 1e-10 : 0.0, &l));
      void *got = download(l, 18, es);
      if (got) {
        CHECK(get(t, got, 0) == 2 && get(t, got, 3) == 0 && get(t, got, 6) == 0);
        CHECK(isnan(get(t, got, 4)));
        CHECK(get(t, got, 1) == 0 && get(t, got, 2) == 0 && get(t, got, 5) == 0);
        CHECK(get(t, got, 9) == 1 && get(t, got, 13) == 1 && get(t, got, 17) == 1);
        long double small = get(t, got, 12);
        if (flush)
          CHECK_MSG(small == 0, "%s: 1e-12 not flushed: %Lg", nxv_dtype_name(t), small);
        else
          CHECK_MSG(fabsl(small - get(t, buf, 12)) <= 1e-12L * unit_eps(t) * 4,
                    "%s: 1e-12 became %Lg", nxv_dtype_name(t), small);
      }
      free(got);
      nxv_tensor_release(l);
      l = NULL;
    }
    /* The same small entry in blocked factorizations (orders 70 and 600),
     * in the last row, below the first panel. */
    for (size_t n = 70; n <= 600; n += 530) {
      size_t last = n - 1;
      void *ib = test_xcalloc(n * n, es);
      for (size_t i = 0; i < n; i++) put(t, ib, i * n + i, 1);
      put(t, ib, last * n + 0, 1e-12);
      nxv_tensor *id = upload(d, t, n * n, ib);
      REQUIRE(id);
      for (int flush = 0; flush < 2; flush++) {
        REQUIRE_OK(nxv_cholesky(d, id, 1, n, flush ? 1e-10 : 0.0, &l));
        void *got = download(l, n * n, es);
        if (got) {
          long double small = get(t, got, last * n);
          if (flush)
            CHECK_MSG(small == 0, "%s order %zu: 1e-12 not flushed: %Lg", nxv_dtype_name(t),
                      n, small);
          else
            CHECK_MSG(small == get(t, ib, last * n), "%s order %zu: 1e-12 became %Lg",
                      nxv_dtype_name(t), n, small);
          CHECK(get(t, got, 0) == 1 && get(t, got, last * n + last) == 1 &&
                get(t, got, 1) == 0);
        }
        free(got);
        nxv_tensor_release(l);
        l = NULL;
      }
      nxv_tensor_release(id);
      free(ib);
    }
    /* Blocked factorizations of a batch of two: the identity with -1 at
     * (50, 50), then the identity. The first is exact before row 50 and
     * NaN at the failing element; the second is exact. */
    for (size_t n = 100; n <= 600; n += 500) {
      void *ib = test_xcalloc(2 * n * n, es);
      for (size_t i = 0; i < 2 * n; i++) put(t, ib, i * n + i % n, i == 50 ? -1 : 1);
      nxv_tensor *id = upload(d, t, 2 * n * n, ib);
      REQUIRE(id);
      REQUIRE_OK(nxv_cholesky(d, id, 2, n, 1e-10, &l));
      void *got = download(l, 2 * n * n, es);
      size_t off = 0;
      for (size_t e = 0; got && e < 2 * n * n; e++) {
        size_t m = e / (n * n), i = e / n % n, k = e % n;
        if (m == 0 && (i >= 50 || k >= 50)) continue;
        if (get(t, got, e) != (i == k ? 1 : 0)) off++;
      }
      CHECK_MSG(off == 0, "%s order %zu: %zu elements off the identity", nxv_dtype_name(t), n,
                off);
      if (got) CHECK(isnan(get(t, got, 50 * n + 50)));
      free(got);
      nxv_tensor_release(l);
      l = NULL;
      nxv_tensor_release(id);
      free(ib);
    }
    /* Bad calls leave *out alone and say what is wrong. */
    nxv_tensor *keep = (nxv_tensor *)&keep;
    l = keep;
    CHECK(nxv_cholesky(d, x, 2, 4, 0, &l) == NXV_ERR_INVALID_ARGUMENT && l == keep);
    CHECK(strstr(nxv_last_error(), "elements") != NULL);
    CHECK(nxv_cholesky(d, x, 0, 3, 0, &l) == NXV_ERR_INVALID_ARGUMENT && l == keep);
    CHECK(nxv_cholesky(d, NULL, 2, 3, 0, &l) == NXV_ERR_INVALID_ARGUMENT && l == keep);
    nxv_tensor_release(x);
    free(buf);
    /* Orders beyond 32-bit element indices are refused. */
    nxv_tensor *y = NULL;
    REQUIRE_OK(nxv_tensor_empty(d, t, 0, &y));
    CHECK(nxv_cholesky(d, y, 0, NXV_CHOLESKY_MAX_ORDER + 1, 0, &l) == NXV_ERR_UNSUPPORTED &&
          l == keep);
    CHECK(strstr(nxv_last_error(), "order") != NULL);
    /* Empty. */
    REQUIRE_OK(nxv_cholesky(d, y, 0, 5, 0, &l));
    CHECK(nxv_tensor_count(l) == 0);
    nxv_tensor_release(l);
    REQUIRE_OK(nxv_cholesky(d, y, 3, 0, 0, &l));
    CHECK(nxv_tensor_count(l) == 0);
    nxv_tensor_release(l);
    nxv_tensor_release(y);
  }
  /* Integer types are refused. */
  nxv_tensor *s = NULL, *l = NULL;
  REQUIRE_OK(nxv_tensor_empty(d, NXV_S32, 4, &s));
  CHECK(nxv_cholesky(d, s, 1, 2, 0, &l) == NXV_ERR_UNSUPPORTED && l == NULL);
  CHECK(strstr(nxv_last_error(), "s32") != NULL);
  nxv_tensor_release(s);
  nxv_device_release(d);
}

/* One triangular system in long double: op(A) X = B (left) or X op(A) = B,
 * A n x n row-major (only its triangle read), B and X n x cols (left) or
 * cols x n (right), row-major. */
static void ref_trsm(const long double *a, const long double *b, size_t n, size_t cols,
                     bool lower, bool left, bool transpose, long double *x) {
  /* M = op(A) (left) or op(A)^T (right): M[i][k] = A[i][k] or A[k][i]. */
  bool mt = transpose != !left;
  bool mlower = lower != mt;
  for (size_t c = 0; c < cols; c++)
    for (size_t p = 0; p < n; p++) {
      size_t i = mlower ? p : n - 1 - p;
      long double s = left ? b[i * cols + c] : b[c * n + i];
      for (size_t q = 0; q < p; q++) {
        size_t k = mlower ? q : n - 1 - q;
        long double m = mt ? a[k * n + i] : a[i * n + k];
        s -= m * (left ? x[k * cols + c] : x[c * n + k]);
      }
      long double v = s / a[i * n + i];
      if (left)
        x[i * cols + c] = v;
      else
        x[c * n + i] = v;
    }
}

static void check_trsm(nxv_device *d, uint64_t *rng, nxv_dtype t, size_t batch, size_t n,
                       size_t cols, bool lower, bool left, bool transpose, bool fast) {
  char tag[128];
  snprintf(tag, sizeof tag, "triangular_solve %s %zu x %zu, %zu rhs, %s %s%s",
           nxv_dtype_name(t), batch, n, cols, lower ? "lower" : "upper",
           left ? "left" : "right", transpose ? " transposed" : "");
  size_t es = nxv_dtype_size(t), na = batch * n * n, nb = batch * n * cols;
  void *abuf = test_xcalloc(na + 1, es), *bbuf = test_xcalloc(nb + 1, es);
  long double *a = test_xcalloc(na + 1, sizeof *a), *b = test_xcalloc(nb + 1, sizeof *b);
  long double *ref = test_xcalloc(nb + 1, sizeof *ref);
  /* Diagonal of magnitude 1 to 2 with random signs, the triangle's other
   * entries in [-1, 1] / n: well conditioned; the other triangle NaN. */
  for (size_t e = 0; e < na; e++) {
    size_t i = e / n % n, k = e % n;
    bool in = lower ? k <= i : k >= i;
    long double v = i == k ? (1 + test_rand_uniform(rng, 0, 1)) * (test_rand_u64(rng) & 1 ? 1 : -1)
                           : test_rand_uniform(rng, -1, 1) / (long double)n;
    put(t, abuf, e, in ? v : NAN);
    a[e] = in ? get(t, abuf, e) : NAN;
  }
  for (size_t e = 0; e < nb; e++) {
    put(t, bbuf, e, test_rand_uniform(rng, -4, 4));
    b[e] = get(t, bbuf, e);
  }
  for (size_t s = 0; s < batch; s++)
    ref_trsm(a + s * n * n, b + s * n * cols, n, cols, lower, left, transpose, ref + s * n * cols);
  nxv_tensor *ta = upload(d, t, na, abuf), *tb = upload(d, t, nb, bbuf);
  nxv_tensor *x = NULL, *sing = NULL;
  if (ta && tb) {
    nxv_trsm_desc desc = {.batch = batch, .n = n, .cols = cols, .a = ta, .b = tb,
                          .lower = lower, .left_side = left, .transpose_a = transpose};
    nxv_status st = nxv_triangular_solve(d, &desc, &x, &sing);
    CHECK_MSG(st == NXV_OK, "%s: %s", tag, nxv_last_error());
    if (st == NXV_OK) {
      CHECK(nxv_tensor_count(x) == nb && nxv_tensor_dtype(x) == t);
      CHECK(nxv_tensor_count(sing) == batch && nxv_tensor_dtype(sing) == NXV_U32);
      void *got = download(x, nb, es);
      long double tol = 32 * (long double)n * unit_eps(t) * 8;
      if (got) compare(tag, t, got, ref, nb, tol, false, rounded_once(d, t, fast));
      free(got);
      uint32_t *flags = download(sing, batch, 4);
      for (size_t s = 0; flags && s < batch; s++) CHECK_MSG(flags[s] == 0, "%s: flag %zu", tag, s);
      free(flags);
      nxv_tensor_release(x);
      nxv_tensor_release(sing);
    }
  }
  if (ta) nxv_tensor_release(ta);
  if (tb) nxv_tensor_release(tb);
  free(abuf);
  free(bbuf);
  free(a);
  free(b);
  free(ref);
}

NXV_TEST(linalg, triangular_solve) {
  /* Up to 4 rows per invocation the rows stay in registers; from {1, 70,
   * 16} on, one workgroup solves a system for up to 8 right-hand sides
   * (two chunks of 8; 8; 4 and 1 of 4; one); {1, 1000, 2} in panels. The
   * chained solve is off (on GPUs it would take most of these; its own
   * test follows). With fast_math f32 systems are solved in f32 (as on
   * devices without f64), else in double. */
  static const size_t shapes[][3] = {{1, 1, 1},    {2, 5, 1},    {3, 17, 4},  {1, 33, 20},
                                     {2, 64, 3},   {1, 100, 1},  {5, 7, 16},  {1, 40, 37},
                                     {1, 70, 16},  {2, 130, 8},  {3, 300, 5}, {1, 257, 1},
                                     {1, 1000, 2}};
  for (int fast = 0; fast < 2; fast++) {
    nxv_device *d = test_open_device_with((nxv_device_config){.fast_math = fast,
                                                              .chained_solve = -1});
    REQUIRE(d);
    uint64_t rng = 0x75a1;
    for (size_t ti = 0; ti < 2; ti++)
      for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int o = 0; o < 8; o++)
          check_trsm(d, &rng, kTypes[ti], shapes[s][0], shapes[s][1], shapes[s][2], o & 1,
                     o & 2, o & 4, fast);
    nxv_device_release(d);
  }
}

/* Orders beyond 512 are solved in panels of 32 rows, 512 in one
 * dispatch (the chained solve off: on GPUs it would take these). */
NXV_TEST(linalg, triangular_solve_panels) {
  for (int fast = 0; fast < 2; fast++) {
    nxv_device *d = test_open_device_with((nxv_device_config){.fast_math = fast,
                                                              .chained_solve = -1});
    REQUIRE(d);
    uint64_t rng = 0x9a1e1;
    for (size_t ti = 0; ti < 2; ti++) {
      nxv_dtype t = kTypes[ti];
      if (fast && t == NXV_F64) continue;
      check_trsm(d, &rng, t, 2, 513, 3, true, true, false, fast);
      check_trsm(d, &rng, t, 1, 600, 2, false, false, true, fast);
      check_trsm(d, &rng, t, 1, 512, 9, true, true, true, fast);
    }
    nxv_device_release(d);
  }
}

extern char **environ;

/* Runs this test binary on the test named name in a child process with
 * LP_NUM_THREADS=1 added to the environment; returns its exit status, -1
 * when it could not run. */
static int run_single_threaded_child(const char *name) {
  size_t count = 0;
  while (environ[count]) count++;
  char **env = test_xcalloc(count + 2, sizeof *env);
  size_t k = 0;
  for (size_t i = 0; i < count; i++)
    if (strncmp(environ[i], "LP_NUM_THREADS=", 15) != 0) env[k++] = environ[i];
  env[k++] = "LP_NUM_THREADS=1";
  char *args[] = {(char *)name, NULL};
  int rc = test_run_self(args, env);
  free(env);
  return rc;
}

/* One solve of order n on a device opened with chained_solve (without
 * poisoned outputs, whose fills would count) queues want ops: a chained
 * solve fills its workspace with the kernel's sentinel and its sync words
 * with zeros, then one dispatch; the one-workgroup form is one dispatch,
 * the panels more. */
static void check_chained_ops(int chained, nxv_dtype t, size_t n, size_t cols, size_t want) {
  nxv_device_config config = {.disable_disk_cache = true, .chained_solve = chained};
  nxv_device *d = NULL;
  REQUIRE_OK(nxv_device_open(-1, &config, &d));
  size_t es = nxv_dtype_size(t);
  void *ab = test_xcalloc(n * n, es), *bb = test_xcalloc(n * cols, es);
  for (size_t i = 0; i < n; i++) put(t, ab, i * n + i, 2);
  nxv_tensor *ta = upload(d, t, n * n, ab), *tb = upload(d, t, n * cols, bb), *x = NULL, *f = NULL;
  REQUIRE(ta && tb);
  nxv_stats before, after;
  REQUIRE_OK(nxv_device_stats(d, &before));
  nxv_trsm_desc desc = {.batch = 1, .n = n, .cols = cols, .a = ta, .b = tb, .lower = true,
                        .left_side = true};
  REQUIRE_OK(nxv_triangular_solve(d, &desc, &x, &f));
  REQUIRE_OK(nxv_device_stats(d, &after));
  CHECK_MSG(after.ops_enqueued - before.ops_enqueued == want,
            "order %zu, %zu rhs: %llu ops queued, want %zu", n, cols,
            (unsigned long long)(after.ops_enqueued - before.ops_enqueued), want);
  nxv_tensor_release(x);
  nxv_tensor_release(f);
  nxv_tensor_release(ta);
  nxv_tensor_release(tb);
  nxv_device_release(d);
  free(ab);
  free(bb);
}

/* The chained solve (trsv.comp): blocks of 32 rows, one workgroup each,
 * taken in ticket order, each waiting on the blocks before it (orders
 * from 17, a single block up to 32), in chains of 1-8 right-hand sides
 * (chunks of 4 and of 8, full and partial). On CPU
 * devices it runs in a child process with LP_NUM_THREADS=1 (llvmpipe then
 * runs the workgroups one after another, in order: no block waits); on
 * GPUs the blocks wait on one another. Every option, orders around the
 * block size, 1 to 200 right-hand sides, batches, f32 in double and in
 * f32. */
NXV_TEST(linalg, triangular_solve_chained) {
  nxv_device *probe = test_open_device();
  REQUIRE(probe);
  nxv_device_info info;
  REQUIRE_OK(nxv_device_info_get(probe, &info));
  nxv_device_release(probe);
  const char *lp = getenv("LP_NUM_THREADS");
  if (info.type == NXV_DEVICE_CPU && !(lp && strcmp(lp, "1") == 0)) {
    int rc = run_single_threaded_child("linalg.triangular_solve_chained");
    CHECK_MSG(rc == 0, "the single-threaded child exited with %d", rc);
    return;
  }
  /* Chunks: {1, 300, 20} five of 4; {2, 100, 37} and {1, 64, 70} of 4,
   * the last partial; {1, 256, 200} of 8; {2, 300, 90} of 8, the last
   * partial. */
  static const size_t shapes[][3] = {{1, 17, 1},  {2, 20, 3},   {1, 32, 1},   {3, 33, 2},
                                     {2, 64, 8},  {4, 100, 1},  {1, 129, 1},  {2, 130, 8},
                                     {3, 200, 5}, {1, 257, 1},  {1, 256, 2},  {4, 161, 3},
                                     {1, 1000, 1}, {1, 700, 7},  {1, 300, 20}, {2, 100, 37},
                                     {1, 64, 70}, {1, 256, 200}, {2, 300, 90}};
  for (int fast = 0; fast < 2; fast++) {
    nxv_device *d = test_open_device_with((nxv_device_config){.fast_math = fast,
                                                              .chained_solve = 1});
    REQUIRE(d);
    uint64_t rng = 0xc4a1;
    for (size_t ti = 0; ti < 2; ti++) {
      nxv_dtype t = kTypes[ti];
      if (fast && t == NXV_F64) continue;
      for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int o = 0; o < 8; o++) {
          /* Large ones: upper on the right (M read by columns) and lower
           * on the left (by rows). */
          if ((shapes[s][1] >= 700 || shapes[s][2] >= 90) && o != 0 && o != 3) continue;
          check_trsm(d, &rng, t, shapes[s][0], shapes[s][1], shapes[s][2], o & 1, o & 2, o & 4,
                     fast);
        }
    }
    nxv_device_release(d);
  }
  /* Diagonal systems: each solution is the quotient b / d, within 2 ulp
   * where the solve is in the dtype (Vulkan leaves a division's last bit
   * to the device, and llvmpipe computes fma unfused, so the corrected
   * product can miss the rounded quotient by an ulp) and as b / d rounds
   * in f32 solved in double, whether
   * the block's quotients go through reciprocals (diagonal magnitudes in
   * [2^-60, 2^60], [2^-500, 2^500] in double) or, for a block with an
   * element outside (tiny or huge), by division. */
  for (int fast = 0; fast < 2; fast++) {
    nxv_device *dq = test_open_device_with((nxv_device_config){.fast_math = fast,
                                                               .chained_solve = 1});
    REQUIRE(dq);
    for (size_t ti = 0; ti < 2; ti++) {
      nxv_dtype t = kTypes[ti];
      if (fast && t == NXV_F64) continue;
      bool dbl = t == NXV_F64 || !fast;
      size_t es = nxv_dtype_size(t), n = 300;
      uint64_t rng = 0x9e0 + ti;
      void *ab = test_xcalloc(n * n, es), *bb = test_xcalloc(n, es);
      for (size_t i = 0; i < n; i++) {
        double v = test_rand_uniform(&rng, 0.5, 3) * (test_rand_u64(&rng) & 1 ? 1 : -1);
        /* Blocks 2, 5, 7 and 8 hold one extreme element each (in f32
         * the extremes of f32, which are not extreme in double). */
        if (i == 70) v *= t == NXV_F64 ? 0x1p-700 : 0x1p-70;
        if (i == 170) v *= t == NXV_F64 ? 0x1p+700 : 0x1p+70;
        if (i == 230) v *= t == NXV_F64 ? 0x1p-1000 : 0x1p-100;
        /* f64: d subnormal, its reciprocal infinite: only the division is
         * right (f32 stays within [2^-126, 2^126], where Vulkan bounds a
         * division's error). */
        double bs = 1;
        if (i == 260) {
          v *= t == NXV_F64 ? 0x1p-1060 : 0x1p+120;
          bs = t == NXV_F64 ? 0x1p-1060 : 0x1p+100;
        }
        put(t, ab, i * n + i, v);
        put(t, bb, i, test_rand_uniform(&rng, -4, 4) * bs);
      }
      nxv_tensor *ta = upload(dq, t, n * n, ab), *tb = upload(dq, t, n, bb), *x = NULL, *f = NULL;
      REQUIRE(ta && tb);
      nxv_trsm_desc desc = {.batch = 1, .n = n, .cols = 1, .a = ta, .b = tb, .lower = true,
                            .left_side = true};
      REQUIRE_OK(nxv_triangular_solve(dq, &desc, &x, &f));
      void *q = download(x, n, es);
      size_t wrong = 0;
      for (size_t i = 0; q && i < n; i++) {
        long double want = get(t, bb, i) / get(t, ab, i * n + i);
        long double got = get(t, q, i);
        bool ok;
        if (t == NXV_F32 && dbl)
          ok = (float)got == (float)(double)want;
        else
          ok = fabsl(got - want) <= fabsl(want) * (t == NXV_F64 ? 0x1p-51L : 0x1p-22L);
        if (!ok) {
          if (wrong < 4)
            fprintf(stderr, "  %s%s row %zu: %.17Lg, want %.17Lg\n", nxv_dtype_name(t),
                    fast ? " fast" : "", i, got, want);
          wrong++;
        }
      }
      CHECK_MSG(wrong == 0, "%s%s: %zu of %zu quotients off", nxv_dtype_name(t),
                fast ? " fast" : "", wrong, n);
      free(q);
      nxv_tensor_release(x);
      nxv_tensor_release(f);
      nxv_tensor_release(ta);
      nxv_tensor_release(tb);
      free(ab);
      free(bb);
    }
    nxv_device_release(dq);
  }
  /* Zeros on the diagonal in the first, a middle and the last block set
   * the flag (bit 0 alone: no wait gave up); a system without one does
   * not. */
  nxv_device *d = test_open_device_with((nxv_device_config){.chained_solve = 1});
  REQUIRE(d);
  for (size_t ti = 0; ti < 2; ti++) {
    nxv_dtype t = kTypes[ti];
    size_t es = nxv_dtype_size(t), n = 200;
    static const size_t zeros[] = {0, 100, 199, 200};
    void *bb = test_xcalloc(n, es);
    nxv_tensor *tb = upload(d, t, n, bb);
    REQUIRE(tb);
    for (size_t z = 0; z < 4; z++) {
      void *ab = test_xcalloc(n * n, es);
      for (size_t i = 0; i < n; i++) put(t, ab, i * n + i, i == zeros[z] ? 0 : 1);
      nxv_tensor *ta = upload(d, t, n * n, ab), *x = NULL, *f = NULL;
      REQUIRE(ta);
      nxv_trsm_desc desc = {.batch = 1, .n = n, .cols = 1, .a = ta, .b = tb, .lower = z & 1,
                            .left_side = true};
      REQUIRE_OK(nxv_triangular_solve(d, &desc, &x, &f));
      uint32_t *flags = download(f, 1, 4);
      if (flags)
        CHECK_MSG(flags[0] == (zeros[z] < n ? 1u : 0u), "%s zero at %zu: flag %u",
                  nxv_dtype_name(t), zeros[z], flags[0]);
      free(flags);
      nxv_tensor_release(x);
      nxv_tensor_release(f);
      nxv_tensor_release(ta);
      free(ab);
    }
    nxv_tensor_release(tb);
    free(bb);
  }
  nxv_device_release(d);
  for (size_t ti = 0; ti < 2; ti++) {
    check_chained_ops(1, kTypes[ti], 300, 1, 3);
    check_chained_ops(1, kTypes[ti], 300, 8, 3);
    check_chained_ops(1, kTypes[ti], 300, 9, 3);
    check_chained_ops(1, kTypes[ti], 300, 500, 1); /* many chains: one workgroup */
    check_chained_ops(-1, kTypes[ti], 300, 1, 1);
    check_chained_ops(1, kTypes[ti], 40, 1, 3);
    check_chained_ops(-1, kTypes[ti], 40, 1, 1);
    check_chained_ops(1, kTypes[ti], 16, 1, 1); /* below order 17: registers */
  }
}

/* A zero on a diagonal sets that system's flag alone; empty systems and
 * bad calls. */
NXV_TEST(linalg, triangular_solve_edges) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  for (size_t ti = 0; ti < 2; ti++) {
    nxv_dtype t = kTypes[ti];
    size_t es = nxv_dtype_size(t);
    /* Three 2 x 2 lower systems, the second with A[1][1] = 0. */
    static const double av[12] = {1, 0, 2, 3, 1, 0, 2, 0, 2, 0, 0, 4};
    static const double bv[6] = {1, 8, 1, 1, 4, 8};
    void *abuf = test_xcalloc(12, es), *bbuf = test_xcalloc(6, es);
    for (int i = 0; i < 12; i++) put(t, abuf, (size_t)i, av[i]);
    for (int i = 0; i < 6; i++) put(t, bbuf, (size_t)i, bv[i]);
    nxv_tensor *ta = upload(d, t, 12, abuf), *tb = upload(d, t, 6, bbuf), *x = NULL, *f = NULL;
    REQUIRE(ta && tb);
    nxv_trsm_desc desc = {.batch = 3, .n = 2, .cols = 1, .a = ta, .b = tb, .lower = true,
                          .left_side = true};
    REQUIRE_OK(nxv_triangular_solve(d, &desc, &x, &f));
    void *got = download(x, 6, es);
    uint32_t *flags = download(f, 3, 4);
    if (got && flags) {
      CHECK(flags[0] == 0 && flags[1] == 1 && flags[2] == 0);
      CHECK(get(t, got, 0) == 1 && get(t, got, 1) == 2);
      CHECK(get(t, got, 4) == 2 && get(t, got, 5) == 2);
    }
    free(got);
    free(flags);
    nxv_tensor_release(x);
    nxv_tensor_release(f);
    /* No right-hand sides: flags still computed. */
    nxv_tensor *e = NULL;
    REQUIRE_OK(nxv_tensor_empty(d, t, 0, &e));
    desc.b = e;
    desc.cols = 0;
    REQUIRE_OK(nxv_triangular_solve(d, &desc, &x, &f));
    CHECK(nxv_tensor_count(x) == 0);
    flags = download(f, 3, 4);
    if (flags) CHECK(flags[0] == 0 && flags[1] == 1 && flags[2] == 0);
    free(flags);
    nxv_tensor_release(x);
    nxv_tensor_release(f);
    /* The same for a system of order 130 (one dispatch, the diagonal read
     * by every invocation) and of order 600 (in panels): a zero at the last
     * diagonal element, then at the first, no right-hand sides. */
    for (int z = 0; z < 4; z++) {
      size_t n = z < 2 ? 130 : 600, zero = z & 1 ? 0 : n - 1;
      void *ib = test_xcalloc(n * n, es);
      for (size_t i = 0; i < n; i++) put(t, ib, i * n + i, i == zero ? 0 : 1);
      nxv_tensor *big = upload(d, t, n * n, ib);
      REQUIRE(big);
      nxv_trsm_desc bd = {.batch = 1, .n = n, .cols = 0, .a = big, .b = e, .lower = true,
                          .left_side = true};
      REQUIRE_OK(nxv_triangular_solve(d, &bd, &x, &f));
      flags = download(f, 1, 4);
      if (flags) CHECK_MSG(flags[0] == 1, "order %zu, zero at %zu", n, zero);
      free(flags);
      nxv_tensor_release(x);
      nxv_tensor_release(f);
      nxv_tensor_release(big);
      free(ib);
    }
    /* A diagonal system of order 300 (one workgroup a system): each
     * solution is the quotient b / d, within an ulp in f64 (Vulkan leaves
     * the division's last bit to the device), and f32 solved in double
     * rounds it to f32 as b / d rounds. */
    {
      size_t n = 300;
      uint64_t rng = 0xd1a6;
      void *ib = test_xcalloc(n * n, es), *rb = test_xcalloc(n, es);
      for (size_t i = 0; i < n; i++) {
        put(t, ib, i * n + i, test_rand_uniform(&rng, 0.5, 3));
        put(t, rb, i, test_rand_uniform(&rng, -4, 4));
      }
      nxv_tensor *dm = upload(d, t, n * n, ib), *db = upload(d, t, n, rb);
      REQUIRE(dm && db);
      nxv_trsm_desc dd = {.batch = 1, .n = n, .cols = 1, .a = dm, .b = db, .lower = true,
                          .left_side = true};
      REQUIRE_OK(nxv_triangular_solve(d, &dd, &x, &f));
      void *q = download(x, n, es);
      size_t wrong = 0;
      for (size_t i = 0; q && i < n; i++) {
        double want = (double)get(t, rb, i) / (double)get(t, ib, i * n + i);
        if (t == NXV_F32 ? ((float *)q)[i] != (float)want
                         : fabs(((double *)q)[i] - want) > fabs(want) * 0x1p-52)
          wrong++;
      }
      CHECK_MSG(wrong == 0, "%s: %zu of %zu quotients not within an ulp of b / d", nxv_dtype_name(t),
                wrong, n);
      free(q);
      nxv_tensor_release(x);
      nxv_tensor_release(f);
      nxv_tensor_release(dm);
      nxv_tensor_release(db);
      free(ib);
      free(rb);
    }
    /* Bad calls. */
    nxv_tensor *keep = (nxv_tensor *)&keep;
    x = f = keep;
    desc.b = tb;
    desc.cols = 2; /* b holds 6 elements, not 12 */
    CHECK(nxv_triangular_solve(d, &desc, &x, &f) == NXV_ERR_INVALID_ARGUMENT);
    CHECK(x == keep && f == keep);
    CHECK(strstr(nxv_last_error(), "right-hand sides") != NULL);
    desc.cols = 1;
    desc.b = e; /* wrong count */
    CHECK(nxv_triangular_solve(d, &desc, &x, &f) == NXV_ERR_INVALID_ARGUMENT && x == keep);
    nxv_tensor *other = NULL;
    REQUIRE_OK(nxv_tensor_empty(d, t == NXV_F32 ? NXV_F64 : NXV_F32, 6, &other));
    desc.b = other;
    CHECK(nxv_triangular_solve(d, &desc, &x, &f) == NXV_ERR_INVALID_ARGUMENT && x == keep);
    CHECK(strstr(nxv_last_error(), "a is") != NULL);
    CHECK(nxv_triangular_solve(d, NULL, &x, &f) == NXV_ERR_INVALID_ARGUMENT && x == keep);
    nxv_tensor_release(other);
    nxv_tensor_release(e);
    nxv_tensor_release(ta);
    nxv_tensor_release(tb);
    free(abuf);
    free(bbuf);
  }
  nxv_device_release(d);
}

/* LU with partial pivoting of the n x n matrix a in long double, pivoting
 * as the kernel does (the first row of the largest magnitude): perm[j] is
 * the row of a that ends at row j; lu holds L's multipliers below the
 * diagonal and U on and above it. */
static void ref_lu(const long double *a, size_t n, long double *lu, size_t *perm) {
  memcpy(lu, a, n * n * sizeof *lu);
  for (size_t i = 0; i < n; i++) perm[i] = i;
  for (size_t j = 0; j < n; j++) {
    size_t p = j;
    for (size_t i = j + 1; i < n; i++)
      if (fabsl(lu[i * n + j]) > fabsl(lu[p * n + j])) p = i;
    if (p != j) {
      for (size_t k = 0; k < n; k++) {
        long double x = lu[j * n + k];
        lu[j * n + k] = lu[p * n + k];
        lu[p * n + k] = x;
      }
      size_t x = perm[j];
      perm[j] = perm[p];
      perm[p] = x;
    }
    long double piv = lu[j * n + j];
    if (piv == 0) continue;
    for (size_t i = j + 1; i < n; i++) {
      long double m = lu[i * n + j] /= piv;
      for (size_t k = j + 1; k < n; k++) lu[i * n + k] -= m * lu[j * n + k];
    }
  }
}

/* nxv_lu of batch random n x n matrices (entries in [-1, 1]) against
 * ref_lu: P exactly the reference's permutation, L unit lower and U upper
 * triangular with exact zeros elsewhere, their entries within a
 * backward-stable bound of the reference's, and P L U within that bound
 * of A. The outputs are poisoned by the device first. */
static void check_lu(nxv_device *d, uint64_t *rng, nxv_dtype t, size_t batch, size_t n) {
  char tag[96];
  snprintf(tag, sizeof tag, "lu %s %zu x %zu x %zu", nxv_dtype_name(t), batch, n, n);
  size_t count = batch * n * n, es = nxv_dtype_size(t);
  void *buf = test_xcalloc(count + 1, es);
  long double *a = test_xcalloc(count + 1, sizeof *a);
  long double *lu = test_xcalloc(n * n + 1, sizeof *lu);
  size_t *perm = test_xcalloc(n + 1, sizeof *perm);
  for (size_t i = 0; i < count; i++) {
    put(t, buf, i, test_rand_uniform(rng, -1, 1));
    a[i] = get(t, buf, i);
  }
  nxv_tensor *x = upload(d, t, count, buf), *out[3] = {NULL, NULL, NULL};
  if (x) {
    nxv_status st = nxv_lu(d, x, batch, n, 1e-30, &out[0], &out[1], &out[2]);
    CHECK_MSG(st == NXV_OK, "%s: %s", tag, nxv_last_error());
    if (st == NXV_OK) {
      void *got[3];
      for (int o = 0; o < 3; o++) {
        CHECK(nxv_tensor_count(out[o]) == count && nxv_tensor_dtype(out[o]) == t);
        got[o] = download(out[o], count, es);
      }
      /* Entries of L are at most 1 and of U at most 2^j in magnitude; on
       * random matrices the growth stays small. */
      long double tol = 64 * (long double)n * unit_eps(t) * ((long double)n + 1);
      size_t bad = 0;
      for (size_t b = 0; got[0] && got[1] && got[2] && b < batch; b++) {
        const long double *ab = a + b * n * n;
        ref_lu(ab, n, lu, perm);
        for (size_t i = 0; i < n; i++)
          for (size_t k = 0; k < n; k++) {
            size_t e = b * n * n + i * n + k;
            long double p = get(t, got[0], e), l = get(t, got[1], e), u = get(t, got[2], e);
            long double wl = i > k ? lu[i * n + k] : i == k ? 1 : 0;
            long double wu = i <= k ? lu[i * n + k] : 0;
            bool ok = p == (perm[k] == i ? 1 : 0);
            ok = ok && (i > k ? fabsl(l - wl) <= tol : l == wl);
            ok = ok && (i <= k ? fabsl(u - wu) <= tol : u == 0);
            /* (P L U)[i][k] = (L U)[r][k] where perm[r] == i. */
            long double s = 0;
            size_t r = 0;
            while (r < n && perm[r] != i) r++;
            for (size_t q = 0; q <= r && q <= k; q++)
              s += get(t, got[1], b * n * n + r * n + q) * get(t, got[2], b * n * n + q * n + k);
            ok = ok && fabsl(s - ab[i * n + k]) <= tol;
            if (!ok && bad++ < 5)
              fprintf(stderr, "  %s: matrix %zu (%zu, %zu): P %Lg L %.10Lg U %.10Lg, expected "
                      "P %d L %.10Lg U %.10Lg, (PLU - A) %.3Lg\n", tag, b, i, k, p, l, u,
                      perm[k] == i, wl, wu, s - ab[i * n + k]);
          }
      }
      CHECK_MSG(bad == 0, "%s: %zu wrong entries", tag, bad);
      for (int o = 0; o < 3; o++) {
        free(got[o]);
        nxv_tensor_release(out[o]);
      }
    }
    nxv_tensor_release(x);
  }
  free(buf);
  free(a);
  free(lu);
  free(perm);
}

NXV_TEST(linalg, lu) {
  /* Orders up to 32 and 64 in shared memory, beyond in device memory (65,
   * 100, 130, 257: more rows than the 16 x 16 update grid covers at once;
   * 300 more than a workgroup's invocations; 600 more than twice that),
   * batches up to 40. Where f64
   * or f32 computed in double takes device memory from order 33 (llvmpipe's
   * 32 KiB of shared memory), 33 and 40 have a panel copy that P's slot
   * cannot hold; 64 and 65 one that it can. With fast_math f32 runs in
   * f32. */
  static const size_t shapes[][2] = {{1, 1},  {1, 2},   {3, 5},  {2, 16},  {1, 17},
                                     {2, 32}, {3, 33},  {2, 40}, {3, 64},  {2, 65},
                                     {2, 100}, {40, 3}, {1, 130}, {1, 257}, {1, 300},
                                     {1, 600}};
  for (int fast = 0; fast < 2; fast++) {
    nxv_device *d = test_open_device_with((nxv_device_config){.fast_math = fast});
    REQUIRE(d);
    uint64_t rng = 0x1a1 + (uint64_t)fast;
    for (size_t ti = 0; ti < 2; ti++)
      for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        if (!fast || kTypes[ti] == NXV_F32)
          check_lu(d, &rng, kTypes[ti], shapes[s][0], shapes[s][1]);
    nxv_device_release(d);
  }
}

/* Singular matrices (a zero pivot leaves its column of L zero and the
 * factorization goes on), ties (the first row wins), eps flushing small
 * entries, a permutation matrix (exact), NaN (no hang), empty batches and
 * orders, and wrong calls (an error, outputs untouched). */
NXV_TEST(linalg, lu_edges) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  for (size_t ti = 0; ti < 2; ti++) {
    nxv_dtype t = kTypes[ti];
    size_t es = nxv_dtype_size(t);
    /* Five 3 x 3: a zero first column; a tie in magnitude (rows 0 and 2
     * of column 0); a small entry that eps flushes; a permutation matrix;
     * a NaN. */
    static const double vals[45] = {0, 1, 2, 0, 3, 4, 0, 5, 7,          /* singular */
                                    2, 1, 0, 1, 2, 1, -2, 1, 3,         /* ties */
                                    1, 0, 0, 1e-12, 1, 0, 0, 0, 1,      /* small */
                                    0, 0, 1, 1, 0, 0, 0, 1, 0,          /* permutation */
                                    1, 2, 3, 4, NAN, 6, 7, 8, 9};       /* NaN */
    void *buf = test_xcalloc(45, es);
    for (size_t i = 0; i < 45; i++) put(t, buf, i, vals[i]);
    nxv_tensor *x = upload(d, t, 45, buf), *o[3] = {NULL, NULL, NULL};
    REQUIRE(x);
    REQUIRE_OK(nxv_lu(d, x, 5, 3, 1e-10, &o[0], &o[1], &o[2]));
    void *p = download(o[0], 45, es), *l = download(o[1], 45, es), *u = download(o[2], 45, es);
    if (p && l && u) {
      /* Singular: no swap in column 0 (all zero), L's column 0 zero below
       * the diagonal, then rows 1 and 2 swap for column 1 (|5| > |3|). */
      static const double sp[9] = {1, 0, 0, 0, 0, 1, 0, 1, 0};
      static const double sl[9] = {1, 0, 0, 0, 1, 0, 0, 0.6, 1};
      static const double su[9] = {0, 1, 2, 0, 5, 7, 0, 0, 4 - 0.6 * 7};
      /* Tie: row 0 keeps column 0 (|2| == |-2|); then rows 1 and 2 hold
       * 1.5 and 2 in column 1: row 2 is larger, swapped. */
      static const double tp[9] = {1, 0, 0, 0, 0, 1, 0, 1, 0};
      static const double tl[9] = {1, 0, 0, -1, 1, 0, 0.5, 0.75, 1};
      static const double tu[9] = {2, 1, 0, 0, 2, 3, 0, 0, 1 - 0.75 * 3};
      for (int i = 0; i < 9; i++) {
        long double tol = 8 * unit_eps(t);
        CHECK_MSG(get(t, p, (size_t)i) == sp[i] && fabsl(get(t, l, (size_t)i) - sl[i]) <= tol &&
                      fabsl(get(t, u, (size_t)i) - su[i]) <= tol,
                  "%s singular (%d): P %Lg L %Lg U %Lg", nxv_dtype_name(t), i,
                  get(t, p, (size_t)i), get(t, l, (size_t)i), get(t, u, (size_t)i));
        CHECK_MSG(get(t, p, 9 + (size_t)i) == tp[i] &&
                      fabsl(get(t, l, 9 + (size_t)i) - tl[i]) <= tol &&
                      fabsl(get(t, u, 9 + (size_t)i) - tu[i]) <= tol,
                  "%s ties (%d): P %Lg L %Lg U %Lg", nxv_dtype_name(t), i,
                  get(t, p, 9 + (size_t)i), get(t, l, 9 + (size_t)i), get(t, u, 9 + (size_t)i));
        /* Small: L[1][0] = 1e-12 flushed; the rest the identity. */
        double id = i % 4 == 0 ? 1 : 0;
        CHECK(get(t, p, 18 + (size_t)i) == id && get(t, l, 18 + (size_t)i) == id &&
              get(t, u, 18 + (size_t)i) == id);
        /* Permutation: A = P with L = U = I. */
        CHECK(get(t, p, 27 + (size_t)i) == vals[27 + i] && get(t, l, 27 + (size_t)i) == id &&
              get(t, u, 27 + (size_t)i) == id);
      }
      /* NaN: a valid permutation and NaN in U's trailing entries. */
      size_t ones = 0;
      for (size_t i = 36; i < 45; i++) ones += get(t, p, i) == 1;
      CHECK(ones == 3 && isnan(get(t, u, 44)));
    }
    free(p);
    free(l);
    free(u);
    for (int i = 0; i < 3; i++) nxv_tensor_release(o[i]);
    /* eps 0 keeps the small entry. */
    REQUIRE_OK(nxv_lu(d, x, 5, 3, 0.0, &o[0], &o[1], &o[2]));
    l = download(o[1], 45, es);
    if (l) CHECK(get(t, l, 21) == get(t, buf, 21));
    free(l);
    for (int i = 0; i < 3; i++) nxv_tensor_release(o[i]);
    /* A singular matrix in device memory (order 80): rows 0 and 40 equal,
     * so U[79][79] is zero up to rounding and nothing hangs or faults. */
    {
      size_t n = 80;
      uint64_t rng = 0x5e1;
      void *sb = test_xcalloc(n * n, es);
      for (size_t i = 0; i < n * n; i++) put(t, sb, i, test_rand_uniform(&rng, -1, 1));
      for (size_t k = 0; k < n; k++) put(t, sb, 40 * n + k, get(t, sb, k));
      nxv_tensor *s = upload(d, t, n * n, sb);
      REQUIRE(s);
      REQUIRE_OK(nxv_lu(d, s, 1, n, 0.0, &o[0], &o[1], &o[2]));
      u = download(o[2], n * n, es);
      long double minpiv = INFINITY;
      for (size_t i = 0; u && i < n; i++)
        if (fabsl(get(t, u, i * n + i)) < minpiv) minpiv = fabsl(get(t, u, i * n + i));
      CHECK_MSG(minpiv <= 1e3L * unit_eps(t), "%s: singular order 80, smallest pivot %Lg",
                nxv_dtype_name(t), minpiv);
      free(u);
      for (int i = 0; i < 3; i++) nxv_tensor_release(o[i]);
      nxv_tensor_release(s);
      free(sb);
    }
    /* Empty: no matrices, and matrices of order 0. */
    nxv_tensor *e = NULL;
    REQUIRE_OK(nxv_tensor_empty(d, t, 0, &e));
    REQUIRE_OK(nxv_lu(d, e, 0, 4, 1e-10, &o[0], &o[1], &o[2]));
    for (int i = 0; i < 3; i++) {
      CHECK(nxv_tensor_count(o[i]) == 0);
      nxv_tensor_release(o[i]);
    }
    REQUIRE_OK(nxv_lu(d, e, 3, 0, 1e-10, &o[0], &o[1], &o[2]));
    for (int i = 0; i < 3; i++) {
      CHECK(nxv_tensor_count(o[i]) == 0);
      nxv_tensor_release(o[i]);
    }
    /* Wrong calls: an error with a message, the outputs left alone. */
    nxv_tensor *keep[3] = {(nxv_tensor *)&keep, (nxv_tensor *)&keep, (nxv_tensor *)&keep};
    CHECK(nxv_lu(d, x, 4, 3, 1e-10, &keep[0], &keep[1], &keep[2]) == NXV_ERR_INVALID_ARGUMENT);
    CHECK(strstr(nxv_last_error(), "lu: tensor has 45 elements") != NULL);
    CHECK(nxv_lu(d, x, 5, 3, 1e-10, NULL, &keep[1], &keep[2]) == NXV_ERR_INVALID_ARGUMENT);
    CHECK(keep[0] == (nxv_tensor *)&keep && keep[1] == (nxv_tensor *)&keep &&
          keep[2] == (nxv_tensor *)&keep);
    nxv_tensor_release(e);
    nxv_tensor_release(x);
    free(buf);
  }
  /* Integer tensors are not factored. */
  int32_t iv[4] = {1, 2, 3, 4};
  nxv_tensor *it = NULL, *o[3] = {NULL, NULL, NULL};
  REQUIRE_OK(nxv_tensor_upload(d, NXV_S32, 4, iv, &it));
  CHECK(nxv_lu(d, it, 1, 2, 1e-10, &o[0], &o[1], &o[2]) == NXV_ERR_UNSUPPORTED);
  CHECK(strstr(nxv_last_error(), "lu on s32") != NULL);
  CHECK(!o[0] && !o[1] && !o[2]);
  nxv_tensor_release(it);
  nxv_device_release(d);
}

/* Nx's QR (Nx.LinAlg.QR) of the m x n matrix a in long double: reflection
 * i < kr of column i unless the sum of squares below row i is under eps;
 * q (m x qc) and r (rr x n) as nxv_qr returns them, |x| <= eps flushed.
 * Reflected columns get exact zeros below the diagonal. */
/* The smallest |x| / norm of the sign decisions (x <= 0) of the
 * reflections ref_qr and ref_tridiagonal took since it was last set to 1:
 * below the computation's rounding, the device may decide the other way
 * (a column of Q and A's entries flip sign). Single-threaded tests only. */
static long double g_ref_sign_margin = 1;

static void ref_qr(const long double *a, size_t m, size_t n, size_t qc, size_t rr,
                   long double eps, long double *q, long double *r) {
  size_t k = m < n ? m : n, kr = m == n && n > 0 ? n - 1 : k;
  long double *w = test_xcalloc(m * n + 1, sizeof *w), *qf = test_xcalloc(m * m + 1, sizeof *qf);
  long double *v = test_xcalloc(m + 1, sizeof *v);
  for (size_t i = 0; i < m * n; i++) w[i] = a[i];
  for (size_t i = 0; i < m; i++) qf[i * m + i] = 1;
  for (size_t i = 0; i < kr; i++) {
    long double s = 0, xi = w[i * n + i];
    for (size_t p = i + 1; p < m; p++) s += w[p * n + i] * w[p * n + i];
    if (s < eps) continue;
    long double nrm = sqrtl(xi * xi + s), v0 = xi <= 0 ? xi - nrm : -s / (xi + nrm);
    long double tau = 2 / (1 + s / (v0 * v0));
    if (fabsl(xi) < g_ref_sign_margin * nrm) g_ref_sign_margin = fabsl(xi) / nrm;
    v[i] = 1;
    for (size_t p = i + 1; p < m; p++) v[p] = w[p * n + i] / v0;
    /* H R over every column: those left of i are zero below row i unless
     * their own reflection was the identity. */
    for (size_t j = 0; j < n; j++) {
      long double dot = 0;
      for (size_t p = i; p < m; p++) dot += v[p] * w[p * n + j];
      for (size_t p = i; p < m; p++) w[p * n + j] -= tau * dot * v[p];
    }
    w[i * n + i] = nrm;
    for (size_t p = i + 1; p < m; p++) w[p * n + i] = 0;
    for (size_t row = 0; row < m; row++) { /* Q = Q H */
      long double dot = 0;
      for (size_t p = i; p < m; p++) dot += qf[row * m + p] * v[p];
      for (size_t p = i; p < m; p++) qf[row * m + p] -= tau * dot * v[p];
    }
  }
  for (size_t row = 0; row < m; row++)
    for (size_t c = 0; c < qc; c++) {
      long double x = qf[row * m + c];
      q[row * qc + c] = fabsl(x) <= eps ? 0 : x;
    }
  for (size_t i = 0; i < rr * n; i++) r[i] = fabsl(w[i]) <= eps ? 0 : w[i];
  free(w);
  free(qf);
  free(v);
}

/* nxv_qr of batch random m x n matrices (entries in [-1, 1]) against
 * ref_qr: Q and R entries within a backward-stable bound of the
 * reference's, R exactly zero below the diagonal, Q R within that bound of
 * A. The outputs are poisoned by the device first. */
static void check_qr(nxv_device *d, uint64_t *rng, nxv_dtype t, size_t batch, size_t m,
                     size_t n, bool complete, bool lead_identity) {
  char tag[96];
  snprintf(tag, sizeof tag, "qr %s %zu x %zu x %zu%s%s", nxv_dtype_name(t), batch, m, n,
           complete ? " complete" : "", lead_identity ? " (identity first)" : "");
  size_t k = m < n ? m : n, qc = complete ? m : k, rr = complete ? m : k;
  size_t count = batch * m * n, es = nxv_dtype_size(t);
  void *buf = test_xcalloc(count + 1, es);
  long double *a = test_xcalloc(count + 1, sizeof *a);
  long double *wq = test_xcalloc(m * qc + 1, sizeof *wq), *wr = test_xcalloc(rr * n + 1, sizeof *wr);
  for (size_t i = 0; i < count; i++) {
    /* lead_identity: column 0 1e-3 below a negative first entry, so that
     * with eps 1e-4 reflection 0 is the identity (R keeps the sign, and
     * the later reflections change the entries left below it). */
    bool col0 = lead_identity && i % n == 0, first = i % (m * n) == 0;
    put(t, buf, i, col0 ? (first ? -2 : 1e-3) : test_rand_uniform(rng, -1, 1));
    a[i] = get(t, buf, i);
  }
  nxv_tensor *x = upload(d, t, count, buf), *out[2] = {NULL, NULL};
  if (x) {
    long double eps = lead_identity ? 1e-4L : 1e-30L;
    nxv_status st = nxv_qr(d, x, batch, m, n, complete, (double)eps, &out[0], &out[1]);
    CHECK_MSG(st == NXV_OK, "%s: %s", tag, nxv_last_error());
    if (st == NXV_OK) {
      CHECK(nxv_tensor_count(out[0]) == batch * m * qc && nxv_tensor_dtype(out[0]) == t);
      CHECK(nxv_tensor_count(out[1]) == batch * rr * n && nxv_tensor_dtype(out[1]) == t);
      void *gq = download(out[0], batch * m * qc, es), *gr = download(out[1], batch * rr * n, es);
      long double tol = 16 * (long double)(m + n) * unit_eps(t) * sqrtl((long double)m + 1);
      size_t bad = 0;
      for (size_t b = 0; gq && gr && b < batch; b++) {
        const long double *ab = a + b * m * n;
        ref_qr(ab, m, n, qc, rr, eps, wq, wr);
        for (size_t i = 0; i < m * qc; i++) {
          long double g = get(t, gq, b * m * qc + i);
          if (!(fabsl(g - wq[i]) <= tol) && bad++ < 5)
            fprintf(stderr, "  %s: matrix %zu Q(%zu, %zu) %.10Lg, expected %.10Lg\n", tag, b,
                    i / qc, i % qc, g, wq[i]);
        }
        for (size_t i = 0; i < rr * n; i++) {
          long double g = get(t, gr, b * rr * n + i);
          bool ok = wr[i] == 0 && i / n > i % n ? g == 0 : fabsl(g - wr[i]) <= tol;
          if (!ok && bad++ < 5)
            fprintf(stderr, "  %s: matrix %zu R(%zu, %zu) %.10Lg, expected %.10Lg\n", tag, b,
                    i / n, i % n, g, wr[i]);
        }
        /* (Q R)[i][j] over Q's columns and R's rows (in the reduced mode R
         * drops what an identity reflection left below row k - 1: A only
         * within sqrt(eps) there, as Nx's; entries of at most eps 1e-4
         * flushed leave A within 1e-3). */
        long double rtol = lead_identity ? 1e-3L : tol;
        for (size_t i = 0; !(lead_identity && !complete) && i < m; i++)
          for (size_t j = 0; j < n; j++) {
            long double s = 0;
            for (size_t p = 0; p < rr; p++)
              s += get(t, gq, b * m * qc + i * qc + p) * get(t, gr, b * rr * n + p * n + j);
            if (!(fabsl(s - ab[i * n + j]) <= rtol) && bad++ < 5)
              fprintf(stderr, "  %s: matrix %zu (QR - A)(%zu, %zu) %.3Lg\n", tag, b, i, j,
                      s - ab[i * n + j]);
          }
      }
      CHECK_MSG(bad == 0, "%s: %zu wrong entries", tag, bad);
      free(gq);
      free(gr);
      nxv_tensor_release(out[0]);
      nxv_tensor_release(out[1]);
    }
    nxv_tensor_release(x);
  }
  free(buf);
  free(a);
  free(wq);
  free(wr);
}

NXV_TEST(linalg, qr) {
  /* Up to 64 x 64 one workgroup a matrix for every reflection, beyond a
   * dispatch a reflection on R and Q's in few (65 rows or columns; 300
   * rows more than a workgroup's invocations; 100 columns more than 12 of
   * its 8-column chunks; 300 x 300 Q's reflections in two dispatches),
   * tall and wide, batches up to 40, both modes. With fast_math f32 runs
   * in f32. */
  static const size_t shapes[][3] = {{1, 1, 1},  {1, 2, 2},   {3, 3, 3},  {2, 5, 3},
                                     {2, 3, 5},  {1, 1, 4},   {1, 4, 1},  {40, 4, 4},
                                     {2, 17, 16}, {2, 33, 17}, {2, 64, 64}, {1, 65, 64},
                                     {2, 64, 65}, {1, 100, 40}, {1, 40, 100}, {1, 130, 130},
                                     {1, 300, 20}, {1, 300, 300}};
  for (int fast = 0; fast < 2; fast++) {
    nxv_device *d = test_open_device_with((nxv_device_config){.fast_math = fast});
    REQUIRE(d);
    uint64_t rng = 0x9e1 + (uint64_t)fast;
    for (size_t ti = 0; ti < 2; ti++)
      for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int complete = 0; complete < 2; complete++)
          if (!fast || kTypes[ti] == NXV_F32)
            check_qr(d, &rng, kTypes[ti], shapes[s][0], shapes[s][1], shapes[s][2], complete,
                     false);
    /* A first reflection that is the identity, in the per-reflection form
     * (the next one then read from its column) and in one dispatch: the
     * later reflections change what it left below the diagonal. */
    for (size_t ti = 0; ti < 2; ti++)
      if (!fast || kTypes[ti] == NXV_F32) {
        check_qr(d, &rng, kTypes[ti], 2, 70, 66, false, true);
        check_qr(d, &rng, kTypes[ti], 3, 40, 30, true, true);
      }
    nxv_device_release(d);
  }
}

/* Columns left alone (nothing below the diagonal, or a sum of squares
 * under eps: R keeps them, negative diagonal included), the last column
 * of a square matrix unreflected, eps flushing, NaN (no hang), empty
 * batches and shapes (n = 0 with complete: Q the identity), and wrong
 * calls (an error, outputs untouched). */
NXV_TEST(linalg, qr_edges) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  for (size_t ti = 0; ti < 2; ti++) {
    nxv_dtype t = kTypes[ti];
    size_t es = nxv_dtype_size(t);
    long double tol = 8 * unit_eps(t);
    /* Four 3 x 3 (then a 3 x 2 view of the same data below): upper
     * triangular with a negative diagonal; a column whose entries below
     * the diagonal are 1e-6 (squares under eps 1e-10); [[1, 2, 0], [3, 4,
     * 0], [0, 0, 1]]; a NaN. */
    static const double vals[36] = {-2, 1, 3, 0, -5, 6, 0, 0, -7,
                                    4, 1, 0, 1e-6, 2, 0, 1e-6, 0, 3,
                                    3, 4, 0, 4, 2, 0, 0, 0, -1,
                                    1, 2, 3, 4, NAN, 6, 7, 8, 9};
    void *buf = test_xcalloc(36, es);
    for (size_t i = 0; i < 36; i++) put(t, buf, i, vals[i]);
    nxv_tensor *x = upload(d, t, 36, buf), *o[2] = {NULL, NULL};
    REQUIRE(x);
    REQUIRE_OK(nxv_qr(d, x, 4, 3, 3, false, 1e-10, &o[0], &o[1]));
    void *q = download(o[0], 36, es), *r = download(o[1], 36, es);
    if (q && r) {
      for (size_t i = 0; i < 9; i++) {
        double id = i % 4 == 0 ? 1 : 0;
        /* Upper triangular: Q = I, R = A, signs kept. */
        CHECK_MSG(get(t, q, i) == id && get(t, r, i) == vals[i], "%s upper (%zu): Q %Lg R %Lg",
                  nxv_dtype_name(t), i, get(t, q, i), get(t, r, i));
        /* Small column: left alone, its 1e-6 entries kept in R. */
        CHECK_MSG(get(t, q, 9 + i) == id && get(t, r, 9 + i) == get(t, buf, 9 + i),
                  "%s small (%zu): Q %Lg R %Lg", nxv_dtype_name(t), i, get(t, q, 9 + i),
                  get(t, r, 9 + i));
      }
      /* [[3, 4], [4, 2]] block: column 0 reflected to (5, 0); R's
       * remaining 2 x 2 entry and the unreflected last column as
       * computed: Q = [[0.6, -0.8, 0], [0.8, 0.6, 0], [0, 0, 1]] up to the
       * reflection's signs, R = [[5, 4, 0], [0, -2, 0], [0, 0, -1]]. */
      static const double wq[9] = {0.6, 0.8, 0, 0.8, -0.6, 0, 0, 0, 1};
      static const double wr[9] = {5, 4, 0, 0, 2, 0, 0, 0, -1};
      for (size_t i = 0; i < 9; i++)
        CHECK_MSG(fabsl(get(t, q, 18 + i) - wq[i]) <= tol &&
                      fabsl(get(t, r, 18 + i) - wr[i]) <= tol,
                  "%s 2x2 block (%zu): Q %Lg R %Lg", nxv_dtype_name(t), i, get(t, q, 18 + i),
                  get(t, r, 18 + i));
      CHECK(isnan(get(t, r, 35)));
    }
    free(q);
    free(r);
    nxv_tensor_release(o[0]);
    nxv_tensor_release(o[1]);
    /* eps 0: the small column is reflected (zeros below R's diagonal, Q's
     * first column x / |x|). */
    REQUIRE_OK(nxv_qr(d, x, 4, 3, 3, false, 0.0, &o[0], &o[1]));
    r = download(o[1], 36, es);
    q = download(o[0], 36, es);
    long double sm = get(t, buf, 12), q10 = sm / sqrtl(16 + 2 * sm * sm);
    if (r && q)
      CHECK_MSG(get(t, r, 12) == 0 && get(t, r, 15) == 0 && fabsl(get(t, q, 12) - q10) <= q10 * tol,
                "%s eps 0: R %Lg %Lg, Q %.12Lg against %.12Lg", nxv_dtype_name(t), get(t, r, 12),
                get(t, r, 15), get(t, q, 12), q10);
    free(q);
    free(r);
    nxv_tensor_release(o[0]);
    nxv_tensor_release(o[1]);
    /* Empty: no matrices; 3 x 0 matrices (complete: Q the identity, R
     * empty; reduced: both empty); 0 x 3. */
    nxv_tensor *e = NULL;
    REQUIRE_OK(nxv_tensor_empty(d, t, 0, &e));
    REQUIRE_OK(nxv_qr(d, e, 0, 4, 4, false, 1e-10, &o[0], &o[1]));
    CHECK(nxv_tensor_count(o[0]) == 0 && nxv_tensor_count(o[1]) == 0);
    nxv_tensor_release(o[0]);
    nxv_tensor_release(o[1]);
    REQUIRE_OK(nxv_qr(d, e, 2, 3, 0, true, 1e-10, &o[0], &o[1]));
    CHECK(nxv_tensor_count(o[0]) == 18 && nxv_tensor_count(o[1]) == 0);
    q = download(o[0], 18, es);
    for (size_t i = 0; q && i < 18; i++) CHECK(get(t, q, i) == (i % 9 % 4 == 0 ? 1 : 0));
    free(q);
    nxv_tensor_release(o[0]);
    nxv_tensor_release(o[1]);
    REQUIRE_OK(nxv_qr(d, e, 2, 3, 0, false, 1e-10, &o[0], &o[1]));
    CHECK(nxv_tensor_count(o[0]) == 0 && nxv_tensor_count(o[1]) == 0);
    nxv_tensor_release(o[0]);
    nxv_tensor_release(o[1]);
    REQUIRE_OK(nxv_qr(d, e, 2, 0, 3, true, 1e-10, &o[0], &o[1]));
    CHECK(nxv_tensor_count(o[0]) == 0 && nxv_tensor_count(o[1]) == 0);
    nxv_tensor_release(o[0]);
    nxv_tensor_release(o[1]);
    /* Wrong calls: an error with a message, the outputs left alone. */
    nxv_tensor *keep[2] = {(nxv_tensor *)&keep, (nxv_tensor *)&keep};
    CHECK(nxv_qr(d, x, 4, 3, 2, false, 1e-10, &keep[0], &keep[1]) == NXV_ERR_INVALID_ARGUMENT);
    CHECK(strstr(nxv_last_error(), "qr: tensor has 36 elements") != NULL);
    CHECK(nxv_qr(d, x, 1, 70000, 1, false, 1e-10, &keep[0], &keep[1]) != NXV_OK);
    CHECK(nxv_qr(d, x, 4, 3, 3, false, 1e-10, NULL, &keep[1]) == NXV_ERR_INVALID_ARGUMENT);
    CHECK(keep[0] == (nxv_tensor *)&keep && keep[1] == (nxv_tensor *)&keep);
    nxv_tensor_release(e);
    nxv_tensor_release(x);
    free(buf);
  }
  int32_t iv[4] = {1, 2, 3, 4};
  nxv_tensor *it = NULL, *o[2] = {NULL, NULL};
  REQUIRE_OK(nxv_tensor_upload(d, NXV_S32, 4, iv, &it));
  CHECK(nxv_qr(d, it, 1, 2, 2, false, 1e-10, &o[0], &o[1]) == NXV_ERR_UNSUPPORTED);
  CHECK(strstr(nxv_last_error(), "qr on s32") != NULL);
  CHECK(!o[0] && !o[1]);
  nxv_tensor_release(it);
  nxv_device_release(d);
}

/* Nx.BinaryBackend's eigh iteration on the n x n matrix a with q in long
 * double, as nxv_eigh_iterate defines it: {Q', R} = ref_qr(A), A <- R Q',
 * Q <- Q Q', stopping after the step that moved every entry of Q by at
 * most eps, or after max_iter steps (at least one). Returns the steps. */
static size_t ref_eigh_iterate(long double *a, long double *q, size_t n, size_t max_iter,
                               long double eps) {
  size_t nn = n * n, steps = 0;
  long double *qs = test_xcalloc(nn + 1, sizeof *qs), *rs = test_xcalloc(nn + 1, sizeof *rs);
  long double *an = test_xcalloc(nn + 1, sizeof *an), *qn = test_xcalloc(nn + 1, sizeof *qn);
  for (size_t it = 0; it < (max_iter ? max_iter : 1); it++) {
    ref_qr(a, n, n, n, n, eps, qs, rs);
    bool moved = false;
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < n; j++) {
        long double x = 0, y = 0;
        for (size_t k = 0; k < n; k++) {
          x += rs[i * n + k] * qs[k * n + j];
          y += q[i * n + k] * qs[k * n + j];
        }
        an[i * n + j] = x;
        qn[i * n + j] = y;
        if (fabsl(q[i * n + j] - y) > eps) moved = true;
      }
    memcpy(a, an, nn * sizeof *a);
    memcpy(q, qn, nn * sizeof *q);
    steps++;
    if (!moved) break;
  }
  free(qs);
  free(rs);
  free(an);
  free(qn);
  return steps;
}

/* Nx.BinaryBackend's reduction of eigh's symmetric h (n x n) to
 * tridiagonal form in long double, q from the identity, as
 * nxv_eigh_iterate does it without q: reflections of columns 0 .. n - 3
 * below the subdiagonal (the identity where rest < eps), then entries
 * under eps flushed. */
static void ref_tridiagonal(long double *h, long double *q, size_t n, long double eps) {
  size_t nn = n * n;
  long double *v = test_xcalloc(n + 1, sizeof *v), *p = test_xcalloc(nn + 1, sizeof *p);
  for (size_t i = 0; i < nn; i++) q[i] = i / n == i % n;
  for (size_t i = 0; i + 2 < n; i++) {
    long double ns = 0;
    for (size_t r = i + 1; r < n; r++) ns += h[r * n + i] * h[r * n + i];
    long double a0 = h[(i + 1) * n + i], rest = ns - a0 * a0, nrm = sqrtl(ns);
    long double v0 = a0 <= 0 ? a0 - nrm : -rest / (a0 + nrm);
    if (rest < eps) continue;
    if (fabsl(a0) < g_ref_sign_margin * nrm) g_ref_sign_margin = fabsl(a0) / nrm;
    long double scale = 2 * v0 * v0 / (rest + v0 * v0);
    for (size_t r = 0; r < n; r++) v[r] = r <= i ? 0 : r == i + 1 ? 1 : h[r * n + i] / v0;
    /* H <- R H R, Q <- Q R, R = I - scale v v^T, densely. */
    for (int pass = 0; pass < 3; pass++) {
      long double *src = pass == 2 ? q : h;
      for (size_t r = 0; r < n; r++)
        for (size_t c = 0; c < n; c++) {
          long double x = 0;
          for (size_t k = 0; k < n; k++) {
            long double rk = (r == k) - scale * v[r] * v[k], kc = (k == c) - scale * v[k] * v[c];
            x += pass == 0 ? rk * src[k * n + c] : src[r * n + k] * kc;
          }
          p[r * n + c] = x;
        }
      memcpy(src, p, nn * sizeof *p);
    }
  }
  for (size_t i = 0; i < nn; i++) {
    if (fabsl(h[i]) < eps) h[i] = 0;
    if (fabsl(q[i]) < eps) q[i] = 0;
  }
  free(v);
  free(p);
}

/* nxv_eigh_iterate on batch symmetric matrices V diag(3 (-ratio)^k) V^T
 * (V orthogonal, from ref_qr of a random matrix; eigenvalues of distinct
 * magnitudes, so the iteration converges) with Q the identity, against
 * ref_eigh_iterate: every entry of A and Q within a bound that grows with
 * the steps. Matrices whose ratio differs stop at different steps; with
 * max_iter below that, all stop there. A matrix one of whose reflections'
 * sign decisions is within 2^-10 of a tie (relative to its norm) in the
 * reference is drawn again: rounding may decide those either way. Outputs
 * poisoned first. */
static void check_eigh_iterate(nxv_device *d, uint64_t *rng, nxv_dtype t, size_t batch,
                               size_t n, size_t max_iter, bool tri) {
  char tag[96];
  snprintf(tag, sizeof tag, "eigh_iterate %s %zu x %zu, max_iter %zu%s", nxv_dtype_name(t),
           batch, n, max_iter, tri ? ", tridiagonal first" : "");
  size_t nn = n * n, count = batch * nn, es = nxv_dtype_size(t);
  void *abuf = test_xcalloc(count + 1, es), *qbuf = test_xcalloc(count + 1, es);
  long double *g = test_xcalloc(nn + 1, sizeof *g), *v = test_xcalloc(nn + 1, sizeof *v);
  long double *r = test_xcalloc(nn + 1, sizeof *r);
  long double eps = 1e-4L;
  long double *ea = test_xcalloc(count + 1, sizeof *ea), *eq = test_xcalloc(count + 1, sizeof *eq);
  size_t *esteps = test_xcalloc(batch + 1, sizeof *esteps);
  for (size_t b = 0, tries = 0; b < batch; tries++) {
    for (size_t i = 0; i < nn; i++) g[i] = test_rand_uniform(rng, -1, 1);
    ref_qr(g, n, n, n, n, 1e-30L, v, r);
    long double ratio = 0.4L + 0.1L * (long double)(b % 3);
    /* f32 past order 16: the smallest eigenvalue 0.03 to 0.09 instead, so
     * that every gap stays far above f32's resolution of the matrix (a
     * steeper spectrum leaves the eigenvectors of its smallest
     * eigenvalues undetermined in f32). */
    if (t == NXV_F32 && n > 16)
      ratio = powl(1e-2L * (long double)(1 + b % 3), 1.0L / (long double)(n - 1));
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < n; j++) {
        long double s = 0, l = 3;
        for (size_t k = 0; k < n; k++, l *= -ratio) s += v[i * n + k] * l * v[j * n + k];
        put(t, abuf, b * nn + i * n + j, s);
        put(t, qbuf, b * nn + i * n + j, i == j ? 1 : 0);
      }
    /* The reference on the matrix as rounded to t. */
    for (size_t i = 0; i < nn; i++) {
      ea[b * nn + i] = get(t, abuf, b * nn + i);
      eq[b * nn + i] = get(t, qbuf, b * nn + i);
    }
    g_ref_sign_margin = 1;
    if (tri) ref_tridiagonal(ea + b * nn, eq + b * nn, n, eps);
    esteps[b] = ref_eigh_iterate(ea + b * nn, eq + b * nn, n, max_iter, eps);
    if (g_ref_sign_margin >= 0x1p-10L || tries >= 50) {
      CHECK_MSG(g_ref_sign_margin >= 0x1p-10L, "%s: no matrix without a near tie", tag);
      b++;
      tries = 0;
    }
  }
  nxv_tensor *x = upload(d, t, count, abuf), *y = upload(d, t, count, qbuf);
  if (x && y) {
    nxv_tensor *oa = NULL, *oq = NULL;
    nxv_status st =
        nxv_eigh_iterate(d, x, tri ? NULL : y, batch, n, max_iter, (double)eps, &oa, &oq);
    CHECK_MSG(st == NXV_OK, "%s: %s", tag, nxv_last_error());
    if (st == NXV_OK) {
      CHECK(nxv_tensor_count(oa) == count && nxv_tensor_dtype(oa) == t);
      CHECK(nxv_tensor_count(oq) == count && nxv_tensor_dtype(oq) == t);
      void *ga = download(oa, count, es), *gq = download(oq, count, es);
      size_t bad = 0;
      for (size_t b = 0; ga && gq && b < batch; b++) {
        size_t steps = esteps[b];
        long double tol =
            16 * (long double)(n + 1) * unit_eps(t) * sqrtl((long double)steps + 1) * 3;
        for (size_t i = 0; i < nn; i++) {
          long double wa = ea[b * nn + i], wq = eq[b * nn + i];
          long double xa = get(t, ga, b * nn + i), xq = get(t, gq, b * nn + i);
          if (!(fabsl(xa - wa) <= tol) && bad++ < 5)
            fprintf(stderr, "  %s: matrix %zu (%zu steps) A(%zu, %zu) %.10Lg, expected %.10Lg\n",
                    tag, b, steps, i / n, i % n, xa, wa);
          if (!(fabsl(xq - wq) <= tol) && bad++ < 5)
            fprintf(stderr, "  %s: matrix %zu (%zu steps) Q(%zu, %zu) %.10Lg, expected %.10Lg\n",
                    tag, b, steps, i / n, i % n, xq, wq);
        }
      }
      CHECK_MSG(bad == 0, "%s: %zu wrong entries", tag, bad);
      free(ga);
      free(gq);
      nxv_tensor_release(oa);
      nxv_tensor_release(oq);
    }
  }
  if (x) nxv_tensor_release(x);
  if (y) nxv_tensor_release(y);
  free(abuf);
  free(qbuf);
  free(ea);
  free(eq);
  free(esteps);
  free(g);
  free(v);
  free(r);
}

NXV_TEST(linalg, eigh_iterate) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  uint64_t rng = 0xe16;
  /* Orders 1 to 64 (64: several dispatches on CPU devices), batches whose
   * matrices stop at different steps, max_iter cutting the iteration short
   * (0 runs one step, as 1 does). Orders 32, 48 and 49 are the largest and
   * smallest of the kernel's shared-memory forms (qr.comp's VARIANTS 7-9,
   * where the device has the memory; 6 otherwise). Order 64 in f64 only: its smallest
   * eigenvalues (3 0.4^63 and the like) are closer together than f32
   * resolves, so their eigenvectors are not determined in f32. */
  static const size_t cases[][3] = {{1, 1, 1000}, {2, 2, 1000}, {3, 5, 1000}, {3, 8, 1000},
                                    {2, 17, 1000}, {1, 32, 1000}, {3, 33, 1000}, {1, 48, 1000},
                                    {1, 49, 1000}, {2, 64, 1000}, {2, 8, 3},
                                    {1, 16, 1}, {1, 16, 0}, {2, 64, 7}};
  for (size_t ti = 0; ti < 2; ti++)
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
      for (int tri = 0; tri < 2; tri++)
        if (kTypes[ti] == NXV_F64 || cases[c][1] < 64)
          check_eigh_iterate(d, &rng, kTypes[ti], cases[c][0], cases[c][1], cases[c][2], tri);
  /* NaN stops a matrix after one step (it counts as not moved), without
   * holding up the others; empty batches; wrong calls leave the outputs
   * alone. */
  double nan_in[8] = {NAN, 1, 1, 2, 2, 1, 1, 3}, eye[8] = {1, 0, 0, 1, 1, 0, 0, 1};
  nxv_tensor *x = NULL, *y = NULL, *o[2] = {NULL, NULL};
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F64, 8, nan_in, &x));
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F64, 8, eye, &y));
  REQUIRE_OK(nxv_eigh_iterate(d, x, y, 2, 2, 1000, 1e-4, &o[0], &o[1]));
  double ga[8], gq[8];
  REQUIRE_OK(nxv_tensor_download(o[0], 0, 8, ga));
  REQUIRE_OK(nxv_tensor_download(o[1], 0, 8, gq));
  CHECK(isnan(ga[0]) && isnan(gq[0]));
  long double la[4] = {2, 1, 1, 3}, lq[4] = {1, 0, 0, 1};
  size_t steps = ref_eigh_iterate(la, lq, 2, 1000, 1e-4L);
  CHECK(steps > 1);
  for (size_t i = 0; i < 4; i++)
    CHECK_MSG(fabsl(ga[4 + i] - la[i]) < 1e-12L && fabsl(gq[4 + i] - lq[i]) < 1e-12L,
              "second matrix (%zu steps) entry %zu: A %.17g (%.17Lg), Q %.17g (%.17Lg)", steps,
              i, ga[4 + i], la[i], gq[4 + i], lq[i]);
  nxv_tensor_release(o[0]);
  nxv_tensor_release(o[1]);
  /* Already tridiagonal: every reflection of the reduction the identity,
   * Q from the identity. */
  {
    double tb[16] = {4, 1, 0, 0, 1, 3, 1, 0, 0, 1, 2, 1, 0, 0, 1, 1};
    long double la4[16], lq4[16];
    for (size_t i = 0; i < 16; i++) la4[i] = tb[i];
    ref_tridiagonal(la4, lq4, 4, 1e-4L);
    size_t st4 = ref_eigh_iterate(la4, lq4, 4, 1000, 1e-4L);
    nxv_tensor *tt = NULL;
    REQUIRE_OK(nxv_tensor_upload(d, NXV_F64, 16, tb, &tt));
    REQUIRE_OK(nxv_eigh_iterate(d, tt, NULL, 1, 4, 1000, 1e-4, &o[0], &o[1]));
    double ta[16], tq[16];
    REQUIRE_OK(nxv_tensor_download(o[0], 0, 16, ta));
    REQUIRE_OK(nxv_tensor_download(o[1], 0, 16, tq));
    for (size_t i = 0; i < 16; i++)
      CHECK_MSG(fabsl(ta[i] - la4[i]) < 1e-12L && fabsl(tq[i] - lq4[i]) < 1e-12L,
                "tridiagonal input (%zu steps) entry %zu: A %.17g (%.17Lg), Q %.17g (%.17Lg)",
                st4, i, ta[i], la4[i], tq[i], lq4[i]);
    nxv_tensor_release(o[0]);
    nxv_tensor_release(o[1]);
    nxv_tensor_release(tt);
  }
  nxv_tensor *e = NULL;
  REQUIRE_OK(nxv_tensor_empty(d, NXV_F64, 0, &e));
  REQUIRE_OK(nxv_eigh_iterate(d, e, e, 0, 3, 1000, 1e-4, &o[0], &o[1]));
  CHECK(nxv_tensor_count(o[0]) == 0 && nxv_tensor_count(o[1]) == 0);
  nxv_tensor_release(o[0]);
  nxv_tensor_release(o[1]);
  nxv_tensor_release(e);
  nxv_tensor *keep[2] = {(nxv_tensor *)&keep, (nxv_tensor *)&keep};
  CHECK(nxv_eigh_iterate(d, x, y, 3, 2, 10, 1e-4, &keep[0], &keep[1]) ==
        NXV_ERR_INVALID_ARGUMENT);
  CHECK(strstr(nxv_last_error(), "eigh_iterate: A has 8 and Q 8 elements") != NULL);
  CHECK(nxv_eigh_iterate(d, x, y, 1, 65, 10, 1e-4, &keep[0], &keep[1]) == NXV_ERR_UNSUPPORTED);
  CHECK(nxv_eigh_iterate(d, x, y, 2, 2, NXV_EIGH_MAX_ITER + 1, 1e-4, &keep[0], &keep[1]) ==
        NXV_ERR_UNSUPPORTED);
  CHECK(strstr(nxv_last_error(), "eigh_iterate: max_iter 65537 (at most 65536)") != NULL);
  CHECK(nxv_eigh_iterate(d, NULL, y, 2, 2, 10, 1e-4, &keep[0], &keep[1]) ==
        NXV_ERR_INVALID_ARGUMENT);
  nxv_tensor *f = NULL;
  float ff[8] = {0};
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, 8, ff, &f));
  CHECK(nxv_eigh_iterate(d, x, f, 2, 2, 10, 1e-4, &keep[0], &keep[1]) ==
        NXV_ERR_INVALID_ARGUMENT);
  CHECK(strstr(nxv_last_error(), "A is f64 and Q f32") != NULL);
  CHECK(keep[0] == (nxv_tensor *)&keep && keep[1] == (nxv_tensor *)&keep);
  nxv_tensor_release(f);
  nxv_tensor_release(x);
  nxv_tensor_release(y);
  nxv_device_release(d);
}
