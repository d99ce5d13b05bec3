#include "sched/scheduler.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/histogram.h"
#include "sched/lines.h"
#include "sched/ring.h"
#include "sched/status.h"

#define NXV_MAX_BATCHES 16
/* A batch is submitted once it holds NXV_EARLY_NODES nodes and
 * NXV_EARLY_COST of estimated work: a producer that queues large ops
 * slower than the GPU runs them (a training step's replay) then keeps the
 * GPU fed instead of handing it most of the step when it stops. Streams of
 * tiny ops keep their long batches. While early_inflight submitted
 * batches are incomplete (one running, one queued behind it) such a batch
 * takes more ops instead, and goes once one completes: a producer ahead
 * of the GPU then hands it fewer, longer batches, and the reordering
 * window shares barriers across what were batch boundaries. On an H200
 * an Evaluator's MLP step (72 ops) took 5 batches and 183 us of GPU time
 * instead of 7 and 204, the step 249-263 us instead of 285-296 where the
 * host ran ahead; the CNN step's GPU time went from 253-255 to 227-242
 * us. */
#define NXV_EARLY_NODES 8
#define NXV_EARLY_COST (1ull << 18)

/* A batch of at most NXV_UNTIMED_NODES ops whose estimated work stays under
 * NXV_UNTIMED_COST (elements touched) writes no timestamps: a round trip's
 * op and its download or synchronize, whose GPU time is about what the two
 * timestamps add to the round trip (1.7 us on an H200, most of it the end
 * one, which the timeline's signal waits for). A batch is timed from the
 * first op that takes it past either limit (the ops before it are not
 * counted in gpu_busy_ns), and from its start while batch records are
 * kept (from its first op when it was opened before they were). */
#define NXV_UNTIMED_NODES 2
#define NXV_UNTIMED_COST (1ull << 16)

/* With the GPU idle, a batch of kick_nodes nodes is submitted only when
 * no more nodes wait in the ring, or once it holds NXV_KICK_BACKLOG times
 * kick_nodes: a producer that queues faster than the scheduler records
 * then gets batches long enough that their submission (8-11 us of the
 * scheduler's time on an H200) does not bound the stream, while a burst
 * that has ended is submitted at once. Such a batch is also submitted
 * behind batches still in flight, while fewer than kick_inflight are: a
 * producer slower than the GPU (a compiled HMC step's replay, about an op
 * per microsecond) then hands it a batch every kick_nodes ops instead of
 * waiting until the completion thread has seen the last one finish (which
 * left the GPU idle 120-140 us of a 440 us step on an H200), and a faster
 * one every NXV_KICK_BACKLOG x kick_nodes (a C chain of dependent adds:
 * 2.48-2.50 us per op against 2.69-2.95). Only behind small work (under
 * NXV_EARLY_COST in all): a GPU busy with large ops (a training step's
 * products) has no gap to fill, and each batch boundary costs it a few
 * microseconds. */
#define NXV_KICK_BACKLOG 4u

typedef struct batch {
  VkCommandBuffer cb;     /* owned by the scheduler's command pool */
  uint64_t epoch;         /* timeline value its submission signals */
  nxv_node *head, *tail;  /* nodes recorded, in order */
  uint32_t nnodes;
  uint64_t cost;
  uint64_t bytes;         /* bytes its nodes write (see nxv_stats) */
  uint64_t queue_wait_ns; /* first enqueue -> submit (set on submit) */
  uint64_t submit_ns;     /* when it was submitted (vkQueueSubmit returned) */
  uint64_t submit_call_ns; /* when vkQueueSubmit was called for it */
  uint64_t open_ns;       /* when its first node was taken off the ring
                             to be recorded (0 while it has none) */
  bool host_read;         /* ends with a HOST_READ barrier */
  bool timed;             /* its start timestamp is recorded, so it ends
                             with one and its GPU time is counted (see
                             NXV_UNTIMED_NODES) */
  VkPipeline bound;       /* pipeline bound last in cb */
  bool barrier_ahead;     /* a barrier was recorded into it while it was
                             empty (barrier_ahead()) */
} batch;

struct nxv_sched {
  const nxv_vk *vk;               /* not owned */
  nxv_sched_config cfg;
  nxv_hostring *staging;          /* not owned */
  nxv_hostring *arena;            /* owned: kernel arguments */
  VkPipelineLayout layout;        /* not owned */
  nxv_ring *ring;                 /* owned */
  VkSemaphore timeline;           /* owned */
  VkCommandPool cmd_pool;         /* owned; scheduler thread only */
  batch batches[NXV_MAX_BATCHES];
  /* Timestamps at the start and end of each batch (queries 2i, 2i + 1 of
   * batch slot i): written by the GPU, read by the completion thread once
   * the batch retired. VK_NULL_HANDLE where the queue has none. */
  VkQueryPool queries;            /* owned */
  double tick_ns;                 /* nanoseconds per timestamp tick */
  uint64_t tick_mask;             /* valid timestamp bits */
  /* Calibration of the timestamps against now_ns()'s clock, taken while
   * batch records are kept (vk->get_calibrated): a device timestamp and
   * the CLOCK_MONOTONIC time sampled with it, and when. Completion thread
   * only. */
  uint64_t cal_ticks, cal_ns, cal_at;

  /* scheduler thread only (a line apart from the configuration producers
   * read) */
  NXV_LINE_ALIGNED batch *open;
  bool last_host_read;            /* the batch submitted last ends with a
                                     HOST_READ barrier (barrier_ahead()) */
  bool last_read_in_place;        /* the last download taken off the ring
                                     reads its result in place (a mapped
                                     read), not through a copy, and one op
                                     was taken off the ring since the
                                     download before it (round_trip_op()) */
  uint32_t ops_since_read;        /* ops taken off the ring since the last
                                     download (saturating) */
  uint64_t next_epoch;
  uint64_t gen;                   /* barrier generation */
  /* Reordering window: nodes that needed a barrier when they arrived,
   * held in arrival order (references owned) so that later nodes needing
   * none are recorded first, into the current barrier interval. Every
   * held node is recorded, in dependency order, before the open batch is
   * submitted or an unholdable node is recorded (drain_held). */
  nxv_node *held[NXV_REORDER_MAX];
  uint32_t nheld;
  uint32_t window;                /* most nodes held; 0: no reordering */
  uint64_t held_cost;             /* sum of the held nodes' cost */
  uint64_t hold_gen;              /* marks of the held nodes' buffers
                                     (nxv_buffer.sched_hold_*_gen) */

  /* guarded by mu */
  pthread_mutex_t mu;
  pthread_cond_t sched_cv;        /* wakes the scheduler */
  pthread_cond_t inflight_cv;     /* wakes the completion thread */
  pthread_cond_t done_cv;         /* wakes waiters and the scheduler */
  pthread_cond_t space_cv;        /* wakes producers waiting for ring room */
  uint32_t free_batches[NXV_MAX_BATCHES];
  uint32_t nfree;
  uint32_t inflight[NXV_MAX_BATCHES]; /* FIFO of submitted batches */
  uint32_t inflight_head, inflight_count;
  uint32_t retiring;              /* batches taken off inflight and still
                                     being retired (their arena and
                                     staging space not yet free); under mu */
  uint64_t retired_ns;            /* when a batch was last retired; under mu */
  bool completion_stop;
  nxv_status error;
  char error_msg[512];

  VkSemaphore hang_sem;           /* owned; test hook (nxv_sched_inject_hang):
                                     created once under mu; submissions
                                     held wait for value 1, which destroy
                                     signals */
  bool hung;                      /* a submission waited on hang_sem
                                     (scheduler thread) */

  /* Read by every push and status check, written rarely: a cache line of
   * their own (sched/lines.h), which the counters below do not evict. */
  NXV_LINE_ALIGNED atomic_int failed; /* mirrors error != NXV_OK, lock-free */
  atomic_bool stop;
  atomic_bool sleeping;           /* scheduler waits on sched_cv */
  atomic_uint blocked_producers;  /* producers waiting on space_cv */
  atomic_int inject;              /* fault for the next submission */
  atomic_bool inject_hang;        /* the next submission waits on hang_sem */
  atomic_bool paused;             /* the scheduler takes nothing off the ring
                                     (nxv_sched_inject_pause) */
  /* Written by producers. */
  NXV_LINE_ALIGNED atomic_uint_fast64_t enqueued;
  atomic_uint_fast64_t ring_full;
  atomic_uint_fast64_t wakeups;   /* producers' signals to a sleeping scheduler */
  /* Written by the scheduler thread: the epoch, which waiters poll, once
   * per submission on a line of its own; the counters, written per op,
   * on the next. */
  NXV_LINE_ALIGNED atomic_uint_fast64_t submitted_epoch;
  NXV_LINE_ALIGNED atomic_uint_fast64_t submits, barriers;
  atomic_uint_fast64_t barriers_ahead; /* of barriers: barrier_ahead()'s */
  atomic_uint_fast64_t round_trip_submits; /* of submits: round_trip_op()'s */
  atomic_uint_fast64_t pipelined_kicks; /* of submits: kicked behind batches
                                           still in flight (kick_inflight) */
  atomic_uint_fast64_t reads_in_place;
  atomic_uint_fast64_t reordered; /* nodes recorded before an earlier one */
  atomic_uint_fast64_t pipeline_waits;   /* nodes whose pipeline was not
                                            created yet when recorded */
  atomic_uint_fast64_t pipeline_wait_ns; /* time spent waiting for them */
  atomic_uint_fast64_t bytes_submitted;
  /* Written by retirement. */
  NXV_LINE_ALIGNED atomic_uint_fast64_t completed_epoch;
  atomic_uint_fast64_t completed_ops;
  atomic_uint_fast64_t gpu_ns;    /* sum of the batches' GPU durations */
  atomic_uint_fast64_t untimed;   /* batches retired without timestamps
                                     (NXV_UNTIMED_NODES) */
  NXV_LINE_ALIGNED nxv_hist op_latency; /* enqueue -> completion seen, per node */
  nxv_hist queue_wait;            /* first enqueue -> submit, per batch */
  nxv_hist batch_gpu;             /* GPU time per batch */
  nxv_hist download_wait;         /* nxv_sched_note_download */
  /* Serializes retirement (retire_ready): the completion thread and a
   * waiter that saw the timeline reach its epoch both retire, in order. */
  pthread_mutex_t retire_mu;
  /* Batch records for telemetry: a ring of NXV_BATCH_RECORDS written by
   * retirement while recording is on, under rec_mu. */
  pthread_mutex_t rec_mu;
  atomic_bool recording;
  nxv_batch_record *records;      /* owned; NULL until recording starts */
  uint32_t rec_head, rec_count;   /* oldest record, records kept */
  uint64_t rec_dropped;           /* not kept since the last take */

