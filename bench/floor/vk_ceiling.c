/*
 * vk_ceiling.c - the arithmetic ceilings under nxv_bench's matmul figures,
 * in raw Vulkan with no runtime: what this driver lets any shader reach.
 *
 *   f32 FMA                      16 independent fma chains per thread
 *                                (peak_ffma.comp): the ceiling of the f32
 *                                matmul kernel (gemm.comp)
 *   f64 FMA                      the same in double (peak_ffma.comp with
 *                                -DF64=1), where the device has
 *                                shaderFloat64
 *   f16 tensor cores, registers  GL_NV_cooperative_matrix 16x16x16 products
 *                                on fragments held in registers, FM x FN
 *                                accumulators per subgroup (peak_hmma.comp)
 *   f16 tensor cores, shared     the same with every fragment loaded from
 *                                shared memory first, as coopmat.comp's
 *                                inner loop does
 *   ... through KHR              both again through VK_KHR_cooperative_matrix
 *                                (the same SPIR-V rewritten by
 *                                tools/spv_coopmat_khr.c, as the runtime's
 *                                f16 module is), on a second device context
 *
 * Each figure times one dispatch with timestamps around it, the number of
 * iterations calibrated so that it runs about 20 ms; best and median of
 * REPS dispatches after one untimed. The tensor-core rows need
 * VK_NV_cooperative_matrix (or VK_KHR_cooperative_matrix) with 16x16x16 f16
 * products and a subgroup of 32, and are skipped otherwise.
 *
 * With --stats it prints instead what the driver reports about the
 * runtime's tiled elementwise and matmul pipelines
 * (VK_KHR_pipeline_executable_properties: registers, spills, shared
 * memory, where the driver tells): binary.comp's tiles (f16 VARIANT 2 and
 * the 16-byte VARIANT 4, f32 VARIANT 2), unary.comp's f16 copy tiles
 * (VARIANT 3 and 4), the register-blocked gemm.comp per type, the generic
 * matmul.comp in f32 and f64 (where the device has shaderFloat64) and
 * coopmat.comp, built from the
 * SPIR-V embedded in the runtime with the specialization it uses for large
 * products: the NV module on a context with VK_NV_cooperative_matrix, the
 * KHR modules (f16, bf16 where offered) on one with
 * VK_KHR_cooperative_matrix, as the runtime picks them. Where the driver
 * offers internal representations of a pipeline it lists their names and
 * sizes, and with VK_CEILING_IR_DIR set writes each to a file there
 * (<module>_v<variant>_<index>.txt or .bin).
 *
 * Usage: build/bench/vk_ceiling [--stats] [device index]   (make bench)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peak_dfma.h"        /* peak_dfma_spv */
#include "peak_ffma.h"        /* peak_ffma_spv */
#include "peak_hmma_reg.h"    /* peak_hmma_reg_spv: FROM_SHARED 0 */
#include "peak_hmma_shared.h" /* peak_hmma_shared_spv: FROM_SHARED 1 */
#include "peak_hmma_reg_khr.h"    /* peak_hmma_reg_khr_spv: the same through KHR */
#include "peak_hmma_shared_khr.h" /* peak_hmma_shared_khr_spv */
#include "kernels/registry.h" /* NXV_COOPMAT_*, the embedded SPIR-V */
#include "sched/scheduler.h" /* NXV_PUSH_CONSTANTS_MAX */
#include "vk_raw.h"

#define REPS 7
#define GROUPS 2048u       /* workgroups per dispatch (256 threads each) */
#define TARGET_MS 20.0

const char *raw_program = "vk_ceiling";

typedef struct kernel {
  const char *name;
  VkPipelineLayout layout;
  VkPipeline pipeline;
  double flops_per_iter; /* per dispatch of GROUPS workgroups */
} kernel;

typedef struct ctx {
  raw_ctx raw;
  VkQueryPool queries; /* 2 timestamps */
  double ns_per_tick;
  raw_buf dst;         /* one float per invocation */
} ctx;

