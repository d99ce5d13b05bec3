/*
 * vk_floor.c - what one round trip costs in raw Vulkan, with no runtime:
 * the floor under nxv_bench's to_number and submit_wait figures.
 *
 * One compute queue, one timeline semaphore, the host busy-polling
 * vkGetSemaphoreCounterValue (or blocking in vkWaitSemaphores where said).
 * Each figure is the median of REPS round trips, each timed alone from
 * before vkQueueSubmit to the signal seen, after WARM untimed ones:
 *
 *   empty                    an empty command buffer
 *   empty, vkWaitSemaphores  the same, the host blocking instead of polling
 *   dispatch -> host         one 1-element dispatch writing host memory
 *   dispatch + kernel copy   a dispatch into device memory, barrier, a
 *                            second dispatch copying it to host memory
 *   dispatch + transfer copy the same with vkCmdCopyBuffer as the copy
 *   ... re-recorded          the command buffer reset, recorded and ended
 *                            inside the timed region, as a runtime must
 *
 * Usage: build/bench/vk_floor [device index]   (make vk-floor)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vulkan/vulkan.h>

#include "add_one.h" /* add_one_spv: compiled from add_one.comp */

#define REPS 3000
#define WARM 300

#define VK(call)                                                         \
  do {                                                                   \
    VkResult r_ = (call);                                                \
    if (r_ != VK_SUCCESS) {                                              \
      fprintf(stderr, "vk_floor: %s failed: VkResult %d\n", #call, r_);  \
      exit(1);                                                           \
    }                                                                    \
  } while (0)

typedef struct buf {
  VkBuffer buffer;
  VkDeviceMemory memory;
  VkDeviceAddress addr;
} buf;

typedef struct ctx {
  VkPhysicalDevice pd;
  VkDevice dev;
  VkQueue queue;
  VkSemaphore timeline;
  uint64_t value;          /* last value signalled */
  VkCommandPool pool;
  VkPipelineLayout layout;
  VkPipeline pipeline;
  buf local, host;         /* device-local and host-visible, 256 bytes */
} ctx;

enum { EMPTY, DISPATCH_HOST, KERNEL_COPY, TRANSFER_COPY };

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v) {
  qsort(v, REPS, sizeof *v, cmp_double);
  return v[REPS / 2];
}

static uint32_t memory_type(const ctx *c, uint32_t bits, VkMemoryPropertyFlags need,
                            VkMemoryPropertyFlags avoid) {
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(c->pd, &mp);
  for (int pass = 0; pass < 2; pass++)
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
      VkMemoryPropertyFlags f = mp.memoryTypes[i].propertyFlags;
      if ((bits >> i & 1u) && (f & need) == need && (pass == 1 || !(f & avoid))) return i;
    }
  fprintf(stderr, "vk_floor: no memory type with flags 0x%x\n", (unsigned)need);
  exit(1);
}

static buf make_buf(const ctx *c, VkMemoryPropertyFlags need, VkMemoryPropertyFlags avoid) {
  buf b;
  VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                           .size = 256,
                           .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                    VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                    VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                                    VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT};
  VK(vkCreateBuffer(c->dev, &bi, NULL, &b.buffer));
  VkMemoryRequirements mr;
  vkGetBufferMemoryRequirements(c->dev, b.buffer, &mr);
  VkMemoryAllocateFlagsInfo fi = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                  .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
  VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                             .pNext = &fi,
                             .allocationSize = mr.size,
                             .memoryTypeIndex = memory_type(c, mr.memoryTypeBits, need, avoid)};
  VK(vkAllocateMemory(c->dev, &ai, NULL, &b.memory));
  VK(vkBindBufferMemory(c->dev, b.buffer, b.memory, 0));
  VkBufferDeviceAddressInfo di = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO,
                                  .buffer = b.buffer};
  b.addr = vkGetBufferDeviceAddress(c->dev, &di);
  return b;
}

