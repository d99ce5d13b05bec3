/*
 * ops.c - the op API of nxv.h: validates arguments, picks the kernel,
 * encodes push constants and arguments, queues the node. Never waits.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "kernels/defer.h"
#include "kernels/registry.h"
#include "sched/device.h"
#include "sched/status.h"

/* Split k for products with few 64x64 tiles: at least NXV_SPLIT_MIN_K long,
 * in chunks of at least NXV_SPLIT_MIN_CHUNK. On an H100, chunks of 32
 * instead of 128 ran the MLP-shaped products (128x784x512, 128x512x512,
 * 128x512x10) 1.3-1.9x faster; splitting products with k = 128 as well
 * made them 3x slower (the partial tiles' traffic and second pass). */
#define NXV_SPLIT_MIN_K 512
#define NXV_SPLIT_MIN_CHUNK 32
/* Workgroups a split product aims for. 128 made the benchmark's products
 * queued back to back faster (their chunks overlap) but each product alone
 * 2-11 us slower on an H100; 512 and 1024 were no faster. Again on an H200
 * with the 4-wide combining pass: 128 took 512^3 from 15.1 to 22.1 TFLOP/s
 * back to back but from 17.7 to 25.2 us alone (128x784x512 12.3 -> 14.9
 * us alone); 512 lost back to back (512^3 14.2) and alone measured within
 * 0.4 us or 1.2 us slower (128x784x512 13.5 us). */
#define NXV_SPLIT_TARGET_GROUPS 256
/* Mid-sized products (fewer than 96 tiles of 128x128, at least 128 of
 * 64x64) take 128x128 tiles over chunks of k of at least
 * NXV_SPLIT128_MIN_CHUNK, aiming for NXV_SPLIT128_TARGET_GROUPS
 * workgroups. On an H100, f32 1024^3 (64 tiles): 64x64 tiles 25.2 TFLOP/s
 * queued back to back, 101.8 us alone; 128x128 tiles, k in 2 chunks
 * 28.3, 82.0 us; in 4 chunks 26.1, 87.7 us; 128x128 tiles unsplit 36.8
 * back to back (the products overlap) but 128.2 us alone; matmul.comp's
 * 256 threads of 4x4 per 64x64 tile 23.4, 98.6 us. Again on an H200 with
 * deep k slices: 2 chunks 32.4, 68.2 us; 3 chunks 31.5, 86.0 us; 4
 * chunks 30.7, 72.3 us; 64x64 tiles 30.5, 75.7 us; unsplit 41.4 back to
 * back, 100.9 us alone. */
#define NXV_SPLIT128_MIN_CHUNK 256
#define NXV_SPLIT128_TARGET_GROUPS 128

#define MAX_GROUPS 65535u

/* Push-constant layouts; they mirror the PC blocks of the shaders. */
typedef struct pc_ew {  /* binary, unary, compare, select (.comp) */
  uint64_t a, b, c, args;
  uint32_t n, rank, flags, pad;
  uint64_t in2;         /* third operand (select's on_false); in the
                         * strided variants of binary and compare, the
                         * bits of an immediate operand */
} pc_ew;
typedef struct pc_reduce {        /* reduce.comp (argreduce.comp: up to rank_red) */
  uint64_t a, c, args;
  uint32_t n_out, k, rank_kept, rank_red;
  uint64_t part;                  /* split reductions: partial results */
  uint32_t kchunk, nsplit;
  uint32_t flags, pad;            /* bit 0: 4-wide loads (reduce.comp) */
} pc_reduce;
typedef struct pc_matmul {        /* matmul.comp */
  uint64_t a, b, c;
  uint32_t m, n, k, batch_base;
  int32_t a_sb, a_sm, a_sk, b_sb, b_sk, b_sn;
  uint32_t a_off, b_off;
  uint64_t part;                  /* gemm.comp split k: partial tiles */
  uint32_t kchunk, nsplit, nbatch;
  uint32_t combine4;              /* gemm.comp's combining pass: 4 results a thread */
} pc_matmul;
typedef struct pc_fill {          /* fill.comp */
  uint64_t c;
  uint32_t n, pad, lo, hi;
} pc_fill;
typedef struct pc_iota {          /* iota.comp */
  uint64_t c;
  uint32_t n, axis_size, inner, pad;
} pc_iota;
typedef struct pc_sort {          /* sort.comp */
  uint64_t a, keys, idx, vals, inds;
  uint32_t rows, len, p, k, j, flags;
} pc_sort;
typedef struct pc_window {        /* window.comp */
  uint64_t a, c, args;
  uint32_t n_out, win_count, rank, planes;
} pc_window;
typedef struct pc_gather {        /* gather.comp */
  uint64_t a, idx, c, args;
  uint32_t n, rank, depth, count;
} pc_gather;

typedef struct pc_fused {         /* fused.comp */
  uint64_t c, args;
  uint32_t n, rank;
  uint64_t in[NXV_FUSED_MAX_INPUTS];
  uint64_t c2; /* the second result (programs of two) */
} pc_fused;

_Static_assert(sizeof(pc_ew) == 56, "pc_ew layout");
_Static_assert(sizeof(pc_fused) == 128, "pc_fused layout");
_Static_assert(sizeof(pc_fused) <= NXV_PUSH_CONSTANTS_MAX, "pc_fused fits every device");
/* The push constants of a program of one result (c2 not pushed). */
#define PC_FUSED_ONE offsetof(pc_fused, c2)
_Static_assert(NXV_REGISTRY_PROGRAM_WORDS >= 5 + NXV_FUSED_MAX_INSTRS,
               "a fused program's specialization words fit a registry program");
_Static_assert(sizeof(pc_reduce) == 64, "pc_reduce layout");
_Static_assert(sizeof(pc_matmul) == 96, "pc_matmul layout");

static const char *kBinaryNames[NXV_BINARY_OP_COUNT] = {
    "add", "subtract", "multiply", "divide", "max", "min", "pow",
    "remainder", "quotient", "atan2", "bitwise_and", "bitwise_or",
    "bitwise_xor", "left_shift", "right_shift"};
static const char *kUnaryNames[NXV_UNARY_OP_COUNT] = {
    "copy", "negate", "abs", "sign", "sqrt", "rsqrt", "exp", "log", "sin",
    "cos", "tanh", "sigmoid", "floor", "ceil", "round", "bitwise_not",
    "square", "expm1", "log1p", "erf", "erfc", "erf_inv", "tan", "sinh",
    "cosh", "cbrt", "asin", "acos", "atan", "asinh", "acosh", "atanh",
    "count_leading_zeros", "population_count", "conjugate", "real", "imag",
    "phase"};
static const char *kReduceNames[NXV_REDUCE_OP_COUNT] = {"sum", "product",
                                                        "max", "min"};
static const char *kCompareNames[NXV_COMPARE_OP_COUNT] = {
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "logical_and", "logical_or", "logical_xor"};

const char *nxv_binary_op_name(nxv_binary_op op) {
  return (unsigned)op < NXV_BINARY_OP_COUNT ? kBinaryNames[op] : "invalid";
}
const char *nxv_unary_op_name(nxv_unary_op op) {
  return (unsigned)op < NXV_UNARY_OP_COUNT ? kUnaryNames[op] : "invalid";
}
const char *nxv_reduce_op_name(nxv_reduce_op op) {
  return (unsigned)op < NXV_REDUCE_OP_COUNT ? kReduceNames[op] : "invalid";
}
const char *nxv_compare_op_name(nxv_compare_op op) {
  return (unsigned)op < NXV_COMPARE_OP_COUNT ? kCompareNames[op] : "invalid";
}

#define B(op) (1ull << (op))
static bool is_float(nxv_dtype t) {
  return t == NXV_F16 || t == NXV_BF16 || t == NXV_F32 || t == NXV_F64;
}
static bool is_complex(nxv_dtype t) { return t == NXV_C64 || t == NXV_C128; }
/* The component type of a complex type. */
static nxv_dtype complex_part(nxv_dtype t) { return t == NXV_C128 ? NXV_F64 : NXV_F32; }

/* Ops each type's kernels implement. */
static uint64_t binary_ops(nxv_dtype t) {
  const uint64_t common = B(NXV_ADD) | B(NXV_SUB) | B(NXV_MUL) | B(NXV_DIV) |
                          B(NXV_MAX) | B(NXV_MIN) | B(NXV_REM);
  if ((unsigned)t >= NXV_DTYPE_COUNT) return 0;
  if (is_complex(t)) return B(NXV_ADD) | B(NXV_SUB) | B(NXV_MUL) | B(NXV_DIV) | B(NXV_POW);
  if (t == NXV_F64) return common | B(NXV_POW) | B(NXV_ATAN2);
  if (is_float(t)) return common | B(NXV_POW) | B(NXV_ATAN2);
  return common | B(NXV_POW) | B(NXV_QUOTIENT) | B(NXV_BITWISE_AND) |
         B(NXV_BITWISE_OR) | B(NXV_BITWISE_XOR) | B(NXV_LEFT_SHIFT) |
         B(NXV_RIGHT_SHIFT);
}
static uint64_t unary_ops(nxv_dtype t) {
  if ((unsigned)t >= NXV_DTYPE_COUNT) return 0;
  if (is_complex(t))
    return B(NXV_COPY) | B(NXV_NEG) | B(NXV_ABS) | B(NXV_SQRT) | B(NXV_RSQRT) |
           B(NXV_EXP) | B(NXV_LOG) | B(NXV_SIN) | B(NXV_COS) | B(NXV_TANH) |
           B(NXV_SIGMOID) | B(NXV_SQUARE) | B(NXV_EXPM1) | B(NXV_LOG1P) |
           B(NXV_TAN) | B(NXV_SINH) | B(NXV_COSH) | B(NXV_CONJ) | B(NXV_REAL) |
           B(NXV_IMAG) | B(NXV_PHASE);
  if (is_float(t))
    return ((1ull << NXV_CLZ) - 1) & ~B(NXV_BITWISE_NOT);
  return B(NXV_COPY) | B(NXV_NEG) | B(NXV_ABS) | B(NXV_SIGN) | B(NXV_SQUARE) |
         B(NXV_BITWISE_NOT) | B(NXV_CLZ) | B(NXV_POPCOUNT);
}
#undef B

/* Modules come in families of one module per type, in nxv_dtype order
 * (tools/gen_variants.sh): binary, compare, select, reduce, matmul, iota
 * and gather for all 14 types, the others for the 12 real types;
 * conversions (and the types' unary ops) are a 14 x 14 block. */
#define REAL_TYPES 12
_Static_assert(NXV_F64 == REAL_TYPES - 1, "real types precede complex ones");
_Static_assert(NXV_C128 == NXV_DTYPE_COUNT - 1, "two complex types");
_Static_assert(NXV_SPV_BINARY_C128 - NXV_SPV_BINARY_S8 == NXV_C128, "binary family");
_Static_assert(NXV_SPV_COMPARE_C128 - NXV_SPV_COMPARE_S8 == NXV_C128, "compare family");
_Static_assert(NXV_SPV_SELECT_C128 - NXV_SPV_SELECT_S8 == NXV_C128, "select family");
_Static_assert(NXV_SPV_REDUCE_C128 - NXV_SPV_REDUCE_S8 == NXV_C128, "reduce family");
_Static_assert(NXV_SPV_MATMUL_C128 - NXV_SPV_MATMUL_S8 == NXV_C128, "matmul family");
_Static_assert(NXV_SPV_IOTA_C128 - NXV_SPV_IOTA_S8 == NXV_C128, "iota family");
_Static_assert(NXV_SPV_GATHER_C128 - NXV_SPV_GATHER_S8 == NXV_C128, "gather family");
_Static_assert(NXV_SPV_ARGREDUCE_F64 - NXV_SPV_ARGREDUCE_S8 == NXV_F64, "argreduce family");
_Static_assert(NXV_SPV_SORT_F64 - NXV_SPV_SORT_S8 == NXV_F64, "sort family");
_Static_assert(NXV_SPV_WINDOW_F64 - NXV_SPV_WINDOW_S8 == NXV_F64, "window family");
_Static_assert(NXV_SPV_UNARY_C128_C128 - NXV_SPV_UNARY_S8_S8 ==
                   NXV_DTYPE_COUNT * NXV_DTYPE_COUNT - 1, "unary block");
_Static_assert(NXV_SPV_UNARY_S16_S8 - NXV_SPV_UNARY_S8_S8 == NXV_DTYPE_COUNT, "unary rows");

static nxv_spv_module family(nxv_spv_module first, nxv_dtype t) {
  return (nxv_spv_module)(first + (int)t);
}
static nxv_spv_module unary_module(nxv_dtype from, nxv_dtype to) {
  return (nxv_spv_module)(NXV_SPV_UNARY_S8_S8 + (int)from * NXV_DTYPE_COUNT + (int)to);
}

/* Binary modules of a float type t with one operand of type u converted
 * as it is read (tools/gen_variants.sh): per t, the 8 integer types in
 * nxv_dtype order, then the float types narrower than t. */
_Static_assert(NXV_U64 == 7 && NXV_F16 == 8 && NXV_BF16 == 9 && NXV_F32 == 10,
               "integer types first, then f16, bf16, f32");
_Static_assert(NXV_SPV_BINARY_BF16_S8 - NXV_SPV_BINARY_F16_S8 == 8, "f16 mixed family");
_Static_assert(NXV_SPV_BINARY_F32_S8 - NXV_SPV_BINARY_BF16_S8 == 8, "bf16 mixed family");
_Static_assert(NXV_SPV_BINARY_F64_S8 - NXV_SPV_BINARY_F32_S8 == 10, "f32 mixed family");
_Static_assert(NXV_SPV_BINARY_F64_F32 - NXV_SPV_BINARY_F64_S8 == 10, "f64 mixed family");

/* Then those of an integer type t with one operand of an integer type u
 * whose every value t holds (a narrower signed type into a signed one, a
 * narrower unsigned type into either): from NXV_SPV_BINARY_S16_S8, ordered
 * by t, then u. */
_Static_assert(NXV_S8 == 0 && NXV_S64 == 3 && NXV_U8 == 4, "signed integer types first");
_Static_assert(NXV_SPV_BINARY_U64_U32 - NXV_SPV_BINARY_S16_S8 == 17, "integer mixed family");

/* Their offsets from NXV_SPV_BINARY_S16_S8 by [t][u] (s8 s16 s32 s64 u8
 * u16 u32 u64), -1 where t does not hold every value of u. */
static const int8_t kIntMixed[8][8] = {
    {-1, -1, -1, -1, -1, -1, -1, -1}, /* s8 */
    {0, -1, -1, -1, 1, -1, -1, -1},   /* s16: s8, u8 */
    {2, 3, -1, -1, 4, 5, -1, -1},     /* s32: s8, s16, u8, u16 */
    {6, 7, 8, -1, 9, 10, 11, -1},     /* s64: s8, s16, s32, u8, u16, u32 */
    {-1, -1, -1, -1, -1, -1, -1, -1}, /* u8 */
    {-1, -1, -1, -1, 12, -1, -1, -1}, /* u16: u8 */
    {-1, -1, -1, -1, 13, 14, -1, -1}, /* u32: u8, u16 */
    {-1, -1, -1, -1, 15, 16, 17, -1}, /* u64: u8, u16, u32 */
};

/* The module of binary ops on type t with one operand of type u converted
 * as it is read; false when there is none: t a float type and u neither an
 * integer type nor a float type narrower than t (f16 and bf16 take
 * integers only), or t an integer type that does not hold every value of
 * u. */
static bool mixed_module(nxv_dtype t, nxv_dtype u, nxv_spv_module *out_m) {
  static const int first[4] = {NXV_SPV_BINARY_F16_S8, NXV_SPV_BINARY_BF16_S8,
                               NXV_SPV_BINARY_F32_S8, NXV_SPV_BINARY_F64_S8};
  if (t <= NXV_U64) {
    if (u > NXV_U64 || kIntMixed[t][u] < 0) return false;
    *out_m = (nxv_spv_module)(NXV_SPV_BINARY_S16_S8 + kIntMixed[t][u]);
    return true;
  }
  if (t > NXV_F64 || u >= t) return false;
  if (u >= NXV_F16 && t < NXV_F32) return false; /* f16 and bf16: integers only */
  *out_m = (nxv_spv_module)(first[t - NXV_F16] + (int)u);
  return true;
}

/* The device can hold and compute dtype: a type whose storage width (and
 * for f64 and c128, double arithmetic) the device supports. */
static nxv_status check_type(nxv_device *d, nxv_dtype t, const char *op) {
  if ((unsigned)t >= NXV_DTYPE_COUNT)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: invalid dtype %d", op, (int)t);
  if ((t == NXV_F64 || t == NXV_C128) && !d->vk.info.float64)
    return nxv_fail(NXV_ERR_UNSUPPORTED,
                    "%s on %s: device %s has no shaderFloat64", op,
                    nxv_dtype_name(t), d->vk.info.name);
  size_t es = nxv_dtype_size(t);
  if (es == 1 && !d->vk.info.storage_8bit)
    return nxv_fail(NXV_ERR_UNSUPPORTED,
                    "%s on %s: device %s has no storageBuffer8BitAccess", op,
                    nxv_dtype_name(t), d->vk.info.name);
  if (es == 2 && !d->vk.info.storage_16bit)
    return nxv_fail(NXV_ERR_UNSUPPORTED,
                    "%s on %s: device %s has no storageBuffer16BitAccess", op,
                    nxv_dtype_name(t), d->vk.info.name);
  return NXV_OK;
}

/* check_type for the kernels that exist for real types only. */
static nxv_status check_real_type(nxv_device *d, nxv_dtype t, const char *op) {
  if (is_complex(t))
    return nxv_fail(NXV_ERR_UNSUPPORTED, "%s is not defined for complex type %s", op,
                    nxv_dtype_name(t));
  return check_type(d, t, op);
}

static bool type_ok(nxv_device *d, nxv_dtype t) {
  if (!d || (unsigned)t >= NXV_DTYPE_COUNT) return false;
  if ((t == NXV_F64 || t == NXV_C128) && !d->vk.info.float64) return false;
  size_t es = nxv_dtype_size(t);
  if (es == 1 && !d->vk.info.storage_8bit) return false;
  if (es == 2 && !d->vk.info.storage_16bit) return false;
  return true;
}

/* 4-wide vector types apply to every real type but bf16 (see types.glsl):
 * the tiled variants' 4-wide stores. */
static bool vec_ok(nxv_dtype t) { return t != NXV_BF16 && !is_complex(t); }
/* The flat kernels' 4-wide and 16-byte paths: every real type, bf16
 * through its bits (T_LD4, T_ST4, O_ST4 in types.glsl). On an H200 (8192 x
 * 8192, % of the bf16 copy by wall clock): bf16 add 57% -> 102-103%, a row
 * broadcast 37% -> 90%; bf16 -> f32 2480 -> 3990 GB/s by GPU time, f32 ->
 * bf16 2600 -> 4120; bf16's whole-tensor, row and column sums 71-72% ->
 * 90-91%, 96-97% and 104-105%; a bf16 tensor times a u8 mask 48.6% ->
 * 91.2%. */
static bool flat_ok(nxv_dtype t) { return !is_complex(t); }

/* The contiguous variant's wide paths a kernel has (elementwise()'s
 * paths). */
enum {
  EW_VEC4 = 1u,    /* flag bit 2: 4 elements per thread */
  EW_WIDE16 = 2u,  /* with EW_VEC4, flag bit 7: 16 bytes of each 8- or
                    * 16-bit operand per thread */
  EW_WORDS16 = 4u, /* flag bit 7 (select.comp): 16 bytes of the value
                    * operands and the result per thread, moved as words */
};

/* Validates a shape; *out_n is its element count. An empty shape (a zero
 * dimension) is valid whatever its other dimensions. */
nxv_status nxv_ops_check_shape(uint32_t rank, const int64_t *shape, uint64_t *out_n) {
  if (rank > NXV_MAX_RANK)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "rank %u exceeds the maximum %d",
                    rank, NXV_MAX_RANK);
  if (rank && !shape) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "NULL shape");
  bool empty = false;
  for (uint32_t i = 0; i < rank; i++) {
    if (shape[i] < 0)
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "negative dimension %lld at axis %u",
                      (long long)shape[i], i);
    if (shape[i] == 0) empty = true;
  }
  uint64_t n = 1;
  for (uint32_t i = 0; i < rank && !empty; i++) {
    if (n > UINT32_MAX / (uint64_t)shape[i])
      return nxv_fail(NXV_ERR_UNSUPPORTED,
                      "shape has more than 2^32-1 elements");
    n *= (uint64_t)shape[i];
  }
  *out_n = empty ? 0 : n;
  return NXV_OK;
}

/* Resolves a view over shape into explicit strides (size-1 axes get stride
 * 0) and checks that every reachable element lies in the tensor. A view of
 * no elements reads nothing: its strides are all 0, whatever was given
 * (the dense strides of a shape with a zero dimension may overflow, and
 * products of given ones are never formed). */
nxv_status nxv_ops_view_strides(nxv_device *d, const char *what, const nxv_view *v,
                                uint32_t rank, const int64_t *shape, uint64_t n,
                                int64_t *strides) {
  if (!v || !v->tensor)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: NULL view or tensor", what);
  if (v->tensor->device != d)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "%s: tensor belongs to another device", what);
  if (n == 0) {
    for (uint32_t i = 0; i < rank; i++) strides[i] = 0;
    return NXV_OK;
  }
  if (v->strides) {
    for (uint32_t i = 0; i < rank; i++) strides[i] = v->strides[i];
  } else {
    int64_t s = 1; /* n > 0: every dimension >= 1, their product < 2^32 */
    for (int i = (int)rank - 1; i >= 0; i--) {
      strides[i] = s;
      s *= shape[i];
    }
    if (v->offset == 0 && n != v->tensor->count)
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                      "%s: tensor has %llu elements, shape needs %llu", what,
                      (unsigned long long)v->tensor->count,
                      (unsigned long long)n);
  }
  for (uint32_t i = 0; i < rank; i++)
    if (shape[i] == 1) strides[i] = 0;
  __int128 lo = v->offset, hi = v->offset;
  for (uint32_t i = 0; i < rank; i++) {
    __int128 span = (__int128)strides[i] * (shape[i] - 1);
    if (span > 0) hi += span;
    else lo += span;
  }
  if (lo < 0 || hi >= (__int128)v->tensor->count)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "%s: view reaches elements [%lld, %lld] of a tensor of %llu",
                    what, (long long)lo, (long long)hi,
                    (unsigned long long)v->tensor->count);
  return NXV_OK;
}

/* nxv_ops_view_strides of a view whose tensor is then ready to read: a
 * deferred result is computed first. */
static nxv_status resolve_view(nxv_device *d, const char *what, const nxv_view *v,
                               uint32_t rank, const int64_t *shape, uint64_t n,
                               int64_t *strides) {
  NXV_TRY(nxv_ops_view_strides(d, what, v, rank, shape, n, strides));
  return nxv_tensor_ready(v->tensor);
}

/* Merges adjacent axes that every operand traverses contiguously and drops
 * size-1 axes. strides is nops arrays of rank entries; rewritten in place. */
static uint32_t collapse(uint32_t rank, int64_t *shape, int nops,
                         int64_t strides[][NXV_MAX_RANK]) {
  uint32_t r = 0;
  for (uint32_t i = 0; i < rank; i++) {
    if (shape[i] == 1) continue;
    if (r > 0) {
      bool merge = true;
      for (int o = 0; o < nops; o++)
        if (strides[o][r - 1] != strides[o][i] * shape[i]) merge = false;
      if (merge) {
        shape[r - 1] *= shape[i];
        for (int o = 0; o < nops; o++) strides[o][r - 1] = strides[o][i];
        continue;
      }
    }
    shape[r] = shape[i];
    for (int o = 0; o < nops; o++) strides[o][r] = strides[o][i];
    r++;
  }
  return r;
}

/* groups workgroups along x, capped at the device's limit and MAX_GROUPS
 * (kernels loop over what a capped grid does not cover). */
static uint32_t groups_capped(nxv_device *d, uint64_t groups) {
  uint32_t cap = d->vk.info.max_workgroup_count[0] < MAX_GROUPS
                     ? d->vk.info.max_workgroup_count[0]
                     : MAX_GROUPS;
  return groups > cap ? cap : (uint32_t)groups;
}

/* Workgroups of the registry's size for threads grid-stride threads. */
static uint32_t groups_for(nxv_device *d, uint64_t threads) {
  uint32_t wg = nxv_registry_workgroup_size(d->kernels);
  return groups_capped(d, (threads + wg - 1) / wg);
}

/* Queues node n on d's scheduler. A deferred result waiting in the
 * device's window is computed first: it waits at most until the next
 * kernel, so the GPU is not kept from work the host has issued. */
static nxv_status queue(nxv_device *d, nxv_node *n) {
  nxv_defer_flush(d);
  return nxv_sched_push(d->sched, n);
}

/* Queues a dispatch. Takes ownership of node in every case. */
static nxv_status push_dispatch(nxv_device *d, nxv_node *n, nxv_spv_module m,
                                uint32_t op, uint32_t variant) {
  nxv_status st =
      nxv_registry_pipeline_start(d->kernels, m, op, variant, &n->pipeline, &n->pending);
  if (st != NXV_OK) {
    nxv_node_discard(n);
    return st;
  }
  n->kind = NXV_NODE_DISPATCH;
  return queue(d, n);
}

static void node_use(nxv_node *n, nxv_tensor *t, bool write) {
  nxv_buffer_retain(t->buf);
  if (write) n->write_mask |= (uint16_t)(1u << n->nbufs);
  n->bufs[n->nbufs++] = t->buf;
}

/* Queues the second pass of a split op: module's variant over groups
 * workgroups with the first pass's push constants pc (pc_size bytes, no
 * arguments), reading the partial results part and writing out. */
static nxv_status push_combine(nxv_device *d, const void *pc, uint32_t pc_size,
                               uint32_t groups, uint64_t cost, nxv_tensor *part,
                               nxv_tensor *out, nxv_spv_module module, uint32_t op,
                               uint32_t variant) {
  nxv_node *fin = nxv_node_new(0);
  if (!fin) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "op node");
  memcpy(fin->pc, pc, pc_size);
  fin->pc_size = pc_size;
  fin->groups[0] = groups;
  fin->groups[1] = fin->groups[2] = 1;
  fin->cost = cost;
  node_use(fin, part, false);
  node_use(fin, out, true);
  return push_dispatch(d, fin, module, op, variant);
}

/* ------------------------------------------------------------------ */
/* Elementwise                                                         */
/* ------------------------------------------------------------------ */

/* Columns of a tile of the tiled elementwise kernels (tile2d.glsl) whose
 * input type is t: 64 for types of 2 bytes or less, else 32. */
static int64_t tile_cols(nxv_dtype t) { return nxv_dtype_size(t) <= 2 ? 64 : 32; }

/* Whether the tiled kernel (tile2d.glsl) suits a strided op collapsed to
 * r axes of shape: two or three axes, rows and columns of at least 16 (a
 * tile of 32 rows keeps most of its threads busy), a grid within the
 * device's limits, a device that runs 256 threads per workgroup, and a
 * compute type whose tile fits the shared memory every device has (c128
 * does not). */
static bool tiled_fits(nxv_device *d, uint32_t r, const int64_t *shape,
                       nxv_dtype t) {
  if (r < 2 || r > 3 || t == NXV_C128 || d->vk.info.max_workgroup_invocations < 256 ||
      d->vk.info.max_workgroup_size[0] < 256)
    return false;
  int64_t depth = r == 3 ? shape[0] : 1, rows = shape[r - 2], cols = shape[r - 1];
  if (rows < 16 || cols < 16) return false;
  return (cols + tile_cols(t) - 1) / tile_cols(t) <= d->vk.info.max_workgroup_count[0] &&
         (rows + 31) / 32 <= d->vk.info.max_workgroup_count[1] &&
         depth <= d->vk.info.max_workgroup_count[2];
}

/* With s = floor(log2 p) and m = ceil(2^(32+s) / p) (< 2^32 when p is
 * not a power of two), i * m / 2^(32+s) = i / p + i * e / (p 2^(32+s))
 * with e = m p - 2^(32+s) < p: the error stays below 1/p, and floor()
 * exact, while i * p < 2^(32+s), which holds for i < 2^31. */
void nxv_ops_div_magic(uint32_t p, uint32_t *out_shift, uint32_t *out_magic) {
  uint32_t s = 31u - (uint32_t)__builtin_clz(p);
  *out_shift = s;
  *out_magic = (p & (p - 1)) ? (uint32_t)(((1ull << (32 + s)) + p - 1) / p) : 0;
}

/* The transpose kernel's push constants (transpose.comp). */
typedef struct pc_transpose {
  uint64_t a, c;
  uint32_t rows, cols, off, sb, sc, pad;
} pc_transpose;
_Static_assert(sizeof(pc_transpose) == 40, "pc_transpose layout");

/* Tile of the transpose kernel (transpose.comp) for elements of w bits:
 * rows (the source's contiguous runs, 256 bytes each) by columns. */
static void transpose_tile(uint32_t w, uint32_t *out_rows, uint32_t *out_cols) {
  *out_rows = w == 16 ? 128 : w == 32 ? 64 : 32;
  *out_cols = w == 16 ? 64 : w == 32 ? 64 : 32;
}

/* nxv_ops_set_dispatch_hook's hook; NULL when none. */
static _Atomic(nxv_ops_dispatch_hook) dispatch_hook;

void nxv_ops_set_dispatch_hook(nxv_ops_dispatch_hook hook) {
  atomic_store_explicit(&dispatch_hook, hook, memory_order_release);
}

/* The installed hook, or NULL. */
static nxv_ops_dispatch_hook hook_now(void) {
  return atomic_load_explicit(&dispatch_hook, memory_order_acquire);
}

/* The transpose kernel for a unary copy collapsed to r axes of shape
 * whose operand v (strides st, of type t) is read along the rows (stride
 * 1 there) into the dense output out: the kernel's element width in bits
 * when every access can move 16 bytes (see transpose.comp), else 0 (the
 * tiled kernel takes it). */
