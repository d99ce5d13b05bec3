/*
 * Runtime tests: the ring, the scheduler (batching, barriers, async), many
 * producer threads, the pool, staging, the pipeline cache file, sticky
 * errors and shutdown with work in flight.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sched/histogram.h"
#include "sched/ring.h"
#include "sched/scheduler.h"
#include "test.h"

extern char **environ;

static nxv_device *open_with(const nxv_device_config *cfg) {
  nxv_device *d = NULL;
  if (nxv_device_open(-1, cfg, &d) != NXV_OK) {
    fprintf(stderr, "  cannot open a Vulkan device: %s\n", nxv_last_error());
    return NULL;
  }
  return d;
}

/* The configuration of a context whose batches go to the GPU only when a
 * download, synchronize or marker flushes them (no kick, no idle flush
 * within the tests' time), so that a test sees what one batch records. */
static nxv_device_config one_batch_config(void) {
  return (nxv_device_config){.disable_disk_cache = true, .kick_nodes = 1000,
                             .idle_flush_us = 10000000};
}

static nxv_tensor *upload_s32(nxv_device *d, const int32_t *v, uint64_t n) {
  nxv_tensor *t = NULL;
  if (nxv_tensor_upload(d, NXV_S32, n, v, &t) != NXV_OK) return NULL;
  return t;
}

/* x + y over n contiguous s32 elements. */
static nxv_status add_s32(nxv_device *d, nxv_tensor *x, nxv_tensor *y,
                          uint64_t n, nxv_tensor **out) {
  int64_t shape[1] = {(int64_t)n};
  nxv_view vx = {x, 0, NULL}, vy = {y, 0, NULL};
  return nxv_binary(d, NXV_ADD, 1, shape, &vx, &vy, out);
}

/* ------------------------------------------------------------------ */
/* Ring                                                                */
/* ------------------------------------------------------------------ */

/* Three producers and the consumer: more threads than the CI machine's two
 * cores, so pushes are preempted mid-way, between claiming a place and
 * publishing it too (the consumer then waits for that place). */
#define RING_PRODUCERS 3
#define RING_ITEMS 50000

typedef struct ring_ctx {
  nxv_ring *ring;
  uintptr_t id;
} ring_ctx;

static void *ring_producer(void *arg) {
  ring_ctx *c = arg;
  for (uintptr_t i = 1; i <= RING_ITEMS; i++) {
    void *item = (void *)((c->id << 32) | i);
    while (!nxv_ring_push(c->ring, item)) sched_yield();
  }
  return NULL;
}

NXV_TEST(ring, mpsc_no_loss_no_reorder) {
  nxv_ring *ring;
  REQUIRE_OK(nxv_ring_create(64, &ring));
  CHECK(nxv_ring_pop(ring) == NULL);
  pthread_t th[RING_PRODUCERS];
  ring_ctx ctx[RING_PRODUCERS];
  for (int p = 0; p < RING_PRODUCERS; p++) {
    ctx[p] = (ring_ctx){ring, (uintptr_t)p + 1};
    pthread_create(&th[p], NULL, ring_producer, &ctx[p]);
  }
  uintptr_t last[RING_PRODUCERS + 1] = {0};
  uint64_t got = 0, bad = 0;
  while (got < (uint64_t)RING_PRODUCERS * RING_ITEMS) {
    void *item = nxv_ring_pop(ring);
    if (!item) {
      sched_yield();
      continue;
    }
    uintptr_t v = (uintptr_t)item, id = v >> 32, seq = v & 0xFFFFFFFFu;
    if (id < 1 || id > RING_PRODUCERS || seq != last[id] + 1) bad++;
    else last[id] = seq;
    got++;
  }
  for (int p = 0; p < RING_PRODUCERS; p++) pthread_join(th[p], NULL);
  CHECK(bad == 0);
  CHECK(nxv_ring_pop(ring) == NULL);
  for (int p = 1; p <= RING_PRODUCERS; p++) CHECK(last[p] == RING_ITEMS);
  nxv_ring_destroy(ring);
}

NXV_TEST(ring, rejects_bad_capacity) {
  nxv_ring *ring = (nxv_ring *)0x1;
  CHECK(nxv_ring_create(100, &ring) == NXV_ERR_INVALID_ARGUMENT);
  CHECK(nxv_ring_create(2, &ring) == NXV_ERR_INVALID_ARGUMENT);
  CHECK(ring == (nxv_ring *)0x1);
  CHECK(strlen(nxv_last_error()) > 0);
}

/* ------------------------------------------------------------------ */
/* Nodes                                                               */
/* ------------------------------------------------------------------ */

/* Every byte a release leaves alone set: the header, the copy, fill and
 * staging fields (their owners' flags clear), push constants and argument
 * words. */
static void dirty_node(nxv_node *n) {
  uint32_t words = n->args_words;
  n->kind = NXV_NODE_COPY;
  n->flags = 0xff;
  n->write_mask = 0xffff;
  n->pc_size = 0xabcd;
  n->args_pc_offset = 0xabcd;
  n->groups[0] = n->groups[1] = n->groups[2] = 7;
  n->cost = ~0ull;
  n->pipeline = (VkPipeline)(uintptr_t)0x1234;
  n->enqueue_ns = ~0ull;
  n->src = n->dst = (VkBuffer)(uintptr_t)0x5678;
  n->src_offset = n->dst_offset = n->bytes = ~0ull;
  n->fill_pattern = ~0u;
  memset(&n->staging, 0xab, sizeof n->staging);
  memset(&n->arena, 0xab, sizeof n->arena);
  memset(n->pc, 0xab, sizeof n->pc);
  memset(n->args, 0xcd, (size_t)words * sizeof(uint32_t));
}

/* Whether n is zero but for its argument-word count (which is words). */
static bool node_is_fresh(const nxv_node *n, uint32_t words) {
  const unsigned char *b = (const unsigned char *)n;
  size_t size = sizeof(nxv_node) + (size_t)words * sizeof(uint32_t);
  size_t at = offsetof(nxv_node, args_words);
  for (size_t i = 0; i < size; i++)
    if ((i < at || i >= at + sizeof n->args_words) && b[i]) return false;
  return n->args_words == words;
}

NXV_TEST(sched, nodes_come_zeroed_after_reuse) {
  /* Retirement zeroes the nodes it gives back to the node cache, and
   * nxv_node_new writes nothing but the argument count: nodes handed out
   * after dirty ones went back, of as many or fewer argument words, must
   * be zero in every field, push constant and argument word. */
  enum { NODES = 16, WORDS = 32 };
  nxv_node *n[NODES];
  for (int round = 0; round < 3; round++) {
    uint32_t words = round == 0 ? WORDS : round == 1 ? 0 : 5;
    for (int i = 0; i < NODES; i++) {
      n[i] = nxv_node_new(WORDS);
      CHECK(n[i] != NULL);
      CHECK(((uintptr_t)n[i] & 63u) == 0);
      dirty_node(n[i]);
    }
    for (int i = 0; i < NODES; i++) nxv_node_discard(n[i]);
    for (int i = 0; i < NODES; i++) {
      n[i] = nxv_node_new(words);
      CHECK(n[i] != NULL);
      CHECK_MSG(node_is_fresh(n[i], words),
                "round %d node %d: a byte left over from its last use", round, i);
    }
    /* Argument words beyond the count asked for are zero too: the next
     * user of the node may ask for more. */
    for (int i = 0; i < NODES; i++) {
      const uint32_t *a = n[i]->args;
      for (uint32_t w = words; w < WORDS; w++)
        CHECK_MSG(a[w] == 0, "round %d node %d: argument word %u left over", round, i, w);
    }
    for (int i = 0; i < NODES; i++) nxv_node_discard(n[i]);
  }
}

/* ------------------------------------------------------------------ */
/* Devices                                                             */
/* ------------------------------------------------------------------ */

NXV_TEST(device, enumerate_and_describe) {
  uint32_t n = 0, def = 99;
  REQUIRE_OK(nxv_device_count(&n));
  REQUIRE(n >= 1);
  REQUIRE_OK(nxv_device_default_index(&def));
  CHECK(def < n);
  for (uint32_t i = 0; i < n; i++) {
    nxv_device_info info;
    CHECK_OK(nxv_device_query(i, &info));
    CHECK(info.index == i);
    CHECK(strlen(info.name) > 0);
  }
  nxv_device_info info;
  CHECK(nxv_device_query(n, &info) == NXV_ERR_NO_DEVICE);
  nxv_device *d = test_open_device();
  REQUIRE(d);
  REQUIRE_OK(nxv_device_info_get(d, &info));
  CHECK(info.timeline_semaphore);
  CHECK(info.buffer_device_address);
  CHECK(info.usable);
  CHECK(info.max_push_constants_size >= 128);
  CHECK(info.max_storage_buffer_range > 0);
  CHECK(info.subgroup_size >= 1);
  CHECK(info.max_workgroup_count[0] >= 1);
  fprintf(stderr, "  device %u: %s (%s %s), subgroup %u, f64 %d i64 %d i16 %d "
          "i8 %d f16 %d coopmat %d (f16 %d, bf16 %d, KHR %d) compute-only queue %d\n",
          info.index, info.name, info.driver_name, info.driver_info,
          info.subgroup_size, info.float64, info.int64, info.int16, info.int8,
          info.float16, info.cooperative_matrix, info.coopmat_f16, info.coopmat_bf16, info.coopmat_khr,
          info.compute_only_queue);
  nxv_device_release(d);
}

NXV_TEST(device, env_selection) {
  const char *old = getenv("NX_VULKAN_DEVICE");
  char saved[64] = "";
  if (old) snprintf(saved, sizeof saved, "%s", old);
  uint32_t idx = 77;
  setenv("NX_VULKAN_DEVICE", "banana", 1);
  CHECK(nxv_device_default_index(&idx) == NXV_ERR_INVALID_ARGUMENT);
  CHECK(strstr(nxv_last_error(), "NX_VULKAN_DEVICE") != NULL);
  setenv("NX_VULKAN_DEVICE", "4096", 1);
  CHECK(nxv_device_default_index(&idx) == NXV_ERR_NO_DEVICE);
  nxv_device *d = NULL;
  CHECK(nxv_device_open(-1, NULL, &d) == NXV_ERR_NO_DEVICE);
  CHECK(d == NULL);
  setenv("NX_VULKAN_DEVICE", "0", 1);
  CHECK_OK(nxv_device_default_index(&idx));
  CHECK(idx == 0);
  if (old) setenv("NX_VULKAN_DEVICE", saved, 1);
  else unsetenv("NX_VULKAN_DEVICE");
  CHECK(nxv_device_open(4096, NULL, &d) == NXV_ERR_NO_DEVICE);
  nxv_device_config bad = {.ring_capacity = 1000};
  CHECK(nxv_device_open(-1, &bad, &d) == NXV_ERR_INVALID_ARGUMENT);
  CHECK(d == NULL);
}

/* ------------------------------------------------------------------ */
/* Scheduler                                                           */
/* ------------------------------------------------------------------ */

NXV_TEST(sched, barriers_only_between_dependent_nodes) {
  nxv_device_config cfg = {.disable_disk_cache = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  enum { N = 64, OPS = 100 };
  int32_t a[N], b[N];
  for (int i = 0; i < N; i++) a[i] = i, b[i] = 1000 * i;
  nxv_tensor *ta = upload_s32(d, a, N), *tb = upload_s32(d, b, N);
  REQUIRE(ta && tb);
  REQUIRE_OK(nxv_device_synchronize(d));
  nxv_stats s0, s1, s2;
  REQUIRE_OK(nxv_device_stats(d, &s0));
  nxv_tensor *outs[OPS];
  for (int i = 0; i < OPS; i++) REQUIRE_OK(add_s32(d, ta, tb, N, &outs[i]));
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_stats(d, &s1));
  /* The inputs were written by an earlier, already barriered interval at
   * most once; independent adds need no barrier between them. (Where the
   * scheduler idles between batches, which a loaded machine makes it do,
   * it may record barriers ahead of the next batch: not theirs.) */
  uint64_t own = (s1.barriers - s0.barriers) - (s1.barriers_ahead - s0.barriers_ahead);
  CHECK_MSG(own <= 1, "%llu barriers for independent ops", (unsigned long long)own);
  nxv_tensor *x = ta;
  nxv_tensor_retain(x);
  for (int i = 0; i < OPS; i++) {
    nxv_tensor *y;
    REQUIRE_OK(add_s32(d, x, tb, N, &y));
    nxv_tensor_release(x);
    x = y;
  }
  int32_t got[N];
  REQUIRE_OK(nxv_tensor_download(x, 0, N, got));
  REQUIRE_OK(nxv_device_stats(d, &s2));
  CHECK_MSG(s2.barriers - s1.barriers >= OPS - 1,
            "%llu barriers for a chain of %d dependent ops",
            (unsigned long long)(s2.barriers - s1.barriers), OPS);
  for (int i = 0; i < N; i++) CHECK(got[i] == a[i] + OPS * b[i]);
  for (int i = 0; i < OPS; i++) {
    int32_t v[N];
    memset(v, 0x5a, sizeof v);
    CHECK_OK(nxv_tensor_download(outs[i], 0, N, v));
    for (int j = 0; j < N; j++) CHECK(v[j] == a[j] + b[j]);
    nxv_tensor_release(outs[i]);
  }
  CHECK(s2.submits > s0.submits);
  CHECK(s2.epoch_completed >= s1.epoch_submitted);
  nxv_tensor_release(x);
  nxv_tensor_release(ta);
  nxv_tensor_release(tb);
  nxv_device_release(d);
}

/* CHAINS chains of DEPTH dependent adds, queued chain after chain:
 * chain c computes a_c + DEPTH * b. With the reordering window the
 * scheduler records the chains level by level (a barrier per level);
 * queued in order it needs one per op after the first of each chain. */
static void interleaved_chains(nxv_device *d, uint64_t *out_barriers,
                               uint64_t *out_reordered) {
  enum { N = 37, CHAINS = 8, DEPTH = 4 };
  int32_t a[CHAINS][N], b[N];
  for (int j = 0; j < N; j++) b[j] = 3 * j - 50;
  nxv_tensor *ta[CHAINS], *tb = upload_s32(d, b, N), *res[CHAINS];
  REQUIRE(tb);
  for (int c = 0; c < CHAINS; c++) {
    for (int j = 0; j < N; j++) a[c][j] = 1000 * c + j;
    REQUIRE((ta[c] = upload_s32(d, a[c], N)));
  }
  REQUIRE_OK(nxv_device_synchronize(d));
  nxv_stats s0, s1;
  REQUIRE_OK(nxv_device_stats(d, &s0));
  for (int c = 0; c < CHAINS; c++) {
    nxv_tensor *x = ta[c];
    nxv_tensor_retain(x);
    for (int k = 0; k < DEPTH; k++) {
      nxv_tensor *y;
      REQUIRE_OK(add_s32(d, x, tb, N, &y));
      nxv_tensor_release(x);
      x = y;
    }
    res[c] = x;
  }
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_stats(d, &s1));
  for (int c = 0; c < CHAINS; c++) {
    int32_t got[N];
    memset(got, 0x5a, sizeof got);
    CHECK_OK(nxv_tensor_download(res[c], 0, N, got));
    for (int j = 0; j < N; j++)
      CHECK_MSG(got[j] == a[c][j] + DEPTH * b[j], "chain %d [%d]: %d", c, j, got[j]);
    nxv_tensor_release(res[c]);
    nxv_tensor_release(ta[c]);
  }
  nxv_tensor_release(tb);
  *out_barriers = s1.barriers - s0.barriers;
  *out_reordered = s1.ops_reordered - s0.ops_reordered;
}

NXV_TEST(sched, reorder_window_records_independent_chains_level_by_level) {
  /* One batch: submitted by the synchronize only. */
  nxv_device_config on = one_batch_config();
  nxv_device_config off = on;
  off.reorder_window = -1;
  nxv_device *d = open_with(&on), *e = open_with(&off);
  REQUIRE(d && e);
  uint64_t bar_on, re_on, bar_off, re_off;
  interleaved_chains(d, &bar_on, &re_on);
  interleaved_chains(e, &bar_off, &re_off);
  /* 8 chains of 4: one barrier per level (4: the first level reads the
   * uploads, written since the last barrier); in order, 3 more per
   * chain. */
  CHECK_MSG(bar_on <= 4, "%llu barriers with the window",
            (unsigned long long)bar_on);
  CHECK_MSG(bar_off >= 8 * 3, "%llu barriers in queue order",
            (unsigned long long)bar_off);
  CHECK_MSG(re_on >= 7, "%llu ops reordered", (unsigned long long)re_on);
  CHECK(re_off == 0);
  nxv_device_release(d);
  nxv_device_release(e);
}

/* Overwrites of an existing tensor (copy_into) stay after the reads
 * queued before them. Every input is first put behind a barrier; then
 * each round reads its dst with an op that must wait for a barrier (it
 * also reads a result just queued) and overwrites dst with a copy that
 * needs no barrier of its own: only the read it must not overtake holds
 * it back. */
NXV_TEST(sched, reorder_window_keeps_reads_and_overwrites_in_order) {
  enum { N = 29, ROUNDS = 12 };
  for (int32_t window = 2; window <= 32; window *= 4) {
    nxv_device_config cfg = one_batch_config();
    cfg.reorder_window = window;
    nxv_device *d = open_with(&cfg);
    REQUIRE(d);
    int32_t b[N], v[N], zero = 0;
    for (int j = 0; j < N; j++) b[j] = j + 1;
    nxv_tensor *tb = upload_s32(d, b, N), *dst[ROUNDS], *src[ROUNDS], *t[ROUNDS], *u;
    REQUIRE(tb);
    for (int r = 0; r < ROUNDS; r++) {
      for (int j = 0; j < N; j++) v[j] = (r + 1) * b[j];
      REQUIRE((src[r] = upload_s32(d, v, N)));
      REQUIRE_OK(nxv_fill(d, NXV_S32, N, &zero, &dst[r]));
    }
    REQUIRE_OK(nxv_device_synchronize(d));
    /* Two dependent levels: a barrier after the uploads, then one after
     * the reads of dst, so the rounds' copies need none. */
    for (int r = 0; r < ROUNDS; r++) REQUIRE_OK(add_s32(d, dst[r], src[r], N, &t[r]));
    REQUIRE_OK(nxv_device_synchronize(d));
    REQUIRE_OK(add_s32(d, t[0], tb, N, &u));
    REQUIRE_OK(nxv_device_synchronize(d));
    nxv_stats s0, s1;
    REQUIRE_OK(nxv_device_stats(d, &s0));
    nxv_tensor *y[ROUNDS], *seen[ROUNDS];
    int64_t shape[1] = {N}, strides[1] = {1};
    for (int r = 0; r < ROUNDS; r++) {
      /* y = (r + 2) b */
      REQUIRE_OK(add_s32(d, src[r], tb, N, &y[r]));
      /* dst (zero) + y: waits for a barrier after y */
      REQUIRE_OK(add_s32(d, dst[r], y[r], N, &seen[r]));
      /* dst = (r + 1) b, after the read above */
      nxv_view sv = {src[r], 0, NULL};
      REQUIRE_OK(nxv_copy_into(d, dst[r], 0, strides, 1, shape, &sv));
    }
    REQUIRE_OK(nxv_device_synchronize(d));
    REQUIRE_OK(nxv_device_stats(d, &s1));
    int32_t got[N];
    for (int r = 0; r < ROUNDS; r++) {
      memset(got, 0x5a, sizeof got);
      CHECK_OK(nxv_tensor_download(seen[r], 0, N, got));
      for (int j = 0; j < N; j++)
        CHECK_MSG(got[j] == (r + 2) * b[j], "window %d, round %d [%d]: %d b", window, r,
                  j, got[j] / b[j]);
      memset(got, 0x5a, sizeof got);
      CHECK_OK(nxv_tensor_download(dst[r], 0, N, got));
      for (int j = 0; j < N; j++) CHECK(got[j] == (r + 1) * b[j]);
      nxv_tensor_release(seen[r]);
      nxv_tensor_release(y[r]);
      nxv_tensor_release(src[r]);
      nxv_tensor_release(dst[r]);
      nxv_tensor_release(t[r]);
    }
    CHECK_MSG(s1.ops_reordered > s0.ops_reordered, "window %d: nothing reordered", window);
    nxv_tensor_release(u);
    nxv_tensor_release(tb);
    nxv_device_release(d);
  }
}

