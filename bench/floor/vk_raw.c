/*
 * vk_raw.c - the bare Vulkan context of the raw benchmarks (see vk_raw.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "vk_raw.h"

#include "sched/vk_khr.h"

#include <string.h>
#include <time.h>

bool raw_compute_only = false;

double raw_now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double raw_median(double *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_double);
  return v[n / 2];
}

static uint32_t memory_type(const raw_ctx *c, uint32_t bits, VkMemoryPropertyFlags need,
                            VkMemoryPropertyFlags avoid) {
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(c->pd, &mp);
  for (int pass = 0; pass < 2; pass++)
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
      VkMemoryPropertyFlags f = mp.memoryTypes[i].propertyFlags;
      if ((bits >> i & 1u) && (f & need) == need && (pass == 1 || !(f & avoid))) return i;
    }
  fprintf(stderr, "%s: no memory type with flags 0x%x\n", raw_program, (unsigned)need);
  exit(1);
}

raw_buf raw_buffer(const raw_ctx *c, VkDeviceSize size, VkMemoryPropertyFlags need,
                   VkMemoryPropertyFlags avoid) {
  raw_buf b;
  VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                           .size = size,
                           .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                    VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                    VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                                    VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT};
  RAW_VK(vkCreateBuffer(c->dev, &bi, NULL, &b.buffer));
  VkMemoryRequirements mr;
  vkGetBufferMemoryRequirements(c->dev, b.buffer, &mr);
  VkMemoryAllocateFlagsInfo fi = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                  .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
  VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                             .pNext = &fi,
                             .allocationSize = mr.size,
                             .memoryTypeIndex = memory_type(c, mr.memoryTypeBits, need, avoid)};
  RAW_VK(vkAllocateMemory(c->dev, &ai, NULL, &b.memory));
  RAW_VK(vkBindBufferMemory(c->dev, b.buffer, b.memory, 0));
  VkBufferDeviceAddressInfo di = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO,
                                  .buffer = b.buffer};
  b.addr = vkGetBufferDeviceAddress(c->dev, &di);
  return b;
}

static bool has_extension(VkPhysicalDevice pd, const char *name) {
  uint32_t n = 0;
  RAW_VK(vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL));
  VkExtensionProperties *e = calloc(n ? n : 1, sizeof *e);
  if (!e) exit(1);
  RAW_VK(vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e));
  bool found = false;
  for (uint32_t i = 0; i < n && !found; i++) found = strcmp(e[i].extensionName, name) == 0;
  free(e);
  return found;
}

bool raw_coopmat2_shape(const raw_ctx *c, uint32_t m, uint32_t n, uint32_t k,
                        uint32_t invocations) {
  if (!c->coopmat2) return false;
  nxv_pfn_coopmat_flexible_properties_nv get = (nxv_pfn_coopmat_flexible_properties_nv)vkGetInstanceProcAddr(
      c->instance, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV");
  if (!get) return false;
  uint32_t count = 0;
  RAW_VK(get(c->pd, &count, NULL));
  nxv_coopmat_flexible_properties_nv *p = calloc(count ? count : 1, sizeof *p);
  if (!p) exit(1);
  for (uint32_t i = 0; i < count; i++) p[i].sType = NXV_STYPE_COOPMAT_FLEXIBLE_PROPERTIES_NV;
  RAW_VK(get(c->pd, &count, p));
  bool ok = false;
  for (uint32_t i = 0; i < count && !ok; i++)
    ok = p[i].scope == NXV_SCOPE_WORKGROUP_KHR && p[i].workgroupInvocations == invocations &&
         p[i].AType == NXV_COMPONENT_FLOAT16_KHR && p[i].BType == NXV_COMPONENT_FLOAT16_KHR &&
         p[i].CType == NXV_COMPONENT_FLOAT32_KHR && p[i].ResultType == NXV_COMPONENT_FLOAT32_KHR &&
         p[i].MGranularity && m % p[i].MGranularity == 0 && p[i].NGranularity &&
         n % p[i].NGranularity == 0 && p[i].KGranularity && k % p[i].KGranularity == 0;
  free(p);
  return ok;
}

/* Whether pd's VK_KHR_cooperative_matrix offers 16x16x16 f16 x f16 -> f32
 * products of subgroup scope. */
