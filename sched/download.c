/* Downloads in two steps: queue the copy, then poll or wait for it.
 *
 * A small download from a mapped buffer (nxv_buffer.host) queues no copy:
 * a marker learns the epoch of the batch that last wrote the buffer, and
 * once that epoch has completed the bytes are read in place. A result
 * whose batch is already on the GPU then costs no further submission.
 * Reads of device memory through the PCIe window are uncached (about a
 * microsecond each), hence the small limit on GPUs.
 *
 * Small downloads copy with the word-copy kernel rather than
 * vkCmdCopyBuffer: after a dispatch, a compute copy into host memory
 * completes sooner than a transfer (3-4 us less per round trip on an
 * H100). On CPU devices the transfer is a memcpy and stays (config
 * download_kernel). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/ops.h"
#include "sched/device.h"
#include "sched/status.h"

/* Largest download copied by the kernel. */
#define NXV_DOWNLOAD_KERNEL_BYTES 65536u
/* Largest download read in place from a mapped buffer on a GPU, and on a
 * CPU device (where the mapping is ordinary cached memory). */
#define NXV_DOWNLOAD_MAPPED_BYTES 64u
#define NXV_DOWNLOAD_MAPPED_BYTES_CPU 256u

struct nxv_download {
  nxv_device *device;  /* one device reference, owned */
  nxv_ticket *ticket;  /* the copy node's ticket, one reference owned; holds
                          the staging bytes until both references drop */
  uint64_t bytes;      /* bytes copied */
  nxv_buffer *buf;     /* in-place read: one reference to the source
                          buffer, owned; NULL when staged */
  const uint8_t *src;  /* in-place read: first byte in buf's mapping */
  bool done;           /* the copy was seen complete */
  uint64_t start_ns;   /* when it was queued (nxv_sched_now_ns) */
};

/* Marks dl done and records its wait. */
static void finish(nxv_download *dl) {
  dl->done = true;
  nxv_sched_note_download(dl->device->sched, nxv_sched_now_ns() - dl->start_ns);
}

nxv_status nxv_download_start(nxv_tensor *t, uint64_t offset, uint64_t count,
                              nxv_download **out) {
  if (!t || !out) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "NULL tensor or out_download");
  *out = NULL;
  if (offset > t->count || count > t->count - offset)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "download of elements [%llu, %llu) from a tensor of %llu",
                    (unsigned long long)offset,
                    (unsigned long long)(offset + count),
                    (unsigned long long)t->count);
  nxv_device *d = t->device;
  NXV_TRY(nxv_device_check(d));
  NXV_TRY(nxv_tensor_ready(t));
  size_t es = nxv_dtype_size(t->dtype);
  uint64_t bytes = count * es;
  nxv_download *dl = calloc(1, sizeof *dl);
  if (!dl) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "download handle");
  dl->bytes = bytes;
  dl->start_ns = nxv_sched_now_ns();
  if (bytes == 0) {
    dl->done = true;
    nxv_device_retain(d);
    dl->device = d;
    *out = dl;
    return NXV_OK;
  }
  bool in_place = t->buf->host &&
                  bytes <= (d->vk.info.type == NXV_DEVICE_CPU
                                ? NXV_DOWNLOAD_MAPPED_BYTES_CPU
                                : NXV_DOWNLOAD_MAPPED_BYTES);
  /* Every write queued to the buffer has retired (its batch ended with a
   * barrier to the host): read it now, without a round trip through the
   * scheduler thread. The count drops only after the completion was seen
   * on the timeline (release; acquire here). A failed queue cancels its
   * nodes after publishing the failure, so the check that follows the
   * load sees it. */
  if (in_place && atomic_load_explicit(&t->buf->pending_writes, memory_order_acquire) == 0) {
    nxv_status st = nxv_device_check(d);
    if (st != NXV_OK) {
      free(dl);
      return st;
    }
    nxv_buffer_retain(t->buf);
    dl->buf = t->buf;
    dl->src = (const uint8_t *)t->buf->host + offset * es;
    nxv_device_retain(d);
    dl->device = d;
    nxv_sched_note_read_in_place(d->sched);
    finish(dl);
    *out = dl;
    return NXV_OK;
  }
  nxv_ticket *tk = nxv_ticket_new();
  nxv_node *n = nxv_node_new(0);
  if (!tk || !n) {
    free(tk);
    free(n);
    free(dl);
    return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "download node");
  }
  uint64_t src_addr = t->buf->addr + offset * es;
  bool kernel = !in_place && d->config.download_kernel > 0 &&
                bytes <= NXV_DOWNLOAD_KERNEL_BYTES && src_addr % 4 == 0;
  if (!in_place) {
    nxv_status st = nxv_hostring_alloc(d->staging, kernel ? (bytes + 3) & ~3ull : bytes,
                                       16, true, &tk->staging);
    if (st != NXV_OK) {
      free(tk);
      free(n);
      free(dl);
      return st;
    }
    tk->has_staging = true;
    tk->ring = d->staging;
  }
  n->flags = NXV_NODE_FLUSH | (in_place ? NXV_NODE_MAPPED_READ : NXV_NODE_HOST_READ);
  n->nbufs = 1;
  n->bufs[0] = t->buf;
  nxv_buffer_retain(t->buf);
  n->cost = count;
  n->ticket = tk;
  /* The node owns one ticket reference from here, even when pushing
   * fails. The kernel reads whole words: pool buffers are class-sized,
   * multiples of 256 bytes, so the last partial word is inside. */
  nxv_status st;
  if (kernel) {
    st = nxv_ops_push_word_copy(d, n, src_addr, tk->staging.addr,
                                (bytes + 3) / 4);
  } else {
    if (in_place) {
      n->kind = NXV_NODE_MARKER;
    } else {
      n->kind = NXV_NODE_COPY;
      n->src = t->buf->vk;
      n->src_offset = t->buf->offset + offset * es;
      n->dst = tk->staging.buf;
      n->dst_offset = tk->staging.offset;
      n->bytes = bytes;
    }
    st = nxv_sched_push(d->sched, n);
  }
  if (st != NXV_OK) {
    nxv_ticket_release(tk);
    free(dl);
    return st;
  }
  if (in_place) { /* the caller's tensor still holds the buffer here */
    nxv_buffer_retain(t->buf);
    dl->buf = t->buf;
    dl->src = (const uint8_t *)t->buf->host + offset * es;
  }
  nxv_device_retain(d);
  dl->device = d;
  dl->ticket = tk;
  *out = dl;
  return NXV_OK;
}