/* With the GPU done with everything submitted, the first op of a batch
 * that needs a barrier is recorded at once rather than held: the op
 * queued after it goes after it (nothing reordered). z reads y, written
 * in the batch before with no barrier since; w needs no barrier. The
 * scheduler idles 1 us, so it sleeps before the GPU finishes and records
 * no barrier ahead of z (see
 * idle_scheduler_records_the_next_batchs_barrier_ahead); should it have,
 * z needs no barrier of its own. */
NXV_TEST(sched, reorder_window_records_a_batchs_first_op_at_once_when_the_gpu_is_idle) {
  enum { N = 19 };
  nxv_device_config cfg = one_batch_config();
  cfg.idle_spin_us = 1;
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  int32_t a[N], b[N];
  for (int j = 0; j < N; j++) {
    a[j] = 7 * j - 40;
    b[j] = 1000 + j;
  }
  nxv_tensor *tx = upload_s32(d, a, N), *tb = upload_s32(d, b, N), *y, *z, *w;
  REQUIRE(tx && tb);
  REQUIRE_OK(add_s32(d, tx, tb, N, &y));
  nxv_stats sp, s0, s1;
  REQUIRE_OK(nxv_device_stats(d, &sp));
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_stats(d, &s0));
  REQUIRE_OK(add_s32(d, y, tb, N, &z));
  REQUIRE_OK(add_s32(d, tx, tb, N, &w));
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_stats(d, &s1));
  int32_t gz[N], gw[N];
  memset(gz, 0x5a, sizeof gz);
  memset(gw, 0x5a, sizeof gw);
  CHECK_OK(nxv_tensor_download(z, 0, N, gz));
  CHECK_OK(nxv_tensor_download(w, 0, N, gw));
  for (int j = 0; j < N; j++) {
    CHECK_MSG(gz[j] == a[j] + 2 * b[j], "z[%d] = %d", j, gz[j]);
    CHECK_MSG(gw[j] == a[j] + b[j], "w[%d] = %d", j, gw[j]);
  }
  CHECK_MSG(s1.ops_reordered == s0.ops_reordered, "%llu ops reordered",
            (unsigned long long)(s1.ops_reordered - s0.ops_reordered));
  if (s1.barriers_ahead == sp.barriers_ahead)
    CHECK_MSG(s1.barriers - s0.barriers == 1, "%llu barriers",
              (unsigned long long)(s1.barriers - s0.barriers));
  else
    CHECK_MSG(s1.barriers - s0.barriers <= 1, "%llu barriers",
              (unsigned long long)(s1.barriers - s0.barriers));
  nxv_tensor_release(w);
  nxv_tensor_release(z);
  nxv_tensor_release(y);
  nxv_tensor_release(tb);
  nxv_tensor_release(tx);
  nxv_device_release(d);
}

/* Waits up to ms milliseconds for the counter of d's stats at offset (a
 * uint64_t field of nxv_stats) to reach n; whether it is then exactly n. */
static bool wait_stat(nxv_device *d, size_t offset, uint64_t n, int ms) {
  for (int i = 0; i < ms; i++) {
    nxv_stats st;
    if (nxv_device_stats(d, &st) != NXV_OK) return false;
    uint64_t v;
    memcpy(&v, (const char *)&st + offset, sizeof v);
    if (v >= n) return v == n;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return false;
}

/* d's stats once its barrier counters have held still for 5 ms (up to 1
 * s): the scheduler counts a barrier recorded ahead in two steps (the
 * barrier, then that it was ahead), so a snapshot taken as it records one
 * can hold the first count without the second. */
static nxv_status settled_stats(nxv_device *d, nxv_stats *out) {
  nxv_status st = nxv_device_stats(d, out);
  for (int i = 0; i < 200 && st == NXV_OK; i++) {
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
    nxv_stats now;
    if ((st = nxv_device_stats(d, &now)) != NXV_OK) break;
    bool still = now.barriers == out->barriers && now.barriers_ahead == out->barriers_ahead;
    *out = now;
    if (still) break;
  }
  return st;
}

/* The same with a batch still in flight (the GPU stopped: a hang is
 * injected into the submission before): the first op that needs a barrier
 * is held, and the op after it, which needs none, is recorded ahead of
 * it. The hung batch goes as soon as it holds its one op (kick_nodes 1,
 * nothing in flight), so nothing records a barrier after that op: a
 * download's flush would on devices whose downloads copy, and the op
 * reading its result would then need none. Batches are kicked only on an
 * idle GPU (kick_inflight 1), so the later ops stay in the open batch. */
NXV_TEST(sched, reorder_window_holds_a_batchs_first_op_while_the_gpu_is_busy) {
  enum { N = 19 };
  nxv_device_config cfg = one_batch_config();
  cfg.kick_nodes = 1;
  cfg.kick_inflight = 1;
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  int32_t a[N];
  for (int j = 0; j < N; j++) a[j] = 5 * j - 30;
  nxv_tensor *tx = upload_s32(d, a, N), *y, *q, *z, *w;
  REQUIRE(tx);
  REQUIRE_OK(add_s32(d, tx, tx, N, &y));
  REQUIRE_OK(nxv_device_synchronize(d));
  /* q's batch never completes. */
  nxv_device_inject_hang(d);
  nxv_stats s0, s1;
  REQUIRE_OK(nxv_device_stats(d, &s0));
  REQUIRE_OK(add_s32(d, tx, tx, N, &q));
  REQUIRE(wait_stat(d, offsetof(nxv_stats, submits), s0.submits + 1, 10000));
  REQUIRE_OK(nxv_device_stats(d, &s0));
  REQUIRE_OK(add_s32(d, q, tx, N, &z)); /* reads q: needs a barrier */
  REQUIRE_OK(add_s32(d, tx, tx, N, &w)); /* needs none */
  /* Wait (up to 10 s) for the scheduler to record w ahead of z. */
  CHECK_MSG(wait_stat(d, offsetof(nxv_stats, ops_reordered), s0.ops_reordered + 1, 10000),
            "w was not recorded ahead of z");
  REQUIRE_OK(nxv_device_stats(d, &s1));
  CHECK_MSG(s1.submits == s0.submits, "%llu submissions while the GPU was busy",
            (unsigned long long)(s1.submits - s0.submits));
  nxv_tensor_release(w);
  nxv_tensor_release(z);
  nxv_tensor_release(q);
  nxv_tensor_release(y);
  nxv_tensor_release(tx);
  nxv_device_release(d); /* ends the hang */
}

/* After a batch ending with a host read (a download), while the
 * scheduler idles with the next batch empty and the GPU has completed
 * everything submitted, the scheduler records the barrier that batch's
 * first op would need, once: then z, which reads y (written in the batch
 * before), and w record no barrier of their own, nothing is reordered,
 * and both read what they should. After a batch without a host read none
 * is recorded. (Poisoned outputs would put a fill, and a barrier, before
 * each op.) */
NXV_TEST(sched, idle_scheduler_records_the_next_batchs_barrier_ahead) {
  enum { N = 23, BIG = 4096 };
  nxv_device_config cfg = one_batch_config();
  cfg.idle_spin_us = 10000000;
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  int32_t a[N], b[N];
  for (int j = 0; j < N; j++) {
    a[j] = 11 * j - 90;
    b[j] = 300 - 7 * j;
  }
  nxv_tensor *tx = upload_s32(d, a, N), *tb = upload_s32(d, b, N), *y, *z, *w;
  REQUIRE(tx && tb);
  REQUIRE_OK(add_s32(d, tx, tb, N, &y));
  int32_t gy[N];
  memset(gy, 0x5a, sizeof gy);
  REQUIRE_OK(nxv_tensor_download(y, 0, N, gy));
  for (int j = 0; j < N; j++) CHECK(gy[j] == a[j] + b[j]);
  CHECK_MSG(wait_stat(d, offsetof(nxv_stats, barriers_ahead), 1, 10000),
            "no single barrier ahead after the download");
  nxv_stats s0, s1;
  REQUIRE_OK(nxv_device_stats(d, &s0));
  REQUIRE_OK(add_s32(d, y, tb, N, &z));
  REQUIRE_OK(add_s32(d, tx, tb, N, &w));
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(settled_stats(d, &s1));
  /* Any barrier since s0 is one recorded ahead (of the batch after). */
  CHECK_MSG(s1.barriers - s0.barriers == s1.barriers_ahead - s0.barriers_ahead,
            "%llu barriers, %llu of them ahead", (unsigned long long)(s1.barriers - s0.barriers),
            (unsigned long long)(s1.barriers_ahead - s0.barriers_ahead));
  CHECK(s1.ops_reordered == s0.ops_reordered);
  int32_t gz[N], gw[N];
  CHECK_OK(nxv_tensor_download(z, 0, N, gz));
  CHECK_OK(nxv_tensor_download(w, 0, N, gw));
  for (int j = 0; j < N; j++) {
    CHECK_MSG(gz[j] == a[j] + 2 * b[j], "z[%d] = %d", j, gz[j]);
    CHECK_MSG(gw[j] == a[j] + b[j], "w[%d] = %d", j, gw[j]);
  }
  /* A batch that only writes device memory the host does not wait for:
   * 50 ms later still no barrier ahead of the next. */
  int32_t *big = malloc(sizeof(int32_t) * BIG);
  REQUIRE(big);
  for (int j = 0; j < BIG; j++) big[j] = j - 2000;
  nxv_tensor *tbig = upload_s32(d, big, BIG), *sum;
  REQUIRE(tbig);
  REQUIRE_OK(nxv_device_synchronize(d));
  nxv_stats s2, s3;
  REQUIRE_OK(nxv_device_stats(d, &s2));
  REQUIRE_OK(add_s32(d, tbig, tbig, BIG, &sum));
  REQUIRE_OK(nxv_device_synchronize(d));
  struct timespec ts = {0, 50000000};
  nanosleep(&ts, NULL);
  REQUIRE_OK(nxv_device_stats(d, &s3));
  CHECK_MSG(s3.barriers_ahead == s2.barriers_ahead, "%llu barriers ahead after a batch "
            "the host did not read", (unsigned long long)(s3.barriers_ahead - s2.barriers_ahead));
  int32_t got[4];
  CHECK_OK(nxv_tensor_download(sum, BIG - 4, 4, got));
  for (int j = 0; j < 4; j++) CHECK(got[j] == 2 * big[BIG - 4 + j]);
  free(big);
  nxv_tensor_release(sum);
  nxv_tensor_release(tbig);
  nxv_tensor_release(w);
  nxv_tensor_release(z);
  nxv_tensor_release(y);
  nxv_tensor_release(tb);
  nxv_tensor_release(tx);
  nxv_device_release(d);
}

/* Queues x + y (n s32 elements) into *out (NULL on failure) and says
 * whether d then submitted nothing for 50 ms. */
static bool add_waits(nxv_device *d, nxv_tensor *x, nxv_tensor *y, uint64_t n,
                      nxv_tensor **out) {
  nxv_stats s0, st;
  *out = NULL;
  if (nxv_device_stats(d, &s0) != NXV_OK || add_s32(d, x, y, n, out) != NXV_OK) return false;
  struct timespec ts = {0, 50000000};
  nanosleep(&ts, NULL);
  return nxv_device_stats(d, &st) == NXV_OK && st.submits == s0.submits &&
         st.round_trip_submits == s0.round_trip_submits;
}

/* Checks that t's n elements (at most 256) are times those of a. */
static void check_times(nxv_tensor *t, const int32_t *a, uint64_t n, int32_t times,
                        const char *what) {
  int32_t got[256];
  memset(got, 0x5a, sizeof got);
  CHECK_OK(nxv_tensor_download(t, 0, n, got));
  for (uint64_t j = 0; j < n; j++)
    CHECK_MSG(got[j] == times * a[j], "%s[%llu] = %d, expected %d", what,
              (unsigned long long)j, got[j], times * a[j]);
}

/* The first op after a download read in place that followed a single op,
 * alone in its batch and writing a small mapped result, is submitted as
 * soon as it is recorded, with the GPU idle and nothing more queued (no
 * flush, kick or idle flush would submit it: one_batch_config), and its
 * download then reads in place. Not after a read that followed two ops,
 * not for a second op since the read, not after a download that copied,
 * not for an op whose result is not mapped, and not while a batch is in
 * flight. */
NXV_TEST(sched, round_trip_op_is_submitted_before_its_download) {
  enum { N = 8, BIG = 256 }; /* 32 bytes: read in place; 1 KiB: copied */
  nxv_device_config cfg = one_batch_config();
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  int32_t a[BIG];
  for (int j = 0; j < BIG; j++) a[j] = 13 * j - 700;
  nxv_tensor *tx = upload_s32(d, a, N), *tbig = upload_s32(d, a, BIG);
  REQUIRE(tx && tbig);
  nxv_tensor *y, *z, *z2, *w, *big, *u, *v, *big2, *r, *q, *q2;
  nxv_stats s0, s1;
  /* y's read follows two ops (tbig's upload, a copy, and y): z waits. */
  REQUIRE_OK(add_s32(d, tx, tx, N, &y));
  check_times(y, a, N, 2, "y");
  CHECK_MSG(add_waits(d, y, tx, N, &z), "submitted after a read that followed two ops");
  REQUIRE(z);
  check_times(z, a, N, 3, "z");
  /* z's read follows one op: z2, a round trip's op, goes alone, before
   * its download. */
  REQUIRE_OK(nxv_device_stats(d, &s0));
  REQUIRE_OK(add_s32(d, z, tx, N, &z2));
  CHECK_MSG(wait_stat(d, offsetof(nxv_stats, round_trip_submits), s0.round_trip_submits + 1,
                      5000),
            "the op after a read in place was not submitted by itself");
  check_times(z2, a, N, 4, "z2");
  REQUIRE_OK(nxv_device_stats(d, &s1));
  CHECK_MSG(s1.reads_in_place == s0.reads_in_place + 1,
            "z2's download did not find z2 submitted (%llu reads in place)",
            (unsigned long long)(s1.reads_in_place - s0.reads_in_place));
  /* A second op since the read waits (big, not mapped, went first). */
  REQUIRE_OK(add_s32(d, tbig, tbig, BIG, &big));
  REQUIRE_OK(nxv_device_synchronize(d));
  CHECK_MSG(add_waits(d, tx, tx, N, &w), "submitted a second op since the read");
  REQUIRE(w);
  check_times(w, a, N, 2, "w");
  /* After a download that copied, the op waits (u's read comes first). */
  REQUIRE_OK(add_s32(d, tx, tx, N, &u));
  check_times(u, a, N, 2, "u");
  check_times(big, a, BIG, 2, "big");
  CHECK_MSG(add_waits(d, tx, tx, N, &v), "submitted after a download that copied");
  REQUIRE(v);
  check_times(v, a, N, 2, "v");
  /* After a read in place that followed one op (v's), an op whose result
   * is not mapped waits. */
  CHECK_MSG(add_waits(d, tbig, tbig, BIG, &big2), "submitted an op whose result is not mapped");
  REQUIRE(big2);
  check_times(big2, a, BIG, 2, "big2");
  /* While a batch is in flight (q's, which never completes), the op
   * waits; r's read, which follows one op, comes first. */
  REQUIRE_OK(add_s32(d, tx, tx, N, &r));
  check_times(r, a, N, 2, "r");
  REQUIRE_OK(nxv_device_stats(d, &s0));
  nxv_device_inject_hang(d);
  REQUIRE_OK(add_s32(d, tx, tx, N, &q));
  CHECK_MSG(wait_stat(d, offsetof(nxv_stats, round_trip_submits), s0.round_trip_submits + 1,
                      5000),
            "q was not submitted by itself");
  nxv_download *dl;
  REQUIRE_OK(nxv_download_start(q, 0, N, &dl));
  CHECK_MSG(add_waits(d, tx, tx, N, &q2), "submitted while a batch was in flight");
  REQUIRE(q2);
  nxv_download_release(dl);
  nxv_tensor_release(q2);
  nxv_tensor_release(q);
  nxv_tensor_release(r);
  nxv_tensor_release(big2);
  nxv_tensor_release(v);
  nxv_tensor_release(u);
  nxv_tensor_release(big);
  nxv_tensor_release(w);
  nxv_tensor_release(z2);
  nxv_tensor_release(z);
  nxv_tensor_release(y);
  nxv_tensor_release(tbig);
  nxv_tensor_release(tx);
  nxv_device_release(d); /* ends the hang */
}

/* With no_round_trip_submit the same round trip's op waits for its
 * download's flush. */
NXV_TEST(sched, no_round_trip_submit_keeps_the_op_for_its_download) {
  enum { N = 8 };
  nxv_device_config cfg = one_batch_config();
  cfg.no_round_trip_submit = true;
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  int32_t a[N];
  for (int j = 0; j < N; j++) a[j] = 29 * j - 100;
  nxv_tensor *tx = upload_s32(d, a, N), *y, *z;
  REQUIRE(tx);
  REQUIRE_OK(add_s32(d, tx, tx, N, &y));
  check_times(y, a, N, 2, "y");
  CHECK_MSG(add_waits(d, y, tx, N, &z), "submitted before its download");
  REQUIRE(z);
  check_times(z, a, N, 3, "z");
  nxv_tensor_release(z);
  nxv_tensor_release(y);
  nxv_tensor_release(tx);
  nxv_device_release(d);
}

NXV_TEST(sched, reorder_window_out_of_range_is_rejected) {
  nxv_device *d = NULL;
  nxv_device_config bad = {.reorder_window = NXV_REORDER_WINDOW_MAX + 1};
  CHECK(nxv_device_open(-1, &bad, &d) == NXV_ERR_INVALID_ARGUMENT);
  bad.reorder_window = -2;
  CHECK(nxv_device_open(-1, &bad, &d) == NXV_ERR_INVALID_ARGUMENT);
  CHECK(d == NULL);
}

NXV_TEST(sched, enqueue_returns_before_the_gpu_finishes_and_gpu_time) {
  nxv_device_config cfg = {.disable_disk_cache = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  enum { M = 192 };
  float *a = malloc(sizeof(float) * M * M);
  for (int i = 0; i < M * M; i++) a[i] = (float)(i % 7) * 0.01f;
  nxv_tensor *ta;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, M * M, a, &ta));
  REQUIRE_OK(nxv_device_synchronize(d));
  nxv_stats s0, s1;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  REQUIRE_OK(nxv_device_stats(d, &s0));
  nxv_matmul_desc m = {.batch = 1, .m = M, .n = M, .k = M, .a = ta,
                       .a_strides = {0, M, 1}, .b = ta, .b_strides = {0, M, 1}};
  nxv_tensor *x = ta;
  nxv_tensor_retain(x);
  enum { CHAIN = 40 };
  for (int i = 0; i < CHAIN; i++) {
    nxv_tensor *y;
    m.a = x;
    REQUIRE_OK(nxv_matmul(d, &m, &y));
    nxv_tensor_release(x);
    x = y;
  }
  REQUIRE_OK(nxv_device_stats(d, &s1));
  /* 40 dependent 192^3 products take far longer on any device than
   * queueing them: most are still pending when the last enqueue returns. */
  CHECK_MSG(s1.ops_completed - s0.ops_completed < CHAIN,
            "%llu of %d ops already complete at enqueue return",
            (unsigned long long)(s1.ops_completed - s0.ops_completed), CHAIN);
  float v;
  REQUIRE_OK(nxv_tensor_download(x, 0, 1, &v));
  REQUIRE_OK(nxv_device_synchronize(d));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  REQUIRE_OK(nxv_device_stats(d, &s1));
  CHECK(s1.ops_completed - s0.ops_completed >= CHAIN);
  /* The batches' GPU time, from their timestamps: some, and no more than
   * the time they had (batches of one queue may overlap a little). */
  nxv_device_info info;
  REQUIRE_OK(nxv_device_info_get(d, &info));
  double wall_ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
  double gpu_ns = (double)(s1.gpu_busy_ns - s0.gpu_busy_ns);
  if (info.timestamp_bits) {
    CHECK_MSG(gpu_ns > 0 && gpu_ns <= 2 * wall_ns, "GPU %.0f ns in %.0f ns", gpu_ns, wall_ns);
  } else {
    CHECK(gpu_ns == 0);
  }
  nxv_tensor_release(x);
  nxv_tensor_release(ta);
  free(a);
  nxv_device_release(d);
}