static bool khr_shape(VkInstance inst, VkPhysicalDevice pd) {
  nxv_pfn_coopmat_properties_khr get = (nxv_pfn_coopmat_properties_khr)vkGetInstanceProcAddr(
      inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
  if (!get) return false;
  uint32_t n = 0;
  RAW_VK(get(pd, &n, NULL));
  nxv_coopmat_properties_khr *p = calloc(n ? n : 1, sizeof *p);
  if (!p) exit(1);
  for (uint32_t i = 0; i < n; i++) p[i].sType = NXV_STYPE_COOPMAT_PROPERTIES_KHR;
  RAW_VK(get(pd, &n, p));
  bool ok = false;
  for (uint32_t i = 0; i < n && !ok; i++)
    ok = p[i].MSize == 16 && p[i].NSize == 16 && p[i].KSize == 16 &&
         p[i].AType == NXV_COMPONENT_FLOAT16_KHR && p[i].BType == NXV_COMPONENT_FLOAT16_KHR &&
         p[i].CType == NXV_COMPONENT_FLOAT32_KHR && p[i].ResultType == NXV_COMPONENT_FLOAT32_KHR &&
         p[i].scope == NXV_SCOPE_SUBGROUP_KHR;
  free(p);
  return ok;
}

void raw_close(raw_ctx *c) {
  RAW_VK(vkDeviceWaitIdle(c->dev));
  vkDestroyCommandPool(c->dev, c->pool, NULL);
  vkDestroySemaphore(c->dev, c->timeline, NULL);
  vkDestroyDevice(c->dev, NULL);
  vkDestroyInstance(c->instance, NULL);
  memset(c, 0, sizeof *c);
}

void raw_open(raw_ctx *c, uint32_t index, raw_extras extras) {
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = raw_program,
                           .apiVersion = VK_API_VERSION_1_3};
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                              .pApplicationInfo = &app};
  RAW_VK(vkCreateInstance(&ici, NULL, &c->instance));
  uint32_t n = 0;
  RAW_VK(vkEnumeratePhysicalDevices(c->instance, &n, NULL));
  VkPhysicalDevice *pds = calloc(n ? n : 1, sizeof *pds);
  if (!pds) exit(1);
  RAW_VK(vkEnumeratePhysicalDevices(c->instance, &n, pds));
  if (index >= n) {
    fprintf(stderr, "%s: no device %u (%u present)\n", raw_program, index, n);
    exit(1);
  }
  c->pd = pds[index];
  free(pds);
  vkGetPhysicalDeviceProperties(c->pd, &c->props);
  printf("device %u: %s\n", index, c->props.deviceName);
  uint32_t nf = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(c->pd, &nf, NULL);
  VkQueueFamilyProperties *qf = calloc(nf ? nf : 1, sizeof *qf);
  if (!qf) exit(1);
  vkGetPhysicalDeviceQueueFamilyProperties(c->pd, &nf, qf);
  c->family = UINT32_MAX;
  for (uint32_t i = 0; i < nf && c->family == UINT32_MAX; i++)
    if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) c->family = i;
  if (raw_compute_only)
    for (uint32_t i = 0; i < nf; i++)
      if ((qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && !(qf[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) {
        c->family = i;
        break;
      }
  uint32_t nqueues = c->family != UINT32_MAX && qf[c->family].queueCount > 1 ? 2 : 1;
  if (c->family != UINT32_MAX)
    printf("queue family %u (%s), %u queue%s\n", c->family,
           qf[c->family].queueFlags & VK_QUEUE_GRAPHICS_BIT ? "graphics and compute" : "compute",
           nqueues, nqueues > 1 ? "s" : "");
  free(qf);
  if (c->family == UINT32_MAX) {
    fprintf(stderr, "%s: no compute queue\n", raw_program);
    exit(1);
  }

  /* Cooperative matrices and executable statistics where asked for and
   * present. */
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coop = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  nxv_coopmat_features_khr coop_khr = {.sType = NXV_STYPE_COOPMAT_FEATURES_KHR};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR exe = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  VkPhysicalDeviceVulkan11Features have11 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features have12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &have11};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                  .pNext = &have12};
  bool nv = extras == RAW_COOPMAT_NV && has_extension(c->pd, "VK_NV_cooperative_matrix");
  bool ex = (extras == RAW_COOPMAT_NV || extras == RAW_COOPMAT_KHR) &&
            has_extension(c->pd, "VK_KHR_pipeline_executable_properties");
  bool khr = (extras == RAW_COOPMAT_KHR || extras == RAW_COOPMAT2) &&
             has_extension(c->pd, "VK_KHR_cooperative_matrix");
  bool cm2 = extras == RAW_COOPMAT2 && khr && has_extension(c->pd, "VK_NV_cooperative_matrix2");
  nxv_coopmat2_features_nv coop2 = {.sType = NXV_STYPE_COOPMAT2_FEATURES_NV};
  have11.pNext = &coop;
  coop.pNext = &exe;
  if (khr) exe.pNext = &coop_khr;
  if (cm2) coop_khr.pNext = &coop2;
  bool bfe = khr && has_extension(c->pd, "VK_KHR_shader_bfloat16");
  nxv_bfloat16_features_khr bf = {.sType = NXV_STYPE_BFLOAT16_FEATURES_KHR};
  if (bfe) coop2.pNext = &bf; /* coop2 is in the chain only with cm2 */
  if (bfe && !cm2) coop_khr.pNext = &bf;
  vkGetPhysicalDeviceFeatures2(c->pd, &f2);
  bool f16_ok = have12.shaderFloat16 && have12.vulkanMemoryModel &&
                have11.storageBuffer16BitAccess;
  c->coopmat_nv = nv && coop.cooperativeMatrix && f16_ok;
  c->coopmat_khr = khr && coop_khr.cooperativeMatrix && f16_ok && khr_shape(c->instance, c->pd);
  c->executable_stats = ex && exe.pipelineExecutableInfo;
  c->coopmat2 = cm2 && c->coopmat_khr && coop2.cooperativeMatrixWorkgroupScope &&
                coop2.cooperativeMatrixFlexibleDimensions;
  c->coopmat2_tensor = c->coopmat2 && coop2.cooperativeMatrixTensorAddressing;
  c->bf16 = bfe && c->coopmat_khr && bf.shaderBFloat16Type && bf.shaderBFloat16CooperativeMatrix;
  bool coopmat = c->coopmat_nv || c->coopmat_khr;

  const float prio[2] = {1.0f, 1.0f};
  VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                .queueFamilyIndex = c->family,
                                .queueCount = nqueues,
                                .pQueuePriorities = prio};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR exe_on = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
      .pipelineExecutableInfo = VK_TRUE};
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coop_on = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
      .pNext = c->executable_stats ? &exe_on : NULL,
      .cooperativeMatrix = VK_TRUE};
  nxv_coopmat2_features_nv coop2_on = {.sType = NXV_STYPE_COOPMAT2_FEATURES_NV,
                                    .cooperativeMatrixWorkgroupScope = VK_TRUE,
                                    .cooperativeMatrixFlexibleDimensions = VK_TRUE,
                                    .cooperativeMatrixTensorAddressing =
                                        coop2.cooperativeMatrixTensorAddressing};
  nxv_bfloat16_features_khr bf_on = {.sType = NXV_STYPE_BFLOAT16_FEATURES_KHR,
                                     .shaderBFloat16Type = VK_TRUE,
                                     .shaderBFloat16CooperativeMatrix = VK_TRUE};
  if (c->coopmat2 && c->bf16) coop2_on.pNext = &bf_on;
  nxv_coopmat_features_khr coop_khr_on = {.sType = NXV_STYPE_COOPMAT_FEATURES_KHR,
                                          .pNext = c->coopmat2 ? (void *)&coop2_on
                                                   : c->bf16   ? (void *)&bf_on
                                                               : NULL,
                                          .cooperativeMatrix = VK_TRUE};
  if (c->coopmat_khr && c->executable_stats) { /* exe_on ends the KHR chain */
    if (c->bf16) bf_on.pNext = &exe_on;
    else if (c->coopmat2) coop2_on.pNext = &exe_on;
    else coop_khr_on.pNext = &exe_on;
  }
  VkPhysicalDeviceVulkan11Features f11 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
      .pNext = c->coopmat_nv         ? (void *)&coop_on
               : c->coopmat_khr      ? (void *)&coop_khr_on
               : c->executable_stats ? (void *)&exe_on
                                     : NULL,
      .storageBuffer16BitAccess = coopmat};
  VkPhysicalDeviceVulkan12Features f12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
      .pNext = &f11,
      .timelineSemaphore = VK_TRUE,
      .bufferDeviceAddress = VK_TRUE,
      .hostQueryReset = have12.hostQueryReset,
      .shaderFloat16 = coopmat,
      .vulkanMemoryModel = coopmat};
  const char *exts[5];
  uint32_t nexts = 0;
  if (c->coopmat_nv) exts[nexts++] = "VK_NV_cooperative_matrix";
  if (c->coopmat_khr) exts[nexts++] = "VK_KHR_cooperative_matrix";
  if (c->coopmat2) exts[nexts++] = "VK_NV_cooperative_matrix2";
  if (c->bf16) exts[nexts++] = "VK_KHR_shader_bfloat16";
  if (c->executable_stats) exts[nexts++] = "VK_KHR_pipeline_executable_properties";
  c->float64 = f2.features.shaderFloat64 == VK_TRUE;
  VkPhysicalDeviceFeatures core = {.shaderFloat64 = f2.features.shaderFloat64};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                            .pNext = &f12,
                            .pEnabledFeatures = &core,
                            .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qi,
                            .enabledExtensionCount = nexts,
                            .ppEnabledExtensionNames = exts};
  RAW_VK(vkCreateDevice(c->pd, &dci, NULL, &c->dev));
  vkGetDeviceQueue(c->dev, c->family, 0, &c->queue);
  c->queue2 = VK_NULL_HANDLE;
  if (nqueues > 1) vkGetDeviceQueue(c->dev, c->family, 1, &c->queue2);
  VkSemaphoreTypeCreateInfo sti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                   .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
  VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &sti};
  RAW_VK(vkCreateSemaphore(c->dev, &sci, NULL, &c->timeline));
  VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                 .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                 .queueFamilyIndex = c->family};
  RAW_VK(vkCreateCommandPool(c->dev, &pci, NULL, &c->pool));
}

