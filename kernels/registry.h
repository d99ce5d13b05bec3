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
 * Pipelines are created once, on first use, and then read lock-free; they
 * live as long as the registry. All pipelines share one layout: no
 * descriptor sets and NXV_PUSH_CONSTANTS_MAX bytes of push constants
 * (clamped to the device's limit).
 *
 * Creation in the background: a registry with worker threads creates a
 * missing pipeline on one of them, so a thread that queues ops goes on
 * while their pipelines are compiled, several at once (drivers compile
 * pipelines in parallel: on an H100, the 31 pipelines of nxv_bench's
 * pipeline suite took 0.52-0.61 s with four threads against 1.65-2.05 s
 * created one at a time, before NVIDIA's driver got a serial registry).
 * The *_start functions hand back the creation as an
 * nxv_pending_pipeline, which a node carries to the scheduler; it waits
 * for the pipeline when it records the node.
 * Without workers, the *_start functions create the pipeline before they
 * return, on the calling thread. Two requests for one pipeline share one
 * creation either way.
 *
 * A registry created serial calls vkCreateComputePipelines for one
 * pipeline at a time, whatever the threads creating (workers or callers);
 * the rest of a creation (pruning, its module) still runs in parallel.
 * The device asks for it on NVIDIA's proprietary driver: there, pipelines
 * created at once on several threads into one pipeline cache, each from a
 * pruned module of its own, now and then ran other code than their own on
 * the GPU, and hung it (docs/benchmarks.md, "the stall with pipeline
 * threads reproduced").
 *
 * Thread safety: every function is thread-safe.
 */
#ifndef NXV_KERNELS_REGISTRY_H
#define NXV_KERNELS_REGISTRY_H

#include <stdint.h>

#include "nxv.h"
#include "sched/scheduler.h"
#include "sched/vk.h"
#include "spirv.h"

#define NXV_REGISTRY_OPS 64
#define NXV_REGISTRY_VARIANTS 16
/* Pipelines specialized by a program (nxv_registry_program): at most this
 * many per registry, of at most NXV_REGISTRY_PROGRAM_WORDS words each. */
#define NXV_REGISTRY_PROGRAMS 1024
#define NXV_REGISTRY_PROGRAM_WORDS 117

/* coopmat.comp's tile of C per workgroup and its threads (CM_BM, CM_BN,
 * 32 CM_WGM CM_WGN there). */
#define NXV_COOPMAT_BM 128u
#define NXV_COOPMAT_BN 128u
#define NXV_COOPMAT_THREADS 128u
/* Its shared memory in bytes: the A and B slices (rows padded by 8
 * elements) and one 16x16 f32 tile per subgroup. */
#define NXV_COOPMAT_SHARED (16u * (1152u + 1152u) + 4u * 4u * 256u)

typedef struct nxv_registry nxv_registry;

/* Most worker threads a registry may have. */
#define NXV_REGISTRY_MAX_THREADS 64

/* cache: the VkPipelineCache to create pipelines through (not owned).
 * prune: create each pipeline from its module pruned for its
 * specialization constants (nxv_spv_prune) rather than the whole module.
 * threads: worker threads creating pipelines in the background (at most
 * NXV_REGISTRY_MAX_THREADS); 0: each pipeline is created by the first
 * thread that asks for it. serial: one vkCreateComputePipelines call at a
 * time (above). */
nxv_status nxv_registry_create(const nxv_vk *vk, VkPipelineCache cache, bool prune,
                               uint32_t threads, bool serial,
                               nxv_registry **out_registry);
/* Stops the workers (creations under way finish first; queued ones are
 * dropped, failing whoever still waits for them) and destroys every
 * pipeline and module. The GPU must be done with them. */
void nxv_registry_destroy(nxv_registry *registry);

VkPipelineLayout nxv_registry_layout(nxv_registry *registry);
/* Workgroup size (a power of two) used for spec constant 0. */
uint32_t nxv_registry_workgroup_size(nxv_registry *registry);

/* The pipeline for (module, op, variant), created if needed; waits for a
 * creation under way. Errors: no such slot, or the creation failed. */
nxv_status nxv_registry_pipeline(nxv_registry *registry, nxv_spv_module module,
                                 uint32_t op, uint32_t variant,
                                 VkPipeline *out_pipeline);

/* The pipeline for (module, op, variant) without waiting for it: where it
 * exists, *out_pipeline is it and *out_pending NULL; otherwise its creation
 * is started on a worker (or joined, if under way) and *out_pending holds
 * one reference to it (release it with its release function), with
 * *out_pipeline VK_NULL_HANDLE. Errors: no such slot; without workers also
 * a failed creation (then nothing is pending). */
nxv_status nxv_registry_pipeline_start(nxv_registry *registry, nxv_spv_module module,
                                       uint32_t op, uint32_t variant,
                                       VkPipeline *out_pipeline,
                                       nxv_pending_pipeline **out_pending);

/* The pipeline of module specialized by a program: nwords (at most
 * NXV_REGISTRY_PROGRAM_WORDS) words as specialization constants 3,
 * 4, ... (0 is the workgroup size, 1 and 2 are 0). Created on first use of
 * the same (module, words) and kept until the registry is destroyed;
 * NXV_ERR_UNSUPPORTED once NXV_REGISTRY_PROGRAMS exist or are being
 * created. Counted in the same statistics as nxv_registry_pipeline. A
 * failed creation frees its place: a later request tries again. */
nxv_status nxv_registry_program(nxv_registry *registry, nxv_spv_module module,
                                const uint32_t *words, uint32_t nwords,
                                VkPipeline *out_pipeline);

/* nxv_registry_program without waiting, as nxv_registry_pipeline_start. */
nxv_status nxv_registry_program_start(nxv_registry *registry, nxv_spv_module module,
                                      const uint32_t *words, uint32_t nwords,
                                      VkPipeline *out_pipeline,
                                      nxv_pending_pipeline **out_pending);

/* Test hook: the next pipeline creation fails with
 * NXV_ERR_OUT_OF_DEVICE_MEMORY, as if the driver had returned
 * VK_ERROR_OUT_OF_DEVICE_MEMORY. */
void nxv_registry_inject_fault(nxv_registry *registry);

/* The most vkCreateComputePipelines calls this registry has had under way
 * at once (1 or less when serial). */
uint32_t nxv_registry_max_concurrent_creations(nxv_registry *registry);

/* Fills pipeline_hits, pipeline_misses, pipeline_disk_hits, pipelines,
 * pipelines_pruned, program_pipelines. */
void nxv_registry_stats(nxv_registry *registry, nxv_stats *stats);

#endif