/* Submissions of an open batch with no download waiting and a long idle
 * flush: 8 nodes of large ops go at once, short ops wait for 16 and an
 * idle GPU. */
static uint64_t submits_of(nxv_device *d) {
  nxv_stats st;
  return nxv_device_stats(d, &st) == NXV_OK ? st.submits : UINT64_MAX;
}

static bool submits_reach(nxv_device *d, uint64_t want, int ms) {
  for (int i = 0; i < ms && submits_of(d) < want; i++) usleep(1000);
  return submits_of(d) >= want;
}

NXV_TEST(sched, large_ops_submit_in_batches_of_eight) {
  nxv_device_config cfg = {.disable_disk_cache = true, .idle_flush_us = 10000000};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  enum { BIG = 128 * 128, SMALL = 16 };
  float *host = calloc(BIG, sizeof(float));
  REQUIRE(host);
  nxv_tensor *big, *small;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, BIG, host, &big));
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, SMALL, host, &small));
  REQUIRE_OK(nxv_device_synchronize(d));
  nxv_tensor *outs[16];
  for (int round = 0; round < 2; round++) {
    /* Adds of 128x128 (3 x 16384 elements of work each: 8 of them pass
     * the early threshold) or of 16 elements. */
    nxv_tensor *t = round == 0 ? big : small;
    int64_t shape[1] = {round == 0 ? BIG : SMALL};
    nxv_view v = {t, 0, NULL};
    int first = round == 0 ? 7 : 15;
    uint64_t s0 = submits_of(d);
    for (int i = 0; i < first; i++) REQUIRE_OK(nxv_binary(d, NXV_ADD, 1, shape, &v, &v, &outs[i]));
    usleep(50000);
    CHECK_MSG(submits_of(d) == s0, "round %d: %d nodes submitted before the threshold", round,
              first);
    REQUIRE_OK(nxv_binary(d, NXV_ADD, 1, shape, &v, &v, &outs[first]));
    CHECK_MSG(submits_reach(d, s0 + 1, 2000), "round %d: %d nodes not submitted", round,
              first + 1);
    REQUIRE_OK(nxv_device_synchronize(d));
    for (int i = 0; i <= first; i++) nxv_tensor_release(outs[i]);
  }
  nxv_tensor_release(big);
  nxv_tensor_release(small);
  free(host);
  nxv_device_release(d);
}

/* With nothing in flight, an open batch is submitted once it holds
 * kick_nodes nodes (before its idle flush), not sooner. */
NXV_TEST(sched, idle_gpu_submits_at_kick_nodes) {
  static const uint32_t kicks[] = {5, 40};
  for (size_t ki = 0; ki < sizeof kicks / sizeof kicks[0]; ki++) {
    uint32_t kick = kicks[ki];
    nxv_device_config cfg = {.disable_disk_cache = true, .idle_flush_us = 10000000,
                             .kick_nodes = kick};
    nxv_device *d = open_with(&cfg);
    REQUIRE(d);
    float host[16] = {0};
    nxv_tensor *t;
    REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, 16, host, &t));
    REQUIRE_OK(nxv_device_synchronize(d));
    int64_t shape[1] = {16};
    nxv_view v = {t, 0, NULL};
    nxv_tensor *outs[40];
    uint64_t s0 = submits_of(d);
    for (uint32_t i = 0; i + 1 < kick; i++)
      REQUIRE_OK(nxv_binary(d, NXV_ADD, 1, shape, &v, &v, &outs[i]));
    usleep(50000);
    CHECK_MSG(submits_of(d) == s0, "kick %u: %u nodes submitted early", kick, kick - 1);
    REQUIRE_OK(nxv_binary(d, NXV_ADD, 1, shape, &v, &v, &outs[kick - 1]));
    CHECK_MSG(submits_reach(d, s0 + 1, 2000), "kick %u: %u nodes not submitted", kick, kick);
    REQUIRE_OK(nxv_device_synchronize(d));
    for (uint32_t i = 0; i < kick; i++) nxv_tensor_release(outs[i]);
    nxv_tensor_release(t);
    nxv_device_release(d);
  }
}

/* The kick tests' device: kick_nodes KICK_NODES, kick_inflight limit, no
 * idle flush (only kicks submit), a synchronized 16-element f32 operand;
 * queues 16-element adds of it into outs[from .. to-1]. */
enum { KICK_NODES = 4, KICK_OUTS = 7 * KICK_NODES };
typedef struct {
  nxv_device *d;
  nxv_tensor *t, *outs[KICK_OUTS];
  int nouts;
} kick_fixture;

static bool kick_open(uint32_t limit, kick_fixture *f) {
  nxv_device_config cfg = {.disable_disk_cache = true, .idle_flush_us = 10000000,
                           .kick_nodes = KICK_NODES, .kick_inflight = limit};
  float host[16] = {0};
  *f = (kick_fixture){.d = open_with(&cfg)};
  return f->d && nxv_tensor_upload(f->d, NXV_F32, 16, host, &f->t) == NXV_OK &&
         nxv_device_synchronize(f->d) == NXV_OK;
}

static bool kick_adds(kick_fixture *f, int n) {
  int64_t shape[1] = {16};
  nxv_view v = {f->t, 0, NULL};
  for (int i = 0; i < n; i++)
    if (f->nouts == KICK_OUTS ||
        nxv_binary(f->d, NXV_ADD, 1, shape, &v, &v, &f->outs[f->nouts++]) != NXV_OK)
      return false;
  return true;
}

/* Releases the tensors, then the device (which ends an injected hang). */
static void kick_close(kick_fixture *f) {
  for (int i = 0; i < f->nouts; i++) nxv_tensor_release(f->outs[i]);
  nxv_tensor_release(f->t);
  nxv_device_release(f->d);
}

/* With batches still in flight (the first one hung) and no op waiting in
 * the ring, an open batch of kick_nodes nodes is submitted behind them
 * while fewer than kick_inflight are in flight (counted in
 * pipelined_kicks), and not at all with kick_inflight 1, which kicks only
 * an idle GPU, nor behind large work; with ops waiting, at 4 x kick_nodes
 * nodes. */
NXV_TEST(sched, kicks_behind_batches_in_flight_up_to_kick_inflight) {
  enum { KICK = KICK_NODES };
  static const uint32_t limits[] = {1, 2, 3};
  for (size_t li = 0; li < sizeof limits / sizeof limits[0]; li++) {
    uint32_t limit = limits[li];
    kick_fixture f;
    REQUIRE(kick_open(limit, &f));
    nxv_stats s0, s1;
    REQUIRE_OK(nxv_device_stats(f.d, &s0));
    nxv_device_inject_hang(f.d);
    /* Group 0 goes on the idle GPU and never completes; group g > 0 goes
     * behind the g batches in flight only if g < limit. */
    for (uint32_t g = 0; g < 4; g++) {
      REQUIRE(kick_adds(&f, KICK));
      uint64_t want = s0.submits + (g < limit ? g + 1 : limit);
      if (g < limit) {
        CHECK_MSG(submits_reach(f.d, want, 10000), "limit %u: group %u not submitted", limit,
                  g);
      } else {
        usleep(50000);
        CHECK_MSG(submits_of(f.d) == want, "limit %u: group %u submitted behind %u batches",
                  limit, g, limit);
      }
    }
    REQUIRE_OK(nxv_device_stats(f.d, &s1));
    CHECK_MSG(s1.pipelined_kicks - s0.pipelined_kicks == limit - 1,
              "limit %u: %llu pipelined kicks", limit,
              (unsigned long long)(s1.pipelined_kicks - s0.pipelined_kicks));
    kick_close(&f);
  }
  /* With nodes waiting (6 x kick_nodes ops queued while the scheduler was
   * paused), the backlog batch (4 x kick_nodes) goes behind the hung one
   * as on an idle GPU, then the rest once the ring is empty: two batches
   * behind it, not one of all 24 ops. */
  kick_fixture f;
  REQUIRE(kick_open(3, &f));
  uint64_t s0 = submits_of(f.d);
  nxv_device_inject_hang(f.d);
  REQUIRE(kick_adds(&f, KICK));
  REQUIRE(submits_reach(f.d, s0 + 1, 10000));
  nxv_device_inject_pause(f.d, true);
  REQUIRE(kick_adds(&f, 6 * KICK));
  nxv_device_inject_pause(f.d, false);
  CHECK_MSG(submits_reach(f.d, s0 + 3, 10000), "%llu batches behind the hung one, not 2",
            (unsigned long long)(submits_of(f.d) - s0 - 1));
  usleep(50000);
  CHECK(submits_of(f.d) == s0 + 3);
  kick_close(&f);
  /* Behind a batch of large work (an op of 2^19 elements) nothing is
   * kicked, whatever the limit. */
  REQUIRE(kick_open(3, &f));
  nxv_tensor *big, *neg;
  REQUIRE_OK(nxv_tensor_empty(f.d, NXV_F32, 1u << 19, &big));
  REQUIRE_OK(nxv_device_synchronize(f.d));
  int64_t big_shape[1] = {1 << 19};
  nxv_view vb = {big, 0, NULL};
  s0 = submits_of(f.d);
  nxv_device_inject_hang(f.d);
  REQUIRE_OK(nxv_unary(f.d, NXV_NEG, 1, big_shape, &vb, &neg));
  REQUIRE(kick_adds(&f, KICK - 1));
  CHECK_MSG(submits_reach(f.d, s0 + 1, 10000), "the large batch was not submitted");
  REQUIRE(kick_adds(&f, KICK));
  usleep(50000);
  CHECK_MSG(submits_of(f.d) == s0 + 1, "%llu batches kicked behind large work",
            (unsigned long long)(submits_of(f.d) - s0 - 1));
  nxv_tensor_release(neg);
  nxv_tensor_release(big);
  kick_close(&f);
}

/* The early rule (8 nodes and 2^18 elements of work) submits a batch only
 * while fewer than early_inflight submitted batches are incomplete:
 * behind two hung batches a third group of large adds stays open (with
 * early_inflight 2; a limit above the batch slots holds nothing), and a
 * held batch goes once the GPU has room, without waiting for another op
 * or the idle flush. */
NXV_TEST(sched, early_rule_holds_behind_early_inflight_batches) {
  enum { BIG = 128 * 128, GROUP = 8, BIGGER = 1 << 22 };
  static const uint32_t limits[] = {2, 17};
  for (size_t li = 0; li < sizeof limits / sizeof limits[0]; li++) {
    nxv_device_config cfg = {.disable_disk_cache = true, .idle_flush_us = 10000000,
                             .kick_nodes = 1000, .early_inflight = limits[li]};
    nxv_device *d = open_with(&cfg);
    REQUIRE(d);
    float *host = calloc(BIG, sizeof(float));
    REQUIRE(host);
    nxv_tensor *big, *outs[3 * GROUP];
    REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, BIG, host, &big));
    REQUIRE_OK(nxv_device_synchronize(d));
    int64_t shape[1] = {BIG};
    nxv_view v = {big, 0, NULL};
    uint64_t s0 = submits_of(d);
    nxv_device_inject_hang(d);
    for (int g = 0; g < 3; g++) {
      for (int i = 0; i < GROUP; i++)
        REQUIRE_OK(nxv_binary(d, NXV_ADD, 1, shape, &v, &v, &outs[g * GROUP + i]));
      if (g < 2 || limits[li] > 2) {
        CHECK_MSG(submits_reach(d, s0 + (uint64_t)g + 1, 10000),
                  "limit %u: group %d not submitted", limits[li], g);
      } else {
        usleep(50000);
        CHECK_MSG(submits_of(d) == s0 + 2, "limit %u: a third batch went behind two", limits[li]);
      }
    }
    for (int i = 0; i < 3 * GROUP; i++) nxv_tensor_release(outs[i]);
    nxv_tensor_release(big);
    free(host);
    nxv_device_release(d); /* ends the hang */
  }
  /* No hang: with early_inflight 1 the second group waits for the first
   * (adds of 2^22 elements, slow on a CPU device) and then goes by
   * itself, long before the idle flush. */
  nxv_device_config cfg = {.disable_disk_cache = true, .idle_flush_us = 10000000,
                           .kick_nodes = 1000, .early_inflight = 1};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  nxv_tensor *t, *outs[2 * GROUP];
  REQUIRE_OK(nxv_tensor_empty(d, NXV_F32, BIGGER, &t));
  REQUIRE_OK(nxv_device_synchronize(d));
  int64_t shape[1] = {BIGGER};
  nxv_view v = {t, 0, NULL};
  uint64_t s0 = submits_of(d);
  for (int i = 0; i < 2 * GROUP; i++)
    REQUIRE_OK(nxv_binary(d, NXV_ADD, 1, shape, &v, &v, &outs[i]));
  CHECK_MSG(submits_reach(d, s0 + 2, 5000), "%llu of 2 batches submitted",
            (unsigned long long)(submits_of(d) - s0));
  REQUIRE_OK(nxv_device_synchronize(d));
  for (int i = 0; i < 2 * GROUP; i++) nxv_tensor_release(outs[i]);
  nxv_tensor_release(t);
  nxv_device_release(d);
}

/* A synchronize that finds everything before it submitted (the open batch
 * empty) waits for the last submission and submits nothing; one that finds
 * work in the open batch submits it, once. Either way the work is complete
 * (and retired) when it returns. */
NXV_TEST(sched, synchronize_after_submission_submits_nothing) {
  enum { N = 1 << 20 };
  nxv_device_config cfg = {.disable_disk_cache = true, .idle_flush_us = 50};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  float *host = malloc(N * sizeof *host), *back = malloc(N * sizeof *back);
  REQUIRE(host && back);
  for (int i = 0; i < N; i++) host[i] = (float)(i % 1000);
  nxv_tensor *t, *y, *z;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, N, host, &t));
  REQUIRE_OK(nxv_device_synchronize(d));
  int64_t shape[1] = {N};
  nxv_view v = {t, 0, NULL};
  /* Submitted by the idle flush, then synchronized. */
  uint64_t s0 = submits_of(d);
  REQUIRE_OK(nxv_binary(d, NXV_ADD, 1, shape, &v, &v, &y));
  CHECK_MSG(submits_reach(d, s0 + 1, 2000), "the add was not submitted");
  REQUIRE_OK(nxv_device_synchronize(d));
  nxv_stats st;
  REQUIRE_OK(nxv_device_stats(d, &st));
  CHECK_MSG(st.submits == s0 + 1, "synchronize submitted %llu batches of its own",
            (unsigned long long)(st.submits - s0 - 1));
  CHECK(st.epoch_completed >= st.epoch_submitted);
  CHECK(st.ops_completed == st.ops_enqueued);
  /* Nothing pending at all: still nothing to submit. */
  REQUIRE_OK(nxv_device_synchronize(d));
  CHECK(submits_of(d) == s0 + 1);
  /* Work in the open batch: the synchronize submits it. */
  nxv_view vy = {y, 0, NULL};
  REQUIRE_OK(nxv_binary(d, NXV_ADD, 1, shape, &vy, &v, &z));
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_stats(d, &st));
  CHECK(st.submits == s0 + 2);
  CHECK(st.epoch_completed >= st.epoch_submitted);
  REQUIRE_OK(nxv_tensor_download(z, 0, N, back));
  int bad = 0;
  for (int i = 0; i < N; i++) bad += back[i] != 3.0f * host[i];
  CHECK_MSG(bad == 0, "%d of %d elements wrong", bad, N);
  nxv_tensor_release(z);
  nxv_tensor_release(y);
  nxv_tensor_release(t);
  free(back);
  free(host);
  nxv_device_release(d);
}

/* With nodes still waiting in the ring, a batch that reaches kick_nodes
 * while the GPU is idle keeps recording, up to four times kick_nodes: 64
 * ops queued while the scheduler is paused make a first batch of 4 * kick
 * nodes, not kick (what it held when the idle GPU alone decided), and
 * every op runs. */