void raw_pipeline(const raw_ctx *c, const uint32_t *spv, size_t size, uint32_t pc_size,
                  const VkSpecializationInfo *spec, VkPipelineLayout *out_layout,
                  VkPipeline *out_pipeline) {
  VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, pc_size};
  VkPipelineLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                    .pushConstantRangeCount = 1,
                                    .pPushConstantRanges = &pcr};
  RAW_VK(vkCreatePipelineLayout(c->dev, &lci, NULL, out_layout));
  VkShaderModuleCreateInfo smi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                  .codeSize = size,
                                  .pCode = spv};
  VkShaderModule sm;
  RAW_VK(vkCreateShaderModule(c->dev, &smi, NULL, &sm));
  VkComputePipelineCreateInfo cpi = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = sm,
                .pName = "main",
                .pSpecializationInfo = spec},
      .layout = *out_layout};
  RAW_VK(vkCreateComputePipelines(c->dev, VK_NULL_HANDLE, 1, &cpi, NULL, out_pipeline));
  vkDestroyShaderModule(c->dev, sm, NULL);
}

VkCommandBuffer raw_command_buffer(const raw_ctx *c) {
  VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                    .commandPool = c->pool,
                                    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                    .commandBufferCount = 1};
  VkCommandBuffer cb;
  RAW_VK(vkAllocateCommandBuffers(c->dev, &ai, &cb));
  return cb;
}