  pthread_t sched_thread, completion_thread;
  bool sched_started, completion_started;
};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t nxv_sched_now_ns(void) { return now_ns(); }

uint64_t nxv_clock_ns(void) { return now_ns(); }

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* ------------------------------------------------------------------ */
/* Nodes and tickets                                                   */
/* ------------------------------------------------------------------ */

/* Freed nodes of up to NODE_CACHE_WORDS argument words (every node is
 * allocated with room for at least that many) wait on a process-wide list,
 * at most NODE_CACHE_MAX of them, for the next nxv_node_new. The thread
 * that queues an op then takes a node the retiring thread gave back, one
 * list lock per batch retired, instead of malloc freeing each node into
 * the allocating thread's arena under that arena's lock while the
 * allocating thread takes from it. On an H200 host malloc took 8% of the
 * calling thread's time in a stream of independent ops, and the stream ran
 * 5-15% faster with the cache (docs/benchmarks.md). */
#define NODE_CACHE_WORDS 32u
#if defined(__SANITIZE_ADDRESS__)
/* Under AddressSanitizer freed nodes are freed, so that a use of a node
 * after its retirement is still caught. */
#define NODE_CACHE_MAX 0u
#else
#define NODE_CACHE_MAX 8192u
#endif
static pthread_mutex_t node_cache_mu = PTHREAD_MUTEX_INITIALIZER;
static nxv_node *node_cache;       /* linked through next; under node_cache_mu */
static uint32_t node_cache_count;  /* nodes on it; under node_cache_mu */

/* Frees the cached nodes when the library is unloaded or the process
 * exits. */
__attribute__((destructor)) static void node_cache_drain(void) {
  pthread_mutex_lock(&node_cache_mu);
  nxv_node *n = node_cache;
  node_cache = NULL;
  node_cache_count = 0;
  pthread_mutex_unlock(&node_cache_mu);
  while (n) {
    nxv_node *next = n->next;
    free(n);
    n = next;
  }
}

nxv_node *nxv_node_new(uint32_t args_words) {
  nxv_node *n = NULL;
  if (args_words <= NODE_CACHE_WORDS) {
    pthread_mutex_lock(&node_cache_mu);
    n = node_cache;
    if (n) {
      node_cache = n->next;
      node_cache_count--;
    }
    pthread_mutex_unlock(&node_cache_mu);
    /* A cached node is zero but for its link (cancel_list): only the
     * lines this op sets are written here. */
    if (n) n->next = NULL;
    else n = nxv_lines_alloc(sizeof(nxv_node) + NODE_CACHE_WORDS * sizeof(uint32_t));
  } else {
    n = nxv_lines_alloc(sizeof(nxv_node) + (size_t)args_words * sizeof(uint32_t));
  }
  if (n) n->args_words = args_words;
  return n;
}

/* Gives the chain head..tail of count nodes, their resources released, back
 * to the cache; frees what does not fit. */
static void node_cache_put(nxv_node *head, nxv_node *tail, uint32_t count) {
  if (!head) return;
  pthread_mutex_lock(&node_cache_mu);
  if (node_cache_count + count <= NODE_CACHE_MAX) {
    tail->next = node_cache;
    node_cache = head;
    node_cache_count += count;
    head = NULL;
  }
  pthread_mutex_unlock(&node_cache_mu);
  while (head) {
    nxv_node *next = head->next;
    free(head);
    head = next;
  }
}

nxv_ticket *nxv_ticket_new(void) {
  nxv_ticket *t = calloc(1, sizeof *t);
  if (t) atomic_init(&t->refs, 2);
  return t;
}

void nxv_ticket_release(nxv_ticket *t) {
  if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1)
    return;
  if (t->has_staging) nxv_hostring_free(t->ring, &t->staging);
  free(t);
}

/* Releases what n holds, its buffers whose last reference it held onto
 * *freed (nxv_pool_return_list returns them); true when n may go back to
 * the node cache. */
static bool node_release(nxv_sched *s, nxv_node *n, nxv_buffer **freed) {
  if (n->pending) n->pending->release(n->pending);
  if (n->writes_counted)
    for (uint32_t i = 0; i < n->nbufs; i++)
      if ((n->write_mask >> i) & 1u)
        atomic_fetch_sub_explicit(&n->bufs[i]->pending_writes, 1, memory_order_release);
  for (uint32_t i = 0; i < n->nbufs; i++) nxv_buffer_release_into(n->bufs[i], freed);
  if (n->has_staging) nxv_hostring_free(n->staging_ring, &n->staging);
  if (n->has_arena && s) nxv_hostring_free(s->arena, &n->arena);
  if (n->ticket) nxv_ticket_release(n->ticket);
  return n->args_words <= NODE_CACHE_WORDS;
}

static void cancel_list(nxv_sched *s, nxv_node *n);

/* Releases one node that is in no batch's list, as cancel_list does. */
static void node_free(nxv_sched *s, nxv_node *n) {
  n->next = NULL;
  cancel_list(s, n);
}

void nxv_node_discard(nxv_node *n) {
  if (n) node_free(NULL, n);
}

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

static void set_error(nxv_sched *s, nxv_status st, const char *msg) {
  pthread_mutex_lock(&s->mu);
  if (s->error == NXV_OK) {
    s->error = st;
    snprintf(s->error_msg, sizeof s->error_msg, "%s", msg);
    atomic_store(&s->failed, 1);
  }
  pthread_cond_broadcast(&s->done_cv);
  pthread_cond_broadcast(&s->inflight_cv);
  pthread_mutex_unlock(&s->mu);
}

static nxv_status sticky(nxv_sched *s) {
  pthread_mutex_lock(&s->mu);
  nxv_status st = s->error;
  char msg[512];
  memcpy(msg, s->error_msg, sizeof msg);
  pthread_mutex_unlock(&s->mu);
  return nxv_fail(st, "device failed earlier: %s", msg);
}

nxv_status nxv_sched_status(nxv_sched *s, const char **out_message) {
  /* Every op asks (nxv_tensor_new): a healthy queue answers without the
   * mutex the scheduler and completion threads hold. On an H100 host each
   * op used to contend for it, with a futex call per op in about half the
   * ops. failed is stored after error and error_msg, under the mutex. */
  if (!atomic_load(&s->failed)) {
    if (out_message) *out_message = "";
    return NXV_OK;
  }
  pthread_mutex_lock(&s->mu);
  nxv_status st = s->error;
  pthread_mutex_unlock(&s->mu);
  /* error_msg is written once, before error is published; stable after. */
  if (out_message) *out_message = st == NXV_OK ? "" : s->error_msg;
  return st;
}

void nxv_sched_inject_hang(nxv_sched *s) {
  pthread_mutex_lock(&s->mu);
  if (!s->hang_sem) {
    VkSemaphoreTypeCreateInfo ti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                    .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
    VkSemaphoreCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO,
                                .pNext = &ti};
    if (vkCreateSemaphore(s->vk->device, &ci, NULL, &s->hang_sem) != VK_SUCCESS)
      s->hang_sem = VK_NULL_HANDLE;
  }
  /* Published after the semaphore (release); without one, no hang. */
  if (s->hang_sem) atomic_store(&s->inject_hang, true);
  pthread_mutex_unlock(&s->mu);
}

static void wake_scheduler(nxv_sched *s);

void nxv_sched_inject_pause(nxv_sched *s, bool paused) {
  atomic_store(&s->paused, paused);
  if (!paused) wake_scheduler(s);
}

