#include "sched/vk.h"
#include "sched/vk_khr.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/status.h"

static pthread_once_t instance_once = PTHREAD_ONCE_INIT;
static VkInstance instance;
static VkResult instance_result = VK_ERROR_INITIALIZATION_FAILED;

static bool has_instance_ext(const VkExtensionProperties *exts, uint32_t n,
                             const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(exts[i].extensionName, name) == 0) return true;
  return false;
}

static void create_instance(void) {
  uint32_t api = VK_API_VERSION_1_0;
  PFN_vkEnumerateInstanceVersion ver = (PFN_vkEnumerateInstanceVersion)
      vkGetInstanceProcAddr(NULL, "vkEnumerateInstanceVersion");
  if (ver) ver(&api);
  if (api < VK_API_VERSION_1_2) {
    instance_result = VK_ERROR_INCOMPATIBLE_DRIVER;
    return;
  }
  uint32_t n = 0;
  vkEnumerateInstanceExtensionProperties(NULL, &n, NULL);
  VkExtensionProperties *exts = calloc(n ? n : 1, sizeof *exts);
  if (!exts) {
    instance_result = VK_ERROR_OUT_OF_HOST_MEMORY;
    return;
  }
  vkEnumerateInstanceExtensionProperties(NULL, &n, exts);
  const char *enabled[2];
  uint32_t nenabled = 0;
  VkInstanceCreateFlags flags = 0;
  if (has_instance_ext(exts, n, "VK_KHR_portability_enumeration")) {
    enabled[nenabled++] = "VK_KHR_portability_enumeration";
    flags |= 0x00000001; /* VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR */
  }
  free(exts);
  const char *layers[1] = {"VK_LAYER_KHRONOS_validation"};
  const char *validation = getenv("NX_VULKAN_VALIDATION");
  bool want_validation = validation && validation[0] && validation[0] != '0';
  VkApplicationInfo app = {
      .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
      .pApplicationName = "nx_vulkan",
      .pEngineName = "nx_vulkan",
      .apiVersion = api >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3
                                              : VK_API_VERSION_1_2,
  };
  VkInstanceCreateInfo ci = {
      .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
      .flags = flags,
      .pApplicationInfo = &app,
      .enabledExtensionCount = nenabled,
      .ppEnabledExtensionNames = enabled,
      .enabledLayerCount = want_validation ? 1 : 0,
      .ppEnabledLayerNames = layers,
  };
  instance_result = vkCreateInstance(&ci, NULL, &instance);
  if (instance_result == VK_ERROR_LAYER_NOT_PRESENT && want_validation) {
    ci.enabledLayerCount = 0;
    instance_result = vkCreateInstance(&ci, NULL, &instance);
  }
}

nxv_status nxv_vk_instance(VkInstance *out_instance) {
  pthread_once(&instance_once, create_instance);
  if (instance_result != VK_SUCCESS)
    return nxv_fail(nxv_status_from_vk(instance_result),
                    "no Vulkan driver could create an instance (%s): is a "
                    "Vulkan 1.2+ driver (ICD) installed?",
                    nxv_vk_result_name(instance_result));
  *out_instance = instance;
  return NXV_OK;
}

nxv_status nxv_vk_physical(uint32_t index, VkPhysicalDevice *out_phys,
                           uint32_t *out_count) {
  VkInstance inst;
  NXV_TRY(nxv_vk_instance(&inst));
  uint32_t n = 0;
  NXV_VK_TRY(vkEnumeratePhysicalDevices(inst, &n, NULL));
  if (out_count) *out_count = n;
  if (!out_phys) return NXV_OK;
  if (index >= n)
    return nxv_fail(NXV_ERR_NO_DEVICE,
                    "Vulkan device index %u out of range: %u device(s)",
                    index, n);
  VkPhysicalDevice *list = calloc(n, sizeof *list);
  if (!list) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "enumerating devices");
  VkResult r = vkEnumeratePhysicalDevices(inst, &n, list);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
    free(list);
    return nxv_fail_vk(r, "vkEnumeratePhysicalDevices");
  }
  if (index >= n) {
    free(list);
    return nxv_fail(NXV_ERR_NO_DEVICE, "Vulkan device %u disappeared", index);
  }
  *out_phys = list[index];
  free(list);
  return NXV_OK;
}

