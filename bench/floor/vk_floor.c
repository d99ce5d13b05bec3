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
 * Then the runtime's read of a small fresh result, piece by piece: each
 * round the host zeroes the result, resets and records (ONE_TIME_SUBMIT)
 * one dispatch writing 42 into it from device memory and a barrier to the
 * host, submits, waits and reads the value; timed from before the
 * recording to the value read (the wait column includes the read):
 *
 *   -> host memory           the result in host memory
 *   -> mapped device memory  in device-local host-visible memory, where the
 *                            runtime keeps small results
 *   + timestamps             a timestamp at the start (top of pipe) and one
 *                            at the end (bottom of pipe), the two queries
 *                            reset from the host, as the runtime's batches
 *   + polling thread         a second thread polls the timeline meanwhile,
 *                            as the runtime's completion thread does
 *   value polled             the host polls the result itself for the
 *                            value instead of the timeline (the timeline is
 *                            waited for afterwards, untimed)
 *   + start / end timestamp only, timestamps at the compute stage, the end
 *                            one before the host barrier: which part of the
 *                            timestamps' cost is which
 *   + a flag ..., + ... end query polled, + an event ...: completion seen
 *                            through something other than the timeline: a
 *                            word filled after a barrier (and made visible
 *                            by a second one), the end timestamp's
 *                            availability (vkGetQueryPoolResults), an event
 *                            set after the host barrier (vkGetEventStatus)
 *
 * and the cost of one vkGetSemaphoreCounterValue call.
 *
 * Last, what recording an op costs the host: 1000 commands of each kind
 * recorded into one command buffer (begun with ONE_TIME_SUBMIT, never
 * submitted), median over REC_REPS command buffers of the time per
 * command: vkCmdDispatch alone (1 workgroup, the pipeline bound once),
 * vkCmdPushConstants alone (8, 24, 56 and 128 bytes), push constants then a
 * dispatch (the runtime's op: 56 bytes), the same with the pipeline bound
 * again before each, 16 per command buffer (its reset, begin and end
 * included, as the runtime's small batches), with a second thread polling
 * the timeline meanwhile, vkCmdPipelineBarrier alone and
 * vkCmdWriteTimestamp alone.
 *
 * Then, on the GPU's clock, how long the GPU idles between two batches
 * queued one behind the other (each GAP_OPS dependent dispatches, a start
 * and an end timestamp): submitted in two calls each signalling the
 * timeline (what the runtime does), the first signalling nothing, both in
 * one call as two VkSubmitInfo or as one VkSubmitInfo of both command
 * buffers, the second starting with a barrier, both halves in one
 * command buffer (the total only, for comparison), and the second half on
 * a second queue of the family waiting for the first's timeline value.
 *
 * Finally, the GPU time of one link of a chain of CHAIN_OPS dependent
 * dispatches in one command buffer (1 and 256 workgroups) by the
 * dependency recorded between them: the runtime's barrier, a narrower
 * memory barrier, an execution dependency alone, an event, two
 * independent dispatches per barrier, none.
 *
 * Usage: build/bench/vk_floor [--compute-only] [device index]   (make vk-floor)
 *   --compute-only  a compute queue family without graphics where the
 *                   device has one (the runtime's choice; by default the
 *                   first family with compute)
 */
#include <pthread.h>
#include <stdatomic.h>
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
  raw_buf mapped;          /* device-local and host-visible, 256 bytes */
  raw_buf src;             /* device-local, 256 bytes of 41.0f */
  volatile float *host_map, *mapped_map; /* host and mapped, mapped */
  VkQueryPool queries;     /* 2 timestamps */
  VkEvent event;           /* set at the end of "event polled" rounds */
  bool host_reset;         /* vkResetQueryPool available */
} ctx;

enum { EMPTY, DISPATCH_HOST, KERNEL_COPY, TRANSFER_COPY };

static void open_ctx(ctx *c, uint32_t index) {
  raw_open(&c->raw, index, RAW_PLAIN);
  raw_pipeline(&c->raw, add_one_spv, sizeof add_one_spv, 24, NULL, &c->layout, &c->pipeline);
  c->local = raw_buffer(&c->raw, 256, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  const VkMemoryPropertyFlags hv =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  c->host = raw_buffer(&c->raw, 256, hv, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  c->mapped = raw_buffer(&c->raw, 256, hv | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  void *p;
  RAW_VK(vkMapMemory(c->raw.dev, c->host.memory, 0, 256, 0, &p));
  c->host_map = p;
  RAW_VK(vkMapMemory(c->raw.dev, c->mapped.memory, 0, 256, 0, &p));
  c->mapped_map = p;
  VkQueryPoolCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                               .queryType = VK_QUERY_TYPE_TIMESTAMP,
                               .queryCount = 2};
  RAW_VK(vkCreateQueryPool(c->raw.dev, &qci, NULL, &c->queries));
  VkEventCreateInfo eci = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO};
  RAW_VK(vkCreateEvent(c->raw.dev, &eci, NULL, &c->event));
  VkPhysicalDeviceVulkan12Features f12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                  .pNext = &f12};
  vkGetPhysicalDeviceFeatures2(c->raw.pd, &f2);
  c->host_reset = f12.hostQueryReset;
  c->src = raw_buffer(&c->raw, 256, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  VkCommandBuffer cb = raw_command_buffer(&c->raw);
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  RAW_VK(vkBeginCommandBuffer(cb, &bi));
  vkCmdFillBuffer(cb, c->src.buffer, 0, 256, 0x42240000u); /* 41.0f */
  RAW_VK(vkEndCommandBuffer(cb));
  raw_submit_wait(&c->raw, cb, true);
  vkFreeCommandBuffers(c->raw.dev, c->raw.pool, 1, &cb);
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

/* One piece of the runtime's small read (see the header). */
enum { TS_NONE, TS_TOP, TS_COMPUTE };                  /* start timestamp */
enum { TE_NONE, TE_BOTTOM, TE_COMPUTE, TE_BEFORE };     /* end timestamp */
enum { W_SEMAPHORE, W_VALUE, W_FLAG, W_QUERY, W_EVENT }; /* what the host polls */
typedef struct piece {
  const char *name;
  bool mapped, poller;
  int ts, te, wait;
} piece;

static atomic_bool poller_run;

/* The second thread of "+ polling thread": polls c's timeline until
 * poller_run clears. */
static void *poller_main(void *arg) {
  const ctx *c = arg;
  while (atomic_load_explicit(&poller_run, memory_order_relaxed)) {
    uint64_t v;
    RAW_VK(vkGetSemaphoreCounterValue(c->raw.dev, c->raw.timeline, &v));
  }
  return NULL;
}

static void end_timestamp(ctx *c, VkCommandBuffer cb, int te) {
  vkCmdWriteTimestamp(cb,
                      te == TE_COMPUTE ? VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
                                       : VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT,
                      c->queries, 1);
}

static floor_row measure_piece(ctx *c, const piece *pc) {
  static double t[REPS], tr[REPS], ts[REPS], tw[REPS];
  VkCommandBuffer cb = raw_command_buffer(&c->raw);
  volatile float *res = pc->mapped ? c->mapped_map : c->host_map;
  volatile uint32_t *flag = (volatile uint32_t *)c->host_map + 32;
  VkDeviceAddress dst = pc->mapped ? c->mapped.addr : c->host.addr;
  pthread_t poller;
  if (pc->poller) {
    atomic_store(&poller_run, true);
    if (pthread_create(&poller, NULL, poller_main, c) != 0) {
      fprintf(stderr, "%s: cannot start the polling thread\n", raw_program);
      exit(1);
    }
  }
  for (int i = 0; i < WARM + REPS; i++) {
    res[0] = 0.0f;
    flag[0] = 0;
    double t0 = raw_now_us();
    RAW_VK(vkResetCommandBuffer(cb, 0));
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    RAW_VK(vkBeginCommandBuffer(cb, &bi));
    if (pc->wait == W_EVENT) RAW_VK(vkResetEvent(c->raw.dev, c->event));
    if (pc->ts || pc->te) {
      if (c->host_reset) vkResetQueryPool(c->raw.dev, c->queries, 0, 2);
      else vkCmdResetQueryPool(cb, c->queries, 0, 2);
    }
    if (pc->ts)
      vkCmdWriteTimestamp(cb,
                          pc->ts == TS_TOP ? VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT
                                           : VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                          c->queries, 0);
    dispatch(c, cb, c->src.addr, dst);
    if (pc->te == TE_BEFORE) end_timestamp(c, cb, pc->te);
    if (pc->wait == W_FLAG) {
      /* The result visible to the host, then the flag written after it. */
      barrier(cb, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
              VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
      vkCmdFillBuffer(cb, c->host.buffer, 128, 4, 1);
    }
    barrier(cb, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    if (pc->te && pc->te != TE_BEFORE) end_timestamp(c, cb, pc->te);
    if (pc->wait == W_EVENT)
      vkCmdSetEvent(cb, c->event,
                    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT);
    RAW_VK(vkEndCommandBuffer(cb));
    double t1 = raw_now_us();
    uint64_t v = raw_submit(&c->raw, cb);
    double t2 = raw_now_us();
    float got;
    if (pc->wait == W_VALUE) {
      while ((got = res[0]) != 42.0f) {
      }
    } else if (pc->wait == W_FLAG) {
      while (flag[0] != 1) {
      }
      got = res[0];
    } else if (pc->wait == W_EVENT) {
      VkResult er;
      while ((er = vkGetEventStatus(c->raw.dev, c->event)) == VK_EVENT_RESET) {
      }
      if (er != VK_EVENT_SET) RAW_VK(er);
      got = res[0];
    } else if (pc->wait == W_QUERY) {
      uint64_t q[2];
      while (vkGetQueryPoolResults(c->raw.dev, c->queries, 1, 1, sizeof q, q, sizeof q,
                                   VK_QUERY_RESULT_64_BIT |
                                       VK_QUERY_RESULT_WITH_AVAILABILITY_BIT) == VK_NOT_READY ||
             q[1] == 0) {
      }
      got = res[0];
    } else {
      raw_wait(&c->raw, v, false);
      got = res[0];
    }
    double t3 = raw_now_us();
    if (pc->wait != W_SEMAPHORE) raw_wait(&c->raw, v, false);
    if (got != 42.0f) {
      fprintf(stderr, "%s: %s read %g, expected 42\n", raw_program, pc->name, (double)got);
      exit(1);
    }
    if (i >= WARM) {
      t[i - WARM] = t3 - t0;
      tr[i - WARM] = t1 - t0;
      ts[i - WARM] = t2 - t1;
      tw[i - WARM] = t3 - t2;
    }
  }
  if (pc->poller) {
    atomic_store(&poller_run, false);
    pthread_join(poller, NULL);
  }
  vkFreeCommandBuffers(c->raw.dev, c->raw.pool, 1, &cb);
  floor_row r = {raw_median(t, REPS), raw_median(tr, REPS), raw_median(ts, REPS),
                 raw_median(tw, REPS)};
  return r;
}

/* Median cost of one vkGetSemaphoreCounterValue call, ns. */
static double counter_cost_ns(ctx *c) {
  static double t[REPS];
  for (int i = 0; i < REPS; i++) {
    double t0 = raw_now_us();
    for (int j = 0; j < 100; j++) {
      uint64_t v;
      RAW_VK(vkGetSemaphoreCounterValue(c->raw.dev, c->raw.timeline, &v));
    }
    t[i] = (raw_now_us() - t0) * 10.0;
  }
  return raw_median(t, REPS);
}

/* Commands recorded per command buffer and command buffers timed by
 * record_cost. */
#define REC_CMDS 1000
#define REC_REPS 50

enum { R_DISPATCH, R_PUSH, R_PUSH_DISPATCH, R_BIND_PUSH_DISPATCH, R_BARRIER, R_TIMESTAMP };

/* Median time to record one command of kind (push constants of pc_bytes
 * through layout), ns: REC_CMDS commands in one command buffer, or with
 * per_buffer > 0 that many per command buffer, the reset, begin, bind and
 * end of each included. With poller, a second thread polls the timeline
 * meanwhile (as the runtime's completion thread does while a batch runs). */
static double record_cost(ctx *c, VkPipelineLayout layout, int kind, uint32_t pc_bytes,
                          int per_buffer, bool poller) {
  static double t[REC_REPS];
  uint8_t pc[128] = {0};
  pthread_t th;
  if (poller) {
    atomic_store(&poller_run, true);
    if (pthread_create(&th, NULL, poller_main, c) != 0) {
      fprintf(stderr, "%s: cannot start the polling thread\n", raw_program);
      exit(1);
    }
  }
  VkCommandBuffer cb = raw_command_buffer(&c->raw);
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  for (int r = 0; r < REC_REPS; r++) {
    RAW_VK(vkResetCommandBuffer(cb, 0));
    RAW_VK(vkBeginCommandBuffer(cb, &bi));
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, c->pipeline);
    if (c->host_reset) vkResetQueryPool(c->raw.dev, c->queries, 0, 2);
    double t0 = raw_now_us();
    for (int i = 0; i < REC_CMDS; i++) {
      if (per_buffer && i && i % per_buffer == 0) {
        RAW_VK(vkEndCommandBuffer(cb));
        RAW_VK(vkResetCommandBuffer(cb, 0));
        RAW_VK(vkBeginCommandBuffer(cb, &bi));
        vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, c->pipeline);
      }
      pc[0] = (uint8_t)i;
      switch (kind) {
        case R_DISPATCH: vkCmdDispatch(cb, 1, 1, 1); break;
        case R_PUSH:
          vkCmdPushConstants(cb, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, pc_bytes, pc);
          break;
        case R_BIND_PUSH_DISPATCH:
          vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, c->pipeline);
          /* fall through */
        case R_PUSH_DISPATCH:
          vkCmdPushConstants(cb, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, pc_bytes, pc);
          vkCmdDispatch(cb, 1, 1, 1);
          break;
        case R_BARRIER: barrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT); break;
        default:
          vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, (uint32_t)i & 1u);
      }
    }
    RAW_VK(vkEndCommandBuffer(cb));
    t[r] = (raw_now_us() - t0) * 1000.0 / REC_CMDS;
  }
  vkFreeCommandBuffers(c->raw.dev, c->raw.pool, 1, &cb);
  if (poller) {
    atomic_store(&poller_run, false);
    pthread_join(th, NULL);
  }
  return raw_median(t, REC_REPS);
}

