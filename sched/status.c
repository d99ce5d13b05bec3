#include "sched/status.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[512];

nxv_status nxv_fail(nxv_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return status;
}

const char *nxv_last_error(void) { return last_error; }

const char *nxv_status_name(nxv_status status) {
  switch (status) {
    case NXV_OK: return "NXV_OK";
    case NXV_ERR_INVALID_ARGUMENT: return "NXV_ERR_INVALID_ARGUMENT";
    case NXV_ERR_UNSUPPORTED: return "NXV_ERR_UNSUPPORTED";
    case NXV_ERR_OUT_OF_DEVICE_MEMORY: return "NXV_ERR_OUT_OF_DEVICE_MEMORY";
    case NXV_ERR_OUT_OF_HOST_MEMORY: return "NXV_ERR_OUT_OF_HOST_MEMORY";
    case NXV_ERR_DEVICE_LOST: return "NXV_ERR_DEVICE_LOST";
    case NXV_ERR_SUBMIT_FAILED: return "NXV_ERR_SUBMIT_FAILED";
    case NXV_ERR_VULKAN: return "NXV_ERR_VULKAN";
    case NXV_ERR_NO_DEVICE: return "NXV_ERR_NO_DEVICE";
    case NXV_ERR_IO: return "NXV_ERR_IO";
  }
  return "NXV_ERR_UNKNOWN";
}

const char *nxv_vk_result_name(VkResult r) {
  switch (r) {
#define C(x) case x: return #x;
    C(VK_SUCCESS) C(VK_NOT_READY) C(VK_TIMEOUT) C(VK_EVENT_SET)
    C(VK_EVENT_RESET) C(VK_INCOMPLETE) C(VK_ERROR_OUT_OF_HOST_MEMORY)
    C(VK_ERROR_OUT_OF_DEVICE_MEMORY) C(VK_ERROR_INITIALIZATION_FAILED)
    C(VK_ERROR_DEVICE_LOST) C(VK_ERROR_MEMORY_MAP_FAILED)
    C(VK_ERROR_LAYER_NOT_PRESENT) C(VK_ERROR_EXTENSION_NOT_PRESENT)
    C(VK_ERROR_FEATURE_NOT_PRESENT) C(VK_ERROR_INCOMPATIBLE_DRIVER)
    C(VK_ERROR_TOO_MANY_OBJECTS) C(VK_ERROR_FORMAT_NOT_SUPPORTED)
    C(VK_ERROR_FRAGMENTED_POOL) C(VK_ERROR_UNKNOWN)
    C(VK_ERROR_OUT_OF_POOL_MEMORY) C(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    C(VK_ERROR_FRAGMENTATION) C(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    C(VK_PIPELINE_COMPILE_REQUIRED)
#undef C
    default: return "VK_ERROR_(unrecognised)";
  }
}

nxv_status nxv_status_from_vk(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return NXV_OK;
    case VK_ERROR_OUT_OF_HOST_MEMORY: return NXV_ERR_OUT_OF_HOST_MEMORY;
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_TOO_MANY_OBJECTS: return NXV_ERR_OUT_OF_DEVICE_MEMORY;
    case VK_ERROR_DEVICE_LOST: return NXV_ERR_DEVICE_LOST;
    case VK_ERROR_INCOMPATIBLE_DRIVER:
    case VK_ERROR_INITIALIZATION_FAILED: return NXV_ERR_NO_DEVICE;
    case VK_ERROR_FEATURE_NOT_PRESENT:
    case VK_ERROR_EXTENSION_NOT_PRESENT: return NXV_ERR_UNSUPPORTED;
    default: return NXV_ERR_VULKAN;
  }
}

nxv_status nxv_fail_vk(VkResult r, const char *what) {
  return nxv_fail(nxv_status_from_vk(r), "%s failed: %s (%d)", what,
                  nxv_vk_result_name(r), (int)r);
}
