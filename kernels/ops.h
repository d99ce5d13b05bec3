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

/* The longest program the interpreting kernel runs (fused.comp,
 * MAX_INS_INTERP). */
#define NXV_OPS_INTERP_MAX_INSTRS 16

/* nxv_fused, or with interpret a program of at most
 * NXV_OPS_INTERP_MAX_INSTRS basic ops (else NXV_ERR_INVALID_ARGUMENT;
 * literals allowed) run through the interpreting kernel (one
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

/* The kernels whose dispatches nxv_ops_set_dispatch_hook reports: those
 * with wide paths, reading or writing 4 elements or 16 bytes at a time
 * where their operands' alignment allows. */
typedef enum nxv_ops_kind {
  NXV_OPS_ELEMENTWISE, /* binary.comp (and its mixed modules), unary.comp,
                          compare.comp, select.comp */
  NXV_OPS_REDUCE,      /* reduce.comp's first pass */
  NXV_OPS_TRANSPOSE,   /* transpose.comp (a transposed copy, 16-byte tiles) */
  NXV_OPS_WORD_COPY,   /* unary.comp copying 32-bit words (tensor copies) */
} nxv_ops_kind;

/* What an op hands one of those kernels, for checking the preconditions
 * of the wide paths where a device does not: a 16-byte load from an
 * address that is not 16-byte aligned faults or reads other bytes on a
 * GPU, while lavapipe serves it. flags means what the kernel's PC block
 * says (elementwise() and reduce() in ops.c). Every pointer is valid only
 * during the hook's call. */
typedef struct nxv_ops_dispatch {
  nxv_ops_kind kind;
  const char *op;    /* the op's name (static storage) */
  uint32_t variant;  /* the pipeline's VARIANT */
  uint32_t flags;    /* the push constants' flag word (transpose: 0) */
  uint64_t out_addr; /* the result's first element (word copy: the
                        destination) */
  size_t out_size;   /* bytes per element of the result (word copy: 4) */
  union {
    struct {
      int nops;          /* operands, 1 to 3 */
      int imm;           /* the immediate operand, -1 when there is none */
      bool select;       /* select.comp: operand 0 is the u8 predicate */
      bool mixed;        /* binary.comp's mixed modules (two operand types) */
      size_t in_size[3]; /* bytes per element of each operand */
      uint64_t n;        /* elements of the result */
      uint64_t addr[3];  /* each operand's address in the push constants:
                            in the contiguous variant (0) its first
                            element's (an immediate's: another operand's,
                            never read), otherwise its buffer's start */
      const uint32_t *args; /* tiled variants (2-4): rows, columns, then
                               per operand its strides along depth, rows
                               and columns and its offset; else NULL */
    } ew;
    struct {
      uint64_t addr;      /* the input buffer's start */
      int64_t offset;     /* elements before the input's first */
      size_t in_size;     /* bytes per input element */
      uint32_t rank_kept; /* kept (output) axes after collapsing */
      uint32_t rank_red;  /* reduced axes after collapsing */
      const int64_t *kept_shape, *kept_strides; /* rank_kept each */
      const int64_t *red_shape, *red_strides;   /* rank_red each */
      uint32_t nsplit;    /* chunks the reduced elements are cut into */
      uint32_t kchunk;    /* reduced elements per chunk (nsplit > 1) */
    } reduce;
    struct {
      uint64_t addr;   /* the input buffer's start */
      int64_t offset;  /* elements before the input's first */
      size_t size;     /* bytes per element (input and result) */
      int64_t rows, cols; /* the result's last two axes */
      int64_t depth_stride, col_stride; /* the input's strides along the
                                           first axis (0 for two axes)
                                           and the columns; along the
                                           rows 1 */
    } transpose;
    struct {
      uint64_t src;   /* the source address */
      uint64_t words; /* 32-bit words moved */
    } words;
  };
} nxv_ops_dispatch;

typedef void (*nxv_ops_dispatch_hook)(const nxv_ops_dispatch *dispatch);

/* Installs hook (NULL removes it), process-wide: every op queueing one of
 * the kernels of nxv_ops_kind then calls it on the calling thread with the
 * dispatch, just before queueing it. For tests. Thread-safe; a hook runs
 * on every thread that builds ops, so it must be thread-safe itself. */
void nxv_ops_set_dispatch_hook(nxv_ops_dispatch_hook hook);

#endif