nxv_status nxv_download_poll(nxv_download *dl, uint32_t spin_us, bool *out_done) {
  if (!dl || !out_done) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "NULL download or out_done");
  if (!dl->done) {
    /* On CPU devices the copy needs the cores a spin would take. */
    if (dl->device->vk.info.type == NXV_DEVICE_CPU) spin_us = 0;
    bool done = false;
    NXV_TRY(nxv_sched_poll(dl->device->sched, dl->ticket, spin_us, &done));
    if (done) finish(dl);
  }
  *out_done = dl->done;
  return NXV_OK;
}

nxv_status nxv_download_wait(nxv_download *dl) {
  if (!dl) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "NULL download");
  if (!dl->done) {
    NXV_TRY(nxv_sched_wait(dl->device->sched, dl->ticket, false));
    finish(dl);
  }
  return NXV_OK;
}

uint64_t nxv_download_bytes(const nxv_download *dl) { return dl ? dl->bytes : 0; }

/* Copies bytes from src, inside buf's mapping, to dst with the fewest
 * loads: the aligned 16-byte groups covering them, when they lie inside
 * the buffer (class-sized, so they do), else memcpy. Reads of device
 * memory through the PCIe window are uncached, about a microsecond each:
 * the C library's memcpy reads a 4- to 15-byte value as two overlapping
 * words, two reads, which made a scalar's read 2 us instead of 1 on an
 * H200. */
static void read_mapped(void *dst, const nxv_buffer *buf, const uint8_t *src,
                        uint64_t bytes) {
  uintptr_t lo = (uintptr_t)src & ~(uintptr_t)15;
  uintptr_t hi = ((uintptr_t)src + bytes + 15) & ~(uintptr_t)15;
  uintptr_t base = (uintptr_t)buf->host;
  _Alignas(16) uint8_t tmp[NXV_DOWNLOAD_MAPPED_BYTES_CPU + 32];
  if (lo < base || hi > base + buf->size || hi - lo > sizeof tmp) {
    memcpy(dst, src, bytes);
    return;
  }
  for (uintptr_t p = lo; p < hi; p += 16) {
#if defined(__SSE2__)
    _mm_store_si128((__m128i *)(void *)(tmp + (p - lo)), *(const volatile __m128i *)p);
#else
    uint64_t w[2] = {((const volatile uint64_t *)p)[0], ((const volatile uint64_t *)p)[1]};
    memcpy(tmp + (p - lo), w, sizeof w);
#endif
  }
  memcpy(dst, tmp + ((uintptr_t)src - lo), bytes);
}

nxv_status nxv_download_read(const nxv_download *dl, void *dst) {
  if (!dl) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "NULL download");
  if (!dl->done)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "download read before it completed");
  if (dl->bytes == 0) return NXV_OK;
  if (!dst) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "NULL destination");
  /* Completion was observed through the timeline (an atomic load or a
   * driver call); order the reads after it. */
  atomic_thread_fence(memory_order_acquire);
  if (dl->src) read_mapped(dst, dl->buf, dl->src, dl->bytes);
  else memcpy(dst, dl->ticket->staging.ptr, dl->bytes);
  return NXV_OK;
}

void nxv_download_release(nxv_download *dl) {
  if (!dl) return;
  if (dl->ticket) nxv_ticket_release(dl->ticket);
  if (dl->buf) nxv_buffer_release(dl->buf);
  nxv_device_release(dl->device);
  free(dl);
}
