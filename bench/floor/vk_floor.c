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
 *                            inside the timed region, as a runtime must;
 *                            the columns after the total split it into
 *                            recording (reset to end), the vkQueueSubmit
 *                            call and the wait for the signal (medians of
 *                            each, so they need not add up exactly)
 *   ... one-time submit      recorded with ONE_TIME_SUBMIT instead of
 *                            SIMULTANEOUS_USE (what the runtime records)
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
  raw_open(&c->raw, index, RAW_PLAIN);
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

static void record(const ctx *c, VkCommandBuffer cb, int kind, bool one_time) {
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = one_time ? VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT
                                                   : VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT};
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

/* Medians of a row's round trips and, when re-recorded, of their parts. */
typedef struct floor_row {
  double total, record, submit, wait;
} floor_row;

/* Round trips of kind; rerecord: reset and record inside the timing
 * (one_time: with ONE_TIME_SUBMIT). */
static floor_row measure(ctx *c, int kind, bool blocking, bool rerecord, bool one_time) {
  static double t[REPS], tr[REPS], ts[REPS], tw[REPS];
  VkCommandBuffer cb = raw_command_buffer(&c->raw);
  if (!rerecord) record(c, cb, kind, one_time);
  for (int i = 0; i < WARM + REPS; i++) {
    double t0 = raw_now_us();
    if (rerecord) {
      RAW_VK(vkResetCommandBuffer(cb, 0));
      record(c, cb, kind, one_time);
    }
    double t1 = raw_now_us();
    uint64_t v = raw_submit(&c->raw, cb);
    double t2 = raw_now_us();
    raw_wait(&c->raw, v, blocking);
    double t3 = raw_now_us();
    if (i >= WARM) {
      t[i - WARM] = t3 - t0;
      tr[i - WARM] = t1 - t0;
      ts[i - WARM] = t2 - t1;
      tw[i - WARM] = t3 - t2;
    }
  }
  vkFreeCommandBuffers(c->raw.dev, c->raw.pool, 1, &cb);
  floor_row r = {raw_median(t, REPS), raw_median(tr, REPS), raw_median(ts, REPS),
                 raw_median(tw, REPS)};
  return r;
}

int main(int argc, char **argv) {
  ctx c = {0};
  open_ctx(&c, argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 0);
  static const struct {
    const char *name;
    int kind, blocking, rerecord, one_time;
  } rows[] = {
      {"empty", EMPTY, 0, 0, 0},
      {"empty, vkWaitSemaphores", EMPTY, 1, 0, 0},
      {"dispatch -> host", DISPATCH_HOST, 0, 0, 0},
      {"dispatch + kernel copy", KERNEL_COPY, 0, 0, 0},
      {"dispatch + transfer copy", TRANSFER_COPY, 0, 0, 0},
      {"dispatch -> host, re-recorded", DISPATCH_HOST, 0, 1, 0},
      {"dispatch -> host, re-recorded, one-time submit", DISPATCH_HOST, 0, 1, 1},
      {"dispatch + kernel copy, re-recorded", KERNEL_COPY, 0, 1, 0},
      {"dispatch + transfer copy, re-recorded", TRANSFER_COPY, 0, 1, 0},
  };
  printf("%-48s %8s %8s %8s %8s\n", "round trip (median of 3000), us", "total", "record",
         "submit", "wait");
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    floor_row r = measure(&c, rows[i].kind, rows[i].blocking, rows[i].rerecord,
                          rows[i].one_time);
    if (rows[i].rerecord)
      printf("%-48s %8.2f %8.2f %8.2f %8.2f\n", rows[i].name, r.total, r.record, r.submit,
             r.wait);
    else
      printf("%-48s %8.2f %8s %8.2f %8.2f\n", rows[i].name, r.total, "-", r.submit, r.wait);
  }
  RAW_VK(vkDeviceWaitIdle(c.raw.dev));
  return 0;
}