/* Back-to-back batches: how long the GPU idles between two batches of
 * work queued one behind the other. Each half is GAP_OPS dependent
 * dispatches (a barrier before each but the first), long enough that the
 * second half is queued before the first ends. */
#define GAP_OPS 16
#define GAP_REPS 300
enum {
  G_TWO_SUBMITS,      /* two vkQueueSubmit calls, each signalling */
  G_FIRST_SILENT,     /* two calls, the first signalling nothing */
  G_TWO_INFOS,        /* one call, two VkSubmitInfo, each signalling */
  G_ONE_INFO,         /* one call, one VkSubmitInfo of both buffers */
  G_BARRIER_FIRST,    /* two calls, each signalling, the second buffer
                         starting with a barrier (as a batch reading the
                         previous one's results does) */
  G_ONE_BUFFER,       /* both halves in one command buffer */
  G_TWO_QUEUES        /* the second half on a second queue of the family,
                         waiting for the first's timeline value */
};

/* A measurement's label and the mode its function takes (the gap and
 * chain tables in main). */
typedef struct named_mode {
  const char *name;
  int mode;
} named_mode;

static void gap_half(const ctx *c, VkCommandBuffer cb, bool lead_barrier) {
  for (int i = 0; i < GAP_OPS; i++) {
    if (i || lead_barrier)
      barrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
    dispatch(c, cb, c->local.addr, c->local.addr);
  }
}

