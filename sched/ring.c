#include "sched/ring.h"

#include <ck_ring.h>
#include <stdlib.h>

#include "sched/status.h"

#if defined(NXV_TSAN)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define RING_RELEASE(p) __tsan_release(p)
#define RING_ACQUIRE(p) __tsan_acquire(p)
#else
#define RING_RELEASE(p) ((void)0)
#define RING_ACQUIRE(p) ((void)0)
#endif

struct nxv_ring {
  struct ck_ring ring;       /* indices; consumer and producer counters */
  ck_ring_buffer_t *slots;   /* owned: capacity slots */
};

nxv_status nxv_ring_create(uint32_t capacity, nxv_ring **out_ring) {
  if (capacity < 4 || (capacity & (capacity - 1)))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "ring capacity %u is not a power of two >= 4", capacity);
  nxv_ring *r = calloc(1, sizeof *r);
  if (!r) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "ring");
  r->slots = calloc(capacity, sizeof *r->slots);
  if (!r->slots) {
    free(r);
    return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "ring slots");
  }
  ck_ring_init(&r->ring, capacity);
  *out_ring = r;
  return NXV_OK;
}

void nxv_ring_destroy(nxv_ring *r) {
  if (!r) return;
  free(r->slots);
  free(r);
}

bool nxv_ring_push(nxv_ring *r, void *item) {
  RING_RELEASE(item);
  return ck_ring_enqueue_mpsc(&r->ring, r->slots, item);
}

void *nxv_ring_pop(nxv_ring *r) {
  void *item = NULL;
  if (!ck_ring_dequeue_mpsc(&r->ring, r->slots, &item)) return NULL;
  RING_ACQUIRE(item);
  return item;
}

uint32_t nxv_ring_size(nxv_ring *r) { return ck_ring_size(&r->ring); }
