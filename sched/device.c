#include "sched/device.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sched/status.h"

nxv_status nxv_device_count(uint32_t *out_count) {
  if (!out_count) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "out_count is NULL");
  return nxv_vk_physical(0, NULL, out_count);
}

nxv_status nxv_device_query(uint32_t index, nxv_device_info *out_info) {
  if (!out_info) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "out_info is NULL");
  VkPhysicalDevice phys;
  NXV_TRY(nxv_vk_physical(index, &phys, NULL));
  return nxv_vk_describe(phys, index, out_info);
}

nxv_status nxv_device_default_index(uint32_t *out_index) {
  if (!out_index) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "out_index is NULL");
  uint32_t n = 0;
  NXV_TRY(nxv_device_count(&n));
  const char *env = getenv("NX_VULKAN_DEVICE");
  if (env && env[0]) {
    char *end = NULL;
    long v = strtol(env, &end, 10);
    if (*end != 0 || v < 0)
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                      "NX_VULKAN_DEVICE=%s is not a device index", env);
    if ((uint32_t)v >= n)
      return nxv_fail(NXV_ERR_NO_DEVICE,
                      "NX_VULKAN_DEVICE=%s but there are %u device(s)", env, n);
    *out_index = (uint32_t)v;
    return NXV_OK;
  }
  static const nxv_device_type order[] = {
      NXV_DEVICE_DISCRETE_GPU, NXV_DEVICE_INTEGRATED_GPU,
      NXV_DEVICE_VIRTUAL_GPU, NXV_DEVICE_CPU, NXV_DEVICE_OTHER};
  for (size_t o = 0; o < sizeof order / sizeof order[0]; o++) {
    for (uint32_t i = 0; i < n; i++) {
      nxv_device_info info;
      if (nxv_device_query(i, &info) != NXV_OK) continue;
      if (info.usable && info.type == order[o]) {
        *out_index = i;
        return NXV_OK;
      }
    }
  }
  return nxv_fail(NXV_ERR_NO_DEVICE,
                  "no usable Vulkan device (timeline semaphores, buffer "
                  "device address and int64 required) among %u", n);
}

static void resolve_config(nxv_device *d, const nxv_device_config *in) {
  nxv_device_config c = in ? *in : (nxv_device_config){0};
  if (!c.ring_capacity) c.ring_capacity = 4096;
  if (!c.max_batch_nodes) c.max_batch_nodes = 512;
  if (!c.max_batch_cost) c.max_batch_cost = 1ull << 32;
  if (!c.idle_flush_us) c.idle_flush_us = 20;
  if (!c.kick_nodes) c.kick_nodes = 16;
  if (!c.kick_inflight) c.kick_inflight = 3;
  if (!c.early_inflight) c.early_inflight = 2;
  if (!c.reorder_window) c.reorder_window = 32;
  /* wait_spin_us 0: resolved by the device type in nxv_device_open. */
  if (!c.idle_spin_us) c.idle_spin_us = 200;
  if (!c.staging_bytes) c.staging_bytes = 64ull << 20;
  if (!c.arena_bytes) c.arena_bytes = 4ull << 20;
  if (!c.pipeline_threads) c.pipeline_threads = NXV_PIPELINE_THREADS_NONE;
  if (c.pipeline_threads == NXV_PIPELINE_THREADS_AUTO) {
    /* Half the CPUs this process may run on (its affinity: taskset,
     * cpusets), 1 to 8. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
      cpus = CPU_COUNT(&set);
    c.pipeline_threads = cpus < 4 ? 1 : cpus > 16 ? 8 : (int32_t)(cpus / 2);
  }
  if (c.cache_dir) {
    snprintf(d->cache_dir_buf, sizeof d->cache_dir_buf, "%s", c.cache_dir);
    c.cache_dir = d->cache_dir_buf;
  }
  d->config = c;
}

static void device_destroy(nxv_device *d) {
  if (d->sched) nxv_sched_destroy(d->sched);
  if (d->pcache) nxv_pcache_save(d->pcache); /* best effort at close */
  nxv_registry_destroy(d->kernels);
  nxv_pcache_destroy(d->pcache);
  nxv_hostring_destroy(d->staging);
  nxv_pool_destroy(d->pool, NULL);
  nxv_vk_close(&d->vk);
  pthread_mutex_destroy(&d->defer_mu);
  free(d);
}

/* NX_VULKAN_PIPELINE_THREADS, the default of pipeline_threads: "auto",
 * "off" (or "none", "0") or 1..NXV_PIPELINE_THREADS_MAX; *out unchanged
 * (0) when unset or empty. */
static nxv_status env_pipeline_threads(int32_t *out) {
  const char *env = getenv("NX_VULKAN_PIPELINE_THREADS");
  if (!env || !env[0]) return NXV_OK;
  if (!strcmp(env, "auto")) {
    *out = NXV_PIPELINE_THREADS_AUTO;
    return NXV_OK;
  }
  if (!strcmp(env, "off") || !strcmp(env, "none")) {
    *out = NXV_PIPELINE_THREADS_NONE;
    return NXV_OK;
  }
  char *end = NULL;
  long v = env[0] >= '0' && env[0] <= '9' ? strtol(env, &end, 10) : -1;
  if (v < 0 || *end != 0 || v > NXV_PIPELINE_THREADS_MAX)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "NX_VULKAN_PIPELINE_THREADS=%s is not auto, off or 0..%d", env,
                    NXV_PIPELINE_THREADS_MAX);
  *out = v == 0 ? NXV_PIPELINE_THREADS_NONE : (int32_t)v;
  return NXV_OK;
}

