/*
 * vk_raw.h - the bare Vulkan context of the raw benchmarks (vk_floor,
 * vk_ceiling): one device, one compute queue, one timeline semaphore, a
 * command pool, buffers with device addresses and compute pipelines whose
 * only interface is a push-constant range. No runtime code.
 *
 * Every Vulkan failure prints the call and its VkResult and exits: these are
 * measurement programs, not libraries. Single-threaded.
 */
#ifndef NXV_BENCH_VK_RAW_H
#define NXV_BENCH_VK_RAW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <vulkan/vulkan.h>

#define RAW_VK(call)                                                      \
  do {                                                                    \
    VkResult r_ = (call);                                                 \
    if (r_ != VK_SUCCESS) {                                               \
      fprintf(stderr, "%s: %s failed: VkResult %d\n", raw_program, #call, \
              r_);                                                        \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

/* Name printed in front of every error; set by the program. */
extern const char *raw_program;

/* Whether raw_open takes a compute queue family without graphics where the
 * device has one (the runtime's choice) instead of the first family with
 * compute; false unless the program sets it before raw_open. */
extern bool raw_compute_only;

/* A buffer, its memory (owned: the program never frees them; process exit
 * does) and its device address. */
typedef struct raw_buf {
  VkBuffer buffer;
  VkDeviceMemory memory;
  VkDeviceAddress addr;
} raw_buf;

typedef struct raw_ctx {
  VkInstance instance;
  VkPhysicalDevice pd;
  VkPhysicalDeviceProperties props;
  VkDevice dev;
  uint32_t family;      /* the compute queue family */
  VkQueue queue;
  VkQueue queue2;       /* a second queue of family, VK_NULL_HANDLE where
                           the family has one */
  VkSemaphore timeline; /* signalled by raw_submit */
  uint64_t value;       /* last timeline value signalled */
  VkCommandPool pool;   /* resettable command buffers of family */
  bool coopmat_nv;      /* VK_NV_cooperative_matrix, shaderFloat16, 16-bit
                           storage and the memory model enabled */
  bool coopmat_khr;     /* the same with VK_KHR_cooperative_matrix instead */
  bool executable_stats; /* VK_KHR_pipeline_executable_properties enabled */
  bool coopmat2;        /* coopmat_khr, and VK_NV_cooperative_matrix2's
                           workgroup scope and flexible dimensions enabled */
  bool coopmat2_tensor; /* coopmat2, and its tensor-addressing loads */
  bool bf16;            /* with coopmat_khr: VK_KHR_shader_bfloat16's
                           bfloat16 types and cooperative matrices */
  bool float64;         /* shaderFloat64 enabled (the device has it) */
} raw_ctx;

/* What raw_open enables besides timeline semaphores and buffer device
 * addresses, where the device has it. */
typedef enum raw_extras {
  RAW_PLAIN = 0,
  /* What the runtime's matmul kernels need through the NV extension
   * (VK_NV_cooperative_matrix, shaderFloat16, 16-bit storage, the Vulkan
   * memory model: c->coopmat_nv) and VK_KHR_pipeline_executable_properties
   * (c->executable_stats). */
  RAW_COOPMAT_NV = 1,
  /* The same through VK_KHR_cooperative_matrix where it offers 16x16x16
   * f16 x f16 -> f32 products of subgroup scope (c->coopmat_khr), the
   * executable statistics, and VK_KHR_shader_bfloat16's types and
   * cooperative matrices where present (c->bf16). */
  RAW_COOPMAT_KHR = 2,
  /* RAW_COOPMAT_KHR's, and VK_NV_cooperative_matrix2 with workgroup-scope
   * matrices of flexible dimensions (c->coopmat2) and, where offered, its
   * tensor-addressing loads (c->coopmat2_tensor). */
  RAW_COOPMAT2 = 3,
} raw_extras;

/* Opens device index with timeline semaphores, buffer device addresses and
 * extras. */
void raw_open(raw_ctx *c, uint32_t index, raw_extras extras);

/* Whether c's VK_NV_cooperative_matrix2 (c->coopmat2) offers f16 x f16 ->
 * f32 products of workgroup scope for workgroups of invocations threads,
 * with granularities dividing m, n and k. */
bool raw_coopmat2_shape(const raw_ctx *c, uint32_t m, uint32_t n, uint32_t k,
                        uint32_t invocations);

/* Waits for the device to be idle and destroys what raw_open made
 * (buffers and pipelines made on it must not be used afterwards). */
void raw_close(raw_ctx *c);

/* A buffer of size bytes in a memory type with the need flags, preferring
 * one without the avoid flags; storage, transfer and device-address usage. */
raw_buf raw_buffer(const raw_ctx *c, VkDeviceSize size, VkMemoryPropertyFlags need,
                   VkMemoryPropertyFlags avoid);

/* A compute pipeline of the SPIR-V words spv (size bytes), entry "main", and
 * its layout: one push-constant range of pc_size bytes. spec (may be NULL)
 * gives its specialization constants. */
void raw_pipeline(const raw_ctx *c, const uint32_t *spv, size_t size, uint32_t pc_size,
                  const VkSpecializationInfo *spec, VkPipelineLayout *out_layout,
                  VkPipeline *out_pipeline);

/* A primary command buffer from c's pool. */
VkCommandBuffer raw_command_buffer(const raw_ctx *c);

/* Submits cb signalling the next timeline value, which it returns. */
uint64_t raw_submit(raw_ctx *c, VkCommandBuffer cb);

/* Waits until the timeline reaches v: blocking in vkWaitSemaphores, or
 * busy-polling the counter. */
void raw_wait(raw_ctx *c, uint64_t v, bool blocking);

/* raw_submit, then raw_wait for its value. */
void raw_submit_wait(raw_ctx *c, VkCommandBuffer cb, bool blocking);

/* Copies size bytes from buffer from to buffer to and waits for it. */
void raw_copy(raw_ctx *c, VkBuffer from, VkBuffer to, VkDeviceSize size);

/* The operands of a raw product benchmark: device-local a, b and out of
 * bytes each, a host-visible staging buffer of the same size mapped at map,
 * and host copies ha and hb of the operands for the program to fill and
 * check against (none freed: process exit releases them). */
typedef struct raw_product_bufs {
  raw_buf a, b, out, staging;
  void *map;
  void *ha, *hb;
} raw_product_bufs;
void raw_product_bufs_open(raw_ctx *c, VkDeviceSize bytes, raw_product_bufs *out);

/* The push constants of the raw product shaders (wg_gemm.comp,
 * split_gemm.comp): the three buffer addresses, then m, n and k. */
typedef struct raw_product_pc {
  VkDeviceAddress a, b, c;
  uint32_t m, n, k;
  uint32_t pad;
} raw_product_pc;

/* Uploads b->ha and b->hb into b->a and b->b through the staging buffer,
 * and fills b->out with 0xff bytes (a poisoned result). */
void raw_product_upload(raw_ctx *c, raw_product_bufs *b, VkDeviceSize bytes);

/* A query pool of two timestamps for raw_time_dispatch. */
VkQueryPool raw_timestamps(const raw_ctx *c);

/* GPU milliseconds of one dispatch of (gx, gy, 1) workgroups of pipeline
 * with the pc_size bytes at pc as push constants, timed with queries. */
double raw_time_dispatch(raw_ctx *c, VkQueryPool queries, VkPipelineLayout layout,
                         VkPipeline pipeline, const void *pc, uint32_t pc_size, uint32_t gx,
                         uint32_t gy);

/* Parses a benchmark's [--side N] [device index]: *out_side is N (fallback
 * when absent), which must be a positive multiple of multiple; false, with
 * a message, otherwise. */
bool raw_side_args(int argc, char **argv, uint32_t fallback, uint32_t multiple,
                   uint32_t *out_side, uint32_t *out_index);

/* Host time in microseconds (CLOCK_MONOTONIC). */
double raw_now_us(void);

/* Median of v[0..n) (sorts v). */
double raw_median(double *v, size_t n);

#endif