/* Submits n command buffers as infos VkSubmitInfos in one call (n / infos
 * buffers each), each info signalling the next timeline value unless
 * silent_first (the first info signals nothing). Returns the last value. */
static uint64_t gap_submit(ctx *c, VkCommandBuffer *cbs, uint32_t n, uint32_t infos,
                           bool silent_first) {
  VkTimelineSemaphoreSubmitInfo ts[2];
  VkSubmitInfo si[2];
  uint64_t vals[2];
  uint32_t per = n / infos;
  for (uint32_t i = 0; i < infos; i++) {
    bool sig = !(silent_first && i == 0);
    vals[i] = sig ? ++c->raw.value : 0;
    ts[i] = (VkTimelineSemaphoreSubmitInfo){
        .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
        .signalSemaphoreValueCount = sig ? 1u : 0u,
        .pSignalSemaphoreValues = &vals[i]};
    si[i] = (VkSubmitInfo){.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                           .pNext = &ts[i],
                           .commandBufferCount = per,
                           .pCommandBuffers = cbs + i * per,
                           .signalSemaphoreCount = sig ? 1u : 0u,
                           .pSignalSemaphores = &c->raw.timeline};
  }
  RAW_VK(vkQueueSubmit(c->raw.queue, infos, si, VK_NULL_HANDLE));
  return c->raw.value;
}