static uint32_t transpose_width(const nxv_device *d, uint32_t r, const int64_t *shape,
                                const int64_t *st, const nxv_view *v, nxv_dtype t,
                                const nxv_tensor *out) {
  size_t es = nxv_dtype_size(t);
  if ((r != 2 && r != 3) || (es != 2 && es != 4 && es != 8)) return 0;
  if (d->vk.info.max_workgroup_invocations < 256 || d->vk.info.max_workgroup_size[0] < 256)
    return 0;
  int64_t ve = 16 / (int64_t)es, depth = r == 3 ? shape[0] : 1;
  int64_t rows = shape[r - 2], cols = shape[r - 1];
  int64_t sb = r == 3 ? st[0] : 0, sr = st[r - 2], sc = st[r - 1];
  if (sr != 1 || sc == 0 || sc == 1 || rows % ve || cols % ve || sc % ve || sb % ve ||
      v->offset % ve || v->tensor->buf->addr % 16 || out->buf->addr % 16 ||
      v->tensor->count > UINT32_MAX)
    return 0;
  uint32_t w = (uint32_t)es * 8, tr, tc;
  transpose_tile(w, &tr, &tc);
  if ((uint64_t)(cols + tc - 1) / tc > d->vk.info.max_workgroup_count[0] ||
      (uint64_t)(rows + tr - 1) / tr > d->vk.info.max_workgroup_count[1] ||
      (uint64_t)depth > d->vk.info.max_workgroup_count[2])
    return 0;
  return w;
}

/* Queues the transpose kernel (w-bit elements) writing out from v, the
 * operand of a unary copy collapsed to r axes of shape with strides st
 * (transpose_width() said it fits). Takes no reference on out. */
static nxv_status transpose_copy(nxv_device *d, uint32_t w, uint32_t r, const int64_t *shape,
                                 const int64_t *st, const nxv_view *v, nxv_tensor *out) {
  nxv_node *node = nxv_node_new(0);
  if (!node) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "op node");
  uint32_t tr, tc;
  transpose_tile(w, &tr, &tc);
  int64_t rows = shape[r - 2], cols = shape[r - 1];
  pc_transpose pc = {.a = v->tensor->buf->addr,
                     .c = out->buf->addr,
                     .rows = (uint32_t)rows,
                     .cols = (uint32_t)cols,
                     .off = (uint32_t)v->offset,
                     .sb = (uint32_t)(r == 3 ? st[0] : 0),
                     .sc = (uint32_t)st[r - 1]};
  memcpy(node->pc, &pc, sizeof pc);
  node->pc_size = sizeof pc;
  node->groups[0] = (uint32_t)((cols + tc - 1) / tc);
  node->groups[1] = (uint32_t)((rows + tr - 1) / tr);
  node->groups[2] = r == 3 ? (uint32_t)shape[0] : 1;
  node->cost = out->count * 2;
  node_use(node, v->tensor, false);
  node_use(node, out, true);
  nxv_spv_module m = w == 16 ? NXV_SPV_TRANSPOSE_16
                     : w == 32 ? NXV_SPV_TRANSPOSE_32
                               : NXV_SPV_TRANSPOSE_64;
  nxv_ops_dispatch_hook hook = hook_now();
  if (hook) {
    nxv_ops_dispatch info = {.kind = NXV_OPS_TRANSPOSE, .op = "transpose", .out_addr = pc.c,
                             .out_size = w / 8};
    info.transpose.addr = pc.a;
    info.transpose.offset = v->offset;
    info.transpose.size = w / 8;
    info.transpose.rows = rows;
    info.transpose.cols = cols;
    info.transpose.depth_stride = r == 3 ? st[0] : 0;
    info.transpose.col_stride = st[r - 1];
    hook(&info);
  }
  return push_dispatch(d, node, m, 0, 0);
}

/* Shared by the elementwise ops: nops inputs (1 to 3) of types in_types
 * through views, output dense of out_type. Operand o goes to push-constant
 * slot a, b, in2 in turn; in the contiguous variant, flag bit o marks a
 * broadcast scalar operand, and the wide paths the kernel has (paths, EW_*)
 * are taken where the operands' alignment allows; conversions to a wider
 * type take bit 8 where their input is aligned (unary.comp). Strided
 * operands take the kernel's tiled variant tiled_variant where it has one
 * (not 0) and the collapsed shape suits it (tiled_fits), else variant 1.
 * One operand of a binary or compare kernel (nops 2) may be an immediate
 * scalar: views[o] NULL and imm one element of in_types[o] (at most 8
 * bytes), read by nxv_imm in common.glsl. In the contiguous variant its
 * bits travel in pc.args (flag bit 3 + o); in the strided variant in
 * pc.in2 (flag bit 3 + o), in the tiled one in pc.in2 too (operand mode
 * 3). Its slot holds the other operand's address, never read.
 * mixed: a binary op whose operands are of two types, the result of one of
 * them (binary.comp's mixed modules; no immediate): 16-byte accesses
 * (flag bit 7) go by the result's type, and VARIANT bit 3 marks operand a
 * as the one of the other type. */
static nxv_status elementwise(nxv_device *d, const char *opname,
                              nxv_spv_module module, uint32_t op, int nops,
                              uint32_t rank, const int64_t *shape_in,
                              const nxv_view *const views_in[3],
                              const nxv_dtype in_types[3], nxv_dtype out_type,
                              uint32_t paths, uint32_t tiled_variant,
                              const void *imm, bool mixed, nxv_tensor **out) {
  uint64_t n;
  NXV_TRY(nxv_ops_check_shape(rank, shape_in, &n));
  int64_t shape[NXV_MAX_RANK], strides[3][NXV_MAX_RANK];
  if (rank) memcpy(shape, shape_in, rank * sizeof *shape); /* NULL at rank 0 */
  static const char *const names[3] = {"operand a", "operand b", "operand c"};
  const nxv_view *views[3] = {views_in[0], views_in[1], views_in[2]};
  int imm_o = -1; /* the immediate operand, if any */
  for (int o = 0; o < nops; o++) {
    if (!views[o] && imm && imm_o < 0) {
      imm_o = o;
      for (uint32_t i = 0; i < rank; i++) strides[o][i] = 0;
      continue;
    }
    NXV_TRY(resolve_view(d, names[o], views[o], rank, shape, n, strides[o]));
    if (views[o]->tensor->dtype != in_types[o])
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: %s is %s, expected %s",
                      opname, names[o], nxv_dtype_name(views[o]->tensor->dtype),
                      nxv_dtype_name(in_types[o]));
  }
  nxv_tensor *t;
  NXV_TRY(nxv_tensor_new(d, out_type, n, &t));
  if (n == 0) {
    *out = t;
    return NXV_OK;
  }
  uint32_t r = collapse(rank, shape, nops, strides);
  /* A transposed operand made dense (a unary copy within one type: its
   * bits move unchanged) whose accesses can all move 16 bytes. */
  if (nops == 1 && tiled_variant == 3 && op == NXV_COPY && in_types[0] == out_type) {
    uint32_t w = transpose_width(d, r, shape, strides[0], views[0], in_types[0], t);
    if (w) {
      nxv_status st = transpose_copy(d, w, r, shape, strides[0], views[0], t);
      if (st != NXV_OK) {
        nxv_tensor_release(t);
        return st;
      }
      *out = t;
      return NXV_OK;
    }
  }
  bool flat_vec = (paths & EW_VEC4) != 0;
  bool contiguous = r <= 1;
  for (int o = 0; o < nops && contiguous; o++)
    if (r == 1 && strides[o][0] != 1 && strides[o][0] != 0) contiguous = false;
  /* Binary ops on a [rows, cols] output whose operands are each dense, a
   * row repeated down the rows (a bias, a broadcast vector) or a scalar
   * take the contiguous variant too, 4 elements at a time: a repeated
   * operand is read at the output's index modulo cols (flag bit 5 + o).
   * On an H200 (GPU time, % of copy) f32 went from the tiled variant's
   * 94% to 99%, f16 from 86% to 98% (with 16-byte accesses, below); f64
   * measured 93% against the tiled variant's 94% and keeps it. */
  uint32_t repeated = 0;
  if (r == 2 && tiled_variant == 2 && flat_vec && shape[1] % 4 == 0 &&
      nxv_dtype_size(in_types[0]) <= 4) {
    bool ok = true;
    for (int o = 0; o < nops && ok; o++) {
      if (o == imm_o) continue;
      size_t es = nxv_dtype_size(in_types[o]);
      uint64_t addr = views[o]->tensor->buf->addr + (uint64_t)views[o]->offset * es;
      if (strides[o][0] == 0 && strides[o][1] == 1)
        repeated |= 32u << o;
      else if (!(strides[o][0] == shape[1] && strides[o][1] == 1) &&
               !(strides[o][0] == 0 && strides[o][1] == 0))
        ok = false;
      if (strides[o][1] == 1 && addr % (4 * es)) ok = false;
    }
    if (!ok) repeated = 0;
    contiguous = repeated != 0;
  }
  bool tiled = !contiguous && tiled_variant && tiled_fits(d, r, shape, in_types[0]);
  uint32_t args_words = contiguous ? 0
                        : tiled    ? 2 + 4 * (uint32_t)nops
                                   : (uint32_t)(nops + 1) * r + (uint32_t)nops;
  nxv_node *node = nxv_node_new(args_words);
  if (!node) {
    nxv_tensor_release(t);
    return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "op node");
  }
  pc_ew pc = {0};
  uint64_t *slots[3] = {&pc.a, &pc.b, &pc.in2};
  pc.c = t->buf->addr;
  if (imm_o >= 0 && !contiguous) {
    /* nops is 2: in2 is free for the immediate's bits. */
    memcpy(&pc.in2, imm, nxv_dtype_size(in_types[imm_o]));
    *slots[imm_o] = views[imm_o == 0 ? 1 : 0]->tensor->buf->addr;
  }
  pc.n = (uint32_t)n;
  uint64_t threads = n;
  uint32_t variant = 0;
  if (contiguous) {
    bool vec = flat_vec;
    /* 8- and 16-bit inputs of the binary and unary kernels: 16 bytes per
     * access where every operand read in place starts 16-byte aligned and
     * a repeated row is a whole number of 16-byte groups (flag bit 7). On
     * an H200 (f16, GPU time) a row broadcast went from 86% to 98% of the
     * copy bandwidth, x + y from 99% to 101%. Not where the result is
     * wider than the input (a conversion): a thread's 16 bytes of input
     * would be several 16-byte stores apart from its neighbours', where 4
     * elements at a time store in one contiguous run. */
    size_t es0 = nxv_dtype_size(mixed ? out_type : in_types[0]);
    uint64_t wide = 16 / es0; /* elements per 16 bytes */
    bool wide_ok = (paths & EW_WIDE16) && es0 <= 2 && nxv_dtype_size(out_type) <= es0 &&
                   n >= wide &&
                   (!repeated || shape[1] % (int64_t)wide == 0);
    for (int o = 0; o < nops; o++) {
      if (o == imm_o) {
        /* Its slot gets another operand's address: valid, never read. */
        pc.flags |= 8u << o;
        memcpy(&pc.args, imm, nxv_dtype_size(in_types[o]));
        *slots[o] = views[o == 0 ? 1 : 0]->tensor->buf->addr;
        continue;
      }
      const nxv_view *v = views[o];
      size_t es = nxv_dtype_size(in_types[o]);
      bool scalar = r == 0 || strides[o][r - 1] == 0;
      uint64_t addr = v->tensor->buf->addr + (uint64_t)v->offset * es;
      if (scalar) pc.flags |= 1u << o;
      else if (addr % (4 * es)) vec = false;
      if (!scalar && addr % 16) wide_ok = false;
      *slots[o] = addr;
    }
    uint64_t group = 4;
    if (vec && n >= 4) {
      pc.flags |= 4u;
      threads = n / 4;
      if (wide_ok) {
        pc.flags |= 128u;
        group = wide;
        threads = n / wide;
      }
    }
    /* select.comp (operand 0 the predicate; flag bits 0-2 mark scalars):
     * 16 bytes of the value operands and the result per thread, moved as
     * words under a byte mask from the predicate's bytes (flag bit 7),
     * where the value operands read in place are 16-byte aligned and the
     * predicate is aligned to its group's bytes. */
    if (paths & EW_WORDS16) {
      size_t es = nxv_dtype_size(out_type);
      uint64_t w = es <= 8 ? 16 / es : 0; /* elements per thread */
      bool ok = w && n >= w;
      for (int o = 0; o < 3 && ok; o++)
        if (!(pc.flags & (1u << o)) && *slots[o] % (o == 0 ? w : 16)) ok = false;
      if (ok) {
        pc.flags |= 128u;
        threads = n / w;
      }
    }
    /* A conversion of a real type to a wider 16-bit type (from an 8-bit
     * one) or 64-bit type: 16 bytes of output per thread, 8 or 2 elements
     * (flag bit 8, unary.comp), where 4 elements at a time stored 8 or 32
     * bytes per thread (bf16 one element at a time). On an H200 (GB/s over
     * the GPU time, 8192 x 8192): u8 -> f16 3190 -> 3940, u8 -> f64 2500 ->
     * 3940, copies 4230-4250. */
    size_t ein = nxv_dtype_size(in_types[0]), eout = nxv_dtype_size(out_type);
    if (tiled_variant == 3 && op == NXV_COPY && !repeated && eout > ein &&
        !is_complex(in_types[0]) && !is_complex(out_type) &&
        ((eout == 2 && ein == 1) || eout == 8) && n >= 16 / eout) {
      uint64_t e = 16 / eout;
      uint64_t addr = views[0]->tensor->buf->addr + (uint64_t)views[0]->offset * ein;
      if ((pc.flags & 1u) || addr % (e * ein) == 0) {
        pc.flags |= 256u;
        threads = n / e;
      }
    }
    if (repeated) {
      /* Group i (of 4 elements, or of 16 bytes) reads group i % p of a
       * repeated operand, the quotient as (i * magic) >> (32 + shift),
       * exact for i < 2^31 (magic 0: p is a power of two, masked). */
      uint32_t p = (uint32_t)((uint64_t)shape[1] / group), sh, magic;
      nxv_ops_div_magic(p, &sh, &magic);
      pc.flags |= repeated;
      pc.rank = p;
      pc.pad = sh;
      pc.in2 = magic;
    }
  } else if (tiled) {
    /* Arena: rows, columns, then per operand its strides along depth,
     * rows and columns and its offset (tile2d.glsl). */
    variant = tiled_variant;
    int64_t rows = shape[r - 2], cols = shape[r - 1];
    uint32_t *a = node->args;
    a[0] = (uint32_t)rows;
    a[1] = (uint32_t)cols;
    /* 4-wide stores (T2_FLAG_VEC_OUT): types with 4-vectors only. */
    bool vec_out = (paths & EW_VEC4) && cols % 4 == 0;
    for (int o = 0; o <= nops; o++)
      vec_out = vec_out && vec_ok(o == nops ? out_type : in_types[o]);
    for (int o = 0; o < nops; o++) {
      if (o == imm_o) {
        pc.flags |= 3u << (2 * o); /* its arena words stay 0 */
        continue;
      }
      const nxv_view *v = views[o];
      int64_t sb = r == 3 ? strides[o][0] : 0, sr = strides[o][r - 2], sc = strides[o][r - 1];
      uint64_t addr = v->tensor->buf->addr;
      size_t es = nxv_dtype_size(in_types[o]);
      uint32_t mode = 0;
      if (sc == 1 && vec_out && (addr + (uint64_t)v->offset * es) % (4 * es) == 0 &&
          sr % 4 == 0 && sb % 4 == 0)
        mode = 1;
      else if (sr == 1 && sc != 0 && sc != 1) {
        mode = 2;
        /* 16-bit types read 8 rows per 16-byte load (tile2d.glsl). */
        if (es == 2 && (addr + (uint64_t)v->offset * es) % 16 == 0 && sc % 8 == 0 &&
            sb % 8 == 0 && rows % 8 == 0)
          pc.flags |= 256u << o;
      }
      pc.flags |= mode << (2 * o);
      *slots[o] = addr;
      uint32_t *w = a + 2 + 4 * o;
      w[0] = (uint32_t)sb;
      w[1] = (uint32_t)sr;
      w[2] = (uint32_t)sc;
      w[3] = (uint32_t)v->offset;
    }
    if (vec_out) pc.flags |= 64u;
    /* 16-bit inputs and outputs, an operand transposed in the wide form,
     * the others immediates or rows of 16-byte aligned groups of 8, rows
     * of a multiple of 8 elements: the 16-byte tiles (binary.comp and
     * unary.comp VARIANT 4, tile2d.glsl), whose kernels read every
     * operand that is not transposed 8 elements at a time whatever its
     * mode. */
    if (nxv_dtype_size(in_types[0]) == 2 && nxv_dtype_size(out_type) == 2 && cols % 8 == 0 &&
        t->buf->addr % 16 == 0 && (pc.flags & (256u | 512u)) != 0) {
      bool ok = true;
      for (int o = 0; o < nops && ok; o++) {
        if (o == imm_o || (pc.flags & (256u << o)) != 0) continue;
        const nxv_view *v = views[o];
        int64_t sb = r == 3 ? strides[o][0] : 0, sr = strides[o][r - 2], sc = strides[o][r - 1];
        ok = sc == 1 && (v->tensor->buf->addr + (uint64_t)v->offset * 2) % 16 == 0 &&
             sr % 8 == 0 && sb % 8 == 0;
      }
      if (ok) variant = 4;
    }
    node->args_pc_offset = offsetof(pc_ew, args);
    node->groups[0] = (uint32_t)((cols + tile_cols(in_types[0]) - 1) / tile_cols(in_types[0]));
    node->groups[1] = (uint32_t)((rows + 31) / 32);
    node->groups[2] = r == 3 ? (uint32_t)shape[0] : 1;
  } else {
    variant = 1;
    if (imm_o >= 0) pc.flags |= 8u << imm_o;
    for (int o = 0; o < nops; o++)
      if (o != imm_o) *slots[o] = views[o]->tensor->buf->addr;
    pc.rank = r;
    uint32_t *a = node->args;
    for (uint32_t i = 0; i < r; i++) a[i] = (uint32_t)shape[i];
    for (int o = 0; o < nops; o++)
      for (uint32_t i = 0; i < r; i++)
        a[(uint32_t)(o + 1) * r + i] = (uint32_t)strides[o][i];
    for (int o = 0; o < nops; o++)
      a[(uint32_t)(nops + 1) * r + (uint32_t)o] =
          o == imm_o ? 0u : (uint32_t)views[o]->offset;
    node->args_pc_offset = offsetof(pc_ew, args);
  }
  memcpy(node->pc, &pc, sizeof pc);
  node->pc_size = sizeof pc;
  if (!tiled) {
    node->groups[0] = groups_for(d, threads);
    node->groups[1] = node->groups[2] = 1;
  }
  node->cost = n * (uint64_t)(nops + 1);
  for (int o = 0; o < nops; o++)
    if (o != imm_o) node_use(node, views[o]->tensor, false);
  node_use(node, t, true);
  /* binary.comp's mixed modules: VARIANT bit 3 when a is the operand of
   * the other type. */
  if (mixed && in_types[0] != out_type) variant |= 8u;
  nxv_ops_dispatch_hook hook = hook_now();
  if (hook) {
    nxv_ops_dispatch info = {.kind = NXV_OPS_ELEMENTWISE, .op = opname, .variant = variant,
                             .flags = pc.flags, .out_addr = pc.c,
                             .out_size = nxv_dtype_size(out_type)};
    info.ew.nops = nops;
    info.ew.imm = imm_o;
    info.ew.mixed = mixed;
    info.ew.select = module >= NXV_SPV_SELECT_S8 && module <= NXV_SPV_SELECT_C128;
    info.ew.n = n;
    info.ew.args = tiled ? node->args : NULL;
    for (int o = 0; o < nops; o++) {
      info.ew.in_size[o] = nxv_dtype_size(in_types[o]);
      info.ew.addr[o] = *slots[o];
    }
    hook(&info);
  }
  nxv_status st = push_dispatch(d, node, module, op, variant);
  if (st != NXV_OK) {
    nxv_tensor_release(t);
    return st;
  }
  *out = t;
  return NXV_OK;
}

bool nxv_binary_supported(nxv_device *d, nxv_binary_op op, nxv_dtype t) {
  if ((unsigned)op >= NXV_BINARY_OP_COUNT || !type_ok(d, t)) return false;
  return (binary_ops(t) >> op) & 1u;
}

bool nxv_mask_type_supported(nxv_device *d, nxv_dtype t) {
  return type_ok(d, t) && type_ok(d, NXV_U8);
}

bool nxv_compare_supported(nxv_device *d, nxv_compare_op op, nxv_dtype t) {
  if ((unsigned)op >= NXV_COMPARE_OP_COUNT || !nxv_mask_type_supported(d, t)) return false;
  return !is_complex(t) || op < NXV_LESS || op > NXV_GREATER_EQUAL;
}

bool nxv_convert_supported(nxv_device *d, nxv_dtype t) { return type_ok(d, t); }

/* f32, f16 and bf16 transcendentals are evaluated in double where the
 * device has it (correctly rounded in practice), unless fast math was
 * asked for: the *_precise modules. */
static bool unary_in_double(nxv_device *d, nxv_unary_op op, nxv_dtype t) {
  return (t == NXV_F32 || t == NXV_F16 || t == NXV_BF16) &&
         ((op >= NXV_EXP && op <= NXV_SIGMOID) || (op >= NXV_EXPM1 && op <= NXV_ATANH)) &&
         d->vk.info.float64 && !d->config.fast_math;
}

/* pow and atan2 of those types likewise (the binary *_precise modules;
 * fused programs that hold them take the fused *_precise modules). */
static bool binary_in_double(nxv_device *d, nxv_binary_op op, nxv_dtype t) {
  return (t == NXV_F32 || t == NXV_F16 || t == NXV_BF16) && (op == NXV_POW || op == NXV_ATAN2) &&
         d->vk.info.float64 && !d->config.fast_math;
}

bool nxv_unary_supported(nxv_device *d, nxv_unary_op op, nxv_dtype t) {
  if ((unsigned)op >= NXV_UNARY_OP_COUNT || !type_ok(d, t)) return false;
  /* The real special functions are evaluated in double only. */
  if (!is_complex(t) && op >= NXV_EXPM1 && op <= NXV_COSH &&
      (!d->vk.info.float64 || d->config.fast_math))
    return false;
  return (unary_ops(t) >> op) & 1u;
}

/* The operand dtype of a two-operand op with operand x and, when imm is
 * set, an immediate scalar (the other operand): checks both. */
static nxv_status two_operands(const char *what, const nxv_view *x, const void *imm,
                               nxv_dtype *out_t) {
  if (!x || !x->tensor) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: NULL argument", what);
  *out_t = x->tensor->dtype;
  if (imm && nxv_dtype_size(*out_t) > 8)
    return nxv_fail(NXV_ERR_UNSUPPORTED,
                    "%s: immediate operands of %s are not supported (pass a tensor)", what,
                    nxv_dtype_name(*out_t));
  return NXV_OK;
}

static nxv_status binary_op(nxv_device *d, nxv_binary_op op, uint32_t rank,
                            const int64_t *shape, const nxv_view *a, const nxv_view *b,
                            const void *imm, bool may_defer, nxv_tensor **out);

/* nxv_binary of operands of different types: one of type T (the
 * result's), the other of type U (an integer or narrower float type for a
 * float T, an integer type all of whose values T holds for an integer T:
 * mixed_module()), which the
 * kernel converts to T as it reads it (as nxv_convert would): dense
 * operands and broadcast scalars 4 elements at a time where aligned (f16
 * and bf16 results 16 bytes at a time),
 * strided ones through the generic strided variant (no tiles, no
 * repeated-row form). Never deferred. */
static nxv_status binary_mixed(nxv_device *d, nxv_binary_op op, uint32_t rank,
                               const int64_t *shape, const nxv_view *a, const nxv_view *b,
                               nxv_tensor **out) {
  nxv_dtype ta = a->tensor->dtype, tb = b->tensor->dtype;
  const char *name = nxv_binary_op_name(op);
  nxv_spv_module m;
  bool u_is_a = mixed_module(tb, ta, &m);
  if (!u_is_a && !mixed_module(ta, tb, &m))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "%s: operands of types %s and %s (mixed operands take a float type "
                    "and an integer or narrower float type, or an integer type and an "
                    "integer type all of whose values it holds)",
                    name, nxv_dtype_name(ta), nxv_dtype_name(tb));
  nxv_dtype t = u_is_a ? tb : ta, u = u_is_a ? ta : tb;
  NXV_TRY(check_type(d, t, name));
  NXV_TRY(check_type(d, u, name));
  if (binary_in_double(d, op, t)) {
    /* The mixed modules evaluate in T; pow and atan2 in double take U
     * converted first: its whole tensor, read through the same view, when
     * that is no larger than the result (a broadcast is not materialized),
     * else the view made dense. */
    const nxv_view *uv = u_is_a ? a : b;
    uint64_t n = 1;
    for (uint32_t i = 0; i < rank; i++) n *= (uint64_t)shape[i];
    nxv_tensor *c = NULL;
    nxv_view cv = {NULL, 0, NULL};
    if (uv->tensor->count <= n) {
      const int64_t whole = (int64_t)uv->tensor->count;
      const nxv_view all = {uv->tensor, 0, NULL};
      NXV_TRY(nxv_convert(d, t, 1, &whole, &all, &c));
      cv = (nxv_view){c, uv->offset, uv->strides};
    } else {
      NXV_TRY(nxv_convert(d, t, rank, shape, uv, &c));
      cv.tensor = c;
    }
    nxv_status st = binary_op(d, op, rank, shape, u_is_a ? &cv : a, u_is_a ? b : &cv, NULL,
                              false, out);
    nxv_tensor_release(c);
    return st;
  }
  if (!((binary_ops(t) >> op) & 1u))
    return nxv_fail(NXV_ERR_UNSUPPORTED, "%s is not implemented for %s on device %s", name,
                    nxv_dtype_name(t), d->vk.info.name);
  const nxv_view *const views[3] = {a, b, NULL};
  const nxv_dtype types[3] = {ta, tb, t};
  /* The 16-byte path for 16-bit results only (binary.comp). */
  uint32_t paths = EW_VEC4 | (nxv_dtype_size(t) == 2 ? EW_WIDE16 : 0u);
  return elementwise(d, name, m, op, 2, rank, shape, views, types, t, paths, 0, NULL, true,
                     out);
}

/* nxv_binary and nxv_binary_scalar: a op b, one of a and b (NULL) the
 * immediate imm when imm is set. */
static nxv_status binary_op(nxv_device *d, nxv_binary_op op, uint32_t rank,
                            const int64_t *shape, const nxv_view *a, const nxv_view *b,
                            const void *imm, bool may_defer, nxv_tensor **out) {
  if (!d || !out || (!imm && (!a || !b)))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "binary: NULL argument");
  if ((unsigned)op >= NXV_BINARY_OP_COUNT)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "binary: invalid op %d", (int)op);
  nxv_dtype t;
  NXV_TRY(two_operands("binary", a ? a : b, imm, &t));
  if (!imm && b->tensor && a->tensor->dtype != b->tensor->dtype)
    return binary_mixed(d, op, rank, shape, a, b, out);
  NXV_TRY(check_type(d, t, nxv_binary_op_name(op)));
  if (!((binary_ops(t) >> op) & 1u))
    return nxv_fail(NXV_ERR_UNSUPPORTED, "%s is not implemented for %s on device %s",
                    nxv_binary_op_name(op), nxv_dtype_name(t), d->vk.info.name);
  const nxv_view *const views[3] = {a, b, NULL};
  if (may_defer) {
    bool deferred;
    NXV_TRY(nxv_defer_op(d, NXV_FUSED_BINARY, (uint32_t)op, t, rank, shape, 2, views, imm,
                         &deferred, out));
    if (deferred) return NXV_OK;
  }
  const nxv_dtype types[3] = {t, t, t};
  nxv_spv_module m = family(NXV_SPV_BINARY_S8, t);
  if (binary_in_double(d, op, t))
    m = t == NXV_F32 ? NXV_SPV_BINARY_F32_PRECISE
        : t == NXV_F16 ? NXV_SPV_BINARY_F16_PRECISE
                       : NXV_SPV_BINARY_BF16_PRECISE;
  return elementwise(d, nxv_binary_op_name(op), m, op, 2, rank, shape, views, types, t,
                     flat_ok(t) ? EW_VEC4 | EW_WIDE16 : 0u, 2, imm, false, out);
}

nxv_status nxv_ops_binary_eager(nxv_device *d, nxv_binary_op op, uint32_t rank,
                                const int64_t *shape, const nxv_view *a,
                                const nxv_view *b, const void *imm, nxv_tensor **out) {
  return binary_op(d, op, rank, shape, a, b, imm, false, out);
}

nxv_status nxv_binary(nxv_device *d, nxv_binary_op op, uint32_t rank,
                      const int64_t *shape, const nxv_view *a,
                      const nxv_view *b, nxv_tensor **out) {
  return binary_op(d, op, rank, shape, a, b, NULL, true, out);
}

nxv_status nxv_binary_scalar(nxv_device *d, nxv_binary_op op, uint32_t rank,
                             const int64_t *shape, const nxv_view *x, bool scalar_first,
                             const void *value, nxv_tensor **out) {
  if (!value) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "binary: NULL argument");
  return scalar_first ? binary_op(d, op, rank, shape, NULL, x, value, true, out)
                      : binary_op(d, op, rank, shape, x, NULL, value, true, out);
}