NXV_TEST(sched, backlog_grows_kicked_batch) {
  enum { KICK = 8, BURST = 64 };
  nxv_device_config cfg = {.disable_disk_cache = true, .idle_flush_us = 10000000,
                           .kick_nodes = KICK};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  float host[16];
  for (int i = 0; i < 16; i++) host[i] = (float)i;
  nxv_tensor *t;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, 16, host, &t));
  int64_t shape[1] = {16};
  nxv_view v = {t, 0, NULL};
  nxv_tensor *outs[BURST];
  nxv_batch_record *rec = calloc(NXV_BATCH_RECORDS, sizeof *rec);
  REQUIRE(rec);
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_record_batches(d, true));
  nxv_device_inject_pause(d, true);
  for (int i = 0; i < BURST; i++) REQUIRE_OK(nxv_binary(d, NXV_ADD, 1, shape, &v, &v, &outs[i]));
  nxv_device_inject_pause(d, false);
  REQUIRE_OK(nxv_device_synchronize(d));
  uint32_t n = 0;
  uint64_t dropped = 0;
  REQUIRE_OK(nxv_device_take_batches(d, rec, NXV_BATCH_RECORDS, &n, &dropped));
  REQUIRE_OK(nxv_device_record_batches(d, false));
  uint64_t ops = 0;
  for (uint32_t i = 0; i < n; i++) ops += rec[i].ops;
  CHECK_MSG(n >= 2 && ops >= BURST, "%u batches ran %llu ops", n, (unsigned long long)ops);
  CHECK_MSG(n > 0 && rec[0].ops == 4 * KICK, "first batch of %llu ops, not %d",
            n ? (unsigned long long)rec[0].ops : 0ull, 4 * KICK);
  float got[16];
  REQUIRE_OK(nxv_tensor_download(outs[BURST - 1], 0, 16, got));
  for (int i = 0; i < 16; i++) CHECK(got[i] == 2.0f * (float)i);
  for (int i = 0; i < BURST; i++) nxv_tensor_release(outs[i]);
  free(rec);
  nxv_tensor_release(t);
  nxv_device_release(d);
}

/* A burst of ops pushed to a sleeping scheduler wakes it once: the first
 * push signals, the rest find it already woken (no mutex, no system call
 * each). The scheduler polls 200 ms before sleeping, so it does not fall
 * asleep again during the burst: every wake-up beyond one would be a
 * producer signalling a thread that was already on its way. */
NXV_TEST(sched, burst_wakes_sleeping_scheduler_once) {
  nxv_device_config cfg = {.disable_disk_cache = true, .idle_spin_us = 200000};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  float host[16] = {0};
  nxv_tensor *t;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, 16, host, &t));
  int64_t shape[1] = {16};
  nxv_view v = {t, 0, NULL};
  enum { BURST = 256 };
  nxv_tensor **outs = calloc(BURST, sizeof *outs);
  REQUIRE(outs);
  for (int round = 0; round < 3; round++) {
    REQUIRE_OK(nxv_device_synchronize(d));
    usleep(400000); /* past idle_spin_us: the scheduler sleeps */
    nxv_stats s0, s1;
    REQUIRE_OK(nxv_device_stats(d, &s0));
    for (int i = 0; i < BURST; i++) REQUIRE_OK(nxv_binary(d, NXV_ADD, 1, shape, &v, &v, &outs[i]));
    REQUIRE_OK(nxv_device_synchronize(d));
    REQUIRE_OK(nxv_device_stats(d, &s1));
    CHECK_MSG(s1.scheduler_wakeups - s0.scheduler_wakeups == 1,
              "round %d: %llu wake-ups for one burst", round,
              (unsigned long long)(s1.scheduler_wakeups - s0.scheduler_wakeups));
    for (int i = 0; i < BURST; i++) nxv_tensor_release(outs[i]);
  }
  free(outs);
  nxv_tensor_release(t);
  nxv_device_release(d);
}

/* Pushes that meet the scheduler on its way to sleep. */
typedef struct wake_ctx {
  nxv_device *d;
  nxv_tensor *t;
  int rounds;
  nxv_status st;   /* the rounds' first failure */
  atomic_int done; /* the rounds have ended */
} wake_ctx;

/* CLOCK_MONOTONIC in ns (also the clock of the batch records' times). */
static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Each round queues an add, waits 0-100 us (busy), then synchronizes:
 * the scheduler holds the add for idle_flush_us, submits it, polls the
 * empty ring for idle_spin_us and sleeps, so the synchronize's marker
 * lands before, during or after that, now and then between its store of
 * `sleeping` and its last look at the ring. */
static void *wake_rounds(void *arg) {
  wake_ctx *c = arg;
  int64_t shape[1] = {16};
  nxv_view v = {c->t, 0, NULL};
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < c->rounds && c->st == NXV_OK; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    nxv_tensor *out = NULL;
    c->st = nxv_binary(c->d, NXV_ADD, 1, shape, &v, &v, &out);
    uint64_t until = monotonic_ns() + x % 100000;
    while (monotonic_ns() < until) {
    }
    if (c->st == NXV_OK) c->st = nxv_device_synchronize(c->d);
    nxv_tensor_release(out);
  }
  atomic_store(&c->done, 1);
  return NULL;
}

/* A push the scheduler missed while going to sleep (the producer reading
 * `sleeping` before the scheduler's store of it reaches memory, the
 * scheduler looking at the ring before the push reaches memory) would
 * leave its node in the ring and the synchronize waiting for ever: a
 * watchdog fails the test instead. */
NXV_TEST(sched, pushes_reach_a_scheduler_going_to_sleep) {
  nxv_device_config cfg = {.disable_disk_cache = true, .idle_spin_us = 1, .idle_flush_us = 5};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  float host[16] = {0};
  nxv_tensor *t;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, 16, host, &t));
  wake_ctx c = {.d = d, .t = t, .rounds = 3000, .st = NXV_OK};
  nxv_stats s0, s1;
  REQUIRE_OK(nxv_device_stats(d, &s0));
  pthread_t th;
  REQUIRE(pthread_create(&th, NULL, wake_rounds, &c) == 0);
  /* Generous: the rounds take about a second, several under sanitizers. */
  uint64_t deadline = monotonic_ns() + 300ull * 1000000000ull;
  while (!atomic_load(&c.done) && monotonic_ns() < deadline) usleep(1000);
  if (!atomic_load(&c.done)) {
    /* The worker is stuck in a synchronize: leave it, and the device. */
    CHECK_MSG(false, "a synchronize still waits after 300 s");
    return;
  }
  pthread_join(th, NULL);
  CHECK_OK(c.st);
  REQUIRE_OK(nxv_device_stats(d, &s1));
  /* The scheduler did fall asleep between rounds (1.2-1.6 times a
   * round on the CI machine), and was woken every time. */
  CHECK_MSG(s1.scheduler_wakeups - s0.scheduler_wakeups >= (uint64_t)c.rounds / 10,
            "%llu wake-ups in %d rounds",
            (unsigned long long)(s1.scheduler_wakeups - s0.scheduler_wakeups), c.rounds);
  nxv_tensor_release(t);
  nxv_device_release(d);
}

/* A tiny ring forces producers to find it full; nothing may be lost. */
typedef struct chain_ctx {
  nxv_device *d;
  nxv_tensor *one;
  int id, len;
  int32_t result;
  nxv_status status;
} chain_ctx;

#define CHAIN_N 33

static void *chain_worker(void *arg) {
  chain_ctx *c = arg;
  int32_t init[CHAIN_N];
  for (int i = 0; i < CHAIN_N; i++) init[i] = c->id * 100000 + i;
  nxv_tensor *x = upload_s32(c->d, init, CHAIN_N);
  if (!x) {
    c->status = NXV_ERR_VULKAN;
    return NULL;
  }
  nxv_tensor *indep[8];
  int nindep = 0;
  for (int k = 0; k < c->len; k++) {
    nxv_tensor *y;
    if ((c->status = add_s32(c->d, x, c->one, CHAIN_N, &y)) != NXV_OK) break;
    nxv_tensor_release(x);
    x = y;
    if (k % 16 == 0 && nindep < 8) { /* independent side results */
      if ((c->status = add_s32(c->d, c->one, c->one, CHAIN_N, &indep[nindep])) != NXV_OK) break;
      nindep++;
    }
  }
  int32_t got[CHAIN_N];
  if (c->status == NXV_OK) c->status = nxv_tensor_download(x, 0, CHAIN_N, got);
  if (c->status == NXV_OK) {
    c->result = got[0];
    for (int i = 0; i < CHAIN_N; i++)
      if (got[i] != init[i] + c->len) c->status = NXV_ERR_VULKAN;
  }
  for (int i = 0; i < nindep; i++) {
    if (c->status == NXV_OK) {
      c->status = nxv_tensor_download(indep[i], 0, CHAIN_N, got);
      for (int j = 0; j < CHAIN_N && c->status == NXV_OK; j++)
        if (got[j] != 2) c->status = NXV_ERR_VULKAN;
    }
    nxv_tensor_release(indep[i]);
  }
  nxv_tensor_release(x);
  return NULL;
}

static void run_chains(nxv_device *d, int threads, int len) {
  int32_t ones[CHAIN_N];
  for (int i = 0; i < CHAIN_N; i++) ones[i] = 1;
  nxv_tensor *one = upload_s32(d, ones, CHAIN_N);
  REQUIRE(one);
  pthread_t th[64];
  chain_ctx ctx[64];
  for (int t = 0; t < threads; t++) {
    ctx[t] = (chain_ctx){.d = d, .one = one, .id = t, .len = len + t};
    pthread_create(&th[t], NULL, chain_worker, &ctx[t]);
  }
  for (int t = 0; t < threads; t++) {
    pthread_join(th[t], NULL);
    CHECK_MSG(ctx[t].status == NXV_OK, "thread %d: %s", t,
              nxv_status_name(ctx[t].status));
  }
  nxv_tensor_release(one);
}

NXV_TEST(concurrency, sixteen_producers_dependent_and_independent_chains) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  run_chains(d, 16, 150);
  nxv_stats s;
  REQUIRE_OK(nxv_device_stats(d, &s));
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_stats(d, &s));
  CHECK(s.ops_completed == s.ops_enqueued);
  nxv_device_release(d);
}

/* Threads that synchronize while others queue work: each synchronize
 * returns only once every op queued before it has completed and been
 * retired, whichever thread retires it (the completion thread, or a waiter
 * that saw the timeline pass its batch first), and retirement keeps epoch
 * order (completed epochs never go back). An op counts as queued before a
 * synchronize once its call has returned (*queued, bumped after each
 * add): the device's ops_enqueued also counts ops whose push into the ring
 * another thread has begun but not finished, which a synchronize need not
 * wait for. */
typedef struct sync_ctx {
  nxv_device *d;
  nxv_tensor *one;
  int iters;
  atomic_uint_fast64_t *queued; /* shared: ops completed before the
                                   workers started, plus every add that
                                   has returned */
  nxv_status status;
  int violations;
} sync_ctx;

static void *sync_worker(void *arg) {
  sync_ctx *c = arg;
  uint64_t last_epoch = 0;
  for (int i = 0; i < c->iters && c->status == NXV_OK; i++) {
    nxv_tensor *y = NULL, *z = NULL;
    if ((c->status = add_s32(c->d, c->one, c->one, CHAIN_N, &y)) != NXV_OK) break;
    atomic_fetch_add(c->queued, 1);
    c->status = add_s32(c->d, y, c->one, CHAIN_N, &z);
    nxv_tensor_release(y);
    if (c->status != NXV_OK) break;
    atomic_fetch_add(c->queued, 1);
    nxv_tensor_release(z);
    nxv_stats s0, s1;
    uint64_t queued = atomic_load(c->queued);
    if ((c->status = nxv_device_stats(c->d, &s0)) != NXV_OK) break;
    if ((c->status = nxv_device_synchronize(c->d)) != NXV_OK) break;
    if ((c->status = nxv_device_stats(c->d, &s1)) != NXV_OK) break;
    if (s1.ops_completed < queued) c->violations++;
    if (s1.epoch_completed < s0.epoch_submitted) c->violations++;
    if (s1.epoch_completed < last_epoch) c->violations++;
    last_epoch = s1.epoch_completed;
  }
  return NULL;
}

NXV_TEST(concurrency, synchronize_from_many_threads_retires_in_order) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  int32_t ones[CHAIN_N];
  for (int i = 0; i < CHAIN_N; i++) ones[i] = 1;
  nxv_tensor *one = upload_s32(d, ones, CHAIN_N);
  REQUIRE(one);
  REQUIRE_OK(nxv_device_synchronize(d));
  nxv_stats s0;
  REQUIRE_OK(nxv_device_stats(d, &s0));
  atomic_uint_fast64_t queued;
  atomic_init(&queued, s0.ops_completed);
  enum { THREADS = 8 };
  pthread_t th[THREADS];
  sync_ctx ctx[THREADS];
  for (int t = 0; t < THREADS; t++) {
    ctx[t] = (sync_ctx){.d = d, .one = one, .iters = 500, .queued = &queued};
    pthread_create(&th[t], NULL, sync_worker, &ctx[t]);
  }
  for (int t = 0; t < THREADS; t++) {
    pthread_join(th[t], NULL);
    CHECK_MSG(ctx[t].status == NXV_OK, "thread %d: %s", t, nxv_status_name(ctx[t].status));
    CHECK_MSG(ctx[t].violations == 0, "thread %d: %d synchronize calls returned early", t,
              ctx[t].violations);
  }
  nxv_stats s;
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_stats(d, &s));
  CHECK(s.ops_completed == s.ops_enqueued);
  CHECK(s.pool_live_buffers == 1); /* only one's buffer is still live */
  nxv_tensor_release(one);
  nxv_device_release(d);
}

