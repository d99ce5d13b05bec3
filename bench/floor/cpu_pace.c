/*
 * cpu_pace.c - how fast the host's CPUs run a single thread, and whether a
 * thread that busy-polls on another CPU slows it.
 *
 *   build/bench/cpu_pace [--ms N] [--rounds N] [--against CPU]
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
 *
 * Linux only (sched_setaffinity). Exit status 2 on bad arguments, 1 when
 * a thread cannot be created or pinned.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
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

static int parse_int(const char *s, int lo, int hi, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

int main(int argc, char **argv) {
  int ms = 150, rounds = 2, against = -1;
  for (int i = 1; i < argc; i++) {
    int *dst = NULL, lo = 1, hi = 100000;
    if (strcmp(argv[i], "--ms") == 0) dst = &ms;
    else if (strcmp(argv[i], "--rounds") == 0) dst = &rounds, hi = 100;
    else if (strcmp(argv[i], "--against") == 0) dst = &against, lo = 0, hi = CPU_SETSIZE - 1;
    if (!dst || i + 1 >= argc || parse_int(argv[i + 1], lo, hi, dst) != 0) {
      fprintf(stderr, "usage: cpu_pace [--ms N] [--rounds N] [--against CPU]\n");
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
