/*
 * status.h - error reporting shared by every runtime module.
 *
 * A failing function records a message for the calling thread with
 * nxv_fail() and returns the status; nxv_last_error() (nxv.h) reads it.
 * NXV_VK_TRY turns a failed Vulkan call into a status and a message naming
 * the call and its VkResult. All functions are thread-safe (thread-local
 * storage).
 */
#ifndef NXV_SCHED_STATUS_H
#define NXV_SCHED_STATUS_H

#include <vulkan/vulkan.h>

#include "nxv.h"

/* Records "fmt ..." as the calling thread's last error and returns status. */
nxv_status nxv_fail(nxv_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Name of a VkResult ("VK_ERROR_DEVICE_LOST"). */
const char *nxv_vk_result_name(VkResult result);

/* Maps a failed VkResult to the runtime status it means. */
nxv_status nxv_status_from_vk(VkResult result);

/* Records "<what> failed: <VkResult>" and returns the mapped status. */
nxv_status nxv_fail_vk(VkResult result, const char *what);

/* Evaluates a Vulkan call; on failure records the call text and result and
 * returns the mapped status from the enclosing function. */
#define NXV_VK_TRY(call)                                   \
  do {                                                     \
    VkResult nxv_vk_try_r_ = (call);                       \
    if (nxv_vk_try_r_ != VK_SUCCESS)                       \
      return nxv_fail_vk(nxv_vk_try_r_, #call);            \
  } while (0)

/* Propagates a non-OK nxv_status from the enclosing function. */
#define NXV_TRY(expr)                              \
  do {                                             \
    nxv_status nxv_try_s_ = (expr);                \
    if (nxv_try_s_ != NXV_OK) return nxv_try_s_;  \
  } while (0)

#endif