NXV_TEST(concurrency, full_ring_loses_nothing) {
  nxv_device_config cfg = {.ring_capacity = 4, .max_batch_nodes = 3,
                           .disable_disk_cache = true, .poison_outputs = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  run_chains(d, 8, 120);
  nxv_stats s;
  REQUIRE_OK(nxv_device_stats(d, &s));
  CHECK_MSG(s.ring_full_waits > 0, "ring never filled");
  nxv_device_release(d);
}

NXV_TEST(concurrency, one_submit_per_op_mode) {
  nxv_device_config cfg = {.max_batch_nodes = 1, .disable_disk_cache = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  run_chains(d, 4, 60);
  nxv_stats s;
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_stats(d, &s));
  /* Downloads of small results read in place submit nothing. */
  CHECK(s.submits >= s.ops_enqueued - 1 - s.reads_in_place);
  nxv_device_release(d);
}

NXV_TEST(sched, tiny_argument_arena_waits_for_retirement) {
  nxv_device_config cfg = {.arena_bytes = 4096, .disable_disk_cache = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  enum { R = 6, N = 729 }; /* 3^6, a rank-6 transpose needs arena space */
  int64_t shape[R] = {3, 3, 3, 3, 3, 3};
  uint32_t perm[R] = {5, 3, 1, 0, 2, 4};
  int32_t v[N];
  for (int i = 0; i < N; i++) v[i] = i;
  nxv_tensor *x = upload_s32(d, v, N);
  REQUIRE(x);
  for (int i = 0; i < 300; i++) {
    nxv_tensor *y;
    REQUIRE_OK(nxv_transpose(d, R, shape, x, perm, &y));
    nxv_tensor_release(x);
    x = y;
  }
  /* perm has order 6 (cycle (0 5 4 2 1 3)): 300 applications = identity. */
  int32_t got[N];
  REQUIRE_OK(nxv_tensor_download(x, 0, N, got));
  for (int i = 0; i < N; i++) CHECK(got[i] == i);
  nxv_tensor_release(x);
  nxv_device_release(d);
}

/* ------------------------------------------------------------------ */
/* Latency histograms                                                  */
/* ------------------------------------------------------------------ */

enum { HIST_THREADS = 8, HIST_PER = 20000 };

static nxv_hist hist_shared;

static uint64_t hist_value(uint64_t thread, uint64_t j) { return thread * 100000 + j * 37; }

/* Even threads add one value at a time, odd ones gather 100 and merge
 * them (the completion thread's way), so both paths run concurrently. */
static void *hist_adder(void *arg) {
  uint64_t t = (uint64_t)(uintptr_t)arg;
  nxv_histogram l;
  memset(&l, 0, sizeof l);
  for (uint64_t j = 0; j < HIST_PER; j++) {
    if (t % 2 == 0) {
      nxv_hist_add(&hist_shared, hist_value(t, j));
      continue;
    }
    nxv_hist_local_add(&l, hist_value(t, j));
    if (l.count == 100) {
      nxv_hist_merge(&hist_shared, &l);
      memset(&l, 0, sizeof l);
    }
  }
  nxv_hist_merge(&hist_shared, &l);
  return NULL;
}

NXV_TEST(histogram, buckets_limits_and_concurrent_adds) {
  CHECK(nxv_hist_bucket(0) == 0);
  CHECK(nxv_hist_bucket(255) == 0);
  CHECK(nxv_hist_bucket(256) == 1);
  CHECK(nxv_hist_bucket(511) == 1);
  CHECK(nxv_hist_bucket(512) == 2);
  CHECK(nxv_hist_bucket(1000000) == 12); /* [2^19, 2^20) ns */
  CHECK(nxv_hist_bucket((1ull << 38) - 1) == 30);
  CHECK(nxv_hist_bucket(1ull << 38) == 31);
  CHECK(nxv_hist_bucket(UINT64_MAX) == 31);
  /* Each bucket's limit is the first value of the next one. */
  for (uint32_t i = 0; i + 1 < NXV_HISTOGRAM_BUCKETS; i++) {
    uint64_t lim = nxv_histogram_bucket_limit(i);
    CHECK_MSG(nxv_hist_bucket(lim - 1) == i && nxv_hist_bucket(lim) == i + 1,
              "bucket %u limit %llu", i, (unsigned long long)lim);
  }
  CHECK(nxv_histogram_bucket_limit(NXV_HISTOGRAM_BUCKETS - 1) == UINT64_MAX);

  nxv_hist *hp = &hist_shared;
  nxv_hist_init(hp);
  nxv_histogram snap;
  nxv_hist_add(hp, 100);
  nxv_hist_add(hp, 300);
  nxv_hist_add(hp, 300);
  nxv_hist_add(hp, 5000000);
  nxv_hist_snapshot(hp, &snap);
  CHECK(snap.count == 4);
  CHECK(snap.sum_ns == 5000700);
  CHECK(snap.max_ns == 5000000);
  CHECK(snap.buckets[0] == 1 && snap.buckets[1] == 2 &&
        snap.buckets[nxv_hist_bucket(5000000)] == 1);

  /* Concurrent adders lose nothing; a concurrent reader never sees a
   * count larger than its buckets hold. */
  nxv_hist_init(hp);
  pthread_t th[HIST_THREADS];
  for (uintptr_t i = 0; i < HIST_THREADS; i++)
    REQUIRE(pthread_create(&th[i], NULL, hist_adder, (void *)i) == 0);
  for (int r = 0; r < 1000; r++) {
    nxv_hist_snapshot(hp, &snap);
    uint64_t in_buckets = 0;
    for (uint32_t i = 0; i < NXV_HISTOGRAM_BUCKETS; i++) in_buckets += snap.buckets[i];
    CHECK_MSG(in_buckets >= snap.count, "count %llu > %llu in buckets",
              (unsigned long long)snap.count, (unsigned long long)in_buckets);
  }
  for (int i = 0; i < HIST_THREADS; i++) pthread_join(th[i], NULL);
  nxv_hist_snapshot(hp, &snap);
  uint64_t n = (uint64_t)HIST_THREADS * HIST_PER, sum = 0, in_buckets = 0;
  for (uint64_t t = 0; t < HIST_THREADS; t++)
    for (uint64_t j = 0; j < HIST_PER; j++) sum += hist_value(t, j);
  for (uint32_t i = 0; i < NXV_HISTOGRAM_BUCKETS; i++) in_buckets += snap.buckets[i];
  CHECK(snap.count == n);
  CHECK(in_buckets == n);
  CHECK(snap.sum_ns == sum);
  CHECK(snap.max_ns == hist_value(HIST_THREADS - 1, HIST_PER - 1));
}

NXV_TEST(histogram, device_records_ops_batches_and_downloads) {
  nxv_device_config cfg = {.disable_disk_cache = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  nxv_stats s0, s1;
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_stats(d, &s0));
  enum { OPS = 300, N = 1000 };
  float zero = 0.0f, one = 1.0f;
  nxv_tensor *t, *o;
  REQUIRE_OK(nxv_fill(d, NXV_F32, N, &zero, &t));
  REQUIRE_OK(nxv_fill(d, NXV_F32, N, &one, &o));
  int64_t shape[1] = {N};
  for (int i = 0; i < OPS; i++) {
    nxv_tensor *u;
    nxv_view va = {t, 0, NULL}, vb = {o, 0, NULL};
    REQUIRE_OK(nxv_binary(d, NXV_ADD, 1, shape, &va, &vb, &u));
    nxv_tensor_release(t);
    t = u;
  }
  float v[N];
  REQUIRE_OK(nxv_tensor_download(t, 0, N, v));
  for (int i = 0; i < N; i++) CHECK_MSG(v[i] == (float)OPS, "v[%d] = %g", i, v[i]);
  REQUIRE_OK(nxv_tensor_download(t, 0, 1, v));
  nxv_tensor_release(t);
  nxv_tensor_release(o);
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_stats(d, &s1));
  uint64_t ops = s1.ops_completed - s0.ops_completed;
  CHECK_MSG(ops >= OPS + 3, "%llu ops completed", (unsigned long long)ops);
  CHECK(s1.op_latency.count - s0.op_latency.count == ops);
  CHECK(s1.queue_wait.count - s0.queue_wait.count == s1.submits - s0.submits);
  CHECK(s1.download_wait.count - s0.download_wait.count == 2);
  /* Every batch is timed or counted untimed (the downloads' small batches;
   * all of them where the queue writes no timestamps). */
  CHECK(s1.batch_gpu.count - s0.batch_gpu.count + s1.batches_untimed - s0.batches_untimed ==
        s1.submits - s0.submits);
  CHECK(s1.op_latency.max_ns > 0 && s1.op_latency.sum_ns >= s1.op_latency.max_ns);
  CHECK(s1.download_wait.sum_ns > 0);
  /* Each of the OPS adds and two fills writes 4000 bytes or more (a size
   * class of at least that). */
  CHECK(s1.bytes_submitted - s0.bytes_submitted >= (uint64_t)(OPS + 2) * 4000);
  uint64_t in_buckets = 0;
  for (uint32_t i = 0; i < NXV_HISTOGRAM_BUCKETS; i++) in_buckets += s1.op_latency.buckets[i];
  CHECK(in_buckets == s1.op_latency.count);
  nxv_device_release(d);
}

/* A device opened with no_gpu_timestamps reports no GPU time; one opened
 * without them does where its queue writes timestamps (host query reset
 * or not). */
NXV_TEST(histogram, no_gpu_timestamps) {
  for (int off = 0; off < 2; off++) {
    nxv_device_config cfg = {.disable_disk_cache = true, .no_gpu_timestamps = off == 1};
    nxv_device *d = open_with(&cfg);
    REQUIRE(d);
    nxv_device_info info;
    REQUIRE_OK(nxv_device_info_get(d, &info));
    float one = 1.0f;
    for (int i = 0; i < 20; i++) {
      nxv_tensor *t;
      REQUIRE_OK(nxv_fill(d, NXV_F32, 1 << 16, &one, &t));
      nxv_tensor_release(t);
      REQUIRE_OK(nxv_device_synchronize(d));
    }
    nxv_stats s;
    REQUIRE_OK(nxv_device_stats(d, &s));
    if (off || !info.timestamp_bits) CHECK_MSG(s.gpu_busy_ns == 0, "%llu ns", (unsigned long long)s.gpu_busy_ns);
    else CHECK_MSG(s.gpu_busy_ns > 0, "no GPU time with timestamps on");
    nxv_device_release(d);
  }
}

/* A round trip's batch (one small op and its download, or a synchronize)
 * writes no timestamps and adds no GPU time; a batch with an op past
 * 2^16 elements of work is timed; while batch records are kept, small
 * batches are timed too. */
NXV_TEST(histogram, small_round_trips_untimed) {
  nxv_device_config cfg = {.disable_disk_cache = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  nxv_device_info info;
  REQUIRE_OK(nxv_device_info_get(d, &info));
  float one = 1.0f, got = 0.0f;
  nxv_tensor *x, *y, *big;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, 1, &one, &x));
  REQUIRE_OK(nxv_device_synchronize(d));
  nxv_stats s0, s1, s2, s3;
  REQUIRE_OK(nxv_device_stats(d, &s0));
  int64_t shape[1] = {1};
  nxv_view vx = {x, 0, NULL};
  enum { ROUNDS = 20 };
  for (int i = 0; i < ROUNDS; i++) {
    got = 0.0f;
    REQUIRE_OK(nxv_binary(d, NXV_ADD, 1, shape, &vx, &vx, &y));
    REQUIRE_OK(nxv_tensor_download(y, 0, 1, &got));
    CHECK_MSG(got == 2.0f, "round %d read %g", i, (double)got);
    nxv_tensor_release(y);
  }
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_stats(d, &s1));
  uint64_t submits = s1.submits - s0.submits;
  CHECK_MSG(submits >= ROUNDS, "%llu submits", (unsigned long long)submits);
  CHECK_MSG(s1.batches_untimed - s0.batches_untimed == submits, "%llu of %llu untimed",
            (unsigned long long)(s1.batches_untimed - s0.batches_untimed),
            (unsigned long long)submits);
  CHECK(s1.gpu_busy_ns == s0.gpu_busy_ns);
  CHECK(s1.batch_gpu.count == s0.batch_gpu.count);
  /* One large fill: timed where the queue writes timestamps. */
  REQUIRE_OK(nxv_fill(d, NXV_F32, 1 << 16, &one, &big));
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_stats(d, &s2));
  uint64_t timed = s2.batch_gpu.count - s1.batch_gpu.count;
  if (info.timestamp_bits) {
    CHECK_MSG(timed == 1, "%llu batches timed", (unsigned long long)timed);
    CHECK(s2.gpu_busy_ns > s1.gpu_busy_ns);
  } else {
    CHECK(timed == 0 && s2.gpu_busy_ns == 0);
  }
  /* With records kept, the round trips' batches are timed (also the batch
   * opened ahead before recording started, from its first op). */
  REQUIRE_OK(nxv_device_record_batches(d, true));
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_stats(d, &s2));
  for (int i = 0; i < 5; i++) {
    REQUIRE_OK(nxv_binary(d, NXV_ADD, 1, shape, &vx, &vx, &y));
    REQUIRE_OK(nxv_tensor_download(y, 0, 1, &got));
    nxv_tensor_release(y);
  }
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_stats(d, &s3));
  REQUIRE_OK(nxv_device_record_batches(d, false));
  if (info.timestamp_bits)
    CHECK_MSG(s3.batch_gpu.count - s2.batch_gpu.count == s3.submits - s2.submits &&
                  s3.batches_untimed == s2.batches_untimed,
              "%llu of %llu batches timed with records kept",
              (unsigned long long)(s3.batch_gpu.count - s2.batch_gpu.count),
              (unsigned long long)(s3.submits - s2.submits));
  nxv_tensor_release(big);
  nxv_tensor_release(x);
  nxv_device_release(d);
}

/* Records of retired batches: every op in exactly one record while
 * recording, none before or after, a bounded backlog whose overflow is
 * counted; without per-op timing the op histogram stays empty. */
/* Batch records carry their submission time and, where the device
 * calibrates its timestamps against CLOCK_MONOTONIC, the GPU's start and
 * end of each batch on that clock: within the test's own readings of the
 * clock, after the submission, as long as the batch's GPU time, and in
 * queue order (one batch at a time here). The tolerance covers the
 * calibration's error. */
NXV_TEST(histogram, batch_record_times) {
  nxv_device_config cfg = {.disable_disk_cache = true, .max_batch_nodes = 1};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  nxv_device_info info;
  REQUIRE_OK(nxv_device_info_get(d, &info));
  const uint64_t slack = 50000; /* ns */
  float one = 1.0f;
  nxv_tensor *t;
  REQUIRE_OK(nxv_device_record_batches(d, true));
  uint64_t before = monotonic_ns();
  enum { OPS = 20 };
  for (int i = 0; i < OPS; i++) {
    REQUIRE_OK(nxv_fill(d, NXV_F32, 1 << 16, &one, &t));
    nxv_tensor_release(t);
  }
  REQUIRE_OK(nxv_device_synchronize(d));
  uint64_t after = monotonic_ns();
  nxv_batch_record rec[64];
  uint32_t n = 0;
  uint64_t dropped = 0;
  REQUIRE_OK(nxv_device_take_batches(d, rec, 64, &n, &dropped));
  CHECK_MSG(n >= OPS, "%u records", n);
  uint32_t timed = 0;
  for (uint32_t i = 0; i < n; i++) {
    const nxv_batch_record *r = &rec[i];
    CHECK_MSG(r->submit_time_ns >= before && r->submit_time_ns <= after,
              "record %u: submitted at %llu, outside [%llu, %llu]", i,
              (unsigned long long)r->submit_time_ns, (unsigned long long)before,
              (unsigned long long)after);
    CHECK_MSG(r->record_time_ns >= before && r->record_time_ns <= r->submit_time_ns,
              "record %u: first op recorded at %llu, outside [%llu, %llu]", i,
              (unsigned long long)r->record_time_ns, (unsigned long long)before,
              (unsigned long long)r->submit_time_ns);
    if (!r->gpu_start_time_ns) {
      CHECK(r->gpu_end_time_ns == 0);
      continue;
    }
    timed++;
    CHECK_MSG(r->gpu_start_time_ns + slack >= r->submit_time_ns,
              "record %u: started %lld ns after its submission", i,
              (long long)(r->gpu_start_time_ns - r->submit_time_ns));
    CHECK(r->gpu_end_time_ns >= r->gpu_start_time_ns);
    uint64_t span = r->gpu_end_time_ns - r->gpu_start_time_ns;
    CHECK_MSG(span + 1000 >= r->gpu_ns && span <= r->gpu_ns + 1000,
              "record %u: start to end %llu ns, GPU time %llu ns", i,
              (unsigned long long)span, (unsigned long long)r->gpu_ns);
    CHECK_MSG(r->gpu_end_time_ns <= after + slack,
              "record %u: ended %lld ns after the synchronize returned", i,
              (long long)(r->gpu_end_time_ns - after));
    if (i > 0 && rec[i - 1].gpu_end_time_ns)
      CHECK_MSG(r->gpu_start_time_ns + slack >= rec[i - 1].gpu_end_time_ns,
                "record %u: started before the batch before it ended", i);
  }
  /* Every batch writes timestamps where the queue has them: calibrated
   * ones exactly where the device says it calibrates them. */
  bool expect = info.calibrated_timestamps && info.timestamp_bits > 0;
  CHECK_MSG(timed == (expect ? n : 0),
            "%u of %u records timed, calibrated_timestamps %d, timestamp_bits %u", timed, n,
            info.calibrated_timestamps, info.timestamp_bits);
  nxv_device_release(d);
}

NXV_TEST(histogram, batch_records_and_no_latency_timing) {
  nxv_device_config cfg = {.disable_disk_cache = true, .max_batch_nodes = 1,
                           .no_latency_timing = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  float one = 1.0f;
  nxv_tensor *t;
  nxv_batch_record *rec = malloc((NXV_BATCH_RECORDS + 16) * sizeof *rec);
  REQUIRE(rec);
  uint32_t n = 99;
  uint64_t dropped = 99;
  /* Not recording: nothing kept. */
  REQUIRE_OK(nxv_fill(d, NXV_F32, 10, &one, &t));
  nxv_tensor_release(t);
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_take_batches(d, rec, NXV_BATCH_RECORDS, &n, &dropped));
  CHECK(n == 0 && dropped == 0);

  REQUIRE_OK(nxv_device_record_batches(d, true));
  enum { OPS = 40 };
  for (int i = 0; i < OPS; i++) {
    REQUIRE_OK(nxv_fill(d, NXV_F32, 1000, &one, &t));
    nxv_tensor_release(t);
  }
  REQUIRE_OK(nxv_device_synchronize(d));
  /* Taken in two parts, oldest first. */
  uint32_t n1 = 0, n2 = 0;
  REQUIRE_OK(nxv_device_take_batches(d, rec, 7, &n1, &dropped));
  REQUIRE_OK(nxv_device_take_batches(d, rec + 7, NXV_BATCH_RECORDS, &n2, &dropped));
  CHECK(n1 == 7);
  CHECK(dropped == 0);
  /* One op per batch: the fills (4000 bytes or more each); synchronize,
   * finding them all submitted, submits no marker of its own. */
  uint64_t ops = 0, markers = 0;
  for (uint32_t i = 0; i < n1 + n2; i++) {
    CHECK(rec[i].ops == 1);
    CHECK(i == 0 || rec[i].epoch > rec[i - 1].epoch);
    if (rec[i].bytes) {
      ops++;
      CHECK_MSG(rec[i].bytes >= 4000, "record %u: %llu bytes", i,
                (unsigned long long)rec[i].bytes);
    } else {
      markers++;
    }
    CHECK(rec[i].latency_ns > 0);
  }
  CHECK_MSG(ops == OPS && markers == 0, "%llu ops and %llu markers recorded",
            (unsigned long long)ops, (unsigned long long)markers);

  /* A backlog of more than NXV_BATCH_RECORDS: the excess is counted. */
  for (int i = 0; i < NXV_BATCH_RECORDS + 5; i++) {
    REQUIRE_OK(nxv_fill(d, NXV_F32, 4, &one, &t));
    nxv_tensor_release(t);
  }
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_take_batches(d, rec, NXV_BATCH_RECORDS + 16, &n, &dropped));
  CHECK_MSG(n == NXV_BATCH_RECORDS, "%u records", n);
  /* Synchronize's marker batches are recorded too (0 ops). */
  CHECK_MSG(dropped >= 5, "%llu dropped", (unsigned long long)dropped);
  REQUIRE_OK(nxv_device_take_batches(d, rec, 16, &n, &dropped));
  CHECK(n == 0 && dropped == 0);

  /* Stopped: nothing more kept. */
  REQUIRE_OK(nxv_device_record_batches(d, false));
  REQUIRE_OK(nxv_fill(d, NXV_F32, 10, &one, &t));
  nxv_tensor_release(t);
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_take_batches(d, rec, 16, &n, &dropped));
  CHECK(n == 0 && dropped == 0);

  nxv_stats s;
  REQUIRE_OK(nxv_device_stats(d, &s));
  CHECK(s.op_latency.count == 0);
  CHECK(s.queue_wait.count == s.submits && s.submits > OPS);
  CHECK(nxv_device_take_batches(d, NULL, 1, &n, &dropped) == NXV_ERR_INVALID_ARGUMENT);
  free(rec);
  nxv_device_release(d);
}

/* ------------------------------------------------------------------ */
/* Pool and staging                                                    */
/* ------------------------------------------------------------------ */

NXV_TEST(pool, reuse_after_retirement_and_counters) {
  nxv_device_config cfg = {.disable_disk_cache = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  nxv_stats s0, s1, s2, s3;
  REQUIRE_OK(nxv_device_stats(d, &s0));
  CHECK(s0.pool_bytes_in_use == 0);
  nxv_tensor *t;
  float one = 1.0f;
  REQUIRE_OK(nxv_fill(d, NXV_F32, 1000, &one, &t));
  REQUIRE_OK(nxv_device_stats(d, &s1));
  CHECK(s1.pool_bytes_in_use >= 4000 && s1.pool_bytes_in_use <= 5000);
  CHECK(s1.pool_misses == s0.pool_misses + 1);
  CHECK(s1.pool_live_buffers == 1);
  CHECK(s1.pool_bytes_reserved >= s1.pool_bytes_in_use);
  CHECK(s1.pool_allocations >= 1);
  nxv_tensor_release(t); /* the fill may still be queued: reuse must wait */
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_stats(d, &s2));
  CHECK(s2.pool_bytes_in_use == 0);
  CHECK(s2.pool_live_buffers == 0);
  /* Same size class again: a hit, no new device allocation. */
  REQUIRE_OK(nxv_fill(d, NXV_F32, 900, &one, &t));
  REQUIRE_OK(nxv_device_stats(d, &s3));
  CHECK(s3.pool_hits == s2.pool_hits + 1);
  CHECK(s3.pool_allocations == s2.pool_allocations);
  CHECK(s3.pool_bytes_peak >= s1.pool_bytes_in_use);
  float v[900];
  REQUIRE_OK(nxv_tensor_download(t, 0, 900, v));
  for (int i = 0; i < 900; i++) CHECK(v[i] == 1.0f);
  nxv_tensor_release(t);
  /* Buffers larger than a chunk's blocks (allocations of their own) are
   * freed by a trim. */
  nxv_tensor *big;
  REQUIRE_OK(nxv_tensor_empty(d, NXV_F32, 4 << 20, &big));
  nxv_tensor_release(big);
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_stats(d, &s1));
  REQUIRE_OK(nxv_device_trim(d));
  REQUIRE_OK(nxv_device_stats(d, &s2));
  CHECK(s2.pool_bytes_reserved < s1.pool_bytes_reserved);
  CHECK(s2.pool_frees > s1.pool_frees);
  CHECK(s2.pool_trims == s1.pool_trims + 1);
  nxv_device_release(d);
}