/* nxv_unary, deferred where may_defer allows it. */
static nxv_status unary_op(nxv_device *d, nxv_unary_op op, uint32_t rank,
                           const int64_t *shape, const nxv_view *a, bool may_defer,
                           nxv_tensor **out) {
  if (!d || !out || !a || !a->tensor)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "unary: NULL argument");
  if ((unsigned)op >= NXV_UNARY_OP_COUNT)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "unary: invalid op %d", (int)op);
  nxv_dtype t = a->tensor->dtype;
  NXV_TRY(check_type(d, t, nxv_unary_op_name(op)));
  if (!nxv_unary_supported(d, op, t))
    return nxv_fail(NXV_ERR_UNSUPPORTED, "%s is not implemented for %s on device %s",
                    nxv_unary_op_name(op), nxv_dtype_name(t), d->vk.info.name);
  /* abs, real, imag and phase of a complex type are of its component
   * type; c64's ops are evaluated in double where the device has it. */
  nxv_dtype to = t;
  if (is_complex(t) && (op == NXV_ABS || op == NXV_REAL || op == NXV_IMAG || op == NXV_PHASE))
    to = complex_part(t);
  if (may_defer) {
    const nxv_view *const operands[2] = {a, NULL};
    bool deferred;
    NXV_TRY(nxv_defer_op(d, NXV_FUSED_UNARY, (uint32_t)op, t, rank, shape, 1, operands, NULL,
                         &deferred, out));
    if (deferred) return NXV_OK;
  }
  nxv_spv_module m = unary_module(t, to);
  if (t == NXV_C64 && d->vk.info.float64 && !d->config.fast_math)
    m = to == NXV_C64 ? NXV_SPV_UNARY_C64_C64_PRECISE : NXV_SPV_UNARY_C64_F32_PRECISE;
  if (unary_in_double(d, op, t))
    m = t == NXV_F32 ? NXV_SPV_UNARY_F32_F32_PRECISE
        : t == NXV_F16 ? NXV_SPV_UNARY_F16_F16_PRECISE
                       : NXV_SPV_UNARY_BF16_BF16_PRECISE;
  const nxv_view *const views[3] = {a, NULL, NULL};
  const nxv_dtype types[3] = {t, t, t};
  return elementwise(d, nxv_unary_op_name(op), m, op, 1, rank, shape, views,
                     types, to, flat_ok(t) && flat_ok(to) ? EW_VEC4 | EW_WIDE16 : 0u, 3,
                     NULL, false, out);
}

nxv_status nxv_unary(nxv_device *d, nxv_unary_op op, uint32_t rank, const int64_t *shape,
                     const nxv_view *a, nxv_tensor **out) {
  return unary_op(d, op, rank, shape, a, true, out);
}

nxv_status nxv_ops_unary_eager(nxv_device *d, nxv_unary_op op, uint32_t rank,
                               const int64_t *shape, const nxv_view *a, nxv_tensor **out) {
  return unary_op(d, op, rank, shape, a, false, out);
}

nxv_status nxv_convert(nxv_device *d, nxv_dtype dtype, uint32_t rank,
                       const int64_t *shape, const nxv_view *a,
                       nxv_tensor **out) {
  if (!d || !out || !a || !a->tensor)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "convert: NULL argument");
  nxv_dtype from = a->tensor->dtype;
  NXV_TRY(check_type(d, from, "as_type"));
  NXV_TRY(check_type(d, dtype, "as_type"));
  const nxv_view *const views[3] = {a, NULL, NULL};
  const nxv_dtype types[3] = {from, from, from};
  return elementwise(d, "as_type", unary_module(from, dtype), NXV_COPY, 1, rank,
                     shape, views, types, dtype,
                     flat_ok(from) && flat_ok(dtype) ? EW_VEC4 | EW_WIDE16 : 0u, 3, NULL,
                     false, out);
}

/* nxv_compare and nxv_compare_scalar, as binary_op. */
static nxv_status compare_op(nxv_device *d, nxv_compare_op op, uint32_t rank,
                             const int64_t *shape, const nxv_view *a, const nxv_view *b,
                             const void *imm, nxv_tensor **out) {
  if (!d || !out || (!imm && (!a || !b)))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "compare: NULL argument");
  if ((unsigned)op >= NXV_COMPARE_OP_COUNT)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "compare: invalid op %d", (int)op);
  nxv_dtype t;
  NXV_TRY(two_operands("compare", a ? a : b, imm, &t));
  const char *name = nxv_compare_op_name(op);
  NXV_TRY(check_type(d, t, name));
  NXV_TRY(check_type(d, NXV_U8, name)); /* the result */
  if (is_complex(t) && op >= NXV_LESS && op <= NXV_GREATER_EQUAL)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "%s is not defined for complex type %s", name,
                    nxv_dtype_name(t));
  const nxv_view *const views[3] = {a, b, NULL};
  const nxv_dtype types[3] = {t, t, t};
  return elementwise(d, name, family(NXV_SPV_COMPARE_S8, t), op, 2, rank, shape,
                     views, types, NXV_U8, flat_ok(t) ? EW_VEC4 | EW_WIDE16 : 0u, 0, imm,
                     false, out);
}

nxv_status nxv_compare(nxv_device *d, nxv_compare_op op, uint32_t rank,
                       const int64_t *shape, const nxv_view *a,
                       const nxv_view *b, nxv_tensor **out) {
  return compare_op(d, op, rank, shape, a, b, NULL, out);
}

nxv_status nxv_compare_scalar(nxv_device *d, nxv_compare_op op, uint32_t rank,
                              const int64_t *shape, const nxv_view *x, bool scalar_first,
                              const void *value, nxv_tensor **out) {
  if (!value) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "compare: NULL argument");
  return scalar_first ? compare_op(d, op, rank, shape, NULL, x, value, out)
                      : compare_op(d, op, rank, shape, x, NULL, value, out);
}

nxv_status nxv_select(nxv_device *d, uint32_t rank, const int64_t *shape,
                      const nxv_view *pred, const nxv_view *on_true,
                      const nxv_view *on_false, nxv_tensor **out) {
  if (!d || !out || !pred || !on_true || !on_false || !on_true->tensor)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "select: NULL argument");
  nxv_dtype t = on_true->tensor->dtype;
  NXV_TRY(check_type(d, t, "select"));
  NXV_TRY(check_type(d, NXV_U8, "select")); /* the predicate */
  const nxv_view *const views[3] = {pred, on_true, on_false};
  const nxv_dtype types[3] = {NXV_U8, t, t};
  return elementwise(d, "select", family(NXV_SPV_SELECT_S8, t), 0, 3, rank, shape,
                     views, types, t, EW_WORDS16, 0, NULL, false, out);
}

/* The integer types fused programs run (fused.comp's integer modules). */
static bool fused_integer(nxv_dtype t) {
  return t == NXV_S32 || t == NXV_S64 || t == NXV_U32 || t == NXV_U64;
}

/* The checks of instruction k (word w) of a program over ninputs inputs
 * of type t that need no device: operands name registers written before
 * it, unused fields and bits 30-31 are 0, and a literal is in a binary or
 * comparison word (for a float type, the bits of a normal f16 number or of
 * a zero, which fused.comp's unpackHalf2x16 converts exactly). */
static nxv_status check_fused_operands(nxv_dtype t, uint32_t ninputs, uint32_t k,
                                       uint32_t w) {
  uint32_t cls = NXV_FUSED_CLASS(w), regs = ninputs + k;
  bool lit = NXV_FUSED_HAS_LIT(w);
  uint32_t operand[3] = {NXV_FUSED_A(w), NXV_FUSED_B(w), NXV_FUSED_C(w)};
  int nops = cls == NXV_FUSED_UNARY ? 1 : cls == NXV_FUSED_SELECT ? 3 : 2;
  if (lit) {
    if (cls != NXV_FUSED_BINARY && cls != NXV_FUSED_COMPARE)
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                      "fused: instruction %u (0x%08x) has a literal, which only binary ops "
                      "and comparisons take", k, w);
    uint32_t l = NXV_FUSED_LIT(w), exp = (l >> 10) & 31u;
    if (is_float(t) && (exp == 31u || (exp == 0u && (l & 0x3FFu) != 0u)))
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                      "fused: instruction %u's literal 0x%04x is not a normal f16 number or "
                      "a zero", k, l);
    nops = 1; /* b is the literal, c part of it */
  } else if (w >> 30) {
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "fused: instruction %u (0x%08x) sets bits above 29", k, w);
  }
  for (int o = 0; o < 3; o++) {
    if (o < nops && operand[o] >= regs)
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                      "fused: instruction %u reads register %u, only %u are written "
                      "before it", k, operand[o], regs);
    if (o >= nops && !lit && operand[o] != 0)
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                      "fused: instruction %u sets unused operand %d", k, o);
  }
  return NXV_OK;
}

/* A program's input and instruction counts are within bounds. */
static nxv_status check_fused_counts(uint32_t ninputs, uint32_t ninstrs) {
  if (ninputs < 1 || ninputs > NXV_FUSED_MAX_INPUTS)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "fused: %u inputs, expected 1 to %d",
                    ninputs, NXV_FUSED_MAX_INPUTS);
  if (ninstrs < 1 || ninstrs > NXV_FUSED_MAX_INSTRS)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "fused: %u instructions, expected 1 to %d", ninstrs,
                    NXV_FUSED_MAX_INSTRS);
  return NXV_OK;
}

/* Checks instruction k of a fused program over ninputs inputs of type t
 * on device d; sets *in_double when its op is a transcendental, pow or
 * atan2 evaluated in double. */
static nxv_status check_fused_instr(nxv_device *d, nxv_dtype t, uint32_t ninputs,
                                    uint32_t k, uint32_t w, bool *in_double) {
  uint32_t cls = NXV_FUSED_CLASS(w), op = NXV_FUSED_OP(w);
  NXV_TRY(check_fused_operands(t, ninputs, k, w));
  bool ok;
  const char *name;
  /* Integer programs run the unary ops that keep the type (the others
   * convert to a float type in their own kernels). */
  bool integer = fused_integer(t);
  switch (cls) {
  case NXV_FUSED_UNARY:
    ok = nxv_unary_supported(d, (nxv_unary_op)op, t) && op < NXV_CONJ &&
         (!integer || op == NXV_COPY || op == NXV_NEG || op == NXV_ABS || op == NXV_SIGN ||
          op == NXV_BITWISE_NOT || op == NXV_SQUARE || op == NXV_CLZ || op == NXV_POPCOUNT);
    name = nxv_unary_op_name((nxv_unary_op)op);
    if (ok && unary_in_double(d, (nxv_unary_op)op, t)) *in_double = true;
    break;
  case NXV_FUSED_BINARY:
    ok = nxv_binary_supported(d, (nxv_binary_op)op, t);
    name = nxv_binary_op_name((nxv_binary_op)op);
    if (ok && binary_in_double(d, (nxv_binary_op)op, t)) *in_double = true;
    break;
  case NXV_FUSED_COMPARE:
    ok = op < NXV_COMPARE_OP_COUNT;
    name = nxv_compare_op_name((nxv_compare_op)op);
    break;
  default:
    ok = op == 0;
    name = "select";
    break;
  }
  if (!ok)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "fused: instruction %u: %s (op %u) is not "
                    "supported for %s on device %s", k, name, op, nxv_dtype_name(t),
                    d->vk.info.name);
  return NXV_OK;
}

bool nxv_ops_fused_basic(uint32_t cls, uint32_t op) {
  if (cls == NXV_FUSED_UNARY)
    return op == NXV_COPY || op == NXV_NEG || op == NXV_ABS || op == NXV_SQUARE;
  return cls == NXV_FUSED_BINARY && op <= NXV_MIN;
}

/* A prepared program (nxv_fused_program_create). The memo is written once:
 * the first run that found its pipeline created claims it (memo_state
 * MEMO_EMPTY -> MEMO_WRITING), writes the fields, then publishes them
 * (MEMO_READY, release); readers load the state with acquire and read the
 * fields only when it is MEMO_READY. */
enum { MEMO_EMPTY = 0, MEMO_WRITING = 1, MEMO_READY = 2 };
struct nxv_fused_program {
  nxv_dtype dtype;                         /* immutable */
  uint32_t ninputs, ninstrs;               /* immutable */
  uint32_t second;                         /* immutable: the second result's
                                              register, 0 for none */
  uint32_t words[NXV_FUSED_MAX_INSTRS];    /* immutable */
  atomic_uint memo_state;                  /* MEMO_* */
  uint64_t memo_serial;        /* the device's serial (nxv_device.serial) */
  bool memo_in_double;         /* the program's check there (check_fused_instr) */
  uint32_t memo_scalar, memo_strided, memo_imm; /* the input layout */
  VkPipeline memo_pipeline;    /* its pipeline, owned by that device's registry */
};

/* A second result's register is an instruction's before the last. */
static nxv_status check_fused_second(uint32_t ninputs, uint32_t ninstrs, uint32_t second) {
  if (second < ninputs || second + 1 >= ninputs + ninstrs)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "fused: the second result is register %u, expected one of an instruction "
                    "before the last (%u to %u)", second, ninputs,
                    ninputs + ninstrs >= 2 ? ninputs + ninstrs - 2 : 0);
  return NXV_OK;
}

/* The checks of a program's type on device d, its counts and its second
 * result's register (0: none) that every run makes, interpreted or not. */
static nxv_status check_fused_head(nxv_device *d, nxv_dtype t, uint32_t ninputs,
                                   uint32_t ninstrs, uint32_t second, bool interpret) {
  bool integer = fused_integer(t);
  if (t != NXV_F16 && t != NXV_BF16 && t != NXV_F32 && t != NXV_F64 && !integer)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "fused: programs are of f16, bf16, f32, f64, s32, "
                    "s64, u32 or u64, not %s", nxv_dtype_name(t));
  if (integer && interpret)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "fused: the interpreter runs float programs, not %s",
                    nxv_dtype_name(t));
  NXV_TRY(check_type(d, t, "fused"));
  NXV_TRY(check_fused_counts(ninputs, ninstrs));
  if (second && interpret)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "fused: the interpreter runs programs of one "
                    "result");
  if (second) NXV_TRY(check_fused_second(ninputs, ninstrs, second));
  return NXV_OK;
}

/* nxv_ops_fused, and runs of a prepared program (prog non-NULL; never
 * interpreted): with prog's memo for d, the program's checks are skipped
 * and, for the memo's input layout, its pipeline lookup too. The program
 * has second ? 2 : 1 results; result k goes into dests[k].dst (from
 * element dests[k].offset on), or, where that is NULL, to a new tensor
 * returned in outs[k]. */
static nxv_status fused_op(nxv_device *d, nxv_dtype t, uint32_t rank,
                           const int64_t *shape_in, uint32_t ninputs,
                           const nxv_view *inputs, uint32_t imm_mask,
                           const uint64_t *imm_bits, uint32_t ninstrs,
                           const uint32_t *program, uint32_t second, bool interpret,
                           nxv_fused_program *prog, const nxv_fused_dest *dests,
                           nxv_tensor **outs) {
  uint32_t nres = second ? 2 : 1;
  bool need_outs = false;
  for (uint32_t k = 0; dests && k < nres; k++) need_outs = need_outs || !dests[k].dst;
  if (!d || !dests || (need_outs && !outs) || !inputs || !program || (imm_mask && !imm_bits))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "fused: NULL argument");
  bool integer = fused_integer(t);
  NXV_TRY(check_fused_head(d, t, ninputs, ninstrs, second, interpret));
  bool in_double = false;
  unsigned memo = prog ? atomic_load_explicit(&prog->memo_state, memory_order_acquire)
                       : MEMO_EMPTY;
  bool memo_here = memo == MEMO_READY && prog->memo_serial == d->serial;
  if (memo_here)
    in_double = prog->memo_in_double;
  else
    for (uint32_t k = 0; k < ninstrs; k++)
      NXV_TRY(check_fused_instr(d, t, ninputs, k, program[k], &in_double));
  if (interpret && ninstrs > NXV_OPS_INTERP_MAX_INSTRS)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "fused: %u instructions, the interpreter runs at most %d", ninstrs,
                    NXV_OPS_INTERP_MAX_INSTRS);
  for (uint32_t k = 0; interpret && k < ninstrs; k++)
    if (!nxv_ops_fused_basic(NXV_FUSED_CLASS(program[k]), NXV_FUSED_OP(program[k])))
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                      "fused: instruction %u (0x%08x) is not one the interpreter runs", k,
                      program[k]);
  uint64_t n;
  NXV_TRY(nxv_ops_check_shape(rank, shape_in, &n));
  int64_t shape[NXV_MAX_RANK], strides[NXV_FUSED_MAX_INPUTS][NXV_MAX_RANK];
  if (rank) memcpy(shape, shape_in, rank * sizeof *shape);
  if (imm_mask >> ninputs)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "fused: immediate mask 0x%x: immediates are "
                    "among the %u inputs", imm_mask, ninputs);
  /* The inputs' names in errors, not formatted on every call. */
  _Static_assert(NXV_FUSED_MAX_INPUTS == 12, "one name per fused input");
  static const char *const names[NXV_FUSED_MAX_INPUTS] = {
      "fused input 0", "fused input 1", "fused input 2",  "fused input 3",
      "fused input 4", "fused input 5", "fused input 6",  "fused input 7",
      "fused input 8", "fused input 9", "fused input 10", "fused input 11"};
  for (uint32_t k = 0; k < ninputs; k++) {
    if ((imm_mask >> k) & 1u) {
      for (uint32_t i = 0; i < rank; i++) strides[k][i] = 0;
      continue;
    }
    NXV_TRY(resolve_view(d, names[k], &inputs[k], rank, shape, n, strides[k]));
    if (inputs[k].tensor->dtype != t)
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "fused: input %u is %s, expected %s", k,
                      nxv_dtype_name(inputs[k].tensor->dtype), nxv_dtype_name(t));
  }
  /* The results: blocks of destinations (checked as dense views: their
   * device, bounds and readiness), new tensors made once every check has
   * passed. */
  nxv_tensor *res[NXV_FUSED_MAX_RESULTS] = {NULL, NULL};
  size_t es = nxv_dtype_size(t);
  for (uint32_t k = 0; k < nres; k++) {
    nxv_tensor *dst = dests[k].dst;
    if (!dst) continue;
    if (dst->dtype != t)
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "fused: destination is %s, the program %s",
                      nxv_dtype_name(dst->dtype), nxv_dtype_name(t));
    int64_t dense_in[NXV_MAX_RANK], dense_out[NXV_MAX_RANK];
    for (int64_t s = 1, i = (int64_t)rank - 1; i >= 0; i--) {
      dense_in[i] = s;
      if (n) s *= shape[i];
    }
    nxv_view block = {dst, dests[k].offset, dense_in};
    NXV_TRY(resolve_view(d, k ? "fused second destination" : "fused destination", &block,
                         rank, shape, n, dense_out));
    for (uint32_t j = 0; j < ninputs; j++)
      if (!((imm_mask >> j) & 1u) && inputs[j].tensor->buf == dst->buf)
        return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                        "fused: input %u reads the %sdestination's buffer", j,
                        k ? "second " : "");
  }
  if (nres == 2 && n && dests[0].dst && dests[1].dst &&
      dests[0].dst->buf == dests[1].dst->buf) {
    /* Blocks of one buffer (tensors of one buffer start at its start). */
    int64_t a = dests[0].offset, b = dests[1].offset;
    if (a < b + (int64_t)n && b < a + (int64_t)n)
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                      "fused: the two results' blocks overlap (elements %lld and %lld on, "
                      "%llu each)", (long long)a, (long long)b, (unsigned long long)n);
  }
  for (uint32_t k = 0; k < nres; k++) {
    if (dests[k].dst) {
      res[k] = dests[k].dst;
      continue;
    }
    nxv_status st = nxv_tensor_new(d, t, n, &res[k]);
    if (st != NXV_OK) {
      if (k && !dests[0].dst) nxv_tensor_release(res[0]);
      return st;
    }
  }
  if (n == 0) {
    for (uint32_t k = 0; k < nres; k++)
      if (!dests[k].dst) outs[k] = res[k];
    return NXV_OK;
  }
  uint32_t r = collapse(rank, shape, (int)ninputs, strides);
  /* Each input is a broadcast scalar, contiguous (row-major over the
   * collapsed shape) or strided (through the arena). */
  int64_t dense[NXV_MAX_RANK];
  for (int64_t s = 1, i = (int64_t)r - 1; i >= 0; i--) {
    dense[i] = s;
    s *= shape[i];
  }
  uint32_t scalar = 0, strided = 0;
  for (uint32_t k = 0; k < ninputs; k++) {
    bool zero = true, contiguous = true;
    for (uint32_t i = 0; i < r; i++) {
      if (strides[k][i] != 0) zero = false;
      if (strides[k][i] != dense[i]) contiguous = false;
    }
    if ((imm_mask >> k) & 1u) continue;
    if (zero) scalar |= 1u << k;
    else if (!contiguous) strided |= 1u << k;
  }
  /* Interpreted: the program's words first (fused.comp, INTERP). */
  uint32_t hdr = interpret ? 5 + NXV_OPS_INTERP_MAX_INSTRS : 0;
  nxv_node *node = nxv_node_new(hdr + (strided ? r + ninputs * (r + 1) : 0));
  if (!node) {
    for (uint32_t k = 0; k < nres; k++)
      if (!dests[k].dst) nxv_tensor_release(res[k]);
    return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "op node");
  }
  pc_fused pc = {.c = res[0]->buf->addr + (dests[0].dst ? (uint64_t)dests[0].offset * es : 0),
                 .n = (uint32_t)n,
                 .rank = r};
  if (second)
    pc.c2 = res[1]->buf->addr + (dests[1].dst ? (uint64_t)dests[1].offset * es : 0);
  for (uint32_t k = 0; k < ninputs; k++) {
    const nxv_view *v = &inputs[k];
    bool through_arena = (strided >> k) & 1u;
    if ((imm_mask >> k) & 1u) pc.in[k] = imm_bits[k];
    else pc.in[k] = v->tensor->buf->addr + (through_arena ? 0 : (uint64_t)v->offset * es);
  }
  if (interpret) {
    uint32_t *h = node->args;
    h[0] = ninputs;
    h[1] = ninstrs;
    h[2] = scalar;
    h[3] = strided;
    h[4] = imm_mask;
    memcpy(h + 5, program, ninstrs * sizeof *program);
    node->args_pc_offset = offsetof(pc_fused, args);
  }
  if (strided) {
    uint32_t *a = node->args + hdr;
    for (uint32_t i = 0; i < r; i++) a[i] = (uint32_t)shape[i];
    for (uint32_t k = 0; k < ninputs; k++) {
      uint32_t *w = a + r + k * (r + 1);
      w[0] = (imm_mask >> k) & 1u ? 0u : (uint32_t)inputs[k].offset;
      for (uint32_t i = 0; i < r; i++) w[1 + i] = (uint32_t)strides[k][i];
    }
    node->args_pc_offset = offsetof(pc_fused, args);
  }
  node->pc_size = second ? sizeof pc : PC_FUSED_ONE;
  memcpy(node->pc, &pc, node->pc_size);
  node->groups[0] = groups_for(d, n);
  node->groups[1] = node->groups[2] = 1;
  node->cost = n * (uint64_t)(ninputs + nres);
  for (uint32_t k = 0; k < ninputs; k++)
    if (!((imm_mask >> k) & 1u)) node_use(node, inputs[k].tensor, false);
  for (uint32_t k = 0; k < nres; k++) node_use(node, res[k], true);
  /* Specialization constants 3 .. 7 + ninstrs (fused.comp; word 4 also
   * holds the second result's register plus one in bits 8-15): the words
   * of the slots past the program are left at their defaults. */
  _Static_assert(NXV_FUSED_MAX_INSTRS < 256 && NXV_FUSED_MAX_INPUTS + NXV_FUSED_MAX_INSTRS < 255,
                 "a program's count and second register fit their bits of word 4");
  uint32_t words[5 + NXV_FUSED_MAX_INSTRS] = {
      ninputs, ninstrs | (second ? (second + 1u) << 8 : 0u), scalar, strided, imm_mask};
  memcpy(words + 5, program, ninstrs * sizeof *program);
  static const nxv_spv_module plain[] = {NXV_SPV_FUSED_F16, NXV_SPV_FUSED_BF16,
                                         NXV_SPV_FUSED_F32, NXV_SPV_FUSED_F64};
  static const nxv_spv_module in_dbl[] = {NXV_SPV_FUSED_F16_PRECISE,
                                          NXV_SPV_FUSED_BF16_PRECISE,
                                          NXV_SPV_FUSED_F32_PRECISE, NXV_SPV_FUSED_F64};
  static const nxv_spv_module interp[] = {
      NXV_SPV_FUSED_INTERP_F16, NXV_SPV_FUSED_INTERP_BF16, NXV_SPV_FUSED_INTERP_F32,
      NXV_SPV_FUSED_INTERP_F64};
  static const nxv_spv_module ints[] = {NXV_SPV_FUSED_S32, NXV_SPV_FUSED_S64,
                                        NXV_SPV_FUSED_U32, NXV_SPV_FUSED_U64};
  int ti = t == NXV_F16 ? 0 : t == NXV_BF16 ? 1 : t == NXV_F32 ? 2 : 3;
  int ii = t == NXV_S32 ? 0 : t == NXV_S64 ? 1 : t == NXV_U32 ? 2 : 3;
  nxv_status st;
  if (memo_here && prog->memo_scalar == scalar && prog->memo_strided == strided &&
      prog->memo_imm == imm_mask) {
    node->pipeline = prog->memo_pipeline;
    st = NXV_OK;
  } else if (integer) {
    st = nxv_registry_program_start(d->kernels, ints[ii], words, 5 + ninstrs,
                                    &node->pipeline, &node->pending);
  } else if (interpret) {
    st = nxv_registry_pipeline_start(d->kernels, interp[ti], 0, 0, &node->pipeline,
                                     &node->pending);
  } else {
    st = nxv_registry_program_start(d->kernels, in_double ? in_dbl[ti] : plain[ti], words,
                                    5 + ninstrs, &node->pipeline, &node->pending);
  }
  unsigned empty = MEMO_EMPTY;
  if (st == NXV_OK && prog && memo == MEMO_EMPTY && !node->pending &&
      atomic_compare_exchange_strong_explicit(&prog->memo_state, &empty, MEMO_WRITING,
                                              memory_order_acquire, memory_order_relaxed)) {
    prog->memo_serial = d->serial;
    prog->memo_in_double = in_double;
    prog->memo_scalar = scalar;
    prog->memo_strided = strided;
    prog->memo_imm = imm_mask;
    prog->memo_pipeline = node->pipeline;
    atomic_store_explicit(&prog->memo_state, MEMO_READY, memory_order_release);
  }
  if (st == NXV_OK) {
    node->kind = NXV_NODE_DISPATCH;
    st = queue(d, node);
  } else {
    nxv_node_discard(node);
  }
  if (st != NXV_OK) {
    for (uint32_t k = 0; k < nres; k++)
      if (!dests[k].dst) nxv_tensor_release(res[k]);
    return st;
  }
  for (uint32_t k = 0; k < nres; k++)
    if (!dests[k].dst) outs[k] = res[k];
  return NXV_OK;
}

nxv_status nxv_ops_fused(nxv_device *d, nxv_dtype t, uint32_t rank,
                         const int64_t *shape_in, uint32_t ninputs,
                         const nxv_view *inputs, uint32_t imm_mask,
                         const uint64_t *imm_bits, uint32_t ninstrs,
                         const uint32_t *program, bool interpret, nxv_tensor **out) {
  nxv_fused_dest dest = {NULL, 0};
  return fused_op(d, t, rank, shape_in, ninputs, inputs, imm_mask, imm_bits, ninstrs, program,
                  0, interpret, NULL, &dest, out);
}

/* nxv_fused_program_create and nxv_fused_program_create_pair (second 0:
 * one result). */
static nxv_status fused_program_create(nxv_dtype t, uint32_t ninputs, uint32_t ninstrs,
                                       const uint32_t *program, uint32_t second,
                                       nxv_fused_program **out_program) {
  if (!out_program || !program)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "fused program: NULL argument");
  if (t != NXV_F16 && t != NXV_BF16 && t != NXV_F32 && t != NXV_F64 && !fused_integer(t))
    return nxv_fail(NXV_ERR_UNSUPPORTED, "fused: programs are of f16, bf16, f32, f64, s32, "
                    "s64, u32 or u64, not %s", nxv_dtype_name(t));
  NXV_TRY(check_fused_counts(ninputs, ninstrs));
  for (uint32_t k = 0; k < ninstrs; k++)
    NXV_TRY(check_fused_operands(t, ninputs, k, program[k]));
  if (second) NXV_TRY(check_fused_second(ninputs, ninstrs, second));
  /* Whole cache lines: read by every run, so on none that other objects'
   * writers (other threads) share. */
  nxv_fused_program *p = nxv_lines_alloc(sizeof *p);
  if (!p) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "fused program");
  p->dtype = t;
  p->ninputs = ninputs;
  p->ninstrs = ninstrs;
  p->second = second;
  memcpy(p->words, program, ninstrs * sizeof *program);
  atomic_init(&p->memo_state, MEMO_EMPTY);
  *out_program = p;
  return NXV_OK;
}

nxv_status nxv_fused_check(nxv_device *d, nxv_dtype t, uint32_t ninputs, uint32_t ninstrs,
                           const uint32_t *program, uint32_t second) {
  if (!d || !program) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "fused check: NULL argument");
  NXV_TRY(check_fused_head(d, t, ninputs, ninstrs, second, false));
  bool in_double = false;
  for (uint32_t k = 0; k < ninstrs; k++)
    NXV_TRY(check_fused_instr(d, t, ninputs, k, program[k], &in_double));
  return NXV_OK;
}

nxv_status nxv_fused_program_create(nxv_dtype t, uint32_t ninputs, uint32_t ninstrs,
                                    const uint32_t *program,
                                    nxv_fused_program **out_program) {
  return fused_program_create(t, ninputs, ninstrs, program, 0, out_program);
}

nxv_status nxv_fused_program_create_pair(nxv_dtype t, uint32_t ninputs, uint32_t ninstrs,
                                         const uint32_t *program, uint32_t second,
                                         nxv_fused_program **out_program) {
  if (second == 0)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "fused: the second result is register 0, an input's");
  return fused_program_create(t, ninputs, ninstrs, program, second, out_program);
}

void nxv_fused_program_free(nxv_fused_program *p) { free(p); }

uint32_t nxv_fused_program_second(const nxv_fused_program *p) { return p->second; }

nxv_dtype nxv_fused_program_dtype(const nxv_fused_program *p) { return p->dtype; }

uint32_t nxv_fused_program_inputs(const nxv_fused_program *p) { return p->ninputs; }

nxv_status nxv_fused_run(nxv_device *d, nxv_fused_program *p, uint32_t rank,
                         const int64_t *shape, const nxv_view *inputs, uint32_t imm_mask,
                         const uint64_t *imm_bits, nxv_tensor **out) {
  if (!p) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "fused: NULL program");
  if (p->second) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "fused: a program of two results "
                                 "runs through nxv_fused_run_pair");
  nxv_fused_dest dest = {NULL, 0};
  return fused_op(d, p->dtype, rank, shape, p->ninputs, inputs, imm_mask, imm_bits,
                  p->ninstrs, p->words, 0, false, p, &dest, out);
}

