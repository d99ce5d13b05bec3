/*
 * vk_f32split.c - f32 matrix products on bf16 tensor cores, each operand
 * split into three bfloat16 terms and six partial products kept
 * (split_gemm.comp), in raw Vulkan with no runtime: whether emulating f32
 * this way beats the runtime's f32 kernel (gemm.comp, FMA units) on speed,
 * and how far its results are from f32's.
 *
 * The product of two random side x side f32 matrices (uniform in [-1, 1),
 * full 24-bit significands), one dispatch per timing, timestamps around
 * it; TFLOP/s counted as f32 FLOPs (2 side^3), best and median of REPS
 * after one untimed. At 64 entries the result is compared with a
 * double-precision reference, and so is the same dot product accumulated
 * in f32 by the host (fmaf, in k order): the largest error of each,
 * relative to the sum of |a_i b_i|. The program fails when the split
 * product's error passes 1e-4 of it (a wrong kernel, not rounding: bf16
 * alone would give ~4e-3). Skipped without bfloat16 cooperative matrices
 * (VK_KHR_cooperative_matrix with VK_KHR_shader_bfloat16).
 *
 * Usage: build/bench/vk_f32split [--side N] [device index]   (make bench)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "split_gemm.h" /* split_gemm_spv */
#include "vk_raw.h"

#define REPS 7
#define CHECKS 64
#define TILE 128u

const char *raw_program = "vk_f32split";

typedef struct pcs {
  VkDeviceAddress a, b, c;
  uint32_t m, n, k;
  uint32_t pad;
} pcs;

static void copy(raw_ctx *c, VkBuffer from, VkBuffer to, VkDeviceSize size) {
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

/* GPU milliseconds of one dispatch over side x side. */
static double run_once(raw_ctx *c, VkQueryPool queries, VkPipelineLayout layout,
                       VkPipeline pipeline, const pcs *pc, uint32_t side) {
  VkCommandBuffer cb = raw_command_buffer(c);
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  RAW_VK(vkBeginCommandBuffer(cb, &bi));
  vkCmdResetQueryPool(cb, queries, 0, 2);
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
  vkCmdPushConstants(cb, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof *pc, pc);
  vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries, 0);
  vkCmdDispatch(cb, side / TILE, side / TILE, 1);
  vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 1);
  RAW_VK(vkEndCommandBuffer(cb));
  raw_submit_wait(c, cb, true);
  uint64_t ts[2];
  RAW_VK(vkGetQueryPoolResults(c->dev, queries, 0, 2, sizeof ts, ts, sizeof ts[0],
                               VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
  vkFreeCommandBuffers(c->dev, c->pool, 1, &cb);
  return (double)(ts[1] - ts[0]) * c->props.limits.timestampPeriod / 1e6;
}

int main(int argc, char **argv) {
  uint32_t side = 4096, index = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--side") == 0 && i + 1 < argc)
      side = (uint32_t)strtoul(argv[++i], NULL, 10);
    else
      index = (uint32_t)strtoul(argv[i], NULL, 10);
  }
  if (side == 0 || side % TILE != 0) {
    fprintf(stderr, "%s: --side must be a positive multiple of %u\n", raw_program, TILE);
    return 2;
  }
  raw_ctx c = {0};
  raw_open(&c, index, RAW_COOPMAT_KHR);
  if (!c.bf16) {
    printf("skipped: no bfloat16 cooperative matrices (VK_KHR_shader_bfloat16)\n");
    raw_close(&c);
    return 0;
  }
  size_t elems = (size_t)side * side;
  VkDeviceSize bytes = elems * sizeof(float);
  const VkMemoryPropertyFlags host =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  raw_buf a = raw_buffer(&c, bytes, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, host);
  raw_buf b = raw_buffer(&c, bytes, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, host);
  raw_buf out = raw_buffer(&c, bytes, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, host);
  raw_buf staging = raw_buffer(&c, bytes, host, 0);
  float *map;
  RAW_VK(vkMapMemory(c.dev, staging.memory, 0, bytes, 0, (void **)&map));
  float *ha = malloc(bytes), *hb = malloc(bytes);
  if (!ha || !hb) return 1;
  srand(1);
  for (size_t i = 0; i < elems; i++) ha[i] = (float)(2.0 * rand() / ((double)RAND_MAX + 1) - 1.0);
  for (size_t i = 0; i < elems; i++) hb[i] = (float)(2.0 * rand() / ((double)RAND_MAX + 1) - 1.0);
  memcpy(map, ha, bytes);
  copy(&c, staging.buffer, a.buffer, bytes);
  memcpy(map, hb, bytes);
  copy(&c, staging.buffer, b.buffer, bytes);
  memset(map, 0xff, bytes); /* poison the result */
  copy(&c, staging.buffer, out.buffer, bytes);

  VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                              .queryType = VK_QUERY_TYPE_TIMESTAMP,
                              .queryCount = 2};
  VkQueryPool queries;
  RAW_VK(vkCreateQueryPool(c.dev, &qi, NULL, &queries));
  VkPipelineLayout layout;
  VkPipeline pipeline;
  pcs pc = {a.addr, b.addr, out.addr, side, side, side, 0};
  raw_pipeline(&c, split_gemm_spv, sizeof split_gemm_spv, sizeof pc, NULL, &layout, &pipeline);
  double t[REPS];
  (void)run_once(&c, queries, layout, pipeline, &pc, side);
  for (int r = 0; r < REPS; r++) t[r] = run_once(&c, queries, layout, pipeline, &pc, side);
  double med = raw_median(t, REPS), best = t[0];
  double flops = 2.0 * side * side * (double)side;

  copy(&c, out.buffer, staging.buffer, bytes);
  double worst_gpu = 0, worst_f32 = 0;
  for (uint32_t s = 0; s < CHECKS; s++) {
    uint32_t i = (uint32_t)(((uint64_t)s * 2654435761u) % side);
    uint32_t j = (uint32_t)(((uint64_t)s * 40503u + 17u) % side);
    double ref = 0, scale = 0;
    float f32 = 0;
    for (uint32_t p = 0; p < side; p++) {
      double x = ha[(size_t)i * side + p], y = hb[(size_t)p * side + j];
      ref += x * y;
      scale += fabs(x * y);
      f32 = fmaf((float)x, (float)y, f32);
    }
    double eg = fabs(map[(size_t)i * side + j] - ref) / scale;
    double ef = fabs(f32 - ref) / scale;
    if (!(eg <= worst_gpu)) worst_gpu = eg; /* NaN sticks */
    if (ef > worst_f32) worst_f32 = ef;
  }
  bool ok = worst_gpu <= 1e-4;
  printf("f32 as 3 x bf16, 6 products, %ux%u tiles: %.1f TFLOP/s best, %.1f median (%.3f ms)\n",
         TILE, TILE, flops / (best * 1e9), flops / (med * 1e9), med);
  printf("error / sum |a b| at %d entries: split %.3g, host f32 fma chain %.3g (%.1fx): %s\n",
         CHECKS, worst_gpu, worst_f32, worst_f32 > 0 ? worst_gpu / worst_f32 : 0.0,
         ok ? "ok" : "FAIL");
  vkDestroyPipeline(c.dev, pipeline, NULL);
  vkDestroyPipelineLayout(c.dev, layout, NULL);
  vkDestroyQueryPool(c.dev, queries, NULL);
  free(ha);
  free(hb);
  raw_close(&c);
  return ok ? 0 : 1;
}