typedef struct dev_exts {
  bool budget, push_descriptor, coop_khr, coop_nv, bfloat16, feedback, portability;
  bool calibrated;
} dev_exts;

static nxv_status device_extensions(VkPhysicalDevice phys, dev_exts *out) {
  uint32_t n = 0;
  NXV_VK_TRY(vkEnumerateDeviceExtensionProperties(phys, NULL, &n, NULL));
  VkExtensionProperties *e = calloc(n ? n : 1, sizeof *e);
  if (!e) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "device extensions");
  VkResult r = vkEnumerateDeviceExtensionProperties(phys, NULL, &n, e);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
    free(e);
    return nxv_fail_vk(r, "vkEnumerateDeviceExtensionProperties");
  }
  memset(out, 0, sizeof *out);
  out->budget = has_instance_ext(e, n, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  out->push_descriptor = has_instance_ext(e, n, "VK_KHR_push_descriptor");
  out->coop_khr = has_instance_ext(e, n, "VK_KHR_cooperative_matrix");
  out->coop_nv = has_instance_ext(e, n, "VK_NV_cooperative_matrix");
  out->bfloat16 = has_instance_ext(e, n, "VK_KHR_shader_bfloat16");
  out->feedback = has_instance_ext(e, n, "VK_EXT_pipeline_creation_feedback");
  out->portability = has_instance_ext(e, n, "VK_KHR_portability_subset");
  out->calibrated = has_instance_ext(e, n, VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME);
  free(e);
  return NXV_OK;
}

/* Whether VK_EXT_calibrated_timestamps can sample the device's timestamp
 * clock and CLOCK_MONOTONIC (the scheduler's clock) together. */
static bool calibrates_monotonic(VkPhysicalDevice phys) {
  VkInstance inst;
  if (nxv_vk_instance(&inst) != NXV_OK) return false;
  PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT domains =
      (PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT)vkGetInstanceProcAddr(
          inst, "vkGetPhysicalDeviceCalibrateableTimeDomainsEXT");
  if (!domains) return false;
  VkTimeDomainEXT d[8];
  uint32_t n = 8;
  VkResult r = domains(phys, &n, d);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) return false;
  bool dev = false, mono = false;
  for (uint32_t i = 0; i < n; i++) {
    dev = dev || d[i] == VK_TIME_DOMAIN_DEVICE_EXT;
    mono = mono || d[i] == VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT;
  }
  return dev && mono;
}

/* The compute queue family to use (a compute-only one where there is
 * one); *out_timestamp_bits is its timestampValidBits. */
static uint32_t pick_queue_family(VkPhysicalDevice phys, bool *out_compute_only,
                                  bool *out_found, uint32_t *out_timestamp_bits) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(phys, &n, NULL);
  VkQueueFamilyProperties q[64];
  if (n > 64) n = 64;
  vkGetPhysicalDeviceQueueFamilyProperties(phys, &n, q);
  uint32_t best = UINT32_MAX;
  *out_compute_only = false;
  for (uint32_t i = 0; i < n; i++) {
    if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || q[i].queueCount == 0)
      continue;
    bool only = !(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT);
    if (best == UINT32_MAX || (only && !*out_compute_only)) {
      best = i;
      *out_compute_only = only;
    }
  }
  *out_found = best != UINT32_MAX;
  *out_timestamp_bits = best == UINT32_MAX ? 0 : q[best].timestampValidBits;
  return best == UINT32_MAX ? 0 : best;
}

/* Whether VK_NV_cooperative_matrix offers the shape coopmat.comp uses:
 * 16x16x16, f16 A and B, f32 C and D, subgroup scope. */