static void open_ctx(ctx *c, uint32_t index) {
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "vk_floor",
                           .apiVersion = VK_API_VERSION_1_3};
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                              .pApplicationInfo = &app};
  VkInstance inst;
  VK(vkCreateInstance(&ici, NULL, &inst));
  uint32_t n = 0;
  VK(vkEnumeratePhysicalDevices(inst, &n, NULL));
  VkPhysicalDevice *pds = calloc(n ? n : 1, sizeof *pds);
  VK(vkEnumeratePhysicalDevices(inst, &n, pds));
  if (index >= n) {
    fprintf(stderr, "vk_floor: no device %u (%u present)\n", index, n);
    exit(1);
  }
  c->pd = pds[index];
  free(pds);
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(c->pd, &props);
  printf("device %u: %s\n", index, props.deviceName);
  uint32_t nf = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(c->pd, &nf, NULL);
  VkQueueFamilyProperties *qf = calloc(nf ? nf : 1, sizeof *qf);
  vkGetPhysicalDeviceQueueFamilyProperties(c->pd, &nf, qf);
  uint32_t fam = UINT32_MAX;
  for (uint32_t i = 0; i < nf && fam == UINT32_MAX; i++)
    if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) fam = i;
  free(qf);
  if (fam == UINT32_MAX) {
    fprintf(stderr, "vk_floor: no compute queue\n");
    exit(1);
  }
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                .queueFamilyIndex = fam,
                                .queueCount = 1,
                                .pQueuePriorities = &prio};
  VkPhysicalDeviceVulkan12Features f12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
      .timelineSemaphore = VK_TRUE,
      .bufferDeviceAddress = VK_TRUE};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                            .pNext = &f12,
                            .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qi};
  VK(vkCreateDevice(c->pd, &dci, NULL, &c->dev));
  vkGetDeviceQueue(c->dev, fam, 0, &c->queue);
  VkSemaphoreTypeCreateInfo sti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                   .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
  VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &sti};
  VK(vkCreateSemaphore(c->dev, &sci, NULL, &c->timeline));
  VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                 .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                 .queueFamilyIndex = fam};
  VK(vkCreateCommandPool(c->dev, &pci, NULL, &c->pool));
  VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 24};
  VkPipelineLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                    .pushConstantRangeCount = 1,
                                    .pPushConstantRanges = &pcr};
  VK(vkCreatePipelineLayout(c->dev, &lci, NULL, &c->layout));
  VkShaderModuleCreateInfo smi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                  .codeSize = sizeof add_one_spv,
                                  .pCode = add_one_spv};
  VkShaderModule sm;
  VK(vkCreateShaderModule(c->dev, &smi, NULL, &sm));
  VkComputePipelineCreateInfo cpi = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = sm,
                .pName = "main"},
      .layout = c->layout};
  VK(vkCreateComputePipelines(c->dev, VK_NULL_HANDLE, 1, &cpi, NULL, &c->pipeline));
  vkDestroyShaderModule(c->dev, sm, NULL);
  c->local = make_buf(c, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  c->host = make_buf(c, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                     VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
}

static void dispatch(const ctx *c, VkCommandBuffer cb, VkDeviceAddress src, VkDeviceAddress dst) {
  struct {
    VkDeviceAddress src, dst;
    uint32_t n, pad;
  } pc = {src, dst, 1, 0};
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, c->pipeline);
  vkCmdPushConstants(cb, c->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 24, &pc);
  vkCmdDispatch(cb, 1, 1, 1);
}

static void barrier(VkCommandBuffer cb, VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                        .dstAccessMask = dst_access};
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       dst_stage, 0, 1, &mb, 0, NULL, 0, NULL);
}

static void record(const ctx *c, VkCommandBuffer cb, int kind) {
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT};
  VK(vkBeginCommandBuffer(cb, &bi));
  VkBufferCopy region = {0, 0, 4};
  switch (kind) {
    case DISPATCH_HOST:
      dispatch(c, cb, c->local.addr, c->host.addr);
      break;
    case KERNEL_COPY:
      dispatch(c, cb, c->local.addr, c->local.addr);
      barrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
      dispatch(c, cb, c->local.addr, c->host.addr);
      break;
    case TRANSFER_COPY:
      dispatch(c, cb, c->local.addr, c->local.addr);
      barrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT);
      vkCmdCopyBuffer(cb, c->local.buffer, c->host.buffer, 1, &region);
      break;
    default:
      break;
  }
  if (kind != EMPTY) barrier(cb, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
  VK(vkEndCommandBuffer(cb));
}

/* Submits cb signalling the next timeline value and waits for it. */
static void round_trip(ctx *c, VkCommandBuffer cb, int blocking) {
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
  VK(vkQueueSubmit(c->queue, 1, &si, VK_NULL_HANDLE));
  if (blocking) {
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                              .semaphoreCount = 1,
                              .pSemaphores = &c->timeline,
                              .pValues = &v};
    VK(vkWaitSemaphores(c->dev, &wi, UINT64_MAX));
    return;
  }
  uint64_t seen = 0;
  do VK(vkGetSemaphoreCounterValue(c->dev, c->timeline, &seen));
  while (seen < v);
}

/* Median round trip of kind; rerecord: reset and record inside the timing. */
static double measure(ctx *c, int kind, int blocking, int rerecord) {
  static double t[REPS];
  VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                    .commandPool = c->pool,
                                    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                    .commandBufferCount = 1};
  VkCommandBuffer cb;
  VK(vkAllocateCommandBuffers(c->dev, &ai, &cb));
  if (!rerecord) record(c, cb, kind);
  for (int i = 0; i < WARM + REPS; i++) {
    double t0 = now_us();
    if (rerecord) {
      VK(vkResetCommandBuffer(cb, 0));
      record(c, cb, kind);
    }
    round_trip(c, cb, blocking);
    if (i >= WARM) t[i - WARM] = now_us() - t0;
  }
  vkFreeCommandBuffers(c->dev, c->pool, 1, &cb);
  return median(t);
}

int main(int argc, char **argv) {
  ctx c = {0};
  open_ctx(&c, argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 0);
  static const struct {
    const char *name;
    int kind, blocking, rerecord;
  } rows[] = {
      {"empty", EMPTY, 0, 0},
      {"empty, vkWaitSemaphores", EMPTY, 1, 0},
      {"dispatch -> host", DISPATCH_HOST, 0, 0},
      {"dispatch + kernel copy", KERNEL_COPY, 0, 0},
      {"dispatch + transfer copy", TRANSFER_COPY, 0, 0},
      {"dispatch + kernel copy, re-recorded", KERNEL_COPY, 0, 1},
      {"dispatch + transfer copy, re-recorded", TRANSFER_COPY, 0, 1},
  };
  printf("%-40s %10s\n", "round trip (median of 3000)", "us");
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    printf("%-40s %10.2f\n", rows[i].name,
           measure(&c, rows[i].kind, rows[i].blocking, rows[i].rerecord));
  VK(vkDeviceWaitIdle(c.dev));
  return 0;
}