nxv_status nxv_device_open(int32_t index, const nxv_device_config *config,
                           nxv_device **out_device) {
  if (!out_device) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "out_device is NULL");
  uint32_t idx;
  if (index < 0) NXV_TRY(nxv_device_default_index(&idx));
  else idx = (uint32_t)index;
  if (config && config->ring_capacity &&
      (config->ring_capacity < 4 ||
       (config->ring_capacity & (config->ring_capacity - 1))))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "ring_capacity %u is not a power of two >= 4",
                    config->ring_capacity);
  if (config && (config->reorder_window < -1 ||
                 config->reorder_window > NXV_REORDER_WINDOW_MAX))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "reorder_window %d is not -1 (off), 0 (default) or 1..%d",
                    config->reorder_window, NXV_REORDER_WINDOW_MAX);
  if (config && (config->pipeline_threads < NXV_PIPELINE_THREADS_AUTO ||
                 config->pipeline_threads > NXV_PIPELINE_THREADS_MAX))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "pipeline_threads %d is not -2 (auto), -1 or 0 (none) or 1..%d",
                    config->pipeline_threads, NXV_PIPELINE_THREADS_MAX);
  nxv_device_config given = config ? *config : (nxv_device_config){0};
  if (!given.pipeline_threads) NXV_TRY(env_pipeline_threads(&given.pipeline_threads));
  config = &given;
  nxv_device *d = nxv_lines_alloc(sizeof *d);
  if (!d) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "device");
  static atomic_uint_fast64_t serials;
  d->serial = atomic_fetch_add_explicit(&serials, 1, memory_order_relaxed) + 1;
  atomic_init(&d->refs, 1);
  atomic_init(&d->deferred_ops, 0);
  atomic_init(&d->deferred_fused, 0);
  pthread_mutex_init(&d->defer_mu, NULL);
  atomic_init(&d->defer_window, NULL);
  resolve_config(d, config);
  nxv_status st = nxv_vk_open(idx, &d->vk);
  if (st == NXV_OK && d->config.download_kernel == 0)
    d->config.download_kernel = d->vk.info.type == NXV_DEVICE_CPU ? -1 : 1;
  if (st == NXV_OK && d->config.chained_solve == 0)
    d->config.chained_solve = d->vk.info.type == NXV_DEVICE_CPU ? -1 : 1;
  if (st == NXV_OK)
    st = nxv_pool_create(&d->vk, d->config.pool_limit_bytes, d->config.pool_chunk_bytes,
                         !d->config.unmapped_small, &d->pool);
  if (st == NXV_OK)
    st = nxv_hostring_create(&d->vk, d->config.staging_bytes, false, &d->staging);
  if (st == NXV_OK)
    st = nxv_pcache_open(&d->vk, d->config.cache_dir,
                         d->config.disable_disk_cache, &d->pcache);
  if (st == NXV_OK)
    st = nxv_registry_create(&d->vk, nxv_pcache_handle(d->pcache),
                             !d->config.no_spirv_prune,
                             d->config.pipeline_threads < 0
                                 ? 0
                                 : (uint32_t)d->config.pipeline_threads,
                             /* One creation at a time on NVIDIA's driver:
                              * see kernels/registry.h. */
                             d->vk.info.driver_id == VK_DRIVER_ID_NVIDIA_PROPRIETARY,
                             &d->kernels);
  if (st == NXV_OK) {
    /* Waiters poll the timeline for up to 1 ms on GPUs, long enough to see
     * most waits end without the wake-up of a blocked thread (tens of
     * microseconds late on some drivers); on CPU devices, whose work needs
     * the cores, 50 us. The completion thread, which polls whether or not
     * anyone waits, at most 50 us (none on CPU devices). */
    bool cpu = d->vk.info.type == NXV_DEVICE_CPU;
    if (!d->config.wait_spin_us) d->config.wait_spin_us = cpu ? 50 : 1000;
    uint32_t completion_spin = d->config.wait_spin_us < 50 ? d->config.wait_spin_us : 50;
    nxv_sched_config sc = {
        .ring_capacity = d->config.ring_capacity,
        .max_batch_nodes = d->config.max_batch_nodes,
        .max_batch_cost = d->config.max_batch_cost,
        .idle_flush_us = d->config.idle_flush_us,
        .kick_nodes = d->config.kick_nodes,
        .kick_inflight = d->config.kick_inflight,
        .early_inflight = d->config.early_inflight,
        .reorder_window =
            d->config.reorder_window < 0 ? 0 : (uint32_t)d->config.reorder_window,
        .wait_spin_us = d->config.wait_spin_us,
        .idle_spin_us = d->config.idle_spin_us,
        .completion_spin_us = cpu ? 0 : completion_spin,
        .arena_bytes = d->config.arena_bytes,
        .no_latency_timing = d->config.no_latency_timing,
        .no_gpu_timestamps = d->config.no_gpu_timestamps,
        .no_round_trip_submit = d->config.no_round_trip_submit,
        .batch_timeout_ms = d->config.batch_timeout_ms};
    st = nxv_sched_create(&d->vk, &sc, d->staging,
                          nxv_registry_layout(d->kernels), &d->sched);
  }
  if (st != NXV_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", nxv_last_error());
    if (d->pcache) {
      nxv_pcache_destroy(d->pcache);
      d->pcache = NULL; /* nothing to save from a failed open */
    }
    device_destroy(d);
    return nxv_fail(st, "opening Vulkan device %u: %s", idx, msg);
  }
  *out_device = d;
  return NXV_OK;
}