/* Medians over GAP_REPS rounds of mode, us: the GPU idle between the first
 * half's end timestamp and the second's start timestamp (*out_gap; 0 for
 * G_ONE_BUFFER), and the first start to the last end (*out_total). */
static void measure_gap(ctx *c, VkQueryPool qp, int mode, double *out_gap, double *out_total) {
  static double gap[GAP_REPS], tot[GAP_REPS];
  VkCommandBuffer cbs[2] = {raw_command_buffer(&c->raw), raw_command_buffer(&c->raw)};
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT};
  int nbuf = mode == G_ONE_BUFFER ? 1 : 2;
  for (int h = 0; h < nbuf; h++) {
    RAW_VK(vkBeginCommandBuffer(cbs[h], &bi));
    vkCmdWriteTimestamp(cbs[h], VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, qp, 2u * (uint32_t)h);
    gap_half(c, cbs[h], h == 1 && mode == G_BARRIER_FIRST);
    if (mode == G_ONE_BUFFER) gap_half(c, cbs[h], true);
    vkCmdWriteTimestamp(cbs[h], VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp,
                        mode == G_ONE_BUFFER ? 3u : 2u * (uint32_t)h + 1u);
    RAW_VK(vkEndCommandBuffer(cbs[h]));
  }
  double tick_us = c->raw.props.limits.timestampPeriod / 1000.0;
  for (int i = 0; i < WARM / 10 + GAP_REPS; i++) {
    vkResetQueryPool(c->raw.dev, qp, 0, 4);
    uint64_t v;
    switch (mode) {
      case G_ONE_BUFFER: v = raw_submit(&c->raw, cbs[0]); break;
      case G_TWO_INFOS: v = gap_submit(c, cbs, 2, 2, false); break;
      case G_ONE_INFO: v = gap_submit(c, cbs, 2, 1, false); break;
      case G_FIRST_SILENT:
        gap_submit(c, cbs, 1, 1, true);
        v = raw_submit(&c->raw, cbs[1]);
        break;
      case G_TWO_QUEUES: {
        uint64_t first = raw_submit(&c->raw, cbs[0]);
        v = ++c->raw.value;
        const VkPipelineStageFlags stage = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
        VkTimelineSemaphoreSubmitInfo ts = {
            .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
            .waitSemaphoreValueCount = 1,
            .pWaitSemaphoreValues = &first,
            .signalSemaphoreValueCount = 1,
            .pSignalSemaphoreValues = &v};
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                           .pNext = &ts,
                           .waitSemaphoreCount = 1,
                           .pWaitSemaphores = &c->raw.timeline,
                           .pWaitDstStageMask = &stage,
                           .commandBufferCount = 1,
                           .pCommandBuffers = &cbs[1],
                           .signalSemaphoreCount = 1,
                           .pSignalSemaphores = &c->raw.timeline};
        RAW_VK(vkQueueSubmit(c->raw.queue2, 1, &si, VK_NULL_HANDLE));
        break;
      }
      default:
        raw_submit(&c->raw, cbs[0]);
        v = raw_submit(&c->raw, cbs[1]);
    }
    raw_wait(&c->raw, v, false);
    uint64_t q[4] = {0};
    if (mode == G_ONE_BUFFER) {
      RAW_VK(vkGetQueryPoolResults(c->raw.dev, qp, 0, 1, 8, &q[0], 8, VK_QUERY_RESULT_64_BIT));
      RAW_VK(vkGetQueryPoolResults(c->raw.dev, qp, 3, 1, 8, &q[3], 8, VK_QUERY_RESULT_64_BIT));
    } else {
      RAW_VK(vkGetQueryPoolResults(c->raw.dev, qp, 0, 4, sizeof q, q, 8, VK_QUERY_RESULT_64_BIT));
    }
    int k = i - WARM / 10;
    if (k >= 0) {
      gap[k] = mode == G_ONE_BUFFER ? 0.0 : (double)(int64_t)(q[2] - q[1]) * tick_us;
      tot[k] = (double)(int64_t)(q[3] - q[0]) * tick_us;
    }
  }
  vkFreeCommandBuffers(c->raw.dev, c->raw.pool, 2, cbs);
  *out_gap = raw_median(gap, GAP_REPS);
  *out_total = raw_median(tot, GAP_REPS);
}

