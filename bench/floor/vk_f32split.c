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

int main(int argc, char **argv) {
  uint32_t side, index;
  if (!raw_side_args(argc, argv, 4096, TILE, &side, &index)) return 2;
  raw_ctx c = {0};
  raw_open(&c, index, RAW_COOPMAT_KHR);
  if (!c.bf16) {
    printf("skipped: no bfloat16 cooperative matrices (VK_KHR_shader_bfloat16)\n");
    raw_close(&c);
    return 0;
  }
  size_t elems = (size_t)side * side;
  VkDeviceSize bytes = elems * sizeof(float);
  raw_product_bufs bufs;
  raw_product_bufs_open(&c, bytes, &bufs);
  float *map = bufs.map;
  float *ha = bufs.ha, *hb = bufs.hb;
  srand(1);
  for (size_t i = 0; i < elems; i++) ha[i] = (float)(2.0 * rand() / ((double)RAND_MAX + 1) - 1.0);
  for (size_t i = 0; i < elems; i++) hb[i] = (float)(2.0 * rand() / ((double)RAND_MAX + 1) - 1.0);
  raw_product_upload(&c, &bufs, bytes);

  VkQueryPool queries = raw_timestamps(&c);
  VkPipelineLayout layout;
  VkPipeline pipeline;
  raw_product_pc pc = {bufs.a.addr, bufs.b.addr, bufs.out.addr, side, side, side, 0};
  raw_pipeline(&c, split_gemm_spv, sizeof split_gemm_spv, sizeof pc, NULL, &layout, &pipeline);
  double t[REPS];
  uint32_t groups = side / TILE;
  (void)raw_time_dispatch(&c, queries, layout, pipeline, &pc, sizeof pc, groups, groups);
  for (int r = 0; r < REPS; r++)
    t[r] = raw_time_dispatch(&c, queries, layout, pipeline, &pc, sizeof pc, groups, groups);
  double med = raw_median(t, REPS), best = t[0];
  double flops = 2.0 * side * side * (double)side;

  raw_copy(&c, bufs.out.buffer, bufs.staging.buffer, bytes);
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
  raw_close(&c);
  return ok ? 0 : 1;
}