void nxv_device_retain(nxv_device *d) {
  atomic_fetch_add_explicit(&d->refs, 1, memory_order_relaxed);
}

void nxv_device_release(nxv_device *d) {
  if (!d) return;
  if (atomic_fetch_sub_explicit(&d->refs, 1, memory_order_acq_rel) == 1)
    device_destroy(d);
}

nxv_status nxv_device_info_get(nxv_device *d, nxv_device_info *out_info) {
  if (!d || !out_info)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "NULL device or out_info");
  *out_info = d->vk.info;
  return NXV_OK;
}

nxv_status nxv_device_stats(nxv_device *d, nxv_stats *out) {
  if (!d || !out) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "NULL device or out_stats");
  memset(out, 0, sizeof *out);
  nxv_pool_stats(d->pool, out);
  nxv_hostring_stats(d->staging, &out->staging_bytes, &out->staging_dedicated);
  nxv_sched_stats(d->sched, out);
  nxv_registry_stats(d->kernels, out);
  nxv_pcache_stats(d->pcache, out);
  out->deferred_ops = atomic_load_explicit(&d->deferred_ops, memory_order_relaxed);
  out->deferred_fused = atomic_load_explicit(&d->deferred_fused, memory_order_relaxed);
  return NXV_OK;
}

nxv_status nxv_device_record_batches(nxv_device *d, bool enable) {
  if (!d) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "NULL device");
  nxv_sched_record_batches(d->sched, enable);
  return NXV_OK;
}

nxv_status nxv_device_take_batches(nxv_device *d, nxv_batch_record *out, uint32_t max,
                                   uint32_t *out_count, uint64_t *out_dropped) {
  if (!d || !out_count || !out_dropped || (max && !out))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "NULL device or output");
  nxv_sched_take_batches(d->sched, out, max, out_count, out_dropped);
  return NXV_OK;
}

nxv_status nxv_device_check(nxv_device *d) {
  const char *msg;
  nxv_status st = nxv_sched_status(d->sched, &msg);
  if (st != NXV_OK) return nxv_fail(st, "device failed earlier: %s", msg);
  return NXV_OK;
}

nxv_status nxv_device_synchronize(nxv_device *d) {
  if (!d) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "NULL device");
  return nxv_sched_synchronize(d->sched);
}

nxv_status nxv_device_trim(nxv_device *d) {
  if (!d) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "NULL device");
  nxv_pool_trim(d->pool);
  return NXV_OK;
}

nxv_status nxv_device_status(nxv_device *d, const char **out_message) {
  if (!d) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "NULL device");
  return nxv_sched_status(d->sched, out_message);
}

nxv_status nxv_device_save_pipeline_cache(nxv_device *d) {
  if (!d) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "NULL device");
  return nxv_pcache_save(d->pcache);
}

void nxv_device_inject_fault(nxv_device *d, nxv_status fault) {
  if (d) nxv_sched_inject_fault(d->sched, fault);
}

void nxv_device_inject_hang(nxv_device *d) {
  if (d) nxv_sched_inject_hang(d->sched);
}

void nxv_device_inject_pause(nxv_device *d, bool paused) {
  if (d) nxv_sched_inject_pause(d->sched, paused);
}

void nxv_device_inject_pipeline_fault(nxv_device *d) {
  if (d) nxv_registry_inject_fault(d->kernels);
}