void nxv_sched_inject_fault(nxv_sched *s, nxv_status fault) {
  if (fault == NXV_ERR_DEVICE_LOST) {
    /* With work on the GPU, the loss is what the completion thread's wait
     * would report: now, to every waiter. The GPU is in fact still running
     * that work, so it is retired (its buffers released) only once it
     * completes, never under the GPU. Whether a driver's wait would honour
     * its timeout meanwhile is not something to rely on here. */
    pthread_mutex_lock(&s->mu);
    uint32_t n = s->inflight_count;
    pthread_mutex_unlock(&s->mu);
    if (n > 0) {
      char msg[160];
      snprintf(msg, sizeof msg,
               "vkWaitSemaphores (injected fault): device lost with %u batches in flight", n);
      set_error(s, NXV_ERR_DEVICE_LOST, msg);
      return;
    }
  }
  atomic_store(&s->inject, (int)fault);
}

/* ------------------------------------------------------------------ */
/* Recording (scheduler thread)                                        */
/* ------------------------------------------------------------------ */

/* Releases the nodes of the list starting at n (a retired or cancelled
 * batch's) and what they hold: their buffers' pools and the node cache
 * are locked once for the whole list. */
static void cancel_list(nxv_sched *s, nxv_node *n) {
  nxv_node *head = NULL, *tail = NULL;
  nxv_buffer *freed = NULL;
  uint32_t count = 0;
  while (n) {
    nxv_node *next = n->next;
    if (node_release(s, n, &freed)) {
      /* Zeroed here, on the retiring thread, rather than by the next
       * nxv_node_new: lines of the node that op does not set then stay
       * in this thread's cache instead of moving to the producer's. */
      memset(n, 0, sizeof(nxv_node) + (size_t)n->args_words * sizeof(uint32_t));
      n->next = head;
      head = n;
      if (!tail) tail = n;
      count++;
    } else {
      free(n);
    }
    n = next;
  }
  nxv_pool_return_list(freed);
  node_cache_put(head, tail, count);
}

/* Whether n may wait in the reordering window: a plain data op. Nodes
 * that someone waits for (a ticket), that flush or feed a host read, and
 * markers are recorded in arrival order, after every held node. */
static bool holdable(const nxv_node *n) {
  return n->flags == 0 && !n->ticket && n->kind != NXV_NODE_MARKER;
}

/* Whether n needs a barrier first: it reads or writes a buffer written
 * since the last barrier, or writes one read since then. */
static bool hazard(const nxv_sched *s, const nxv_node *n) {
  for (uint32_t i = 0; i < n->nbufs; i++) {
    const nxv_buffer *buf = n->bufs[i];
    if (buf->sched_write_gen == s->gen) return true;
    if ((n->write_mask >> i) & 1u && buf->sched_read_gen == s->gen) return true;
  }
  return false;
}

/* Whether n must follow a held node: it reads or writes a buffer a held
 * node writes, or writes one a held node reads. */
static bool held_conflict(const nxv_sched *s, const nxv_node *n) {
  if (!s->nheld) return false;
  for (uint32_t i = 0; i < n->nbufs; i++) {
    const nxv_buffer *buf = n->bufs[i];
    if (buf->sched_hold_write_gen == s->hold_gen) return true;
    if ((n->write_mask >> i) & 1u && buf->sched_hold_read_gen == s->hold_gen) return true;
  }
  return false;
}

/* Whether the retiring threads have counted every batch submitted so far
 * complete. Scheduler thread. */
static bool all_retired(const nxv_sched *s) {
  uint64_t submitted = atomic_load(&s->submitted_epoch);
  return submitted == 0 || atomic_load(&s->completed_epoch) >= submitted;
}

/* Whether every batch submitted so far has completed, as the timeline
 * says now (a failed read counts as not idle). Scheduler thread. */
/* Sets *out_pending to the submitted batches the timeline does not show
 * complete yet (the completion thread's retirement may lag it); false
 * where the timeline cannot be read. */
static bool timeline_pending(const nxv_sched *s, uint64_t *out_pending) {
  uint64_t submitted = atomic_load(&s->submitted_epoch);
  uint64_t value = 0;
  if (vkGetSemaphoreCounterValue(s->vk->device, s->timeline, &value) != VK_SUCCESS)
    return false;
  *out_pending = value >= submitted ? 0 : submitted - value;
  return true;
}

static bool gpu_idle(const nxv_sched *s) {
  uint64_t pending;
  return all_retired(s) || (timeline_pending(s, &pending) && pending == 0);
}

/* Whether the open batch (with the nodes the window holds) is large
 * enough for the early rule: NXV_EARLY_NODES nodes, NXV_EARLY_COST work. */
static bool early_sized(const nxv_sched *s) {
  return s->open->nnodes + s->nheld >= NXV_EARLY_NODES &&
         s->open->cost + s->held_cost >= NXV_EARLY_COST;
}

/* Whether the early rule may submit now: fewer than early_inflight
 * submitted batches are incomplete on the GPU (or the timeline cannot be
 * read). */
static bool early_ok(const nxv_sched *s) {
  uint64_t pending;
  return !s->cfg.early_inflight || !timeline_pending(s, &pending) ||
         pending < s->cfg.early_inflight;
}

static void hold(nxv_sched *s, nxv_node *n) {
  for (uint32_t i = 0; i < n->nbufs; i++) {
    if ((n->write_mask >> i) & 1u) n->bufs[i]->sched_hold_write_gen = s->hold_gen;
    else n->bufs[i]->sched_hold_read_gen = s->hold_gen;
  }
  s->held[s->nheld++] = n;
  s->held_cost += n->cost;
}

/* One global barrier in b: what was written before it is visible to what
 * follows, and what was read before it is not overwritten early. */
static void barrier(nxv_sched *s, batch *b) {
  VkMemoryBarrier mb = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
      .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
      .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                       VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
  VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
                            VK_PIPELINE_STAGE_TRANSFER_BIT;
  vkCmdPipelineBarrier(b->cb, st, st, 0, 1, &mb, 0, NULL, 0, NULL);
  s->gen++;
  atomic_fetch_add_explicit(&s->barriers, 1, memory_order_relaxed);
}

static void emit(nxv_sched *s, batch *b, nxv_node *n);

/* Records every held node into the open batch, in waves: a barrier, then
 * each held node in order that neither needs another barrier nor follows
 * one still held. The first of each wave always goes, so it ends. */
static void drain_held(nxv_sched *s) {
  while (s->nheld) {
    nxv_node *wave[NXV_REORDER_MAX];
    uint32_t k = s->nheld;
    memcpy(wave, s->held, k * sizeof wave[0]);
    s->nheld = 0;
    s->held_cost = 0;
    s->hold_gen++;
    barrier(s, s->open);
    for (uint32_t i = 0; i < k; i++) {
      if (hazard(s, wave[i]) || held_conflict(s, wave[i])) hold(s, wave[i]);
      else emit(s, s->open, wave[i]);
    }
  }
}

/* Frees the held nodes unrecorded (the queue failed). */
static void cancel_held(nxv_sched *s) {
  for (uint32_t i = 0; i < s->nheld; i++) node_free(s, s->held[i]);
  s->nheld = 0;
  s->held_cost = 0;
  s->hold_gen++;
}

/* Opens a batch: takes a free batch slot, waiting for the completion
 * thread if all are in flight (wait) or leaving s->open NULL (!wait), and
 * begins its command buffer. Fails only with the sticky error. */
static nxv_status open_batch(nxv_sched *s, bool wait) {
  pthread_mutex_lock(&s->mu);
  while (wait && s->nfree == 0 && s->error == NXV_OK)
    pthread_cond_wait(&s->done_cv, &s->mu);
  if (s->nfree == 0 || s->error != NXV_OK) {
    nxv_status err = s->error;
    pthread_mutex_unlock(&s->mu);
    return err;
  }
  batch *b = &s->batches[s->free_batches[--s->nfree]];
  pthread_mutex_unlock(&s->mu);
  VkResult r = vkResetCommandBuffer(b->cb, 0);
  VkCommandBufferBeginInfo bi = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
      .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  if (r == VK_SUCCESS) r = vkBeginCommandBuffer(b->cb, &bi);
  b->timed = false;
  if (r == VK_SUCCESS && s->queries) {
    uint32_t q = 2 * (uint32_t)(b - s->batches);
    /* The slot's previous batch has retired: its queries are idle. */
    if (s->vk->host_query_reset) vkResetQueryPool(s->vk->device, s->queries, q, 2);
    else vkCmdResetQueryPool(b->cb, s->queries, q, 2);
    /* While batch records are kept every batch is timed from its start;
     * otherwise emit() starts the timing once the batch is past
     * NXV_UNTIMED_NODES. */
    if (atomic_load_explicit(&s->recording, memory_order_relaxed)) {
      vkCmdWriteTimestamp(b->cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, s->queries, q);
      b->timed = true;
    }
  }
  if (r != VK_SUCCESS) {
    nxv_status st = nxv_fail_vk(r, "vkBeginCommandBuffer");
    set_error(s, st, nxv_last_error());
    pthread_mutex_lock(&s->mu);
    s->free_batches[s->nfree++] = (uint32_t)(b - s->batches);
    pthread_mutex_unlock(&s->mu);
    return st;
  }
  b->epoch = ++s->next_epoch;
  b->head = b->tail = NULL;
  b->nnodes = 0;
  b->cost = 0;
  b->bytes = 0;
  b->open_ns = 0;
  b->host_read = false;
  b->bound = VK_NULL_HANDLE;
  b->barrier_ahead = false;
  s->open = b;
  return NXV_OK;
}