/* A chain of dependent dispatches in one command buffer by the kind of
 * dependency recorded between them: the GPU time of one link. */
#define CHAIN_OPS 64
#define CHAIN_REPS 200
enum {
  C_RUNTIME,   /* the runtime's global barrier: compute and transfer,
                  writes to reads and writes */
  C_NARROW,    /* compute to compute, shader writes to shader reads */
  C_EXEC,      /* compute to compute, no memory barrier */
  C_EVENT,     /* vkCmdSetEvent after each dispatch, vkCmdWaitEvents with
                  the narrow memory barrier before the next */
  C_NONE,      /* no barrier (independent dispatches: the floor) */
  C_PAIRS      /* two independent dispatches per narrow barrier (per
                  barrier interval) */
};

/* Median over CHAIN_REPS rounds of the GPU time per link (us) of mode,
 * each dispatch over n floats. */
static double measure_chain(ctx *c, VkQueryPool qp, int mode, uint32_t n) {
  static double per[CHAIN_REPS];
  VkEvent ev[CHAIN_OPS];
  VkEventCreateInfo eci = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO};
  if (mode == C_EVENT)
    for (int i = 0; i < CHAIN_OPS; i++) RAW_VK(vkCreateEvent(c->raw.dev, &eci, NULL, &ev[i]));
  raw_buf bufs[2];
  for (int i = 0; i < 2; i++)
    bufs[i] = raw_buffer(&c->raw, (VkDeviceSize)n * 8, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  VkCommandBuffer cb = raw_command_buffer(&c->raw);
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  RAW_VK(vkBeginCommandBuffer(cb, &bi));
  vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, qp, 0);
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, c->pipeline);
  VkMemoryBarrier narrow = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                            .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                            .dstAccessMask = VK_ACCESS_SHADER_READ_BIT};
  const VkPipelineStageFlags cs = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
  for (int i = 0; i < CHAIN_OPS; i++) {
    if (i > 0) switch (mode) {
        case C_RUNTIME: {
          VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT |
                                                 VK_ACCESS_TRANSFER_WRITE_BIT,
                                .dstAccessMask = VK_ACCESS_SHADER_READ_BIT |
                                                 VK_ACCESS_SHADER_WRITE_BIT |
                                                 VK_ACCESS_TRANSFER_READ_BIT |
                                                 VK_ACCESS_TRANSFER_WRITE_BIT};
          VkPipelineStageFlags st = cs | VK_PIPELINE_STAGE_TRANSFER_BIT;
          vkCmdPipelineBarrier(cb, st, st, 0, 1, &mb, 0, NULL, 0, NULL);
          break;
        }
        case C_NARROW:
        case C_PAIRS:
          vkCmdPipelineBarrier(cb, cs, cs, 0, 1, &narrow, 0, NULL, 0, NULL);
          break;
        case C_EXEC:
          vkCmdPipelineBarrier(cb, cs, cs, 0, 0, NULL, 0, NULL, 0, NULL);
          break;
        case C_EVENT:
          vkCmdWaitEvents(cb, 1, &ev[i - 1], cs, cs, 1, &narrow, 0, NULL, 0, NULL);
          break;
        default:
          break;
      }
    /* Even links read buffer 0 and write 1, odd ones the reverse; a pair's
     * second dispatch writes the upper half of its target. */
    VkDeviceAddress from = bufs[i & 1].addr, to = bufs[(i + 1) & 1].addr;
    uint64_t pc[3] = {from, to, n};
    vkCmdPushConstants(cb, c->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 24, pc);
    vkCmdDispatch(cb, (n + 63) / 64, 1, 1);
    if (mode == C_PAIRS) {
      uint64_t pc2[3] = {from, to + (VkDeviceAddress)n * 4, n};
      vkCmdPushConstants(cb, c->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 24, pc2);
      vkCmdDispatch(cb, (n + 63) / 64, 1, 1);
    }
    if (mode == C_EVENT) vkCmdSetEvent(cb, ev[i], cs);
  }
  vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 1);
  RAW_VK(vkEndCommandBuffer(cb));
  double tick_us = c->raw.props.limits.timestampPeriod / 1000.0;
  for (int i = 0; i < WARM / 10 + CHAIN_REPS; i++) {
    vkResetQueryPool(c->raw.dev, qp, 0, 2);
    if (mode == C_EVENT)
      for (int e = 0; e < CHAIN_OPS; e++) RAW_VK(vkResetEvent(c->raw.dev, ev[e]));
    raw_submit_wait(&c->raw, cb, false);
    uint64_t q[2] = {0};
    RAW_VK(vkGetQueryPoolResults(c->raw.dev, qp, 0, 2, sizeof q, q, 8, VK_QUERY_RESULT_64_BIT));
    int k = i - WARM / 10;
    if (k >= 0) per[k] = (double)(int64_t)(q[1] - q[0]) * tick_us / CHAIN_OPS;
  }
  vkFreeCommandBuffers(c->raw.dev, c->raw.pool, 1, &cb);
  for (int i = 0; i < 2; i++) {
    vkDestroyBuffer(c->raw.dev, bufs[i].buffer, NULL);
    vkFreeMemory(c->raw.dev, bufs[i].memory, NULL);
  }
  if (mode == C_EVENT)
    for (int i = 0; i < CHAIN_OPS; i++) vkDestroyEvent(c->raw.dev, ev[i], NULL);
  return raw_median(per, CHAIN_REPS);
}