static bool coopmat_f16_supported(VkPhysicalDevice phys) {
  VkInstance inst;
  if (nxv_vk_instance(&inst) != NXV_OK) return false;
  PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV props =
      (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)vkGetInstanceProcAddr(
          inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
  if (!props) return false;
  VkPhysicalDeviceCooperativeMatrixFeaturesNV cf = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                  .pNext = &cf};
  vkGetPhysicalDeviceFeatures2(phys, &f2);
  if (!cf.cooperativeMatrix) return false;
  uint32_t n = 0;
  if (props(phys, &n, NULL) != VK_SUCCESS || n == 0) return false;
  VkCooperativeMatrixPropertiesNV *p = calloc(n, sizeof *p);
  if (!p) return false;
  for (uint32_t i = 0; i < n; i++) p[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
  bool ok = false;
  if (props(phys, &n, p) == VK_SUCCESS)
    for (uint32_t i = 0; i < n && !ok; i++)
      ok = p[i].MSize == 16 && p[i].NSize == 16 && p[i].KSize == 16 &&
           p[i].AType == VK_COMPONENT_TYPE_FLOAT16_NV &&
           p[i].BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
           p[i].CType == VK_COMPONENT_TYPE_FLOAT32_NV &&
           p[i].DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
           p[i].scope == VK_SCOPE_SUBGROUP_NV;
  free(p);
  return ok;
}

/* Whether VK_KHR_cooperative_matrix offers the shape coopmat.comp uses
 * with A and B of component type ab (VkComponentTypeKHR: f16 or, with
 * VK_KHR_shader_bfloat16 and its features, bf16): 16x16x16, f32 C and
 * result, subgroup scope. */
static bool coopmat_khr_supported(VkPhysicalDevice phys, int32_t ab) {
  VkInstance inst;
  if (nxv_vk_instance(&inst) != NXV_OK) return false;
  nxv_pfn_coopmat_properties_khr props =
      (nxv_pfn_coopmat_properties_khr)vkGetInstanceProcAddr(
          inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
  if (!props) return false;
  nxv_bfloat16_features_khr bf = {.sType = NXV_STYPE_BFLOAT16_FEATURES_KHR};
  nxv_coopmat_features_khr cf = {.sType = NXV_STYPE_COOPMAT_FEATURES_KHR,
                                 .pNext = ab == NXV_COMPONENT_BFLOAT16_KHR ? &bf : NULL};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                  .pNext = &cf};
  vkGetPhysicalDeviceFeatures2(phys, &f2);
  if (!cf.cooperativeMatrix) return false;
  if (ab == NXV_COMPONENT_BFLOAT16_KHR &&
      (!bf.shaderBFloat16Type || !bf.shaderBFloat16CooperativeMatrix))
    return false;
  uint32_t n = 0;
  if (props(phys, &n, NULL) != VK_SUCCESS || n == 0) return false;
  nxv_coopmat_properties_khr *p = calloc(n, sizeof *p);
  if (!p) return false;
  for (uint32_t i = 0; i < n; i++) p[i].sType = NXV_STYPE_COOPMAT_PROPERTIES_KHR;
  bool ok = false;
  if (props(phys, &n, p) == VK_SUCCESS)
    for (uint32_t i = 0; i < n && !ok; i++)
      ok = p[i].MSize == 16 && p[i].NSize == 16 && p[i].KSize == 16 &&
           p[i].AType == ab && p[i].BType == ab &&
           p[i].CType == NXV_COMPONENT_FLOAT32_KHR &&
           p[i].ResultType == NXV_COMPONENT_FLOAT32_KHR &&
           p[i].scope == NXV_SCOPE_SUBGROUP_KHR;
  free(p);
  return ok;
}

nxv_status nxv_vk_describe(VkPhysicalDevice phys, uint32_t index,
                           nxv_device_info *out) {
  memset(out, 0, sizeof *out);
  out->index = index;
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(phys, &props);
  snprintf(out->name, sizeof out->name, "%s", props.deviceName);
  out->vendor_id = props.vendorID;
  out->device_id = props.deviceID;
  out->driver_version = props.driverVersion;
  out->api_version = props.apiVersion;
  memcpy(out->pipeline_cache_uuid, props.pipelineCacheUUID, 16);
  switch (props.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      out->type = NXV_DEVICE_INTEGRATED_GPU; break;
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      out->type = NXV_DEVICE_DISCRETE_GPU; break;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      out->type = NXV_DEVICE_VIRTUAL_GPU; break;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: out->type = NXV_DEVICE_CPU; break;
    default: out->type = NXV_DEVICE_OTHER; break;
  }
  const VkPhysicalDeviceLimits *l = &props.limits;
  out->max_push_constants_size = l->maxPushConstantsSize;
  out->max_storage_buffer_range = l->maxStorageBufferRange;
  for (int i = 0; i < 3; i++) {
    out->max_workgroup_count[i] = l->maxComputeWorkGroupCount[i];
    out->max_workgroup_size[i] = l->maxComputeWorkGroupSize[i];
  }
  out->max_workgroup_invocations = l->maxComputeWorkGroupInvocations;
  out->max_shared_memory = l->maxComputeSharedMemorySize;

  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(phys, &mem);
  for (uint32_t h = 0; h < mem.memoryHeapCount; h++)
    if ((mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
        mem.memoryHeaps[h].size > out->device_local_heap_size)
      out->device_local_heap_size = mem.memoryHeaps[h].size;

  bool found;
  out->queue_family =
      pick_queue_family(phys, &out->compute_only_queue, &found, &out->timestamp_bits);
  out->timestamp_period_ns = props.limits.timestampPeriod;

  dev_exts ext;
  NXV_TRY(device_extensions(phys, &ext));
  out->push_descriptor = ext.push_descriptor;
  out->memory_budget = ext.budget;
  out->cooperative_matrix = ext.coop_khr || ext.coop_nv;

  if (props.apiVersion < VK_API_VERSION_1_2) {
    /* Too old for the 1.2 feature structs: describe what 1.0 shows. */
    out->usable = false;
    out->max_memory_allocation_size = l->maxStorageBufferRange;
    return NXV_OK;
  }
  VkPhysicalDeviceMaintenance4Properties m4 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES};
  VkPhysicalDeviceSubgroupSizeControlProperties ssc = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES};
  VkPhysicalDeviceVulkan11Properties p11 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES};
  VkPhysicalDeviceDriverProperties drv = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES,
      .pNext = &p11};
  bool v13 = props.apiVersion >= VK_API_VERSION_1_3;
  if (v13) {
    ssc.pNext = &drv;
    m4.pNext = &ssc;
  }
  VkPhysicalDeviceProperties2 p2 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
      .pNext = v13 ? (void *)&m4 : (void *)&drv};
  vkGetPhysicalDeviceProperties2(phys, &p2);
  snprintf(out->driver_name, sizeof out->driver_name, "%s", drv.driverName);
  snprintf(out->driver_info, sizeof out->driver_info, "%s", drv.driverInfo);
  out->driver_id = (uint32_t)drv.driverID;
  out->max_memory_allocation_size = p11.maxMemoryAllocationSize;
  out->max_buffer_size = v13 ? m4.maxBufferSize : p11.maxMemoryAllocationSize;
  out->subgroup_size = p11.subgroupSize;
  out->subgroup_operations = p11.subgroupSupportedOperations;
  out->subgroup_min_size = v13 ? ssc.minSubgroupSize : p11.subgroupSize;
  out->subgroup_max_size = v13 ? ssc.maxSubgroupSize : p11.subgroupSize;

  VkPhysicalDeviceVulkan12Features f12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features f11 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
      .pNext = &f12};
  VkPhysicalDeviceFeatures2 f2 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
  vkGetPhysicalDeviceFeatures2(phys, &f2);
  out->timeline_semaphore = f12.timelineSemaphore;
  out->buffer_device_address = f12.bufferDeviceAddress;
  out->float64 = f2.features.shaderFloat64;
  out->int64 = f2.features.shaderInt64;
  out->int16 = f2.features.shaderInt16;
  out->int8 = f12.shaderInt8;
  out->float16 = f12.shaderFloat16;
  out->storage_8bit = f12.storageBuffer8BitAccess;
  out->storage_16bit = f11.storageBuffer16BitAccess;
  out->pipeline_creation_feedback = v13 || ext.feedback;
  out->calibrated_timestamps = ext.calibrated && calibrates_monotonic(phys);
  out->usable = found && out->timeline_semaphore &&
                out->buffer_device_address && out->int64;
  /* coopmat.comp needs the Vulkan memory model (its scopes) and subgroups
   * of 32. f16 takes VK_KHR_cooperative_matrix where the device offers it
   * (on an H100 the same kernel ran 12-17% faster through it than through
   * VK_NV_cooperative_matrix), else the NV extension. */
  bool coop_base = out->storage_16bit && f12.vulkanMemoryModel && out->subgroup_size == 32;
  out->coopmat_khr = coop_base && ext.coop_khr && out->float16 &&
                     coopmat_khr_supported(phys, NXV_COMPONENT_FLOAT16_KHR);
  out->coopmat_f16 = out->coopmat_khr || (coop_base && ext.coop_nv && out->float16 &&
                                          coopmat_f16_supported(phys));
  out->coopmat_bf16 = coop_base && ext.coop_khr && ext.bfloat16 &&
                      coopmat_khr_supported(phys, NXV_COMPONENT_BFLOAT16_KHR);
  return NXV_OK;
}