static void release_batch_slot(nxv_sched *s, batch *b) {
  pthread_mutex_lock(&s->mu);
  s->free_batches[s->nfree++] = (uint32_t)(b - s->batches);
  pthread_cond_broadcast(&s->done_cv);
  pthread_mutex_unlock(&s->mu);
}

/* Ends and submits the open batch. */
static void submit_open(nxv_sched *s) {
  drain_held(s);
  batch *b = s->open;
  s->open = NULL;
  if (b->host_read) {
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT |
                                           VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(b->cb,
                         VK_PIPELINE_STAGE_TRANSFER_BIT |
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0,
                         NULL);
  }
  if (b->timed)
    vkCmdWriteTimestamp(b->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, s->queries,
                        2 * (uint32_t)(b - s->batches) + 1);
  VkResult r = vkEndCommandBuffer(b->cb);
  const char *what = "vkEndCommandBuffer";
  if (r == VK_SUCCESS) {
    /* The test hooks are read before they are cleared: an exchange
     * writes the line that waiting producers poll (failed's), and taking
     * it from them costs a transfer on every submission. */
    int fault = atomic_load_explicit(&s->inject, memory_order_relaxed)
                    ? atomic_exchange(&s->inject, 0)
                    : 0;
    if (fault == NXV_ERR_DEVICE_LOST) {
      r = VK_ERROR_DEVICE_LOST;
      what = "vkQueueSubmit (injected fault)";
    } else if (fault != 0) {
      r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
      what = "vkQueueSubmit (injected fault)";
    } else {
      VkTimelineSemaphoreSubmitInfo ts = {
          .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
          .signalSemaphoreValueCount = 1,
          .pSignalSemaphoreValues = &b->epoch};
      VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                         .pNext = &ts,
                         .commandBufferCount = 1,
                         .pCommandBuffers = &b->cb,
                         .signalSemaphoreCount = 1,
                         .pSignalSemaphores = &s->timeline};
      /* Test hook: wait until destroy. */
      static const uint64_t hang_value = 1;
      static const VkPipelineStageFlags hang_stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
      if (atomic_load_explicit(&s->inject_hang, memory_order_relaxed) &&
          atomic_exchange(&s->inject_hang, false)) {
        s->hung = true;
        ts.waitSemaphoreValueCount = 1;
        ts.pWaitSemaphoreValues = &hang_value;
        si.waitSemaphoreCount = 1;
        si.pWaitSemaphores = &s->hang_sem;
        si.pWaitDstStageMask = &hang_stage;
      }
      b->submit_call_ns = now_ns();
      r = vkQueueSubmit(s->vk->queue, 1, &si, VK_NULL_HANDLE);
      what = "vkQueueSubmit";
    }
  }
  if (r != VK_SUCCESS) {
    nxv_status st = nxv_fail_vk(r, what);
    if (st != NXV_ERR_DEVICE_LOST) {
      st = NXV_ERR_SUBMIT_FAILED;
      nxv_fail(st, "%s failed: %s", what, nxv_vk_result_name(r));
    }
    set_error(s, st, nxv_last_error());
    cancel_list(s, b->head);
    release_batch_slot(s, b);
    return;
  }
  s->last_host_read = b->host_read;
  atomic_fetch_add(&s->submits, 1);
  atomic_fetch_add_explicit(&s->bytes_submitted, b->bytes, memory_order_relaxed);
  b->submit_ns = now_ns();
  /* From the first op's enqueue, or without per-op timing from the
   * batch's opening (its first op leaving the ring). */
  b->queue_wait_ns = b->submit_ns - (b->head && b->head->enqueue_ns ? b->head->enqueue_ns
                                                                    : b->open_ns);
  if (b->head) nxv_hist_add(&s->queue_wait, b->queue_wait_ns);
  pthread_mutex_lock(&s->mu);
  s->inflight[(s->inflight_head + s->inflight_count) % NXV_MAX_BATCHES] =
      (uint32_t)(b - s->batches);
  s->inflight_count++;
  atomic_store(&s->submitted_epoch, b->epoch);
  pthread_cond_signal(&s->inflight_cv);
  pthread_mutex_unlock(&s->mu);
}

/* Copies a node's arguments into the arena, submitting and waiting for
 * retirements while the arena is full. */
static nxv_status place_args(nxv_sched *s, nxv_node *n) {
  uint64_t bytes = (uint64_t)n->args_words * 4;
  for (;;) {
    if (nxv_hostring_alloc(s->arena, bytes, 16, false, &n->arena) == NXV_OK)
      break;
    if (s->open && (s->open->nnodes > 0 || s->nheld > 0)) submit_open(s);
    pthread_mutex_lock(&s->mu);
    uint64_t seen = atomic_load(&s->completed_epoch);
    /* A batch being retired counts as in flight: its space is freed
     * after it leaves the inflight list. */
    while (s->inflight_count + s->retiring > 0 && s->error == NXV_OK &&
           atomic_load(&s->completed_epoch) == seen)
      pthread_cond_wait(&s->done_cv, &s->mu);
    bool stuck = s->inflight_count + s->retiring == 0;
    nxv_status err = s->error;
    pthread_mutex_unlock(&s->mu);
    if (err != NXV_OK) return err;
    if (stuck &&
        nxv_hostring_alloc(s->arena, bytes, 16, false, &n->arena) != NXV_OK) {
      nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY,
               "kernel arguments of %llu bytes do not fit the arena",
               (unsigned long long)bytes);
      return NXV_ERR_OUT_OF_HOST_MEMORY;
    }
    if (stuck) break;
  }
  n->has_arena = true;
  memcpy(n->arena.ptr, n->args, bytes);
  memcpy(n->pc + n->args_pc_offset, &n->arena.addr, sizeof n->arena.addr);
  return NXV_OK;
}

/* Completes n, a node that records nothing, with the submitted epoch e:
 * its ticket takes e and n is freed. Counted before the waiter can see its
 * epoch, so that its stats include it. The epoch may have retired already,
 * with no wake-up to come: it is published under the mutex a sleeping
 * waiter checks it under. */
static void complete_at(nxv_sched *s, nxv_node *n, uint64_t e) {
  atomic_fetch_add(&s->completed_ops, 1);
  pthread_mutex_lock(&s->mu);
  atomic_store(&n->ticket->epoch, e);
  pthread_cond_broadcast(&s->done_cv);
  pthread_mutex_unlock(&s->mu);
  node_free(s, n);
}

/* Records n into the open batch (opening one if needed), or holds it in
 * the reordering window when it needs a barrier or follows a held node.
 * Returns false when n was not added to a batch: it failed (and was
 * freed), or it was a mapped read whose buffer's writer is already
 * submitted (its ticket took that epoch and it was freed). */
static bool record(nxv_sched *s, nxv_node *n) {
  uint64_t taken = s->open && s->open->open_ns ? 0 : now_ns();
  if (n->pending) {
    /* Its pipeline is still being created: the GPU gets what is recorded
     * meanwhile. A creation that failed fails the device, as its ops'
     * results could not be computed. */
    nxv_pending_pipeline *p = n->pending;
    if (!p->done(p)) {
      atomic_fetch_add_explicit(&s->pipeline_waits, 1, memory_order_relaxed);
      if (s->open && (s->open->nnodes > 0 || s->nheld > 0)) submit_open(s);
    }
    uint64_t t0 = now_ns();
    nxv_status st = p->wait(p, &n->pipeline);
    atomic_fetch_add_explicit(&s->pipeline_wait_ns, now_ns() - t0, memory_order_relaxed);
    n->pending = NULL;
    p->release(p);
    if (st != NXV_OK) {
      if (atomic_load(&s->failed) == 0) set_error(s, st, nxv_last_error());
      node_free(s, n);
      return false;
    }
  }
  /* Everything before an unholdable node is recorded before it: a
   * download, a marker or a flush sees the work queued before it. */
  if (s->nheld && !holdable(n)) drain_held(s);
  if (n->flags & (NXV_NODE_HOST_READ | NXV_NODE_MAPPED_READ)) {
    s->last_read_in_place = (n->flags & NXV_NODE_MAPPED_READ) && s->ops_since_read == 1;
    s->ops_since_read = 0;
  } else if (n->kind != NXV_NODE_MARKER && s->ops_since_read < UINT32_MAX) {
    s->ops_since_read++;
  }
  if (n->flags & NXV_NODE_MAPPED_READ) {
    uint64_t e = n->bufs[0]->sched_write_epoch;
    if (e && !(s->open && s->open->epoch == e)) {
      atomic_fetch_add(&s->reads_in_place, 1);
      complete_at(s, n, e);
      return false;
    }
    /* It joins the open batch, which its flush submits. The download
     * holds the buffer; the marker records nothing and needs no barrier. */
    nxv_buffer_release(n->bufs[0]);
    n->nbufs = 0;
  } else if (n->kind == NXV_NODE_MARKER && n->ticket && (!s->open || s->open->nnodes == 0)) {
    /* A synchronize with everything before it submitted already: it waits
     * for the last submission, and submits nothing (an empty batch would
     * add a launch to the wait). */
    uint64_t e = atomic_load(&s->submitted_epoch);
    if (e) {
      if (!s->cfg.no_latency_timing) nxv_hist_add(&s->op_latency, now_ns() - n->enqueue_ns);
      complete_at(s, n, e);
      return false;
    }
  }
  if (n->kind == NXV_NODE_DISPATCH && n->args_words > 0) {
    nxv_status st = place_args(s, n);
    if (st != NXV_OK) {
      if (atomic_load(&s->failed) == 0) set_error(s, st, nxv_last_error());
      node_free(s, n);
      return false;
    }
  }
  if (!s->open && open_batch(s, true) != NXV_OK) {
    node_free(s, n);
    return false;
  }
  batch *b = s->open;
  if (!b->open_ns) b->open_ns = taken;
  if (s->window && holdable(n)) {
    bool need = hazard(s, n);
    if (!need && !held_conflict(s, n)) {
      emit(s, b, n);
      return true;
    }
    /* The first op of a batch while the GPU has finished everything
     * submitted: its barrier waits for nothing, and holding it would only
     * put its recording after whatever comes next (a round trip's
     * download, whose flush then records it: 1-2 us on its path). */
    if (need && b->nnodes == 0 && s->nheld == 0 && gpu_idle(s)) {
      barrier(s, b);
      emit(s, b, n);
      return true;
    }
    if (s->nheld == s->window) {
      drain_held(s);
      if (!hazard(s, n)) {
        emit(s, b, n);
        return true;
      }
    }
    hold(s, n);
    return true;
  }
  if (hazard(s, n)) barrier(s, b);
  emit(s, b, n);
  return true;
}