/* GPU milliseconds of one dispatch of k with iters iterations. */
static double run_once(ctx *c, const kernel *k, uint32_t iters) {
  VkCommandBuffer cb = raw_command_buffer(&c->raw);
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  RAW_VK(vkBeginCommandBuffer(cb, &bi));
  vkCmdResetQueryPool(cb, c->queries, 0, 2);
  struct {
    VkDeviceAddress dst;
    uint32_t iters;
    float x, y;
  } pc = {c->dst.addr, iters, 0.999f, 0.001f};
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipeline);
  vkCmdPushConstants(cb, k->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, &pc);
  vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, c->queries, 0);
  vkCmdDispatch(cb, GROUPS, 1, 1);
  vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, 1);
  RAW_VK(vkEndCommandBuffer(cb));
  raw_submit_wait(&c->raw, cb, true);
  uint64_t ts[2];
  RAW_VK(vkGetQueryPoolResults(c->raw.dev, c->queries, 0, 2, sizeof ts, ts, sizeof ts[0],
                               VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
  vkFreeCommandBuffers(c->raw.dev, c->raw.pool, 1, &cb);
  return (double)(ts[1] - ts[0]) * c->ns_per_tick / 1e6;
}

static void measure(ctx *c, const kernel *k) {
  /* Calibrate: grow iters until a dispatch takes a few ms, then scale. */
  uint32_t iters = 4;
  double ms = run_once(c, k, iters);
  while (ms < 2.0 && iters < (1u << 24)) {
    iters *= 4;
    ms = run_once(c, k, iters);
  }
  double scaled = iters * (TARGET_MS / (ms > 0 ? ms : 1e-3));
  if (scaled > iters) iters = scaled > (double)(1u << 26) ? (1u << 26) : (uint32_t)scaled;
  double t[REPS];
  (void)run_once(c, k, iters);
  for (int r = 0; r < REPS; r++) t[r] = run_once(c, k, iters);
  double med = raw_median(t, REPS), best = t[0]; /* sorted by raw_median */
  double flops = k->flops_per_iter * iters;
  printf("%-52s %10.1f %10.1f %9.2f\n", k->name, flops / (best * 1e6), flops / (med * 1e6), med);
}

static void make_kernel(ctx *c, kernel *k, const char *name, const uint32_t *spv,
                        size_t size, const uint32_t *spec_fm_fn, double flops_per_iter) {
  VkSpecializationMapEntry map[2] = {{0, 0, 4}, {1, 4, 4}};
  VkSpecializationInfo si = {2, map, 8, spec_fm_fn};
  k->name = name;
  k->flops_per_iter = flops_per_iter;
  raw_pipeline(&c->raw, spv, size, 24, spec_fm_fn ? &si : NULL, &k->layout, &k->pipeline);
}

/* Whether the device has a subgroup of 32 and, with the KHR extension
 * enabled, nothing else to check (raw_open checked its shape); otherwise
 * 16x16x16 f16 x f16 -> f32 NV cooperative matrices with subgroup scope. */
static bool coopmat_shape(const ctx *c) {
  if (!c->raw.coopmat_nv && !c->raw.coopmat_khr) return false;
  VkPhysicalDeviceSubgroupProperties sg = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                    .pNext = &sg};
  vkGetPhysicalDeviceProperties2(c->raw.pd, &p2);
  if (sg.subgroupSize != 32) return false;
  if (c->raw.coopmat_khr) return true;
  PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV get =
      (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)vkGetInstanceProcAddr(
          c->raw.instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
  if (!get) return false;
  uint32_t n = 0;
  RAW_VK(get(c->raw.pd, &n, NULL));
  VkCooperativeMatrixPropertiesNV *p = calloc(n ? n : 1, sizeof *p);
  if (!p) exit(1);
  for (uint32_t i = 0; i < n; i++) p[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
  RAW_VK(get(c->raw.pd, &n, p));
  bool ok = false;
  for (uint32_t i = 0; i < n && !ok; i++)
    ok = p[i].MSize == 16 && p[i].NSize == 16 && p[i].KSize == 16 &&
         p[i].AType == VK_COMPONENT_TYPE_FLOAT16_NV && p[i].BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
         p[i].CType == VK_COMPONENT_TYPE_FLOAT32_NV && p[i].DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
         p[i].scope == VK_SCOPE_SUBGROUP_NV;
  free(p);
  return ok;
}

/* Lists the internal representations of executable ei (name, size) and,
 * with VK_CEILING_IR_DIR set, writes each to a file there. */
static void print_irs(const ctx *c, const VkPipelineExecutableInfoKHR *ei, const char *name,
                      uint32_t variant, uint32_t e) {
  PFN_vkGetPipelineExecutableInternalRepresentationsKHR ir_fn =
      (PFN_vkGetPipelineExecutableInternalRepresentationsKHR)vkGetDeviceProcAddr(
          c->raw.dev, "vkGetPipelineExecutableInternalRepresentationsKHR");
  uint32_t n = 0;
  if (!ir_fn || ir_fn(c->raw.dev, ei, &n, NULL) != VK_SUCCESS || n == 0) {
    printf("  internal representations: none\n");
    return;
  }
  VkPipelineExecutableInternalRepresentationKHR *ir = calloc(n, sizeof *ir);
  if (!ir) exit(1);
  for (uint32_t i = 0; i < n; i++)
    ir[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR;
  RAW_VK(ir_fn(c->raw.dev, ei, &n, ir)); /* sizes */
  for (uint32_t i = 0; i < n; i++) {
    ir[i].pData = malloc(ir[i].dataSize ? ir[i].dataSize : 1);
    if (!ir[i].pData) exit(1);
  }
  VkResult r = ir_fn(c->raw.dev, ei, &n, ir);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) RAW_VK(r);
  const char *dir = getenv("VK_CEILING_IR_DIR");
  for (uint32_t i = 0; i < n; i++) {
    printf("  internal representation %u: %s (%s), %zu bytes%s\n", i, ir[i].name,
           ir[i].description, ir[i].dataSize, ir[i].isText ? ", text" : "");
    if (dir) {
      char path[512];
      snprintf(path, sizeof path, "%s/%s_v%u_e%u_%u.%s", dir, name, variant, e, i,
               ir[i].isText ? "txt" : "bin");
      FILE *f = fopen(path, "wb");
      if (f) {
        size_t len = ir[i].dataSize;
        if (ir[i].isText && len && ((char *)ir[i].pData)[len - 1] == '\0') len--;
        fwrite(ir[i].pData, 1, len, f);
        fclose(f);
      }
    }
    free(ir[i].pData);
  }
  free(ir);
}

/* Prints the executable statistics of module m (spec constants 0 wg, 1 op
 * 0, 2 variant), as the driver reports them. */
static void print_stats(const ctx *c, nxv_spv_module m, uint32_t wg, uint32_t variant) {
  PFN_vkGetPipelineExecutablePropertiesKHR props_fn =
      (PFN_vkGetPipelineExecutablePropertiesKHR)vkGetDeviceProcAddr(
          c->raw.dev, "vkGetPipelineExecutablePropertiesKHR");
  PFN_vkGetPipelineExecutableStatisticsKHR stats_fn =
      (PFN_vkGetPipelineExecutableStatisticsKHR)vkGetDeviceProcAddr(
          c->raw.dev, "vkGetPipelineExecutableStatisticsKHR");
  uint32_t data[3] = {wg, 0, variant};
  VkSpecializationMapEntry map[3] = {{0, 0, 4}, {1, 4, 4}, {2, 8, 4}};
  VkSpecializationInfo si = {3, map, sizeof data, data};
  VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, NXV_PUSH_CONSTANTS_MAX};
  VkPipelineLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                    .pushConstantRangeCount = 1,
                                    .pPushConstantRanges = &pcr};
  VkPipelineLayout layout;
  RAW_VK(vkCreatePipelineLayout(c->raw.dev, &lci, NULL, &layout));
  VkShaderModuleCreateInfo smi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                  .codeSize = nxv_spv_size[m],
                                  .pCode = nxv_spv_code[m]};
  VkShaderModule sm;
  RAW_VK(vkCreateShaderModule(c->raw.dev, &smi, NULL, &sm));
  VkComputePipelineCreateInfo cpi = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .flags = VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR |
               VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = sm,
                .pName = "main",
                .pSpecializationInfo = &si},
      .layout = layout};
  VkPipeline p;
  RAW_VK(vkCreateComputePipelines(c->raw.dev, VK_NULL_HANDLE, 1, &cpi, NULL, &p));
  vkDestroyShaderModule(c->raw.dev, sm, NULL);
  VkPipelineInfoKHR pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, .pipeline = p};
  uint32_t ne = 0;
  RAW_VK(props_fn(c->raw.dev, &pi, &ne, NULL));
  for (uint32_t e = 0; e < ne; e++) {
    VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                                      .pipeline = p,
                                      .executableIndex = e};
    uint32_t ns = 0;
    RAW_VK(stats_fn(c->raw.dev, &ei, &ns, NULL));
    VkPipelineExecutableStatisticKHR *st = calloc(ns ? ns : 1, sizeof *st);
    if (!st) exit(1);
    for (uint32_t i = 0; i < ns; i++) st[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
    RAW_VK(stats_fn(c->raw.dev, &ei, &ns, st));
    printf("%s (variant %u, %u threads):", nxv_spv_name[m], variant, wg);
    for (uint32_t i = 0; i < ns; i++) {
      switch (st[i].format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
          printf(" %s=%s", st[i].name, st[i].value.b32 ? "yes" : "no");
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
          printf(" %s=%lld", st[i].name, (long long)st[i].value.i64);
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
          printf(" %s=%llu", st[i].name, (unsigned long long)st[i].value.u64);
          break;
        default:
          printf(" %s=%g", st[i].name, st[i].value.f64);
      }
    }
    printf("\n");
    free(st);
    print_irs(c, &ei, nxv_spv_name[m], variant, e);
  }
  vkDestroyPipeline(c->raw.dev, p, NULL);
  vkDestroyPipelineLayout(c->raw.dev, layout, NULL);
}

