/* Tensor handles: creation, upload, download, device copy. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/defer.h"
#include "sched/device.h"
#include "sched/status.h"

static const struct {
  const char *name;
  size_t size;
} kDtypes[NXV_DTYPE_COUNT] = {
    [NXV_S8] = {"s8", 1},     [NXV_S16] = {"s16", 2},  [NXV_S32] = {"s32", 4},
    [NXV_S64] = {"s64", 8},   [NXV_U8] = {"u8", 1},    [NXV_U16] = {"u16", 2},
    [NXV_U32] = {"u32", 4},   [NXV_U64] = {"u64", 8},  [NXV_F16] = {"f16", 2},
    [NXV_BF16] = {"bf16", 2}, [NXV_F32] = {"f32", 4},  [NXV_F64] = {"f64", 8},
    [NXV_C64] = {"c64", 8},   [NXV_C128] = {"c128", 16},
};

size_t nxv_dtype_size(nxv_dtype t) {
  return (unsigned)t < NXV_DTYPE_COUNT ? kDtypes[t].size : 0;
}

const char *nxv_dtype_name(nxv_dtype t) {
  return (unsigned)t < NXV_DTYPE_COUNT ? kDtypes[t].name : "invalid";
}

void nxv_tensor_retain(nxv_tensor *t) {
  atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
}

void nxv_tensor_release(nxv_tensor *t) {
  if (!t) return;
  if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1) return;
  nxv_device *d = t->device;
  if (t->deferred) nxv_defer_forget(t);
  if (t->buf) nxv_buffer_release(t->buf);
  free(t);
  nxv_device_release(d);
}

nxv_dtype nxv_tensor_dtype(const nxv_tensor *t) { return t->dtype; }
uint64_t nxv_tensor_count(const nxv_tensor *t) { return t->count; }
nxv_device *nxv_tensor_device(const nxv_tensor *t) { return t->device; }

/* A tensor handle with a pool buffer and no queued work. */
static nxv_status tensor_alloc(nxv_device *d, nxv_dtype dtype, uint64_t count,
                               nxv_tensor **out) {
  size_t es = nxv_dtype_size(dtype);
  if (!es) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "invalid dtype %d", (int)dtype);
  if (count > UINT32_MAX)
    return nxv_fail(NXV_ERR_UNSUPPORTED,
                    "tensor of %llu elements: at most 2^32-1 are supported",
                    (unsigned long long)count);
  NXV_TRY(nxv_device_check(d));
  nxv_tensor *t = calloc(1, sizeof *t);
  if (!t) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "tensor handle");
  nxv_status st = nxv_pool_alloc(d->pool, count * es, &t->buf);
  if (st == NXV_ERR_OUT_OF_DEVICE_MEMORY) {
    /* Buffers released by the caller may still be held by queued work:
     * let it retire (their memory returns to the pool) and try once more.
     * This is the one place a producer waits for the GPU, and only when
     * device memory is exhausted. */
    char first[512];
    snprintf(first, sizeof first, "%s", nxv_last_error());
    if (nxv_sched_synchronize(d->sched) == NXV_OK)
      st = nxv_pool_alloc(d->pool, count * es, &t->buf);
    if (st == NXV_ERR_OUT_OF_DEVICE_MEMORY)
      nxv_fail(st, "%s (after waiting for queued work)", first);
  }
  if (st != NXV_OK) {
    free(t);
    return st;
  }
  atomic_init(&t->refs, 1);
  atomic_init(&t->state, NXV_TENSOR_READY);
  t->device = d;
  t->dtype = dtype;
  t->count = count;
  nxv_device_retain(d);
  *out = t;
  return NXV_OK;
}

/* Queues node, which writes t; releases t if that fails. */
static nxv_status push_writer(nxv_device *d, nxv_node *n, nxv_tensor *t) {
  n->nbufs = 1;
  n->write_mask = 1;
  n->bufs[0] = t->buf;
  nxv_buffer_retain(t->buf);
  n->dst = t->buf->vk;
  n->dst_offset = t->buf->offset;
  n->cost = t->count;
  nxv_status st = nxv_sched_push(d->sched, n);
  if (st != NXV_OK) nxv_tensor_release(t);
  return st;
}

