/*
 * device.h - the opened device and the tensor handle (internal view).
 *
 * An nxv_device owns its Vulkan context, pool, staging ring, pipeline cache,
 * kernel registry and scheduler. It is reference counted: the caller of
 * nxv_device_open holds one reference and every tensor holds one, so the
 * device outlives all of its tensors. Queued nodes hold buffer references,
 * not tensor or device references; the last device release drains the
 * queue before destroying the pool.
 */
#ifndef NXV_SCHED_DEVICE_H
#define NXV_SCHED_DEVICE_H

#include <pthread.h>
#include <stdatomic.h>

#include "kernels/pipeline_cache.h"
#include "kernels/registry.h"
#include "nxv.h"
#include "pool/hostring.h"
#include "pool/pool.h"
#include "sched/lines.h"
#include "sched/scheduler.h"
#include "sched/vk.h"

struct nxv_device {
  atomic_uint refs;             /* caller references + one per tensor:
                                   written on every tensor's creation and
                                   release, so on a cache line apart from
                                   what the device's threads read */
  NXV_LINE_ALIGNED nxv_vk vk;   /* owned */
  nxv_device_config config;     /* resolved (no zero fields; download_kernel
                                   and chained_solve 1 or -1); cache_dir points into
                                   cache_dir_buf */
  char cache_dir_buf[512];
  uint64_t serial;              /* distinct for every device the process
                                   opens (immutable): what memos of a
                                   device's pipelines compare, where its
                                   address may be a later device's */
  nxv_pool *pool;               /* owned */
  nxv_hostring *staging;        /* owned: upload/download staging */
  nxv_pcache *pcache;           /* owned */
  nxv_registry *kernels;        /* owned */
  nxv_sched *sched;             /* owned */
  atomic_uint_fast64_t deferred_ops;   /* elementwise ops returned deferred */
  atomic_uint_fast64_t deferred_fused; /* deferred results computed by one
                                          kernel for two or more ops */
  pthread_mutex_t defer_mu;     /* guards changes of defer_window */
  _Atomic(nxv_tensor *) defer_window; /* the latest deferred result not yet
                                   computed or taken in, not referenced
                                   (kernels/defer.c); its tensor's last
                                   release clears it */
};

/* A tensor's state (nxv_tensor.state). */
enum {
  NXV_TENSOR_READY = 0,   /* buf holds (or its queued writer will write) the
                             contents */
  NXV_TENSOR_PENDING = 1, /* a deferred elementwise result: buf is NULL,
                             pending says how to compute it */
  NXV_TENSOR_BUSY = 2     /* pending, held by one thread that reads its
                             program or computes it (kernels/defer.c) */
};

typedef struct nxv_pending nxv_pending; /* kernels/defer.c */

struct nxv_tensor {
  atomic_uint refs;             /* handle references */
  nxv_device *device;           /* one device reference, owned */
  nxv_buffer *buf;              /* one buffer reference, owned; NULL while
                                   pending, set once before the state turns
                                   READY (release order) */
  nxv_pending *pending;         /* owned while PENDING or BUSY, then NULL;
                                   read and written only by the thread that
                                   moved the state to BUSY */
  atomic_int state;             /* NXV_TENSOR_READY, _PENDING or _BUSY */
  bool deferred;                /* created deferred: may be the device's
                                   defer_window */
  nxv_dtype dtype;
  uint64_t count;               /* elements */
};

/* Computes a deferred tensor (kernels/defer.c): queues the kernel that
 * writes its buffer. Use nxv_tensor_ready. */
nxv_status nxv_defer_materialize(nxv_tensor *tensor);

/* Makes tensor's buffer valid to read or write from queued work: a
 * deferred result is computed first (its kernel queued; on failure the
 * tensor stays deferred, and a later call tries again). Every function that
 * reads tensor->buf calls it first. Thread-safe; waits only while another
 * thread computes the same tensor. */
static inline nxv_status nxv_tensor_ready(nxv_tensor *tensor) {
  if (atomic_load_explicit(&tensor->state, memory_order_acquire) == NXV_TENSOR_READY)
    return NXV_OK;
  return nxv_defer_materialize(tensor);
}

/* NXV_OK, or the device's sticky error with its message set for the
 * calling thread. */
nxv_status nxv_device_check(nxv_device *device);

/* A new tensor of count elements of dtype with an uninitialised buffer
 * (filled with 0xFF bytes by a queued fill when config.poison_outputs).
 * Thread-safe; never waits. */
nxv_status nxv_tensor_new(nxv_device *device, nxv_dtype dtype, uint64_t count,
                          nxv_tensor **out_tensor);

#endif