NXV_TEST(pool, retirement_returns_many_buffers_at_once) {
  /* Tensors of several size classes released while the ops writing them
   * (and reading a shared input) are still queued: their last references
   * are the nodes', dropped a batch at a time by retirement. Every buffer
   * must be back, once, and serve later allocations correctly. */
  nxv_device_config cfg = {.disable_disk_cache = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  nxv_stats s1, s2;
  enum { OPS = 300 };
  float one = 1.0f;
  nxv_tensor *x;
  REQUIRE_OK(nxv_fill(d, NXV_F32, 5000, &one, &x));
  static const int64_t unit[1] = {1};
  nxv_view vx = {x, 0, unit}; /* the first elements of x */
  for (int i = 0; i < OPS; i++) {
    int64_t shape[1] = {1 + (i * 397) % 5000};
    nxv_tensor *y;
    REQUIRE_OK(nxv_binary(d, NXV_ADD, 1, shape, &vx, &vx, &y));
    nxv_tensor_release(y);
  }
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_stats(d, &s1));
  CHECK_MSG(s1.pool_live_buffers == 1, "%llu live buffers, expected x's alone",
            (unsigned long long)s1.pool_live_buffers);
  CHECK(s1.pool_bytes_in_use >= 5000 * 4 && s1.pool_bytes_in_use < 2 * 5000 * 4);
  /* The same sizes again come from the free lists, each buffer once: a
   * buffer handed out twice would show the later fill's value. */
  nxv_tensor *ys[OPS];
  for (int i = 0; i < OPS; i++) {
    float v = (float)i;
    REQUIRE_OK(nxv_fill(d, NXV_F32, 1 + (uint64_t)((i * 397) % 5000), &v, &ys[i]));
  }
  REQUIRE_OK(nxv_device_stats(d, &s2));
  CHECK_MSG(s2.pool_allocations == s1.pool_allocations,
            "%llu new device allocations for sizes already freed",
            (unsigned long long)(s2.pool_allocations - s1.pool_allocations));
  CHECK(s2.pool_live_buffers == OPS + 1);
  float got[5000];
  for (int i = 0; i < OPS; i++) {
    uint64_t n = 1 + (uint64_t)((i * 397) % 5000);
    for (uint64_t j = 0; j < n; j++) got[j] = -1.0f;
    REQUIRE_OK(nxv_tensor_download(ys[i], 0, n, got));
    uint64_t bad = 0;
    for (uint64_t j = 0; j < n; j++) bad += got[j] != (float)i;
    CHECK_MSG(bad == 0, "tensor %d: %llu of %llu elements not %d", i, (unsigned long long)bad,
              (unsigned long long)n, i);
  }
  for (int i = 0; i < OPS; i++) nxv_tensor_release(ys[i]);
  nxv_tensor_release(x);
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_stats(d, &s2));
  CHECK(s2.pool_live_buffers == 0 && s2.pool_bytes_in_use == 0);
  nxv_device_release(d);
}

NXV_TEST(pool, buffer_held_by_queued_node_is_not_reused) {
  /* Release an input while ops reading it are still queued; allocations
   * that follow must not receive its memory until those ops retired. */
  nxv_device *d = test_open_device();
  REQUIRE(d);
  enum { N = 4096 };
  int32_t *v = malloc(sizeof(int32_t) * N);
  for (int i = 0; i < N; i++) v[i] = i;
  nxv_tensor *outs[32];
  for (int r = 0; r < 32; r++) {
    nxv_tensor *a = upload_s32(d, v, N);
    REQUIRE(a);
    REQUIRE_OK(add_s32(d, a, a, N, &outs[r]));
    nxv_tensor_release(a); /* still referenced by the queued add */
  }
  int32_t *got = malloc(sizeof(int32_t) * N);
  for (int r = 0; r < 32; r++) {
    REQUIRE_OK(nxv_tensor_download(outs[r], 0, N, got));
    for (int i = 0; i < N; i++) CHECK(got[i] == 2 * i);
    nxv_tensor_release(outs[r]);
  }
  free(got);
  free(v);
  nxv_device_release(d);
}