nxv_status nxv_vk_open(uint32_t index, nxv_vk *out) {
  memset(out, 0, sizeof *out);
  NXV_TRY(nxv_vk_instance(&out->instance));
  NXV_TRY(nxv_vk_physical(index, &out->phys, NULL));
  NXV_TRY(nxv_vk_describe(out->phys, index, &out->info));
  const nxv_device_info *info = &out->info;
  if (info->api_version < VK_API_VERSION_1_2)
    return nxv_fail(NXV_ERR_UNSUPPORTED,
                    "device %u (%s) supports Vulkan %u.%u; 1.2 is required",
                    index, info->name, VK_API_VERSION_MAJOR(info->api_version),
                    VK_API_VERSION_MINOR(info->api_version));
  if (!info->timeline_semaphore || !info->buffer_device_address ||
      !info->int64)
    return nxv_fail(NXV_ERR_UNSUPPORTED,
                    "device %u (%s) lacks a required feature:%s%s%s", index,
                    info->name,
                    info->timeline_semaphore ? "" : " timelineSemaphore",
                    info->buffer_device_address ? "" : " bufferDeviceAddress",
                    info->int64 ? "" : " shaderInt64");
  vkGetPhysicalDeviceProperties(out->phys, &out->props);
  vkGetPhysicalDeviceMemoryProperties(out->phys, &out->mem);

  dev_exts ext;
  NXV_TRY(device_extensions(out->phys, &ext));
  const char *exts[8];
  uint32_t nexts = 0;
  bool calibrated = info->calibrated_timestamps;
  if (calibrated) exts[nexts++] = VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME;
  if (ext.budget) exts[nexts++] = VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
  if (ext.feedback && info->api_version < VK_API_VERSION_1_3)
    exts[nexts++] = "VK_EXT_pipeline_creation_feedback";
  if (ext.portability) exts[nexts++] = "VK_KHR_portability_subset";
  bool nv = info->coopmat_f16 && !info->coopmat_khr;
  bool khr = info->coopmat_khr || info->coopmat_bf16;
  if (nv) exts[nexts++] = "VK_NV_cooperative_matrix";
  if (khr) exts[nexts++] = "VK_KHR_cooperative_matrix";
  if (info->coopmat_bf16) exts[nexts++] = "VK_KHR_shader_bfloat16";
  out->has_budget = ext.budget;
  out->has_feedback = info->pipeline_creation_feedback;
  /* Host query reset (core in Vulkan 1.2): the scheduler resets a batch's
   * timestamp slots on the host instead of recording vkCmdResetQueryPool,
   * which on an H100 added ~7 us to every round trip. */
  VkPhysicalDeviceVulkan12Features have12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceFeatures2 have = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = &have12};
  vkGetPhysicalDeviceFeatures2(out->phys, &have);
  out->host_query_reset = have12.hostQueryReset == VK_TRUE;

  /* Feature chain: f12 -> [NV coopmat] -> [KHR coopmat -> [bfloat16]]. */
  nxv_bfloat16_features_khr bf16 = {.sType = NXV_STYPE_BFLOAT16_FEATURES_KHR,
                                    .shaderBFloat16Type = VK_TRUE,
                                    .shaderBFloat16CooperativeMatrix = VK_TRUE};
  nxv_coopmat_features_khr coop_khr = {.sType = NXV_STYPE_COOPMAT_FEATURES_KHR,
                                       .pNext = info->coopmat_bf16 ? &bf16 : NULL,
                                       .cooperativeMatrix = VK_TRUE};
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coop = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
      .pNext = khr ? &coop_khr : NULL,
      .cooperativeMatrix = VK_TRUE};
  void *coop_chain = nv ? (void *)&coop : khr ? (void *)&coop_khr : NULL;
  VkPhysicalDeviceVulkan12Features f12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
      .pNext = coop_chain,
      .vulkanMemoryModel = nv || khr,
      .timelineSemaphore = VK_TRUE,
      .bufferDeviceAddress = VK_TRUE,
      .hostQueryReset = out->host_query_reset,
      .shaderInt8 = info->int8,
      .shaderFloat16 = info->float16,
      .storageBuffer8BitAccess = info->storage_8bit,
  };
  VkPhysicalDeviceVulkan11Features f11 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
      .pNext = &f12,
      .storageBuffer16BitAccess = info->storage_16bit,
  };
  VkPhysicalDeviceFeatures2 f2 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
      .pNext = &f11,
      .features = {.shaderFloat64 = info->float64,
                   .shaderInt64 = VK_TRUE,
                   .shaderInt16 = info->int16},
  };
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qci = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
      .queueFamilyIndex = info->queue_family,
      .queueCount = 1,
      .pQueuePriorities = &prio,
  };
  VkDeviceCreateInfo dci = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
      .pNext = &f2,
      .queueCreateInfoCount = 1,
      .pQueueCreateInfos = &qci,
      .enabledExtensionCount = nexts,
      .ppEnabledExtensionNames = exts,
  };
  NXV_VK_TRY(vkCreateDevice(out->phys, &dci, NULL, &out->device));
  if (calibrated)
    out->get_calibrated = (PFN_vkGetCalibratedTimestampsEXT)vkGetDeviceProcAddr(
        out->device, "vkGetCalibratedTimestampsEXT");
  out->queue_family = info->queue_family;
  vkGetDeviceQueue(out->device, out->queue_family, 0, &out->queue);
  return NXV_OK;
}

