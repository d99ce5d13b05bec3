#include "sched/ring.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "sched/lines.h"
#include "sched/status.h"

/* One place: its sequence number says whose turn it is. For the place of
 * position p (p mod capacity), seq == p: free for the push claiming p;
 * seq == p + 1: holds that push's item, for the pop at p; seq == p +
 * capacity: popped, free for the push claiming p + capacity. */
typedef struct slot {
  _Atomic uint64_t seq; /* as above; written by the pushing producer and
                           the consumer in turn */
  void *item;           /* written before seq's release store, read after
                           its acquire load */
} slot;

struct nxv_ring {
  /* Producers only: the next position to claim. A line of its own. */
  NXV_LINE_ALIGNED _Atomic uint64_t tail;
  /* Consumer only: the next position to pop. A line of its own. */
  NXV_LINE_ALIGNED uint64_t head;
  NXV_LINE_ALIGNED uint64_t mask; /* capacity - 1; read-only after creation */
  slot *slots;                /* owned: capacity places */
};

nxv_status nxv_ring_create(uint32_t capacity, nxv_ring **out_ring) {
  if (capacity < 4 || (capacity & (capacity - 1)))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "ring capacity %u is not a power of two >= 4", capacity);
  nxv_ring *r = nxv_lines_alloc(sizeof *r);
  if (!r) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "ring");
  r->slots = calloc(capacity, sizeof *r->slots);
  if (!r->slots) {
    free(r);
    return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "ring slots");
  }
  for (uint32_t i = 0; i < capacity; i++) atomic_init(&r->slots[i].seq, i);
  atomic_init(&r->tail, 0);
  r->head = 0;
  r->mask = capacity - 1;
  *out_ring = r;
  return NXV_OK;
}

void nxv_ring_destroy(nxv_ring *r) {
  if (!r) return;
  free(r->slots);
  free(r);
}

bool nxv_ring_push(nxv_ring *r, void *item) {
  uint64_t pos = atomic_load_explicit(&r->tail, memory_order_relaxed);
  for (;;) {
    slot *s = &r->slots[pos & r->mask];
    uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
    int64_t dif = (int64_t)(seq - pos);
    if (dif == 0) {
      /* Free for pos: claim it (a failed exchange reloads pos). */
      if (atomic_compare_exchange_weak_explicit(&r->tail, &pos, pos + 1,
                                                memory_order_relaxed, memory_order_relaxed)) {
        s->item = item;
        atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
        return true;
      }
    } else if (dif < 0) {
      /* Still holds the item of pos - capacity: full. */
      return false;
    } else {
      /* Another producer claimed pos: try the next. */
      pos = atomic_load_explicit(&r->tail, memory_order_relaxed);
    }
  }
}

void *nxv_ring_pop(nxv_ring *r) {
  slot *s = &r->slots[r->head & r->mask];
  if (atomic_load_explicit(&s->seq, memory_order_acquire) != r->head + 1) return NULL;
  void *item = s->item;
  atomic_store_explicit(&s->seq, r->head + r->mask + 1, memory_order_release);
  r->head++;
  return item;
}

bool nxv_ring_empty(nxv_ring *r) {
  return atomic_load_explicit(&r->slots[r->head & r->mask].seq, memory_order_acquire) !=
         r->head + 1;
}