static void stats(const ctx *c) {
  if (!c->raw.executable_stats) {
    printf("the driver has no VK_KHR_pipeline_executable_properties\n");
    return;
  }
  print_stats(c, NXV_SPV_BINARY_F16, 256, 2);
  print_stats(c, NXV_SPV_BINARY_F16, 256, 4);
  print_stats(c, NXV_SPV_BINARY_F32, 256, 2);
  print_stats(c, NXV_SPV_UNARY_F16_F16, 256, 3);
  print_stats(c, NXV_SPV_UNARY_F16_F16, 256, 4);
  print_stats(c, NXV_SPV_GEMM_F32, 256, 0);
  print_stats(c, NXV_SPV_GEMM_F32, 256, 3);
  print_stats(c, NXV_SPV_GEMM_F16, 256, 0);
  print_stats(c, NXV_SPV_GEMM_BF16, 256, 0);
  print_stats(c, NXV_SPV_MATMUL_F32, 256, 0);
  if (c->raw.float64) print_stats(c, NXV_SPV_MATMUL_F64, 256, 0);
  if (c->raw.coopmat_nv)
    for (uint32_t v = 0; v < 4; v++) print_stats(c, NXV_SPV_COOPMAT_F16, NXV_COOPMAT_THREADS, v);
}

