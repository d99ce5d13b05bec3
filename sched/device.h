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

#include <stdatomic.h>

#include "kernels/pipeline_cache.h"
#include "kernels/registry.h"
#include "nxv.h"
#include "pool/hostring.h"
#include "pool/pool.h"
#include "sched/scheduler.h"
#include "sched/vk.h"

struct nxv_device {
  atomic_uint refs;             /* caller references + one per tensor */
  nxv_vk vk;                    /* owned */
  nxv_device_config config;     /* resolved (no zero fields; download_kernel
                                   1 or -1); cache_dir points into
                                   cache_dir_buf */
  char cache_dir_buf[512];
  nxv_pool *pool;               /* owned */
  nxv_hostring *staging;        /* owned: upload/download staging */
  nxv_pcache *pcache;           /* owned */
  nxv_registry *kernels;        /* owned */
  nxv_sched *sched;             /* owned */
};

struct nxv_tensor {
  atomic_uint refs;             /* handle references */
  nxv_device *device;           /* one device reference, owned */
  nxv_buffer *buf;              /* one buffer reference, owned */
  nxv_dtype dtype;
  uint64_t count;               /* elements */
};

/* NXV_OK, or the device's sticky error with its message set for the
 * calling thread. */
nxv_status nxv_device_check(nxv_device *device);

/* A new tensor of count elements of dtype with an uninitialised buffer
 * (filled with 0xFF bytes by a queued fill when config.poison_outputs).
 * Thread-safe; never waits. */
nxv_status nxv_tensor_new(nxv_device *device, nxv_dtype dtype, uint64_t count,
                          nxv_tensor **out_tensor);

#endif
