/*
 * scheduler.h - the per-device op queue: nodes, batching, submission and
 * completion.
 *
 * Producers (any thread) build a node and push it with nxv_sched_push,
 * which returns at once. One scheduler thread pops nodes in order and
 * records them into the open command buffer, inserting one global memory
 * barrier before a node only when it reads or writes a buffer written, or
 * writes a buffer read, since the last barrier. A node that needs such a
 * barrier waits in a small window while later nodes that need none (and
 * touch nothing a waiting node writes, nor write what one reads) are
 * recorded ahead of it; the window is recorded in dependency order, one
 * barrier per level, before anything that must see it (a download, a
 * marker, a flush) and before the batch is submitted. It submits the batch when a
 * node asks for a flush (downloads, synchronize), when the batch reaches its
 * node or work budget, when the GPU is idle and a few nodes are ready, or
 * when the ring has been empty for idle_flush_us. Each submit signals the
 * timeline semaphore with the batch's epoch (1, 2, ...). A batch that
 * writes a mapped buffer (nxv_buffer.host) or a host-read staging buffer
 * ends with a barrier making its writes visible to the host.
 *
 * A completion thread waits on the timeline and retires batches in order:
 * it drops the nodes' buffer references (so buffers return to the pool only
 * after the last epoch that used them), frees their staging and argument
 * space, and wakes waiters.
 *
 * A dispatch whose pipeline was still being created when it was queued
 * (nxv_node.pending) is recorded once the pipeline exists: the scheduler
 * submits what it has recorded, then waits for it.
 *
 * Errors are sticky: the first failed submission, device loss or failed
 * pipeline creation of a pending node records its cause; waiters wake
 * with it, queued nodes are cancelled (their references dropped, nothing
 * executed), and nxv_sched_push fails fast.
 */
#ifndef NXV_SCHED_SCHEDULER_H
#define NXV_SCHED_SCHEDULER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "nxv.h"
#include "pool/hostring.h"
#include "pool/pool.h"
#include "sched/lines.h"
#include "sched/vk.h"

#define NXV_NODE_MAX_BUFS 16
#define NXV_PUSH_CONSTANTS_MAX 128
/* Most nodes the reordering window holds (nxv_sched_config). */
#define NXV_REORDER_MAX NXV_REORDER_WINDOW_MAX

typedef enum nxv_node_kind {
  NXV_NODE_DISPATCH = 0, /* bind pipeline, push constants, dispatch */
  NXV_NODE_COPY = 1,     /* vkCmdCopyBuffer */
  NXV_NODE_FILL = 2,     /* vkCmdFillBuffer with a 32-bit pattern */
  NXV_NODE_MARKER = 3,   /* records nothing; used to learn an epoch */
} nxv_node_kind;

enum {
  NXV_NODE_FLUSH = 1u << 0,     /* submit right after recording this node */
  NXV_NODE_HOST_READ = 1u << 1, /* the host reads what this node writes */
  NXV_NODE_MAPPED_READ = 1u << 2, /* marker for a host read of bufs[0]
                                     through its mapping: its ticket takes
                                     the epoch of the batch that last wrote
                                     the buffer; it joins (and flushes) the
                                     open batch only when that writer is
                                     there or unknown */
};

/* Shared between a waiting thread and the node it waits for. Reference
 * counted (the node and the waiter each hold one); the last release frees
 * the staging it owns. */
typedef struct nxv_ticket {
  atomic_uint refs;
  atomic_uint_fast64_t epoch;   /* 0 until the node is recorded */
  nxv_hostring *ring;           /* staging's ring, when has_staging */
  nxv_host_alloc staging;       /* download destination, owned */
  bool has_staging;
} nxv_ticket;

/* A pipeline still being created when the node that dispatches it was
 * built (kernels/registry.h makes them). The node owns one reference; the
 * scheduler waits for the pipeline when it records the node, and a failed
 * creation fails the device (sticky, as a failed submission does). */
typedef struct nxv_pending_pipeline nxv_pending_pipeline;
struct nxv_pending_pipeline {
  /* Whether the creation has finished (wait would not block). Any thread. */
  bool (*done)(nxv_pending_pipeline *p);
  /* Blocks until the creation has finished: NXV_OK and the pipeline (owned
   * by the registry) in *out_pipeline, or its failure, whose message
   * becomes the calling thread's last error. Any thread. */
  nxv_status (*wait)(nxv_pending_pipeline *p, VkPipeline *out_pipeline);
  /* Drops one reference. Any thread. */
  void (*release)(nxv_pending_pipeline *p);
};