/* Records n into b: its buffers' barrier marks, its command, its place
 * in b's node list. */
static void emit(nxv_sched *s, batch *b, nxv_node *n) {
  if (s->nheld) atomic_fetch_add_explicit(&s->reordered, 1, memory_order_relaxed);
  if (s->queries && !b->timed && n->kind != NXV_NODE_MARKER &&
      (b->nnodes >= NXV_UNTIMED_NODES || b->cost + n->cost >= NXV_UNTIMED_COST ||
       atomic_load_explicit(&s->recording, memory_order_relaxed))) {
    vkCmdWriteTimestamp(b->cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, s->queries,
                        2 * (uint32_t)(b - s->batches));
    b->timed = true;
  }
  for (uint32_t i = 0; i < n->nbufs; i++) {
    nxv_buffer *buf = n->bufs[i];
    if ((n->write_mask >> i) & 1u) {
      buf->sched_write_gen = s->gen;
      buf->sched_write_epoch = b->epoch;
      if (buf->host) b->host_read = true;
    } else {
      buf->sched_read_gen = s->gen;
    }
  }
  switch (n->kind) {
    case NXV_NODE_DISPATCH:
      if (n->groups[0] && n->groups[1] && n->groups[2]) {
        if (b->bound != n->pipeline) {
          vkCmdBindPipeline(b->cb, VK_PIPELINE_BIND_POINT_COMPUTE, n->pipeline);
          b->bound = n->pipeline;
        }
        vkCmdPushConstants(b->cb, s->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                           n->pc_size, n->pc);
        vkCmdDispatch(b->cb, n->groups[0], n->groups[1], n->groups[2]);
      }
      break;
    case NXV_NODE_COPY:
      if (n->bytes) {
        VkBufferCopy region = {n->src_offset, n->dst_offset, n->bytes};
        vkCmdCopyBuffer(b->cb, n->src, n->dst, 1, &region);
      }
      break;
    case NXV_NODE_FILL:
      if (n->bytes)
        vkCmdFillBuffer(b->cb, n->dst, n->dst_offset, n->bytes, n->fill_pattern);
      break;
    default:
      break;
  }
  if (n->flags & NXV_NODE_HOST_READ) b->host_read = true;
  if (n->ticket) atomic_store(&n->ticket->epoch, b->epoch);
  n->next = NULL;
  if (b->tail) b->tail->next = n;
  else b->head = n;
  b->tail = n;
  b->nnodes++;
  b->cost += n->cost;
  if (n->kind == NXV_NODE_COPY || n->kind == NXV_NODE_FILL) {
    b->bytes += n->bytes;
  } else {
    for (uint32_t i = 0; i < n->nbufs; i++)
      if (n->write_mask >> i & 1u) b->bytes += n->bufs[i]->size;
  }
}

/* Ends the open batch unsubmitted and frees its slot, cancelling what it
 * and the reordering window hold (the queue failed, or nothing was
 * recorded into it and the scheduler stops). */
static void discard_open(nxv_sched *s) {
  cancel_held(s);
  cancel_list(s, s->open->head);
  vkEndCommandBuffer(s->open->cb);
  release_batch_slot(s, s->open);
  s->open = NULL;
}

/* While the scheduler idles with an open batch that holds nothing, the
 * batch submitted last ends with a host read (a download or a small
 * mapped result: the host is waiting for it) and every batch submitted
 * has completed: records the barrier the next batch's first op would
 * need, once per batch (every buffer written before is then behind a
 * barrier). On the GPU it waits for nothing, as the same barrier recorded
 * before that op would; on the host it takes vkCmdPipelineBarrier (0.3-0.6
 * us on an H200 host) off the path of the op that comes next, typically a
 * round trip's reusing the buffer of the result just read. After batches
 * the host does not wait for, the next op often needs no barrier, and one
 * recorded ahead regardless measured slower for a training step (Nx's
 * Evaluator, MLP 0.384 against 0.345 ms). Completion is read from the
 * retiring threads' counter, not the timeline: the completion thread
 * polls that after every submission and retires at once, and the
 * driver's calls stay out of this loop (the two measured the same for
 * round trips). */
static void barrier_ahead(nxv_sched *s) {
  batch *b = s->open;
  if (!b || b->barrier_ahead || b->nnodes || s->nheld || !s->last_host_read ||
      !all_retired(s))
    return;
  barrier(s, b);
  b->barrier_ahead = true;
  atomic_fetch_add_explicit(&s->barriers_ahead, 1, memory_order_relaxed);
}

/* Whether the open batch, which the node just recorded made non-empty,
 * looks like a round trip's op: its one op, the first since the last
 * download, writes memory the host maps (a small result), that download
 * read in place and followed a single op too, the ring holds nothing more
 * and the timeline shows everything submitted complete. Such an op
 * is submitted at once rather than when its download arrives: through Nx
 * the BEAM queues the download 1-3 us after the op, and the download then
 * finds its epoch submitted and reads in place (record()); 0.02-0.8 us off
 * Nx's round trip on H200 hosts. After a download that copied, or one that
 * followed several ops (a loop of a few ops per read, whose later ops
 * would wait behind the first one's submission), and for any op but the
 * first after a download, the batch waits as before (submitting each op
 * alone would cost a bursty stream a submission per burst for nothing).
 * Completion is read from the timeline, not the retiring threads' counter,
 * which often lags the next op of a round trip. Off with the config's
 * no_round_trip_submit. */
static bool round_trip_op(nxv_sched *s, const batch *b) {
  return !s->cfg.no_round_trip_submit && b->nnodes == 1 && s->nheld == 0 && b->host_read &&
         s->last_read_in_place && s->ops_since_read == 1 && nxv_ring_empty(s->ring) &&
         gpu_idle(s);
}

