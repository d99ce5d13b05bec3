/*
 * hostring.h - a ring allocator over one host-visible, host-coherent buffer.
 *
 * Used for upload/download staging (so no tensor needs a staging buffer of
 * its own) and for the kernel-argument arena. Allocations are carved in
 * order; frees may come in any order, and space is reclaimed up to the
 * oldest allocation still live. A request that does not fit (too large, or
 * the ring is full of live allocations) can instead get a dedicated
 * host-visible buffer of its own, freed by the same call.
 *
 * The memory is persistently mapped. Host writes before a queue submission
 * are visible to the device through the submission; device writes must be
 * made visible to the host with a HOST_READ barrier before the host reads.
 *
 * Thread safety: all functions are thread-safe (one mutex per ring).
 */
#ifndef NXV_POOL_HOSTRING_H
#define NXV_POOL_HOSTRING_H

#include <stdbool.h>
#include <stdint.h>

#include "nxv.h"
#include "sched/vk.h"

typedef struct nxv_hostring nxv_hostring;
typedef struct nxv_host_block nxv_host_block;

/* One allocation. Plain data; owned by whoever allocated it until freed. */
typedef struct nxv_host_alloc {
  void *ptr;                /* mapped host pointer */
  VkBuffer buf;             /* buffer holding it */
  VkDeviceSize offset;      /* byte offset in buf */
  VkDeviceAddress addr;     /* device address of ptr */
  uint64_t size;
  uint64_t seq;             /* ring record; UINT64_MAX for dedicated */
  nxv_host_block *dedicated; /* non-NULL for a dedicated buffer */
} nxv_host_alloc;

/* Creates a ring of bytes bytes. device_local prefers memory that is both
 * device-local and host-visible (BAR/ReBAR), for data the GPU reads often;
 * otherwise host-cached memory is preferred, for downloads. vk must outlive
 * the ring. */
nxv_status nxv_hostring_create(const nxv_vk *vk, uint64_t bytes,
                               bool device_local, nxv_hostring **out_ring);

/* Frees the ring; every allocation must have been freed. */
void nxv_hostring_destroy(nxv_hostring *ring);

/* Carves bytes (aligned to align, a power of two <= 256) from the ring.
 * If it does not fit and allow_dedicated, allocates a dedicated buffer;
 * otherwise fails with NXV_ERR_OUT_OF_HOST_MEMORY, leaving *out untouched,
 * which callers treat as "ring full, retry after retirement". */
nxv_status nxv_hostring_alloc(nxv_hostring *ring, uint64_t bytes,
                              uint64_t align, bool allow_dedicated,
                              nxv_host_alloc *out);

/* Returns an allocation. */
void nxv_hostring_free(nxv_hostring *ring, const nxv_host_alloc *alloc);

/* Ring size and the number of dedicated buffers made so far. */
void nxv_hostring_stats(nxv_hostring *ring, uint64_t *out_bytes,
                        uint64_t *out_dedicated);

#endif