nxv_status nxv_fused_run_pair(nxv_device *d, nxv_fused_program *p, uint32_t rank,
                              const int64_t *shape, const nxv_view *inputs, uint32_t imm_mask,
                              const uint64_t *imm_bits,
                              const nxv_fused_dest dests[NXV_FUSED_MAX_RESULTS],
                              nxv_tensor *out_tensors[NXV_FUSED_MAX_RESULTS]) {
  if (!p) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "fused: NULL program");
  if (!p->second)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "fused: the program has one result");
  return fused_op(d, p->dtype, rank, shape, p->ninputs, inputs, imm_mask, imm_bits,
                  p->ninstrs, p->words, p->second, false, p, dests, out_tensors);
}

nxv_status nxv_fused_pair(nxv_device *d, nxv_dtype t, uint32_t rank, const int64_t *shape,
                          uint32_t ninputs, const nxv_view *inputs, uint32_t imm_mask,
                          const uint64_t *imm_bits, uint32_t ninstrs, const uint32_t *program,
                          uint32_t second, const nxv_fused_dest dests[NXV_FUSED_MAX_RESULTS],
                          nxv_tensor *out_tensors[NXV_FUSED_MAX_RESULTS]) {
  if (second == 0)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "fused: the second result is register 0, an input's");
  return fused_op(d, t, rank, shape, ninputs, inputs, imm_mask, imm_bits, ninstrs, program,
                  second, false, NULL, dests, out_tensors);
}

nxv_status nxv_fused_run_into(nxv_device *d, nxv_fused_program *p, uint32_t rank,
                              const int64_t *shape, const nxv_view *inputs, uint32_t imm_mask,
                              const uint64_t *imm_bits, nxv_tensor *dst, int64_t dst_offset) {
  if (!p || !dst) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "fused: NULL argument");
  if (p->second) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "fused: a program of two results "
                                 "runs through nxv_fused_run_pair");
  nxv_fused_dest dest = {dst, dst_offset};
  return fused_op(d, p->dtype, rank, shape, p->ninputs, inputs, imm_mask, imm_bits,
                  p->ninstrs, p->words, 0, false, p, &dest, NULL);
}

nxv_status nxv_fused_into(nxv_device *d, nxv_dtype t, uint32_t rank, const int64_t *shape,
                          uint32_t ninputs, const nxv_view *inputs, uint32_t imm_mask,
                          const uint64_t *imm_bits, uint32_t ninstrs, const uint32_t *program,
                          nxv_tensor *dst, int64_t dst_offset) {
  if (!dst) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "fused: NULL argument");
  nxv_fused_dest dest = {dst, dst_offset};
  return fused_op(d, t, rank, shape, ninputs, inputs, imm_mask, imm_bits, ninstrs, program, 0,
                  false, NULL, &dest, NULL);
}

nxv_status nxv_fused(nxv_device *d, nxv_dtype t, uint32_t rank, const int64_t *shape,
                     uint32_t ninputs, const nxv_view *inputs, uint32_t ninstrs,
                     const uint32_t *program, nxv_tensor **out) {
  return nxv_ops_fused(d, t, rank, shape, ninputs, inputs, 0, NULL, ninstrs, program, false,
                       out);
}

nxv_status nxv_fused_imm(nxv_device *d, nxv_dtype t, uint32_t rank, const int64_t *shape,
                         uint32_t ninputs, const nxv_view *inputs, uint32_t imm_mask,
                         const uint64_t *imm_bits, uint32_t ninstrs, const uint32_t *program,
                         nxv_tensor **out) {
  return nxv_ops_fused(d, t, rank, shape, ninputs, inputs, imm_mask, imm_bits, ninstrs, program,
                       false, out);
}

nxv_status nxv_copy_into(nxv_device *d, nxv_tensor *dst, int64_t dst_offset,
                         const int64_t *dst_strides, uint32_t rank,
                         const int64_t *shape_in, const nxv_view *src) {
  if (!d || !dst || !src || !src->tensor || (rank && !dst_strides))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "copy_into: NULL argument");
  nxv_dtype from = src->tensor->dtype, to = dst->dtype;
  NXV_TRY(check_type(d, from, "copy_into"));
  NXV_TRY(check_type(d, to, "copy_into"));
  uint64_t n;
  NXV_TRY(nxv_ops_check_shape(rank, shape_in, &n));
  int64_t shape[NXV_MAX_RANK] = {0}, strides[2][NXV_MAX_RANK];
  if (rank) memcpy(shape, shape_in, rank * sizeof *shape);
  NXV_TRY(resolve_view(d, "copy_into source", src, rank, shape, n, strides[0]));
  for (uint32_t i = 0; i < rank; i++)
    if (dst_strides[i] == 0 && shape[i] > 1)
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                      "copy_into: destination stride 0 on axis %u of size %lld "
                      "writes one element several times", i, (long long)shape[i]);
  nxv_view dv = {dst, dst_offset, dst_strides};
  NXV_TRY(resolve_view(d, "copy_into destination", &dv, rank, shape, n, strides[1]));
  if (n == 0) return NXV_OK;
  uint32_t r = collapse(rank, shape, 2, strides);
  nxv_node *node = nxv_node_new(3 * r + 2);
  if (!node) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "op node");
  uint32_t *a = node->args;
  for (uint32_t i = 0; i < r; i++) {
    a[i] = (uint32_t)shape[i];
    a[r + i] = (uint32_t)strides[0][i];
    a[2 * r + i] = (uint32_t)strides[1][i];
  }
  a[3 * r] = (uint32_t)src->offset;
  a[3 * r + 1] = (uint32_t)dst_offset;
  pc_ew pc = {.a = src->tensor->buf->addr, .c = dst->buf->addr, .n = (uint32_t)n,
              .rank = r};
  memcpy(node->pc, &pc, sizeof pc);
  node->pc_size = sizeof pc;
  node->args_pc_offset = offsetof(pc_ew, args);
  node->groups[0] = groups_for(d, n);
  node->groups[1] = node->groups[2] = 1;
  node->cost = 2 * n;
  node_use(node, src->tensor, false);
  node_use(node, dst, true);
  return push_dispatch(d, node, unary_module(from, to), NXV_COPY, 2);
}

nxv_status nxv_transpose(nxv_device *d, uint32_t rank, const int64_t *in_shape,
                         nxv_tensor *a, const uint32_t *perm,
                         nxv_tensor **out) {
  if (!d || !out || !a || (rank && (!perm || !in_shape)))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "transpose: NULL argument");
  NXV_TRY(nxv_tensor_ready(a));
  uint64_t n;
  NXV_TRY(nxv_ops_check_shape(rank, in_shape, &n));
  if (n != a->count)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "transpose: tensor has %llu elements, shape needs %llu",
                    (unsigned long long)a->count, (unsigned long long)n);
  int64_t in_strides[NXV_MAX_RANK], shape[NXV_MAX_RANK], strides[NXV_MAX_RANK];
  uint32_t seen = 0;
  int64_t s = 1;
  for (int i = (int)rank - 1; i >= 0; i--) {
    in_strides[i] = s;
    /* Without elements the strides are unused; a zero dimension may come
     * with others whose product overflows. */
    if (n) s *= in_shape[i];
  }
  for (uint32_t k = 0; k < rank; k++) {
    if (perm[k] >= rank || (seen >> perm[k]) & 1u)
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                      "transpose: axes are not a permutation of 0..%u", rank - 1);
    seen |= 1u << perm[k];
    shape[k] = in_shape[perm[k]];
    strides[k] = in_strides[perm[k]];
  }
  nxv_view v = {a, 0, strides};
  return nxv_unary(d, NXV_COPY, rank, shape, &v, out);
}

nxv_status nxv_broadcast_strides(uint32_t in_rank, const int64_t *in_shape,
                                 uint32_t out_rank, const int64_t *out_shape,
                                 int64_t *out_strides) {
  if (in_rank > out_rank || out_rank > NXV_MAX_RANK)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "broadcast from rank %u to rank %u", in_rank, out_rank);
  if ((in_rank && !in_shape) || (out_rank && (!out_shape || !out_strides)))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "broadcast: NULL argument");
  /* Computed aside: out_strides is written only on success. */
  int64_t strides[NXV_MAX_RANK];
  int64_t s = 1;
  for (int i = (int)out_rank - 1; i >= 0; i--) {
    int j = i - (int)(out_rank - in_rank);
    if (j < 0) {
      strides[i] = 0;
      continue;
    }
    if (in_shape[j] == out_shape[i]) {
      strides[i] = in_shape[j] == 1 ? 0 : s;
    } else if (in_shape[j] == 1) {
      strides[i] = 0;
    } else {
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                      "cannot broadcast axis %d of size %lld to size %lld", j,
                      (long long)in_shape[j], (long long)out_shape[i]);
    }
    s *= in_shape[j] ? in_shape[j] : 1;
  }
  for (uint32_t i = 0; i < out_rank; i++) out_strides[i] = strides[i];
  return NXV_OK;
}

/* ------------------------------------------------------------------ */
/* Reduction                                                           */
/* ------------------------------------------------------------------ */

/* The reduce.comp variant for n_out results of k elements each, and for
 * split reductions the chunking: *nsplit chunks of *kchunk elements.
 * rows: the reduced elements of one result are contiguous (a workgroup per
 * result reads them coalesced); cols: the results are (neighbouring
 * threads read neighbouring elements). Too few results to fill a large
 * GPU split their reduced elements (deterministically: partials are
 * combined in chunk order). */
static uint32_t reduce_plan(uint64_t n_out, uint64_t k, bool rows, bool cols,
                            bool splittable, uint32_t *nsplit, uint32_t *kchunk) {
  *nsplit = 1;
  *kchunk = (uint32_t)k;
  /* Fewer than 64 elements per result: one thread sums them in order (as
   * a host loop would), whatever the layout. */
  bool per_group = k >= 64 && (rows || !cols);
  if (!splittable) return per_group ? 1 : 0;
  uint64_t chunks = 0, min_chunk;
  if (per_group) {                /* aim for ~4096 workgroups */
    min_chunk = 2048;
    if (n_out < 2048 && k >= 2 * min_chunk) chunks = (4096 + n_out - 1) / n_out;
  } else {                        /* aim for ~256K threads */
    min_chunk = 64;
    if (n_out < 131072 && k >= 2 * min_chunk) chunks = (262144 + n_out - 1) / n_out;
  }
  if (chunks > k / min_chunk) chunks = k / min_chunk;
  if (chunks > MAX_GROUPS) chunks = MAX_GROUPS;
  if (chunks < 2) return per_group ? 1 : 0;
  uint64_t kc = (k + chunks - 1) / chunks;
  *kchunk = (uint32_t)kc;
  *nsplit = (uint32_t)((k + kc - 1) / kc);
  return per_group ? 3 : 2;
}

/* A dtype as wide as the accumulator of a reduction into type t
 * (reduce.comp's RC: t's compute type), for the partial results of split
 * reductions. */
static nxv_dtype compute_width_type(nxv_dtype t) {
  switch (t) {
    case NXV_S64: case NXV_U64: case NXV_F64: case NXV_C64: return NXV_U64;
    case NXV_C128: return NXV_C128;
    default: return NXV_U32;
  }
}

/* Shared by reductions and arg-reductions: splits the axes into kept and
 * reduced groups and queues module with op; the result has out_type.
 * splittable: module is a reduce.comp module (split variants 2-5). */
static nxv_status reduce_common(nxv_device *d, nxv_spv_module module, uint32_t op,
                                bool splittable, nxv_dtype out_type, uint32_t rank,
                                const int64_t *in_shape, const nxv_view *a,
                                uint32_t axes_mask, nxv_tensor **out) {
  uint64_t n;
  NXV_TRY(nxv_ops_check_shape(rank, in_shape, &n));
  if (rank < 32 && (axes_mask >> rank) != 0)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "reduce: axes mask 0x%x names axes beyond rank %u",
                    axes_mask, rank);
  int64_t strides[NXV_MAX_RANK];
  NXV_TRY(resolve_view(d, "reduce operand", a, rank, in_shape, n, strides));
  /* Split into kept and reduced groups, each collapsed. */
  int64_t ks[NXV_MAX_RANK], kst[1][NXV_MAX_RANK], rs[NXV_MAX_RANK],
      rst[1][NXV_MAX_RANK];
  uint32_t rk = 0, rr = 0;
  uint64_t n_out = 1, k = 1;
  for (uint32_t i = 0; i < rank; i++) {
    uint64_t *acc = (axes_mask >> i) & 1u ? &k : &n_out;
    if (*acc && (uint64_t)in_shape[i] > UINT32_MAX / *acc)
      *acc = UINT64_MAX; /* only an empty input gets here */
    else
      *acc *= (uint64_t)in_shape[i];
    if ((axes_mask >> i) & 1u) {
      rs[rr] = in_shape[i];
      rst[0][rr++] = strides[i];
    } else {
      ks[rk] = in_shape[i];
      kst[0][rk++] = strides[i];
    }
  }
  if (n_out > UINT32_MAX)
    return nxv_fail(NXV_ERR_UNSUPPORTED,
                    "reduce: result has more than 2^32-1 elements");
  if (k > UINT32_MAX) k = 0; /* n_out == 0 or the input is empty */
  nxv_tensor *tout;
  NXV_TRY(nxv_tensor_new(d, out_type, n_out, &tout));
  if (n_out == 0) {
    *out = tout;
    return NXV_OK;
  }
  rk = collapse(rk, ks, 1, kst);
  /* k == 0: nothing to read, the identity; the reduced axes (one of them
   * 0, the others possibly huge) are not collapsed, their product could
   * overflow. */
  rr = k ? collapse(rr, rs, 1, rst) : 0;
  nxv_node *node = nxv_node_new(2 * rk + 2 * rr + 1);
  if (!node) {
    nxv_tensor_release(tout);
    return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "op node");
  }
  uint32_t *w = node->args;
  for (uint32_t i = 0; i < rk; i++) w[i] = (uint32_t)ks[i];
  for (uint32_t i = 0; i < rk; i++) w[rk + i] = (uint32_t)kst[0][i];
  for (uint32_t i = 0; i < rr; i++) w[2 * rk + i] = (uint32_t)rs[i];
  for (uint32_t i = 0; i < rr; i++) w[2 * rk + rr + i] = (uint32_t)rst[0][i];
  w[2 * rk + 2 * rr] = (uint32_t)a->offset;
  pc_reduce pc = {.a = a->tensor->buf->addr,
                  .c = tout->buf->addr,
                  .n_out = (uint32_t)n_out,
                  .k = (uint32_t)k,
                  .rank_kept = rk,
                  .rank_red = rr};
  memcpy(node->pc, &pc, sizeof pc);
  node->pc_size = sizeof pc;
  node->args_pc_offset = offsetof(pc_reduce, args);
  bool rows = rr > 0 && rst[0][rr - 1] == 1;
  bool cols = rk > 0 && kst[0][rk - 1] == 1;
  uint32_t nsplit, kchunk;
  uint32_t variant = reduce_plan(n_out, k, rows, cols, splittable, &nsplit, &kchunk);
  /* A workgroup per result reading a contiguous run: 4-wide loads when
   * every run starts 4-aligned. Chunks of split runs (variant 3) take them
   * for 8- and 16-bit types only, their chunks rounded up to a multiple of
   * 4 so that each starts aligned too: on an H100 the whole-tensor f16 sum
   * went from 79% to 90% of copy (GPU time), while the f32 one measured
   * 87% -> 77% with them. */
  size_t esize = nxv_dtype_size(a->tensor->dtype);
  bool vec_chunks = variant == 3 && esize <= 2;
  if (splittable && (variant == 1 || vec_chunks) && rr == 1 && rst[0][0] == 1 &&
      flat_ok(a->tensor->dtype) && a->offset % 4 == 0 &&
      (a->tensor->buf->addr % (4 * esize)) == 0) {
    bool aligned = true;
    for (uint32_t i = 0; i < rk; i++) aligned = aligned && kst[0][i] % 4 == 0;
    if (aligned) {
      pc.flags |= 1u;
      if (vec_chunks) {
        kchunk = (uint32_t)(((uint64_t)kchunk + 3) & ~3ull);
        nsplit = (uint32_t)((k + kchunk - 1) / kchunk);
      }
    }
  }
  /* Results contiguous (a thread per result, or per result and chunk) of
   * 8- and 16-bit types: a thread takes 4 neighbouring results with 4-wide
   * loads where every group of 4 starts aligned, and the split is planned
   * for a quarter of the threads. On an H100 the f16 column sums of an
   * 8192x8192 tensor went from 57-60% to 69% of copy in the machine's slow
   * f16 spells and from 77% to 80% in its fast ones; f32 and f64 lost 3
   * points that way and keep a result per thread, and 8 results per thread
   * (two 4-wide loads) measured 25% below a result per thread. */
  bool quads = false;
  if (splittable && (variant == 0 || variant == 2) && cols && rr > 0 && esize <= 2 &&
      flat_ok(a->tensor->dtype) && ks[rk - 1] % 4 == 0 && a->offset % 4 == 0 &&
      a->tensor->buf->addr % (4 * esize) == 0) {
    quads = true;
    for (uint32_t i = 0; i + 1 < rk; i++) quads = quads && kst[0][i] % 4 == 0;
    for (uint32_t i = 0; i < rr; i++) quads = quads && rst[0][i] % 4 == 0;
    if (quads) {
      pc.flags |= 2u;
      variant = reduce_plan(n_out / 4, k, rows, cols, splittable, &nsplit, &kchunk);
    }
  }
  /* 16-bit types go further where groups of 8 start 16-byte aligned: a
   * thread takes 8 neighbouring results, reading 16 bytes at a time. On
   * an H200 (GPU time) f16 column sums of an 8192x8192 tensor went from
   * 82% to 113% of the copy bandwidth (a read-only kernel). */
  bool octets = false;
  if (quads && esize == 2 && ks[rk - 1] % 8 == 0 && a->offset % 8 == 0 &&
      a->tensor->buf->addr % 16 == 0) {
    octets = true;
    for (uint32_t i = 0; i + 1 < rk; i++) octets = octets && kst[0][i] % 8 == 0;
    for (uint32_t i = 0; i < rr; i++) octets = octets && rst[0][i] % 8 == 0;
    if (octets) {
      pc.flags = (pc.flags & ~2u) | 4u;
      variant = reduce_plan(n_out / 8, k, rows, cols, splittable, &nsplit, &kchunk);
    }
  }
  memcpy(node->pc, &pc, sizeof pc);
  nxv_tensor *part = NULL;
  if (nsplit > 1) {
    nxv_status st = nxv_tensor_new(d, compute_width_type(out_type),
                                   (uint64_t)nsplit * n_out, &part);
    if (st != NXV_OK) {
      nxv_node_discard(node);
      nxv_tensor_release(tout);
      return st;
    }
    pc.part = part->buf->addr;
    pc.kchunk = kchunk;
    pc.nsplit = nsplit;
    memcpy(node->pc, &pc, sizeof pc);
  }
  if (variant == 1 || variant == 3) {
    node->groups[0] = groups_capped(d, n_out);
  } else {
    node->groups[0] = groups_for(d, octets ? n_out / 8 : quads ? n_out / 4 : n_out);
  }
  node->groups[1] = nsplit;
  node->groups[2] = 1;
  node->cost = n + n_out;
  node_use(node, a->tensor, false);
  node_use(node, part ? part : tout, true);
  nxv_ops_dispatch_hook hook = hook_now();
  if (hook) {
    nxv_ops_dispatch info = {.kind = NXV_OPS_REDUCE, .op = nxv_reduce_op_name(op),
                             .variant = variant, .flags = pc.flags, .out_addr = pc.c,
                             .out_size = nxv_dtype_size(out_type)};
    info.reduce.addr = a->tensor->buf->addr;
    info.reduce.offset = a->offset;
    info.reduce.in_size = esize;
    info.reduce.rank_kept = rk;
    info.reduce.rank_red = rr;
    info.reduce.kept_shape = ks;
    info.reduce.kept_strides = kst[0];
    info.reduce.red_shape = rs;
    info.reduce.red_strides = rst[0];
    info.reduce.nsplit = nsplit;
    info.reduce.kchunk = kchunk;
    hook(&info);
  }
  nxv_status st = push_dispatch(d, node, module, op, variant);
  if (st == NXV_OK && part) {
    /* Second pass: combine the partials of each result in chunk order;
     * few results with many chunks each take a workgroup per result. */
    bool wide = nsplit >= 64 && n_out <= 1024;
    st = push_combine(d, &pc, sizeof pc, wide ? groups_capped(d, n_out) : groups_for(d, n_out),
                      (uint64_t)nsplit * n_out + n_out, part, tout, module, op,
                      wide ? 5 : 4);
  }
  nxv_tensor_release(part); /* the queued nodes hold its buffer */
  if (st != NXV_OK) {
    nxv_tensor_release(tout);
    return st;
  }
  *out = tout;
  return NXV_OK;
}

/* The reduce.comp module summing (or multiplying) narrow integers of type
 * t into 64 bits, or NXV_SPV_COUNT where t has none. */
static nxv_spv_module widening_reduce_module(nxv_dtype t) {
  switch (t) {
    case NXV_S8: return NXV_SPV_REDUCE_S8_S64;
    case NXV_S16: return NXV_SPV_REDUCE_S16_S64;
    case NXV_S32: return NXV_SPV_REDUCE_S32_S64;
    case NXV_U8: return NXV_SPV_REDUCE_U8_U64;
    case NXV_U16: return NXV_SPV_REDUCE_U16_U64;
    case NXV_U32: return NXV_SPV_REDUCE_U32_U64;
    default: return NXV_SPV_COUNT;
  }
}

nxv_status nxv_reduce_to(nxv_device *d, nxv_reduce_op op, nxv_dtype out_type,
                         uint32_t rank, const int64_t *in_shape, const nxv_view *a,
                         uint32_t axes_mask, nxv_tensor **out) {
  if (!d || !out || !a || !a->tensor)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "reduce: NULL argument");
  if ((unsigned)op >= NXV_REDUCE_OP_COUNT)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "reduce: invalid op %d", (int)op);
  if ((unsigned)out_type >= NXV_DTYPE_COUNT)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "reduce: invalid result dtype %d",
                    (int)out_type);
  nxv_dtype t = a->tensor->dtype;
  NXV_TRY(check_type(d, t, nxv_reduce_op_name(op)));
  if (is_complex(t) && op != NXV_REDUCE_SUM && op != NXV_REDUCE_PRODUCT)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "reduce %s is not defined for complex type %s",
                    nxv_reduce_op_name(op), nxv_dtype_name(t));
  nxv_spv_module module = family(NXV_SPV_REDUCE_S8, t);
  if (out_type != t) {
    nxv_spv_module wide = widening_reduce_module(t);
    bool to64 = out_type == (t <= NXV_S64 ? NXV_S64 : NXV_U64);
    if (wide == NXV_SPV_COUNT || !to64 ||
        (op != NXV_REDUCE_SUM && op != NXV_REDUCE_PRODUCT))
      return nxv_fail(NXV_ERR_UNSUPPORTED,
                      "reduce %s from %s into %s: only sums and products of 8-, 16- "
                      "and 32-bit integers into the 64-bit type of their sign",
                      nxv_reduce_op_name(op), nxv_dtype_name(t), nxv_dtype_name(out_type));
    NXV_TRY(check_type(d, out_type, nxv_reduce_op_name(op)));
    module = wide;
  }
  return reduce_common(d, module, op, true, out_type, rank, in_shape, a, axes_mask, out);
}

nxv_status nxv_reduce(nxv_device *d, nxv_reduce_op op, uint32_t rank,
                      const int64_t *in_shape, const nxv_view *a,
                      uint32_t axes_mask, nxv_tensor **out) {
  if (!d || !out || !a || !a->tensor)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "reduce: NULL argument");
  return nxv_reduce_to(d, op, a->tensor->dtype, rank, in_shape, a, axes_mask, out);
}

nxv_status nxv_argreduce(nxv_device *d, bool is_max, bool tie_high, uint32_t rank,
                         const int64_t *in_shape, const nxv_view *a,
                         uint32_t axes_mask, nxv_tensor **out) {
  const char *name = is_max ? "argmax" : "argmin";
  if (!d || !out || !a || !a->tensor)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: NULL argument", name);
  nxv_dtype t = a->tensor->dtype;
  NXV_TRY(check_real_type(d, t, name));
  uint64_t n = 1, k = 1;
  for (uint32_t i = 0; i < rank && in_shape; i++) {
    if ((axes_mask >> i) & 1u) k *= (uint64_t)(in_shape[i] > 0 ? in_shape[i] : 0);
    n *= (uint64_t)(in_shape[i] > 0 ? in_shape[i] : 0);
  }
  if (k > INT32_MAX)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "%s: more than 2^31-1 elements per result",
                    name);
  uint32_t op = (is_max ? 0u : 1u) + (tie_high ? 2u : 0u);
  return reduce_common(d, family(NXV_SPV_ARGREDUCE_S8, t), op, false, NXV_S64, rank,
                       in_shape, a, axes_mask, out);
}

/* ------------------------------------------------------------------ */
/* Matmul                                                              */
/* ------------------------------------------------------------------ */

static nxv_status check_operand(const char *what, nxv_tensor *t, int64_t off,
                                const int64_t s[3], const uint64_t dims[3]) {
  if (!t) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "matmul: NULL %s", what);
  __int128 lo = off, hi = off;
  bool empty = false;
  for (int i = 0; i < 3; i++) {
    if (dims[i] == 0) empty = true;
    if (s[i] > INT32_MAX || s[i] < INT32_MIN)
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                      "matmul: %s stride %lld out of range", what, (long long)s[i]);
    __int128 span = (__int128)s[i] * ((int64_t)dims[i] - 1);
    if (span > 0) hi += span;
    else lo += span;
  }
  if (!empty && (lo < 0 || hi >= (__int128)t->count))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "matmul: %s reaches elements [%lld, %lld] of a tensor of %llu",
                    what, (long long)lo, (long long)hi,
                    (unsigned long long)t->count);
  return nxv_tensor_ready(t);
}

/* Whether coopmat.comp can run m (f16 or bf16 operands, type t) on device
 * d, and its variant: each operand contiguous along one of its axes,
 * 8-element (16 byte) aligned groups along it (offsets, the other strides
 * and the contiguous extent multiples of 8). */
static bool coopmat_layout(nxv_device *d, nxv_dtype t, const nxv_matmul_desc *m,
                           uint32_t *out_variant) {
  bool tensor_cores = t == NXV_F16 ? d->vk.info.coopmat_f16
                      : t == NXV_BF16 ? d->vk.info.coopmat_bf16
                                      : false;
  if (!tensor_cores || d->vk.info.max_workgroup_invocations < NXV_COOPMAT_THREADS ||
      d->vk.info.max_shared_memory < NXV_COOPMAT_SHARED)
    return false;
  const int64_t *sa = m->a_strides, *sb = m->b_strides;
  bool batched = m->batch > 1;
  if (m->a_offset % 8 || m->b_offset % 8 || (batched && (sa[0] % 8 || sb[0] % 8)))
    return false;
  uint32_t v = 0;
  if (sa[2] == 1 && sa[1] % 8 == 0 && m->k % 8 == 0) v |= 0;      /* A k-contiguous */
  else if (sa[1] == 1 && sa[2] % 8 == 0 && m->m % 8 == 0) v |= 1; /* A transposed */
  else return false;
  if (sb[2] == 1 && sb[1] % 8 == 0 && m->n % 8 == 0) v |= 0;      /* B n-contiguous */
  else if (sb[1] == 1 && sb[2] % 8 == 0 && m->k % 8 == 0) v |= 2; /* B transposed */
  else return false;
  if (sa[0] < 0 || sa[1] < 0 || sa[2] < 0 || sb[0] < 0 || sb[1] < 0 || sb[2] < 0)
    return false;
  *out_variant = v;
  return true;
}

/* Shared memory of gemm.comp's variant in bytes (mirrors the shader's
 * As and Bs): two buffers of a k slice of A (BM rows) and of B (BN
 * columns), f32, rows padded by 4 floats for slices of 8, unpadded for the
 * deep slices of 16 (bit 2). */
static uint32_t gemm_shared(uint32_t variant) {
  uint32_t shape = variant & 3u, bm = shape == 1u ? 64u : 128u, bn = shape == 3u ? 256u : bm;
  uint32_t bk = (variant & 4u) ? 16u : 8u, pad = (variant & 4u) ? 0u : 4u;
  return 2u * bk * (bm + pad) * 4u + 2u * bk * (bn + pad) * 4u;
}

/* Chunks of k for a product of `tiles` tiles (batches included) split
 * over about target workgroups, each chunk a multiple of align (a power
 * of two: the kernel's k slice) and at least min_chunk long: returns their
 * number (1: no split) and sets *kchunk to their length when there are
 * several; within the device's grid. */
static uint32_t split_k(const nxv_device *d, const nxv_matmul_desc *m, uint64_t tiles,
                        uint64_t target, uint64_t min_chunk, uint64_t align,
                        uint32_t *kchunk) {
  uint64_t ns = (target + tiles - 1) / tiles;
  if (ns > m->k / min_chunk) ns = m->k / min_chunk;
  if (ns * m->batch > d->vk.info.max_workgroup_count[2]) ns = 1;
  if (ns < 2) return 1;
  uint64_t kc = (m->k + ns - 1) / ns;
  kc = (kc + align - 1) & ~(align - 1);
  *kchunk = (uint32_t)kc;
  return (uint32_t)((m->k + kc - 1) / kc);
}

/* Large f16, bf16 and f32 products whose B is read along k (B stored
 * transposed, [n][k]) copy B into a dense [k][n] tensor first (the
 * transpose kernel) and read it along n, as the untransposed layout does.
 * On an H200 (TFLOP/s at 4096^3, the copy included): f32 B transposed
 * 43.3 -> 46.1, both transposed 43.7 -> 45.7 (cuBLAS 50.5 / 49.3); f16
 * and bf16 both transposed 131-175 -> 284-294 in most runs, B transposed
 * 285-294 where it ran at 138-196 in most runs and 317 in some. The copy
 * moves k n elements against the product's 2 m n k FLOPs, a few percent
 * of its time from m = 2048 on; where B has a batch stride each batch's
 * B is copied. Only where the copy's rows can be read 4 (f32) or 8
 * (f16, bf16: the tensor cores' alignment) elements at a time. */
