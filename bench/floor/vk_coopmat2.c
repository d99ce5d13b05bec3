/*
 * vk_coopmat2.c - f16 matrix products on tensor cores through workgroup-scope
 * cooperative matrices (VK_NV_cooperative_matrix2), in raw Vulkan with no
 * runtime: whether handing the driver whole tiles (it spreads each matrix
 * over the workgroup and stages it as it sees fit) beats the runtime's
 * subgroup-scope kernel (coopmat.comp), which stages every k slice itself.
 *
 * Each row is a product of two random side x side f16 matrices (values
 * k/1024, |k| <= 1024, exact in f16), f32 accumulation, f16 result, with
 * wg_gemm.comp in one of its modes and tile shapes:
 *
 *   mem       A and B tiles loaded from memory at every k step
 *   tensor    the same through tensor-addressing loads
 *             (SPV_NV_tensor_addressing: the driver's own staging path)
 *   shared    each k step's slices staged in shared memory first
 *   dbuf      the same double-buffered (the next step's slices read from
 *             memory during the current step's product)
 *   products  the tiles loaded once, then only the products (no result)
 *
 * One dispatch per timing, timestamps around it; best and median TFLOP/s
 * of REPS after one untimed. The products of the first two modes are
 * checked at 64 entries against a double-precision reference; a mismatch
 * fails the program. Rows the driver does not offer (its flexible
 * dimensions list the workgroup sizes and granularities it takes) are
 * skipped, and everything is when VK_NV_cooperative_matrix2's workgroup
 * scope is missing.
 *
 * Usage: build/bench/vk_coopmat2 [--side N] [device index]   (make bench)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_raw.h"
#include "wg_gemm_dbuf_128x128x16_128.h"
#include "wg_gemm_dbuf_128x128x32_128.h"
#include "wg_gemm_mem_128x128x32_256.h"
#include "wg_gemm_mem_128x256x64_256.h"
#include "wg_gemm_products_128x128x32_256.h"
#include "wg_gemm_products_128x128x64_128.h"
#include "wg_gemm_shared_128x128x32_128.h"
#include "wg_gemm_shared_128x128x64_256.h"
#include "wg_gemm_tensor_128x128x32_128.h"
#include "wg_gemm_tensor_128x256x64_256.h"

#define REPS 7
#define CHECKS 64

const char *raw_program = "vk_coopmat2";

typedef struct variant {
  const char *mode;
  const uint32_t *spv;
  size_t size;
  uint32_t tm, tn, tk, invocations;
  int check; /* whether the result is a product to check */
} variant;

