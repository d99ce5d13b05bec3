/*
 * spv_prune.h - a SPIR-V module specialized by the values of its
 * specialization constants, for the driver to compile less.
 *
 * Kernel families select their op (and a fused program its ops) by
 * specialization constants: one module holds every op, and a switch on a
 * constant picks one. Drivers translate and inline the whole module before
 * they fold those switches, so a module that carries the double-precision
 * math library (math64.glsl) costs about a second to compile whatever op
 * it is specialized for. nxv_spv_prune evaluates the module's
 * specialization constants (OpSpecConstant, OpSpecConstantTrue/False and
 * the integer and boolean OpSpecConstantOp expressions over them) with the
 * values the pipeline will be created with, and then, in every function:
 * - a selection (OpSelectionMerge followed by OpBranchConditional or
 *   OpSwitch) whose condition or selector is known becomes a switch with
 *   only a default target, the branch taken (so the construct, and every
 *   break to its merge block, stays valid);
 * - blocks no longer reachable from the function's entry are removed, and
 *   OpPhi instructions lose the pairs of removed or no longer preceding
 *   blocks; a merge block that is declared but unreachable keeps its label
 *   and becomes OpUnreachable;
 * - functions no longer called from an entry point are removed, with the
 *   decorations of the ids they and the removed blocks defined;
 * - debug instructions (OpName, OpSource, ...) are dropped.
 * The specialization constants themselves stay: the pipeline is still
 * created with the same VkSpecializationInfo, so the result computes
 * exactly what the original module specialized that way computes.
 *
 * Anything the pass does not handle (a module it cannot parse, an
 * unreachable loop continue target, a selector wider than 32 bits,
 * decoration groups, a phi of more than 64 predecessors) leaves the module
 * as it is: *out_words is NULL and the caller uses the original.
 *
 * Thread safety: pure functions of their arguments.
 */
#ifndef NXV_KERNELS_SPV_PRUNE_H
#define NXV_KERNELS_SPV_PRUNE_H

#include <stddef.h>
#include <stdint.h>

#include "nxv.h"

/* One specialization constant's value: SpecId id, a 32-bit value (bools:
 * 0 or 1, as VkBool32). */
typedef struct nxv_spv_spec {
  uint32_t id;
  uint32_t value;
} nxv_spv_spec;

/* Prunes words (nwords 32-bit words, a whole module) for the given
 * specialization values (nspecs entries; constants not listed keep their
 * default). On success *out_words is a new malloc'd module the caller
 * frees (nwords in *out_nwords), or NULL when nothing was pruned or the
 * module is not one the pass handles. Fails only when host memory runs out
 * (NXV_ERR_OUT_OF_HOST_MEMORY). */
nxv_status nxv_spv_prune(const uint32_t *words, size_t nwords,
                         const nxv_spv_spec *specs, uint32_t nspecs,
                         uint32_t **out_words, size_t *out_nwords);

#endif
