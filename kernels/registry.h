/*
 * registry.h - op -> compute pipeline.
 *
 * Every SPIR-V module embedded at build time (build/gen/spirv.h) is a
 * family of kernels; a pipeline is a module plus specialization constants:
 *   id 0  workgroup size (the device default, or the module's fixed size)
 *   id 1  op within the family
 *   id 2  variant (contiguous / strided, thread / workgroup reduction, ...)
 * A pipeline is created from its module pruned of what its specialization
 * constants rule out (kernels/spv_prune.h), a module of its own destroyed
 * once the pipeline exists, unless the registry was created without
 * pruning or nothing was pruned (then the family's shared module).
 * Pipelines are created on first use, once, under a mutex, and then read
 * lock-free; they live as long as the registry. All pipelines share one
 * layout: no descriptor sets and NXV_PUSH_CONSTANTS_MAX bytes of push
 * constants (clamped to the device's limit).
 *
 * Thread safety: every function is thread-safe.
 */
#ifndef NXV_KERNELS_REGISTRY_H
#define NXV_KERNELS_REGISTRY_H

#include <stdint.h>

#include "nxv.h"
#include "sched/vk.h"
#include "spirv.h"

#define NXV_REGISTRY_OPS 64
#define NXV_REGISTRY_VARIANTS 6
/* Pipelines specialized by a program (nxv_registry_program): at most this
 * many per registry, of at most NXV_REGISTRY_PROGRAM_WORDS words each. */
#define NXV_REGISTRY_PROGRAMS 1024
#define NXV_REGISTRY_PROGRAM_WORDS 24

/* coopmat.comp's tile of C per workgroup and its threads (CM_BM, CM_BN,
 * 32 CM_WGM CM_WGN there). */
#define NXV_COOPMAT_BM 128u
#define NXV_COOPMAT_BN 128u
#define NXV_COOPMAT_THREADS 128u
/* Its shared memory in bytes: the A and B slices (rows padded by 8
 * elements) and one 16x16 f32 tile per subgroup. */
#define NXV_COOPMAT_SHARED (16u * (1152u + 1152u) + 4u * 4u * 256u)

typedef struct nxv_registry nxv_registry;

/* cache: the VkPipelineCache to create pipelines through (not owned).
 * prune: create each pipeline from its module pruned for its
 * specialization constants (nxv_spv_prune) rather than the whole module. */
nxv_status nxv_registry_create(const nxv_vk *vk, VkPipelineCache cache, bool prune,
                               nxv_registry **out_registry);
/* Destroys every pipeline and module. The GPU must be done with them. */
void nxv_registry_destroy(nxv_registry *registry);

VkPipelineLayout nxv_registry_layout(nxv_registry *registry);
/* Workgroup size (a power of two) used for spec constant 0. */
uint32_t nxv_registry_workgroup_size(nxv_registry *registry);

/* The pipeline for (module, op, variant), created if needed. */
nxv_status nxv_registry_pipeline(nxv_registry *registry, nxv_spv_module module,
                                 uint32_t op, uint32_t variant,
                                 VkPipeline *out_pipeline);

/* The pipeline of module specialized by a program: nwords (at most
 * NXV_REGISTRY_PROGRAM_WORDS) words as specialization constants 3,
 * 4, ... (0 is the workgroup size, 1 and 2 are 0). Created on first use of
 * the same (module, words) and kept until the registry is destroyed;
 * NXV_ERR_UNSUPPORTED once NXV_REGISTRY_PROGRAMS exist. Counted in the
 * same statistics as nxv_registry_pipeline. */
nxv_status nxv_registry_program(nxv_registry *registry, nxv_spv_module module,
                                const uint32_t *words, uint32_t nwords,
                                VkPipeline *out_pipeline);

/* Fills pipeline_hits, pipeline_misses, pipeline_disk_hits, pipelines,
 * pipelines_pruned, program_pipelines. */
void nxv_registry_stats(nxv_registry *registry, nxv_stats *stats);

#endif