#define NXV_B_COPY_MIN_M 2048
#define NXV_B_COPY_MIN_MNK 0x1p34

/* Whether m (operands of type t, arguments checked) takes that copy. */
static bool b_copy_pays(const nxv_device *d, nxv_dtype t, const nxv_matmul_desc *m) {
  if (t != NXV_F16 && t != NXV_BF16 && t != NXV_F32) return false;
  if (d->vk.info.max_workgroup_invocations < 256) return false;
  if (m->b_strides[1] != 1 || m->b_strides[2] == 1) return false; /* B read along n */
  if (m->n % (t == NXV_F32 ? 4 : 8)) return false;
  return m->m >= NXV_B_COPY_MIN_M &&
         (double)m->m * (double)m->n * (double)m->k * (double)m->batch >= NXV_B_COPY_MIN_MNK;
}

/* Large f32 products whose A is read along k (A stored [m][k]) copy A
 * into a dense [k][m] tensor first and read it along m, as a transposed
 * A: the 128x256 tiles then store both operands' slices into shared
 * memory as they are read, without the transposed stores that conflict
 * in their unpadded deep slices. The copy moves m k elements against the
 * product's 2 m n k FLOPs, so what it costs falls with n. On an H200
 * (TFLOP/s, the copy included): 4096^3 46.6 -> 47.3-47.6, 8192^3 47.1 ->
 * 48.4-48.5, B transposed (both copied) 46.1 -> 47.0-47.1; where n is
 * 2048 or less it did not pay: 2048^3 44.6 -> 44.7, 8 x 1024^3 44.8 ->
 * 44.3. Only where the copy's rows can be read 4 elements at a time. */
#define NXV_A_COPY_MIN_N 4096
#define NXV_A_COPY_MIN_MNK 0x1p34

/* Whether gemm.comp reads m's A along k (k contiguous, m not: A stored
 * [m][k]), as the shader's a_walk_k decides; else along m. */
static bool a_along_k(const nxv_matmul_desc *m) {
  return m->a_strides[2] == 1 && m->a_strides[1] != 1;
}

/* Whether m (operands of type t, arguments checked) takes the A copy. */
static bool a_copy_pays(const nxv_device *d, nxv_dtype t, const nxv_matmul_desc *m) {
  if (t != NXV_F32 || d->vk.info.max_workgroup_invocations < 256) return false;
  if (!a_along_k(m)) return false;
  if (m->m % 4) return false;
  return m->n >= NXV_A_COPY_MIN_N &&
         (double)m->m * (double)m->n * (double)m->k * (double)m->batch >= NXV_A_COPY_MIN_MNK;
}

/* Copies the batch x rows x cols elements of x read through strides
 * {batch, row, column} from offset into a new dense [batch][rows][cols]
 * tensor, *out_dense (one [rows][cols] copy where the batch stride is 0),
 * through the transpose kernel, and sets *out_batch_stride to the copy's
 * batch stride. Queued, not waited for; the caller owns the copy. */
static nxv_status copy_dense(nxv_device *d, nxv_tensor *x, int64_t offset,
                             const int64_t strides[3], uint64_t batch, uint64_t rows,
                             uint64_t cols, nxv_tensor **out_dense,
                             int64_t *out_batch_stride) {
  bool per_batch = batch > 1 && strides[0] != 0;
  int64_t shape[3] = {(int64_t)batch, (int64_t)rows, (int64_t)cols};
  nxv_view v = {x, offset, per_batch ? strides : strides + 1};
  NXV_TRY(nxv_unary(d, NXV_COPY, per_batch ? 3 : 2, per_batch ? shape : shape + 1, &v,
                    out_dense));
  *out_batch_stride = per_batch ? (int64_t)(rows * cols) : 0;
  return NXV_OK;
}

static nxv_status matmul_run(nxv_device *d, const nxv_matmul_desc *m, nxv_dtype t,
                             uint64_t outn, nxv_tensor **out);

nxv_status nxv_matmul(nxv_device *d, const nxv_matmul_desc *m,
                      nxv_tensor **out) {
  if (!d || !m || !out || !m->a || !m->b)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "matmul: NULL argument");
  if (m->a->device != d || m->b->device != d)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "matmul: operand on another device");
  nxv_dtype t = m->a->dtype;
  if (m->b->dtype != t)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "matmul: operands are %s and %s",
                    nxv_dtype_name(t), nxv_dtype_name(m->b->dtype));
  NXV_TRY(check_type(d, t, "dot"));
  if (m->batch > UINT32_MAX || m->m > UINT32_MAX || m->n > UINT32_MAX ||
      m->k > UINT32_MAX)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "matmul: a dimension exceeds 2^32-1");
  uint64_t outn = m->batch * m->m;
  if (m->batch && m->m && outn / m->batch != m->m) outn = UINT64_MAX;
  else if (outn && m->n > UINT64_MAX / outn) outn = UINT64_MAX;
  else outn *= m->n;
  if (outn > UINT32_MAX)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "matmul: result exceeds 2^32-1 elements");
  uint64_t adims[3] = {m->batch, m->m, m->k}, bdims[3] = {m->batch, m->k, m->n};
  NXV_TRY(check_operand("a", m->a, m->a_offset, m->a_strides, adims));
  NXV_TRY(check_operand("b", m->b, m->b_offset, m->b_strides, bdims));
  if (!outn || !m->k) return matmul_run(d, m, t, outn, out);
  bool copy_a = a_copy_pays(d, t, m), copy_b = b_copy_pays(d, t, m);
  if (!copy_a && !copy_b) return matmul_run(d, m, t, outn, out);
  nxv_matmul_desc dense = *m;
  nxv_tensor *a_dense = NULL, *b_dense = NULL;
  nxv_status st = NXV_OK;
  if (copy_a) {
    /* A made dense [k][m], then the product reads it along m. */
    const int64_t s[3] = {m->a_strides[0], m->a_strides[2], m->a_strides[1]};
    st = copy_dense(d, m->a, m->a_offset, s, m->batch, m->k, m->m, &a_dense,
                    &dense.a_strides[0]);
    if (st == NXV_OK) {
      dense.a = a_dense;
      dense.a_offset = 0;
      dense.a_strides[1] = 1;
      dense.a_strides[2] = (int64_t)m->m;
    }
  }
  if (st == NXV_OK && copy_b) {
    /* B made dense [k][n], then the product reads it along n. */
    st = copy_dense(d, m->b, m->b_offset, m->b_strides, m->batch, m->k, m->n, &b_dense,
                    &dense.b_strides[0]);
    if (st == NXV_OK) {
      dense.b = b_dense;
      dense.b_offset = 0;
      dense.b_strides[1] = (int64_t)m->n;
      dense.b_strides[2] = 1;
    }
  }
  if (st == NXV_OK) st = matmul_run(d, &dense, t, outn, out);
  /* The queued nodes hold the copies' buffers. */
  nxv_tensor_release(a_dense);
  nxv_tensor_release(b_dense);
  return st;
}

/* nxv_matmul once its arguments are checked: outn result elements of
 * type t. */
static nxv_status matmul_run(nxv_device *d, const nxv_matmul_desc *m, nxv_dtype t,
                             uint64_t outn, nxv_tensor **out) {
  /* f16, bf16 and f32 take the register-blocked kernel (gemm.comp): 128x128
   * tiles when there are enough of them to fill a large GPU, 128x128
   * tiles over chunks of k when fewer tiles have a long enough k, 64x64
   * tiles with 64 threads otherwise, and 64x64 tiles over chunks of k when
   * even those are too few for a long k (skinny products: a dense layer's
   * forward pass with few outputs). Fewer 64x64 tiles than that with a
   * short k take matmul.comp, as other types do (64x64 tiles, 256
   * threads). */
  nxv_spv_module module = family(NXV_SPV_MATMUL_S8, t);
  uint32_t variant = 0, tile_m = 64, tile_n = 64, nsplit = 1, kchunk = (uint32_t)m->k;
  bool gemm_type = (t == NXV_F16 || t == NXV_BF16 || t == NXV_F32) &&
                   d->vk.info.max_workgroup_invocations >= 256;
  uint64_t tiles64 = ((m->m + 63) / 64) * ((m->n + 63) / 64) * m->batch;
  /* Tensor cores take f16 and bf16 wherever their layout allows, also the
   * few-tile products that would otherwise split k over the scalar kernel
   * (on an H200, f16 TFLOP/s: 512^3 8.4 -> 76, 128x784x512 5.9 -> 23.6,
   * 128x512x784 with B transposed 4.2 -> 32, 256x8192x256 14 -> 46,
   * 128x16384x256 17 -> 22), except a single tile with k past 4096, which
   * keeps the split (one workgroup walks all of k: 128x65536x128 6.1
   * against 16.8 split). */
  uint32_t cm_variant = 0;
  bool cm = coopmat_layout(d, t, m, &cm_variant);
  uint64_t cm_tiles = ((m->m + NXV_COOPMAT_BM - 1) / NXV_COOPMAT_BM) *
                      ((m->n + NXV_COOPMAT_BN - 1) / NXV_COOPMAT_BN) * m->batch;
  if (cm && cm_tiles < 2 && m->k > 4096) cm = false;
  if (!cm && gemm_type && tiles64 && tiles64 < 128 && m->k >= NXV_SPLIT_MIN_K)
    nsplit = split_k(d, m, tiles64, NXV_SPLIT_TARGET_GROUPS, NXV_SPLIT_MIN_CHUNK, 8, &kchunk);
  if (nsplit > 1) {
    module = t == NXV_F32 ? NXV_SPV_GEMM_F32 : t == NXV_F16 ? NXV_SPV_GEMM_F16 : NXV_SPV_GEMM_BF16;
    variant = 1;
  } else if (cm) {
    variant = cm_variant;
    module = t == NXV_BF16            ? NXV_SPV_COOPMAT_BF16
             : d->vk.info.coopmat_khr ? NXV_SPV_COOPMAT_F16_KHR
                                      : NXV_SPV_COOPMAT_F16;
    tile_m = NXV_COOPMAT_BM;
    tile_n = NXV_COOPMAT_BN;
  } else if (gemm_type && (tiles64 < 128 || (m->m <= 32 && m->n <= 32))) {
    /* Few tiles and a short k (a training step's weight gradients:
     * 10x128x512, 10x128x2704 with A transposed) keep matmul.comp: 256
     * threads of 4x4 results per 64x64 tile instead of gemm.comp's 64 of
     * 8x8, so four times the threads walk k. On an H100 (f32 TFLOP/s):
     * 10x128x512 0.39 -> 0.53, 10x128x2704 1.69 -> 1.94, 256^3 7.3 -> 9.3;
     * 512x128x784 and 784x128x512 the same. So do batches of products of
     * at most 32x32, whose 64x64 tiles the batch makes many but which
     * would fill at most 1/16 of a 128x128 or 128x256 tile (256 x
     * 16x16x1, P^T B in a batched solve, on llvmpipe: 181 -> 64 ms). */
  } else if (gemm_type) {
    module = t == NXV_F32 ? NXV_SPV_GEMM_F32 : t == NXV_F16 ? NXV_SPV_GEMM_F16 : NXV_SPV_GEMM_BF16;
    uint64_t tiles128 = ((m->m + 127) / 128) * ((m->n + 127) / 128) * m->batch;
    uint64_t tiles256 = ((m->m + 127) / 128) * ((m->n + 255) / 256) * m->batch;
    /* f32: 128x256 tiles (16 results per thread along n instead of 8)
     * where there are enough of them. On an H100, TFLOP/s against
     * 128x128: 2048^3 39.2 / 38.4, 4096^3 40.2 / 39.5, 8192^3 40.6 /
     * 40.0, B transposed 4096^3 39.4 / 37.3, 8 x 1024^3 39.1 / 38.3. With
     * A transposed (read along m, stored into shared memory as it is
     * read) they lost with slices of 8 (40.8 / 41.1) but win with the
     * deep slices: on an H200 4096^3 46.2 -> 48.2, both operands
     * transposed 45.6 -> 47.6. */
    /* The 256-thread tiles take deep k slices (variants 4 and 7) where the
     * device has the shared memory for them, else slices of 8. */
    uint32_t smem = d->vk.info.max_shared_memory;
    /* wide: the 128x256 variant, 0 where it does not fit; v128: the
     * 128x128 one, 1 (64x64 tiles) where neither fits. */
    uint32_t wide = smem >= gemm_shared(7) ? 7 : smem >= gemm_shared(3) ? 3 : 0;
    uint32_t v128 = smem >= gemm_shared(4) ? 4 : smem >= gemm_shared(0) ? 0 : 1;
    if (t == NXV_F32 && tiles256 >= 96 && wide) {
      tile_m = 128;
      tile_n = 256;
      variant = wide;
      /* A read along k (not copied [k][m] first: n below
       * NXV_A_COPY_MIN_N) stores its deep slices transposed: variant 15
       * swizzles A's rows so those stores do not conflict (figures in
       * gemm.comp; with A read along m the swizzle only costs). */
      if (wide == 7 && a_along_k(m)) variant = 15;
      /* One workgroup per tile, also where the last wave leaves
       * multiprocessors idle (2048^3: 128 tiles on an H200's 132): a
       * stream-K order (k slices shared evenly among one workgroup per
       * multiprocessor, split tiles summed by the last to finish) took
       * 10% more GPU time at 4096^3-8192^3 and 30% more at 2048^3 there
       * (255 registers against 249; docs/benchmarks.md). */
    } else if (tiles128 >= 96 && v128 != 1) {
      tile_m = tile_n = 128;
      variant = v128;
    } else {
      variant = 1;
      if (v128 != 1)
        nsplit = split_k(d, m, tiles128, NXV_SPLIT128_TARGET_GROUPS, NXV_SPLIT128_MIN_CHUNK,
                         (v128 & 4u) ? 16 : 8, &kchunk);
      if (nsplit > 1) {
        variant = v128;
        tile_m = tile_n = 128;
      }
    }
  }
  uint32_t gx = (uint32_t)((m->n + tile_n - 1) / tile_n),
           gy = (uint32_t)((m->m + tile_m - 1) / tile_m);
  if (gx > d->vk.info.max_workgroup_count[0] || gy > d->vk.info.max_workgroup_count[1])
    return nxv_fail(NXV_ERR_UNSUPPORTED, "matmul: %llux%llu result is too large",
                    (unsigned long long)m->m, (unsigned long long)m->n);
  nxv_tensor *tout;
  NXV_TRY(nxv_tensor_new(d, t, outn, &tout));
  if (outn == 0) {
    *out = tout;
    return NXV_OK;
  }
  nxv_tensor *part = NULL;
  if (nsplit > 1) {
    nxv_status st = nxv_tensor_new(d, NXV_F32, (uint64_t)nsplit * outn, &part);
    if (st != NXV_OK) {
      nxv_tensor_release(tout);
      return st;
    }
  }
  uint32_t zmax = d->vk.info.max_workgroup_count[2];
  nxv_status st = NXV_OK;
  for (uint64_t b0 = 0; b0 < m->batch && st == NXV_OK; b0 += zmax) {
    uint64_t nb = m->batch - b0 < zmax ? m->batch - b0 : zmax;
    nxv_node *node = nxv_node_new(0);
    if (!node) {
      st = nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "op node");
      break;
    }
    pc_matmul pc = {
        .a = m->a->buf->addr, .b = m->b->buf->addr, .c = tout->buf->addr,
        .m = (uint32_t)m->m, .n = (uint32_t)m->n, .k = (uint32_t)m->k,
        .batch_base = (uint32_t)b0,
        .a_sb = (int32_t)m->a_strides[0], .a_sm = (int32_t)m->a_strides[1],
        .a_sk = (int32_t)m->a_strides[2], .b_sb = (int32_t)m->b_strides[0],
        .b_sk = (int32_t)m->b_strides[1], .b_sn = (int32_t)m->b_strides[2],
        .a_off = (uint32_t)m->a_offset, .b_off = (uint32_t)m->b_offset,
        .part = part ? part->buf->addr : 0, .kchunk = kchunk, .nsplit = nsplit,
        .nbatch = (uint32_t)nb};
    memcpy(node->pc, &pc, sizeof pc);
    node->pc_size = sizeof pc;
    node->groups[0] = gx;
    node->groups[1] = gy;
    node->groups[2] = (uint32_t)(nb * nsplit);
    node->cost = nb * m->m * m->n * (m->k ? m->k : 1) / 16 + 1;
    node_use(node, m->a, false);
    node_use(node, m->b, false);
    node_use(node, part ? part : tout, true);
    st = push_dispatch(d, node, module, 0, variant);
    if (st == NXV_OK && part) {
      /* Second pass: each result adds its chunks' partials in order
       * (64 threads per workgroup), 4 results per thread where rows are
       * whole groups of 4 and the type has 4-wide stores (not bf16). */
      uint64_t outs = nb * m->m * m->n;
      pc.combine4 = (m->n % 4 == 0 && t != NXV_BF16) ? 1u : 0u;
      uint64_t threads = pc.combine4 ? outs / 4 : outs;
      st = push_combine(d, &pc, sizeof pc, groups_capped(d, (threads + 63) / 64),
                        (uint64_t)nsplit * outs + outs, part, tout, module, 0, 2);
    }
  }
  nxv_tensor_release(part); /* the queued nodes hold its buffer */
  if (st != NXV_OK) {
    nxv_tensor_release(tout);
    return st;
  }
  *out = tout;
  return NXV_OK;
}

/* ------------------------------------------------------------------ */
/* Device copy                                                         */
/* ------------------------------------------------------------------ */

nxv_status nxv_ops_push_word_copy(nxv_device *d, nxv_node *n, uint64_t src,
                                  uint64_t dst, uint64_t words) {
  bool vec = words >= 4 && (src % 16) == 0 && (dst % 16) == 0;
  pc_ew pc = {.a = src, .c = dst, .n = (uint32_t)words, .flags = vec ? 4u : 0u};
  memcpy(n->pc, &pc, sizeof pc);
  n->pc_size = sizeof pc;
  n->groups[0] = groups_for(d, vec ? words / 4 : words);
  n->groups[1] = n->groups[2] = 1;
  nxv_ops_dispatch_hook hook = hook_now();
  if (hook) {
    nxv_ops_dispatch info = {.kind = NXV_OPS_WORD_COPY, .op = "copy", .flags = pc.flags,
                             .out_addr = dst, .out_size = 4};
    info.words.src = src;
    info.words.words = words;
    hook(&info);
  }
  return push_dispatch(d, n, NXV_SPV_UNARY_S32_S32, NXV_COPY, 0);
}

/* On GPUs a copy kernel moves memory several times faster than the
 * driver's transfer path (2.9 TB/s against 0.8 TB/s on an H100); on CPU
 * devices vkCmdCopyBuffer is a memcpy and the faster one. The kernel copies
 * 32-bit words: pool buffers are class-sized, multiples of 256 bytes. */
nxv_status nxv_tensor_copy(nxv_tensor *src, nxv_tensor **out) {
  if (!src || !out)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "copy: NULL tensor or out_tensor");
  NXV_TRY(nxv_tensor_ready(src));
  nxv_device *d = src->device;
  nxv_tensor *t;
  NXV_TRY(nxv_tensor_new(d, src->dtype, src->count, &t));
  uint64_t bytes = src->count * nxv_dtype_size(src->dtype);
  nxv_node *n = nxv_node_new(0);
  if (!n) {
    nxv_tensor_release(t);
    return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "copy node");
  }
  node_use(n, src, false);
  node_use(n, t, true);
  n->cost = src->count;
  nxv_status st;
  if (d->vk.info.type == NXV_DEVICE_CPU || bytes == 0) {
    n->kind = NXV_NODE_COPY;
    n->src = src->buf->vk;
    n->src_offset = src->buf->offset;
    n->dst = t->buf->vk;
    n->dst_offset = t->buf->offset;
    n->bytes = bytes;
    st = queue(d, n);
  } else {
    st = nxv_ops_push_word_copy(d, n, src->buf->addr, t->buf->addr, (bytes + 3) / 4);
  }
  if (st != NXV_OK) {
    nxv_tensor_release(t);
    return st;
  }
  *out = t;
  return NXV_OK;
}

/* ------------------------------------------------------------------ */
/* Fill and iota                                                       */
/* ------------------------------------------------------------------ */

nxv_status nxv_fill(nxv_device *d, nxv_dtype dtype, uint64_t count,
                    const void *value, nxv_tensor **out) {
  if (!d || !out || !value)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "fill: NULL argument");
  size_t es = nxv_dtype_size(dtype);
  if (!es) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "fill: invalid dtype %d", (int)dtype);
  if (es > 8)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "fill of %s is not implemented",
                    nxv_dtype_name(dtype));
  uint64_t bits = 0;
  memcpy(&bits, value, es);
  nxv_tensor *t;
  NXV_TRY(nxv_tensor_new(d, dtype, count, &t));
  nxv_node *node = nxv_node_new(0);
  if (!node) {
    nxv_tensor_release(t);
    return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "op node");
  }
  node_use(node, t, true);
  node->cost = count;
  nxv_status st;
  if (es <= 4) {
    /* 8-, 16- and 32-bit patterns repeat in 32 bits: vkCmdFillBuffer. */
    uint32_t pat = (uint32_t)bits;
    if (es == 1) pat = (pat & 0xFFu) * 0x01010101u;
    else if (es == 2) pat = (pat & 0xFFFFu) * 0x00010001u;
    node->kind = NXV_NODE_FILL;
    node->dst = t->buf->vk;
    node->dst_offset = t->buf->offset;
    node->bytes = (count * es + 3) & ~3ull; /* within the class size */
    node->fill_pattern = pat;
    st = queue(d, node);
  } else {
    pc_fill pc = {.c = t->buf->addr, .n = (uint32_t)count,
                  .lo = (uint32_t)bits, .hi = (uint32_t)(bits >> 32)};
    memcpy(node->pc, &pc, sizeof pc);
    node->pc_size = sizeof pc;
    node->groups[0] = count ? groups_for(d, count) : 0;
    node->groups[1] = node->groups[2] = 1;
    st = push_dispatch(d, node, NXV_SPV_FILL_64, 0, 0);
  }
  if (st != NXV_OK) {
    nxv_tensor_release(t);
    return st;
  }
  *out = t;
  return NXV_OK;
}

nxv_status nxv_iota(nxv_device *d, nxv_dtype dtype, uint32_t rank,
                    const int64_t *shape, uint32_t axis, nxv_tensor **out) {
  if (!d || !out) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "iota: NULL argument");
  NXV_TRY(check_type(d, dtype, "iota"));
  uint64_t n;
  NXV_TRY(nxv_ops_check_shape(rank, shape, &n));
  if (rank > 0 && axis >= rank)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "iota: axis %u out of rank %u",
                    axis, rank);
  uint64_t inner = 1, axis_size = rank ? (uint64_t)shape[axis] : 1;
  for (uint32_t i = axis + 1; i < rank; i++) inner *= (uint64_t)shape[i];
  nxv_tensor *t;
  NXV_TRY(nxv_tensor_new(d, dtype, n, &t));
  if (n == 0) {
    *out = t;
    return NXV_OK;
  }
  nxv_node *node = nxv_node_new(0);
  if (!node) {
    nxv_tensor_release(t);
    return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "op node");
  }
  pc_iota pc = {.c = t->buf->addr, .n = (uint32_t)n,
                .axis_size = (uint32_t)axis_size, .inner = (uint32_t)inner};
  memcpy(node->pc, &pc, sizeof pc);
  node->pc_size = sizeof pc;
  node->groups[0] = groups_for(d, n);
  node->groups[1] = node->groups[2] = 1;
  node->cost = n;
  node_use(node, t, true);
  nxv_status st = push_dispatch(d, node, family(NXV_SPV_IOTA_S8, dtype), 0, 0);
  if (st != NXV_OK) {
    nxv_tensor_release(t);
    return st;
  }
  *out = t;
  return NXV_OK;
}

/* ------------------------------------------------------------------ */
/* Gather and scatter                                                  */
/* ------------------------------------------------------------------ */

/* Range [lo, hi] of base + sum dims[i]-1 times strides[i] (dims > 0). */
static void reach(int64_t base, uint32_t n, const int64_t *dims,
                  const int64_t *strides, __int128 *lo, __int128 *hi) {
  *lo = *hi = base;
  for (uint32_t i = 0; i < n; i++) {
    __int128 span = (__int128)strides[i] * (dims[i] - 1);
    if (span > 0) *hi += span;
    else *lo += span;
  }
}

static nxv_status check_reach(const char *op, const char *what, __int128 lo,
                              __int128 hi, uint64_t count) {
  if (lo < 0 || hi >= (__int128)count)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "%s: %s reaches elements [%lld, %lld] of a tensor of %llu", op,
                    what, (long long)lo, (long long)hi, (unsigned long long)count);
  if (hi > INT32_MAX)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "%s: %s offsets exceed 2^31", op, what);
  return NXV_OK;
}

static nxv_status check_axes(const char *op, uint32_t depth, const int64_t *dims,
                             const int64_t *strides) {
  if (depth > NXV_MAX_RANK)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: index depth %u exceeds %d", op,
                    depth, NXV_MAX_RANK);
  if (depth && (!dims || !strides))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: NULL axis dims or strides", op);
  for (uint32_t j = 0; j < depth; j++) {
    if (dims[j] <= 0 || dims[j] > INT32_MAX)
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: indexed axis %u has size %lld",
                      op, j, (long long)dims[j]);
    if (strides[j] > INT32_MAX || strides[j] < INT32_MIN)
      return nxv_fail(NXV_ERR_UNSUPPORTED, "%s: axis stride out of range", op);
  }
  return NXV_OK;
}

nxv_status nxv_gather(nxv_device *d, const nxv_gather_desc *g, nxv_tensor **out) {
  if (!d || !g || !out || !g->src || !g->indices ||
      (g->rank && (!g->shape || !g->src_strides || !g->index_strides)))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "gather: NULL argument");
  if (g->src->device != d || g->indices->device != d)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "gather: tensor on another device");
  NXV_TRY(nxv_tensor_ready(g->src));
  NXV_TRY(nxv_tensor_ready(g->indices));
  nxv_dtype t = g->src->dtype;
  NXV_TRY(check_type(d, t, "gather"));
  if (g->indices->dtype != NXV_S64)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "gather: indices are %s, expected s64",
                    nxv_dtype_name(g->indices->dtype));
  uint64_t n;
  NXV_TRY(nxv_ops_check_shape(g->rank, g->shape, &n));
  NXV_TRY(check_axes("gather", g->depth, g->axis_dims, g->axis_strides));
  for (uint32_t i = 0; i < g->rank; i++)
    if (g->src_strides[i] > INT32_MAX || g->src_strides[i] < INT32_MIN ||
        g->index_strides[i] > INT32_MAX || g->index_strides[i] < INT32_MIN)
      return nxv_fail(NXV_ERR_UNSUPPORTED, "gather: stride out of range");
  if (n) {
    __int128 lo, hi, lo2, hi2;
    reach(g->src_offset, g->rank, g->shape, g->src_strides, &lo, &hi);
    reach(0, g->depth, g->axis_dims, g->axis_strides, &lo2, &hi2);
    NXV_TRY(check_reach("gather", "source", lo + lo2, hi + hi2, g->src->count));
    if (g->depth) {
      reach(0, g->rank, g->shape, g->index_strides, &lo, &hi);
      NXV_TRY(check_reach("gather", "indices", lo, hi + g->depth - 1,
                          g->indices->count));
    }
  }
  nxv_tensor *t_out;
  NXV_TRY(nxv_tensor_new(d, t, n, &t_out));
  if (n == 0) {
    *out = t_out;
    return NXV_OK;
  }
  uint32_t R = g->rank, D = g->depth;
  nxv_node *node = nxv_node_new(3 * R + 2 * D + 1);
  if (!node) {
    nxv_tensor_release(t_out);
    return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "op node");
  }
  uint32_t *w = node->args;
  for (uint32_t i = 0; i < R; i++) {
    w[3 * i] = (uint32_t)g->shape[i];
    w[3 * i + 1] = (uint32_t)(int32_t)(g->shape[i] == 1 ? 0 : g->src_strides[i]);
    w[3 * i + 2] = (uint32_t)(int32_t)(g->shape[i] == 1 ? 0 : g->index_strides[i]);
  }
  for (uint32_t j = 0; j < D; j++) {
    w[3 * R + 2 * j] = (uint32_t)g->axis_dims[j];
    w[3 * R + 2 * j + 1] = (uint32_t)(int32_t)g->axis_strides[j];
  }
  w[3 * R + 2 * D] = (uint32_t)g->src_offset;
  pc_gather pc = {.a = g->src->buf->addr, .idx = g->indices->buf->addr,
                  .c = t_out->buf->addr, .n = (uint32_t)n, .rank = R, .depth = D};
  memcpy(node->pc, &pc, sizeof pc);
  node->pc_size = sizeof pc;
  node->args_pc_offset = offsetof(pc_gather, args);
  node->groups[0] = groups_for(d, n);
  node->groups[1] = node->groups[2] = 1;
  node->cost = 2 * n;
  node_use(node, g->src, false);
  node_use(node, g->indices, false);
  node_use(node, t_out, true);
  nxv_status st = push_dispatch(d, node, family(NXV_SPV_GATHER_S8, t), 0, 0);
  if (st != NXV_OK) {
    nxv_tensor_release(t_out);
    return st;
  }
  *out = t_out;
  return NXV_OK;
}

