/*
 * test.h - a minimal test harness for the C tests.
 *
 * Tests register themselves with NXV_TEST(suite, name); test_main.c runs the
 * ones whose "suite.name" contains the command-line filter (all if none) and
 * prints a closing line "N passed, M failed".
 *
 * A test fails when any CHECK fails; CHECKs log the location and go on, so
 * one run shows every failing assertion. REQUIRE returns from the test at
 * once. Not thread-safe to call CHECK from several threads at the same time
 * except through the atomic failure counter (messages may interleave).
 */
#ifndef NXV_TEST_H
#define NXV_TEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nxv.h"

typedef void (*nxv_test_fn)(void);

typedef struct nxv_test_case {
  const char *suite;
  const char *name;
  nxv_test_fn fn;
  struct nxv_test_case *next;
} nxv_test_case;

void nxv_test_register(nxv_test_case *test_case);
/* Number of failed checks in the running test (atomic: threads may fail). */
extern atomic_int nxv_test_failures;

/* The kernels' wide paths (test_wide_paths.c), counted by
 * nxv_test_dispatch_hook in nxv_test_paths. */
enum {
  NXV_TEST_P_VEC4,           /* elementwise, contiguous, 4 elements at a time */
  NXV_TEST_P_WIDE16,         /* elementwise, contiguous, 16 bytes at a time */
  NXV_TEST_P_MIXED16,        /* the same, operands of two types */
  NXV_TEST_P_SELECT16,       /* select's 16 bytes under a byte mask */
  NXV_TEST_P_WIDEN,          /* conversions to a wider type, 16 bytes out */
  NXV_TEST_P_TILED4,         /* tiled, an operand's rows read 4 wide */
  NXV_TEST_P_TILED_T16,      /* tiled, a 16-bit operand transposed, 8 rows a load */
  NXV_TEST_P_TILED16,        /* the 16-byte tiles */
  NXV_TEST_P_VEC_OUT,        /* tiled, the result written 4 wide */
  NXV_TEST_P_REDUCE_RUNS4,   /* a reduction's runs read 4 at a time */
  NXV_TEST_P_REDUCE_QUADS,   /* a reduction thread per 4 neighbouring results */
  NXV_TEST_P_REDUCE_OCTETS,  /* the same, 8 results of a 16-bit type */
  NXV_TEST_P_TRANSPOSE16,    /* transpose.comp's 16-byte tiles */
  NXV_TEST_P_WORDS4,         /* a word copy 16 bytes at a time */
  NXV_TEST_PATHS
};
extern atomic_ulong nxv_test_paths[NXV_TEST_PATHS];
struct nxv_ops_dispatch;
/* Checks one dispatch against its kernel's wide-path preconditions: NULL
 * when it meets them, else buf holding why. Sets seen[path] for each path
 * it takes. Pure. */
const char *nxv_test_dispatch_violation(const struct nxv_ops_dispatch *dispatch, bool *seen,
                                        char *buf, size_t cap);
/* The runner's kernels/ops.h dispatch hook: counts the paths of each
 * dispatch and fails the running test on a violation. Thread-safe. */
void nxv_test_dispatch_hook(const struct nxv_ops_dispatch *dispatch);

#define NXV_TEST(suite, name)                                                \
  static void test_##suite##_##name(void);                                   \
  static nxv_test_case test_case_##suite##_##name = {                        \
      #suite, #name, test_##suite##_##name, NULL};                           \
  __attribute__((constructor)) static void register_##suite##_##name(void) { \
    nxv_test_register(&test_case_##suite##_##name);                          \
  }                                                                          \
  static void test_##suite##_##name(void)

#define CHECK(cond)                                                       \
  do {                                                                    \
    if (!(cond)) {                                                        \
      atomic_fetch_add(&nxv_test_failures, 1);                            \
      fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__,  \
              #cond);                                                     \
    }                                                                     \
  } while (0)