static void *sched_main(void *arg) {
  nxv_sched *s = arg;
  for (;;) {
    if (atomic_load_explicit(&s->paused, memory_order_relaxed) && !atomic_load(&s->stop)) {
      cpu_relax();
      continue;
    }
    nxv_node *n = nxv_ring_pop(s->ring);
    if (n) {
      if (atomic_load(&s->blocked_producers)) {
        pthread_mutex_lock(&s->mu);
        pthread_cond_broadcast(&s->space_cv);
        pthread_mutex_unlock(&s->mu);
      }
      if (atomic_load(&s->failed)) {
        node_free(s, n);
        continue;
      }
      uint8_t flags = n->flags; /* n may be freed by record */
      if (!record(s, n)) continue;
      batch *b = s->open;
      uint32_t nodes = b->nnodes + s->nheld;
      uint64_t cost = b->cost + s->held_cost;
      bool flush = (flags & NXV_NODE_FLUSH) || nodes >= s->cfg.max_batch_nodes ||
                   cost >= s->cfg.max_batch_cost;
      if (!flush && early_sized(s)) flush = early_ok(s);
      bool round_trip = !flush && round_trip_op(s, b), pipelined = false;
      flush = flush || round_trip;
      if (!flush && s->cfg.kick_nodes && nodes >= s->cfg.kick_nodes) {
        bool backlog = nodes >= NXV_KICK_BACKLOG * s->cfg.kick_nodes;
        bool waiting = !nxv_ring_empty(s->ring);
        if (backlog || !waiting) {
          pthread_mutex_lock(&s->mu);
          uint32_t inflight = s->inflight_count;
          uint64_t inflight_cost = 0;
          for (uint32_t i = 0; inflight < s->cfg.kick_inflight && i < inflight; i++)
            inflight_cost +=
                s->batches[s->inflight[(s->inflight_head + i) % NXV_MAX_BATCHES]].cost;
          pthread_mutex_unlock(&s->mu);
          flush = inflight == 0 ||
                  (inflight < s->cfg.kick_inflight && inflight_cost < NXV_EARLY_COST);
          pipelined = flush && inflight;
        }
      }
      if (flush) submit_open(s);
      if (pipelined) atomic_fetch_add_explicit(&s->pipelined_kicks, 1, memory_order_relaxed);
      /* Counted once submitted, so that a reader who sees the count sees
       * the batch in flight. */
      if (round_trip) atomic_fetch_add_explicit(&s->round_trip_submits, 1, memory_order_release);
      continue;
    }
    if (s->open) {
      if (atomic_load(&s->failed)) {
        discard_open(s);
        continue;
      }
      if (s->open->nnodes || s->nheld) {
        uint64_t until = now_ns() + (uint64_t)s->cfg.idle_flush_us * 1000u;
        /* A batch that the early rule holds (early_ok()) goes as soon as
         * the GPU has room for it, not after idle_flush_us. */
        bool early_held = s->cfg.early_inflight && early_sized(s);
        while (nxv_ring_empty(s->ring) && now_ns() < until &&
               !atomic_load(&s->stop)) {
          if (early_held && early_ok(s)) break;
          cpu_relax();
        }
        if (nxv_ring_empty(s->ring)) submit_open(s);
        continue;
      }
    }
    if (atomic_load(&s->stop)) {
      /* A batch opened ahead and never used: its epoch is never
       * signalled, which no ticket waits for. */
      if (s->open) discard_open(s);
      break;
    }
    /* Nothing to record: open the next batch now (a free slot, its
     * command buffer begun), so that the
     * next op is recorded and submitted without that on its path. A
     * failure is the sticky error, seen on the next pass. */
    if (!s->open) (void)open_batch(s, false);
    /* Idle: poll a while before sleeping; producers signal only a
     * sleeping scheduler, so a node pushed meanwhile costs no wake-up.
     * The producer that wakes it clears `sleeping` itself (wake_scheduler);
     * the store after the wait covers spurious wake-ups. */
    uint64_t until = now_ns() + (uint64_t)s->cfg.idle_spin_us * 1000u;
    while (nxv_ring_empty(s->ring) && now_ns() < until && !atomic_load(&s->stop)) {
      barrier_ahead(s);
      cpu_relax();
    }
    if (!nxv_ring_empty(s->ring)) continue;
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->sleeping, true);
    atomic_thread_fence(memory_order_seq_cst);
    if (nxv_ring_empty(s->ring) && !atomic_load(&s->stop))
      pthread_cond_wait(&s->sched_cv, &s->mu);
    atomic_store(&s->sleeping, false);
    pthread_mutex_unlock(&s->mu);
  }
  return NULL;
}

/* ------------------------------------------------------------------ */
/* Completion thread                                                   */
/* ------------------------------------------------------------------ */

/* How long a calibration of the timestamps serves (clock drift between the
 * device and the host stays well under a microsecond over it). */
#define NXV_CALIBRATE_NS 10000000ull

/* Samples the device's timestamp clock and CLOCK_MONOTONIC together when
 * the last sample is older than NXV_CALIBRATE_NS. false where timestamps
 * cannot be calibrated (or sampling them fails). Under retire_mu. */
static bool calibrate(nxv_sched *s) {
  if (!s->vk->get_calibrated) return false;
  uint64_t now = now_ns();
  if (s->cal_at && now - s->cal_at <= NXV_CALIBRATE_NS) return true;
  VkCalibratedTimestampInfoEXT ci[2] = {
      {.sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT,
       .timeDomain = VK_TIME_DOMAIN_DEVICE_EXT},
      {.sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT,
       .timeDomain = VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT}};
  uint64_t ts[2], deviation;
  if (s->vk->get_calibrated(s->vk->device, 2, ci, ts, &deviation) != VK_SUCCESS) return false;
  s->cal_ticks = ts[0] & s->tick_mask;
  s->cal_ns = ts[1];
  s->cal_at = now;
  return true;
}

/* The now_ns() time of device timestamp ticks, through the last
 * calibrate(). Ticks before the calibration point come out negative
 * (modulo the timestamp's valid bits). Under retire_mu. */
static uint64_t host_time_of(const nxv_sched *s, uint64_t ticks) {
  uint64_t ahead = (ticks - s->cal_ticks) & s->tick_mask;
  double ns = ahead <= s->tick_mask / 2
                  ? (double)ahead * s->tick_ns
                  : -(double)((s->cal_ticks - ticks) & s->tick_mask) * s->tick_ns;
  double t = (double)s->cal_ns + ns;
  return t > 0 ? (uint64_t)t : 0;
}

/* Releases a batch's nodes; for a batch that ran (completed), adds its GPU
 * time from its timestamps. Under retire_mu. */
static void retire(nxv_sched *s, batch *b, bool completed) {
  uint64_t gpu_ns = 0;
  uint64_t t[2] = {0, 0};
  bool stamped = false;
  if (completed && !b->timed) atomic_fetch_add_explicit(&s->untimed, 1, memory_order_relaxed);
  if (completed && b->timed) {
    VkResult r = vkGetQueryPoolResults(s->vk->device, s->queries,
                                       2 * (uint32_t)(b - s->batches), 2, sizeof t, t,
                                       sizeof t[0], VK_QUERY_RESULT_64_BIT);
    if (r == VK_SUCCESS) {
      stamped = true;
      uint64_t ticks = (t[1] - t[0]) & s->tick_mask;
      gpu_ns = (uint64_t)((double)ticks * s->tick_ns);
      atomic_fetch_add_explicit(&s->gpu_ns, gpu_ns, memory_order_relaxed);
      nxv_hist_add(&s->batch_gpu, gpu_ns);
    } else if (r != VK_NOT_READY) {
      nxv_status st = nxv_fail_vk(r, "vkGetQueryPoolResults (batch timestamps)");
      set_error(s, st, nxv_last_error());
    }
  }
  bool timed = completed && !s->cfg.no_latency_timing;
  bool rec = completed && atomic_load_explicit(&s->recording, memory_order_relaxed);
  uint64_t seen = timed || rec ? now_ns() : 0;
  if (timed) {
    nxv_histogram l;
    memset(&l, 0, sizeof l);
    for (nxv_node *n = b->head; n; n = n->next) nxv_hist_local_add(&l, seen - n->enqueue_ns);
    nxv_hist_merge(&s->op_latency, &l);
  }
  if (rec) {
    bool times = stamped && calibrate(s);
    uint64_t start = times ? host_time_of(s, t[0]) : 0;
    uint64_t end = times ? host_time_of(s, t[1]) : 0;
    pthread_mutex_lock(&s->rec_mu);
    if (!s->records) {
      /* recording was stopped meanwhile */
    } else if (s->rec_count == NXV_BATCH_RECORDS) {
      s->rec_dropped++;
    } else {
      s->records[(s->rec_head + s->rec_count++) % NXV_BATCH_RECORDS] = (nxv_batch_record){
          .epoch = b->epoch,
          .ops = b->nnodes,
          .bytes = b->bytes,
          .queue_wait_ns = b->queue_wait_ns,
          .gpu_ns = gpu_ns,
          .latency_ns = seen - b->submit_ns,
          .record_time_ns = b->open_ns,
          .submit_time_ns = b->submit_call_ns,
          .gpu_start_time_ns = start,
          .gpu_end_time_ns = end};
    }
    pthread_mutex_unlock(&s->rec_mu);
  }
  uint64_t nodes = b->nnodes;
  cancel_list(s, b->head);
  b->head = b->tail = NULL;
  atomic_fetch_add(&s->completed_ops, nodes);
}

/* Retires, oldest first, every batch in flight whose epoch the timeline
 * has reached (value), or every batch when the queue is lost (their work
 * never runs). Serialized by retire_mu, so that completed_epoch only
 * grows: called by the completion thread and by waiters (spin_ticket)
 * that saw the timeline pass their epoch before the completion thread
 * woke (a thread blocked in vkWaitSemaphores wakes tens of microseconds
 * after the signal on some drivers). */
static void retire_ready(nxv_sched *s, uint64_t value, bool lost) {
  pthread_mutex_lock(&s->retire_mu);
  for (;;) {
    pthread_mutex_lock(&s->mu);
    if (s->inflight_count == 0) {
      pthread_mutex_unlock(&s->mu);
      break;
    }
    batch *b = &s->batches[s->inflight[s->inflight_head]];
    if (!lost && b->epoch > value) {
      pthread_mutex_unlock(&s->mu);
      break;
    }
    s->inflight_head = (s->inflight_head + 1) % NXV_MAX_BATCHES;
    s->inflight_count--;
    s->retiring++;
    pthread_mutex_unlock(&s->mu);
    retire(s, b, !lost);
    pthread_mutex_lock(&s->mu);
    s->retiring--;
    s->retired_ns = now_ns();
    if (!lost) atomic_store(&s->completed_epoch, b->epoch);
    s->free_batches[s->nfree++] = (uint32_t)(b - s->batches);
    pthread_cond_broadcast(&s->done_cv);
    pthread_mutex_unlock(&s->mu);
  }
  pthread_mutex_unlock(&s->retire_mu);
}

