#include "kernels/registry.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/spv_prune.h"
#include "sched/scheduler.h"
#include "sched/status.h"

#define SLOTS (NXV_REGISTRY_OPS * NXV_REGISTRY_VARIANTS)
/* Open-addressing table of program pipelines: twice the cap, a power of
 * two. */
#define PROGRAM_TABLE (2 * NXV_REGISTRY_PROGRAMS)

typedef struct program_entry {
  VkPipeline pipeline;              /* owned; VK_NULL_HANDLE: free slot */
  uint32_t module;                  /* nxv_spv_module */
  uint32_t nwords;
  uint32_t words[NXV_REGISTRY_PROGRAM_WORDS];
} program_entry;

struct nxv_registry {
  const nxv_vk *vk;                 /* not owned */
  VkPipelineCache cache;            /* not owned */
  VkPipelineLayout layout;          /* owned */
  uint32_t wg_size;
  bool prune;                       /* nxv_spv_prune each pipeline's module */
  pthread_mutex_t mu;               /* serializes creation */
  VkShaderModule modules[NXV_SPV_COUNT];          /* owned, lazily */
  _Atomic(VkPipeline) pipelines[NXV_SPV_COUNT][SLOTS]; /* owned, lazily */
  program_entry *programs;          /* owned, PROGRAM_TABLE entries; under mu */
  atomic_uint nprograms;            /* entries in use; written under mu,
                                       read by the stats without it */
  atomic_uint_fast64_t hits, misses, disk_hits, created, pruned;
};

/* Modules whose kernels assume a fixed workgroup size (0: none). */
static uint32_t fixed_wg(nxv_spv_module m, uint32_t variant) {
  if (m >= NXV_SPV_MATMUL_S8 && m <= NXV_SPV_MATMUL_C128) return 256;
  if (m >= NXV_SPV_GEMM_F16 && m <= NXV_SPV_GEMM_F32) return variant == 0 ? 256 : 64;
  if (m == NXV_SPV_COOPMAT_F16 || m == NXV_SPV_COOPMAT_F16_KHR || m == NXV_SPV_COOPMAT_BF16)
    return NXV_COOPMAT_THREADS;
  /* The tiled elementwise variants (tile2d.glsl). */
  if (m >= NXV_SPV_BINARY_S8 && m <= NXV_SPV_BINARY_C128 && variant == 2) return 256;
  if (m >= NXV_SPV_UNARY_S8_S8 && m <= NXV_SPV_UNARY_C64_F32_PRECISE && variant == 3) return 256;
  return 0;
}

nxv_status nxv_registry_create(const nxv_vk *vk, VkPipelineCache cache, bool prune,
                               nxv_registry **out) {
  nxv_registry *r = calloc(1, sizeof *r);
  if (!r) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "kernel registry");
  r->vk = vk;
  r->cache = cache;
  r->prune = prune;
  uint32_t limit = vk->info.max_workgroup_invocations;
  if (vk->info.max_workgroup_size[0] < limit) limit = vk->info.max_workgroup_size[0];
  r->wg_size = 256;
  while (r->wg_size > limit) r->wg_size >>= 1;
  uint32_t pc = vk->info.max_push_constants_size;
  if (pc > NXV_PUSH_CONSTANTS_MAX) pc = NXV_PUSH_CONSTANTS_MAX;
  VkPushConstantRange range = {VK_SHADER_STAGE_COMPUTE_BIT, 0, pc};
  VkPipelineLayoutCreateInfo li = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
      .pushConstantRangeCount = 1,
      .pPushConstantRanges = &range};
  VkResult res = vkCreatePipelineLayout(vk->device, &li, NULL, &r->layout);
  if (res != VK_SUCCESS) {
    free(r);
    return nxv_fail_vk(res, "vkCreatePipelineLayout");
  }
  r->programs = calloc(PROGRAM_TABLE, sizeof *r->programs);
  if (!r->programs) {
    vkDestroyPipelineLayout(vk->device, r->layout, NULL);
    free(r);
    return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "kernel registry programs");
  }
  pthread_mutex_init(&r->mu, NULL);
  *out = r;
  return NXV_OK;
}