void nxv_vk_close(nxv_vk *vk) {
  if (vk->device) vkDestroyDevice(vk->device, NULL);
  vk->device = VK_NULL_HANDLE;
}

int32_t nxv_vk_find_memory(const nxv_vk *vk, uint32_t type_bits,
                           VkMemoryPropertyFlags required,
                           VkMemoryPropertyFlags preferred,
                           VkMemoryPropertyFlags avoid) {
  int32_t best = -1;
  int best_score = -1000;
  for (uint32_t i = 0; i < vk->mem.memoryTypeCount; i++) {
    if (!(type_bits & (1u << i))) continue;
    VkMemoryPropertyFlags f = vk->mem.memoryTypes[i].propertyFlags;
    if ((f & required) != required) continue;
    int score = __builtin_popcount(f & preferred) * 2 -
                __builtin_popcount(f & avoid) * 3;
    if (score > best_score) {
      best_score = score;
      best = (int32_t)i;
    }
  }
  return best;
}

uint64_t nxv_vk_heap_budget(const nxv_vk *vk, uint32_t heap) {
  if (heap >= vk->mem.memoryHeapCount) return 0;
  if (vk->has_budget) {
    VkPhysicalDeviceMemoryBudgetPropertiesEXT b = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 m = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
        .pNext = &b};
    vkGetPhysicalDeviceMemoryProperties2(vk->phys, &m);
    if (b.heapBudget[heap]) return b.heapBudget[heap];
  }
  return vk->mem.memoryHeaps[heap].size;
}