static void *completion_main(void *arg) {
  nxv_sched *s = arg;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    while (s->inflight_count == 0 && !s->completion_stop)
      pthread_cond_wait(&s->inflight_cv, &s->mu);
    if (s->inflight_count == 0) {
      pthread_mutex_unlock(&s->mu);
      break;
    }
    batch *oldest = &s->batches[s->inflight[s->inflight_head]];
    uint64_t target = oldest->epoch;
    uint64_t submitted = oldest->submit_ns;
    uint32_t ops = oldest->nnodes;
    uint64_t retired_ns = s->retired_ns;
    pthread_mutex_unlock(&s->mu);

    /* Poll briefly first: a blocking wait wakes tens of microseconds
     * after the signal on some drivers (25 us on an H100), and retirement
     * (which the pool and synchronize wait for) would pay that on every
     * short batch. Off on CPU devices, whose work needs the cores. */
    uint64_t spin_until = now_ns() + (uint64_t)s->cfg.completion_spin_us * 1000u;
    uint64_t seen = 0;
    while (vkGetSemaphoreCounterValue(s->vk->device, s->timeline, &seen) ==
               VK_SUCCESS &&
           seen < target && now_ns() < spin_until && !atomic_load(&s->failed))
      cpu_relax();
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                              .semaphoreCount = 1,
                              .pSemaphores = &s->timeline,
                              .pValues = &target};
    /* With batch_timeout_ms, the wait ends at the oldest batch's deadline
     * (until the queue has failed): batch_timeout_ms after it became the
     * oldest in flight, submitted and the batches before it retired (a
     * batch queued behind long work is not charged for that work). */
    uint64_t wait_ns = 1000000000ull;
    bool watched = s->cfg.batch_timeout_ms && !atomic_load(&s->failed);
    uint64_t deadline = (submitted > retired_ns ? submitted : retired_ns) +
                        (uint64_t)s->cfg.batch_timeout_ms * 1000000u;
    if (watched) {
      uint64_t now = now_ns();
      uint64_t left = deadline > now ? deadline - now : 0;
      if (left < wait_ns) wait_ns = left;
    }
    VkResult r = vkWaitSemaphores(s->vk->device, &wi, wait_ns);
    if (r == VK_TIMEOUT) {
      if (watched && now_ns() >= deadline) {
        /* Its work stays in flight: retired (its buffers released) only
         * if the GPU ever completes it. */
        char msg[256];
        snprintf(msg, sizeof msg,
                 "batch %llu (%u ops) has not completed %u ms after it became the oldest "
                 "in flight (batch_timeout_ms): the GPU stopped making progress",
                 (unsigned long long)target, ops, s->cfg.batch_timeout_ms);
        set_error(s, NXV_ERR_DEVICE_LOST, msg);
      }
      continue;
    }
    uint64_t value = 0;
    bool lost = false;
    if (r == VK_SUCCESS)
      r = vkGetSemaphoreCounterValue(s->vk->device, s->timeline, &value);
    if (r != VK_SUCCESS) {
      nxv_status st = nxv_fail_vk(r, "vkWaitSemaphores (timeline)");
      set_error(s, st == NXV_ERR_DEVICE_LOST ? st : NXV_ERR_DEVICE_LOST,
                nxv_last_error());
      lost = true; /* the GPU runs nothing more: release everything */
    }
    retire_ready(s, value, lost);
  }
  return NULL;
}

/* ------------------------------------------------------------------ */
/* Producers and waiters                                               */
/* ------------------------------------------------------------------ */

/* Wakes a sleeping scheduler after a push. The first producer to see it
 * asleep clears `sleeping` and signals; every push until the thread runs
 * again finds the flag clear and costs no mutex and no system call (the
 * thread drains the whole ring once it runs). The fences pair with the
 * scheduler's store of `sleeping` and its second look at the ring: either
 * it sees this push or this producer sees it asleep. */
static void wake_scheduler(nxv_sched *s) {
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load(&s->sleeping) && atomic_exchange(&s->sleeping, false)) {
    atomic_fetch_add_explicit(&s->wakeups, 1, memory_order_relaxed);
    pthread_mutex_lock(&s->mu);
    pthread_cond_signal(&s->sched_cv);
    pthread_mutex_unlock(&s->mu);
  }
}

nxv_status nxv_sched_push(nxv_sched *s, nxv_node *n) {
  if (atomic_load(&s->failed)) {
    nxv_node_discard(n);
    return sticky(s);
  }
  atomic_fetch_add_explicit(&s->enqueued, 1, memory_order_relaxed);
  if (!s->cfg.no_latency_timing) n->enqueue_ns = now_ns();
  /* Before the push: once the node is in the ring, retirement may
   * uncount it. */
  if (n->write_mask) {
    for (uint32_t i = 0; i < n->nbufs; i++)
      if ((n->write_mask >> i) & 1u)
        atomic_fetch_add_explicit(&n->bufs[i]->pending_writes, 1, memory_order_relaxed);
    n->writes_counted = true;
  }
  if (!nxv_ring_push(s->ring, n)) {
    /* Full: the scheduler is behind. Spin briefly, then sleep until it
     * pops; the node keeps its place in this producer's order. */
    atomic_fetch_add(&s->ring_full, 1);
    bool pushed = false;
    for (int i = 0; i < 256 && !pushed; i++) {
      cpu_relax();
      pushed = nxv_ring_push(s->ring, n);
    }
    if (!pushed) {
      pthread_mutex_lock(&s->mu);
      atomic_fetch_add(&s->blocked_producers, 1);
      while (!nxv_ring_push(s->ring, n)) {
        pthread_cond_signal(&s->sched_cv);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 1000000; /* safety net against a missed wake-up */
        if (ts.tv_nsec >= 1000000000) {
          ts.tv_sec++;
          ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&s->space_cv, &s->mu, &ts);
      }
      atomic_fetch_sub(&s->blocked_producers, 1);
      pthread_mutex_unlock(&s->mu);
    }
  }
  wake_scheduler(s);
  return NXV_OK;
}

/* Busy-polls until ns_deadline (now_ns() clock): 1 when the ticket's node
 * has completed (retired: and its batch retired), -1 when the queue has
 * failed, 0 at the deadline. Checks at least once. */
static int spin_ticket(nxv_sched *s, nxv_ticket *t, bool retired,
                       uint64_t ns_deadline) {
  for (;;) {
    uint64_t e = atomic_load(&t->epoch);
    if (e && atomic_load(&s->completed_epoch) >= e) return 1;
    if (e && atomic_load(&s->submitted_epoch) >= e) {
      uint64_t v = 0;
      if (vkGetSemaphoreCounterValue(s->vk->device, s->timeline, &v) ==
              VK_SUCCESS && v >= e) {
        if (!retired) return 1;
        /* Retire it here rather than wait for the completion thread. */
        retire_ready(s, v, false);
        if (atomic_load(&s->completed_epoch) >= e) return 1;
      }
    }
    if (atomic_load(&s->failed)) return -1;
    if (now_ns() >= ns_deadline) return 0;
    cpu_relax();
  }
}

nxv_status nxv_sched_poll(nxv_sched *s, nxv_ticket *t, uint32_t spin_us,
                          bool *out_done) {
  int r = spin_ticket(s, t, false, now_ns() + (uint64_t)spin_us * 1000u);
  *out_done = r == 1;
  return r < 0 ? sticky(s) : NXV_OK;
}

nxv_status nxv_sched_wait(nxv_sched *s, nxv_ticket *t, bool retired) {
  int r = spin_ticket(s, t, retired,
                      now_ns() + (uint64_t)s->cfg.wait_spin_us * 1000u);
  if (r == 1) return NXV_OK;
  if (r < 0) return sticky(s);
  pthread_mutex_lock(&s->mu);
  for (;;) {
    uint64_t e = atomic_load(&t->epoch);
    if (e && atomic_load(&s->completed_epoch) >= e) break;
    if (s->error != NXV_OK) {
      pthread_mutex_unlock(&s->mu);
      return sticky(s);
    }
    pthread_cond_wait(&s->done_cv, &s->mu);
  }
  pthread_mutex_unlock(&s->mu);
  return NXV_OK;
}

nxv_status nxv_sched_synchronize(nxv_sched *s) {
  nxv_node *n = nxv_node_new(0);
  nxv_ticket *t = nxv_ticket_new();
  if (!n || !t) {
    free(n);
    free(t);
    return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "synchronize marker");
  }
  n->kind = NXV_NODE_MARKER;
  n->flags = NXV_NODE_FLUSH;
  n->ticket = t;
  /* On failure push discards the node, which drops the node's reference. */
  nxv_status st = nxv_sched_push(s, n);
  if (st == NXV_OK) st = nxv_sched_wait(s, t, true);
  nxv_ticket_release(t);
  return st;
}

/* ------------------------------------------------------------------ */
/* Lifetime                                                            */
/* ------------------------------------------------------------------ */