NXV_TEST(pool, budget_limit_is_enforced) {
  nxv_device_config cfg = {.pool_limit_bytes = 8u << 20, .disable_disk_cache = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  nxv_tensor *a, *b = (nxv_tensor *)0x1;
  REQUIRE_OK(nxv_tensor_empty(d, NXV_F32, 1 << 20, &a)); /* 4 MiB */
  CHECK(nxv_tensor_empty(d, NXV_F32, 3 << 20, &b) == NXV_ERR_OUT_OF_DEVICE_MEMORY);
  CHECK(b == (nxv_tensor *)0x1);
  CHECK(strstr(nxv_last_error(), "limit") != NULL);
  nxv_tensor_release(a);
  /* The freed 4 MiB is trimmed on demand so a larger request fits. */
  REQUIRE_OK(nxv_tensor_empty(d, NXV_F32, (3 << 20) / 2, &b));
  nxv_tensor_release(b);
  nxv_device_info info;
  REQUIRE_OK(nxv_device_info_get(d, &info));
  uint64_t too_big = info.max_storage_buffer_range / 4 + 1;
  CHECK(nxv_tensor_empty(d, NXV_F32, too_big, &b) != NXV_OK);
  float x = 2;
  REQUIRE_OK(nxv_fill(d, NXV_F32, 10, &x, &a));
  float got[10];
  REQUIRE_OK(nxv_tensor_download(a, 0, 10, got));
  CHECK(got[9] == 2);
  nxv_tensor_release(a);
  nxv_device_release(d);
}

/* Fills n tensors of count f32 each with the values base + i; NULL
 * entries where a fill failed. */
static void fill_many(nxv_device *d, nxv_tensor **ts, int n, uint64_t count, float base) {
  for (int i = 0; i < n; i++) {
    float v = base + (float)i;
    if (nxv_fill(d, NXV_F32, count, &v, &ts[i]) != NXV_OK) ts[i] = NULL;
  }
}

/* Whether each of n tensors of count f32 still holds base + i at both
 * ends (carved ranges that overlapped would not). */
static bool check_many(nxv_tensor **ts, int n, uint64_t count, float base) {
  bool ok = true;
  for (int i = 0; i < n; i++) {
    float head[16], tail[16];
    if (!ts[i] || nxv_tensor_download(ts[i], 0, 16, head) != NXV_OK ||
        nxv_tensor_download(ts[i], count - 16, 16, tail) != NXV_OK)
      return false;
    for (int j = 0; j < 16; j++)
      ok = ok && head[j] == base + (float)i && tail[j] == base + (float)i;
  }
  return ok;
}

static void release_many(nxv_tensor **ts, int n) {
  for (int i = 0; i < n; i++) nxv_tensor_release(ts[i]);
}

NXV_TEST(pool, chunks_serve_other_classes_without_allocating) {
  nxv_device_config cfg = {.disable_disk_cache = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  enum { NA = 40, NB = 29, NC = 6 };
  const uint64_t ca = 393216, cb = 524288, cc = 1u << 20; /* 1.5, 2, 4 MiB */
  nxv_tensor *a[NA], *b[NB], *c[NC];
  nxv_stats s0, s1, s2, s3;
  REQUIRE_OK(nxv_device_stats(d, &s0));
  fill_many(d, a, NA, ca, 1000.0f);
  CHECK(check_many(a, NA, ca, 1000.0f));
  REQUIRE_OK(nxv_device_stats(d, &s1));
  /* 60 MiB in chunks of 64 MiB: one or two device allocations, not 40. */
  CHECK(s1.pool_allocations - s0.pool_allocations <= 2);
  CHECK(s1.pool_misses - s0.pool_misses >= NA);
  release_many(a, NA);
  REQUIRE_OK(nxv_device_synchronize(d));
  /* Another class, 58 MiB: the free 1.5 MiB buffers go back to their
   * chunk and merge, so it fits where they were. */
  fill_many(d, b, NB, cb, 2000.0f);
  CHECK(check_many(b, NB, cb, 2000.0f));
  REQUIRE_OK(nxv_device_stats(d, &s2));
  CHECK(s2.pool_allocations == s1.pool_allocations);
  /* A third class beside the live second: the rest of the chunks, then
   * one more chunk at most. Every range stays distinct. */
  fill_many(d, c, NC, cc, 3000.0f);
  CHECK(check_many(c, NC, cc, 3000.0f));
  CHECK(check_many(b, NB, cb, 2000.0f));
  REQUIRE_OK(nxv_device_stats(d, &s3));
  CHECK(s3.pool_allocations - s2.pool_allocations <= 1);
  CHECK(s3.pool_bytes_reserved >= s3.pool_bytes_in_use);
  release_many(b, NB);
  release_many(c, NC);
  REQUIRE_OK(nxv_device_synchronize(d));
  /* Wholly free chunks are freed by a trim. */
  REQUIRE_OK(nxv_device_stats(d, &s1));
  REQUIRE_OK(nxv_device_trim(d));
  REQUIRE_OK(nxv_device_stats(d, &s2));
  CHECK(s2.pool_bytes_reserved + (58u << 20) <= s1.pool_bytes_reserved);
  CHECK(s2.pool_frees > s1.pool_frees);
  /* And the pool carves again afterwards. */
  fill_many(d, a, 4, ca, 4000.0f);
  CHECK(check_many(a, 4, ca, 4000.0f));
  release_many(a, 4);
  nxv_device_release(d);
}

NXV_TEST(pool, small_live_tensors_do_not_pin_chunks_of_large_ones) {
  nxv_device_config cfg = {.disable_disk_cache = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  nxv_tensor *small[3], *big[4];
  fill_many(d, small, 1, 1000, 7.0f);            /* a slab */
  fill_many(d, big, 4, 1u << 20, 70.0f);         /* 4 MiB buffers */
  fill_many(d, small + 1, 2, 20000, 17.0f);      /* slabs, after them */
  CHECK(check_many(big, 4, 1u << 20, 70.0f));
  release_many(big, 4);
  REQUIRE_OK(nxv_device_synchronize(d));
  nxv_stats s1, s2;
  REQUIRE_OK(nxv_device_stats(d, &s1));
  REQUIRE_OK(nxv_device_trim(d));
  REQUIRE_OK(nxv_device_stats(d, &s2));
  /* The buffers' chunk is freed whole while the small tensors live. */
  CHECK(s2.pool_bytes_reserved + (16u << 20) <= s1.pool_bytes_reserved);
  CHECK(check_many(small, 1, 1000, 7.0f));
  CHECK(check_many(small + 1, 2, 20000, 17.0f));
  release_many(small, 3);
  nxv_device_release(d);
}

NXV_TEST(pool, chunks_smaller_than_a_buffer_fit_it) {
  /* Chunks of 1 MiB: a 1.5 MiB buffer gets a chunk of its own size. */
  nxv_device_config cfg = {.pool_chunk_bytes = 1u << 20, .disable_disk_cache = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  enum { N = 6 };
  const uint64_t count = 393216;
  nxv_tensor *t[N];
  nxv_stats s0, s1, s2;
  REQUIRE_OK(nxv_device_stats(d, &s0));
  fill_many(d, t, N, count, 5.0f);
  CHECK(check_many(t, N, count, 5.0f));
  REQUIRE_OK(nxv_device_stats(d, &s1));
  CHECK(s1.pool_allocations - s0.pool_allocations >= N);
  CHECK(s1.pool_bytes_reserved - s0.pool_bytes_reserved >= N * count * 4);
  CHECK(s1.pool_bytes_reserved - s0.pool_bytes_reserved < N * (count * 4 + (1u << 20)));
  release_many(t, N);
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_trim(d));
  REQUIRE_OK(nxv_device_stats(d, &s2));
  CHECK(s2.pool_bytes_reserved + N * count * 4 <= s1.pool_bytes_reserved);
  nxv_device_release(d);
}

NXV_TEST(pool, staging_overflow_uses_dedicated_buffers) {
  nxv_device_config cfg = {.staging_bytes = 1 << 20, .disable_disk_cache = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  enum { N = 3 << 20 / 4 * 4 }; /* 3 MiB of s32: larger than the ring */
  int32_t *v = malloc(sizeof(int32_t) * N), *got = malloc(sizeof(int32_t) * N);
  for (int i = 0; i < N; i++) v[i] = i * 7 - 3;
  nxv_tensor *t = upload_s32(d, v, N);
  REQUIRE(t);
  memset(got, 0, sizeof(int32_t) * N);
  REQUIRE_OK(nxv_tensor_download(t, 0, N, got));
  CHECK(memcmp(v, got, sizeof(int32_t) * N) == 0);
  /* Many uploads that together exceed the ring, none waiting. */
  nxv_tensor *small[64];
  for (int i = 0; i < 64; i++) small[i] = upload_s32(d, v + i, 8192);
  for (int i = 0; i < 64; i++) {
    REQUIRE(small[i]);
    REQUIRE_OK(nxv_tensor_download(small[i], 100, 1, got));
    CHECK(got[0] == v[i + 100]);
    nxv_tensor_release(small[i]);
  }
  nxv_stats s;
  REQUIRE_OK(nxv_device_stats(d, &s));
  CHECK(s.staging_dedicated >= 2);
  CHECK(s.staging_bytes == 1 << 20);
  nxv_tensor_release(t);
  free(v);
  free(got);
  nxv_device_release(d);
}

/* ------------------------------------------------------------------ */
/* Pipeline cache file                                                 */
/* ------------------------------------------------------------------ */

static void make_temp_dir(char *out, size_t cap) {
  snprintf(out, cap, "/tmp/nxv-pcache-XXXXXX");
  if (!mkdtemp(out)) out[0] = 0;
}

static void remove_dir(const char *dir) {
  DIR *dd = opendir(dir);
  if (!dd) return;
  struct dirent *e;
  char path[1024];
  while ((e = readdir(dd))) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(dd);
  rmdir(dir);
}

/* Opens a device on dir, builds a few pipelines, returns its stats. */
static nxv_status use_cache(const char *dir, nxv_stats *out) {
  nxv_device_config cfg = {.cache_dir = dir};
  nxv_device *d;
  nxv_status st = nxv_device_open(-1, &cfg, &d);
  if (st != NXV_OK) return st;
  float v[16];
  for (int i = 0; i < 16; i++) v[i] = (float)i;
  nxv_tensor *a = NULL, *b = NULL, *c = NULL;
  int64_t shape[1] = {16};
  nxv_view va = {NULL, 0, NULL};
  st = nxv_tensor_upload(d, NXV_F32, 16, v, &a);
  va.tensor = a;
  if (st == NXV_OK) st = nxv_binary(d, NXV_MUL, 1, shape, &va, &va, &b);
  if (st == NXV_OK) st = nxv_reduce(d, NXV_REDUCE_SUM, 1, shape, &va, 1, &c);
  float sum = 0;
  if (st == NXV_OK) st = nxv_tensor_download(c, 0, 1, &sum);
  if (st == NXV_OK && sum != 120.0f) st = NXV_ERR_VULKAN;
  nxv_device_stats(d, out);
  nxv_tensor_release(a);
  nxv_tensor_release(b);
  nxv_tensor_release(c);
  nxv_device_release(d); /* saves the file */
  return st;
}

/* Entry point of the child process (test_main.c dispatches to it):
 * exits 0 if the cache file in dir was loaded, 2 if rejected, 1 on error. */
int test_pcache_child(const char *dir);
int test_pcache_child(const char *dir) {
  nxv_stats s;
  if (use_cache(dir, &s) != NXV_OK) return 1;
  if (s.cache_file_loaded && !s.cache_file_rejected) return 0;
  fprintf(stderr, "  child: loaded %d rejected %d (%s)\n", s.cache_file_loaded,
          s.cache_file_rejected, s.cache_reject_reason);
  return 2;
}

static int run_child(const char *dir) {
  char *args[] = {"--pcache-child", (char *)dir, NULL};
  return test_run_self(args, environ);
}

static bool read_all(const char *path, unsigned char **out, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  *out = malloc((size_t)len + 1);
  *n = fread(*out, 1, (size_t)len, f);
  fclose(f);
  return *n == (size_t)len;
}

static void write_all(const char *path, const unsigned char *d, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return;
  fwrite(d, 1, n, f);
  fclose(f);
}

NXV_TEST(pcache, written_reloaded_by_a_second_process_and_rejections) {
  char dir[256];
  make_temp_dir(dir, sizeof dir);
  REQUIRE(dir[0]);
  nxv_stats s;
  REQUIRE_OK(use_cache(dir, &s));
  CHECK(!s.cache_file_loaded);
  CHECK(!s.cache_file_rejected); /* absent is a plain miss */
  CHECK(s.pipelines >= 2);
  char path[600];
  snprintf(path, sizeof path, "%s", s.cache_path);
  CHECK(strncmp(path, dir, strlen(dir)) == 0);
  unsigned char *good;
  size_t n;
  REQUIRE(read_all(path, &good, &n));
  CHECK(n >= 64 + 32);
  CHECK(memcmp(good, "NXVKPCCH", 8) == 0);

  /* A second process loads it. */
  CHECK_MSG(run_child(dir) == 0, "second process did not load the cache");

  /* Every kind of damage is a clean miss with a reason, never a crash;
   * the device works and writes a good file again on close. */
  struct {
    const char *what;
    size_t len;
    size_t flip; /* byte to corrupt, or SIZE_MAX */
    const char *reason;
  } cases[] = {
      {"truncated header", 10, SIZE_MAX, "truncated"},
      {"truncated payload", n - 5, SIZE_MAX, "size"},
      {"bad magic", n, 0, "magic"},
      {"other format version", n, 8, "version"},
      {"foreign vendor", n, 16, "vendor"},
      {"foreign device", n, 20, "device"},
      {"other driver", n, 24, "driver"},
      {"other uuid", n, 30, "UUID"},
      {"payload corrupted", n, 64 + 20, "hash"},
      {"empty file", 0, SIZE_MAX, "truncated"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    unsigned char *bad = malloc(n);
    memcpy(bad, good, n);
    if (cases[i].flip != SIZE_MAX) bad[cases[i].flip] ^= 0x5A;
    write_all(path, bad, cases[i].len);
    free(bad);
    CHECK_OK(use_cache(dir, &s));
    CHECK_MSG(s.cache_file_rejected && !s.cache_file_loaded,
              "%s: not rejected", cases[i].what);
    CHECK_MSG(strstr(s.cache_reject_reason, cases[i].reason) != NULL,
              "%s: reason '%s'", cases[i].what, s.cache_reject_reason);
    CHECK_MSG(run_child(dir) == 0, "%s: the rewritten file does not load",
              cases[i].what);
  }
  /* Random garbage of the right length. */
  unsigned char *garbage = malloc(n);
  uint64_t seed = 42;
  for (size_t i = 0; i < n; i++) garbage[i] = (unsigned char)test_rand_u64(&seed);
  write_all(path, garbage, n);
  free(garbage);
  CHECK_OK(use_cache(dir, &s));
  CHECK(s.cache_file_rejected);
  /* An unwritable location: saving fails cleanly, the device still works. */
  nxv_device_config cfg = {.cache_dir = "/proc/nxv-no-such-dir"};
  nxv_device *d;
  REQUIRE_OK(nxv_device_open(-1, &cfg, &d));
  CHECK(nxv_device_save_pipeline_cache(d) == NXV_ERR_IO);
  CHECK(strlen(nxv_last_error()) > 0);
  nxv_device_release(d);
  free(good);
  remove_dir(dir);
}

NXV_TEST(pcache, concurrent_writers_leave_a_valid_file) {
  char dir[256];
  make_temp_dir(dir, sizeof dir);
  REQUIRE(dir[0]);
  nxv_stats s;
  REQUIRE_OK(use_cache(dir, &s));
  char self[1024];
  REQUIRE(test_self_exe(self, sizeof self));
  pid_t pids[4];
  for (int i = 0; i < 4; i++) {
    char *argv[] = {self, "--pcache-child", dir, NULL};
    REQUIRE(posix_spawn(&pids[i], self, NULL, NULL, argv, environ) == 0);
  }
  for (int i = 0; i < 4; i++) {
    int status;
    waitpid(pids[i], &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  CHECK(run_child(dir) == 0);
  DIR *dd = opendir(dir);
  int files = 0;
  for (struct dirent *e; dd && (e = readdir(dd));)
    if (e->d_name[0] != '.') files++;
  if (dd) closedir(dd);
  CHECK_MSG(files == 1, "%d files left (temporary files not cleaned?)", files);
  remove_dir(dir);
}

/* ------------------------------------------------------------------ */
/* Sticky errors and shutdown                                          */
/* ------------------------------------------------------------------ */

typedef struct waiter_ctx {
  nxv_device *d;
  nxv_tensor *src;
  nxv_status status;
} waiter_ctx;

static void *waiter(void *arg) {
  waiter_ctx *w = arg;
  nxv_tensor *y = NULL;
  nxv_status st = add_s32(w->d, w->src, w->src, 16, &y);
  int32_t got[16];
  if (st == NXV_OK) st = nxv_tensor_download(y, 0, 16, got);
  w->status = st;
  nxv_tensor_release(y);
  return NULL;
}

static void sticky_case(nxv_status fault) {
  nxv_device_config cfg = {.disable_disk_cache = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  int32_t v[16] = {0};
  nxv_tensor *x = upload_s32(d, v, 16), *keep = NULL;
  REQUIRE(x);
  REQUIRE_OK(add_s32(d, x, x, 16, &keep));
  REQUIRE_OK(nxv_device_synchronize(d));
  nxv_device_inject_fault(d, fault);
  waiter_ctx w[8];
  pthread_t th[8];
  for (int i = 0; i < 8; i++) {
    w[i] = (waiter_ctx){d, x, NXV_OK};
    pthread_create(&th[i], NULL, waiter, &w[i]);
  }
  for (int i = 0; i < 8; i++) {
    pthread_join(th[i], NULL);
    CHECK_MSG(w[i].status == fault, "waiter %d got %s", i,
              nxv_status_name(w[i].status));
  }
  const char *msg = NULL;
  CHECK(nxv_device_status(d, &msg) == fault);
  CHECK(msg && strstr(msg, "injected") != NULL);
  /* Later ops fail fast with the same cause. */
  nxv_tensor *y = (nxv_tensor *)0x1;
  CHECK(add_s32(d, x, x, 16, &y) == fault);
  CHECK(y == (nxv_tensor *)0x1);
  CHECK(strstr(nxv_last_error(), "injected") != NULL);
  int32_t got[16];
  CHECK(nxv_tensor_download(keep, 0, 16, got) == fault);
  CHECK(nxv_device_synchronize(d) == fault);
  nxv_tensor_release(keep);
  nxv_tensor_release(x);
  nxv_device_release(d);
  /* A new context works. */
  d = open_with(&cfg);
  REQUIRE(d);
  x = upload_s32(d, (int32_t[16]){1, 2, 3}, 16);
  REQUIRE(x);
  REQUIRE_OK(add_s32(d, x, x, 16, &y));
  REQUIRE_OK(nxv_tensor_download(y, 0, 16, got));
  CHECK(got[2] == 6);
  nxv_tensor_release(x);
  nxv_tensor_release(y);
  nxv_device_release(d);
}

NXV_TEST(error, injected_device_loss_is_sticky) { sticky_case(NXV_ERR_DEVICE_LOST); }
NXV_TEST(error, injected_submit_failure_is_sticky) { sticky_case(NXV_ERR_SUBMIT_FAILED); }

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A [64, 65536] x [65536, 64] f32 product (0.5 GFLOP into a 16 KiB
 * result): A[i][p] = prev[64 i] (a zero k stride: it reads prev, so each
 * product waits for the one before it, on any GPU), B the first 65536 x
 * 64 elements of x. */
static nxv_status long_product(nxv_device *d, nxv_tensor *x, nxv_tensor *prev,
                               nxv_tensor **out) {
  nxv_matmul_desc m = {.batch = 1, .m = 64, .n = 64, .k = 1 << 16,
                       .a = prev, .a_strides = {0, 64, 0},
                       .b = x, .b_strides = {0, 64, 1}};
  return nxv_matmul(d, &m, out);
}

/* n more products chained after *cur, which becomes the last. */
static nxv_status chain_products(nxv_device *d, nxv_tensor *x, nxv_tensor **cur, long n) {
  for (long i = 0; i < n; i++) {
    nxv_tensor *y;
    nxv_status st = long_product(d, x, *cur, &y);
    if (st != NXV_OK) return st;
    nxv_tensor_release(*cur);
    *cur = y;
  }
  return NXV_OK;
}

typedef struct gpu_waiter {
  nxv_device *d;
  nxv_tensor *t; /* NULL: synchronize instead of downloading */
  nxv_status status;
  double woke_s;
} gpu_waiter;

static void *gpu_waiter_main(void *arg) {
  gpu_waiter *w = arg;
  float v;
  w->status = w->t ? nxv_tensor_download(w->t, 0, 1, &v) : nxv_device_synchronize(w->d);
  w->woke_s = mono_s();
  return NULL;
}

/* A device lost while seconds of work are on the GPU: every waiter (on
 * that work, on work still queued, on synchronize) wakes with the error
 * within a second, later ops fail fast, and releasing the context waits
 * for the GPU to finish before freeing what it uses. */
NXV_TEST(error, injected_loss_wakes_waiters_of_gpu_work) {
  nxv_device_config cfg = {.disable_disk_cache = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  float half = 0.5f, zero = 0.0f;
  nxv_tensor *x, *cur;
  REQUIRE_OK(nxv_fill(d, NXV_F32, 64 << 16, &half, &x));
  REQUIRE_OK(nxv_fill(d, NXV_F32, 64 * 64, &zero, &cur));
  /* Calibrate: enough chained products for about 2 s of GPU work (their
   * results are small: what is queued fits any device). The first product
   * compiles the pipeline; fast devices time 64 more to see past the
   * submit latency. */
  REQUIRE_OK(chain_products(d, x, &cur, 1));
  REQUIRE_OK(nxv_device_synchronize(d));
  double per = 0;
  for (long n = 4; n <= 64; n *= 16) {
    double t0 = mono_s();
    REQUIRE_OK(chain_products(d, x, &cur, n));
    REQUIRE_OK(nxv_device_synchronize(d));
    per = (mono_s() - t0) / (double)n;
    if (per * (double)n > 0.05) break;
  }
  long chain = (long)(2.0 / (per > 1e-6 ? per : 1e-6));
  if (chain < 8) chain = 8;
  if (chain > 200000) chain = 200000;
  REQUIRE_OK(chain_products(d, x, &cur, chain));
  /* Work queued behind it, and waiters on both. */
  nxv_tensor *later;
  REQUIRE_OK(nxv_unary(d, NXV_NEG, 1, (int64_t[]){64 * 64}, &(nxv_view){cur, 0, NULL},
                       &later));
  enum { W = 6 };
  gpu_waiter w[W];
  pthread_t th[W];
  for (int i = 0; i < W; i++) {
    w[i] = (gpu_waiter){d, i % 3 == 0 ? cur : i % 3 == 1 ? later : NULL, NXV_OK, 0};
    pthread_create(&th[i], NULL, gpu_waiter_main, &w[i]);
  }
  /* (The ring's backpressure can hold the loop above until the GPU has
   * only the last few thousand products left: inject soon.) */
  struct timespec pause = {0, 30 * 1000 * 1000};
  nanosleep(&pause, NULL);
  nxv_stats st;
  REQUIRE_OK(nxv_device_stats(d, &st));
  CHECK_MSG(st.ops_completed < st.ops_enqueued, "the work finished before the loss");
  double injected = mono_s();
  nxv_device_inject_fault(d, NXV_ERR_DEVICE_LOST);
  double latest = 0;
  for (int i = 0; i < W; i++) {
    pthread_join(th[i], NULL);
    CHECK_MSG(w[i].status == NXV_ERR_DEVICE_LOST, "waiter %d got %s", i,
              nxv_status_name(w[i].status));
    if (w[i].woke_s - injected > latest) latest = w[i].woke_s - injected;
  }
  CHECK_MSG(latest < 1.0, "the last waiter woke %.3f s after the loss", latest);
  printf("    %ld products queued (%.2f ms each); waiters woke within %.0f us\n", chain,
         per * 1e3, latest * 1e6);
  const char *msg = NULL;
  CHECK(nxv_device_status(d, &msg) == NXV_ERR_DEVICE_LOST);
  /* Taken at once with batches in flight, or by the next submission when
   * the scheduler still held the work (a loaded CPU device): either way
   * the same injected loss. */
  CHECK(msg && strstr(msg, "injected") != NULL);
  /* Later ops fail fast with the same cause. */
  double t1 = mono_s();
  nxv_tensor *z = NXV_TEST_SENTINEL;
  CHECK(long_product(d, x, x, &z) == NXV_ERR_DEVICE_LOST);
  CHECK(z == NXV_TEST_SENTINEL);
  CHECK(strstr(nxv_last_error(), "injected") != NULL);
  float v;
  CHECK(nxv_tensor_download(later, 0, 1, &v) == NXV_ERR_DEVICE_LOST);
  CHECK(mono_s() - t1 < 0.1);
  nxv_tensor_release(later);
  nxv_tensor_release(cur);
  nxv_tensor_release(x);
  nxv_device_release(d); /* waits for the GPU, then frees */
  /* A new context works. */
  d = open_with(&cfg);
  REQUIRE(d);
  nxv_tensor *a = upload_s32(d, (int32_t[4]){1, 2, 3, 4}, 4), *b = NULL;
  REQUIRE(a);
  REQUIRE_OK(add_s32(d, a, a, 4, &b));
  int32_t got[4];
  REQUIRE_OK(nxv_tensor_download(b, 0, 4, got));
  CHECK(got[3] == 8);
  nxv_tensor_release(a);
  nxv_tensor_release(b);
  nxv_device_release(d);
}

/* A GPU that stops making progress (nxv_device_inject_hang: a batch that
 * waits on a semaphore only the release signals) with batch_timeout_ms:
 * every waiter (on the hung work, on work queued behind it, on
 * synchronize) wakes with NXV_ERR_DEVICE_LOST naming the batch once it has
 * been the oldest in flight that long, later ops fail fast, and the
 * release (which ends the hang) waits for the work and frees it. */
NXV_TEST(error, batch_timeout_fails_a_hung_gpu) {
  nxv_device_config cfg = {.disable_disk_cache = true, .batch_timeout_ms = 300};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  nxv_tensor *a = upload_s32(d, (int32_t[4]){1, 2, 3, 4}, 4), *b = NULL, *c = NULL;
  REQUIRE(a);
  int32_t got[4];
  REQUIRE_OK(add_s32(d, a, a, 4, &b)); /* its pipeline exists before the hang */
  REQUIRE_OK(nxv_tensor_download(b, 0, 4, got));
  CHECK(got[3] == 8);
  nxv_tensor_release(b);
  nxv_device_inject_hang(d);
  double queued = mono_s();
  REQUIRE_OK(add_s32(d, a, a, 4, &b));
  REQUIRE_OK(add_s32(d, b, a, 4, &c));
  enum { W = 3 };
  gpu_waiter w[W] = {{d, b, NXV_OK, 0}, {d, c, NXV_OK, 0}, {d, NULL, NXV_OK, 0}};
  pthread_t th[W];
  for (int i = 0; i < W; i++) REQUIRE(pthread_create(&th[i], NULL, gpu_waiter_main, &w[i]) == 0);
  for (int i = 0; i < W; i++) {
    pthread_join(th[i], NULL);
    double after = w[i].woke_s - queued;
    CHECK_MSG(w[i].status == NXV_ERR_DEVICE_LOST, "waiter %d got %s", i,
              nxv_status_name(w[i].status));
    CHECK_MSG(after >= 0.29 && after < 3.0, "waiter %d woke %.3f s after the op", i, after);
  }
  const char *msg = NULL;
  CHECK(nxv_device_status(d, &msg) == NXV_ERR_DEVICE_LOST);
  CHECK_MSG(msg && strstr(msg, "has not completed 300 ms") && strstr(msg, "batch_timeout_ms"),
            "message: %s", msg ? msg : "(none)");
  nxv_stats st;
  REQUIRE_OK(nxv_device_stats(d, &st));
  CHECK_MSG(st.ops_completed < st.ops_enqueued, "%llu of %llu ops completed",
            (unsigned long long)st.ops_completed, (unsigned long long)st.ops_enqueued);
  /* Later ops fail fast with the same cause. */
  double t1 = mono_s();
  nxv_tensor *z = NXV_TEST_SENTINEL;
  CHECK(add_s32(d, a, a, 4, &z) == NXV_ERR_DEVICE_LOST);
  CHECK(z == NXV_TEST_SENTINEL);
  CHECK(strstr(nxv_last_error(), "batch_timeout_ms") != NULL);
  CHECK(mono_s() - t1 < 0.1);
  nxv_tensor_release(c);
  nxv_tensor_release(b);
  nxv_tensor_release(a);
  nxv_device_release(d); /* ends the hang, waits for the GPU, then frees */
}

NXV_TEST(shutdown, release_with_work_in_flight) {
  for (int round = 0; round < 3; round++) {
    nxv_device *d = test_open_device();
    REQUIRE(d);
    enum { N = 1 << 16 };
    nxv_tensor *x;
    float one = 1.0f;
    REQUIRE_OK(nxv_fill(d, NXV_F32, N, &one, &x));
    for (int i = 0; i < 500; i++) {
      int64_t shape[1] = {N};
      nxv_view v = {x, 0, NULL};
      nxv_tensor *y;
      REQUIRE_OK(nxv_binary(d, NXV_ADD, 1, shape, &v, &v, &y));
      nxv_tensor_release(x);
      x = y;
    }
    if (round == 1) nxv_device_inject_fault(d, NXV_ERR_DEVICE_LOST);
    if (round == 2) {
      /* A download in another state: started, then everything released. */
      float got;
      nxv_status st = nxv_tensor_download(x, 0, 1, &got);
      CHECK(st == NXV_OK);
    }
    nxv_tensor_release(x);
    nxv_device_release(d); /* drains (or cancels) without leaking */
  }
}

NXV_TEST(sched, device_copy_every_dtype_and_odd_sizes) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  const uint64_t counts[] = {0, 1, 3, 5, 257, 100003};
  unsigned char *src = malloc(100003 * 16), *got = malloc(100003 * 16);
  uint64_t seed = 9;
  for (size_t i = 0; i < 100003 * 16; i++) src[i] = (unsigned char)test_rand_u64(&seed);
  for (int t = 0; t < NXV_DTYPE_COUNT; t++) {
    size_t es = nxv_dtype_size((nxv_dtype)t);
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
      nxv_tensor *a, *b;
      REQUIRE_OK(nxv_tensor_upload(d, (nxv_dtype)t, counts[c], src, &a));
      REQUIRE_OK(nxv_tensor_copy(a, &b));
      nxv_tensor_release(a); /* the queued copy keeps the source alive */
      CHECK(nxv_tensor_dtype(b) == (nxv_dtype)t);
      CHECK(nxv_tensor_count(b) == counts[c]);
      memset(got, 0xAB, counts[c] * es);
      CHECK_OK(nxv_tensor_download(b, 0, counts[c], got));
      CHECK_MSG(memcmp(got, src, counts[c] * es) == 0, "%s x %llu",
                nxv_dtype_name((nxv_dtype)t), (unsigned long long)counts[c]);
      nxv_tensor_release(b);
    }
  }
  free(src);
  free(got);
  nxv_device_release(d);
}

/* n f32 ones doubled `steps` times by queued adds (each element 2^steps),
 * or NULL on failure. */
static nxv_tensor *doubled(nxv_device *d, uint64_t n, int steps) {
  float one = 1.0f;
  nxv_tensor *x;
  if (nxv_fill(d, NXV_F32, n, &one, &x) != NXV_OK) return NULL;
  int64_t shape[1] = {(int64_t)n};
  for (int i = 0; i < steps; i++) {
    nxv_view v = {x, 0, NULL};
    nxv_tensor *y;
    nxv_status st = nxv_binary(d, NXV_ADD, 1, shape, &v, &v, &y);
    nxv_tensor_release(x);
    if (st != NXV_OK) return NULL;
    x = y;
  }
  return x;
}

NXV_TEST(sched, download_in_steps) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  enum { N = 1 << 16, STEPS = 200 };
  nxv_tensor *x = doubled(d, N, STEPS);
  REQUIRE(x);
  /* 2^200 overflows to inf; read a chain of 20 steps instead, queued
   * behind the long one. */
  nxv_tensor *z = doubled(d, N, 20);
  REQUIRE(z);
  /* Released while in flight: nothing leaks, the ring space returns. */
  nxv_download *gone;
  REQUIRE_OK(nxv_download_start(x, 0, N, &gone));
  nxv_download_release(gone);
  nxv_download *dl = NULL;
  REQUIRE_OK(nxv_download_start(z, N - 5, 5, &dl));
  nxv_tensor_release(z); /* the queued copy keeps the buffer */
  CHECK(nxv_download_bytes(dl) == 5 * sizeof(float));
  bool done = false;
  CHECK_OK(nxv_download_poll(dl, 0, &done));
  float got[5] = {-1, -1, -1, -1, -1};
  if (!done) CHECK(nxv_download_read(dl, got) == NXV_ERR_INVALID_ARGUMENT);
  while (!done) CHECK_OK(nxv_download_poll(dl, 100, &done));
  CHECK_OK(nxv_download_wait(dl)); /* idempotent once done */
  CHECK_OK(nxv_download_read(dl, got));
  for (int i = 0; i < 5; i++) CHECK_MSG(got[i] == 1048576.0f, "got[%d] = %g", i, (double)got[i]);
  nxv_download_release(dl);
  /* Empty and out-of-range requests. */
  REQUIRE_OK(nxv_download_start(x, N, 0, &dl));
  CHECK_OK(nxv_download_poll(dl, 0, &done));
  CHECK(done && nxv_download_bytes(dl) == 0);
  CHECK_OK(nxv_download_read(dl, NULL));
  nxv_download_release(dl);
  dl = (nxv_download *)0x1;
  CHECK(nxv_download_start(x, N - 1, 2, &dl) == NXV_ERR_INVALID_ARGUMENT);
  CHECK(dl == NULL);
  CHECK(strstr(nxv_last_error(), "from a tensor of") != NULL);
  nxv_download_release(NULL);
  /* After a device failure: the pending download reports it. */
  REQUIRE_OK(nxv_download_start(x, 0, 1, &dl));
  REQUIRE_OK(nxv_device_synchronize(d));
  nxv_device_inject_fault(d, NXV_ERR_DEVICE_LOST);
  nxv_download *late = NULL;
  nxv_status st = nxv_download_start(x, 0, 1, &late);
  if (st == NXV_OK) st = nxv_download_wait(late);
  CHECK_MSG(st == NXV_ERR_DEVICE_LOST, "got %s", nxv_status_name(st));
  nxv_download_release(late);
  CHECK_OK(nxv_download_wait(dl)); /* completed before the fault */
  nxv_download_release(dl);
  nxv_tensor_release(x);
  nxv_device_release(d);
}

NXV_TEST(sched, download_in_place) {
  /* Small results in mapped memory are read in place: no copy and no
   * further submission once their batch is on the GPU; with
   * unmapped_small the copy path serves the same reads. */
  for (int m = 0; m < 2; m++) {
    nxv_device_config cfg = {.disable_disk_cache = true,
                             .max_batch_nodes = 4,
                             .unmapped_small = m == 1};
    nxv_device *d = open_with(&cfg);
    REQUIRE(d);
    nxv_device_info info;
    REQUIRE_OK(nxv_device_info_get(d, &info));
    int32_t v[16];
    for (int i = 0; i < 16; i++) v[i] = 3 * i - 7;
    nxv_tensor *x = upload_s32(d, v, 16), *y = NULL;
    REQUIRE(x);
    REQUIRE_OK(add_s32(d, x, x, 16, &y));
    REQUIRE_OK(nxv_device_synchronize(d));
    nxv_stats st0, st1;
    REQUIRE_OK(nxv_device_stats(d, &st0));
    bool mapped = st0.pool_bytes_mapped > 0;
    if (m == 1) CHECK(!mapped);
    /* lavapipe's memory is host-visible: small buffers must be mapped. */
    if (m == 0 && info.type == NXV_DEVICE_CPU) CHECK(mapped);
    int32_t got[16];
    memset(got, 0x5a, sizeof got);
    REQUIRE_OK(nxv_tensor_download(y, 0, 16, got));
    for (int i = 0; i < 16; i++) CHECK_MSG(got[i] == 2 * v[i], "got[%d] = %d", i, got[i]);
    memset(got, 0x5a, sizeof got);
    REQUIRE_OK(nxv_tensor_download(y, 5, 3, got));
    for (int i = 0; i < 3; i++) CHECK(got[i] == 2 * v[5 + i]);
    CHECK(got[3] == 0x5a5a5a5a);
    REQUIRE_OK(nxv_device_stats(d, &st1));
    CHECK_MSG(st1.submits == st0.submits + (mapped ? 0 : 2),
              "mode %d: %llu submits for two downloads", m,
              (unsigned long long)(st1.submits - st0.submits));
    CHECK(st1.reads_in_place == st0.reads_in_place + (mapped ? 2 : 0));
    if (mapped) CHECK(st1.ops_completed == st1.ops_enqueued);
    /* A result read at once, behind a chain spanning many batches, and
     * one downloaded while its batch is still open. */
    nxv_tensor *z = doubled(d, 16, 40);
    REQUIRE(z);
    float f[16];
    memset(f, 0, sizeof f);
    REQUIRE_OK(nxv_tensor_download(z, 0, 16, f));
    for (int i = 0; i < 16; i++) CHECK_MSG(f[i] == 0x1p40f, "f[%d] = %g", i, (double)f[i]);
    nxv_tensor *w = NULL;
    REQUIRE_OK(add_s32(d, y, x, 16, &w));
    memset(got, 0x5a, sizeof got);
    REQUIRE_OK(nxv_tensor_download(w, 0, 16, got));
    for (int i = 0; i < 16; i++) CHECK(got[i] == 3 * v[i]);
    nxv_tensor_release(w);
    nxv_tensor_release(z);
    nxv_tensor_release(y);
    nxv_tensor_release(x);
    nxv_device_release(d);
  }
  /* Open batches wait for idle_flush_us: the in-place read must flush the
   * batch holding its writer rather than wait for it. */
  nxv_device_config slow = {.disable_disk_cache = true, .idle_flush_us = 30000000};
  nxv_device *d = open_with(&slow);
  REQUIRE(d);
  int32_t v[4] = {1, 2, 3, 4}, got[4] = {0};
  nxv_tensor *x = upload_s32(d, v, 4), *y = NULL;
  REQUIRE(x);
  REQUIRE_OK(add_s32(d, x, x, 4, &y));
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  REQUIRE_OK(nxv_tensor_download(y, 0, 4, got));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  for (int i = 0; i < 4; i++) CHECK(got[i] == 2 * v[i]);
  CHECK_MSG(t1.tv_sec - t0.tv_sec < 10, "the download waited for the idle flush");
  nxv_tensor_release(y);
  nxv_tensor_release(x);
  nxv_device_release(d);
}

NXV_TEST(sched, download_in_place_every_range) {
  /* In-place reads copy through aligned 16-byte loads covering the range:
   * every range of a 64-byte u8 result (unaligned starts and ends,
   * straddling 16-byte groups) and of an 8-element f64 one comes back
   * exactly, with nothing written past it. */
  nxv_device_config cfg = {.disable_disk_cache = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  uint8_t v[64];
  for (int i = 0; i < 64; i++) v[i] = (uint8_t)(7 * i + 3);
  double w[8];
  for (int i = 0; i < 8; i++) w[i] = -1.25 * i + 0.5;
  nxv_tensor *x, *y;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_U8, 64, v, &x));
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F64, 8, w, &y));
  REQUIRE_OK(nxv_device_synchronize(d));
  nxv_stats s0, s1;
  REQUIRE_OK(nxv_device_stats(d, &s0));
  uint64_t reads = 0;
  uint8_t got[80];
  for (int off = 0; off < 64; off++)
    for (int n = 1; off + n <= 64; n++) {
      memset(got, 0xa5, sizeof got);
      REQUIRE_OK(nxv_tensor_download(x, (uint64_t)off, (uint64_t)n, got));
      reads++;
      bool ok = memcmp(got, v + off, (size_t)n) == 0;
      for (int i = n; i < (int)sizeof got; i++) ok = ok && got[i] == 0xa5;
      CHECK_MSG(ok, "u8 elements [%d, %d)", off, off + n);
    }
  for (int off = 0; off < 8; off++)
    for (int n = 1; off + n <= 8; n++) {
      double g[9];
      for (int i = 0; i < 9; i++) g[i] = 99.0;
      REQUIRE_OK(nxv_tensor_download(y, (uint64_t)off, (uint64_t)n, g));
      reads++;
      bool ok = g[n] == 99.0;
      for (int i = 0; i < n; i++) ok = ok && g[i] == w[off + i];
      CHECK_MSG(ok, "f64 elements [%d, %d)", off, off + n);
    }
  REQUIRE_OK(nxv_device_stats(d, &s1));
  nxv_device_info info;
  REQUIRE_OK(nxv_device_info_get(d, &info));
  /* lavapipe's memory is host-visible: small buffers must be mapped. */
  if (info.type == NXV_DEVICE_CPU) CHECK(s0.pool_bytes_mapped > 0);
  if (s0.pool_bytes_mapped > 0)
    CHECK_MSG(s1.reads_in_place - s0.reads_in_place == reads, "%llu of %llu reads in place",
              (unsigned long long)(s1.reads_in_place - s0.reads_in_place),
              (unsigned long long)reads);
  else
    printf("    results are not in mapped memory on this device: reads go through copies\n");
  nxv_tensor_release(y);
  nxv_tensor_release(x);
  nxv_device_release(d);
}

NXV_TEST(sched, upload_in_place) {
  /* A small upload into mapped memory writes the buffer in place, with no
   * node: ops queued right after it read the new bytes, every round, while
   * the buffers of earlier rounds' results come back from the pool. */
  nxv_device_config cfg = {.disable_disk_cache = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  nxv_stats s0, s1;
  REQUIRE_OK(nxv_device_stats(d, &s0));
  int32_t base[16];
  for (int i = 0; i < 16; i++) base[i] = 5 * i - 9;
  nxv_tensor *x = upload_s32(d, base, 16);
  REQUIRE(x);
  REQUIRE_OK(nxv_device_stats(d, &s1));
  nxv_device_info info;
  REQUIRE_OK(nxv_device_info_get(d, &info));
  /* lavapipe's memory is host-visible: small buffers must be mapped. */
  if (info.type == NXV_DEVICE_CPU) CHECK(s1.pool_bytes_mapped > 0);
  if (s1.pool_bytes_mapped > 0)
    CHECK_MSG(s1.ops_enqueued == s0.ops_enqueued, "%llu nodes for a small upload",
              (unsigned long long)(s1.ops_enqueued - s0.ops_enqueued));
  else
    printf("    small buffers are not in mapped memory on this device: uploads copy\n");
  for (int round = 0; round < 200; round++) {
    int32_t v[16], got[16];
    for (int i = 0; i < 16; i++) v[i] = round * 100 + i;
    nxv_tensor *u = upload_s32(d, v, 16), *y = NULL;
    REQUIRE(u);
    REQUIRE_OK(add_s32(d, u, x, 16, &y));
    nxv_tensor_release(u);
    memset(got, 0x5a, sizeof got);
    if (round % 3 == 0) {
      /* Read back at once: the uploaded bytes themselves. */
      nxv_tensor *w = upload_s32(d, v, 16);
      REQUIRE(w);
      REQUIRE_OK(nxv_tensor_download(w, 0, 16, got));
      nxv_tensor_release(w);
      for (int i = 0; i < 16; i++) CHECK_MSG(got[i] == v[i], "round %d: upload read %d", round, got[i]);
    }
    REQUIRE_OK(nxv_tensor_download(y, 0, 16, got));
    nxv_tensor_release(y);
    bool ok = true;
    for (int i = 0; i < 16; i++) ok = ok && got[i] == v[i] + base[i];
    CHECK_MSG(ok, "round %d: sum of a fresh upload", round);
  }
  nxv_tensor_release(x);
  nxv_device_release(d);
}

/* Every element of the 16 f32 of t equals want (downloaded with
 * nxv_tensor_download). */
static bool all_equal16(nxv_tensor *t, float want) {
  float v[16];
  for (int i = 0; i < 16; i++) v[i] = -1.0f;
  if (nxv_tensor_download(t, 0, 16, v) != NXV_OK) return false;
  for (int i = 0; i < 16; i++)
    if (v[i] != want) return false;
  return true;
}

NXV_TEST(sched, completed_writes_read_without_a_node) {
  /* A small mapped result whose every queued write has retired is read at
   * once, with no node through the scheduler; one with a write still
   * queued (or a buffer reused by a new writer) never is. */
  nxv_device_config cfg = {.disable_disk_cache = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  float v42 = 42.0f;
  nxv_tensor *t;
  REQUIRE_OK(nxv_fill(d, NXV_F32, 16, &v42, &t));
  REQUIRE_OK(nxv_device_synchronize(d));
  nxv_stats s0, s1;
  REQUIRE_OK(nxv_device_stats(d, &s0));
  CHECK(all_equal16(t, 42.0f));
  REQUIRE_OK(nxv_device_stats(d, &s1));
  bool mapped = s1.reads_in_place == s0.reads_in_place + 1;
  if (mapped) CHECK_MSG(s1.ops_enqueued == s0.ops_enqueued, "%llu nodes for a completed read",
                        (unsigned long long)(s1.ops_enqueued - s0.ops_enqueued));
  else printf("    results are not in mapped memory on this device: reads go through nodes\n");

  /* Two writers into one tensor (concatenation): the read waits for both. */
  float v1 = 1.0f, v2 = 2.0f;
  nxv_tensor *a, *b, *e;
  REQUIRE_OK(nxv_fill(d, NXV_F32, 8, &v1, &a));
  REQUIRE_OK(nxv_fill(d, NXV_F32, 8, &v2, &b));
  for (int r = 0; r < 50; r++) {
    REQUIRE_OK(nxv_tensor_empty(d, NXV_F32, 16, &e));
    int64_t shape[1] = {8}, unit[1] = {1};
    nxv_view va = {a, 0, NULL}, vb = {b, 0, NULL};
    REQUIRE_OK(nxv_copy_into(d, e, 0, unit, 1, shape, &va));
    REQUIRE_OK(nxv_copy_into(d, e, 8, unit, 1, shape, &vb));
    float got[16];
    REQUIRE_OK(nxv_tensor_download(e, 0, 16, got));
    int bad = 0;
    for (int i = 0; i < 16; i++) bad += got[i] != (i < 8 ? 1.0f : 2.0f);
    CHECK_MSG(bad == 0, "round %d: %d elements of the concatenation wrong", r, bad);
    nxv_tensor_release(e);
  }
  nxv_tensor_release(a);
  nxv_tensor_release(b);

  /* Buffers reused at once by new writers: never the previous contents. */
  nxv_tensor_release(t);
  REQUIRE_OK(nxv_device_synchronize(d));
  int stale = 0;
  for (int r = 0; r < 200; r++) {
    float v = (float)r;
    REQUIRE_OK(nxv_fill(d, NXV_F32, 16, &v, &t));
    stale += !all_equal16(t, v);
    nxv_tensor_release(t);
    if (r % 3 == 0) REQUIRE_OK(nxv_device_synchronize(d));
  }
  CHECK_MSG(stale == 0, "%d of 200 reads saw another value", stale);

  /* The GPU stopped: a completed tensor is still read at once (mapped),
   * one whose write is queued is not done. */
  nxv_tensor *done_t, *queued_t;
  REQUIRE_OK(nxv_fill(d, NXV_F32, 16, &v42, &done_t));
  REQUIRE_OK(nxv_device_synchronize(d));
  nxv_device_inject_hang(d);
  float v5 = 5.0f;
  REQUIRE_OK(nxv_fill(d, NXV_F32, 16, &v5, &queued_t));
  nxv_download *dq, *dd;
  REQUIRE_OK(nxv_download_start(queued_t, 0, 16, &dq));
  bool qdone = true;
  REQUIRE_OK(nxv_download_poll(dq, 2000, &qdone));
  CHECK_MSG(!qdone, "a read of a write the GPU has not run completed");
  REQUIRE_OK(nxv_download_start(done_t, 0, 16, &dd));
  bool ddone = false;
  REQUIRE_OK(nxv_download_poll(dd, 0, &ddone));
  if (mapped) CHECK_MSG(ddone, "a completed mapped tensor was not read at once");
  if (ddone) {
    float got[16];
    REQUIRE_OK(nxv_download_read(dd, got));
    for (int i = 0; i < 16; i++) CHECK(got[i] == 42.0f);
  }
  nxv_download_release(dd);
  nxv_download_release(dq);
  nxv_tensor_release(done_t);
  nxv_tensor_release(queued_t);
  nxv_device_release(d); /* ends the hang */
}

NXV_TEST(sched, downloads_by_kernel_and_by_transfer) {
  /* Both copy paths, whatever the device would choose: every dtype,
   * offsets that do and do not start on a word, partial last words, and
   * sizes on both sides of the kernel's 64 KiB limit. */
  enum { MAXB = 70000 * 16 };
  unsigned char *src = malloc(MAXB), *got = malloc(MAXB + 16); /* + sentinel bytes */
  REQUIRE(src && got);
  uint64_t seed = 11;
  for (size_t i = 0; i < MAXB; i++) src[i] = (unsigned char)test_rand_u64(&seed);
  const int32_t modes[2] = {1, -1};
  for (int m = 0; m < 2; m++) {
    nxv_device_config cfg = {.disable_disk_cache = true, .download_kernel = modes[m]};
    nxv_device *d = open_with(&cfg);
    REQUIRE(d);
    for (int t = 0; t < NXV_DTYPE_COUNT; t++) {
      size_t es = nxv_dtype_size((nxv_dtype)t);
      const uint64_t total = MAXB / es;
      nxv_tensor *a;
      REQUIRE_OK(nxv_tensor_upload(d, (nxv_dtype)t, total, src, &a));
      const uint64_t ranges[][2] = {{0, 1}, {1, 1}, {3, 5}, {5, 7}, {0, 37},
                                    {7, 65536 / es}, {2, 65536 / es + 1},
                                    {0, total}, {total - 3, 3}};
      for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
        uint64_t off = ranges[r][0], cnt = ranges[r][1];
        memset(got, 0xAB, cnt * es + 8);
        CHECK_OK(nxv_tensor_download(a, off, cnt, got));
        CHECK_MSG(memcmp(got, src + off * es, cnt * es) == 0, "mode %d %s [%llu, +%llu)",
                  (int)modes[m], nxv_dtype_name((nxv_dtype)t), (unsigned long long)off,
                  (unsigned long long)cnt);
        CHECK_MSG(got[cnt * es] == 0xAB, "mode %d %s: wrote past the end",
                  (int)modes[m], nxv_dtype_name((nxv_dtype)t));
      }
      nxv_tensor_release(a);
    }
    nxv_device_release(d);
  }
  free(src);
  free(got);
}

NXV_TEST(pool, exhaustion_waits_for_queued_work_before_failing) {
  /* Each step releases its input while the op reading it is still queued;
   * with a pool limit of a few tensors, allocation must wait for that work
   * to retire instead of failing. */
  nxv_device_config cfg = {.pool_limit_bytes = 6u << 20, .disable_disk_cache = true};
  nxv_device *d = open_with(&cfg);
  REQUIRE(d);
  enum { N = 1 << 18 }; /* 1 MiB of s32 */
  int32_t one = 1;
  nxv_tensor *x, *ones;
  REQUIRE_OK(nxv_fill(d, NXV_S32, N, &one, &ones));
  REQUIRE_OK(nxv_fill(d, NXV_S32, N, &one, &x));
  for (int i = 0; i < 40; i++) {
    nxv_tensor *y;
    REQUIRE_OK(add_s32(d, x, ones, N, &y));
    nxv_tensor_release(x);
    x = y;
  }
  int32_t got[4];
  REQUIRE_OK(nxv_tensor_download(x, N - 4, 4, got));
  for (int i = 0; i < 4; i++) CHECK(got[i] == 41);
  /* A request that can never fit still fails, with a clear message. */
  nxv_tensor *big = (nxv_tensor *)0x1;
  CHECK(nxv_tensor_empty(d, NXV_S32, 4u << 20, &big) == NXV_ERR_OUT_OF_DEVICE_MEMORY);
  CHECK(big == (nxv_tensor *)0x1);
  CHECK(strstr(nxv_last_error(), "after waiting") != NULL);
  nxv_tensor_release(x);
  nxv_tensor_release(ones);
  nxv_device_release(d);
}
