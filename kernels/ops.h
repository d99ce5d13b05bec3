/*
 * ops.h - internal entry points of the op builders (kernels/ops.c) used by
 * other runtime modules. The public ops are declared in include/nxv.h.
 */
#ifndef NXV_KERNELS_OPS_H
#define NXV_KERNELS_OPS_H

#include <stdint.h>

#include "sched/device.h"

/* Makes node a dispatch of the word-copy kernel moving `words` 32-bit
 * words from device address src to device address dst (both 4-byte
 * aligned; 4-wide accesses are used when both are 16-byte aligned) and
 * queues it. The node must already hold the buffer references and flags it
 * needs. Takes ownership of node in every case. Thread-safe. */
nxv_status nxv_ops_push_word_copy(nxv_device *device, nxv_node *node, uint64_t src,
                                  uint64_t dst, uint64_t words);

#endif