nxv_status nxv_scatter(nxv_device *d, const nxv_scatter_desc *s) {
  const char *op = s && s->add ? "indexed_add" : "indexed_put";
  if (!d || !s || !s->dst || !s->updates || !s->indices ||
      (s->rank && (!s->slice_shape || !s->dst_strides)))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: NULL argument", op);
  if (s->dst->device != d || s->updates->device != d || s->indices->device != d)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: tensor on another device", op);
  NXV_TRY(nxv_tensor_ready(s->dst));
  NXV_TRY(nxv_tensor_ready(s->updates));
  NXV_TRY(nxv_tensor_ready(s->indices));
  nxv_dtype t = s->dst->dtype;
  NXV_TRY(check_type(d, t, op));
  if (s->updates->dtype != t)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: updates are %s, target is %s", op,
                    nxv_dtype_name(s->updates->dtype), nxv_dtype_name(t));
  if (s->indices->dtype != NXV_S64)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: indices are %s, expected s64", op,
                    nxv_dtype_name(s->indices->dtype));
  uint64_t slice;
  NXV_TRY(nxv_ops_check_shape(s->rank, s->slice_shape, &slice));
  NXV_TRY(check_axes(op, s->depth, s->axis_dims, s->axis_strides));
  for (uint32_t i = 0; i < s->rank; i++)
    if (s->dst_strides[i] > INT32_MAX || s->dst_strides[i] < INT32_MIN)
      return nxv_fail(NXV_ERR_UNSUPPORTED, "%s: stride out of range", op);
  if (s->count == 0 || slice == 0) return NXV_OK;
  if (s->count > UINT32_MAX / slice || s->count > UINT32_MAX / (s->depth ? s->depth : 1))
    return nxv_fail(NXV_ERR_UNSUPPORTED, "%s: more than 2^32-1 update elements", op);
  if (s->updates->count < s->count * slice)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: %llu updates of %llu elements need "
                    "%llu, the tensor has %llu", op, (unsigned long long)s->count,
                    (unsigned long long)slice, (unsigned long long)(s->count * slice),
                    (unsigned long long)s->updates->count);
  if (s->indices->count < s->count * s->depth)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: indices hold %llu entries, need %llu",
                    op, (unsigned long long)s->indices->count,
                    (unsigned long long)(s->count * s->depth));
  __int128 lo, hi, lo2, hi2;
  reach(0, s->rank, s->slice_shape, s->dst_strides, &lo, &hi);
  reach(0, s->depth, s->axis_dims, s->axis_strides, &lo2, &hi2);
  NXV_TRY(check_reach(op, "target", lo + lo2, hi + hi2, s->dst->count));
  uint32_t R = s->rank, D = s->depth;
  nxv_node *node = nxv_node_new(1 + 2 * R + 2 * D);
  if (!node) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "op node");
  uint32_t *w = node->args;
  w[0] = R;
  for (uint32_t i = 0; i < R; i++) {
    w[1 + i] = (uint32_t)s->slice_shape[i];
    w[1 + R + i] = (uint32_t)(int32_t)s->dst_strides[i];
  }
  for (uint32_t j = 0; j < D; j++) {
    w[1 + 2 * R + 2 * j] = (uint32_t)s->axis_dims[j];
    w[1 + 2 * R + 2 * j + 1] = (uint32_t)(int32_t)s->axis_strides[j];
  }
  pc_gather pc = {.a = s->updates->buf->addr, .idx = s->indices->buf->addr,
                  .c = s->dst->buf->addr, .n = (uint32_t)slice, .rank = R,
                  .depth = D, .count = (uint32_t)s->count};
  memcpy(node->pc, &pc, sizeof pc);
  node->pc_size = sizeof pc;
  node->args_pc_offset = offsetof(pc_gather, args);
  node->groups[0] = groups_for(d, slice);
  node->groups[1] = node->groups[2] = 1;
  node->cost = 2 * slice * s->count;
  node_use(node, s->updates, false);
  node_use(node, s->indices, false);
  node_use(node, s->dst, true);
  return push_dispatch(d, node, family(NXV_SPV_GATHER_S8, t), s->add ? 1 : 0, 1);
}

/* ------------------------------------------------------------------ */
/* Sort                                                                */
/* ------------------------------------------------------------------ */

/* Queues one sort.comp dispatch over threads work items. */
static nxv_status sort_pass(nxv_device *d, nxv_dtype t, const pc_sort *pc,
                            uint32_t variant, uint64_t threads, nxv_tensor *const *use,
                            const bool *write, int nuse) {
  nxv_node *node = nxv_node_new(0);
  if (!node) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "op node");
  memcpy(node->pc, pc, sizeof *pc);
  node->pc_size = sizeof *pc;
  node->groups[0] = groups_for(d, threads);
  node->groups[1] = node->groups[2] = 1;
  node->cost = threads;
  for (int i = 0; i < nuse; i++)
    if (use[i]) node_use(node, use[i], write[i]);
  return push_dispatch(d, node, family(NXV_SPV_SORT_S8, t), 0, variant);
}

nxv_status nxv_sort(nxv_device *d, nxv_tensor *a, uint64_t rows, uint64_t len,
                    bool descending, nxv_tensor **out_values,
                    nxv_tensor **out_indices) {
  if (!d || !a || (!out_values && !out_indices))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "sort: NULL argument");
  if (a->device != d)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "sort: tensor on another device");
  NXV_TRY(nxv_tensor_ready(a));
  nxv_dtype t = a->dtype;
  NXV_TRY(check_real_type(d, t, "sort"));
  if (out_indices) NXV_TRY(check_type(d, NXV_S64, "argsort"));
  if (len && rows > UINT64_MAX / len)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "sort: rows x len overflows");
  uint64_t n = rows * len;
  if (n != a->count)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "sort: tensor has %llu elements, %llu rows of %llu need %llu",
                    (unsigned long long)a->count, (unsigned long long)rows,
                    (unsigned long long)len, (unsigned long long)n);
  if (len > INT32_MAX)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "sort: rows of %llu exceed 2^31-1 elements",
                    (unsigned long long)len);
  uint64_t p = 1;
  while (p < len) p <<= 1;
  if (rows * p > UINT32_MAX)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "sort: %llu rows of %llu exceed 2^32 slots",
                    (unsigned long long)rows, (unsigned long long)len);
  nxv_tensor *vals = NULL, *inds = NULL, *keys = NULL, *idx = NULL;
  nxv_status st = NXV_OK;
  if (out_values) st = nxv_tensor_new(d, t, n, &vals);
  if (st == NXV_OK && out_indices) st = nxv_tensor_new(d, NXV_S64, n, &inds);
  if (st == NXV_OK && n) st = nxv_tensor_new(d, t, rows * p, &keys);
  if (st == NXV_OK && n) st = nxv_tensor_new(d, NXV_S32, rows * p, &idx);
  if (st == NXV_OK && n) {
    pc_sort pc = {.a = a->buf->addr, .keys = keys->buf->addr, .idx = idx->buf->addr,
                  .vals = vals ? vals->buf->addr : 0, .inds = inds ? inds->buf->addr : 0,
                  .rows = (uint32_t)rows, .len = (uint32_t)len, .p = (uint32_t)p,
                  .flags = (descending ? 1u : 0u) | (vals ? 2u : 0u) | (inds ? 4u : 0u)};
    nxv_tensor *load_use[3] = {a, keys, idx};
    const bool load_w[3] = {false, true, true};
    st = sort_pass(d, t, &pc, 0, rows * p, load_use, load_w, 3);
    nxv_tensor *step_use[2] = {keys, idx};
    const bool step_w[2] = {true, true};
    for (uint64_t k = 2; st == NXV_OK && k <= p; k <<= 1)
      for (uint64_t j = k / 2; st == NXV_OK && j > 0; j >>= 1) {
        pc.k = (uint32_t)k;
        pc.j = (uint32_t)j;
        st = sort_pass(d, t, &pc, 1, rows * (p / 2), step_use, step_w, 2);
      }
    nxv_tensor *out_use[4] = {keys, idx, vals, inds};
    const bool out_w[4] = {false, false, true, true};
    if (st == NXV_OK) st = sort_pass(d, t, &pc, 2, n, out_use, out_w, 4);
  }
  if (keys) nxv_tensor_release(keys);
  if (idx) nxv_tensor_release(idx);
  if (st != NXV_OK) {
    if (vals) nxv_tensor_release(vals);
    if (inds) nxv_tensor_release(inds);
    return st;
  }
  if (out_values) *out_values = vals;
  if (out_indices) *out_indices = inds;
  return NXV_OK;
}

/* ------------------------------------------------------------------ */
/* Convolution                                                         */
/* ------------------------------------------------------------------ */

typedef struct pc_conv {          /* conv.comp */
  uint64_t a, k, c, args, part;
  uint32_t n_out, srank, k_count, c_chunk, n_split, pad;
} pc_conv;
_Static_assert(sizeof(pc_conv) == 64, "pc_conv layout");

/* Workgroups a conv of few outputs with long sums aims for when it splits
 * its channels (8 workgroups of 256 threads per multiprocessor of a
 * 132-multiprocessor GPU: about full occupancy), and the fewest channels
 * a chunk takes. */
#define NXV_CONV_SPLIT_GROUPS 1024
#define NXV_CONV_SPLIT_MIN_CHANNELS 4

/* Output channels per thread of conv.comp's variant 4 (its CONV_OCB). */
#define CONV_OCB 8u

/* A dtype whose elements have the size of conv.comp's compute type for
 * t (the partial sums of a channel split). */
static nxv_dtype conv_partial_dtype(nxv_dtype t) {
  switch (t) {
    case NXV_S64:
    case NXV_U64:
    case NXV_F64:
    case NXV_C64:
      return NXV_F64;
    case NXV_C128:
      return NXV_C128;
    default:
      return NXV_F32; /* 32-bit integers and floats */
  }
}
_Static_assert(NXV_SPV_CONV_C128 - NXV_SPV_CONV_S8 == NXV_C128, "conv family");

/* Arena words of conv.comp: a header, then one block per spatial axis. */
#define CONV_HDR 8u
#define CONV_AXW 8u

/* Positions of a dilated, padded axis: the zero-padded length of dim
 * elements with dilation - 1 zeros between them. */
static int64_t dilated_len(int64_t dim, int64_t dilation) {
  return dim == 0 ? 0 : (dim - 1) * dilation + 1;
}

static bool within_i32(int64_t v) { return v >= -(int64_t)INT32_MAX && v <= INT32_MAX; }

/* Checks the spatial geometry of a conv and the output shape it implies. */
static nxv_status conv_geometry(const nxv_conv_desc *c) {
  uint32_t S = c->rank - 2;
  const int64_t *in = c->in_shape, *k = c->kernel_shape, *o = c->out_shape;
  int64_t N = in[0], C = in[1], O = k[0], Ck = k[1];
  int64_t fg = c->feature_groups, bg = c->batch_groups;
  if (fg < 1 || bg < 1)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "conv: feature_groups (%lld) and batch_groups (%lld) must be >= 1",
                    (long long)fg, (long long)bg);
  if (fg > 1 && bg > 1)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "conv: feature_groups (%lld) or batch_groups (%lld) must be 1",
                    (long long)fg, (long long)bg);
  if (Ck > INT64_MAX / fg || C != Ck * fg)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "conv: the input has %lld channels, the kernel %lld per group "
                    "with %lld feature groups",
                    (long long)C, (long long)Ck, (long long)fg);
  if (O % fg || O % bg || N % bg)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "conv: %lld output channels and a batch of %lld do not split into "
                    "%lld feature / %lld batch groups",
                    (long long)O, (long long)N, (long long)fg, (long long)bg);
  if (o[0] != N / bg || o[1] != O)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "conv: output shape starts [%lld, %lld], the geometry gives [%lld, %lld]",
                    (long long)o[0], (long long)o[1], (long long)(N / bg), (long long)O);
  for (uint32_t d = 0; d < S; d++) {
    int64_t s = c->strides[d], id = c->input_dilation[d], kd = c->kernel_dilation[d];
    int64_t lo = c->pad_lo[d], hi = c->pad_hi[d];
    if (s < 1 || id < 1 || kd < 1 || s > INT32_MAX || id > INT32_MAX || kd > INT32_MAX)
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                      "conv: spatial axis %u: strides (%lld) and dilations (%lld, %lld) "
                      "must be between 1 and 2^31-1",
                      d, (long long)s, (long long)id, (long long)kd);
    if (!within_i32(lo) || !within_i32(hi) || in[2 + d] > INT32_MAX || k[2 + d] > INT32_MAX)
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                      "conv: spatial axis %u: sizes and padding must be within 2^31-1", d);
    int64_t padded = lo + dilated_len(in[2 + d], id) + hi;
    int64_t taps = dilated_len(k[2 + d], kd);
    if (padded > INT32_MAX || taps > INT32_MAX || padded - lo > INT32_MAX)
      return nxv_fail(NXV_ERR_UNSUPPORTED,
                      "conv: spatial axis %u: the dilated, padded input exceeds 2^31-1 "
                      "positions", d);
    int64_t want = padded >= taps ? (padded - taps) / s + 1 : 0;
    if (o[2 + d] != want)
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                      "conv: output spatial axis %u has size %lld, the geometry gives %lld "
                      "(input %lld, kernel %lld, stride %lld, padding %lld/%lld, "
                      "dilations %lld/%lld)",
                      d, (long long)o[2 + d], (long long)want, (long long)in[2 + d],
                      (long long)k[2 + d], (long long)s, (long long)lo, (long long)hi,
                      (long long)id, (long long)kd);
  }
  return NXV_OK;
}

nxv_status nxv_conv(nxv_device *d, const nxv_conv_desc *c, nxv_tensor **out) {
  if (!d || !c || !out || !c->input || !c->kernel || !c->in_shape ||
      !c->kernel_shape || !c->out_shape)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "conv: NULL argument");
  if (c->rank < 2 || c->rank > NXV_MAX_RANK)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "conv: rank %u, expected 2 to %d (batch, channels, spatial axes)",
                    c->rank, NXV_MAX_RANK);
  uint32_t S = c->rank - 2;
  if (S && (!c->strides || !c->pad_lo || !c->pad_hi || !c->input_dilation ||
            !c->kernel_dilation))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "conv: NULL strides, padding or dilations");
  if (c->input->device != d || c->kernel->device != d)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "conv: tensor on another device");
  NXV_TRY(nxv_tensor_ready(c->input));
  NXV_TRY(nxv_tensor_ready(c->kernel));
  nxv_dtype t = c->input->dtype;
  if (c->kernel->dtype != t)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "conv: input is %s, kernel is %s",
                    nxv_dtype_name(t), nxv_dtype_name(c->kernel->dtype));
  NXV_TRY(check_type(d, t, "conv"));
  nxv_spv_module module = family(NXV_SPV_CONV_S8, t);
  uint64_t n_in, n_k, n_out;
  NXV_TRY(nxv_ops_check_shape(c->rank, c->in_shape, &n_in));
  NXV_TRY(nxv_ops_check_shape(c->rank, c->kernel_shape, &n_k));
  NXV_TRY(nxv_ops_check_shape(c->rank, c->out_shape, &n_out));
  if (n_in != c->input->count || n_k != c->kernel->count)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "conv: input and kernel hold %llu and %llu elements, their shapes "
                    "need %llu and %llu",
                    (unsigned long long)c->input->count,
                    (unsigned long long)c->kernel->count, (unsigned long long)n_in,
                    (unsigned long long)n_k);
  NXV_TRY(conv_geometry(c));
  /* Spatial block sizes; a product past 2^32 only with an empty tensor. */
  uint64_t in_sp = 1, out_sp = 1, taps = 1;
  for (uint32_t i = 2; i < c->rank; i++) {
    in_sp *= (uint64_t)c->in_shape[i];
    out_sp *= (uint64_t)c->out_shape[i];
    taps *= (uint64_t)c->kernel_shape[i];
    if (in_sp > UINT32_MAX || out_sp > UINT32_MAX || taps > UINT32_MAX)
      return nxv_fail(NXV_ERR_UNSUPPORTED, "conv: a spatial block exceeds 2^32-1 elements");
  }
  nxv_tensor *tout;
  NXV_TRY(nxv_tensor_new(d, t, n_out, &tout));
  if (n_out == 0) {
    *out = tout;
    return NXV_OK;
  }
  nxv_node *node = nxv_node_new(CONV_HDR + CONV_AXW * S);
  if (!node) {
    nxv_tensor_release(tout);
    return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "op node");
  }
  int64_t O = c->kernel_shape[0], Ck = c->kernel_shape[1];
  int64_t groups = c->feature_groups * c->batch_groups;
  uint32_t *w = node->args;
  w[0] = (uint32_t)O;
  w[1] = (uint32_t)Ck;
  w[2] = (uint32_t)c->in_shape[1];
  w[3] = (uint32_t)(O / groups);
  w[4] = c->batch_groups > 1 ? (uint32_t)c->out_shape[0] : 0u;
  w[5] = c->feature_groups > 1 ? (uint32_t)Ck : 0u;
  w[6] = (uint32_t)in_sp;
  w[7] = (uint32_t)out_sp;
  /* Row-major strides of the input's spatial block: past 2^32 (and
   * wrapping) only when it is empty, and then every tap is padding. */
  uint64_t stride = 1;
  for (int i = (int)S - 1; i >= 0; i--) {
    uint32_t *a = w + CONV_HDR + CONV_AXW * (uint32_t)i;
    a[0] = (uint32_t)c->out_shape[2 + i];
    a[1] = (uint32_t)c->in_shape[2 + i];
    a[2] = (uint32_t)c->kernel_shape[2 + i];
    a[3] = (uint32_t)c->strides[i];
    a[4] = (uint32_t)(int32_t)c->pad_lo[i];
    a[5] = (uint32_t)c->input_dilation[i];
    a[6] = (uint32_t)c->kernel_dilation[i];
    a[7] = (uint32_t)stride;
    stride *= (uint64_t)c->in_shape[2 + i];
  }
  /* Few outputs with long sums (a kernel gradient reduces over the batch
   * and the output's spatial block) take a workgroup each (variant 1):
   * one thread per output would leave most of the device idle. */
  uint64_t work = taps * (uint64_t)Ck;
  uint32_t wg = nxv_registry_workgroup_size(d->kernels);
  bool per_group = (wg & (wg - 1)) == 0 &&
                   ((n_out < 65536 && work >= 2048) || (n_out < 2048 && work >= 256));
  /* Fewer such outputs than the device has room for workgroups (a
   * kernel gradient of 16x1x3x3: 144 workgroups, each walking 86,528
   * products) split their channels over several workgroups each
   * (variant 2), then add the chunks' partial sums (variant 3). */
  uint32_t n_split = 1, c_chunk = (uint32_t)Ck;
  if (per_group && n_out < NXV_CONV_SPLIT_GROUPS &&
      (uint64_t)Ck >= 2 * NXV_CONV_SPLIT_MIN_CHANNELS) {
    uint64_t ns = (NXV_CONV_SPLIT_GROUPS + n_out - 1) / n_out;
    if (ns > (uint64_t)Ck / NXV_CONV_SPLIT_MIN_CHANNELS)
      ns = (uint64_t)Ck / NXV_CONV_SPLIT_MIN_CHANNELS;
    if (ns > d->vk.info.max_workgroup_count[1]) ns = d->vk.info.max_workgroup_count[1];
    if (ns >= 2) {
      c_chunk = (uint32_t)(((uint64_t)Ck + ns - 1) / ns);
      n_split = (uint32_t)(((uint64_t)Ck + c_chunk - 1) / c_chunk);
    }
  }
  /* Many outputs of two spatial axes without groups (an image layer's
   * forward pass) take CONV_OCB output channels per thread (variant 4),
   * reading each input tap once for all of them: on an H100 a 128x1x28x28
   * by 16x1x3x3 convolution took 42.8 us with a thread per output. */
  bool chan_block = !per_group && S == 2 && groups == 1 && O >= 2;
  uint64_t items = chan_block ? n_out / (uint64_t)O * (((uint64_t)O + CONV_OCB - 1) / CONV_OCB)
                              : n_out;
  nxv_tensor *part = NULL;
  if (n_split > 1) {
    nxv_status st = nxv_tensor_new(d, conv_partial_dtype(t), (uint64_t)n_split * n_out, &part);
    if (st != NXV_OK) {
      nxv_node_discard(node);
      nxv_tensor_release(tout);
      return st;
    }
  }
  pc_conv pc = {.a = c->input->buf->addr, .k = c->kernel->buf->addr,
                .c = tout->buf->addr, .part = part ? part->buf->addr : 0,
                .n_out = (uint32_t)n_out, .srank = S, .k_count = (uint32_t)taps,
                .c_chunk = c_chunk, .n_split = n_split};
  memcpy(node->pc, &pc, sizeof pc);
  node->pc_size = sizeof pc;
  node->args_pc_offset = offsetof(pc_conv, args);
  if (per_group) {
    node->groups[0] = groups_capped(d, n_out);
  } else {
    node->groups[0] = groups_for(d, items);
  }
  node->groups[1] = n_split;
  node->groups[2] = 1;
  node->cost = work && n_out > UINT64_MAX / work ? UINT64_MAX : n_out * (work + 1);
  node_use(node, c->input, false);
  node_use(node, c->kernel, false);
  node_use(node, part ? part : tout, true);
  nxv_status st =
      push_dispatch(d, node, module, 0, part ? 2 : per_group ? 1 : chan_block ? 4 : 0);
  if (st == NXV_OK && part)
    st = push_combine(d, &pc, sizeof pc, groups_for(d, n_out),
                      (uint64_t)n_split * n_out + n_out, part, tout, module, 0, 3);
  nxv_tensor_release(part); /* the queued nodes hold its buffer */
  if (st != NXV_OK) {
    nxv_tensor_release(tout);
    return st;
  }
  *out = tout;
  return NXV_OK;
}

/* ------------------------------------------------------------------ */
/* Window scatter                                                      */
/* ------------------------------------------------------------------ */

typedef struct pc_winscatter {    /* winscatter.comp */
  uint64_t a, sel, c, init, args;
  uint32_t n, rank, win_count, planes;
} pc_winscatter;
_Static_assert(sizeof(pc_winscatter) == 56, "pc_winscatter layout");
_Static_assert(NXV_SPV_WINSCATTER_F64 - NXV_SPV_WINSCATTER_S8 == NXV_F64,
               "winscatter family");

#define WINSCATTER_AXW 7u

/* Queues one winscatter.comp pass over threads work items, with the
 * geometry words in args (rank * WINSCATTER_AXW). */
static nxv_status winscatter_pass(nxv_device *d, nxv_dtype t, uint32_t op,
                                  uint32_t variant, const pc_winscatter *pc,
                                  const uint32_t *args, uint64_t cost,
                                  nxv_tensor *const *use, const bool *write, int nuse) {
  nxv_node *node = nxv_node_new(pc->rank * WINSCATTER_AXW);
  if (!node) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "op node");
  if (pc->rank) memcpy(node->args, args, pc->rank * WINSCATTER_AXW * sizeof *args);
  memcpy(node->pc, pc, sizeof *pc);
  node->pc_size = sizeof *pc;
  node->args_pc_offset = offsetof(pc_winscatter, args);
  node->groups[0] = groups_for(d, pc->n);
  node->groups[1] = node->groups[2] = 1;
  node->cost = cost;
  for (int i = 0; i < nuse; i++) node_use(node, use[i], write[i]);
  return push_dispatch(d, node, family(NXV_SPV_WINSCATTER_S8, t), op, variant);
}

nxv_status nxv_window_scatter(nxv_device *d, const nxv_window_scatter_desc *w,
                              nxv_tensor **out) {
  const char *op = w && w->is_min ? "window_scatter_min" : "window_scatter_max";
  if (!d || !w || !out || !w->a || !w->source || !w->init ||
      (w->rank && (!w->in_shape || !w->window || !w->strides || !w->pad_lo ||
                   !w->pad_hi)))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: NULL argument", op);
  if (w->a->device != d || w->source->device != d || w->init->device != d)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: tensor on another device", op);
  NXV_TRY(nxv_tensor_ready(w->a));
  NXV_TRY(nxv_tensor_ready(w->source));
  NXV_TRY(nxv_tensor_ready(w->init));
  nxv_dtype ta = w->a->dtype, t = w->source->dtype;
  NXV_TRY(check_real_type(d, ta, op));
  NXV_TRY(check_real_type(d, t, op));
  if (w->init->dtype != t || w->init->count != 1)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "%s: init must be one element of the source's type %s (got %llu of %s)",
                    op, nxv_dtype_name(t), (unsigned long long)w->init->count,
                    nxv_dtype_name(w->init->dtype));
  uint64_t n_in;
  NXV_TRY(nxv_ops_check_shape(w->rank, w->in_shape, &n_in));
  if (n_in != w->a->count)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: tensor has %llu elements, shape needs %llu",
                    op, (unsigned long long)w->a->count, (unsigned long long)n_in);
  uint32_t R = w->rank;
  uint32_t args[WINSCATTER_AXW * NXV_MAX_RANK];
  uint64_t n_src = 1, wc = 1;
  /* Row-major stride of the input: past 2^32 (and wrapping) only for an
   * empty input, which queues no work. */
  uint64_t in_stride = 1;
  for (int i = (int)R - 1; i >= 0; i--) {
    int64_t dim = w->in_shape[i], win = w->window[i], s = w->strides[i];
    int64_t lo = w->pad_lo[i], hi = w->pad_hi[i];
    if (win < 1 || s < 1 || win > INT32_MAX || s > INT32_MAX || dim > INT32_MAX ||
        !within_i32(lo) || !within_i32(hi))
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                      "%s: axis %d: window (%lld) and strides (%lld) must be between 1 "
                      "and 2^31-1, sizes and padding within 2^31-1",
                      op, i, (long long)win, (long long)s);
    int64_t padded = dim + lo + hi;
    if (padded > INT32_MAX || dim + lo > INT32_MAX || padded - lo > INT32_MAX)
      return nxv_fail(NXV_ERR_UNSUPPORTED, "%s: axis %d: the padded input exceeds 2^31-1",
                      op, i);
    int64_t windows = padded >= win ? (padded - win) / s + 1 : 0;
    uint32_t *a = args + WINSCATTER_AXW * (uint32_t)i;
    a[0] = (uint32_t)dim;
    a[1] = (uint32_t)in_stride;
    a[2] = (uint32_t)win;
    a[3] = (uint32_t)s;
    a[4] = (uint32_t)(int32_t)lo;
    a[5] = (uint32_t)windows;
    a[6] = (uint32_t)n_src; /* row-major stride of the windows */
    in_stride *= (uint64_t)dim;
    n_src *= (uint64_t)windows;
    wc *= (uint64_t)win;
    if (n_src > UINT32_MAX || wc > UINT32_MAX)
      return nxv_fail(NXV_ERR_UNSUPPORTED, "%s: more than 2^32-1 windows or window elements",
                      op);
  }
  if (n_src != w->source->count)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "%s: source has %llu elements, the geometry gives %llu windows", op,
                    (unsigned long long)w->source->count, (unsigned long long)n_src);
  nxv_tensor *tout, *sel = NULL;
  NXV_TRY(nxv_tensor_new(d, t, n_in, &tout));
  if (n_in == 0) {
    *out = tout;
    return NXV_OK;
  }
  uint32_t opc = w->is_min ? 1u : 0u;
  /* Every axis but the last two a plain batch axis (as many windows as
   * elements): the kernel's two-axis walks. */
  bool planes = R >= 2;
  for (uint32_t i = 0; i + 2 < R && planes; i++) {
    const uint32_t *a = args + WINSCATTER_AXW * i;
    planes = a[2] == 1 && a[3] == 1 && a[4] == 0 && a[5] == a[0];
  }
  /* Windows that tile the last two axes exactly (strides equal to the
   * window, no low padding, windows covering each axis), as a max pool's
   * gradient has, with an operand of the result's type: one pass, a
   * thread per window selecting and writing its window (on an H100 the
   * two passes over a 128x16x26x26 pool took 7.6 and 21 us). */
  bool tiled = planes && ta == t;
  for (uint32_t i = R >= 2 ? R - 2 : R; i < R && tiled; i++) {
    const uint32_t *a = args + WINSCATTER_AXW * i;
    tiled = a[2] == a[3] && a[4] == 0 && (uint64_t)a[5] * a[2] == a[0];
  }
  if (tiled) {
    pc_winscatter pc = {.a = w->a->buf->addr, .sel = w->source->buf->addr,
                        .c = tout->buf->addr, .init = w->init->buf->addr,
                        .n = (uint32_t)n_src, .rank = R, .win_count = (uint32_t)wc,
                        .planes = 1};
    nxv_tensor *use[4] = {w->a, w->source, w->init, tout};
    const bool write[4] = {false, false, false, true};
    nxv_status st = winscatter_pass(d, t, opc, 2, &pc, args, n_src * (wc + 1) + n_in, use,
                                    write, 4);
    if (st != NXV_OK) {
      nxv_tensor_release(tout);
      return st;
    }
    *out = tout;
    return NXV_OK;
  }
  nxv_status st = nxv_tensor_new(d, NXV_U32, n_src ? n_src : 1, &sel);
  if (st == NXV_OK && n_src) {
    pc_winscatter pc = {.a = w->a->buf->addr, .sel = sel->buf->addr, .n = (uint32_t)n_src,
                        .rank = R, .win_count = (uint32_t)wc, .planes = planes};
    nxv_tensor *use[2] = {w->a, sel};
    const bool write[2] = {false, true};
    st = winscatter_pass(d, ta, opc, 0, &pc, args, n_src * (wc + 1), use, write, 2);
  }
  if (st == NXV_OK) {
    pc_winscatter pc = {.a = w->source->buf->addr, .sel = sel->buf->addr,
                        .c = tout->buf->addr, .init = w->init->buf->addr,
                        .n = (uint32_t)n_in, .rank = R, .win_count = (uint32_t)wc,
                        .planes = planes};
    nxv_tensor *use[4] = {w->source, sel, w->init, tout};
    const bool write[4] = {false, false, false, true};
    st = winscatter_pass(d, t, opc, 1, &pc, args, 2 * n_in + n_src, use, write, 4);
  }
  if (sel) nxv_tensor_release(sel);
  if (st != NXV_OK) {
    nxv_tensor_release(tout);
    return st;
  }
  *out = tout;
  return NXV_OK;
}

/* ------------------------------------------------------------------ */
/* Window reductions                                                   */
/* ------------------------------------------------------------------ */