#define V(mode, tm, tn, tk, inv, check)                                               \
  {#mode, wg_gemm_##mode##_##tm##x##tn##x##tk##_##inv##_spv,                           \
   sizeof wg_gemm_##mode##_##tm##x##tn##x##tk##_##inv##_spv, tm, tn, tk, inv, check}
static const variant variants[] = {
    V(mem, 128, 128, 32, 256, 1),      V(mem, 128, 256, 64, 256, 1),
    V(tensor, 128, 128, 32, 128, 1),   V(tensor, 128, 256, 64, 256, 1),
    V(shared, 128, 128, 32, 128, 1),   V(shared, 128, 128, 64, 256, 1),
    V(dbuf, 128, 128, 32, 128, 1),     V(dbuf, 128, 128, 16, 128, 1),
    V(products, 128, 128, 32, 256, 0), V(products, 128, 128, 64, 128, 0),
};

/* The f16 bits of x, a multiple of 2^-10 with |x| <= 1 (exact). */
static uint16_t to_half(float x) {
  if (x == 0.0f) return 0;
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  uint32_t sign = (u >> 16) & 0x8000u;
  int32_t e = (int32_t)((u >> 23) & 0xffu) - 127 + 15;
  return (uint16_t)(sign | ((uint32_t)e << 10) | ((u >> 13) & 0x3ffu));
}

static double from_half(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
  return (h & 0x8000u) ? -v : v;
}

int main(int argc, char **argv) {
  uint32_t side, index;
  if (!raw_side_args(argc, argv, 4096, 256, &side, &index)) return 2;
  raw_ctx c = {0};
  raw_open(&c, index, RAW_COOPMAT2);
  if (!c.coopmat2) {
    printf("skipped: no workgroup-scope cooperative matrices (VK_NV_cooperative_matrix2)\n");
    raw_close(&c);
    return 0;
  }
  size_t elems = (size_t)side * side;
  VkDeviceSize bytes = elems * sizeof(uint16_t);
  raw_product_bufs bufs;
  raw_product_bufs_open(&c, bytes, &bufs);
  uint16_t *map = bufs.map;
  uint16_t *ha = bufs.ha, *hb = bufs.hb;
  srand(1);
  for (size_t i = 0; i < elems; i++) ha[i] = to_half((float)(rand() % 2049 - 1024) / 1024.0f);
  for (size_t i = 0; i < elems; i++) hb[i] = to_half((float)(rand() % 2049 - 1024) / 1024.0f);
  raw_product_upload(&c, &bufs, bytes);

  VkQueryPool queries = raw_timestamps(&c);
  raw_product_pc pc = {bufs.a.addr, bufs.b.addr, bufs.out.addr, side, side, side, 0};
  double flops = 2.0 * side * side * (double)side;
  int failures = 0;
  printf("%-36s %10s %10s %9s %s\n", "f16, workgroup scope (mode, tile, threads)", "best",
         "median", "ms", "check");
  for (size_t vi = 0; vi < sizeof variants / sizeof variants[0]; vi++) {
    const variant *v = &variants[vi];
    char name[64];
    snprintf(name, sizeof name, "%s, %ux%u k %u, %u", v->mode, v->tm, v->tn, v->tk,
             v->invocations);
    if (!raw_coopmat2_shape(&c, v->tm, v->tn, v->tk, v->invocations) ||
        (strcmp(v->mode, "tensor") == 0 && !c.coopmat2_tensor)) {
      printf("%-36s skipped (not offered)\n", name);
      continue;
    }
    VkPipelineLayout layout;
    VkPipeline pipeline;
    raw_pipeline(&c, v->spv, v->size, sizeof pc, NULL, &layout, &pipeline);
    /* Poison the result first. */
    memset(map, 0xff, bytes);
    raw_copy(&c, bufs.staging.buffer, bufs.out.buffer, bytes);
    double t[REPS];
    uint32_t gx = side / v->tn, gy = side / v->tm;
    (void)raw_time_dispatch(&c, queries, layout, pipeline, &pc, sizeof pc, gx, gy);
    for (int r = 0; r < REPS; r++)
      t[r] = raw_time_dispatch(&c, queries, layout, pipeline, &pc, sizeof pc, gx, gy);
    double med = raw_median(t, REPS), best = t[0];
    char verdict[48] = "-";
    if (v->check) {
      raw_copy(&c, bufs.out.buffer, bufs.staging.buffer, bytes);
      double worst = 0;
      int bad = 0;
      for (uint32_t s = 0; s < CHECKS; s++) {
        uint32_t i = (uint32_t)(((uint64_t)s * 2654435761u) % side);
        uint32_t j = (uint32_t)(((uint64_t)s * 40503u + 17u) % side);
        double ref = 0;
        for (uint32_t p = 0; p < side; p++)
          ref += from_half(ha[(size_t)i * side + p]) * from_half(hb[(size_t)p * side + j]);
        double err = fabs(from_half(map[(size_t)i * side + j]) - ref);
        /* f16 rounding of the result and f32 accumulation over side terms. */
        if (!(err <= 1e-3 * fabs(ref) + 1e-6 * side)) bad++;
        if (err > worst) worst = err;
      }
      if (bad) {
        snprintf(verdict, sizeof verdict, "FAIL %d of %d (max err %.3g)", bad, CHECKS, worst);
        failures++;
      } else {
        snprintf(verdict, sizeof verdict, "ok (max err %.3g)", worst);
      }
    }
    printf("%-36s %10.1f %10.1f %9.3f %s\n", name, flops / (best * 1e9), flops / (med * 1e9),
           med, verdict);
    vkDestroyPipeline(c.dev, pipeline, NULL);
    vkDestroyPipelineLayout(c.dev, layout, NULL);
  }
  vkDestroyQueryPool(c.dev, queries, NULL);
  raw_close(&c);
  return failures ? 1 : 0;
}
