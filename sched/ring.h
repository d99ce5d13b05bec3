/*
 * ring.h - bounded multi-producer, single-consumer ring of pointers, built
 * on concurrencykit's ck_ring.
 *
 * Any number of threads may push; exactly one thread (the device's
 * scheduler) pops. Items come out in the order their pushes completed, so a
 * producer's own items keep their order, and an item pushed after another
 * push returned (on any thread) comes out after it.
 *
 * Under ThreadSanitizer the ring is compiled uninstrumented (ck_ring's
 * atomics are inline assembly TSan cannot see) and publishes each item with
 * __tsan_release / __tsan_acquire so the hand-over is still checked.
 */
#ifndef NXV_SCHED_RING_H
#define NXV_SCHED_RING_H

#include <stdbool.h>
#include <stdint.h>

#include "nxv.h"

typedef struct nxv_ring nxv_ring;

/* capacity: a power of two >= 4; the ring holds capacity - 1 items. */
nxv_status nxv_ring_create(uint32_t capacity, nxv_ring **out_ring);
/* Frees the ring (not the items). No other call may be in progress. */
void nxv_ring_destroy(nxv_ring *ring);

/* Pushes item (non-NULL). Returns false, changing nothing, if the ring is
 * full. Thread-safe for any number of producers; never blocks. */
bool nxv_ring_push(nxv_ring *ring, void *item);

/* Pops the oldest item, or returns NULL if the ring is empty. Consumer
 * thread only. */
void *nxv_ring_pop(nxv_ring *ring);

/* Items in the ring (a snapshot). Thread-safe. */
uint32_t nxv_ring_size(nxv_ring *ring);

#endif