uint64_t raw_submit(raw_ctx *c, VkCommandBuffer cb) {
  uint64_t v = ++c->value;
  VkTimelineSemaphoreSubmitInfo ts = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                      .signalSemaphoreValueCount = 1,
                                      .pSignalSemaphoreValues = &v};
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                     .pNext = &ts,
                     .commandBufferCount = 1,
                     .pCommandBuffers = &cb,
                     .signalSemaphoreCount = 1,
                     .pSignalSemaphores = &c->timeline};
  RAW_VK(vkQueueSubmit(c->queue, 1, &si, VK_NULL_HANDLE));
  return v;
}

void raw_wait(raw_ctx *c, uint64_t v, bool blocking) {
  if (blocking) {
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                              .semaphoreCount = 1,
                              .pSemaphores = &c->timeline,
                              .pValues = &v};
    RAW_VK(vkWaitSemaphores(c->dev, &wi, UINT64_MAX));
    return;
  }
  uint64_t seen = 0;
  do RAW_VK(vkGetSemaphoreCounterValue(c->dev, c->timeline, &seen));
  while (seen < v);
}

void raw_submit_wait(raw_ctx *c, VkCommandBuffer cb, bool blocking) {
  raw_wait(c, raw_submit(c, cb), blocking);
}

void raw_copy(raw_ctx *c, VkBuffer from, VkBuffer to, VkDeviceSize size) {
  VkCommandBuffer cb = raw_command_buffer(c);
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  RAW_VK(vkBeginCommandBuffer(cb, &bi));
  VkBufferCopy region = {0, 0, size};
  vkCmdCopyBuffer(cb, from, to, 1, &region);
  RAW_VK(vkEndCommandBuffer(cb));
  raw_submit_wait(c, cb, true);
  vkFreeCommandBuffers(c->dev, c->pool, 1, &cb);
}