nxv_status nxv_window_reduce(nxv_device *d, nxv_reduce_op op,
                             const nxv_window_desc *w, nxv_tensor **out) {
  if (!d || !w || !out || !w->a ||
      (w->rank && (!w->in_shape || !w->out_shape || !w->window || !w->strides ||
                   !w->dilations || !w->pad_lo)))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "window_reduce: NULL argument");
  if ((unsigned)op >= NXV_REDUCE_OP_COUNT)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "window_reduce: invalid op %d", (int)op);
  if (w->a->device != d)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "window_reduce: tensor on another device");
  NXV_TRY(nxv_tensor_ready(w->a));
  nxv_dtype t = w->a->dtype;
  NXV_TRY(check_real_type(d, t, "window_reduce"));
  uint64_t n_in, n_out;
  NXV_TRY(nxv_ops_check_shape(w->rank, w->in_shape, &n_in));
  NXV_TRY(nxv_ops_check_shape(w->rank, w->out_shape, &n_out));
  if (n_in != w->a->count)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "window_reduce: tensor has %llu elements, shape needs %llu",
                    (unsigned long long)w->a->count, (unsigned long long)n_in);
  uint64_t wc = 1;
  for (uint32_t i = 0; i < w->rank; i++) {
    if (w->window[i] < 1 || w->strides[i] < 1 || w->dilations[i] < 1 ||
        w->window[i] > INT32_MAX || w->strides[i] > INT32_MAX ||
        w->dilations[i] > INT32_MAX || w->pad_lo[i] > INT32_MAX ||
        w->pad_lo[i] < INT32_MIN || w->in_shape[i] > INT32_MAX)
      return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                      "window_reduce: axis %u: window, strides and dilations must be "
                      "positive and every value within 2^31", i);
    wc *= (uint64_t)w->window[i];
    if (wc > UINT32_MAX)
      return nxv_fail(NXV_ERR_UNSUPPORTED, "window_reduce: window exceeds 2^32 elements");
  }
  nxv_tensor *tout;
  NXV_TRY(nxv_tensor_new(d, t, n_out, &tout));
  if (n_out == 0) {
    *out = tout;
    return NXV_OK;
  }
  uint32_t R = w->rank;
  nxv_node *node = nxv_node_new(7 * R);
  if (!node) {
    nxv_tensor_release(tout);
    return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "op node");
  }
  /* Row-major strides of the input: past 2^32 (and wrapping) only when it
   * is empty, and then every window position is padding. */
  uint64_t stride = 1;
  for (int i = (int)R - 1; i >= 0; i--) {
    uint32_t *a = node->args + 7 * i;
    a[0] = (uint32_t)w->out_shape[i];
    a[1] = (uint32_t)w->in_shape[i];
    a[2] = (uint32_t)stride;
    a[3] = (uint32_t)w->window[i];
    a[4] = (uint32_t)w->strides[i];
    a[5] = (uint32_t)w->dilations[i];
    a[6] = (uint32_t)(int32_t)w->pad_lo[i];
    stride *= (uint64_t)w->in_shape[i];
  }
  /* Every axis but the last two a plain batch axis: the kernel's
   * two-axis walk. */
  bool planes = R >= 2;
  for (uint32_t i = 0; i + 2 < R && planes; i++)
    planes = w->window[i] == 1 && w->strides[i] == 1 && w->pad_lo[i] == 0 &&
             w->out_shape[i] == w->in_shape[i];
  pc_window pc = {.a = w->a->buf->addr, .c = tout->buf->addr, .n_out = (uint32_t)n_out,
                  .win_count = (uint32_t)wc, .rank = R, .planes = planes};
  memcpy(node->pc, &pc, sizeof pc);
  node->pc_size = sizeof pc;
  node->args_pc_offset = offsetof(pc_window, args);
  node->groups[0] = groups_for(d, n_out);
  node->groups[1] = node->groups[2] = 1;
  node->cost = n_out * wc;
  node_use(node, w->a, false);
  node_use(node, tout, true);
  nxv_status st = push_dispatch(d, node, family(NXV_SPV_WINDOW_S8, t), op, 0);
  if (st != NXV_OK) {
    nxv_tensor_release(tout);
    return st;
  }
  *out = tout;
  return NXV_OK;
}

/* ------------------------------------------------------------------ */
/* FFT                                                                 */
/* ------------------------------------------------------------------ */

typedef struct pc_fft {           /* fft.comp */
  uint64_t src, dst;
  uint32_t eps_lo, eps_hi;
  float eps_f;
  uint32_t rows, n, m, len, flags;
} pc_fft;
_Static_assert(sizeof(pc_fft) == 48, "pc_fft layout");

nxv_status nxv_fft(nxv_device *d, nxv_tensor *a, uint64_t rows, uint64_t n,
                   bool inverse, double eps, nxv_tensor **out) {
  const char *name = inverse ? "ifft" : "fft";
  if (!d || !a || !out) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: NULL argument", name);
  if (a->device != d)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: tensor on another device", name);
  NXV_TRY(nxv_tensor_ready(a));
  nxv_dtype t = a->dtype;
  if (!is_complex(t))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: expected a c64 or c128 tensor, got %s",
                    name, nxv_dtype_name(t));
  NXV_TRY(check_type(d, t, name));
  if (n == 0) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: length must be positive", name);
  if (rows > UINT64_MAX / n || rows * n != a->count)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "%s: tensor has %llu elements, %llu rows of %llu need %llu", name,
                    (unsigned long long)a->count, (unsigned long long)rows,
                    (unsigned long long)n, (unsigned long long)(rows * n));
  if (rows * n > UINT32_MAX)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "%s: more than 2^32-1 elements", name);
  if (!(eps >= 0.0)) eps = 0.0; /* NaN or negative: flush nothing */
  uint64_t total = rows * n, m = n;
  uint32_t stages = 0;
  while ((m & 1u) == 0) {
    m >>= 1;
    stages++;
  }
  /* Stages before the last write scratch buffers (alternating), in
   * double where the kernel computes in double. */
  bool wide = t == NXV_C128 || d->vk.info.float64;
  nxv_dtype st_type = wide ? NXV_C128 : NXV_C64;
  nxv_tensor *res = NULL, *scratch[2] = {NULL, NULL};
  nxv_status st = nxv_tensor_new(d, t, total, &res);
  for (uint32_t i = 0; i < 2 && i < stages && st == NXV_OK && total; i++)
    st = nxv_tensor_new(d, st_type, total, &scratch[i]);
  nxv_spv_module mod = t == NXV_C128 ? NXV_SPV_FFT_C128
                       : (wide ? NXV_SPV_FFT_C64_WIDE : NXV_SPV_FFT_C64);
  uint64_t bits;
  memcpy(&bits, &eps, sizeof bits);
  nxv_tensor *prev = a;
  uint64_t len = m;
  for (uint32_t s = 0; st == NXV_OK && total && s <= stages; s++) {
    nxv_tensor *dst = s == stages ? res : scratch[s % 2];
    uint32_t flags = (s == 0 ? 1u : 0u) | (s == stages ? 2u : 0u) | (inverse ? 4u : 0u);
    if (wide && prev != a) flags |= 8u;
    if (wide && dst != res) flags |= 16u;
    pc_fft pc = {.src = prev->buf->addr, .dst = dst->buf->addr,
                 .eps_lo = (uint32_t)bits, .eps_hi = (uint32_t)(bits >> 32),
                 .eps_f = (float)eps, .rows = (uint32_t)rows, .n = (uint32_t)n,
                 .m = (uint32_t)m, .len = (uint32_t)(s ? len : 0), .flags = flags};
    if (s) len *= 2;
    nxv_node *node = nxv_node_new(0);
    if (!node) {
      st = nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "op node");
      break;
    }
    memcpy(node->pc, &pc, sizeof pc);
    node->pc_size = sizeof pc;
    node->groups[0] = groups_for(d, total);
    node->groups[1] = node->groups[2] = 1;
    node->cost = s == 0 ? total * m : total;
    node_use(node, prev, false);
    node_use(node, dst, true);
    st = push_dispatch(d, node, mod, 0, 0);
    prev = dst;
  }
  for (int i = 0; i < 2; i++)
    if (scratch[i]) nxv_tensor_release(scratch[i]);
  if (st != NXV_OK) {
    if (res) nxv_tensor_release(res);
    return st;
  }
  *out = res;
  return NXV_OK;
}

/* ------------------------------------------------------------------ */
/* Linear algebra                                                      */
/* ------------------------------------------------------------------ */

/* Shared memory the linear algebra kernels declare, at most: trsm.comp in
 * f64 or wide f32 (28,932 bytes; cholesky.comp in f64: 26,368). */
#define LINALG_SHARED_BYTES (29 * 1024)

bool nxv_linalg_supported(nxv_device *d, nxv_dtype t) {
  return (t == NXV_F32 || t == NXV_F64) && type_ok(d, t) &&
         d->vk.info.max_workgroup_invocations >= 256 && d->vk.info.max_workgroup_size[0] >= 256 &&
         d->vk.info.max_shared_memory >= LINALG_SHARED_BYTES;
}

/* Whether the device runs the linear algebra kernels (256 invocations a
 * workgroup, fixed; 27 KiB of shared memory) on dtype, f32 or f64. */
static nxv_status linalg_check(nxv_device *d, nxv_dtype t, const char *op) {
  if (t != NXV_F32 && t != NXV_F64)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "%s on %s: kernels take f32 and f64", op,
                    nxv_dtype_name(t));
  NXV_TRY(check_type(d, t, op));
  if (d->vk.info.max_workgroup_invocations < 256 || d->vk.info.max_workgroup_size[0] < 256 ||
      d->vk.info.max_shared_memory < LINALG_SHARED_BYTES)
    return nxv_fail(NXV_ERR_UNSUPPORTED,
                    "%s: device %s runs fewer than 256 invocations a workgroup or has "
                    "less than 29 KiB of shared memory",
                    op, d->vk.info.name);
  return NXV_OK;
}

/* Checks that a (of a type the kernels take) holds batch dense n x n
 * matrices of an order the kernels index in 32 bits. */
static nxv_status square_batch_check(nxv_device *d, const nxv_tensor *a, uint64_t batch,
                                     uint64_t n, const char *op) {
  NXV_TRY(linalg_check(d, a->dtype, op));
  if (n != 0 && batch > UINT64_MAX / n / n)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "%s: %llu matrices of order %llu overflow", op,
                    (unsigned long long)batch, (unsigned long long)n);
  if (batch * n * n != a->count)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "%s: tensor has %llu elements, %llu matrices of order %llu need %llu", op,
                    (unsigned long long)a->count, (unsigned long long)batch,
                    (unsigned long long)n, (unsigned long long)(batch * n * n));
  if (n > NXV_CHOLESKY_MAX_ORDER)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "%s: order %llu (at most %d)", op,
                    (unsigned long long)n, NXV_CHOLESKY_MAX_ORDER);
  return NXV_OK;
}

typedef struct pc_cholesky { /* cholesky.comp */
  uint64_t a, dst;
  uint32_t eps_lo, eps_hi;
  uint32_t n, batch, m, c0, flags, b0;
} pc_cholesky;
_Static_assert(sizeof(pc_cholesky) == 48, "pc_cholesky layout");

/* cholesky.comp's panel width (PB) and the largest order its register
 * variant factors alone. */
#define CHOLESKY_PANEL 32
#define CHOLESKY_SMALL 64

/* f32 triangular solves run in double where the device has it, unless
 * fast math was asked for (trsm.comp's WIDE): as Nx.BinaryBackend
 * computes them, each solution rounded once. */
static bool linalg_wide(nxv_device *d, nxv_dtype t) {
  return t == NXV_F32 && d->vk.info.float64 && !d->config.fast_math;
}

/* eps as the linear algebra kernels read it from their push constants: a
 * double's bits, or with single a float's in the low word; NaN or a
 * negative eps flushes nothing (0). */
static uint64_t linalg_eps_bits(double eps, bool single) {
  if (!(eps >= 0.0)) eps = 0.0;
  uint64_t bits;
  if (single) {
    float e32 = (float)eps;
    uint32_t b32;
    memcpy(&b32, &e32, sizeof b32);
    bits = b32;
  } else {
    memcpy(&bits, &eps, sizeof bits);
  }
  return bits;
}

/* Queues one dispatch of module's op and variant (specialization
 * constants 1 and 2) over the gx x gy grid with push constants pc
 * (pc_size bytes): the tensors of use (NULL entries skipped) read, those
 * from index first_write on written. */
static nxv_status push_grid_op(nxv_device *d, nxv_spv_module module, uint32_t op,
                               uint32_t variant, const void *pc, uint32_t pc_size, uint32_t gx,
                               uint32_t gy, uint64_t cost, nxv_tensor *const *use, int nuse,
                               int first_write) {
  nxv_node *node = nxv_node_new(0);
  if (!node) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "op node");
  memcpy(node->pc, pc, pc_size);
  node->pc_size = pc_size;
  node->groups[0] = gx;
  node->groups[1] = gy;
  node->groups[2] = 1;
  node->cost = cost;
  for (int i = 0; i < nuse; i++)
    if (use[i]) node_use(node, use[i], i >= first_write);
  return push_dispatch(d, node, module, op, variant);
}

/* push_grid_op with op 0. */
static nxv_status push_grid(nxv_device *d, nxv_spv_module module, uint32_t variant,
                            const void *pc, uint32_t pc_size, uint32_t gx, uint32_t gy,
                            uint64_t cost, nxv_tensor *const *use, int nuse, int first_write) {
  return push_grid_op(d, module, 0, variant, pc, pc_size, gx, gy, cost, use, nuse, first_write);
}

/* One cholesky.comp dispatch over res (reading a too, when it is another
 * tensor). */
static nxv_status cholesky_step(nxv_device *d, nxv_dtype t, const pc_cholesky *pc,
                                uint32_t variant, uint32_t gx, uint32_t gy, uint64_t cost,
                                nxv_tensor *a, nxv_tensor *res) {
  nxv_tensor *use[2] = {a != res ? a : NULL, res};
  return push_grid(d, t == NXV_F32 ? NXV_SPV_CHOLESKY_F32 : NXV_SPV_CHOLESKY_F64, variant, pc,
                   sizeof *pc, gx, gy, cost, use, 2, 1);
}

nxv_status nxv_cholesky(nxv_device *d, nxv_tensor *a, uint64_t batch, uint64_t n,
                        double eps, nxv_tensor **out) {
  if (!d || !a || !out) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "cholesky: NULL argument");
  if (a->device != d)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "cholesky: tensor on another device");
  nxv_dtype t = a->dtype;
  NXV_TRY(square_batch_check(d, a, batch, n, "cholesky"));
  uint64_t width = d->vk.info.max_workgroup_count[0];
  uint64_t height = d->vk.info.max_workgroup_count[1];
  if (batch > width * height || batch > UINT32_MAX)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "cholesky: %llu matrices exceed the device's grid",
                    (unsigned long long)batch);
  /* The first panel's trailing update has the most tiles. */
  uint64_t side = n > CHOLESKY_SMALL ? (n - CHOLESKY_PANEL + 31) / 32 : 0;
  if (side * (side + 1) / 2 > width)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "cholesky: order %llu exceeds the device's grid",
                    (unsigned long long)n);
  NXV_TRY(nxv_tensor_ready(a));
  nxv_tensor *res = NULL;
  NXV_TRY(nxv_tensor_new(d, t, batch * n * n, &res));
  if (batch * n == 0) {
    *out = res;
    return NXV_OK;
  }
  uint64_t bits = linalg_eps_bits(eps, false);
  pc_cholesky pc = {.a = a->buf->addr, .dst = res->buf->addr, .eps_lo = (uint32_t)bits,
                    .eps_hi = (uint32_t)(bits >> 32), .n = (uint32_t)n,
                    .batch = (uint32_t)batch};
  /* One workgroup per matrix: batch over x, then rows of x along y. */
  uint32_t mx = (uint32_t)(batch < width ? batch : width);
  uint32_t my = (uint32_t)((batch + mx - 1) / mx);
  nxv_status st;
  if (n <= CHOLESKY_SMALL) {
    pc.m = (uint32_t)n;
    pc.flags = 1;
    st = cholesky_step(d, t, &pc, n <= CHOLESKY_PANEL ? 7 : 1, mx, my,
                       batch * n * n * n / 3 + batch * n * n, a, res);
  } else {
    /* Blocked, in place in res; the steps after the copy read res only. */
    uint64_t elems = n * n;
    uint32_t ew = groups_capped(d, (elems + 255) / 256);
    st = NXV_OK;
    for (uint64_t b0 = 0; st == NXV_OK && b0 < batch; b0 += height) {
      uint32_t nb = (uint32_t)(batch - b0 < height ? batch - b0 : height);
      pc.b0 = (uint32_t)b0;
      st = cholesky_step(d, t, &pc, 4, ew, nb, nb * elems, a, res);
    }
    pc.a = res->buf->addr;
    for (uint64_t c0 = 0; st == NXV_OK && c0 < n; c0 += CHOLESKY_PANEL) {
      uint64_t w = n - c0 < CHOLESKY_PANEL ? n - c0 : CHOLESKY_PANEL;
      uint64_t m = n - c0 - w;
      pc.c0 = (uint32_t)c0;
      pc.m = (uint32_t)w;
      pc.flags = 0;
      pc.b0 = 0;
      st = cholesky_step(d, t, &pc, 7, mx, my, batch * w * w * w / 3, res, res);
      if (st != NXV_OK || m == 0) continue;
      pc.m = (uint32_t)m;
      uint64_t tiles = (m + 31) / 32;
      tiles = tiles * (tiles + 1) / 2;
      for (uint64_t b0 = 0; st == NXV_OK && b0 < batch; b0 += height) {
        uint32_t nb = (uint32_t)(batch - b0 < height ? batch - b0 : height);
        pc.b0 = (uint32_t)b0;
        st = cholesky_step(d, t, &pc, 2, (uint32_t)((m + 63) / 64), nb,
                           nb * m * w * w, res, res);
        if (st == NXV_OK)
          st = cholesky_step(d, t, &pc, 3, (uint32_t)tiles, nb, nb * m * m * w, res, res);
      }
    }
    for (uint64_t b0 = 0; st == NXV_OK && b0 < batch; b0 += height) {
      uint32_t nb = (uint32_t)(batch - b0 < height ? batch - b0 : height);
      pc.b0 = (uint32_t)b0;
      st = cholesky_step(d, t, &pc, 5, ew, nb, nb * elems, res, res);
    }
  }
  if (st != NXV_OK) {
    nxv_tensor_release(res);
    return st;
  }
  *out = res;
  return NXV_OK;
}

typedef struct pc_trsm { /* trsm.comp */
  uint64_t a, c, y, work, singular, c_batch;
  uint32_t m_row, m_col, c_row, c_col;
  uint32_t n, cols, batch, nc, flags, b0, p0, pad;
} pc_trsm;
_Static_assert(sizeof(pc_trsm) == 96, "pc_trsm layout");

/* trsm.comp's panel width (PB), the largest order its one-dispatch
 * register variant takes, the bytes of its shared residuals (RS elements
 * of 4 or 8 bytes: the orders times right-hand sides its one-workgroup
 * variant takes), the most right-hand sides a workgroup of that variant
 * takes (NCMAX), and the largest order it is picked for: on the H200 it
 * took less time than the panels up to order 512 (6-24% less with one
 * right-hand side), and more from order 1024 on (8% at 1024, 42% at 2048),
 * where one workgroup's reads of M are the limit. */
#define TRSM_PANEL 32
#define TRSM_SMALL 128
#define TRSM_STREAM_BYTES 16384
#define TRSM_STREAM_COLS 8
#define TRSM_STREAM_MAX 512
/* Rows of M and right-hand sides a workgroup of trsm.comp's panel update
 * (VARIANT 3) takes at a time (TRB, TCW). */
#define TRSM_UPDATE_ROWS 56
#define TRSM_UPDATE_COLS 32

typedef struct pc_trsv { /* trsv.comp */
  uint64_t a, c, y, work, singular, sync, c_batch;
  uint32_t m_row, m_col, c_row, c_col;
  uint32_t n, cols, batch, flags, b0, nblk, chunks, pad;
} pc_trsv;
_Static_assert(sizeof(pc_trsv) == 104, "pc_trsv layout");

/* trsv.comp's rows a workgroup (B), most right-hand sides (NCMAX), and
 * the signalling NaNs its workspace holds until a value is solved
 * (SENTINEL: no arithmetic produces them); the smallest order it is picked
 * for: on the H200 it took 40-47 µs a call from order 16 to 128 (one
 * system, e2e), where the register variant took 37 (order 16), 60 (64) and
 * 97 (128), its rows one barrier and one load of M apart. */
#define TRSV_BLOCK 32
#define TRSV_COLS 8
#define TRSV_MIN_ORDER 17
/* Right-hand sides a chunk of a chained solve takes (each chunk its own
 * chain of blocks) for batch systems of nblk blocks and cols right-hand
 * sides, 0 when the solve is not chained: where the chains' blocks times
 * right-hand sides, W = batch * nblk * cols, are few, the latency of one
 * chain counts, and chunks of 4 right-hand sides took less time than of 1
 * or 8 on the H200 (1 x 1024², 8: 180 µs against 258 for one chunk of 8;
 * 1 x 1024², 16: 213 against 245 and 278); up to W = 4096, throughput
 * counts, and chunks of 8 did best (1 x 256², 256: 128 against 140 for 4;
 * 16 x 256², 16: 132 against 143); beyond, the panels took less time (1 x
 * 512², 512: 313 against 535). Up to 4 right-hand sides, one chunk. */
static uint32_t trsv_chunk_cols(uint64_t batch, uint64_t nblk, uint64_t cols) {
  uint64_t w = batch * nblk * cols;
  if (cols <= 4) return (uint32_t)cols;
  if (w <= 1024) return 4;
  if (w <= 4096) return TRSV_COLS;
  return 0;
}
#define TRSV_SENTINEL_F32 0x7F80BEEFu
#define TRSV_SENTINEL_F64 0x7FF00000DEADBEEFull

/* Whether the solve of order n with cols right-hand sides can be one
 * trsv.comp dispatch of workgroups that wait on one another's values, and
 * its variant's bit 0: a block's rows in one subgroup where every
 * subgroup has at least 32 invocations (1), else through shared memory
 * (0); the caller adds bit 1 for a partial last chunk. The module
 * declares the subgroup shuffle capability, so devices without shuffles
 * never take it. */
static bool trsv_chained(nxv_device *d, uint64_t n, uint64_t cols, uint32_t *out_variant) {
  const nxv_device_info *i = &d->vk.info;
  if (d->config.chained_solve < 0 || n < TRSV_MIN_ORDER || cols == 0 ||
      !(i->subgroup_operations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT))
    return false;
  *out_variant = i->subgroup_size >= 32 && i->subgroup_min_size >= 32 ? 1 : 0;
  return true;
}

/* One trsm.comp dispatch: use is {a, b, x, flags, workspace or NULL}, the
 * first two read, the others written. */
static nxv_status trsm_step(nxv_device *d, nxv_spv_module mod, const pc_trsm *pc,
                            uint32_t variant, uint32_t gx, uint32_t gy, uint64_t cost,
                            nxv_tensor *const use[5]) {
  return push_grid(d, mod, variant, pc, sizeof *pc, gx, gy, cost, use, 5, 2);
}

nxv_status nxv_triangular_solve(nxv_device *d, const nxv_trsm_desc *s, nxv_tensor **out_x,
                                nxv_tensor **out_singular) {
  if (!d || !s || !s->a || !s->b || !out_x || !out_singular)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "triangular_solve: NULL argument");
  if (s->a->device != d || s->b->device != d)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "triangular_solve: tensor on another device");
  nxv_dtype t = s->a->dtype;
  if (s->b->dtype != t)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "triangular_solve: a is %s, b is %s",
                    nxv_dtype_name(t), nxv_dtype_name(s->b->dtype));
  NXV_TRY(linalg_check(d, t, "triangular_solve"));
  uint64_t batch = s->batch, n = s->n, cols = s->cols;
  if ((n && batch > UINT64_MAX / n / n) || (n && cols && batch > UINT64_MAX / n / cols))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "triangular_solve: sizes overflow");
  if (batch * n * n != s->a->count || batch * n * cols != s->b->count)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "triangular_solve: a has %llu elements and b %llu; %llu systems of order "
                    "%llu with %llu right-hand sides need %llu and %llu",
                    (unsigned long long)s->a->count, (unsigned long long)s->b->count,
                    (unsigned long long)batch, (unsigned long long)n,
                    (unsigned long long)cols, (unsigned long long)(batch * n * n),
                    (unsigned long long)(batch * n * cols));
  if (n * n > UINT32_MAX || n * cols > UINT32_MAX || batch > UINT32_MAX)
    return nxv_fail(NXV_ERR_UNSUPPORTED,
                    "triangular_solve: a system of 2^32 elements or more, or 2^32 systems");
  /* Right-hand sides a workgroup takes: the next power of two of cols, at
   * most 16, so that narrow systems keep most invocations on rows. */
  uint32_t nc = 1;
  while (nc < cols && nc < 16) nc <<= 1;
  uint64_t chunks = (cols + nc - 1) / nc;
  if (chunks > d->vk.info.max_workgroup_count[0])
    return nxv_fail(NXV_ERR_UNSUPPORTED, "triangular_solve: %llu right-hand sides exceed the "
                    "device's grid", (unsigned long long)cols);
  NXV_TRY(nxv_tensor_ready(s->a));
  NXV_TRY(nxv_tensor_ready(s->b));
  bool wide = linalg_wide(d, t);
  /* On GPUs, from order 17, while the systems' blocks of 32 rows times
   * right-hand sides are at most 4096 (trsv_chunk_cols): one dispatch of
   * trsv.comp, a workgroup per 32 rows and chunk of right-hand sides.
   * Otherwise, at most 4 rows per
   * invocation and order 128: one dispatch, the rows in registers
   * (trsm.comp's VARIANT 1). Otherwise, up to order 512, one
   * dispatch of workgroups that each solve a system for up to 8
   * right-hand sides (VARIANT 5). Beyond, panels of 32 rows in a
   * workspace: x itself, or doubles for f32 computed in double. (llvmpipe
   * ends an invocation's loops once it has run 65535 loop iterations in
   * all, gallivm's LP_MAX_TGSI_LOOP_ITERATIONS; VARIANT 5 runs about 600 a
   * panel, so order 512 stays well inside that.) */
  uint32_t trsv_variant = 0;
  bool chained = trsv_chained(d, n, cols, &trsv_variant);
  uint64_t nblk = (n + TRSV_BLOCK - 1) / TRSV_BLOCK;
  uint32_t cc = chained ? trsv_chunk_cols(batch, nblk, cols) : 0;
  uint64_t vchunks = cc ? (cols + cc - 1) / cc : 0;
  if (!cc || nblk * vchunks > d->vk.info.max_workgroup_count[0]) chained = false;
  if (chained && cols % cc) trsv_variant |= 2; /* a partial last chunk */
  bool small = !chained && n <= TRSM_SMALL && n <= 4 * (256 / nc);
  uint64_t resid = TRSM_STREAM_BYTES / (wide || t == NXV_F64 ? 8 : 4);
  bool stream = !chained && !small && n <= TRSM_STREAM_MAX && n <= resid;
  uint32_t snc = 1;
  while (stream && snc < TRSM_STREAM_COLS && snc < cols && n * snc * 2 <= resid) snc <<= 1;
  uint64_t schunks = (cols + snc - 1) / snc;
  if (stream && schunks > d->vk.info.max_workgroup_count[0])
    return nxv_fail(NXV_ERR_UNSUPPORTED, "triangular_solve: %llu right-hand sides exceed the "
                    "device's grid", (unsigned long long)cols);
  nxv_tensor *x = NULL, *flags = NULL, *work = NULL, *sync = NULL;
  /* A chained solve's workspace (x itself unless wide) holds trsv.comp's
   * sentinel until each value is solved; its sync words start at zero. */
  uint32_t s32 = TRSV_SENTINEL_F32;
  uint64_t s64 = TRSV_SENTINEL_F64;
  if (chained && !wide)
    NXV_TRY(nxv_fill(d, t, batch * n * cols, t == NXV_F32 ? (void *)&s32 : (void *)&s64, &x));
  else
    NXV_TRY(nxv_tensor_new(d, t, batch * n * cols, &x));
  nxv_status st = nxv_tensor_new(d, NXV_U32, batch, &flags);
  if (st == NXV_OK && wide && chained)
    st = nxv_fill(d, NXV_F64, batch * n * cols, &s64, &work);
  else if (st == NXV_OK && wide && !small && !stream)
    st = nxv_tensor_new(d, NXV_F64, batch * n * cols, &work);
  if (st == NXV_OK && chained) {
    uint32_t zero = 0;
    st = nxv_fill(d, NXV_U32, batch * (2 + vchunks), &zero, &sync);
  }
  if (st != NXV_OK) {
    nxv_tensor_release(x);
    if (flags) nxv_tensor_release(flags);
    if (work) nxv_tensor_release(work);
    return st;
  }
  /* M = op(A) on the left; on the right X op(A) = B is op(A)^T X^T = B^T.
   * M is A or A^T, lower when A's triangle is, read through strides. */
  bool m_transposed = s->transpose_a != !s->left_side;
  bool m_lower = s->lower != m_transposed;
  uint32_t m_row = m_transposed ? 1 : (uint32_t)n, m_col = m_transposed ? (uint32_t)n : 1;
  /* B and X: batch x n x cols on the left, batch x cols x n on the right. */
  uint32_t c_row = s->left_side ? (uint32_t)cols : 1, c_col = s->left_side ? 1 : (uint32_t)n;
  nxv_spv_module mod = wide ? NXV_SPV_TRSM_F32_WIDE
                       : t == NXV_F32 ? NXV_SPV_TRSM_F32 : NXV_SPV_TRSM_F64;
  nxv_tensor *use[5] = {s->a, s->b, x, flags, work};
  nxv_spv_module vmod = wide ? NXV_SPV_TRSV_F32_WIDE
                        : t == NXV_F32 ? NXV_SPV_TRSV_F32 : NXV_SPV_TRSV_F64;
  nxv_tensor *vuse[6] = {s->a, s->b, x, flags, work, sync};
  uint32_t ymax = d->vk.info.max_workgroup_count[1];
  uint64_t elems = n * cols;
  for (uint64_t b0 = 0; st == NXV_OK && b0 < batch; b0 += ymax) {
    uint32_t nb = (uint32_t)(batch - b0 < ymax ? batch - b0 : ymax);
    pc_trsm pc = {.a = s->a->buf->addr, .c = s->b->buf->addr, .y = x->buf->addr,
                  .work = (work ? work : x)->buf->addr, .singular = flags->buf->addr,
                  .c_batch = elems, .m_row = m_row, .m_col = m_col, .c_row = c_row,
                  .c_col = c_col, .n = (uint32_t)n, .cols = (uint32_t)cols,
                  .batch = (uint32_t)batch, .nc = nc, .flags = m_lower ? 1u : 0u,
                  .b0 = (uint32_t)b0};
    if (chained) {
      pc_trsv vpc = {.a = pc.a, .c = pc.c, .y = pc.y, .work = pc.work, .singular = pc.singular,
                     .sync = sync->buf->addr, .c_batch = elems, .m_row = m_row, .m_col = m_col,
                     .c_row = c_row, .c_col = c_col, .n = pc.n, .cols = pc.cols,
                     .batch = pc.batch, .flags = pc.flags, .b0 = pc.b0,
                     .nblk = (uint32_t)nblk, .chunks = (uint32_t)vchunks};
      st = push_grid_op(d, vmod, cc, trsv_variant, &vpc, sizeof vpc,
                        (uint32_t)(nblk * vchunks), nb, nb * n * n * cols, vuse, 6, 2);
      continue;
    }
    if (small) {
      /* Without right-hand sides one workgroup a system still writes its
       * flag. */
      st = trsm_step(d, mod, &pc, 1, chunks ? (uint32_t)chunks : 1, nb,
                     nb * n * n * (cols ? cols : 1), use);
      continue;
    }
    if (stream) {
      pc.nc = snc;
      st = trsm_step(d, mod, &pc, 5, schunks ? (uint32_t)schunks : 1, nb,
                     nb * n * n * (cols ? cols : 1), use);
      continue;
    }
    st = trsm_step(d, mod, &pc, 4, groups_capped(d, elems ? (elems + 255) / 256 : 1), nb,
                   nb * (elems + n), use);
    for (uint64_t p0 = 0; st == NXV_OK && cols && p0 < n; p0 += TRSM_PANEL) {
      pc.p0 = (uint32_t)p0;
      st = trsm_step(d, mod, &pc, 2, (uint32_t)((cols + 255) / 256), nb,
                     nb * cols * TRSM_PANEL * TRSM_PANEL, use);
      if (st == NXV_OK && p0 + TRSM_PANEL < n) {
        uint64_t rows = n - p0 - TRSM_PANEL;
        uint64_t jobs = (rows + TRSM_UPDATE_ROWS - 1) / TRSM_UPDATE_ROWS *
                        ((cols + TRSM_UPDATE_COLS - 1) / TRSM_UPDATE_COLS);
        st = trsm_step(d, mod, &pc, 3, groups_capped(d, jobs), nb,
                       nb * rows * cols * TRSM_PANEL, use);
      }
    }
  }
  if (work) nxv_tensor_release(work); /* the nodes hold the buffers */
  if (sync) nxv_tensor_release(sync);
  if (st != NXV_OK) {
    nxv_tensor_release(x);
    nxv_tensor_release(flags);
    return st;
  }
  *out_x = x;
  *out_singular = flags;
  return NXV_OK;
}