#define CHECK_MSG(cond, ...)                                              \
  do {                                                                    \
    if (!(cond)) {                                                        \
      atomic_fetch_add(&nxv_test_failures, 1);                            \
      fprintf(stderr, "  %s:%d: CHECK(%s) failed: ", __FILE__, __LINE__,  \
              #cond);                                                     \
      fprintf(stderr, __VA_ARGS__);                                       \
      fputc('\n', stderr);                                                \
    }                                                                     \
  } while (0)

/* Checks that an nxv call returned NXV_OK, printing nxv_last_error if not. */
#define CHECK_OK(expr)                                                      \
  do {                                                                      \
    nxv_status check_ok_status_ = (expr);                                   \
    if (check_ok_status_ != NXV_OK) {                                       \
      atomic_fetch_add(&nxv_test_failures, 1);                              \
      fprintf(stderr, "  %s:%d: %s returned %s: %s\n", __FILE__, __LINE__,  \
              #expr, nxv_status_name(check_ok_status_), nxv_last_error());  \
    }                                                                       \
  } while (0)

#define REQUIRE(cond)                                                     \
  do {                                                                    \
    if (!(cond)) {                                                        \
      atomic_fetch_add(&nxv_test_failures, 1);                            \
      fprintf(stderr, "  %s:%d: REQUIRE(%s) failed: %s\n", __FILE__,      \
              __LINE__, #cond, nxv_last_error());                         \
      return;                                                             \
    }                                                                     \
  } while (0)

#define REQUIRE_OK(expr) REQUIRE((expr) == NXV_OK)

/* Shared helpers (test_main.c). */

/* calloc of at least one byte that aborts the test run when the host is
 * out of memory. */
void *test_xcalloc(size_t n, size_t size);

/* A device opened for tests: lavapipe or whatever NX_VULKAN_DEVICE picks,
 * with poisoned outputs and the disk cache off. Caller releases. */
nxv_device *test_open_device(void);
/* The same with defer_elementwise: basic elementwise ops return deferred
 * results. */
nxv_device *test_open_device_deferred(void);
/* The same with config's other fields (poisoned outputs and the disk
 * cache off whatever config says). */
nxv_device *test_open_device_with(nxv_device_config config);
/* This test binary's path (/proc/self/exe) into buf (cap bytes); false
 * when it cannot be read. */
bool test_self_exe(char *buf, size_t cap);
/* Runs this test binary with the arguments args (NULL-terminated, after
 * the program name) in the environment envp, and waits for it: its exit
 * status, or -1 when it did not run or did not exit. */
int test_run_self(char *const *args, char *const *envp);

/* Deterministic xorshift random numbers. */
uint64_t test_rand_u64(uint64_t *state);
double test_rand_uniform(uint64_t *state, double lo, double hi);

/* IEEE half bits of x, rounded to nearest even, and back; bf16 bits of x
 * (the upper half of the f32, by truncation; NaN as 0x7FC0), and back. */
uint16_t nxv_test_f16_bits(double x);
double nxv_test_f16_value(uint16_t h);
uint16_t nxv_test_bf16_bits(double x);
double nxv_test_bf16_value(uint16_t b);

/* A scalar of a real dtype: an integer as two's complement bits (u, or s
 * signed), a float as a double (f). */
typedef union nxv_test_val {
  uint64_t u;
  int64_t s;
  double f;
} nxv_test_val;
/* u wrapped to the width of integer type t (sign-extended for signed t). */
nxv_test_val nxv_test_wrap(nxv_dtype t, uint64_t u);
/* The smallest and the largest value of integer type t. */
nxv_test_val nxv_test_int_min(nxv_dtype t);
nxv_test_val nxv_test_int_max(nxv_dtype t);
/* Storage bits of v as real type t (floats rounded to t), and back. */
uint64_t nxv_test_encode(nxv_dtype t, nxv_test_val v);
nxv_test_val nxv_test_decode(nxv_dtype t, uint64_t bits);
/* Element i of an array of float type t (f16, bf16, f32, f64), as a
 * double. */
double nxv_test_float_at(nxv_dtype t, const void *p, uint64_t i);

/* Expected failures. EXPECT_FAIL(want, out, expr): expr must return status
 * want, record an error message of its own (nxv_last_error changes) and
 * leave the tensor out parameter out untouched (it is set to
 * NXV_TEST_SENTINEL first); a tensor wrongly returned is released.
 * EXPECT_FAIL_TAG names the case with tag instead of expr's text;
 * EXPECT_FAIL_PLAIN is for calls without a tensor output. Single-threaded. */
extern char nxv_test_sentinel_storage;
#define NXV_TEST_SENTINEL ((nxv_tensor *)(void *)&nxv_test_sentinel_storage)
/* Expected-failure checks run so far (for per-test reports). */
extern uint64_t nxv_test_expect_calls;
/* Sets the thread's last error to a known message (a failing pure call),
 * copied into buf, so a later check can tell a call recorded its own. */
void nxv_test_prime_error(char *buf, size_t cap);
void nxv_test_expect_fail_check(nxv_status got, nxv_status want, bool untouched,
                                const char *primed, const char *what, int line);

#define EXPECT_FAIL_TAG(want, out, tag, expr)                                  \
  do {                                                                         \
    char primed_[512];                                                         \
    nxv_test_prime_error(primed_, sizeof primed_);                             \
    (out) = NXV_TEST_SENTINEL;                                                 \
    nxv_status st_ = (expr);                                                   \
    nxv_test_expect_fail_check(st_, (want), (out) == NXV_TEST_SENTINEL,        \
                               primed_, (tag), __LINE__);                      \
    if (st_ == NXV_OK && (out) != NXV_TEST_SENTINEL && (out) != NULL)          \
      nxv_tensor_release(out);                                                 \
  } while (0)
#define EXPECT_FAIL(want, out, expr) EXPECT_FAIL_TAG(want, out, #expr, expr)
#define EXPECT_FAIL_PLAIN(want, expr)                                          \
  do {                                                                         \
    char primed_[512];                                                         \
    nxv_test_prime_error(primed_, sizeof primed_);                             \
    nxv_status st_ = (expr);                                                   \
    nxv_test_expect_fail_check(st_, (want), true, primed_, #expr, __LINE__);   \
  } while (0)

#endif /* NXV_TEST_H */