void raw_product_bufs_open(raw_ctx *c, VkDeviceSize bytes, raw_product_bufs *out) {
  const VkMemoryPropertyFlags host =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  out->a = raw_buffer(c, bytes, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, host);
  out->b = raw_buffer(c, bytes, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, host);
  out->out = raw_buffer(c, bytes, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, host);
  out->staging = raw_buffer(c, bytes, host, 0);
  RAW_VK(vkMapMemory(c->dev, out->staging.memory, 0, bytes, 0, &out->map));
  out->ha = malloc(bytes);
  out->hb = malloc(bytes);
  if (!out->ha || !out->hb) {
    fprintf(stderr, "%s: cannot allocate 2 x %llu bytes\n", raw_program,
            (unsigned long long)bytes);
    exit(1);
  }
}

void raw_product_upload(raw_ctx *c, raw_product_bufs *b, VkDeviceSize bytes) {
  memcpy(b->map, b->ha, bytes);
  raw_copy(c, b->staging.buffer, b->a.buffer, bytes);
  memcpy(b->map, b->hb, bytes);
  raw_copy(c, b->staging.buffer, b->b.buffer, bytes);
  memset(b->map, 0xff, bytes);
  raw_copy(c, b->staging.buffer, b->out.buffer, bytes);
}

VkQueryPool raw_timestamps(const raw_ctx *c) {
  VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                              .queryType = VK_QUERY_TYPE_TIMESTAMP,
                              .queryCount = 2};
  VkQueryPool queries;
  RAW_VK(vkCreateQueryPool(c->dev, &qi, NULL, &queries));
  return queries;
}

double raw_time_dispatch(raw_ctx *c, VkQueryPool queries, VkPipelineLayout layout,
                         VkPipeline pipeline, const void *pc, uint32_t pc_size, uint32_t gx,
                         uint32_t gy) {
  VkCommandBuffer cb = raw_command_buffer(c);
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  RAW_VK(vkBeginCommandBuffer(cb, &bi));
  vkCmdResetQueryPool(cb, queries, 0, 2);
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
  vkCmdPushConstants(cb, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, pc_size, pc);
  vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries, 0);
  vkCmdDispatch(cb, gx, gy, 1);
  vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 1);
  RAW_VK(vkEndCommandBuffer(cb));
  raw_submit_wait(c, cb, true);
  uint64_t ts[2];
  RAW_VK(vkGetQueryPoolResults(c->dev, queries, 0, 2, sizeof ts, ts, sizeof ts[0],
                               VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
  vkFreeCommandBuffers(c->dev, c->pool, 1, &cb);
  return (double)(ts[1] - ts[0]) * c->props.limits.timestampPeriod / 1e6;
}

bool raw_side_args(int argc, char **argv, uint32_t fallback, uint32_t multiple,
                   uint32_t *out_side, uint32_t *out_index) {
  *out_side = fallback;
  *out_index = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--side") == 0 && i + 1 < argc)
      *out_side = (uint32_t)strtoul(argv[++i], NULL, 10);
    else
      *out_index = (uint32_t)strtoul(argv[i], NULL, 10);
  }
  if (*out_side == 0 || *out_side % multiple != 0) {
    fprintf(stderr, "%s: --side must be a positive multiple of %u\n", raw_program, multiple);
    return false;
  }
  return true;
}