typedef struct pc_lu { /* lu.comp */
  uint64_t a, p, l, u, work, perm, scratch, sstride;
  uint32_t eps_lo, eps_hi;
  uint32_t n, batch, b0, c0, w, mode;
} pc_lu;
_Static_assert(sizeof(pc_lu) == 96, "pc_lu layout");

/* lu.comp's panel width (PB) in the blocked form, and its trailing
 * update's tile (VARIANT 6). */
#define LU_PANEL 32
#define LU_TILE_M 32
#define LU_TILE_N 64
/* The largest order the blocked form takes on CPU devices. */
#define LU_CPU_MAX 14848

/* lu.comp's shared-memory variants: the largest order each holds, and the
 * shared memory it declares with elements of rsize bytes (the matrix, perm
 * and the pivot search's 256 + 16 candidates). */
static uint64_t lu_shared_order(uint32_t variant) { return variant == 1 ? 32 : 64; }
static uint64_t lu_shared_bytes(uint32_t variant, uint64_t rsize) {
  uint64_t ns = lu_shared_order(variant);
  return ns * ns * rsize + ns * 4 + 272 * (rsize + 4);
}

/* One lu.comp dispatch over the gx x gy grid. */
static nxv_status lu_step(nxv_device *d, nxv_spv_module mod, uint32_t variant, const pc_lu *pc,
                          uint32_t gx, uint32_t gy, uint64_t cost, nxv_tensor *const use[7]) {
  return push_grid(d, mod, variant, pc, sizeof *pc, gx, gy, cost, use, 7, 1);
}

/* lu.comp's VARIANT 7 over every matrix of pc's batch, a matrix per row of
 * workgroups: the copy into the workspace (mode 0) or P, L and U out (1). */
static nxv_status lu_copy_pass(nxv_device *d, nxv_spv_module mod, pc_lu *pc, uint32_t mode,
                               nxv_tensor *const use[7]) {
  uint64_t height = d->vk.info.max_workgroup_count[1], nn = (uint64_t)pc->n * pc->n;
  uint32_t ew = groups_capped(d, (nn + 255) / 256);
  nxv_status st = NXV_OK;
  pc->mode = mode;
  for (uint64_t b0 = 0; st == NXV_OK && b0 < pc->batch; b0 += height) {
    uint32_t nb = (uint32_t)(pc->batch - b0 < height ? pc->batch - b0 : height);
    pc->b0 = (uint32_t)b0;
    st = lu_step(d, mod, 7, pc, ew, nb, nb * nn, use);
  }
  return st;
}

nxv_status nxv_lu(nxv_device *d, nxv_tensor *a, uint64_t batch, uint64_t n, double eps,
                  nxv_tensor **out_p, nxv_tensor **out_l, nxv_tensor **out_u) {
  if (!d || !a || !out_p || !out_l || !out_u)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "lu: NULL argument");
  if (a->device != d) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "lu: tensor on another device");
  nxv_dtype t = a->dtype;
  NXV_TRY(square_batch_check(d, a, batch, n, "lu"));
  uint64_t width = d->vk.info.max_workgroup_count[0];
  uint64_t height = d->vk.info.max_workgroup_count[1];
  if (batch > UINT32_MAX)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "lu: %llu matrices (at most 2^32 - 1)",
                    (unsigned long long)batch);
  bool wide = linalg_wide(d, t);
  uint64_t rsize = wide || t == NXV_F64 ? 8 : 4;
  /* The shared-memory variants where the matrix fits, else the blocked
   * form in the workspace (U itself unless wide). */
  uint32_t variant = 2;
  if (n <= 32 && d->vk.info.max_shared_memory >= lu_shared_bytes(1, rsize))
    variant = 1;
  else if (n <= 64 && d->vk.info.max_shared_memory >= lu_shared_bytes(3, rsize))
    variant = 3;
  /* The first panel's trailing update has the most tiles. */
  uint64_t rest = n > LU_PANEL ? n - LU_PANEL : 0;
  if (variant == 2 &&
      ((rest + LU_TILE_M - 1) / LU_TILE_M) * ((rest + LU_TILE_N - 1) / LU_TILE_N) > width)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "lu: order %llu exceeds the device's grid",
                    (unsigned long long)n);
  /* llvmpipe ends an invocation's loops after 65535 iterations in all
   * (architecture.md); a panel's factorization loops about m / 2 + 32 (33
   * + ceil(m / 256)) times per invocation for m rows, well within that up
   * to LU_CPU_MAX. */
  if (variant == 2 && d->vk.info.type == NXV_DEVICE_CPU && n > LU_CPU_MAX)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "lu: order %llu on a CPU device (at most %d)",
                    (unsigned long long)n, LU_CPU_MAX);
  NXV_TRY(nxv_tensor_ready(a));
  uint64_t elems = batch * n * n;
  nxv_tensor *res[3] = {NULL, NULL, NULL}, *work = NULL, *perm = NULL, *scratch = NULL;
  nxv_status st = NXV_OK;
  for (int i = 0; i < 3 && st == NXV_OK; i++) st = nxv_tensor_new(d, t, elems, &res[i]);
  /* The panel's column-major copy (n x LU_PANEL elements of the compute
   * type per matrix, a whole number of 8-byte words): in P's buffer, unused
   * until the end, where each matrix's slot holds it from its first 8-byte
   * boundary, else its own. */
  uint64_t tsize = t == NXV_F64 ? 8 : 4, slot = n * n * tsize;
  uint64_t need = (n * LU_PANEL * rsize + 7) & ~(uint64_t)7;
  bool in_p = slot >= need + 4;
  if (st == NXV_OK && elems && variant == 2) {
    st = nxv_tensor_new(d, NXV_U32, 2 * batch * n, &perm);
    if (st == NXV_OK && wide) st = nxv_tensor_new(d, NXV_F64, elems, &work);
    if (st == NXV_OK && !in_p)
      st = nxv_tensor_new(d, NXV_U32, batch * need / 4, &scratch);
  }
  uint64_t bits = linalg_eps_bits(eps, rsize == 4);
  pc_lu pc = {.a = a->buf->addr, .eps_lo = (uint32_t)bits, .eps_hi = (uint32_t)(bits >> 32),
              .n = (uint32_t)n, .batch = (uint32_t)batch};
  if (st == NXV_OK && elems) {
    pc.p = res[0]->buf->addr;
    pc.l = res[1]->buf->addr;
    pc.u = res[2]->buf->addr;
    if (variant == 2) {
      pc.work = work ? work->buf->addr : res[2]->buf->addr;
      pc.perm = perm->buf->addr;
      pc.scratch = scratch ? scratch->buf->addr : res[0]->buf->addr;
      pc.sstride = scratch ? need : slot;
    }
    nxv_spv_module mod = wide ? NXV_SPV_LU_F32_WIDE : t == NXV_F32 ? NXV_SPV_LU_F32 : NXV_SPV_LU_F64;
    nxv_tensor *use[7] = {a, work, perm, scratch, res[0], res[1], res[2]};
    /* A workgroup per matrix: up to the grid's width along x, rows of that
     * along y, further dispatches past the grid's height. */
    uint64_t per = width * height;
    if (variant != 2) {
      for (uint64_t b0 = 0; st == NXV_OK && b0 < batch; b0 += per) {
        uint64_t nb = batch - b0 < per ? batch - b0 : per;
        uint32_t gx = (uint32_t)(nb < width ? nb : width);
        pc.b0 = (uint32_t)b0;
        st = lu_step(d, mod, variant, &pc, gx, (uint32_t)((nb + gx - 1) / gx),
                     nb * (n * n * n / 3 + n * n), use);
      }
    } else {
      /* Blocked, in the workspace: the copy in, then per panel its
       * factorization (a workgroup per matrix), the swaps and the solve
       * beside it (an invocation per column), the trailing update (a
       * workgroup per tile); then P, L and U out. */
      uint32_t cw = (uint32_t)((n + 255) / 256);
      st = lu_copy_pass(d, mod, &pc, 0, use);
      for (uint64_t c0 = 0; st == NXV_OK && c0 < n; c0 += LU_PANEL) {
        uint64_t w = n - c0 < LU_PANEL ? n - c0 : LU_PANEL, m = n - c0 - w;
        pc.c0 = (uint32_t)c0;
        pc.w = (uint32_t)w;
        for (uint64_t b0 = 0; st == NXV_OK && b0 < batch; b0 += per) {
          uint64_t nb = batch - b0 < per ? batch - b0 : per;
          uint32_t gx = (uint32_t)(nb < width ? nb : width);
          pc.b0 = (uint32_t)b0;
          st = lu_step(d, mod, 2, &pc, gx, (uint32_t)((nb + gx - 1) / gx),
                       nb * (n - c0) * w * w, use);
        }
        uint64_t tiles = ((m + LU_TILE_M - 1) / LU_TILE_M) * ((m + LU_TILE_N - 1) / LU_TILE_N);
        /* The grid-wide passes take a matrix per row of workgroups. */
        for (uint64_t b0 = 0; st == NXV_OK && b0 < batch; b0 += height) {
          uint32_t nb = (uint32_t)(batch - b0 < height ? batch - b0 : height);
          pc.b0 = (uint32_t)b0;
          if (c0 > 0 || m > 0) st = lu_step(d, mod, 5, &pc, cw, nb, nb * (n * w + m * w * w), use);
          if (st == NXV_OK && m > 0)
            st = lu_step(d, mod, 6, &pc, (uint32_t)tiles, nb, nb * m * m * w, use);
        }
      }
      if (st == NXV_OK) st = lu_copy_pass(d, mod, &pc, 1, use);
    }
  }
  if (work) nxv_tensor_release(work); /* the nodes hold the buffers */
  if (perm) nxv_tensor_release(perm);
  if (scratch) nxv_tensor_release(scratch);
  if (st != NXV_OK) {
    for (int i = 0; i < 3; i++)
      if (res[i]) nxv_tensor_release(res[i]);
    return st;
  }
  *out_p = res[0];
  *out_l = res[1];
  *out_u = res[2];
  return NXV_OK;
}

typedef struct pc_qr { /* qr.comp */
  uint64_t a, q, r, work, tau, qw;
  uint32_t eps_lo, eps_hi;
  uint32_t m, n, qc, rr, kr, batch, b0, i, mode, pad;
} pc_qr;
_Static_assert(sizeof(pc_qr) == 96, "pc_qr layout");

/* qr.comp's columns a workgroup in VARIANTS 2 and 4, and the largest m
 * and n VARIANT 5 takes. */
#define QR_COLS 8
#define QR_SMALL 64
/* The most loop iterations an invocation of VARIANT 4 runs (llvmpipe ends
 * an invocation's loops after 65535 in all): a reflection costs about
 * 2 m / 32 (rows in 256 / QR_COLS groups) + 32 (their sum). */
#define QR_LOOPS 16384

/* One qr.comp dispatch over the gx x gy grid. */
static nxv_status qr_step(nxv_device *d, nxv_spv_module mod, uint32_t variant, const pc_qr *pc,
                          uint32_t gx, uint32_t gy, uint64_t cost, nxv_tensor *const use[7]) {
  return push_grid(d, mod, variant, pc, sizeof *pc, gx, gy, cost, use, 7, 4);
}

/* qr.comp's variant over every matrix of pc's batch, gx workgroups along x
 * for each matrix, a matrix per row of workgroups (further dispatches past
 * the grid's height); cost per matrix. */
static nxv_status qr_rows(nxv_device *d, nxv_spv_module mod, uint32_t variant, pc_qr *pc,
                          uint32_t gx, uint64_t cost, nxv_tensor *const use[7]) {
  uint64_t height = d->vk.info.max_workgroup_count[1];
  nxv_status st = NXV_OK;
  for (uint64_t b0 = 0; st == NXV_OK && b0 < pc->batch; b0 += height) {
    uint32_t nb = (uint32_t)(pc->batch - b0 < height ? pc->batch - b0 : height);
    pc->b0 = (uint32_t)b0;
    st = qr_step(d, mod, variant, pc, gx, nb, nb * cost, use);
  }
  return st;
}

/* qr.comp's variant with a workgroup per matrix of pc's batch: up to the
 * grid's width along x, rows of that along y, further dispatches past the
 * grid's height; cost per matrix; use as push_grid takes it (nuse
 * tensors, those from first_write on written). */
static nxv_status qr_groups_use(nxv_device *d, nxv_spv_module mod, uint32_t variant, pc_qr *pc,
                                uint64_t cost, nxv_tensor *const *use, int nuse,
                                int first_write) {
  uint64_t width = d->vk.info.max_workgroup_count[0];
  uint64_t per = width * d->vk.info.max_workgroup_count[1];
  nxv_status st = NXV_OK;
  for (uint64_t b0 = 0; st == NXV_OK && b0 < pc->batch; b0 += per) {
    uint64_t nb = pc->batch - b0 < per ? pc->batch - b0 : per;
    uint32_t gx = (uint32_t)(nb < width ? nb : width);
    pc->b0 = (uint32_t)b0;
    st = push_grid(d, mod, variant, pc, sizeof *pc, gx, (uint32_t)((nb + gx - 1) / gx),
                   nb * cost, use, nuse, first_write);
  }
  return st;
}

/* qr_groups_use with qr_step's seven tensors (the last three written). */
static nxv_status qr_groups(nxv_device *d, nxv_spv_module mod, uint32_t variant, pc_qr *pc,
                            uint64_t cost, nxv_tensor *const use[7]) {
  return qr_groups_use(d, mod, variant, pc, cost, use, 7, 4);
}

nxv_status nxv_qr(nxv_device *d, nxv_tensor *a, uint64_t batch, uint64_t m, uint64_t n,
                  bool complete, double eps, nxv_tensor **out_q, nxv_tensor **out_r) {
  if (!d || !a || !out_q || !out_r) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "qr: NULL argument");
  if (a->device != d) return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "qr: tensor on another device");
  nxv_dtype t = a->dtype;
  NXV_TRY(linalg_check(d, t, "qr"));
  if (m != 0 && n != 0 && batch > UINT64_MAX / m / n)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "qr: %llu matrices of %llu x %llu overflow",
                    (unsigned long long)batch, (unsigned long long)m, (unsigned long long)n);
  if (batch * m * n != a->count)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "qr: tensor has %llu elements, %llu matrices of %llu x %llu need %llu",
                    (unsigned long long)a->count, (unsigned long long)batch,
                    (unsigned long long)m, (unsigned long long)n,
                    (unsigned long long)(batch * m * n));
  if (m > NXV_CHOLESKY_MAX_ORDER || n > NXV_CHOLESKY_MAX_ORDER || m * n > UINT32_MAX)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "qr: %llu x %llu matrices (at most %d rows and columns, "
                    "2^32 - 1 elements)", (unsigned long long)m, (unsigned long long)n,
                    NXV_CHOLESKY_MAX_ORDER);
  if (batch > UINT32_MAX)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "qr: %llu matrices (at most 2^32 - 1)",
                    (unsigned long long)batch);
  uint64_t k = m < n ? m : n;
  uint64_t qc = complete ? m : k, rr = complete ? m : k;
  /* Nx reflects columns 0 .. n - 2 of a square matrix. */
  uint64_t kr = m == n && n > 0 ? n - 1 : k;
  bool small = m <= QR_SMALL && n <= QR_SMALL;
  /* At most 8192 workgroups of columns: within every device's grid
   * (65535). */
  NXV_TRY(nxv_tensor_ready(a));
  bool wide = linalg_wide(d, t);
  nxv_dtype rt = wide ? NXV_F64 : t;
  nxv_tensor *q = NULL, *r = NULL, *work = NULL, *tau = NULL, *qw = NULL;
  nxv_status st = nxv_tensor_new(d, t, batch * m * qc, &q);
  if (st == NXV_OK) st = nxv_tensor_new(d, t, batch * rr * n, &r);
  /* Q is the identity where A has no elements but Q has (n = 0,
   * complete). */
  bool any = batch * m * (n > qc ? n : qc) != 0;
  if (st == NXV_OK && any) {
    st = nxv_tensor_new(d, rt, m && n ? batch * m * n : 1, &work);
    if (st == NXV_OK) st = nxv_tensor_new(d, rt, batch * (kr ? 2 * kr : 1), &tau);
    if (st == NXV_OK && wide) st = nxv_tensor_new(d, rt, batch * m * qc, &qw);
  }
  uint64_t bits = linalg_eps_bits(eps, !wide && t == NXV_F32);
  if (st == NXV_OK && any) {
    pc_qr pc = {.a = a->buf->addr, .q = q->buf->addr, .r = r->buf->addr,
                .work = work->buf->addr, .tau = tau->buf->addr,
                .qw = qw ? qw->buf->addr : q->buf->addr,
                .eps_lo = (uint32_t)bits, .eps_hi = (uint32_t)(bits >> 32),
                .m = (uint32_t)m, .n = (uint32_t)n, .qc = (uint32_t)qc, .rr = (uint32_t)rr,
                .kr = (uint32_t)kr, .batch = (uint32_t)batch};
    nxv_spv_module mod = wide ? NXV_SPV_QR_F32_WIDE : t == NXV_F32 ? NXV_SPV_QR_F32 : NXV_SPV_QR_F64;
    /* a first; the results and the workspace written. */
    nxv_tensor *use[7] = {a, NULL, NULL, NULL, work, tau, qw ? qw : q};
    nxv_tensor *out_use[7] = {work, tau, qw, NULL, q, r, NULL};
    uint64_t in = m * n > m * qc ? m * n : m * qc, outn = rr * n > m * qc ? rr * n : m * qc;
    pc.mode = 0;
    st = qr_rows(d, mod, 3, &pc, groups_capped(d, (in + 255) / 256), in, use);
    if (st == NXV_OK && small) {
      st = qr_groups(d, mod, 5, &pc, m * n * k * 4, use);
    } else if (st == NXV_OK) {
      if (kr) st = qr_groups(d, mod, 1, &pc, m, use);
      /* Reflection i applied to R's columns right of it (and to those
       * left of it whose reflection was the identity: a workgroup per
       * chunk of columns from 0, those with nothing to change returning at
       * once), the next computed beside. */
      for (uint64_t i = 0; st == NXV_OK && i < kr; i++) {
        pc.i = (uint32_t)i;
        st = qr_rows(d, mod, 2, &pc, (uint32_t)((n + QR_COLS - 1) / QR_COLS),
                     (m - i) * (n - i) * 2, use);
      }
      /* Q from the identity, reflections kr - 1 down to 0, as many a
       * dispatch as keep an invocation's loops within QR_LOOPS. */
      uint64_t groups = 256 / QR_COLS, loops = 2 * ((m + groups - 1) / groups) + groups + 8;
      uint64_t span = QR_LOOPS / loops ? QR_LOOPS / loops : 1;
      for (uint64_t hi = kr; st == NXV_OK && hi > 0;) {
        uint64_t lo = hi > span ? hi - span : 0;
        pc.i = (uint32_t)hi;
        pc.mode = (uint32_t)lo;
        st = qr_rows(d, mod, 4, &pc, (uint32_t)((qc + QR_COLS - 1) / QR_COLS),
                     m * qc * (hi - lo) * 2, use);
        hi = lo;
      }
    }
    pc.mode = 1;
    if (st == NXV_OK)
      st = qr_rows(d, mod, 3, &pc, groups_capped(d, (outn + 255) / 256), outn, out_use);
  }
  if (work) nxv_tensor_release(work); /* the nodes hold the buffers */
  if (tau) nxv_tensor_release(tau);
  if (qw) nxv_tensor_release(qw);
  if (st != NXV_OK) {
    if (q) nxv_tensor_release(q);
    if (r) nxv_tensor_release(r);
    return st;
  }
  *out_q = q;
  *out_r = r;
  return NXV_OK;
}

/* The most loop iterations an invocation of VARIANTS 6-8 runs a dispatch
 * on GPUs. */
#define EIGH_GPU_LOOPS 262144

/* The loop iterations of one eigh step an invocation runs, about (VARIANT
 * 6; the shared forms run fewer): each reflection's sum (32) and its
 * applications to R and Q (about 12 each), the products' n per entry, and
 * the copies. */
static uint64_t eigh_step_loops(uint64_t n) {
  uint64_t per = (n * n + 255) / 256;
  return (n ? n - 1 : 0) * 60 + per * (n + 8) + 16;
}

/* The loop iterations of the tridiagonal reduction an invocation runs,
 * about: per reflection its sum (32), two passes over k and two over its
 * share of the matrix. */
static uint64_t eigh_tri_loops(uint64_t n) {
  uint64_t per = (n * n + 255) / 256;
  return n * (40 + 2 * n + 2 * per);
}

/* qr.comp's variant for eigh's steps on matrices of order n of type t:
 * the smallest of VARIANTS 7 and 8 (R, Q' and the reflection scalars of a
 * step in shared memory, orders up to 32 and 48) whose shared memory the
 * device has, else 6 (all in device memory). The bytes mirror qr.comp's
 * declarations: red, red2, wsum and sqg, then sW and sQ (rows of order +
 * 1) and sT. On an H200 the shared forms (with each reflection's squares
 * taken during the update before it) took 11-24% less GPU time at orders
 * 8 to 32; a form for order 64 gained nothing, so none is built. */
static uint32_t qr_eigh_variant(const nxv_device *d, nxv_dtype t, uint64_t n) {
  static const uint32_t orders[2] = {32, 48};
  uint64_t rsize = t == NXV_F64 ? 8 : 4;
  for (uint32_t v = 0; v < 2; v++) {
    uint64_t sn = orders[v];
    uint64_t bytes = (256 + 16 + 64 + 4 + 2 * sn * (sn + 1) + 2 * sn) * rsize;
    if (n <= sn && bytes <= d->vk.info.max_shared_memory) return 7 + v;
  }
  return 6;
}

nxv_status nxv_eigh_iterate(nxv_device *d, nxv_tensor *a, nxv_tensor *q, uint64_t batch,
                            uint64_t n, uint64_t max_iter, double eps, nxv_tensor **out_a,
                            nxv_tensor **out_q) {
  if (!d || !a || !out_a || !out_q)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "eigh_iterate: NULL argument");
  /* Without q: A reduced to tridiagonal form first, Q from the identity. */
  bool tri = q == NULL;
  if (tri) q = a;
  if (a->device != d || q->device != d)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "eigh_iterate: tensor on another device");
  nxv_dtype t = a->dtype;
  NXV_TRY(linalg_check(d, t, "eigh_iterate"));
  if (q->dtype != t)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT, "eigh_iterate: A is %s and Q %s",
                    nxv_dtype_name(t), nxv_dtype_name(q->dtype));
  if (n > QR_SMALL)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "eigh_iterate: order %llu (at most %d)",
                    (unsigned long long)n, QR_SMALL);
  if (max_iter > NXV_EIGH_MAX_ITER)
    return nxv_fail(NXV_ERR_UNSUPPORTED, "eigh_iterate: max_iter %llu (at most %d)",
                    (unsigned long long)max_iter, NXV_EIGH_MAX_ITER);
  if (batch > UINT32_MAX || batch * n * n != a->count || batch * n * n != q->count)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "eigh_iterate: A has %llu and Q %llu elements, %llu matrices of order %llu "
                    "need %llu each (at most 2^32 - 1 matrices)",
                    (unsigned long long)a->count, (unsigned long long)q->count,
                    (unsigned long long)batch, (unsigned long long)n,
                    (unsigned long long)(batch * n * n));
  NXV_TRY(nxv_tensor_ready(a));
  NXV_TRY(nxv_tensor_ready(q));
  uint64_t kr = n ? n - 1 : 0, count = batch * n * n;
  nxv_tensor *ra = NULL, *rq = NULL, *work = NULL, *tau = NULL;
  uint32_t variant = qr_eigh_variant(d, t, n);
  /* qr.comp's eigh workspace (eigh_steps): 6 matrices per matrix for
   * VARIANT 6, 3 for the shared forms (R and Q' in shared memory, the
   * next A in A's place), then 4 n of scratch. */
  uint64_t work_mats = variant == 6 ? 6 : 3;
  nxv_status st = nxv_tensor_new(d, t, count, &ra);
  if (st == NXV_OK) st = nxv_tensor_new(d, t, count, &rq);
  if (st == NXV_OK && count)
    st = nxv_tensor_new(d, t, work_mats * count + 4 * batch * n, &work);
  if (st == NXV_OK && count) st = nxv_tensor_new(d, t, batch * (2 * kr + 1), &tau);
  if (st == NXV_OK && count) {
    uint64_t bits = linalg_eps_bits(eps, t == NXV_F32);
    pc_qr pc = {.a = a->buf->addr, .q = rq->buf->addr, .r = ra->buf->addr,
                .work = work->buf->addr, .tau = tau->buf->addr, .qw = q->buf->addr,
                .eps_lo = (uint32_t)bits, .eps_hi = (uint32_t)(bits >> 32),
                .m = (uint32_t)n, .n = (uint32_t)n, .qc = (uint32_t)n, .rr = (uint32_t)n,
                .kr = (uint32_t)kr, .batch = (uint32_t)batch};
    nxv_spv_module mod = t == NXV_F32 ? NXV_SPV_QR_F32 : NXV_SPV_QR_F64;
    /* On CPU devices as many steps a dispatch as keep an invocation's
     * loops within twice QR_LOOPS (llvmpipe ends them after 65535); on
     * GPUs within EIGH_GPU_LOOPS (at order 64 about 50 steps, a few ms a
     * matrix: no dispatch runs long enough for a display GPU's watchdog).
     * A stopped matrix returns at once. */
    uint64_t loops = eigh_step_loops(n), first = tri ? eigh_tri_loops(n) : 0;
    uint64_t span = (d->vk.info.type == NXV_DEVICE_CPU ? 2 * QR_LOOPS : EIGH_GPU_LOOPS) / loops;
    if (span == 0) span = 1;
    if (span > UINT32_MAX) span = UINT32_MAX;
    uint64_t steps = max_iter ? max_iter : 1;
    /* A and Q read; the results and the workspace written. */
    nxv_tensor *use[6] = {a, tri ? NULL : q, ra, rq, work, tau};
    /* On CPU devices the reduction shares the first dispatch's budget. */
    uint64_t budget = 2 * QR_LOOPS > first ? 2 * QR_LOOPS - first : 0;
    uint64_t first_span = d->vk.info.type == NXV_DEVICE_CPU && first ? budget / loops : span;
    if (first_span == 0) first_span = 1;
    for (uint64_t done = 0; st == NXV_OK && done < steps;) {
      uint64_t now = done == 0 ? first_span : span;
      if (now > steps - done) now = steps - done;
      pc.i = (uint32_t)now;
      pc.mode = (done == 0 ? (tri ? 5u : 1u) : 0u) | (done + now == steps ? 2u : 0u);
      st = qr_groups_use(d, mod, variant, &pc, n * n * n * 4 * now, use, 6, 2);
      done += now;
    }
  }
  if (work) nxv_tensor_release(work); /* the nodes hold the buffers */
  if (tau) nxv_tensor_release(tau);
  if (st != NXV_OK) {
    if (ra) nxv_tensor_release(ra);
    if (rq) nxv_tensor_release(rq);
    return st;
  }
  *out_a = ra;
  *out_q = rq;
  return NXV_OK;
}