/* The KHR tensor-core modules' statistics (a context opened with
 * RAW_COOPMAT_KHR). */
static void stats_khr(const ctx *c) {
  if (!c->raw.executable_stats || !c->raw.coopmat_khr) return;
  for (uint32_t v = 0; v < 4; v++) print_stats(c, NXV_SPV_COOPMAT_F16_KHR, NXV_COOPMAT_THREADS, v);
  if (c->raw.bf16)
    for (uint32_t v = 0; v < 4; v++) print_stats(c, NXV_SPV_COOPMAT_BF16, NXV_COOPMAT_THREADS, v);
}

/* The timestamp queries and the output buffer of c's device. */
static void open_resources(ctx *c) {
  VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                              .queryType = VK_QUERY_TYPE_TIMESTAMP,
                              .queryCount = 2};
  RAW_VK(vkCreateQueryPool(c->raw.dev, &qi, NULL, &c->queries));
  c->ns_per_tick = c->raw.props.limits.timestampPeriod;
  /* One double per thread: the f64 row's sums are the widest written. */
  c->dst = raw_buffer(&c->raw, (VkDeviceSize)GROUPS * 256 * sizeof(double),
                      VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
}

static void close_resources(ctx *c) {
  RAW_VK(vkDeviceWaitIdle(c->raw.dev));
  vkDestroyQueryPool(c->raw.dev, c->queries, NULL);
  vkDestroyBuffer(c->raw.dev, c->dst.buffer, NULL);
  vkFreeMemory(c->raw.dev, c->dst.memory, NULL);
}

