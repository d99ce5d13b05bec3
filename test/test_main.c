/*
 * test_main.c - runs the registered C tests and prints "N passed, M failed".
 *
 * Usage: nxv_tests [filter...]  runs the tests whose "suite.name" contains any
 * of the filters (all tests when none is given).
 */
#define _POSIX_C_SOURCE 200809L
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernels/ops.h"
#include "test.h"

atomic_int nxv_test_failures;
static nxv_test_case *test_head;
static nxv_test_case **test_tail = &test_head;

char nxv_test_sentinel_storage;
uint64_t nxv_test_expect_calls;

void nxv_test_prime_error(char *buf, size_t cap) {
  int64_t shape[2] = {1, 1}, strides[2];
  (void)nxv_broadcast_strides(2, shape, 1, shape, strides);
  snprintf(buf, cap, "%s", nxv_last_error());
}

void nxv_test_expect_fail_check(nxv_status got, nxv_status want, bool untouched,
                                const char *primed, const char *what, int line) {
  const char *msg = nxv_last_error();
  nxv_test_expect_calls++;
  CHECK_MSG(got == want, "line %d: %s returned %s, expected %s", line, what,
            nxv_status_name(got), nxv_status_name(want));
  CHECK_MSG(untouched, "line %d: %s changed its output parameter", line, what);
  CHECK_MSG(msg[0] != '\0' && strcmp(msg, primed) != 0,
            "line %d: %s recorded no error message", line, what);
}

void nxv_test_register(nxv_test_case *test_case) {
  /* Constructors run in link order; keep registration order. */
  *test_tail = test_case;
  test_tail = &test_case->next;
}

nxv_device *test_open_device_with(nxv_device_config config) {
  config.poison_outputs = true;
  config.disable_disk_cache = true;
  nxv_device *device = NULL;
  if (nxv_device_open(-1, &config, &device) != NXV_OK) {
    fprintf(stderr, "  cannot open a Vulkan device: %s\n", nxv_last_error());
    return NULL;
  }
  return device;
}

nxv_device *test_open_device(void) { return test_open_device_with((nxv_device_config){0}); }

nxv_device *test_open_device_deferred(void) {
  return test_open_device_with((nxv_device_config){.defer_elementwise = true});
}

void *test_xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p) {
    fprintf(stderr, "tests: out of host memory\n");
    abort();
  }
  return p;
}

uint64_t test_rand_u64(uint64_t *state) {
  uint64_t x = *state ? *state : 0x9E3779B97F4A7C15ull;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *state = x;
  return x;
}

bool test_self_exe(char *buf, size_t cap) {
  ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
  if (n <= 0) return false;
  buf[n] = 0;
  return true;
}

int test_run_self(char *const *args, char *const *envp) {
  char self[1024];
  char *argv[8] = {self};
  size_t n = 0;
  while (args[n] && n + 2 < sizeof argv / sizeof *argv) {
    argv[n + 1] = args[n];
    n++;
  }
  argv[n + 1] = NULL;
  pid_t pid;
  int status = 0;
  if (!test_self_exe(self, sizeof self) || posix_spawn(&pid, self, NULL, NULL, argv, envp) != 0 ||
      waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
    return -1;
  return WEXITSTATUS(status);
}

double test_rand_uniform(uint64_t *state, double lo, double hi) {
  double u = (double)(test_rand_u64(state) >> 11) * (1.0 / 9007199254740992.0);
  return lo + (hi - lo) * u;
}

static int matches(const nxv_test_case *t, int argc, char **argv) {
  if (argc <= 1) return 1;
  char full[256];
  snprintf(full, sizeof full, "%s.%s", t->suite, t->name);
  for (int i = 1; i < argc; i++)
    if (strstr(full, argv[i])) return 1;
  return 0;
}

/* Child-process entry of the pipeline cache tests (test_runtime.c). */
int test_pcache_child(const char *dir);

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--pcache-child") == 0)
    return test_pcache_child(argv[2]);
  int passed = 0, failed = 0;
  /* Every dispatch of a kernel with wide paths, in every test, is checked
   * against its preconditions (test_wide_paths.c). */
  nxv_ops_set_dispatch_hook(nxv_test_dispatch_hook);
  for (nxv_test_case *t = test_head; t; t = t->next) {
    if (!matches(t, argc, argv)) continue;
    atomic_store(&nxv_test_failures, 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fprintf(stderr, "[ RUN  ] %s.%s\n", t->suite, t->name);
    t->fn();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
                (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    if (atomic_load(&nxv_test_failures) == 0) {
      passed++;
      fprintf(stderr, "[  OK  ] %s.%s (%.0f ms)\n", t->suite, t->name, ms);
    } else {
      failed++;
      fprintf(stderr, "[ FAIL ] %s.%s (%d failed checks)\n", t->suite,
              t->name, atomic_load(&nxv_test_failures));
    }
  }
  fflush(stderr);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 && passed > 0 ? 0 : 1;
}