/* One queued operation. Built by a producer, owned by the scheduler once
 * pushed, freed at retirement or cancellation.
 *
 * A node is a message from the producer's core to the scheduler thread's
 * and on to the retiring thread's, and every cache line of it that the
 * producer writes moves between cores twice per op. The fields every op
 * sets share the first two lines, push constants start a line of their
 * own, and the fields only copies, fills, uploads and arguments use lie in
 * between, so that a dispatch without arguments writes three lines. A node
 * comes zeroed from nxv_node_new: the retiring thread zeroes a node it
 * returns to the node cache, so the producer writes only what it sets. */
typedef struct nxv_node {
  /* Line 0: set for every op, read first by the scheduler. */
  NXV_LINE_ALIGNED uint8_t kind; /* nxv_node_kind */
  uint8_t flags;                /* NXV_NODE_* */
  uint8_t nbufs;                /* entries used in bufs */
  bool writes_counted;          /* nxv_sched_push counted it in its written
                                   buffers' pending_writes */
  bool has_staging;
  bool has_arena;               /* arena holds this node's arguments */
  uint16_t write_mask;          /* bit i: bufs[i] is written */
  uint32_t pc_size;             /* bytes of push constants */
  uint32_t args_words;          /* uint32 words in args[] */
  uint32_t args_pc_offset;      /* byte offset in pc of the arena address */
  uint32_t groups[3];           /* dispatch size; groups[0]==0: nothing */
  uint64_t cost;                /* work estimate (elements touched) */
  VkPipeline pipeline;          /* dispatch: owned by the registry;
                                   VK_NULL_HANDLE while pending */
  nxv_pending_pipeline *pending; /* dispatch: the pipeline's creation when
                                    it was under way at queue time, one
                                    reference owned; resolved into
                                    pipeline when the node is recorded */
  uint64_t enqueue_ns;          /* set by nxv_sched_push (monotonic clock) */
  /* Line 1 on: the batch link, the ticket, the buffers. */
  struct nxv_node *next;        /* batch list link (scheduler) */
  nxv_ticket *ticket;           /* optional, one reference owned */
  nxv_buffer *bufs[NXV_NODE_MAX_BUFS]; /* references owned by the node */
  /* Copies, fills, uploads and arguments only. */
  VkBuffer src, dst;            /* copy/fill: not owned */
  VkDeviceSize src_offset, dst_offset, bytes;
  uint32_t fill_pattern;
  nxv_hostring *staging_ring;   /* ring of staging, when has_staging */
  nxv_host_alloc staging;       /* upload source, owned when has_staging */
  nxv_host_alloc arena;         /* set by the scheduler, freed at retire */
  NXV_LINE_ALIGNED uint8_t pc[NXV_PUSH_CONSTANTS_MAX];
  uint32_t args[];              /* metadata copied to the argument arena */
} nxv_node;

typedef struct nxv_sched nxv_sched;

typedef struct nxv_sched_config {
  uint32_t ring_capacity;
  uint32_t max_batch_nodes;
  uint64_t max_batch_cost;
  uint32_t idle_flush_us;
  uint32_t kick_nodes;        /* submit at this many nodes when nothing is
                                  in flight; 0 = never */
  uint32_t kick_inflight;     /* ... or while fewer than this many
                                 batches of little work (NXV_EARLY_COST in
                                 all) are in flight (at least 1) */
  uint32_t early_inflight;    /* the early rule (NXV_EARLY_NODES nodes
                                 and NXV_EARLY_COST of work) submits only
                                 while fewer than this many batches are
                                 incomplete on the GPU; 0 = always */
  uint32_t reorder_window;    /* nodes that need a barrier wait in a window
                                 of at most this many (up to
                                 NXV_REORDER_MAX) while later independent
                                 nodes are recorded first; 0 = in order */
  uint32_t wait_spin_us;
  uint32_t idle_spin_us;
  uint32_t completion_spin_us; /* the completion thread polls the timeline
                                  this long before blocking; 0 = never */
  uint64_t arena_bytes;
  bool no_latency_timing;     /* no clock read per op (op_latency empty) */
  bool no_gpu_timestamps;     /* no batch timestamps (no GPU time) */
  bool no_round_trip_submit;  /* round_trip_op() never holds */
  uint32_t batch_timeout_ms;  /* a batch still in flight this long after it
                                 became the oldest (submitted, the batches
                                 before it retired) fails the queue
                                 (NXV_ERR_DEVICE_LOST); 0 = never */
} nxv_sched_config;

/* Creates the queue and starts its threads. vk, staging and layout must
 * outlive it. */