nxv_status nxv_tensor_new(nxv_device *d, nxv_dtype dtype, uint64_t count,
                          nxv_tensor **out) {
  nxv_tensor *t;
  NXV_TRY(tensor_alloc(d, dtype, count, &t));
  if (d->config.poison_outputs) {
    nxv_node *n = nxv_node_new(0);
    if (!n) {
      nxv_tensor_release(t);
      return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "poison node");
    }
    n->kind = NXV_NODE_FILL;
    n->bytes = t->buf->size;
    n->fill_pattern = 0xFFFFFFFFu;
    NXV_TRY(push_writer(d, n, t));
  }
  *out = t;
  return NXV_OK;
}

nxv_status nxv_tensor_empty(nxv_device *d, nxv_dtype dtype, uint64_t count,
                            nxv_tensor **out) {
  if (!d || !out) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "NULL device or out_tensor");
  return nxv_tensor_new(d, dtype, count, out);
}

nxv_status nxv_tensor_upload(nxv_device *d, nxv_dtype dtype, uint64_t count,
                             const void *data, nxv_tensor **out) {
  if (!d || !out) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "NULL device or out_tensor");
  if (!data && count) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "NULL data");
  nxv_tensor *t;
  NXV_TRY(tensor_alloc(d, dtype, count, &t));
  uint64_t bytes = count * nxv_dtype_size(dtype);
  if (bytes && t->buf->host) {
    /* A fresh buffer in mapped memory (the small class, pool.h): no queued
     * work uses it (the pool hands out a buffer only after the last batch
     * that used it retired), so the bytes are written in place, with no
     * staging copy and no node. Host writes made before a submission are
     * visible to its commands (the memory is coherent); the fence drains
     * the write-combining buffers that hold writes to device memory before
     * any later node can reach the scheduler. */
    memcpy(t->buf->host, data, bytes);
    atomic_thread_fence(memory_order_seq_cst);
    *out = t;
    return NXV_OK;
  }
  nxv_node *n = nxv_node_new(0);
  if (!n) {
    nxv_tensor_release(t);
    return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "upload node");
  }
  if (bytes) {
    nxv_status st = nxv_hostring_alloc(d->staging, bytes, 16, true, &n->staging);
    if (st != NXV_OK) {
      nxv_node_discard(n);
      nxv_tensor_release(t);
      return st;
    }
    n->has_staging = true;
    n->staging_ring = d->staging;
    memcpy(n->staging.ptr, data, bytes);
  }
  n->kind = NXV_NODE_COPY;
  n->src = n->staging.buf;
  n->src_offset = n->staging.offset;
  n->bytes = bytes;
  NXV_TRY(push_writer(d, n, t));
  *out = t;
  return NXV_OK;
}

nxv_status nxv_tensor_download(nxv_tensor *t, uint64_t offset, uint64_t count,
                               void *dst) {
  if (!t) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "NULL tensor");
  if (!dst && count) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "NULL destination");
  nxv_download *dl;
  NXV_TRY(nxv_download_start(t, offset, count, &dl));
  nxv_status st = nxv_download_wait(dl);
  if (st == NXV_OK) st = nxv_download_read(dl, dst);
  nxv_download_release(dl);
  return st;
}

nxv_status nxv_tensor_reinterpret(nxv_tensor *t, nxv_dtype dtype, nxv_tensor **out) {
  if (!t || !out) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "NULL tensor or out_tensor");
  size_t es = nxv_dtype_size(dtype);
  if (!es) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "invalid dtype %d", (int)dtype);
  if (es != nxv_dtype_size(t->dtype))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "cannot reinterpret %s as %s: element sizes differ",
                    nxv_dtype_name(t->dtype), nxv_dtype_name(dtype));
  NXV_TRY(nxv_tensor_ready(t)); /* the two handles share one buffer */
  nxv_tensor *r = calloc(1, sizeof *r);
  if (!r) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "tensor handle");
  atomic_init(&r->refs, 1);
  atomic_init(&r->state, NXV_TENSOR_READY);
  r->device = t->device;
  r->buf = t->buf;
  r->dtype = dtype;
  r->count = t->count;
  nxv_buffer_retain(t->buf);
  nxv_device_retain(t->device);
  *out = r;
  return NXV_OK;
}
