/*
 * ring.h - bounded multi-producer, single-consumer ring of pointers.
 *
 * Any number of threads may push; exactly one thread (the device's
 * scheduler) pops. Items come out in the order in which their pushes
 * claimed their places, so a producer's own items keep their order, and an
 * item pushed after another push returned (on any thread) comes out after
 * it.
 *
 * Each place has a sequence number (Vyukov's bounded queue): a push claims
 * the next place with one compare-and-swap on a counter only producers
 * touch and publishes the item with a release store of that place's
 * number; the consumer reads the next place's number, which is all it
 * polls. A push thus moves one cache line the consumer reads (the place's)
 * where concurrencykit's ck_ring moved three (the consumer's index, the
 * producers' indices the consumer polls, and the place): on an H200 host
 * about half the time per push with the consumer polling
 * (bench/floor/ring_push.c, docs/benchmarks.md).
 * A producer preempted between claiming and publishing delays the items
 * after its own (the consumer sees the ring empty until it publishes) but
 * not the other producers, which never wait for one another.
 */
#ifndef NXV_SCHED_RING_H
#define NXV_SCHED_RING_H

#include <stdbool.h>
#include <stdint.h>

#include "nxv.h"

typedef struct nxv_ring nxv_ring;

/* capacity: a power of two >= 4, the most items the ring holds. */
nxv_status nxv_ring_create(uint32_t capacity, nxv_ring **out_ring);
/* Frees the ring (not the items). No other call may be in progress. */
void nxv_ring_destroy(nxv_ring *ring);

/* Pushes item (non-NULL). Returns false, changing nothing, if the ring is
 * full. Thread-safe for any number of producers; never blocks. */
bool nxv_ring_push(nxv_ring *ring, void *item);

/* Pops the oldest item, or returns NULL if the ring is empty (or its next
 * place is claimed but not yet published). Consumer thread only. */
void *nxv_ring_pop(nxv_ring *ring);

/* Whether nxv_ring_pop would return NULL now. Consumer thread only; reads
 * one place's number. */
bool nxv_ring_empty(nxv_ring *ring);

#endif
