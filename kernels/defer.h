/*
 * defer.h - deferred elementwise results, computed by one fused kernel.
 *
 * With nxv_device_config.defer_elementwise, a float elementwise op
 * (nxv_unary, nxv_binary, nxv_binary_scalar on f16, bf16, f32 or f64, of a
 * basic op: nxv_ops_fused_basic) queues nothing: it returns a tensor in
 * the PENDING state that holds the op as a program over its inputs. An op whose operand is such a tensor takes the operand's program
 * into its own, so a chain of elementwise ops becomes one program. The first
 * reader of a pending tensor (any op, a download, a reinterpret: every
 * function that reads tensor->buf calls nxv_tensor_ready first) computes it:
 * a single op with its own kernel, a longer program with the interpreting
 * fused kernel (nxv_ops_fused), so the result is bitwise what the ops run
 * one by one would give. A pending tensor that is released unread costs no GPU work.
 *
 * A deferred result waits at most until the device's next op: a deferred
 * op either takes it in or computes it, a kernel computes it before it is
 * queued (the device's window holds the latest one), so the GPU is not
 * kept waiting for work the host has long issued.
 *
 * Invariants: a program's tensor inputs are READY (a pending operand is
 * taken in, or computed before the consumer is deferred), so computing a
 * pending tensor never recurses; a program holds at most
 * NXV_FUSED_MAX_INPUTS inputs and NXV_OPS_INTERP_MAX_INSTRS instructions
 * (what the interpreting kernel runs).
 */
#ifndef NXV_KERNELS_DEFER_H
#define NXV_KERNELS_DEFER_H

#include <stdbool.h>
#include <stdint.h>

#include "sched/device.h"

/* Defers the op cls/op (NXV_FUSED_UNARY or NXV_FUSED_BINARY) of dtype over
 * shape when the device and the op allow it (a basic op,
 * nxv_ops_fused_basic): *out_deferred is then true and
 * *out_tensor a new pending tensor (one reference, the caller's). Otherwise
 * *out_deferred is false and nothing changed: the caller runs the op.
 * operands holds nops (1 or 2) views; for a binary op one of them may be
 * NULL, the immediate imm (bits of dtype) taking its place. The caller has
 * validated the op, dtype and operands' dtypes; the views are checked here
 * as the op would. A pending operand that cannot be taken in is computed
 * first (its kernel queued). Thread-safe. */
nxv_status nxv_defer_op(nxv_device *device, uint32_t cls, uint32_t op, nxv_dtype dtype,
                        uint32_t rank, const int64_t *shape, uint32_t nops,
                        const nxv_view *const operands[], const void *imm,
                        bool *out_deferred, nxv_tensor **out_tensor);

/* Computes the deferred result waiting in device's window, if any and if
 * no other thread holds it (kernels call it before queueing a node; a
 * failure leaves it deferred for its reader to report). Thread-safe. */
void nxv_defer_flush(nxv_device *device);

/* Frees a program and releases its inputs. */
void nxv_defer_discard(nxv_pending *pending);

/* The last release of a tensor created deferred: takes it out of its
 * device's window and frees its program if it was never computed. */
void nxv_defer_forget(nxv_tensor *tensor);

#endif