void nxv_registry_destroy(nxv_registry *r) {
  if (!r) return;
  VkDevice dev = r->vk->device;
  for (int m = 0; m < NXV_SPV_COUNT; m++) {
    for (int i = 0; i < SLOTS; i++) {
      VkPipeline p = atomic_load(&r->pipelines[m][i]);
      if (p) vkDestroyPipeline(dev, p, NULL);
    }
    if (r->modules[m]) vkDestroyShaderModule(dev, r->modules[m], NULL);
  }
  for (int i = 0; i < PROGRAM_TABLE; i++)
    if (r->programs[i].pipeline) vkDestroyPipeline(dev, r->programs[i].pipeline, NULL);
  free(r->programs);
  vkDestroyPipelineLayout(dev, r->layout, NULL);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

VkPipelineLayout nxv_registry_layout(nxv_registry *r) { return r->layout; }
uint32_t nxv_registry_workgroup_size(nxv_registry *r) { return r->wg_size; }

/* Creates the pipeline of module m with specialization constants 0 (the
 * workgroup size), 1 op, 2 variant and 3 .. 2 + nextra the words extra. */
static nxv_status create_locked(nxv_registry *r, nxv_spv_module m, uint32_t op,
                                uint32_t variant, const uint32_t *extra,
                                uint32_t nextra, VkPipeline *out) {
  VkDevice dev = r->vk->device;
  uint32_t wg = fixed_wg(m, variant) ? fixed_wg(m, variant) : r->wg_size;
  uint32_t data[3 + NXV_REGISTRY_PROGRAM_WORDS] = {wg, op, variant};
  VkSpecializationMapEntry entries[3 + NXV_REGISTRY_PROGRAM_WORDS];
  nxv_spv_spec specs[3 + NXV_REGISTRY_PROGRAM_WORDS];
  uint32_t count = 3 + nextra;
  for (uint32_t i = 0; i < nextra; i++) data[3 + i] = extra[i];
  for (uint32_t i = 0; i < count; i++) {
    entries[i] = (VkSpecializationMapEntry){i, 4 * i, 4};
    specs[i] = (nxv_spv_spec){i, data[i]};
  }
  VkSpecializationInfo spec = {count, entries, 4 * count, data};
  /* The module pruned for these constants, when that removes anything. */
  VkShaderModule own = VK_NULL_HANDLE;
  if (r->prune) {
    uint32_t *words = NULL;
    size_t nwords = 0;
    NXV_TRY(nxv_spv_prune(nxv_spv_code[m], nxv_spv_size[m] / 4, specs, count, &words,
                          &nwords));
    if (words) {
      VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                     .codeSize = nwords * 4,
                                     .pCode = words};
      VkResult res = vkCreateShaderModule(dev, &mi, NULL, &own);
      free(words);
      if (res != VK_SUCCESS)
        return nxv_fail(nxv_status_from_vk(res),
                        "vkCreateShaderModule(%s pruned, op %u, variant %u) failed: %s",
                        nxv_spv_name[m], op, variant, nxv_vk_result_name(res));
    }
  }
  if (!own && !r->modules[m]) {
    VkShaderModuleCreateInfo mi = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = nxv_spv_size[m],
        .pCode = nxv_spv_code[m]};
    VkResult res = vkCreateShaderModule(dev, &mi, NULL, &r->modules[m]);
    if (res != VK_SUCCESS)
      return nxv_fail(nxv_status_from_vk(res),
                      "vkCreateShaderModule(%s) failed: %s", nxv_spv_name[m],
                      nxv_vk_result_name(res));
  }
  VkPipelineCreationFeedback fb = {0}, stage_fb = {0};
  VkPipelineCreationFeedbackCreateInfo fbi = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO,
      .pPipelineCreationFeedback = &fb,
      .pipelineStageCreationFeedbackCount = 1,
      .pPipelineStageCreationFeedbacks = &stage_fb};
  VkComputePipelineCreateInfo ci = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .pNext = r->vk->has_feedback ? &fbi : NULL,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = own ? own : r->modules[m],
                .pName = "main",
                .pSpecializationInfo = &spec},
      .layout = r->layout};
  VkPipeline p;
  VkResult res = vkCreateComputePipelines(dev, r->cache, 1, &ci, NULL, &p);
  if (own) {
    vkDestroyShaderModule(dev, own, NULL);
    if (res == VK_SUCCESS) atomic_fetch_add(&r->pruned, 1);
  }
  if (res != VK_SUCCESS)
    return nxv_fail(nxv_status_from_vk(res),
                    "vkCreateComputePipelines(%s, op %u, variant %u) failed: %s",
                    nxv_spv_name[m], op, variant, nxv_vk_result_name(res));
  if ((fb.flags & VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT) &&
      (fb.flags &
       VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT))
    atomic_fetch_add(&r->disk_hits, 1);
  atomic_fetch_add(&r->created, 1);
  *out = p;
  return NXV_OK;
}