nxv_status nxv_sched_create(const nxv_vk *vk, const nxv_sched_config *cfg,
                            nxv_hostring *staging, VkPipelineLayout layout,
                            nxv_sched **out_sched) {
  nxv_sched *s = nxv_lines_alloc(sizeof *s);
  if (!s) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "scheduler");
  s->vk = vk;
  s->cfg = *cfg;
  s->staging = staging;
  s->layout = layout;
  s->gen = 1;
  s->hold_gen = 1;
  s->window = cfg->reorder_window > NXV_REORDER_MAX ? NXV_REORDER_MAX : cfg->reorder_window;
  nxv_hist_init(&s->op_latency);
  nxv_hist_init(&s->queue_wait);
  nxv_hist_init(&s->batch_gpu);
  nxv_hist_init(&s->download_wait);
  pthread_mutex_init(&s->rec_mu, NULL);
  pthread_mutex_init(&s->retire_mu, NULL);
  atomic_init(&s->recording, false);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->sched_cv, NULL);
  pthread_cond_init(&s->inflight_cv, NULL);
  pthread_cond_init(&s->done_cv, NULL);
  pthread_cond_init(&s->space_cv, NULL);
  nxv_status st = nxv_ring_create(cfg->ring_capacity, &s->ring);
  if (st == NXV_OK)
    st = nxv_hostring_create(vk, cfg->arena_bytes, true, &s->arena);
  if (st == NXV_OK) {
    VkSemaphoreTypeCreateInfo tci = {
        .sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
        .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
        .initialValue = 0};
    VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO,
                                 .pNext = &tci};
    VkResult r = vkCreateSemaphore(vk->device, &sci, NULL, &s->timeline);
    if (r != VK_SUCCESS) st = nxv_fail_vk(r, "vkCreateSemaphore (timeline)");
  }
  if (st == NXV_OK) {
    VkCommandPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = vk->queue_family};
    VkResult r = vkCreateCommandPool(vk->device, &pci, NULL, &s->cmd_pool);
    if (r != VK_SUCCESS) st = nxv_fail_vk(r, "vkCreateCommandPool");
  }
  if (st == NXV_OK) {
    VkCommandBuffer cbs[NXV_MAX_BATCHES];
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = s->cmd_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = NXV_MAX_BATCHES};
    VkResult r = vkAllocateCommandBuffers(vk->device, &ai, cbs);
    if (r != VK_SUCCESS) st = nxv_fail_vk(r, "vkAllocateCommandBuffers");
    for (uint32_t i = 0; st == NXV_OK && i < NXV_MAX_BATCHES; i++) {
      s->batches[i].cb = cbs[i];
      s->free_batches[s->nfree++] = NXV_MAX_BATCHES - 1 - i;
    }
  }
  if (st == NXV_OK) {
    /* Batch timestamps, where the queue family writes them and the
     * config wants them. */
    uint32_t bits = vk->info.timestamp_bits;
    if (!cfg->no_gpu_timestamps && bits > 0 && vk->info.timestamp_period_ns > 0) {
      VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                  .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                  .queryCount = 2 * NXV_MAX_BATCHES};
      VkResult r = vkCreateQueryPool(vk->device, &qi, NULL, &s->queries);
      if (r != VK_SUCCESS) st = nxv_fail_vk(r, "vkCreateQueryPool (batch timestamps)");
      s->tick_ns = vk->info.timestamp_period_ns;
      s->tick_mask = bits >= 64 ? UINT64_MAX : (1ull << bits) - 1;
    }
  }
  if (st == NXV_OK) {
    if (pthread_create(&s->completion_thread, NULL, completion_main, s) != 0)
      st = nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "starting the completion thread");
    else {
      /* Named for operators (top -H, perf): best effort. */
      (void)pthread_setname_np(s->completion_thread, "nxv-completion");
      s->completion_started = true;
    }
  }
  if (st == NXV_OK) {
    if (pthread_create(&s->sched_thread, NULL, sched_main, s) != 0)
      st = nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "starting the scheduler thread");
    else {
      (void)pthread_setname_np(s->sched_thread, "nxv-scheduler");
      s->sched_started = true;
    }
  }
  if (st != NXV_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", nxv_last_error());
    nxv_sched_destroy(s);
    return nxv_fail(st, "%s", msg);
  }
  *out_sched = s;
  return NXV_OK;
}

void nxv_sched_destroy(nxv_sched *s) {
  if (!s) return;
  if (s->sched_started) {
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->stop, true);
    pthread_cond_signal(&s->sched_cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->sched_thread, NULL);
  }
  /* Nodes pushed after the scheduler stopped (a contract violation) or
   * left by a failed start are cancelled. */
  if (s->ring) {
    nxv_node *n;
    while ((n = nxv_ring_pop(s->ring))) node_free(s, n);
  }
  if (s->hung) {
    /* Ends the injected hangs: the batches waiting on them run. The
     * scheduler thread, which submitted them, has exited. */
    VkSemaphoreSignalInfo si = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO,
                                .semaphore = s->hang_sem,
                                .value = 1};
    vkSignalSemaphore(s->vk->device, &si);
  }
  if (s->completion_started) {
    pthread_mutex_lock(&s->mu);
    s->completion_stop = true;
    pthread_cond_signal(&s->inflight_cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->completion_thread, NULL);
  }
  VkDevice dev = s->vk->device;
  if (s->sched_started) vkQueueWaitIdle(s->vk->queue);
  if (s->cmd_pool) vkDestroyCommandPool(dev, s->cmd_pool, NULL);
  if (s->queries) vkDestroyQueryPool(dev, s->queries, NULL);
  if (s->timeline) vkDestroySemaphore(dev, s->timeline, NULL);
  if (s->hang_sem) vkDestroySemaphore(dev, s->hang_sem, NULL);
  nxv_hostring_destroy(s->arena);
  nxv_ring_destroy(s->ring);
  pthread_cond_destroy(&s->done_cv);
  pthread_cond_destroy(&s->space_cv);
  pthread_cond_destroy(&s->inflight_cv);
  pthread_cond_destroy(&s->sched_cv);
  pthread_mutex_destroy(&s->mu);
  pthread_mutex_destroy(&s->rec_mu);
  pthread_mutex_destroy(&s->retire_mu);
  free(s->records);
  free(s);
}

void nxv_sched_stats(nxv_sched *s, nxv_stats *st) {
  st->ops_enqueued = atomic_load(&s->enqueued);
  st->ops_completed = atomic_load(&s->completed_ops);
  st->submits = atomic_load(&s->submits);
  st->barriers = atomic_load(&s->barriers);
  st->barriers_ahead = atomic_load(&s->barriers_ahead);
  st->round_trip_submits = atomic_load(&s->round_trip_submits);
  st->pipelined_kicks = atomic_load(&s->pipelined_kicks);
  st->epoch_submitted = atomic_load(&s->submitted_epoch);
  st->epoch_completed = atomic_load(&s->completed_epoch);
  st->ring_full_waits = atomic_load(&s->ring_full);
  st->scheduler_wakeups = atomic_load(&s->wakeups);
  st->reads_in_place = atomic_load(&s->reads_in_place);
  st->ops_reordered = atomic_load(&s->reordered);
  st->pipeline_waits = atomic_load(&s->pipeline_waits);
  st->pipeline_wait_ns = atomic_load(&s->pipeline_wait_ns);
  st->gpu_busy_ns = atomic_load(&s->gpu_ns);
  st->batches_untimed = atomic_load(&s->untimed);
  st->bytes_submitted = atomic_load(&s->bytes_submitted);
  nxv_hist_snapshot(&s->op_latency, &st->op_latency);
  nxv_hist_snapshot(&s->queue_wait, &st->queue_wait);
  nxv_hist_snapshot(&s->batch_gpu, &st->batch_gpu);
  nxv_hist_snapshot(&s->download_wait, &st->download_wait);
}

void nxv_sched_note_read_in_place(nxv_sched *s) {
  atomic_fetch_add_explicit(&s->reads_in_place, 1, memory_order_relaxed);
}

void nxv_sched_note_download(nxv_sched *s, uint64_t wait_ns) {
  nxv_hist_add(&s->download_wait, wait_ns);
}

void nxv_sched_record_batches(nxv_sched *s, bool enable) {
  pthread_mutex_lock(&s->rec_mu);
  if (enable && !s->records) {
    s->records = malloc(NXV_BATCH_RECORDS * sizeof *s->records);
    enable = s->records != NULL;
  } else if (!enable) {
    free(s->records);
    s->records = NULL;
  }
  s->rec_head = s->rec_count = 0;
  s->rec_dropped = 0;
  atomic_store(&s->recording, enable);
  pthread_mutex_unlock(&s->rec_mu);
}

void nxv_sched_take_batches(nxv_sched *s, nxv_batch_record *out, uint32_t max,
                            uint32_t *out_count, uint64_t *out_dropped) {
  pthread_mutex_lock(&s->rec_mu);
  uint32_t n = s->rec_count < max ? s->rec_count : max;
  for (uint32_t i = 0; i < n; i++) out[i] = s->records[(s->rec_head + i) % NXV_BATCH_RECORDS];
  if (n) s->rec_head = (s->rec_head + n) % NXV_BATCH_RECORDS;
  s->rec_count -= n;
  *out_count = n;
  *out_dropped = s->rec_dropped;
  s->rec_dropped = 0;
  pthread_mutex_unlock(&s->rec_mu);
}