/* The tensor-core rows through extension ext (the pipelines' SPIR-V: reg,
 * shared). Pipelines are left to the device's destruction. */
static void tensor_core_rows(ctx *c, const char *ext, const uint32_t *reg, size_t reg_size,
                             const uint32_t *shared, size_t shared_size) {
  static const uint32_t shapes[][2] = {{2, 2}, {4, 2}, {2, 4}, {4, 4}, {8, 2}};
  const double warps = (double)GROUPS * 8;
  kernel k;
  for (int from_shared = 0; from_shared < 2; from_shared++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      char name[96];
      snprintf(name, sizeof name, "f16 %s, %s, %ux%u per subgroup, GFLOP/s", ext,
               from_shared ? "from shared" : "registers", shapes[s][0], shapes[s][1]);
      /* Per iteration: 2 k-steps of FM * FN products of 8192 FLOPs. */
      double f = warps * 2 * shapes[s][0] * shapes[s][1] * 8192.0;
      if (from_shared)
        make_kernel(c, &k, name, shared, shared_size, shapes[s], f);
      else
        make_kernel(c, &k, name, reg, reg_size, shapes[s], f);
      measure(c, &k);
    }
}

int main(int argc, char **argv) {
  ctx c = {0};
  bool want_stats = argc > 1 && strcmp(argv[1], "--stats") == 0;
  if (want_stats) {
    argc--;
    argv++;
  }
  uint32_t index = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 0;
  raw_open(&c.raw, index, RAW_COOPMAT_NV);
  if (want_stats) {
    stats(&c);
    raw_close(&c.raw);
    raw_open(&c.raw, index, RAW_COOPMAT_KHR);
    stats_khr(&c);
    raw_close(&c.raw);
    return 0;
  }
  open_resources(&c);
  const double threads = (double)GROUPS * 256;
  printf("%-52s %10s %10s %9s\n", "kernel (one dispatch, ~20 ms)", "best", "median", "ms");
  kernel k;
  make_kernel(&c, &k, "f32 FMA, GFLOP/s", peak_ffma_spv, sizeof peak_ffma_spv, NULL,
              threads * 64 * 2);
  measure(&c, &k);
  if (c.raw.float64) {
    make_kernel(&c, &k, "f64 FMA, GFLOP/s", peak_dfma_spv, sizeof peak_dfma_spv, NULL,
                threads * 64 * 2);
    measure(&c, &k);
  } else {
    printf("f64 FMA: skipped (no shaderFloat64)\n");
  }
  if (coopmat_shape(&c))
    tensor_core_rows(&c, "NV", peak_hmma_reg_spv, sizeof peak_hmma_reg_spv,
                     peak_hmma_shared_spv, sizeof peak_hmma_shared_spv);
  else
    printf("f16 tensor cores, NV: skipped (no 16x16x16 f16 NV cooperative matrix)\n");
  close_resources(&c);
  raw_close(&c.raw);
  raw_open(&c.raw, index, RAW_COOPMAT_KHR);
  if (coopmat_shape(&c)) {
    open_resources(&c);
    tensor_core_rows(&c, "KHR", peak_hmma_reg_khr_spv, sizeof peak_hmma_reg_khr_spv,
                     peak_hmma_shared_khr_spv, sizeof peak_hmma_shared_khr_spv);
    close_resources(&c);
  } else {
    printf("f16 tensor cores, KHR: skipped (no 16x16x16 f16 KHR cooperative matrix)\n");
  }
  raw_close(&c.raw);
  return 0;
}
