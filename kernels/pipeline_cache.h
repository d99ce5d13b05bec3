/*
 * pipeline_cache.h - the VkPipelineCache of a device, persisted on disk.
 *
 * One file per device and driver under the cache directory
 * (config, else NX_VULKAN_CACHE_DIR, else $XDG_CACHE_HOME/nx_vulkan, else
 * $HOME/.cache/nx_vulkan), named after vendor, device, driver version and
 * pipelineCacheUUID. The file is our header followed by the driver's data:
 *
 *   offset size
 *   0      8    magic "NXVKPCCH"
 *   8      4    format version (1)
 *   12     4    header size (64)
 *   16     4    vendorID        20  4  deviceID       24  4  driverVersion
 *   28     16   pipelineCacheUUID
 *   44     8    payload size    52  8  payload FNV-1a 64 hash
 *   60     4    reserved (0)
 *
 * (little-endian). On load every field, and Vulkan's own cache header in the
 * payload, must match the running device; any mismatch, truncation or
 * corruption makes the file a miss (an empty cache) and records why, never
 * a failure. Saving writes a temporary file in the same directory and
 * renames it over the old one, so readers see either file whole.
 *
 * Thread safety: the VkPipelineCache is internally synchronized by Vulkan;
 * nxv_pcache_save and nxv_pcache_stats are thread-safe.
 */
#ifndef NXV_KERNELS_PIPELINE_CACHE_H
#define NXV_KERNELS_PIPELINE_CACHE_H

#include <stdbool.h>

#include "nxv.h"
#include "sched/vk.h"

#define NXV_PCACHE_HEADER_SIZE 64
#define NXV_PCACHE_VERSION 1

typedef struct nxv_pcache nxv_pcache;

/* Opens the cache for vk's device, loading the file unless disabled.
 * dir may be NULL (defaults above). vk must outlive the cache. */
nxv_status nxv_pcache_open(const nxv_vk *vk, const char *dir, bool disabled,
                           nxv_pcache **out_cache);

/* The VkPipelineCache to create pipelines with. */
VkPipelineCache nxv_pcache_handle(nxv_pcache *cache);

/* Writes the file (temporary file + rename). NXV_ERR_IO names the failing
 * step. A disabled cache saves nothing and succeeds. */
nxv_status nxv_pcache_save(nxv_pcache *cache);

/* Destroys the VkPipelineCache (without saving). */
void nxv_pcache_destroy(nxv_pcache *cache);

/* Fills the cache_* fields of stats. */
void nxv_pcache_stats(nxv_pcache *cache, nxv_stats *stats);

/* FNV-1a 64-bit hash. Pure function. */
uint64_t nxv_fnv1a64(const void *data, size_t len);

#endif