nxv_status nxv_registry_pipeline(nxv_registry *r, nxv_spv_module m,
                                 uint32_t op, uint32_t variant,
                                 VkPipeline *out) {
  if ((unsigned)m >= NXV_SPV_COUNT || op >= NXV_REGISTRY_OPS ||
      variant >= NXV_REGISTRY_VARIANTS)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "no kernel slot for module %d op %u variant %u", (int)m,
                    op, variant);
  _Atomic(VkPipeline) *slot = &r->pipelines[m][op * NXV_REGISTRY_VARIANTS + variant];
  VkPipeline p = atomic_load_explicit(slot, memory_order_acquire);
  if (p) {
    atomic_fetch_add_explicit(&r->hits, 1, memory_order_relaxed);
    *out = p;
    return NXV_OK;
  }
  pthread_mutex_lock(&r->mu);
  p = atomic_load_explicit(slot, memory_order_acquire);
  nxv_status st = NXV_OK;
  if (!p) {
    atomic_fetch_add(&r->misses, 1);
    st = create_locked(r, m, op, variant, NULL, 0, &p);
    if (st == NXV_OK) atomic_store_explicit(slot, p, memory_order_release);
  } else {
    atomic_fetch_add_explicit(&r->hits, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&r->mu);
  if (st == NXV_OK) *out = p;
  return st;
}

/* FNV-1a over the module and the words. */
static uint32_t program_hash(nxv_spv_module m, const uint32_t *words, uint32_t n) {
  uint32_t h = 2166136261u ^ (uint32_t)m;
  h *= 16777619u;
  for (uint32_t i = 0; i < n; i++) {
    h ^= words[i];
    h *= 16777619u;
  }
  return h;
}

nxv_status nxv_registry_program(nxv_registry *r, nxv_spv_module m,
                                const uint32_t *words, uint32_t nwords,
                                VkPipeline *out) {
  if ((unsigned)m >= NXV_SPV_COUNT || nwords > NXV_REGISTRY_PROGRAM_WORDS ||
      (nwords && !words))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "no program pipeline for module %d with %u words", (int)m, nwords);
  uint32_t i = program_hash(m, words, nwords) & (PROGRAM_TABLE - 1);
  nxv_status st = NXV_OK;
  pthread_mutex_lock(&r->mu);
  for (;; i = (i + 1) & (PROGRAM_TABLE - 1)) {
    program_entry *e = &r->programs[i];
    if (!e->pipeline) break;
    if (e->module == (uint32_t)m && e->nwords == nwords &&
        memcmp(e->words, words, nwords * sizeof *words) == 0) {
      atomic_fetch_add_explicit(&r->hits, 1, memory_order_relaxed);
      *out = e->pipeline;
      pthread_mutex_unlock(&r->mu);
      return NXV_OK;
    }
  }
  if (atomic_load(&r->nprograms) >= NXV_REGISTRY_PROGRAMS) {
    st = nxv_fail(NXV_ERR_UNSUPPORTED,
                  "%s: more than %d distinct programs on one device",
                  nxv_spv_name[m], NXV_REGISTRY_PROGRAMS);
  } else {
    atomic_fetch_add(&r->misses, 1);
    VkPipeline p;
    st = create_locked(r, m, 0, 0, words, nwords, &p);
    if (st == NXV_OK) {
      program_entry *e = &r->programs[i];
      e->module = (uint32_t)m;
      e->nwords = nwords;
      if (nwords) memcpy(e->words, words, nwords * sizeof *words);
      e->pipeline = p;
      atomic_fetch_add(&r->nprograms, 1);
      *out = p;
    }
  }
  pthread_mutex_unlock(&r->mu);
  return st;
}

void nxv_registry_stats(nxv_registry *r, nxv_stats *st) {
  st->pipeline_hits = atomic_load(&r->hits);
  st->pipeline_misses = atomic_load(&r->misses);
  st->pipeline_disk_hits = atomic_load(&r->disk_hits);
  st->pipelines = atomic_load(&r->created);
  st->pipelines_pruned = atomic_load(&r->pruned);
  /* Not under mu, which a pipeline's creation holds for up to a second. */
  st->program_pipelines = atomic_load(&r->nprograms);
}