nxv_status nxv_sched_create(const nxv_vk *vk, const nxv_sched_config *config,
                            nxv_hostring *staging, VkPipelineLayout layout,
                            nxv_sched **out_sched);

/* Drains queued work (or cancels it after a sticky error), waits for the
 * GPU, stops the threads and frees everything. No push may be in progress
 * or follow. */
void nxv_sched_destroy(nxv_sched *sched);

/* A zeroed node, aligned to a cache line, with room for args_words words
 * of arguments (args_words set); NULL when out of memory. The caller owns
 * it until nxv_sched_push or nxv_node_discard. Thread-safe: nodes come
 * from the process-wide node cache (zeroed by the thread that retired
 * them) or from the allocator. */
nxv_node *nxv_node_new(uint32_t args_words);

/* Drops every reference a node owns and frees it (never pushed). */
void nxv_node_discard(nxv_node *node);

/* Queues node, taking ownership in every case. Returns the sticky error
 * (and discards the node) if the queue has failed. Counts the node in the
 * pending_writes of the buffers it writes (retirement or cancellation
 * uncounts it). Never waits for the GPU; if the ring is full it yields
 * until the scheduler makes room, losing and reordering nothing.
 * Thread-safe. */
nxv_status nxv_sched_push(nxv_sched *sched, nxv_node *node);

/* New ticket with two references (one for the node, one for the caller). */
nxv_ticket *nxv_ticket_new(void);
void nxv_ticket_release(nxv_ticket *ticket);

/* Waits until the node holding ticket has completed on the GPU (retired:
 * also until its batch has been retired, so every resource it released is
 * back in the pool and the counters include it), busy-polling the timeline
 * for wait_spin_us before sleeping. A retired wait that sees the timeline
 * reach its batch retires the batches completed so far itself, on the
 * calling thread, instead of waiting for the completion thread. Returns
 * the sticky error if the queue fails first. Thread-safe. */
nxv_status nxv_sched_wait(nxv_sched *sched, nxv_ticket *ticket, bool retired);

/* Busy-polls for up to spin_us microseconds (at least one check) for the
 * node holding ticket to complete on the GPU; *out_done says whether it
 * did. Never sleeps. Returns the sticky error if the queue has failed.
 * Thread-safe. */
nxv_status nxv_sched_poll(nxv_sched *sched, nxv_ticket *ticket, uint32_t spin_us,
                          bool *out_done);

/* Queues a flushing marker and waits for its retirement: everything queued
 * before has completed and been retired. */
nxv_status nxv_sched_synchronize(nxv_sched *sched);

/* The sticky error (NXV_OK if none) and its message (valid while the
 * scheduler lives). Thread-safe. */
nxv_status nxv_sched_status(nxv_sched *sched, const char **out_message);

/* Test hook: makes the next submission fail with fault. A device loss
 * while batches are in flight fails the queue at once instead, as the
 * completion thread's wait would report it: every waiter wakes with it;
 * that work is retired only once the GPU has finished it. Thread-safe. */
void nxv_sched_inject_fault(nxv_sched *sched, nxv_status fault);

/* Test hook: the next submission waits on a semaphore that only
 * nxv_sched_destroy signals, so its batch stays in flight until then (a
 * GPU that stopped making progress). Thread-safe. */
void nxv_sched_inject_hang(nxv_sched *sched);

/* Test hook: while paused the scheduler thread takes nothing off the ring
 * (producers still queue, and wait once it is full); resuming lets it
 * record what waits. Thread-safe. */
void nxv_sched_inject_pause(nxv_sched *sched, bool paused);

/* Fills the queue fields of stats. Thread-safe. */
void nxv_sched_stats(nxv_sched *sched, nxv_stats *stats);

/* Adds a download's wait (from its start to its completion seen by the
 * caller) to the download_wait histogram. Thread-safe. */
void nxv_sched_note_download(nxv_sched *sched, uint64_t wait_ns);

/* Counts a download read in place without a node (nxv_stats.reads_in_place).
 * Thread-safe. */
void nxv_sched_note_read_in_place(nxv_sched *sched);

/* Starts or stops recording retired batches (see nxv_device_record_batches).
 * Thread-safe. */
void nxv_sched_record_batches(nxv_sched *sched, bool enable);

/* Moves up to max records into out (see nxv_device_take_batches).
 * Thread-safe. */
void nxv_sched_take_batches(nxv_sched *sched, nxv_batch_record *out, uint32_t max,
                            uint32_t *out_count, uint64_t *out_dropped);

/* The monotonic clock the scheduler's latencies use, in ns. Thread-safe. */
uint64_t nxv_sched_now_ns(void);

#endif
