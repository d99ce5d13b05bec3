/*
 * ring_push.c - what a push onto the op ring costs its producer while the
 * consumer polls the ring, as the scheduler thread does when idle.
 *
 *   build/bench/ring_push [--ops N] [--work N] [--cpus P,C] [--rounds N]
 *
 * A producer pinned to CPU P pushes --ops items (default 1000000), doing
 * --work iterations of private memory work between pushes (default 200,
 * about 150-250 ns: an op's construction), while a consumer pinned to CPU C
 * (default 0,1) polls the ring and pops each item as soon as it is
 * published. Printed per round (--rounds, default 4): the producer's time
 * per push in ns (median of the rounds last), and the time per iteration
 * of its other work, which the cache lines a push moves can slow too.
 *
 * Where concurrencykit's header is installed (libck-dev) the same is timed
 * for its multi-producer ck_ring (the ring the runtime used before),
 * rounds alternating with the runtime's. The clock reads around each push
 * are included (about 20 ns each on current hosts).
 *
 * Linux only (pthread_setaffinity_np). Exit status 2 on bad arguments, 1
 * when a thread cannot be created or pinned.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/ring.h"

#if defined(__has_include)
#if __has_include(<ck_ring.h>)
#include <ck_ring.h>
#define HAVE_CK 1
#endif
#endif
#ifndef HAVE_CK
#define HAVE_CK 0
#endif

#define CAPACITY 4096u

typedef struct run {
  int kind;          /* 0: nxv_ring, 1: ck_ring */
  long ops;          /* items pushed */
  int consumer_cpu;  /* where the consumer runs */
  nxv_ring *ring;    /* kind 0 */
#if HAVE_CK
  struct ck_ring ck;           /* kind 1 */
  ck_ring_buffer_t *ck_slots;  /* kind 1: CAPACITY */
#endif
  atomic_int pinned; /* the consumer's pinning: 1 done, -1 failed */
} run;

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* The consumer: polls until each of the run's items has come out. */
static void *consume(void *arg) {
  run *r = arg;
  atomic_store(&r->pinned, pin(r->consumer_cpu) == 0 ? 1 : -1);
  for (long got = 0; got < r->ops;) {
    void *item = NULL;
    if (r->kind == 0) {
      if (nxv_ring_empty(r->ring)) {
        relax();
        continue;
      }
      item = nxv_ring_pop(r->ring);
    }
#if HAVE_CK
    else if (!ck_ring_dequeue_mpsc(&r->ck, r->ck_slots, &item)) {
      relax();
      continue;
    }
#endif
    if (item) got++;
  }
  return NULL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  long ops = 1000000;
  int work = 200, producer_cpu = 0, consumer_cpu = 1, rounds = 4;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--ops") && i + 1 < argc) ops = atol(argv[++i]);
    else if (!strcmp(argv[i], "--work") && i + 1 < argc) work = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--cpus") && i + 1 < argc) {
      if (sscanf(argv[++i], "%d,%d", &producer_cpu, &consumer_cpu) != 2) ops = 0;
    } else {
      ops = 0;
    }
  }
  if (ops <= 0 || work < 0 || rounds < 1 || rounds > 64 || producer_cpu < 0 ||
      consumer_cpu < 0) {
    fprintf(stderr,
            "usage: ring_push [--ops N] [--work N] [--cpus P,C] [--rounds N]\n");
    return 2;
  }
  if (pin(producer_cpu) != 0) {
    fprintf(stderr, "ring_push: cannot pin the producer to CPU %d\n", producer_cpu);
    return 1;
  }
  uint64_t *priv = calloc(4096, sizeof *priv);
  if (!priv) return 1;
  static const char *const names[2] = {"nxv_ring", "ck_ring"};
  double push[2][64], other[2][64];
  int kinds = HAVE_CK ? 2 : 1;
  printf("ring_push: %ld pushes per round, %d work iterations between pushes, producer CPU "
         "%d, consumer CPU %d\n",
         ops, work, producer_cpu, consumer_cpu);
  for (int round = 0; round < rounds; round++) {
    for (int kind = 0; kind < kinds; kind++) {
      run r = {.kind = kind, .ops = ops, .consumer_cpu = consumer_cpu};
      if (kind == 0 && nxv_ring_create(CAPACITY, &r.ring) != NXV_OK) return 1;
#if HAVE_CK
      if (kind == 1) {
        r.ck_slots = calloc(CAPACITY, sizeof *r.ck_slots);
        if (!r.ck_slots) return 1;
        ck_ring_init(&r.ck, CAPACITY);
      }
#endif
      pthread_t th;
      if (pthread_create(&th, NULL, consume, &r) != 0) return 1;
      while (atomic_load(&r.pinned) == 0) relax();
      if (atomic_load(&r.pinned) < 0) {
        fprintf(stderr, "ring_push: cannot pin the consumer to CPU %d\n", consumer_cpu);
        return 1;
      }
      uint64_t t_push = 0, t_work = 0;
      for (long i = 1; i <= ops; i++) {
        uint64_t t0 = now_ns();
        for (int w = 0; w < work; w++) priv[((uint64_t)i * 7u + (uint64_t)w) & 4095u] += (uint64_t)w;
        uint64_t t1 = now_ns();
        void *item = (void *)(uintptr_t)i;
        bool ok;
        do {
          ok = kind == 0 ? nxv_ring_push(r.ring, item) : false;
#if HAVE_CK
          if (kind == 1) ok = ck_ring_enqueue_mpsc(&r.ck, r.ck_slots, item);
#endif
        } while (!ok);
        uint64_t t2 = now_ns();
        t_work += t1 - t0;
        t_push += t2 - t1;
      }
      pthread_join(th, NULL);
      push[kind][round] = (double)t_push / (double)ops;
      other[kind][round] = (double)t_work / (double)ops;
      printf("round %d  %-8s  push %7.1f ns  other work %7.1f ns\n", round + 1, names[kind],
             push[kind][round], other[kind][round]);
      if (kind == 0) nxv_ring_destroy(r.ring);
#if HAVE_CK
      if (kind == 1) free(r.ck_slots);
#endif
    }
  }
  for (int kind = 0; kind < kinds; kind++) {
    qsort(push[kind], (size_t)rounds, sizeof(double), cmp_double);
    qsort(other[kind], (size_t)rounds, sizeof(double), cmp_double);
    printf("median    %-8s  push %7.1f ns  other work %7.1f ns\n", names[kind],
           push[kind][rounds / 2], other[kind][rounds / 2]);
  }
  free(priv);
  return 0;
}