int main(int argc, char **argv) {
  ctx c = {0};
  uint32_t index = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--compute-only")) raw_compute_only = true;
    else index = (uint32_t)strtoul(argv[i], NULL, 10);
  }
  open_ctx(&c, index);
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
  static const piece pieces[] = {
      {"-> host memory", false, false, TS_NONE, TE_NONE, W_SEMAPHORE},
      {"-> mapped device memory", true, false, TS_NONE, TE_NONE, W_SEMAPHORE},
      {"-> mapped device memory + timestamps", true, false, TS_TOP, TE_BOTTOM, W_SEMAPHORE},
      {"-> mapped device memory + polling thread", true, true, TS_NONE, TE_NONE, W_SEMAPHORE},
      {"-> mapped device memory + both (the runtime)", true, true, TS_TOP, TE_BOTTOM,
       W_SEMAPHORE},
      {"-> host memory, value polled", false, false, TS_NONE, TE_NONE, W_VALUE},
      {"-> mapped device memory, value polled", true, false, TS_NONE, TE_NONE, W_VALUE},
      {"   + start timestamp only (top of pipe)", true, false, TS_TOP, TE_NONE, W_SEMAPHORE},
      {"   + end timestamp only (bottom of pipe)", true, false, TS_NONE, TE_BOTTOM, W_SEMAPHORE},
      {"   + timestamps at the compute stage", true, false, TS_COMPUTE, TE_COMPUTE, W_SEMAPHORE},
      {"   + timestamps, the end before the barrier", true, false, TS_TOP, TE_BEFORE,
       W_SEMAPHORE},
      {"   + a flag written after it, flag polled", true, false, TS_NONE, TE_NONE, W_FLAG},
      {"   + timestamps, end query polled", true, false, TS_TOP, TE_BOTTOM, W_QUERY},
      {"   + an event set after it, event polled", true, false, TS_NONE, TE_NONE, W_EVENT},
      {"   + timestamps, event polled", true, false, TS_TOP, TE_BOTTOM, W_EVENT},
      {"   + timestamps and polling thread, event polled", true, true, TS_TOP, TE_BOTTOM,
       W_EVENT},
  };
  printf("\nsmall read, re-recorded (median of 3000), us      %8s %8s %8s %8s\n", "total",
         "record", "submit", "wait");
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
      floor_row r = measure_piece(&c, &pieces[i]);
      printf("%-48s %8.2f %8.2f %8.2f %8.2f\n", pieces[i].name, r.total, r.record, r.submit,
             r.wait);
    }
  printf("vkGetSemaphoreCounterValue: %.1f ns per call\n", counter_cost_ns(&c));
  /* A layout with 128 bytes of push constants for the same pipeline's
   * shader (its block is 24 bytes). */
  VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 128};
  VkPipelineLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                    .pushConstantRangeCount = 1,
                                    .pPushConstantRanges = &pcr};
  VkPipelineLayout wide;
  RAW_VK(vkCreatePipelineLayout(c.raw.dev, &lci, NULL, &wide));
  static const struct {
    const char *name;
    int kind;
    uint32_t bytes;
    int per_buffer;
    bool poller;
  } recs[] = {
      {"vkCmdDispatch", R_DISPATCH, 0, 0, false},
      {"vkCmdPushConstants, 8 bytes", R_PUSH, 8, 0, false},
      {"vkCmdPushConstants, 24 bytes", R_PUSH, 24, 0, false},
      {"vkCmdPushConstants, 56 bytes", R_PUSH, 56, 0, false},
      {"vkCmdPushConstants, 128 bytes", R_PUSH, 128, 0, false},
      {"push constants (8 bytes) + dispatch", R_PUSH_DISPATCH, 8, 0, false},
      {"push constants (56 bytes) + dispatch", R_PUSH_DISPATCH, 56, 0, false},
      {"bind + push constants (56 bytes) + dispatch", R_BIND_PUSH_DISPATCH, 56, 0, false},
      {"push (56) + dispatch, 16 per command buffer", R_PUSH_DISPATCH, 56, 16, false},
      {"push (56) + dispatch, timeline polled meanwhile", R_PUSH_DISPATCH, 56, 0, true},
      {"vkCmdPipelineBarrier", R_BARRIER, 0, 0, false},
      {"vkCmdWriteTimestamp", R_TIMESTAMP, 0, 0, false},
  };
  printf("\nrecording, ns per command (median of %d buffers of %d)\n", REC_REPS, REC_CMDS);
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = 0; i < sizeof recs / sizeof recs[0]; i++)
      printf("%-48s %8.1f\n", recs[i].name,
             record_cost(&c, recs[i].bytes > 24 ? wide : c.layout, recs[i].kind, recs[i].bytes,
                         recs[i].per_buffer, recs[i].poller));
  vkDestroyPipelineLayout(c.raw.dev, wide, NULL);
  if (c.host_reset) {
    VkQueryPoolCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                 .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                 .queryCount = 4};
    VkQueryPool qp;
    RAW_VK(vkCreateQueryPool(c.raw.dev, &qci, NULL, &qp));
    static const named_mode gaps[] = {
        {"two submissions, each signalling", G_TWO_SUBMITS},
        {"two submissions, the first signalling nothing", G_FIRST_SILENT},
        {"one submission, two VkSubmitInfo", G_TWO_INFOS},
        {"one submission, one VkSubmitInfo of both", G_ONE_INFO},
        {"two submissions, the second starting with a barrier", G_BARRIER_FIRST},
        {"one command buffer (a barrier between the halves)", G_ONE_BUFFER},
        {"two queues, the second waiting for the first", G_TWO_QUEUES},
    };
    printf("\nback-to-back batches of %d dependent dispatches each, GPU time "
           "(median of %d), us   gap    total\n", GAP_OPS, GAP_REPS);
    for (int pass = 0; pass < 2; pass++)
      for (size_t i = 0; i < sizeof gaps / sizeof gaps[0]; i++) {
        if (gaps[i].mode == G_TWO_QUEUES && !c.raw.queue2) continue;
        double g, t;
        measure_gap(&c, qp, gaps[i].mode, &g, &t);
        printf("%-56s %8.2f %8.2f\n", gaps[i].name, g, t);
      }
    static const named_mode chains[] = {
        {"the runtime's barrier", C_RUNTIME},
        {"compute to compute, shader write to read", C_NARROW},
        {"execution dependency only", C_EXEC},
        {"an event set after, waited for before", C_EVENT},
        {"two independent dispatches per barrier", C_PAIRS},
        {"no barrier (independent)", C_NONE},
    };
    printf("\n%d dependent dispatches in one command buffer, GPU us per link "
           "(median of %d)       1 WG  256 WGs\n", CHAIN_OPS, CHAIN_REPS);
    for (int pass = 0; pass < 2; pass++)
      for (size_t i = 0; i < sizeof chains / sizeof chains[0]; i++)
        printf("%-56s %8.2f %8.2f\n", chains[i].name, measure_chain(&c, qp, chains[i].mode, 64),
               measure_chain(&c, qp, chains[i].mode, 16384));
    vkDestroyQueryPool(c.raw.dev, qp, NULL);
  }
  RAW_VK(vkDeviceWaitIdle(c.raw.dev));
  return 0;
}
