/*
 * ops.h - internal entry points of the op builders (kernels/ops.c) used by
 * other runtime modules. The public ops are declared in include/nxv.h.
 */
#ifndef NXV_KERNELS_OPS_H
#define NXV_KERNELS_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "sched/device.h"

/* Makes node a dispatch of the word-copy kernel moving `words` 32-bit
 * words from device address src to device address dst (both 4-byte
 * aligned; 4-wide accesses are used when both are 16-byte aligned) and
 * queues it. The node must already hold the buffer references and flags it
 * needs. Takes ownership of node in every case. Thread-safe. */
nxv_status nxv_ops_push_word_copy(nxv_device *device, nxv_node *node, uint64_t src,
                                  uint64_t dst, uint64_t words);

/* The constants that divide by p (>= 1) in binary.comp's repeated rows:
 * for every i < 2^31, i / p == (uint32_t)(((uint64_t)i * *out_magic) >> 32)
 * >> *out_shift, or, where *out_magic is 0 (p a power of two),
 * i >> *out_shift. Pure. */
void nxv_ops_div_magic(uint32_t p, uint32_t *out_shift, uint32_t *out_magic);

/* Validates a shape (rank at most NXV_MAX_RANK, no negative dimension,
 * fewer than 2^32 elements); *out_n is its element count, 0 when a
 * dimension is 0. Pure apart from the error message. */
nxv_status nxv_ops_check_shape(uint32_t rank, const int64_t *shape, uint64_t *out_n);

/* Resolves view v over shape (rank dims, n elements) into explicit strides
 * (size-1 axes get stride 0) and checks its device and that every element
 * it reaches lies in its tensor. Does not compute a deferred tensor (its
 * element count is known). Pure apart from the error message. */
nxv_status nxv_ops_view_strides(nxv_device *device, const char *what, const nxv_view *v,
                                uint32_t rank, const int64_t *shape, uint64_t n,
                                int64_t *out_strides);

/* nxv_binary (imm NULL) and nxv_binary_scalar (one of a and b NULL, imm the
 * immediate's bits), and nxv_unary, always queued now: never deferred.
 * Thread-safe. */
nxv_status nxv_ops_binary_eager(nxv_device *device, nxv_binary_op op, uint32_t rank,
                                const int64_t *shape, const nxv_view *a,
                                const nxv_view *b, const void *imm,
                                nxv_tensor **out_tensor);
nxv_status nxv_ops_unary_eager(nxv_device *device, nxv_unary_op op, uint32_t rank,
                               const int64_t *shape, const nxv_view *a,
                               nxv_tensor **out_tensor);

/* Whether instruction class cls and op are a basic op, one the
 * interpreting fused kernel runs: unary copy, negate, abs and square;
 * binary add, subtract, multiply, divide, max and min. Pure. */
bool nxv_ops_fused_basic(uint32_t cls, uint32_t op);

/* nxv_fused, or with interpret a program of basic ops (else
 * NXV_ERR_INVALID_ARGUMENT) run through the interpreting kernel (one
 * pipeline for every program, none created per program) instead of a
 * pipeline specialized for it; both compute the same bits. The inputs
 * whose bit is set in imm_mask are immediates: their views are ignored and
 * imm_bits[k] holds input k's bits of dtype in its low bytes (a
 * specialized pipeline is then one of the program and its mask).
 * Thread-safe. */
nxv_status nxv_ops_fused(nxv_device *device, nxv_dtype dtype, uint32_t rank,
                         const int64_t *shape, uint32_t ninputs, const nxv_view *inputs,
                         uint32_t imm_mask, const uint64_t *imm_bits, uint32_t ninstrs,
                         const uint32_t *program, bool interpret, nxv_tensor **out_tensor);

/* What an elementwise op (binary.comp and its mixed modules, unary.comp,
 * compare.comp, select.comp) hands its kernel, for checking the
 * preconditions of the kernels' wide paths where a device does not: a
 * 16-byte load from an address that is not 16-byte aligned faults or
 * reads other bytes on a GPU, while lavapipe serves it. The meaning of
 * flags is the kernel's (its PC block's comment; elementwise() in ops.c).
 * Every pointer is valid only during the hook's call. */
typedef struct nxv_ops_ew_dispatch {
  const char *op;       /* the op's name (static storage) */
  int nops;             /* operands, 1 to 3 */
  int imm;              /* the immediate operand, -1 when there is none */
  bool select;          /* select.comp: operand 0 is the u8 predicate */
  bool mixed;           /* binary.comp's mixed modules (two operand types) */
  size_t in_size[3];    /* bytes per element of each operand */
  size_t out_size;      /* bytes per element of the result */
  uint32_t variant;     /* low 3 bits: 0 contiguous, 1 strided, 2-4 tiled */
  uint32_t flags;       /* the push constants' flag word */
  uint64_t n;           /* elements of the result */
  uint64_t addr[3];     /* each operand's address in the push constants:
                           contiguous, its first element (an immediate's:
                           another operand's, never read); otherwise its
                           buffer's start */
  uint64_t out_addr;    /* the result's first element */
  const uint32_t *args; /* tiled: rows, columns, then per operand its
                           strides along depth, rows and columns and its
                           offset; NULL otherwise */
} nxv_ops_ew_dispatch;

typedef void (*nxv_ops_ew_hook)(const nxv_ops_ew_dispatch *dispatch);

/* Installs hook (NULL removes it), process-wide: every elementwise op then
 * calls it on the calling thread with its dispatch, just before queueing
 * it. For tests. Thread-safe; a hook runs on every thread that builds
 * ops, so it must be thread-safe itself. */
void nxv_ops_set_ew_hook(nxv_ops_ew_hook hook);

#endif
