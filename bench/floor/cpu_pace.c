/*
 * cpu_pace.c - how fast the host's CPUs run a single thread, and whether a
 * thread that busy-polls on another CPU slows it.
 *
 *   build/bench/cpu_pace [--ms N] [--rounds N] [--against CPU] [--pairs]
 *
 * The Elixir rows of the benchmarks (Nx's front end, the NIF path) move
 * with the pace of the CPU the BEAM runs on, and the runtime's scheduler,
 * completion and waiting threads busy-poll before they sleep. On a virtual
 * machine two vCPUs can share a physical core without the guest seeing it
 * (`lscpu` then reports one thread per core), and a poller on the sibling
 * would then take part of the core from the BEAM.
 *
 * 1. Each CPU of the process's affinity mask alone, --rounds times (default
 *    2): a thread pinned to it runs a dependent chain of loads and integer
 *    operations over a 256 KiB table (an interpreter's kind of work) for
 *    --ms milliseconds (default 150); printed in iterations per second.
 * 2. With --against CPU: the same work pinned to CPU while a second thread
 *    busy-polls an atomic flag (a pause instruction per pass, as the
 *    runtime's polling loops) pinned to each other CPU in turn; printed as
 *    a ratio to the pace of CPU alone measured just before and just after
 *    (a ratio well below both marks a shared core).
 * 3. With --pairs instead of the above: for every ordered pair of CPUs of
 *    the mask, the time one cache line takes to go from the first to the
 *    second (half the best of 3 runs of 20,000 round trips of a counter
 *    the two threads increment in turn), as a matrix in nanoseconds. On a
 *    machine's own cores it is tens of nanoseconds between two threads of
 *    one core and about a hundred between cores; a vCPU pair well below
 *    its neighbours ran on one physical core while measured.
 *
 * Linux only (sched_setaffinity). Exit status 2 on bad arguments, 1 when
 * a thread cannot be created or pinned.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TABLE_WORDS (1u << 16) /* 256 KiB of uint32 */
#define INNER 10000

static atomic_int g_stop; /* set to end the poller */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline void cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Pins the calling thread to cpu; 0 on success. */
static int pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void *poller(void *arg) {
  if (pin((int)(intptr_t)arg) != 0) {
    fprintf(stderr, "cpu_pace: cannot pin the poller to CPU %d\n", (int)(intptr_t)arg);
    exit(1);
  }
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) cpu_pause();
  return NULL;
}

/* Iterations per second of the dependent chain on cpu, for ms. */
static double pace(int cpu, int ms) {
  if (pin(cpu) != 0) {
    fprintf(stderr, "cpu_pace: cannot pin to CPU %d\n", cpu);
    exit(1);
  }
  uint32_t *table = malloc(TABLE_WORDS * sizeof *table);
  if (!table) {
    fprintf(stderr, "cpu_pace: out of memory\n");
    exit(1);
  }
  for (uint32_t i = 0; i < TABLE_WORDS; i++)
    table[i] = (uint32_t)((i * 2654435761u + 12345u) % TABLE_WORDS);
  uint32_t x = 1;
  long iterations = 0;
  double t0 = now_s(), t;
  do {
    for (uint32_t k = 0; k < INNER; k++) x = table[x % TABLE_WORDS] ^ (x * 31u + k);
    iterations++;
    t = now_s() - t0;
  } while (t < ms * 1e-3);
  free(table);
  if (x == 0xFFFFFFFFu) printf(" "); /* keeps the chain live */
  return (double)iterations / t;
}

#define PAIR_TRIPS 20000
#define PAIR_SKIP 100 /* round trips before the clock starts */

/* The counter the two threads of a pair increment in turn, alone in its
 * cache line. */
static _Alignas(64) atomic_uint g_turn;

/* The second thread of a pair: pinned to the CPU arg names, answers
 * every odd value with the next even one. */
static void *answerer(void *arg) {
  if (pin((int)(intptr_t)arg) != 0) {
    fprintf(stderr, "cpu_pace: cannot pin to CPU %d\n", (int)(intptr_t)arg);
    exit(1);
  }
  for (unsigned i = 0; i < PAIR_TRIPS; i++) {
    while (atomic_load_explicit(&g_turn, memory_order_acquire) != 2 * i + 1) cpu_pause();
    atomic_store_explicit(&g_turn, 2 * i + 2, memory_order_release);
  }
  return NULL;
}

