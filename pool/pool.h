/*
 * pool.h - size-class pool of device-local buffers.
 *
 * Requests are rounded up to a size class: 256 bytes, then four classes per
 * power of two (2^k * 5/4, 6/4, 7/4, 8/4), so no more than 25% is wasted.
 * Classes up to NXV_POOL_SLAB_MAX bytes are carved from slabs (a block
 * holding many buffers of one class); larger classes get a block each. A
 * released buffer goes on its class's free list and is handed out again
 * as is.
 *
 * Chunks: blocks of at most NXV_POOL_CARVE_MAX bytes (every slab, and the
 * buffers of the classes above NXV_POOL_SLAB_MAX up to that size) are
 * ranges of chunks, device allocations of chunk_bytes (default
 * NXV_POOL_CHUNK_DEFAULT) shared by every class, rather than allocations
 * of their own; slabs and single buffers keep to chunks of their own
 * kind (small long-lived tensors would otherwise keep chunks of large
 * transient ones from being freed). A class with an empty free list takes the best-fitting
 * free range of any chunk; when none fits, the free buffers of every
 * class first go back to their chunks (adjacent free ranges merge) and
 * the search is repeated, and only then is a chunk allocated. A process
 * whose dropped tensors return to the pool only when it collects garbage
 * (the BEAM's) holds a varying number of them of each class from one
 * step to the next: once the chunks hold the largest total, later steps
 * that need more of one class and fewer of another allocate nothing.
 * Larger blocks, and blocks in mapped memory, are allocations of their
 * own (VkMemoryDedicatedAllocateInfo).
 *
 * Reuse is safe by construction: every queued node holds a reference on the
 * buffers it touches and drops it only when its epoch has retired, so a
 * buffer reaches the free list only after the last epoch that used it.
 *
 * Mapped small buffers: when created with map_small and the device has
 * device-local, host-visible, host-coherent memory, the slabs of the
 * smallest class (NXV_POOL_MAPPED_MAX bytes) are allocated there and stay
 * mapped, so the host can read a small result in place (buffer->host).
 * At most NXV_POOL_MAPPED_CAP bytes (or a quarter of that heap's budget)
 * are used that way; past it, or when such an allocation fails, small
 * buffers come from ordinary memory (host == NULL).
 *
 * Limits: one buffer may not exceed maxMemoryAllocationSize,
 * maxStorageBufferRange or maxBufferSize; the pool's reserved bytes (its
 * device allocations: chunks, whole, and blocks of their own) may not
 * exceed its limit (default 90% of the heap budget). A chunk that would
 * pass the limit, or that the driver cannot allocate, is replaced by one
 * of just the block's size. When a request would pass the limit, or the
 * driver reports out of memory, the pool trims its free buffers once and
 * retries before failing with NXV_ERR_OUT_OF_DEVICE_MEMORY.
 *
 * Thread safety: every function is thread-safe (one mutex per pool; the
 * free-list fast path holds it for a few dozen instructions).
 */
#ifndef NXV_POOL_POOL_H
#define NXV_POOL_POOL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "nxv.h"
#include "sched/lines.h"
#include "sched/vk.h"

#define NXV_POOL_SLAB_MAX (256u * 1024u)
#define NXV_POOL_CARVE_MAX (8u << 20)          /* largest block in a chunk */
#define NXV_POOL_CHUNK_DEFAULT (64ull << 20)   /* chunk_bytes when 0 */
#define NXV_POOL_MAPPED_MAX 256u           /* largest mapped class */
#define NXV_POOL_MAPPED_CAP (32ull << 20)  /* mapped bytes per pool */

typedef struct nxv_pool nxv_pool;
typedef struct nxv_block nxv_block;

/* A device buffer handed out by the pool. Reference counted; the pool
 * reclaims it when the count reaches zero. */
