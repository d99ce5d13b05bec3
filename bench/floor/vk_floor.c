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

#include "add_one.h" /* add_one_spv: compiled from add_one.comp */
#include "vk_raw.h"

#define REPS 3000
#define WARM 300

const char *raw_program = "vk_floor";

typedef struct ctx {
  raw_ctx raw;
  VkPipelineLayout layout;
  VkPipeline pipeline;
  raw_buf local, host;     /* device-local and host-visible, 256 bytes */
} ctx;

enum { EMPTY, DISPATCH_HOST, KERNEL_COPY, TRANSFER_COPY };

static void open_ctx(ctx *c, uint32_t index) {
  raw_open(&c->raw, index, false);
  raw_pipeline(&c->raw, add_one_spv, sizeof add_one_spv, 24, NULL, &c->layout, &c->pipeline);
  c->local = raw_buffer(&c->raw, 256, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  c->host = raw_buffer(&c->raw, 256,
                       VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
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
  RAW_VK(vkBeginCommandBuffer(cb, &bi));
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
  RAW_VK(vkEndCommandBuffer(cb));
}

/* Median round trip of kind; rerecord: reset and record inside the timing. */
static double measure(ctx *c, int kind, bool blocking, bool rerecord) {
  static double t[REPS];
  VkCommandBuffer cb = raw_command_buffer(&c->raw);
  if (!rerecord) record(c, cb, kind);
  for (int i = 0; i < WARM + REPS; i++) {
    double t0 = raw_now_us();
    if (rerecord) {
      RAW_VK(vkResetCommandBuffer(cb, 0));
      record(c, cb, kind);
    }
    raw_submit_wait(&c->raw, cb, blocking);
    if (i >= WARM) t[i - WARM] = raw_now_us() - t0;
  }
  vkFreeCommandBuffers(c->raw.dev, c->raw.pool, 1, &cb);
  return raw_median(t, REPS);
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
  RAW_VK(vkDeviceWaitIdle(c.raw.dev));
  return 0;
}