/* Nanoseconds for a cache line to go from CPU a to CPU b (half a round
 * trip, best of 3 runs). */
static double one_way_ns(int a, int b) {
  double best = 1e30;
  for (int run = 0; run < 3; run++) {
    atomic_store(&g_turn, 0);
    pthread_t t;
    if (pthread_create(&t, NULL, answerer, (void *)(intptr_t)b) != 0) {
      fprintf(stderr, "cpu_pace: cannot start a thread\n");
      exit(1);
    }
    if (pin(a) != 0) {
      fprintf(stderr, "cpu_pace: cannot pin to CPU %d\n", a);
      exit(1);
    }
    double t0 = 0;
    for (unsigned i = 0; i < PAIR_TRIPS; i++) {
      if (i == PAIR_SKIP) t0 = now_s();
      atomic_store_explicit(&g_turn, 2 * i + 1, memory_order_release);
      while (atomic_load_explicit(&g_turn, memory_order_acquire) != 2 * i + 2) cpu_pause();
    }
    double ns = (now_s() - t0) * 1e9 / (PAIR_TRIPS - PAIR_SKIP) / 2;
    pthread_join(t, NULL);
    if (ns < best) best = ns;
  }
  return best;
}

/* --pairs: the matrix of one_way_ns over the CPUs of mask. */
static void pairs(const cpu_set_t *mask) {
  printf("one-way ns of a cache line, row CPU to column CPU (half a round trip, best of 3)\n    ");
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, mask)) printf(" %4d", c);
  printf("\n");
  for (int a = 0; a < CPU_SETSIZE; a++) {
    if (!CPU_ISSET(a, mask)) continue;
    printf("%4d", a);
    for (int b = 0; b < CPU_SETSIZE; b++) {
      if (!CPU_ISSET(b, mask)) continue;
      if (a == b) printf(" %4s", "-");
      else printf(" %4.0f", one_way_ns(a, b));
    }
    printf("\n");
  }
}

static int parse_int(const char *s, int lo, int hi, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

int main(int argc, char **argv) {
  int ms = 150, rounds = 2, against = -1;
  bool want_pairs = false;
  for (int i = 1; i < argc; i++) {
    int *dst = NULL, lo = 1, hi = 100000;
    if (strcmp(argv[i], "--pairs") == 0) {
      want_pairs = true;
      continue;
    }
    if (strcmp(argv[i], "--ms") == 0) dst = &ms;
    else if (strcmp(argv[i], "--rounds") == 0) dst = &rounds, hi = 100;
    else if (strcmp(argv[i], "--against") == 0) dst = &against, lo = 0, hi = CPU_SETSIZE - 1;
    if (!dst || i + 1 >= argc || parse_int(argv[i + 1], lo, hi, dst) != 0) {
      fprintf(stderr, "usage: cpu_pace [--ms N] [--rounds N] [--against CPU] [--pairs]\n");
      return 2;
    }
    i++;
  }
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) {
    fprintf(stderr, "cpu_pace: cannot read the affinity mask\n");
    return 1;
  }
  if (against >= 0 && !CPU_ISSET(against, &mask)) {
    fprintf(stderr, "cpu_pace: CPU %d is not in the affinity mask\n", against);
    return 2;
  }
  if (want_pairs) {
    pairs(&mask);
    return 0;
  }
  printf("cpu   iterations/s, rounds 1..%d (one thread alone, %d ms each)\n", rounds, ms);
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, &mask)) continue;
    printf("%3d", c);
    for (int r = 0; r < rounds; r++) printf(" %10.0f", pace(c, ms));
    printf("\n");
  }
  if (against < 0) return 0;
  printf("\nCPU %d's pace with a poller on another CPU, against CPU %d alone just before / after\n",
         against, against);
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, &mask) || c == against) continue;
    double before = pace(against, ms);
    atomic_store(&g_stop, 0);
    pthread_t t;
    if (pthread_create(&t, NULL, poller, (void *)(intptr_t)c) != 0) {
      fprintf(stderr, "cpu_pace: cannot start the poller\n");
      return 1;
    }
    double with = pace(against, ms);
    atomic_store(&g_stop, 1);
    pthread_join(t, NULL);
    double after = pace(against, ms);
    printf("poller on %3d: %.3f / %.3f\n", c, with / before, with / after);
  }
  return 0;
}