typedef struct nxv_buffer {
  /* First line: the counts producers and retirement change, and what
   * producers read. */
  NXV_LINE_ALIGNED atomic_uint refs; /* tensors + queued nodes holding it */
  atomic_uint pending_writes; /* queued nodes that write it and have not
                                 retired (nxv_sched_push counts them,
                                 retirement or cancellation uncounts them,
                                 before dropping their reference): 0 means
                                 every write queued so far has completed */
  uint32_t class_idx;        /* size class (immutable) */
  nxv_pool *pool;            /* owning pool (immutable) */
  nxv_block *block;          /* the block it was carved from (immutable,
                                pool-owned) */
  VkBuffer vk;               /* the VkBuffer it lies in (a slab's, a
                                chunk's or its own; not owned) */
  VkDeviceSize offset;       /* byte offset of this buffer in vk */
  VkDeviceSize size;         /* class size in bytes, >= the request */
  VkDeviceAddress addr;      /* device address of byte 0 of this buffer */
  void *host;                /* host address of byte 0 in a persistent,
                                coherent mapping, or NULL (immutable;
                                valid while the buffer is referenced) */
  /* Second line (from host): the scheduler's bookkeeping and the
   * free-list link. */
  uint64_t sched_read_gen;   /* barrier bookkeeping: scheduler thread only */
  uint64_t sched_write_gen;
  uint64_t sched_write_epoch; /* epoch of the batch that last wrote it
                                 (0: none yet): scheduler thread only */
  uint64_t sched_hold_read_gen;  /* a node in the scheduler's reordering */
  uint64_t sched_hold_write_gen; /* window reads / writes it: scheduler
                                    thread only */
  struct nxv_buffer *next;   /* free-list link, under the pool mutex */
} nxv_buffer;

/* Creates a pool on vk's device-local memory. limit_bytes caps reserved
 * memory (0: 90% of the heap budget, re-read on every new allocation).
 * chunk_bytes: size of a chunk (0: NXV_POOL_CHUNK_DEFAULT; rounded up to
 * 64 KiB; a block larger than it gets a chunk of its own size). map_small:
 * place the smallest class in mapped memory where possible (see above).
 * vk must outlive the pool. */
nxv_status nxv_pool_create(const nxv_vk *vk, uint64_t limit_bytes,
                           uint64_t chunk_bytes, bool map_small,
                           nxv_pool **out_pool);

/* Frees every block. Buffers still referenced are reported through
 * *out_leaked (may be NULL) and their memory is freed anyway; the GPU must
 * be idle. Not thread-safe with other pool calls. */
void nxv_pool_destroy(nxv_pool *pool, uint64_t *out_leaked);

/* A buffer of at least bytes bytes, with one reference for the caller.
 * Never waits for the GPU. */
nxv_status nxv_pool_alloc(nxv_pool *pool, uint64_t bytes,
                          nxv_buffer **out_buffer);

static inline void nxv_buffer_retain(nxv_buffer *b) {
  atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
}

/* Drops a reference; the last one returns the buffer to its free list.
 * Thread-safe. */
void nxv_buffer_release(nxv_buffer *b);

/* Drops a reference like nxv_buffer_release but, when it was the last,
 * pushes the buffer onto *list (linked through next) instead of returning
 * it: the caller then owns it and returns the whole list with
 * nxv_pool_return_list. For a thread releasing many buffers at once (a
 * batch's retirement): one pool lock for all of them. Thread-safe. */
void nxv_buffer_release_into(nxv_buffer *b, nxv_buffer **list);

/* Returns every buffer of list (from nxv_buffer_release_into) to its
 * pool's free lists, locking each pool once per run of its buffers.
 * Thread-safe. */
void nxv_pool_return_list(nxv_buffer *list);

/* Frees unused memory: free buffers of their own, wholly free slabs and
 * wholly free chunks (free buffers and slabs of chunks go back to them
 * first). Returns the bytes released. */
uint64_t nxv_pool_trim(nxv_pool *pool);

/* Fills the pool_* fields of stats. */
void nxv_pool_stats(nxv_pool *pool, nxv_stats *stats);

/* Size class of a request and its size in bytes. Pure functions. */
uint32_t nxv_pool_class_of(uint64_t bytes);
uint64_t nxv_pool_class_size(uint32_t class_idx);

#endif
