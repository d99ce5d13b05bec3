/*
 * vk.h - the Vulkan context of one device: instance, physical device choice
 * and description, logical device and its compute queue.
 *
 * The VkInstance is process-global: created on first use, shared by every
 * device, never destroyed (the loader tears it down at exit). Everything
 * else in nxv_vk belongs to one opened device.
 */
#ifndef NXV_SCHED_VK_H
#define NXV_SCHED_VK_H

#include <stdbool.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include "nxv.h"

typedef struct nxv_vk {
  VkInstance instance;        /* process-global; not owned */
  VkPhysicalDevice phys;      /* not owned (belongs to the instance) */
  VkDevice device;            /* owned; destroyed by nxv_vk_close */
  VkQueue queue;              /* the one compute queue used; owned by device */
  uint32_t queue_family;
  VkPhysicalDeviceProperties props;
  VkPhysicalDeviceMemoryProperties mem;
  nxv_device_info info;       /* the description nxv_device_query gives */
  bool has_budget;            /* VK_EXT_memory_budget enabled */
  bool has_feedback;          /* pipeline creation feedback available */
  bool host_query_reset;      /* hostQueryReset enabled: query slots are
                                 reset from the host (vkResetQueryPool)
                                 instead of inside command buffers */
  PFN_vkGetCalibratedTimestampsEXT get_calibrated;
                              /* VK_EXT_calibrated_timestamps, enabled where
                                 the device can sample its timestamp clock
                                 together with CLOCK_MONOTONIC (batch
                                 timestamps in host time); NULL otherwise */
} nxv_vk;

/* The process-global instance, created on first call. Thread-safe. */
nxv_status nxv_vk_instance(VkInstance *out_instance);

/* Number of physical devices and, if index < count, that device.
 * Thread-safe. */
nxv_status nxv_vk_physical(uint32_t index, VkPhysicalDevice *out_phys,
                           uint32_t *out_count);

/* Describes a physical device (features, limits, queue choice).
 * Thread-safe. */
nxv_status nxv_vk_describe(VkPhysicalDevice phys, uint32_t index,
                           nxv_device_info *out_info);

/* Creates the logical device for physical device index with every feature
 * the runtime uses, and fetches its compute queue. Fails with
 * NXV_ERR_UNSUPPORTED naming the missing requirement if the device lacks
 * timeline semaphores or buffer device addresses. Thread-safe. */
nxv_status nxv_vk_open(uint32_t index, nxv_vk *out_vk);

/* Destroys the logical device. Every object created from it must be gone.
 * Not thread-safe with other users of vk. */
void nxv_vk_close(nxv_vk *vk);

/* Index of a memory type allowed by type_bits that has every flag in
 * required, preferring the most flags of preferred and the fewest of avoid;
 * -1 if none. Pure function of vk->mem. */
int32_t nxv_vk_find_memory(const nxv_vk *vk, uint32_t type_bits,
                           VkMemoryPropertyFlags required,
                           VkMemoryPropertyFlags preferred,
                           VkMemoryPropertyFlags avoid);

/* Current budget of a memory heap in bytes: VK_EXT_memory_budget's figure
 * when available, else the heap size. Thread-safe. */
uint64_t nxv_vk_heap_budget(const nxv_vk *vk, uint32_t heap);

#endif
