/*
 * Fused elementwise programs (nxv_fused): random programs over every float
 * type and input layout, checked bitwise against the same ops run
 * one kernel each (nxv_unary, nxv_binary, nxv_compare, nxv_select,
 * nxv_convert), a fixed program against a long double reference, edge
 * shapes, the per-program pipeline cache and argument validation.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "test.h"

static const nxv_dtype kFusedTypes[4] = {NXV_F32, NXV_F64, NXV_F16, NXV_BF16};

static void set_f(nxv_dtype t, void *p, uint64_t i, double v) {
  size_t es = nxv_dtype_size(t);
  uint64_t bits = nxv_test_encode(t, (nxv_test_val){.f = v});
  memcpy((unsigned char *)p + i * es, &bits, es);
}

/* Bitwise equal, any NaN matching any NaN. */
static bool same(nxv_dtype t, const void *a, const void *b, uint64_t i) {
  size_t es = nxv_dtype_size(t);
  double x = nxv_test_float_at(t, a, i), y = nxv_test_float_at(t, b, i);
  if (isnan(x) || isnan(y)) return isnan(x) && isnan(y);
  return memcmp((const unsigned char *)a + i * es, (const unsigned char *)b + i * es, es) == 0;
}

/* Ops the random programs draw from: valid for every float type on a
 * device with or without f64 (no special functions). */
static const nxv_unary_op kUn[] = {NXV_NEG, NXV_ABS, NXV_EXP, NXV_LOG, NXV_SQRT,
                                   NXV_TANH, NXV_SIGMOID, NXV_SQUARE, NXV_FLOOR,
                                   NXV_SIGN, NXV_RSQRT, NXV_SIN};
static const nxv_binary_op kBin[] = {NXV_ADD, NXV_SUB, NXV_MUL, NXV_DIV,
                                     NXV_MAX, NXV_MIN, NXV_POW, NXV_REM};
static const nxv_compare_op kCmp[] = {NXV_EQUAL, NXV_NOT_EQUAL, NXV_LESS,
                                      NXV_GREATER_EQUAL, NXV_LOGICAL_AND,
                                      NXV_LOGICAL_XOR};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Literals of the float programs: f16 bits of zeros, ones, halves, the
 * smallest normal f16, the largest, 1/3 (inexact in bf16) and others. */
static const uint16_t kFloatLits[] = {0x0000, 0x8000, 0x3C00, 0xBC00, 0x3800, 0x4000,
                                      0x5640, 0x0400, 0x7BFF, 0x3555, 0xC248};

/* A random literal for a program of type t: a float one of kFloatLits, an
 * integer one small (a shift amount), negative or of any 16 bits. */
static uint16_t random_literal(uint64_t *rng, nxv_dtype t) {
  bool is_float = t == NXV_F16 || t == NXV_BF16 || t == NXV_F32 || t == NXV_F64;
  if (is_float) return kFloatLits[test_rand_u64(rng) % COUNT(kFloatLits)];
  switch (test_rand_u64(rng) % 3) {
    case 0: return (uint16_t)(test_rand_u64(rng) % 40);
    case 1: return (uint16_t)(-(int)(test_rand_u64(rng) % 40) - 1);
    default: return (uint16_t)test_rand_u64(rng);
  }
}

/* A random instruction over regs registers of a program of type t: a
 * unary op of un (nun), a binary op of bin (nbin), a comparison or a
 * select; a quarter of the binary ops and comparisons take a literal. */
static uint32_t random_instr(uint64_t *rng, nxv_dtype t, uint32_t regs,
                             const nxv_unary_op *un, int nun, const nxv_binary_op *bin,
                             int nbin) {
  int cls = (int)(test_rand_u64(rng) % 10);
  cls = cls < 3 ? 0 : cls < 7 ? 1 : cls < 9 ? 2 : 3;
  uint32_t a = (uint32_t)(test_rand_u64(rng) % regs);
  uint32_t b = (uint32_t)(test_rand_u64(rng) % regs);
  uint32_t c = (uint32_t)(test_rand_u64(rng) % regs);
  bool lit = test_rand_u64(rng) % 4 == 0;
  /* Mostly read the latest registers, so programs are chains. */
  if (test_rand_u64(rng) % 2) a = regs - 1;
  switch (cls) {
    case 0: return NXV_FUSED_INSTR(0, un[test_rand_u64(rng) % (uint64_t)nun], a, 0, 0);
    case 1: {
      uint32_t op = bin[test_rand_u64(rng) % (uint64_t)nbin];
      return lit ? NXV_FUSED_INSTR_LIT(1, op, a, random_literal(rng, t))
                 : NXV_FUSED_INSTR(1, op, a, b, 0);
    }
    case 2: {
      uint32_t op = kCmp[test_rand_u64(rng) % COUNT(kCmp)];
      return lit ? NXV_FUSED_INSTR_LIT(2, op, a, random_literal(rng, t))
                 : NXV_FUSED_INSTR(2, op, a, b, 0);
    }
    default: return NXV_FUSED_INSTR(3, 0, a, b, c);
  }
}

/* A one-element tensor of type t holding literal l's value (nxv_fused in
 * nxv.h: for float types the f16 number rounded to t, bf16 truncating). */
static nxv_tensor *literal_tensor(nxv_device *d, nxv_dtype t, uint32_t l) {
  unsigned char bits[8] = {0};
  bool is_float = t == NXV_F16 || t == NXV_BF16 || t == NXV_F32 || t == NXV_F64;
  if (is_float) {
    set_f(t, bits, 0, nxv_test_f16_value((uint16_t)l));
  } else {
    uint64_t v = (t == NXV_S32 || t == NXV_S64) ? (uint64_t)(int64_t)(int16_t)l : l;
    memcpy(bits, &v, sizeof v); /* little-endian: the low bytes */
  }
  nxv_tensor *x = NULL;
  CHECK_OK(nxv_tensor_upload(d, t, 1, bits, &x));
  return x;
}

/* The program run one op at a time. regs[k] is a view per register; a
 * register holding a comparison is a u8 tensor (is_pred), converted to t
 * where arithmetic reads it, and an arithmetic value read as a select
 * predicate is compared not_equal to zero. Returns the last register's
 * tensor (caller releases) or NULL after a failed check. */
static nxv_tensor *run_unfused(nxv_device *d, nxv_dtype t, uint32_t rank,
                               const int64_t *shape, uint32_t nin,
                               const nxv_view *in, uint32_t nins,
                               const uint32_t *prog, nxv_tensor *zero) {
  nxv_view regs[NXV_FUSED_MAX_INPUTS + NXV_FUSED_MAX_INSTRS];
  bool pred[NXV_FUSED_MAX_INPUTS + NXV_FUSED_MAX_INSTRS] = {0};
  nxv_tensor *owned[4 * (NXV_FUSED_MAX_INPUTS + NXV_FUSED_MAX_INSTRS)];
  int nowned = 0;
  int64_t zstrides[NXV_MAX_RANK] = {0};
  nxv_view vzero = {zero, 0, zstrides};
  for (uint32_t k = 0; k < nin; k++) regs[k] = in[k];
  nxv_tensor *result = NULL;
  bool ok = true;
  for (uint32_t k = 0; k < nins && ok; k++) {
    uint32_t w = prog[k], cls = NXV_FUSED_CLASS(w), op = NXV_FUSED_OP(w);
    uint32_t ops[3] = {NXV_FUSED_A(w), NXV_FUSED_B(w), NXV_FUSED_C(w)};
    nxv_view arg[3];
    if (NXV_FUSED_HAS_LIT(w)) {
      /* A literal: the second operand, a broadcast one-element tensor. */
      nxv_tensor *l = literal_tensor(d, t, NXV_FUSED_LIT(w));
      ok = l != NULL;
      if (!ok) break;
      owned[nowned++] = l;
      arg[1] = (nxv_view){l, 0, zstrides};
      ops[1] = ops[2] = 0;
    }
    for (int o = 0; o < 3 && ok; o++) {
      if (o == 1 && NXV_FUSED_HAS_LIT(w)) continue;
      arg[o] = regs[ops[o]];
      bool want_pred = cls == 3 && o == 0;
      if (pred[ops[o]] && !want_pred) {
        nxv_tensor *c;
        ok = nxv_convert(d, t, rank, shape, &arg[o], &c) == NXV_OK;
        if (ok) {
          owned[nowned++] = c;
          arg[o] = (nxv_view){c, 0, NULL};
        }
      } else if (!pred[ops[o]] && want_pred) {
        nxv_tensor *c;
        ok = nxv_compare(d, NXV_NOT_EQUAL, rank, shape, &arg[o], &vzero, &c) == NXV_OK;
        if (ok) {
          owned[nowned++] = c;
          arg[o] = (nxv_view){c, 0, NULL};
        }
      }
    }
    nxv_tensor *r = NULL;
    if (ok) {
      nxv_status st;
      switch (cls) {
        case 0: st = nxv_unary(d, (nxv_unary_op)op, rank, shape, &arg[0], &r); break;
        case 1: st = nxv_binary(d, (nxv_binary_op)op, rank, shape, &arg[0], &arg[1], &r); break;
        case 2: st = nxv_compare(d, (nxv_compare_op)op, rank, shape, &arg[0], &arg[1], &r); break;
        default: st = nxv_select(d, rank, shape, &arg[0], &arg[1], &arg[2], &r); break;
      }
      CHECK_OK(st);
      ok = st == NXV_OK;
    }
    if (ok) {
      owned[nowned++] = r;
      regs[nin + k] = (nxv_view){r, 0, NULL};
      pred[nin + k] = cls == 2;
      if (k + 1 == nins) {
        if (pred[nin + k]) {
          ok = nxv_convert(d, t, rank, shape, &regs[nin + k], &result) == NXV_OK;
        } else {
          result = r;
          nxv_tensor_retain(r);
        }
      }
    }
  }
  for (int i = 0; i < nowned; i++) nxv_tensor_release(owned[i]);
  return ok ? result : NULL;
}

/* Input layouts over a {rows, cols} output: 0 dense, 1 a broadcast scalar,
 * 2 a row vector broadcast down the rows, 3 a column vector broadcast
 * along the rows, 4 the transpose of a {cols, rows} tensor, 5 a dense
 * view at an offset: layout_count elements of data, and the view over
 * them (layout_view; its strides in strides[2]). */
static uint64_t layout_count(int lay, int64_t rows, int64_t cols) {
  switch (lay) {
    case 1: return 3;
    case 2: return (uint64_t)cols;
    case 3: return (uint64_t)rows;
    case 5: return (uint64_t)(rows * cols + 5);
    default: return (uint64_t)(rows * cols);
  }
}

static void layout_view(int lay, nxv_tensor *tensor, int64_t rows, int64_t strides[2],
                        nxv_view *v) {
  *v = (nxv_view){tensor, 0, strides};
  switch (lay) {
    case 1: strides[0] = strides[1] = 0; v->offset = 2; break;
    case 2: strides[0] = 0; strides[1] = 1; break;
    case 3: strides[0] = 1; strides[1] = 0; break;
    case 4: strides[0] = 1; strides[1] = rows; break;
    case 5: v->strides = NULL; v->offset = 5; break;
    default: v->strides = NULL; break;
  }
}

/* prog over in with every broadcast scalar input (strides all 0) passed
 * as an immediate instead (nxv_fused_imm, its element's bits downloaded
 * from its view): a new tensor, or NULL when no input is such a scalar. */
static nxv_tensor *run_with_immediates(nxv_device *d, nxv_dtype t, const int64_t shape[2],
                                       uint32_t nin, const nxv_view *in, uint32_t nins,
                                       const uint32_t *prog) {
  nxv_view views[NXV_FUSED_MAX_INPUTS];
  uint64_t bits[NXV_FUSED_MAX_INPUTS] = {0};
  uint32_t mask = 0;
  for (uint32_t k = 0; k < nin; k++) {
    views[k] = in[k];
    if (!in[k].strides || in[k].strides[0] != 0 || in[k].strides[1] != 0) continue;
    unsigned char e[8] = {0};
    CHECK_OK(nxv_tensor_download(in[k].tensor, (uint64_t)in[k].offset, 1, e));
    memcpy(&bits[k], e, sizeof e); /* little-endian: the low bytes */
    views[k] = (nxv_view){NULL, 0, NULL};
    mask |= 1u << k;
  }
  if (!mask) return NULL;
  nxv_tensor *out = NULL;
  CHECK_OK(nxv_fused_imm(d, t, 2, shape, nin, views, mask, bits, nins, prog, &out));
  return out;
}

/* Runs prog fused and one op at a time over in on a {rows, cols} output
 * and checks the results bitwise (same()), and the fused program with its
 * broadcast scalars as immediates too; counts the program and the
 * elements compared. */
static void check_program(nxv_device *d, nxv_dtype t, int trial, int64_t rows, int64_t cols,
                          uint32_t nin, const nxv_view *in, uint32_t nins,
                          const uint32_t *prog, nxv_tensor *zero, int *programs,
                          int *compared) {
  int64_t shape[2] = {rows, cols}, n = rows * cols;
  nxv_tensor *fused = NULL;
  nxv_status st = nxv_fused(d, t, 2, shape, nin, in, nins, prog, &fused);
  CHECK_OK(st);
  nxv_tensor *imm = run_with_immediates(d, t, shape, nin, in, nins, prog);
  nxv_tensor *ref = run_unfused(d, t, 2, shape, nin, in, nins, prog, zero);
  CHECK(ref != NULL);
  /* The prepared program, run three times (its memo written by the first
   * run, read by the others), gives the fused result bitwise. */
  nxv_fused_program *fp = NULL;
  CHECK_OK(nxv_fused_program_create(t, nin, nins, prog, &fp));
  for (int run = 0; fp && fused && run < 3; run++) {
    nxv_tensor *again = NULL;
    CHECK_OK(nxv_fused_run(d, fp, 2, shape, in, 0, NULL, &again));
    if (!again) break;
    size_t bytes = (size_t)n * nxv_dtype_size(t);
    unsigned char *a = test_xcalloc(bytes + 1, 1), *b = test_xcalloc(bytes + 1, 1);
    memset(a, 0xA5, bytes);
    CHECK_OK(nxv_tensor_download(again, 0, (uint64_t)n, a));
    CHECK_OK(nxv_tensor_download(fused, 0, (uint64_t)n, b));
    CHECK_MSG(memcmp(a, b, bytes) == 0, "%s trial %d: prepared run %d differs from nxv_fused",
              nxv_dtype_name(t), trial, run);
    free(a);
    free(b);
    nxv_tensor_release(again);
  }
  nxv_fused_program_free(fp);
  if (st == NXV_OK && ref) {
    (*programs)++;
    size_t es = nxv_dtype_size(t);
    unsigned char *got = test_xcalloc((size_t)n, es), *want = test_xcalloc((size_t)n, es);
    unsigned char *got_imm = test_xcalloc((size_t)n, es);
    CHECK_OK(nxv_tensor_download(fused, 0, (uint64_t)n, got));
    CHECK_OK(nxv_tensor_download(ref, 0, (uint64_t)n, want));
    if (imm) CHECK_OK(nxv_tensor_download(imm, 0, (uint64_t)n, got_imm));
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
      (*compared)++;
      if (imm && memcmp(got + i * es, got_imm + i * es, es) != 0 && bad++ < 3)
        CHECK_MSG(false, "%s trial %d [%lld]: immediates give %.9g, views %.9g",
                  nxv_dtype_name(t), trial, (long long)i,
                  nxv_test_float_at(t, got_imm, (uint64_t)i),
                  nxv_test_float_at(t, got, (uint64_t)i));
      if (!same(t, got, want, (uint64_t)i) && bad++ < 3) {
        uint64_t g = 0, w = 0;
        memcpy(&g, got + i * es, es);
        memcpy(&w, want + i * es, es);
        CHECK_MSG(false, "%s trial %d (%u inputs, %u instrs, first 0x%06x) [%lld]: "
                  "fused %.9g (0x%llx), one by one %.9g (0x%llx)", nxv_dtype_name(t), trial,
                  nin, nins, prog[0], (long long)i, nxv_test_float_at(t, got, (uint64_t)i),
                  (unsigned long long)g, nxv_test_float_at(t, want, (uint64_t)i),
                  (unsigned long long)w);
      }
    }
    free(got);
    free(want);
    free(got_imm);
  }
  if (fused) nxv_tensor_release(fused);
  if (imm) nxv_tensor_release(imm);
  if (ref) nxv_tensor_release(ref);
}

/* Input element i of type t in host, drawn from rng. */
typedef void (*fill_fn)(nxv_dtype t, unsigned char *host, uint64_t i, uint64_t *rng);

/* Values near 1 keep float chains finite; some zeros and negatives
 * exercise the special cases. */
static void fill_float(nxv_dtype t, unsigned char *host, uint64_t i, uint64_t *rng) {
  double v = test_rand_uniform(rng, -2.0, 2.0);
  if (test_rand_u64(rng) % 16 == 0) v = 0;
  set_f(t, host, i, v);
}

/* Integers of every magnitude, small ones (shift amounts, either sign)
 * and zeros. */
static void fill_int(nxv_dtype t, unsigned char *host, uint64_t i, uint64_t *rng) {
  size_t es = nxv_dtype_size(t);
  uint64_t v = test_rand_u64(rng);
  int kind = (int)(v % 4);
  v = test_rand_u64(rng);
  if (kind == 0) v = v % 80 - 40;
  if (kind == 1) v = 0;
  memcpy(host + i * es, &v, es); /* little-endian: the low bytes */
}

/* One trial: a random program of un/bin ops over 1 to 12 inputs of random
 * layouts (fill draws their elements) on one of four output shapes,
 * checked by check_program. */
static void random_trial(nxv_device *d, nxv_dtype t, int trial, uint64_t *rng,
                         const nxv_unary_op *un, int nun, const nxv_binary_op *bin, int nbin,
                         fill_fn fill, nxv_tensor *zero, int *programs, int *compared) {
  static const int64_t kShapes[][2] = {{1, 1}, {7, 13}, {64, 33}, {3, 515}};
  const int64_t *sh = kShapes[trial % 4];
  int64_t rows = sh[0], cols = sh[1];
  uint32_t nin = 1 + (uint32_t)(test_rand_u64(rng) % NXV_FUSED_MAX_INPUTS);
  uint32_t nins = 1 + (uint32_t)(test_rand_u64(rng) % NXV_FUSED_MAX_INSTRS);
  uint32_t prog[NXV_FUSED_MAX_INSTRS];
  for (uint32_t k = 0; k < nins; k++)
    prog[k] = random_instr(rng, t, nin + k, un, nun, bin, nbin);
  nxv_tensor *tin[NXV_FUSED_MAX_INPUTS];
  nxv_view in[NXV_FUSED_MAX_INPUTS];
  int64_t strides[NXV_FUSED_MAX_INPUTS][2];
  for (uint32_t k = 0; k < nin; k++) {
    int lay = (int)(test_rand_u64(rng) % 6);
    uint64_t count = layout_count(lay, rows, cols);
    unsigned char *host = test_xcalloc(count, nxv_dtype_size(t));
    for (uint64_t i = 0; i < count; i++) fill(t, host, i, rng);
    nxv_status st = nxv_tensor_upload(d, t, count, host, &tin[k]);
    free(host);
    CHECK_OK(st);
    if (st != NXV_OK) {
      for (uint32_t j = 0; j < k; j++) nxv_tensor_release(tin[j]);
      return;
    }
    layout_view(lay, tin[k], rows, strides[k], &in[k]);
  }
  check_program(d, t, trial, rows, cols, nin, in, nins, prog, zero, programs, compared);
  for (uint32_t k = 0; k < nin; k++) nxv_tensor_release(tin[k]);
}

NXV_TEST(fused, random_programs_match_unfused_ops) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  nxv_device_info info;
  REQUIRE_OK(nxv_device_info_get(d, &info));
  uint64_t rng = 0xF05ED;
  int programs = 0, compared = 0;
  for (int ti = 0; ti < 4; ti++) {
    nxv_dtype t = kFusedTypes[ti];
    if (t == NXV_F64 && !info.float64) continue;
    if ((t == NXV_F16 || t == NXV_BF16) && !info.storage_16bit) continue;
    nxv_tensor *zero;
    double zv = 0;
    unsigned char zbits[8];
    set_f(t, zbits, 0, zv);
    REQUIRE_OK(nxv_tensor_upload(d, t, 1, zbits, &zero));
    for (int trial = 0; trial < 6; trial++)
      random_trial(d, t, trial, &rng, kUn, COUNT(kUn), kBin, COUNT(kBin), fill_float, zero,
                   &programs, &compared);
    nxv_tensor_release(zero);
  }
  CHECK(programs >= 8);
  printf("  %d programs, %d elements compared\n", programs, compared);
  nxv_device_release(d);
}

/* Integer programs: the ops that keep an integer type, drawn at random,
 * on values of every magnitude and small ones (shift amounts, zeros,
 * negatives), bitwise against the same ops one kernel each. */
static const nxv_unary_op kIntUn[] = {NXV_NEG, NXV_ABS, NXV_SIGN, NXV_BITWISE_NOT,
                                      NXV_SQUARE, NXV_CLZ, NXV_POPCOUNT, NXV_COPY};
static const nxv_binary_op kIntBin[] = {
    NXV_ADD,         NXV_SUB,        NXV_MUL,         NXV_MAX,        NXV_MIN,
    NXV_BITWISE_AND, NXV_BITWISE_OR, NXV_BITWISE_XOR, NXV_LEFT_SHIFT, NXV_RIGHT_SHIFT,
    NXV_QUOTIENT,    NXV_REM};

NXV_TEST(fused, integer_programs_match_unfused_ops) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  static const nxv_dtype kInts[4] = {NXV_S32, NXV_S64, NXV_U32, NXV_U64};
  uint64_t rng = 0x1A7E6E5;
  int programs = 0, compared = 0;
  for (int ti = 0; ti < 4; ti++) {
    nxv_dtype t = kInts[ti];
    nxv_tensor *zero;
    uint64_t zbits = 0;
    REQUIRE_OK(nxv_tensor_upload(d, t, 1, &zbits, &zero));
    for (int trial = 0; trial < 8; trial++)
      random_trial(d, t, trial, &rng, kIntUn, COUNT(kIntUn), kIntBin, COUNT(kIntBin), fill_int,
                   zero, &programs, &compared);
    nxv_tensor_release(zero);
  }
  CHECK(programs >= 24);
  printf("  %d programs, %d elements compared\n", programs, compared);

  /* A unary op that leaves the integer type is refused. */
  nxv_tensor *x;
  int32_t one = 1;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_S32, 1, &one, &x));
  nxv_view vx = {x, 0, NULL};
  uint32_t exp_prog[1] = {NXV_FUSED_INSTR(0, NXV_EXP, 0, 0, 0)};
  nxv_tensor *bad = NULL;
  CHECK(nxv_fused(d, NXV_S32, 0, NULL, 1, &vx, 1, exp_prog, &bad) == NXV_ERR_UNSUPPORTED);
  CHECK(bad == NULL);
  nxv_tensor_release(x);
  nxv_device_release(d);
}

/* Every literal of kFloatLits (float types) and a set of integer ones
 * (either sign, shift amounts, all 16 bits set) as the second operand of
 * each binary op and a comparison, on every type: bitwise what the op
 * computes with a broadcast one-element tensor of the literal's value
 * (for bf16, 1/3 truncated), and a chain of 64 instructions, half of them
 * literals, the same way. */
NXV_TEST(fused, literals_match_broadcast_constants) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  nxv_device_info info;
  REQUIRE_OK(nxv_device_info_get(d, &info));
  static const nxv_dtype kTypes[8] = {NXV_F32, NXV_F64, NXV_F16, NXV_BF16,
                                      NXV_S32, NXV_S64, NXV_U32, NXV_U64};
  static const uint16_t kIntLits[] = {0, 1, 5, 13, 31, 32, 0xFFFF, 0xFFF0, 0x8000, 0x7FFF};
  static const nxv_binary_op kIntOps[] = {NXV_ADD, NXV_SUB, NXV_MUL, NXV_RIGHT_SHIFT,
                                          NXV_LEFT_SHIFT, NXV_BITWISE_XOR, NXV_MAX, NXV_MIN};
  static const nxv_binary_op kFloatOps[] = {NXV_ADD, NXV_SUB, NXV_MUL, NXV_DIV, NXV_MAX,
                                            NXV_MIN};
  uint64_t rng = 0x11733A1;
  int programs = 0, compared = 0;
  for (int ti = 0; ti < 8; ti++) {
    nxv_dtype t = kTypes[ti];
    if (t == NXV_F64 && !info.float64) continue;
    if ((t == NXV_F16 || t == NXV_BF16) && !info.storage_16bit) continue;
    bool is_float = ti < 4;
    const uint16_t *lits = is_float ? kFloatLits : kIntLits;
    int nlits = is_float ? COUNT(kFloatLits) : COUNT(kIntLits);
    const nxv_binary_op *ops = is_float ? kFloatOps : kIntOps;
    int nops = is_float ? COUNT(kFloatOps) : COUNT(kIntOps);
    enum { ROWS = 3, COLS = 37 };
    size_t es = nxv_dtype_size(t);
    unsigned char *host = test_xcalloc(ROWS * COLS, es);
    for (uint64_t i = 0; i < ROWS * COLS; i++) {
      if (is_float) fill_float(t, host, i, &rng);
      else fill_int(t, host, i, &rng);
    }
    if (is_float) set_f(t, host, 1, -0.0); /* a negative zero */
    nxv_tensor *x, *zero;
    REQUIRE_OK(nxv_tensor_upload(d, t, ROWS * COLS, host, &x));
    free(host);
    uint64_t zbits = 0;
    REQUIRE_OK(nxv_tensor_upload(d, t, 1, &zbits, &zero));
    nxv_view in = {x, 0, NULL};
    for (int li = 0; li < nlits; li++) {
      for (int oi = 0; oi <= nops; oi++) {
        uint32_t w = oi < nops ? NXV_FUSED_INSTR_LIT(NXV_FUSED_BINARY, ops[oi], 0, lits[li])
                               : NXV_FUSED_INSTR_LIT(NXV_FUSED_COMPARE, NXV_LESS, 0, lits[li]);
        check_program(d, t, li, ROWS, COLS, 1, &in, 1, &w, zero, &programs, &compared);
      }
    }
    uint32_t chain[NXV_FUSED_MAX_INSTRS];
    for (uint32_t k = 0; k < NXV_FUSED_MAX_INSTRS; k++) {
      uint16_t l = lits[test_rand_u64(&rng) % (uint64_t)nlits];
      nxv_binary_op op = is_float ? (k % 2 ? NXV_ADD : NXV_MUL) : ops[k % (uint32_t)nops];
      if (!is_float && op == NXV_MUL) l = 3;
      chain[k] = k % 2 ? NXV_FUSED_INSTR_LIT(NXV_FUSED_BINARY, op, k, l)
                       : NXV_FUSED_INSTR(NXV_FUSED_BINARY, op, k, k ? k - 1 : 0, 0);
    }
    check_program(d, t, 99, ROWS, COLS, 1, &in, NXV_FUSED_MAX_INSTRS, chain, zero, &programs,
                  &compared);
    if (is_float) {
      /* The interpreting kernel (deferred ops) reads literals too: the
       * first NXV_OPS_INTERP_MAX_INSTRS words of the chain (basic ops)
       * give the specialized pipeline's bits; the whole chain is too long
       * for it. */
      int64_t shape[2] = {ROWS, COLS};
      nxv_tensor *spec = NULL, *interp = NULL;
      CHECK_OK(nxv_fused(d, t, 2, shape, 1, &in, NXV_OPS_INTERP_MAX_INSTRS, chain, &spec));
      CHECK_OK(nxv_ops_fused(d, t, 2, shape, 1, &in, 0, NULL, NXV_OPS_INTERP_MAX_INSTRS, chain,
                             true, &interp));
      if (spec && interp) {
        unsigned char *a = test_xcalloc(ROWS * COLS, es), *b = test_xcalloc(ROWS * COLS, es);
        CHECK_OK(nxv_tensor_download(spec, 0, ROWS * COLS, a));
        CHECK_OK(nxv_tensor_download(interp, 0, ROWS * COLS, b));
        for (uint64_t i = 0; i < ROWS * COLS; i++)
          CHECK_MSG(same(t, a, b, i), "%s [%llu]: interpreted %.9g, specialized %.9g",
                    nxv_dtype_name(t), (unsigned long long)i, nxv_test_float_at(t, b, i),
                    nxv_test_float_at(t, a, i));
        free(a);
        free(b);
      }
      if (spec) nxv_tensor_release(spec);
      if (interp) nxv_tensor_release(interp);
      nxv_tensor *out = NULL;
      EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out,
                  nxv_ops_fused(d, t, 2, shape, 1, &in, 0, NULL, NXV_FUSED_MAX_INSTRS, chain,
                                true, &out));
    }
    nxv_tensor_release(x);
    nxv_tensor_release(zero);
  }
  CHECK(programs >= 4 * (COUNT(kFloatLits) * 7 + 1));
  printf("  %d programs, %d elements compared\n", programs, compared);
  nxv_device_release(d);
}

/* A ReLU gradient as Nx's grad of max(x, 0) writes it, and an SGD step:
 *   g * (x == m ? 1 : 0) / ((x == m ? 1 : 0) + (m == 0 ? 1 : 0))
 * with m = max(x, 0), then w - 0.01 * that, against long double. */
NXV_TEST(fused, relu_gradient_and_update_against_reference) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  enum { R = 37, C = 129, N = R * C };
  uint64_t rng = 0x5EED;
  float *x = test_xcalloc(N, 4), *g = test_xcalloc(N, 4), *w = test_xcalloc(C, 4), *got = test_xcalloc(N, 4);
  for (int i = 0; i < N; i++) {
    x[i] = (float)test_rand_uniform(&rng, -1, 1);
    if (i % 7 == 0) x[i] = 0;
    g[i] = (float)test_rand_uniform(&rng, -1, 1);
  }
  for (int i = 0; i < C; i++) w[i] = (float)test_rand_uniform(&rng, -1, 1);
  float consts[3] = {0.0f, 1.0f, 0.01f};
  nxv_tensor *tx, *tg, *tw, *tc;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, N, x, &tx));
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, N, g, &tg));
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, C, w, &tw));
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, 3, consts, &tc));
  int64_t shape[2] = {R, C}, bcast[2] = {0, 1}, scalar[2] = {0, 0};
  /* r0 x, r1 g, r2 w (a row), r3 zero, r4 one, r5 0.01 */
  nxv_view in[6] = {{tx, 0, NULL}, {tg, 0, NULL}, {tw, 0, bcast},
                    {tc, 0, scalar}, {tc, 1, scalar}, {tc, 2, scalar}};
  const uint32_t prog[] = {
      NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_MAX, 0, 3, 0),          /* r6 m */
      NXV_FUSED_INSTR(NXV_FUSED_COMPARE, NXV_EQUAL, 0, 6, 0),       /* r7 */
      NXV_FUSED_INSTR(NXV_FUSED_SELECT, 0, 7, 4, 3),                /* r8 */
      NXV_FUSED_INSTR(NXV_FUSED_COMPARE, NXV_EQUAL, 3, 6, 0),       /* r9 */
      NXV_FUSED_INSTR(NXV_FUSED_SELECT, 0, 9, 4, 3),                /* r10 */
      NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_ADD, 8, 10, 0),         /* r11 */
      NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_DIV, 8, 11, 0),         /* r12 */
      NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_MUL, 1, 12, 0),         /* r13 */
      NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_MUL, 5, 13, 0),         /* r14 */
      NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_SUB, 2, 14, 0),         /* r15 */
  };
  nxv_tensor *out;
  REQUIRE_OK(nxv_fused(d, NXV_F32, 2, shape, 6, in, 10, prog, &out));
  REQUIRE_OK(nxv_tensor_download(out, 0, N, got));
  int bad = 0;
  for (int i = 0; i < N && bad < 4; i++) {
    long double xi = x[i], m = xi > 0 ? xi : 0;
    long double a = xi == m ? 1 : 0, b = m == 0 ? 1 : 0;
    float grad = (float)(g[i] * (float)(a / (a + b)));
    float want = w[i % C] - (float)(0.01f * grad);
    if (got[i] != want) {
      bad++;
      CHECK_MSG(false, "[%d] x %g: got %.9g, want %.9g", i, (double)x[i], (double)got[i],
                (double)want);
    }
  }
  nxv_tensor_release(out);
  nxv_tensor_release(tx);
  nxv_tensor_release(tg);
  nxv_tensor_release(tw);
  nxv_tensor_release(tc);
  free(x);
  free(g);
  free(w);
  free(got);
  nxv_device_release(d);
}

NXV_TEST(fused, edge_shapes_and_pipeline_reuse) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  float vals[64];
  for (int i = 0; i < 64; i++) vals[i] = (float)i - 20.5f;
  nxv_tensor *t;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, 64, vals, &t));
  const uint32_t prog[] = {NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_MUL, 0, 0, 0),
                           NXV_FUSED_INSTR(NXV_FUSED_UNARY, NXV_NEG, 1, 0, 0)};
  nxv_view v = {t, 0, NULL};
  /* rank 0: one element */
  nxv_tensor *out;
  nxv_view v0 = {t, 3, NULL};
  REQUIRE_OK(nxv_fused(d, NXV_F32, 0, NULL, 1, &v0, 2, prog, &out));
  float got[64];
  REQUIRE_OK(nxv_tensor_download(out, 0, 1, got));
  CHECK(got[0] == -(vals[3] * vals[3]));
  nxv_tensor_release(out);
  /* empty */
  int64_t empty[3] = {4, 0, 2};
  REQUIRE_OK(nxv_fused(d, NXV_F32, 3, empty, 1, &v, 2, prog, &out));
  CHECK(nxv_tensor_count(out) == 0);
  nxv_tensor_release(out);
  /* rank 6 with a reversed axis (strided, through the arena) */
  int64_t shape6[6] = {2, 1, 2, 2, 2, 4}, strides6[6] = {32, 0, 16, 8, 4, -1};
  nxv_view vr = {t, 3, strides6};
  for (int rep = 0; rep < 2; rep++) {
    /* The program's pipeline is made by the first call only (its
     * creation starts in the call: pipeline_misses). */
    nxv_stats before, after;
    REQUIRE_OK(nxv_device_stats(d, &before));
    REQUIRE_OK(nxv_fused(d, NXV_F32, 6, shape6, 1, &vr, 2, prog, &out));
    REQUIRE_OK(nxv_device_stats(d, &after));
    CHECK_MSG(after.pipeline_misses - before.pipeline_misses == (rep == 0 ? 1u : 0u),
              "call %d made %llu pipelines", rep,
              (unsigned long long)(after.pipeline_misses - before.pipeline_misses));
    REQUIRE_OK(nxv_tensor_download(out, 0, 64, got));
    for (int i = 0; i < 64; i++) {
      int src = (i / 4) * 4 + 3 - (i % 4);
      float want = -(vals[src] * vals[src]);
      if (got[i] != want) {
        CHECK_MSG(false, "rank 6 [%d]: got %g, want %g", i, (double)got[i], (double)want);
        break;
      }
    }
    nxv_tensor_release(out);
  }
  nxv_tensor_release(t);
  nxv_device_release(d);
}

NXV_TEST(fused, bad_arguments_fail_cleanly) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  float vals[8] = {0};
  int32_t ivals[8] = {0};
  nxv_tensor *t, *ti, *out;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, 8, vals, &t));
  REQUIRE_OK(nxv_tensor_upload(d, NXV_S32, 8, ivals, &ti));
  int64_t shape[1] = {8}, big[1] = {9};
  nxv_view v = {t, 0, NULL}, vi = {ti, 0, NULL};
  nxv_view many[NXV_FUSED_MAX_INPUTS + 1];
  for (int i = 0; i <= NXV_FUSED_MAX_INPUTS; i++) many[i] = v;
  const uint32_t neg = NXV_FUSED_INSTR(NXV_FUSED_UNARY, NXV_NEG, 0, 0, 0);
  enum { TOO_MANY = NXV_FUSED_MAX_INSTRS + 1 };
  uint32_t too_long[TOO_MANY];
  for (int i = 0; i < TOO_MANY; i++) too_long[i] = NXV_FUSED_INSTR(NXV_FUSED_UNARY, NXV_NEG, i, 0, 0);
  uint32_t w;
  EXPECT_FAIL(NXV_ERR_UNSUPPORTED, out, nxv_fused(d, NXV_U8, 1, shape, 1, &vi, 1, &neg, &out));
  EXPECT_FAIL(NXV_ERR_UNSUPPORTED, out, nxv_fused(d, NXV_C64, 1, shape, 1, &vi, 1, &neg, &out));
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_fused(d, NXV_F32, 1, shape, 1, &vi, 1, &neg, &out));
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_fused(d, NXV_F32, 1, shape, 0, &v, 1, &neg, &out));
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_fused(d, NXV_F32, 1, shape, NXV_FUSED_MAX_INPUTS + 1, many, 1, &neg, &out));
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_fused(d, NXV_F32, 1, shape, 1, &v, 0, &neg, &out));
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_fused(d, NXV_F32, 1, shape, 1, &v, TOO_MANY, too_long, &out));
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_fused(d, NXV_F32, 1, big, 1, &v, 1, &neg, &out));
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_fused(d, NXV_F32, 1, shape, 1, &v, 1, NULL, &out));
  w = NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_ADD, 0, 1, 0); /* r1 not written yet */
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_fused(d, NXV_F32, 1, shape, 1, &v, 1, &w, &out));
  w = NXV_FUSED_INSTR(NXV_FUSED_UNARY, NXV_NEG, 0, 0, 0) | (1u << 16); /* unused operand */
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_fused(d, NXV_F32, 1, shape, 1, &v, 1, &w, &out));
  w = neg | (1u << 30);
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_fused(d, NXV_F32, 1, shape, 1, &v, 1, &w, &out));
  /* Literals: only in binary ops and comparisons; for float programs a
   * normal f16 number or a zero (an infinity, a NaN or a subnormal is
   * refused), for integer ones any 16 bits. */
  w = NXV_FUSED_INSTR_LIT(NXV_FUSED_UNARY, NXV_NEG, 0, 0x3C00);
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_fused(d, NXV_F32, 1, shape, 1, &v, 1, &w, &out));
  w = NXV_FUSED_INSTR_LIT(NXV_FUSED_SELECT, 0, 0, 0x3C00);
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_fused(d, NXV_F32, 1, shape, 1, &v, 1, &w, &out));
  for (int i = 0; i < 3; i++) {
    static const uint16_t kBadLits[3] = {0x7C00, 0xFE00, 0x0001};
    w = NXV_FUSED_INSTR_LIT(NXV_FUSED_BINARY, NXV_ADD, 0, kBadLits[i]);
    EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_fused(d, NXV_F32, 1, shape, 1, &v, 1, &w, &out));
    REQUIRE_OK(nxv_fused(d, NXV_S32, 1, shape, 1, &vi, 1, &w, &out));
    nxv_tensor_release(out);
  }
  w = NXV_FUSED_INSTR_LIT(NXV_FUSED_BINARY, NXV_ADD, 1, 0x3C00); /* r1 not written yet */
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_fused(d, NXV_F32, 1, shape, 1, &v, 1, &w, &out));
  w = NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_BITWISE_AND, 0, 0, 0);
  EXPECT_FAIL(NXV_ERR_UNSUPPORTED, out, nxv_fused(d, NXV_F32, 1, shape, 1, &v, 1, &w, &out));
  w = NXV_FUSED_INSTR(NXV_FUSED_UNARY, NXV_REAL, 0, 0, 0);
  EXPECT_FAIL(NXV_ERR_UNSUPPORTED, out, nxv_fused(d, NXV_F32, 1, shape, 1, &v, 1, &w, &out));
  w = NXV_FUSED_INSTR(NXV_FUSED_UNARY, 63, 0, 0, 0);
  EXPECT_FAIL(NXV_ERR_UNSUPPORTED, out, nxv_fused(d, NXV_F32, 1, shape, 1, &v, 1, &w, &out));
  w = NXV_FUSED_INSTR(NXV_FUSED_SELECT, 1, 0, 0, 0);
  EXPECT_FAIL(NXV_ERR_UNSUPPORTED, out, nxv_fused(d, NXV_F32, 1, shape, 1, &v, 1, &w, &out));
  /* Immediates: only among the inputs, and with their bits. */
  uint64_t bits[2] = {0};
  nxv_view two[2] = {v, {NULL, 0, NULL}};
  w = NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_ADD, 0, 1, 0);
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_fused_imm(d, NXV_F32, 1, shape, 2, two, 4u, bits, 1, &w, &out));
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_fused_imm(d, NXV_F32, 1, shape, 2, two, 2u, NULL, 1, &w, &out));
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_fused_imm(d, NXV_F32, 1, shape, 2, two, 0u, bits, 1, &w, &out));
  /* Nothing was lost: the tensors still work. */
  REQUIRE_OK(nxv_fused(d, NXV_F32, 1, shape, 1, &v, 1, &neg, &out));
  float got[8];
  REQUIRE_OK(nxv_tensor_download(out, 0, 8, got));
  CHECK(got[0] == 0.0f && signbit(got[0]));
  nxv_tensor_release(out);
  nxv_tensor_release(t);
  nxv_tensor_release(ti);
  nxv_device_release(d);
}

/* Runs prepared program fp on d over shape {37} (nxv_fused_run), with the
 * device's stats before and after the run in *before and *after. */
static nxv_tensor *run_counted(nxv_device *d, nxv_fused_program *fp, const nxv_view *views,
                               uint32_t imm_mask, const uint64_t *imm_bits,
                               nxv_stats *before, nxv_stats *after) {
  int64_t shape[1] = {37};
  nxv_tensor *out = NULL;
  CHECK_OK(nxv_device_stats(d, before));
  CHECK_OK(nxv_fused_run(d, fp, 1, shape, views, imm_mask, imm_bits, &out));
  CHECK_OK(nxv_device_stats(d, after));
  return out;
}

/* Prepared programs: the checks that need no device at creation, those
 * of a device at its first run there (and at every run on another
 * device), the memo's pipeline only for its device and input layout.
 * Pipelines are created in the calling thread here (each run's pipeline
 * ready when it returns); the end runs one on a device that creates them
 * in the background. */
NXV_TEST(fused, prepared_programs_memo_per_device_and_layout) {
  const nxv_device_config inline_creation = {.pipeline_threads = -1};
  nxv_device *d = test_open_device_with(inline_creation);
  REQUIRE(d);
  nxv_fused_program *fp = NULL;
  const uint32_t neg = NXV_FUSED_INSTR(NXV_FUSED_UNARY, NXV_NEG, 0, 0, 0);
  enum { TOO_MANY = NXV_FUSED_MAX_INSTRS + 1 };
  uint32_t w, too_long[TOO_MANY];
  for (int i = 0; i < TOO_MANY; i++) too_long[i] = neg;
  EXPECT_FAIL_PLAIN(NXV_ERR_UNSUPPORTED, nxv_fused_program_create(NXV_U8, 1, 1, &neg, &fp));
  EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_fused_program_create(NXV_F32, 0, 1, &neg, &fp));
  EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_fused_program_create(NXV_F32, 13, 1, &neg, &fp));
  EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_fused_program_create(NXV_F32, 1, 0, &neg, &fp));
  EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_fused_program_create(NXV_F32, 1, TOO_MANY, too_long, &fp));
  EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_fused_program_create(NXV_F32, 1, 1, NULL, &fp));
  w = NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_ADD, 0, 1, 0); /* r1 not written yet */
  EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_fused_program_create(NXV_F32, 1, 1, &w, &fp));
  w = neg | (1u << 16); /* unused operand */
  EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_fused_program_create(NXV_F32, 1, 1, &w, &fp));
  w = neg | (1u << 30);
  EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_fused_program_create(NXV_F32, 1, 1, &w, &fp));
  w = NXV_FUSED_INSTR_LIT(NXV_FUSED_BINARY, NXV_MUL, 0, 0x7C00); /* an infinity */
  EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_fused_program_create(NXV_F32, 1, 1, &w, &fp));
  CHECK(fp == NULL);
  /* An op f32 programs do not run: accepted at creation, refused at every
   * run, nothing queued. */
  w = NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_BITWISE_AND, 0, 0, 0);
  REQUIRE_OK(nxv_fused_program_create(NXV_F32, 1, 1, &w, &fp));
  float vals[37];
  for (int i = 0; i < 37; i++) vals[i] = 0.25f * (float)i - 3.0f;
  nxv_tensor *x, *out;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, 37, vals, &x));
  int64_t shape[1] = {37};
  nxv_view v = {x, 0, NULL};
  for (int run = 0; run < 2; run++)
    EXPECT_FAIL(NXV_ERR_UNSUPPORTED, out, nxv_fused_run(d, fp, 1, shape, &v, 0, NULL, &out));
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_fused_run(d, NULL, 1, shape, &v, 0, NULL, &out));
  nxv_fused_program_free(fp);
  /* x * y + 1.5: views, then y an immediate (another layout, another
   * pipeline), then views again; on a second device, views. */
  const uint32_t prog[] = {NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_MUL, 0, 1, 0),
                           NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_ADD, 3, 2, 0)};
  REQUIRE_OK(nxv_fused_program_create(NXV_F32, 3, 2, prog, &fp));
  CHECK(nxv_fused_program_dtype(fp) == NXV_F32 && nxv_fused_program_inputs(fp) == 3);
  float y = -0.75f, c = 1.5f;
  uint64_t bits[3] = {0};
  memcpy(&bits[1], &y, 4);
  memcpy(&bits[2], &c, 4);
  nxv_tensor *ty;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, 1, &y, &ty));
  int64_t zero[1] = {0};
  nxv_view views[3] = {v, {ty, 0, zero}, {NULL, 0, NULL}};
  nxv_device *d2 = test_open_device_with(inline_creation);
  REQUIRE(d2);
  nxv_tensor *x2, *ty2;
  REQUIRE_OK(nxv_tensor_upload(d2, NXV_F32, 37, vals, &x2));
  REQUIRE_OK(nxv_tensor_upload(d2, NXV_F32, 1, &y, &ty2));
  nxv_view views2[3] = {{x2, 0, NULL}, {ty2, 0, zero}, {NULL, 0, NULL}};
  static const struct {
    int dev;
    uint32_t mask;
    bool new_pipeline;
    bool memo; /* the memo's pipeline: no registry lookup (no hit; a
                  lookup of a created pipeline is one) */
  } kRuns[] = {{0, 4, true, false},  {0, 4, false, true}, {0, 6, true, false},
               {0, 6, false, false}, {0, 4, false, true}, {1, 4, true, false},
               {1, 4, false, false}, {0, 4, false, true}};
  for (size_t r = 0; r < COUNT(kRuns); r++) {
    nxv_device *dev = kRuns[r].dev ? d2 : d;
    nxv_stats before, after;
    out = run_counted(dev, fp, kRuns[r].dev ? views2 : views, kRuns[r].mask, bits, &before,
                      &after);
    REQUIRE(out);
    CHECK_MSG((after.program_pipelines - before.program_pipelines == 1) ==
                  kRuns[r].new_pipeline,
              "run %zu made %llu pipelines", r,
              (unsigned long long)(after.program_pipelines - before.program_pipelines));
    CHECK_MSG(kRuns[r].new_pipeline ||
                  (after.pipeline_hits == before.pipeline_hits) == kRuns[r].memo,
              "run %zu: %llu registry hits", r,
              (unsigned long long)(after.pipeline_hits - before.pipeline_hits));
    float got[37];
    memset(got, 0xA5, sizeof got);
    REQUIRE_OK(nxv_tensor_download(out, 0, 37, got));
    for (int i = 0; i < 37; i++)
      if (got[i] != vals[i] * y + c) {
        CHECK_MSG(false, "run %zu [%d]: got %g, want %g", r, i, (double)got[i],
                  (double)(vals[i] * y + c));
        break;
      }
    nxv_tensor_release(out);
  }
  nxv_fused_program_free(fp);
  /* An integer program: its second run takes the memo's pipeline too. */
  int32_t ivals[37], igot[37];
  for (int i = 0; i < 37; i++) ivals[i] = i * 1000003 - 18;
  nxv_tensor *xi;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_S32, 37, ivals, &xi));
  const uint32_t ineg = NXV_FUSED_INSTR(NXV_FUSED_UNARY, NXV_NEG, 0, 0, 0);
  REQUIRE_OK(nxv_fused_program_create(NXV_S32, 1, 1, &ineg, &fp));
  nxv_view vi = {xi, 0, NULL};
  for (int run = 0; run < 2; run++) {
    nxv_stats before, after;
    out = run_counted(d, fp, &vi, 0, NULL, &before, &after);
    REQUIRE(out);
    CHECK_MSG(run == 0 || (after.pipeline_hits == before.pipeline_hits &&
                           after.program_pipelines == before.program_pipelines),
              "s32 run %d: %llu registry hits", run,
              (unsigned long long)(after.pipeline_hits - before.pipeline_hits));
    memset(igot, 0xA5, sizeof igot);
    REQUIRE_OK(nxv_tensor_download(out, 0, 37, igot));
    for (int i = 0; i < 37; i++) CHECK(igot[i] == -ivals[i]);
    nxv_tensor_release(out);
  }
  nxv_fused_program_free(fp);
  nxv_tensor_release(xi);
  /* Pipelines created in the background: the first run's is still being
   * made when it returns, so the memo is written by the first run that
   * finds it created (the second, after a synchronize) and read from the
   * third on. */
  nxv_device *d3 = test_open_device_with((nxv_device_config){.pipeline_threads = 2});
  REQUIRE(d3);
  nxv_tensor *x3;
  REQUIRE_OK(nxv_tensor_upload(d3, NXV_F32, 37, vals, &x3));
  const uint32_t twice = NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_ADD, 0, 0, 0);
  REQUIRE_OK(nxv_fused_program_create(NXV_F32, 1, 1, &twice, &fp));
  nxv_view v3 = {x3, 0, NULL};
  for (int run = 0; run < 4; run++) {
    nxv_stats before, after;
    out = run_counted(d3, fp, &v3, 0, NULL, &before, &after);
    REQUIRE(out);
    uint64_t hits = after.pipeline_hits - before.pipeline_hits;
    uint64_t misses = after.pipeline_misses - before.pipeline_misses;
    CHECK_MSG(misses == (run == 0 ? 1u : 0u) && hits == (run == 1 ? 1u : 0u),
              "background run %d: %llu misses, %llu hits", run, (unsigned long long)misses,
              (unsigned long long)hits);
    float got[37];
    memset(got, 0xA5, sizeof got);
    REQUIRE_OK(nxv_tensor_download(out, 0, 37, got));
    for (int i = 0; i < 37; i++) CHECK(got[i] == vals[i] + vals[i]);
    nxv_tensor_release(out);
    REQUIRE_OK(nxv_device_synchronize(d3));
  }
  nxv_fused_program_free(fp);
  nxv_tensor_release(x3);
  nxv_device_release(d3);
  nxv_tensor_release(x2);
  nxv_tensor_release(ty2);
  nxv_device_release(d2);
  nxv_tensor_release(ty);
  nxv_tensor_release(x);
  nxv_device_release(d);
}

/* Threads asking one device for the same and for different programs at
 * once: each program's pipeline is created once, and every result equals
 * the single-threaded one bitwise. */
#define PROG_THREADS 8
#define PROG_COUNT 6
#define PROG_N 257

typedef struct prog_ctx {
  nxv_device *d;
  nxv_tensor *x;
  const uint32_t (*progs)[3];
  nxv_fused_program **prepared; /* the same programs, shared by the threads */
  unsigned char (*want)[PROG_N * 4];
  int id;
  int bad;
} prog_ctx;

static nxv_tensor *run_prog(nxv_device *d, nxv_tensor *x, const uint32_t *prog) {
  int64_t shape[1] = {PROG_N};
  nxv_view v[2] = {{x, 0, NULL}, {x, 0, NULL}};
  nxv_tensor *out = NULL;
  return nxv_fused(d, NXV_F32, 1, shape, 2, v, 3, prog, &out) == NXV_OK ? out : NULL;
}

static void *prog_thread(void *arg) {
  prog_ctx *c = arg;
  for (int r = 0; r < 3; r++)
    for (int k = 0; k < PROG_COUNT; k++) {
      int p = (k + c->id + r) % PROG_COUNT; /* each thread in its own order */
      for (int way = 0; way < 2; way++) {
        nxv_tensor *out = NULL;
        if (way == 0) {
          out = run_prog(c->d, c->x, c->progs[p]);
        } else {
          int64_t shape[1] = {PROG_N};
          nxv_view v[2] = {{c->x, 0, NULL}, {c->x, 0, NULL}};
          if (nxv_fused_run(c->d, c->prepared[p], 1, shape, v, 0, NULL, &out) != NXV_OK)
            out = NULL;
        }
        unsigned char got[PROG_N * 4];
        if (!out || nxv_tensor_download(out, 0, PROG_N, got) != NXV_OK ||
            memcmp(got, c->want[p], sizeof got) != 0)
          c->bad++;
        if (out) nxv_tensor_release(out);
      }
    }
  return NULL;
}

NXV_TEST(concurrency, fused_programs_created_by_threads_at_once) {
  static const uint32_t progs[PROG_COUNT][3] = {
      {NXV_FUSED_INSTR(0, NXV_EXP, 0, 0, 0), NXV_FUSED_INSTR(1, NXV_ADD, 2, 1, 0),
       NXV_FUSED_INSTR(0, NXV_LOG, 3, 0, 0)},
      {NXV_FUSED_INSTR(0, NXV_TANH, 0, 0, 0), NXV_FUSED_INSTR(1, NXV_MUL, 2, 1, 0),
       NXV_FUSED_INSTR(0, NXV_NEG, 3, 0, 0)},
      {NXV_FUSED_INSTR(0, NXV_SIN, 0, 0, 0), NXV_FUSED_INSTR(1, NXV_POW, 2, 1, 0),
       NXV_FUSED_INSTR(0, NXV_ABS, 3, 0, 0)},
      {NXV_FUSED_INSTR(2, NXV_LESS, 0, 1, 0), NXV_FUSED_INSTR(3, 0, 2, 0, 1),
       NXV_FUSED_INSTR(0, NXV_SIGMOID, 3, 0, 0)},
      {NXV_FUSED_INSTR(0, NXV_SQRT, 0, 0, 0), NXV_FUSED_INSTR(1, NXV_DIV, 1, 2, 0),
       NXV_FUSED_INSTR(1, NXV_MAX, 3, 0, 0)},
      {NXV_FUSED_INSTR(0, NXV_ERF, 0, 0, 0), NXV_FUSED_INSTR(1, NXV_SUB, 2, 1, 0),
       NXV_FUSED_INSTR(0, NXV_SQUARE, 3, 0, 0)}};
  nxv_device *d = test_open_device();
  REQUIRE(d);
  float host[PROG_N];
  for (int i = 0; i < PROG_N; i++) host[i] = 0.01f * (float)(i - 128);
  nxv_tensor *x;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, PROG_N, host, &x));
  /* The reference, single-threaded, on a device of its own. */
  nxv_device *rd = test_open_device();
  REQUIRE(rd);
  nxv_tensor *rx;
  REQUIRE_OK(nxv_tensor_upload(rd, NXV_F32, PROG_N, host, &rx));
  static unsigned char want[PROG_COUNT][PROG_N * 4];
  for (int p = 0; p < PROG_COUNT; p++) {
    nxv_tensor *out = run_prog(rd, rx, progs[p]);
    REQUIRE(out);
    REQUIRE_OK(nxv_tensor_download(out, 0, PROG_N, want[p]));
    nxv_tensor_release(out);
  }
  nxv_tensor_release(rx);
  nxv_device_release(rd);
  nxv_fused_program *prepared[PROG_COUNT];
  for (int p = 0; p < PROG_COUNT; p++)
    REQUIRE_OK(nxv_fused_program_create(NXV_F32, 2, 3, progs[p], &prepared[p]));
  prog_ctx ctx[PROG_THREADS];
  pthread_t th[PROG_THREADS];
  for (int i = 0; i < PROG_THREADS; i++) {
    ctx[i] = (prog_ctx){.d = d, .x = x, .progs = progs, .prepared = prepared, .want = want,
                        .id = i};
    REQUIRE(pthread_create(&th[i], NULL, prog_thread, &ctx[i]) == 0);
  }
  for (int i = 0; i < PROG_THREADS; i++) {
    pthread_join(th[i], NULL);
    CHECK_MSG(ctx[i].bad == 0, "thread %d: %d wrong or failed results", i, ctx[i].bad);
  }
  nxv_stats s;
  CHECK_OK(nxv_device_stats(d, &s));
  CHECK_MSG(s.program_pipelines == PROG_COUNT, "%llu program pipelines, expected %d",
            (unsigned long long)s.program_pipelines, PROG_COUNT);
  for (int p = 0; p < PROG_COUNT; p++) nxv_fused_program_free(prepared[p]);
  nxv_tensor_release(x);
  nxv_device_release(d);
}

/* Whether d runs fused programs of t (a device without f64 refuses them). */
static bool fused_runs(nxv_device *d, nxv_dtype t) {
  uint64_t zero = 0;
  int64_t one[1] = {1};
  nxv_tensor *x, *out = NULL;
  if (nxv_tensor_upload(d, t, 1, &zero, &x) != NXV_OK) return false;
  nxv_view v = {x, 0, NULL};
  const uint32_t neg = NXV_FUSED_INSTR(NXV_FUSED_UNARY, NXV_NEG, 0, 0, 0);
  bool ok = nxv_fused(d, t, 1, one, 1, &v, 1, &neg, &out) == NXV_OK;
  if (out) nxv_tensor_release(out);
  nxv_tensor_release(x);
  return ok;
}

/* Runs of programs into blocks of an existing tensor (nxv_fused_into,
 * nxv_fused_run_into): each block bitwise what nxv_fused returns for the
 * same program and inputs (views, a strided view, an immediate), every
 * element outside the blocks left as it was, for float and integer
 * types; bad destinations refused with the destination unchanged; a
 * block of no elements queues nothing. */
NXV_TEST(fused, into_blocks_of_a_destination) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  static const nxv_dtype types[] = {NXV_F32, NXV_F16, NXV_F64, NXV_S32, NXV_U64};
  enum { ROWS = 7, COLS = 43, BLOCK = ROWS * COLS, TOTAL = 2 * BLOCK + 29, OFF = 11 };
  uint64_t rng = 0x5eed1234u;
  for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
    nxv_dtype t = types[ti];
    if (!fused_runs(d, t)) continue;
    bool is_int = t == NXV_S32 || t == NXV_U64;
    size_t es = nxv_dtype_size(t);
    /* x * y + x (floats) or (x ^ y) + x (integers), over x [ROWS][COLS] and
     * y read transposed from a [COLS][ROWS] tensor (strided). */
    const uint32_t prog[] = {
        is_int ? NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_BITWISE_XOR, 0, 1, 0)
               : NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_MUL, 0, 1, 0),
        NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_ADD, 2, 0, 0)};
    unsigned char *hx = test_xcalloc(BLOCK, es), *hy = test_xcalloc(BLOCK, es);
    for (uint64_t i = 0; i < BLOCK; i++) {
      if (is_int) {
        fill_int(t, hx, i, &rng);
        fill_int(t, hy, i, &rng);
      } else {
        fill_float(t, hx, i, &rng);
        fill_float(t, hy, i, &rng);
      }
    }
    nxv_tensor *x, *y, *dst, *extra;
    REQUIRE_OK(nxv_tensor_upload(d, t, BLOCK, hx, &x));
    REQUIRE_OK(nxv_tensor_upload(d, t, BLOCK, hy, &y));
    /* 8 bytes per element: also the poison of the f64 or f32 tensor of
     * the wrong type below. */
    unsigned char *poison = test_xcalloc(TOTAL, 8);
    memset(poison, 0xA7, (size_t)TOTAL * 8);
    REQUIRE_OK(nxv_tensor_upload(d, t, TOTAL, poison, &dst));
    REQUIRE_OK(nxv_tensor_upload(d, t, TOTAL, poison, &extra));
    int64_t shape[2] = {ROWS, COLS}, yt[2] = {1, ROWS}, flat[1] = {BLOCK};
    nxv_view views[2] = {{x, 0, NULL}, {y, 0, yt}};
    /* The references: the same programs into new tensors. */
    nxv_tensor *ref_a = NULL, *ref_b = NULL;
    CHECK_OK(nxv_fused(d, t, 2, shape, 2, views, 2, prog, &ref_a));
    uint64_t imm[2] = {0};
    memcpy(&imm[1], hy + 3 * es, es); /* y[3], broadcast */
    nxv_view flat_views[2] = {{x, 0, NULL}, {NULL, 0, NULL}};
    CHECK_OK(nxv_fused_imm(d, t, 1, flat, 2, flat_views, 2u, imm, 2, prog, &ref_b));
    /* Block a at OFF from program words, block b right after it from the
     * prepared program with y an immediate. */
    CHECK_OK(nxv_fused_into(d, t, 2, shape, 2, views, 0, NULL, 2, prog, dst, OFF));
    nxv_fused_program *fp = NULL;
    REQUIRE_OK(nxv_fused_program_create(t, 2, 2, prog, &fp));
    CHECK_OK(nxv_fused_run_into(d, fp, 1, flat, flat_views, 2u, imm, dst, OFF + BLOCK));
    /* Refused, dst unchanged: another dtype, a block past the end or at a
     * negative offset, an input reading the destination, no destination. */
    nxv_dtype other = t == NXV_F32 ? NXV_F64 : NXV_F32;
    nxv_tensor *wrong;
    REQUIRE_OK(nxv_tensor_upload(d, other, TOTAL, poison, &wrong));
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT,
                      nxv_fused_into(d, t, 2, shape, 2, views, 0, NULL, 2, prog, wrong, 0));
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT,
                      nxv_fused_run_into(d, fp, 1, flat, flat_views, 2u, imm, dst,
                                         TOTAL - BLOCK + 1));
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT,
                      nxv_fused_run_into(d, fp, 1, flat, flat_views, 2u, imm, dst, -1));
    nxv_view reads_dst[2] = {{dst, 0, NULL}, {NULL, 0, NULL}};
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT,
                      nxv_fused_run_into(d, fp, 1, flat, reads_dst, 2u, imm, dst, 0));
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT,
                      nxv_fused_run_into(d, fp, 1, flat, flat_views, 2u, imm, NULL, 0));
    EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT,
                      nxv_fused_run_into(d, NULL, 1, flat, flat_views, 2u, imm, dst, 0));
    /* No elements: nothing queued, extra untouched. */
    nxv_stats s0, s1;
    CHECK_OK(nxv_device_stats(d, &s0));
    int64_t none[1] = {0};
    CHECK_OK(nxv_fused_run_into(d, fp, 1, none, flat_views, 2u, imm, extra, 3));
    CHECK_OK(nxv_device_stats(d, &s1));
    CHECK_MSG(s1.ops_enqueued == s0.ops_enqueued, "%s: an empty block queued an op",
              nxv_dtype_name(t));
    nxv_fused_program_free(fp);
    unsigned char *got = test_xcalloc(TOTAL, es), *ga = test_xcalloc(BLOCK, es),
                  *gb = test_xcalloc(BLOCK, es), *ge = test_xcalloc(TOTAL, es);
    if (ref_a && ref_b) {
      CHECK_OK(nxv_tensor_download(dst, 0, TOTAL, got));
      CHECK_OK(nxv_tensor_download(ref_a, 0, BLOCK, ga));
      CHECK_OK(nxv_tensor_download(ref_b, 0, BLOCK, gb));
      CHECK_OK(nxv_tensor_download(extra, 0, TOTAL, ge));
      CHECK_MSG(memcmp(got, poison, OFF * es) == 0, "%s: elements before the blocks written",
                nxv_dtype_name(t));
      CHECK_MSG(memcmp(got + OFF * es, ga, BLOCK * es) == 0,
                "%s: block a differs from nxv_fused", nxv_dtype_name(t));
      CHECK_MSG(memcmp(got + (OFF + BLOCK) * es, gb, BLOCK * es) == 0,
                "%s: block b differs from nxv_fused_imm", nxv_dtype_name(t));
      CHECK_MSG(memcmp(got + (OFF + 2 * BLOCK) * es, poison, (TOTAL - OFF - 2 * BLOCK) * es) == 0,
                "%s: elements after the blocks written", nxv_dtype_name(t));
      CHECK_MSG(memcmp(ge, poison, TOTAL * es) == 0, "%s: an empty block wrote",
                nxv_dtype_name(t));
    }
    free(got);
    free(ga);
    free(gb);
    free(ge);
    free(hx);
    free(hy);
    free(poison);
    if (ref_a) nxv_tensor_release(ref_a);
    if (ref_b) nxv_tensor_release(ref_b);
    nxv_tensor_release(wrong);
    nxv_tensor_release(extra);
    nxv_tensor_release(dst);
    nxv_tensor_release(x);
    nxv_tensor_release(y);
  }
  nxv_device_release(d);
}

/* The threefry-2x32 rounds of Nx.Random (rotations 13 15 26 6 and 17 29
 * 16 24): x0 += x1; x1 = rotl(x1, r) ^ x0. */
static const uint32_t kRot[8] = {13, 15, 26, 6, 17, 29, 16, 24};

/* The program of rounds rounds over inputs x0 (register 0) and x1
 * (register 1): each round is five instructions (add; shift left; shift
 * right; or; xor). *x0_reg is the register of x0 after the last round;
 * the last register is x1 after it. */
static uint32_t threefry_program(int rounds, uint32_t *prog, uint32_t *x0_reg) {
  uint32_t x0 = 0, x1 = 1, k = 0, base = 2;
  for (int r = 0; r < rounds; r++) {
    uint32_t rot = kRot[r % 8], add = base + k, shl = add + 1, shr = add + 2, orr = add + 3;
    prog[k] = NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_ADD, x0, x1, 0);
    prog[k + 1] = NXV_FUSED_INSTR_LIT(NXV_FUSED_BINARY, NXV_LEFT_SHIFT, x1, rot);
    prog[k + 2] = NXV_FUSED_INSTR_LIT(NXV_FUSED_BINARY, NXV_RIGHT_SHIFT, x1, 32 - rot);
    prog[k + 3] = NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_BITWISE_OR, shl, shr, 0);
    prog[k + 4] = NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_BITWISE_XOR, orr, add, 0);
    k += 5;
    x0 = add;
    x1 = add + 4;
  }
  *x0_reg = x0;
  return k;
}

/* Programs of two results (nxv_fused_pair, nxv_fused_run_pair): twelve
 * threefry rounds over u32 words, both words against the host's rounds;
 * random float and integer programs with a random second register, each
 * result bitwise what the single-result program ending at that register
 * returns, into new tensors, blocks of one destination or one of each;
 * bad second registers, overlapping blocks, inputs reading a
 * destination and programs of the wrong kind refused, nothing written. */
NXV_TEST(fused, pair_results_match_single_programs) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  /* Threefry rounds against the host. */
  if (fused_runs(d, NXV_U32)) {
    enum { N = 1000, ROUNDS = 12 };
    uint32_t *h0 = test_xcalloc(N, 4), *h1 = test_xcalloc(N, 4);
    uint64_t rng = 0x7f4a7c15u;
    for (int i = 0; i < N; i++) {
      h0[i] = (uint32_t)test_rand_u64(&rng);
      h1[i] = (uint32_t)test_rand_u64(&rng);
    }
    nxv_tensor *t0, *t1;
    REQUIRE_OK(nxv_tensor_upload(d, NXV_U32, N, h0, &t0));
    REQUIRE_OK(nxv_tensor_upload(d, NXV_U32, N, h1, &t1));
    for (int i = 0; i < N; i++)
      for (int r = 0; r < ROUNDS; r++) {
        uint32_t rot = kRot[r % 8];
        h0[i] += h1[i];
        h1[i] = ((h1[i] << rot) | (h1[i] >> (32 - rot))) ^ h0[i];
      }
    uint32_t prog[NXV_FUSED_MAX_INSTRS], x0;
    uint32_t nins = threefry_program(ROUNDS, prog, &x0);
    REQUIRE(nins == 60);
    nxv_view in[2] = {{t0, 0, NULL}, {t1, 0, NULL}};
    int64_t shape[1] = {N};
    nxv_fused_dest fresh[2] = {{NULL, 0}, {NULL, 0}};
    nxv_tensor *outs[2] = {NULL, NULL};
    CHECK_OK(nxv_fused_pair(d, NXV_U32, 1, shape, 2, in, 0, NULL, nins, prog, x0, fresh,
                            outs));
    uint32_t *g0 = test_xcalloc(N, 4), *g1 = test_xcalloc(N, 4);
    if (outs[0] && outs[1]) {
      CHECK_OK(nxv_tensor_download(outs[1], 0, N, g0));
      CHECK_OK(nxv_tensor_download(outs[0], 0, N, g1));
      CHECK_MSG(memcmp(g0, h0, N * 4) == 0, "threefry x0 differs from the host's rounds");
      CHECK_MSG(memcmp(g1, h1, N * 4) == 0, "threefry x1 differs from the host's rounds");
    }
    for (int k = 0; k < 2; k++)
      if (outs[k]) nxv_tensor_release(outs[k]);
    free(g0);
    free(g1);
    free(h0);
    free(h1);
    nxv_tensor_release(t0);
    nxv_tensor_release(t1);
  }
  /* Random programs, each result against the single-result program. */
  static const nxv_dtype types[] = {NXV_F32, NXV_F16, NXV_F64, NXV_BF16, NXV_S32, NXV_U64};
  uint64_t rng = 0xb1a5ed;
  int pairs = 0;
  for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
    nxv_dtype t = types[ti];
    if (!fused_runs(d, t)) continue;
    bool is_int = t == NXV_S32 || t == NXV_U64;
    size_t es = nxv_dtype_size(t);
    for (int trial = 0; trial < 4; trial++) {
      enum { ROWS = 5, COLS = 37, N = ROWS * COLS, TOTAL = 2 * N + 17 };
      uint32_t nin = 1 + (uint32_t)(test_rand_u64(&rng) % 4);
      uint32_t nins = 2 + (uint32_t)(test_rand_u64(&rng) % (NXV_FUSED_MAX_INSTRS - 1));
      uint32_t prog[NXV_FUSED_MAX_INSTRS];
      for (uint32_t k = 0; k < nins; k++)
        prog[k] = is_int ? random_instr(&rng, t, nin + k, kIntUn, COUNT(kIntUn), kIntBin,
                                        COUNT(kIntBin))
                         : random_instr(&rng, t, nin + k, kUn, COUNT(kUn), kBin, COUNT(kBin));
      /* The second result: an instruction's register before the last,
       * whose instruction is no comparison (a program's result is of its
       * type; a single-result program ending at a comparison converts). */
      uint32_t second = nin + (uint32_t)(test_rand_u64(&rng) % (nins - 1));
      int64_t shape[2] = {ROWS, COLS};
      nxv_tensor *tin[4];
      nxv_view in[4];
      for (uint32_t k = 0; k < nin; k++) {
        unsigned char *h = test_xcalloc(N, es);
        for (uint64_t i = 0; i < N; i++) {
          if (is_int) fill_int(t, h, i, &rng);
          else fill_float(t, h, i, &rng);
        }
        REQUIRE_OK(nxv_tensor_upload(d, t, N, h, &tin[k]));
        free(h);
        in[k] = (nxv_view){tin[k], 0, NULL};
      }
      /* The references: the whole program, and the program up to second. */
      nxv_tensor *ref[2] = {NULL, NULL};
      CHECK_OK(nxv_fused(d, t, 2, shape, nin, in, nins, prog, &ref[0]));
      CHECK_OK(nxv_fused(d, t, 2, shape, nin, in, second - nin + 1, prog, &ref[1]));
      /* New tensors; blocks of one destination (second first); a block
       * and a new tensor, from a prepared program. */
      unsigned char *poison = test_xcalloc(TOTAL, es);
      memset(poison, 0xC3, (size_t)TOTAL * es);
      nxv_tensor *dst;
      REQUIRE_OK(nxv_tensor_upload(d, t, TOTAL, poison, &dst));
      nxv_tensor *fresh_out[2] = {NULL, NULL}, *mixed_out[2] = {NULL, NULL};
      nxv_fused_dest fresh[2] = {{NULL, 0}, {NULL, 0}};
      nxv_fused_dest blocks[2] = {{dst, 9 + N}, {dst, 9}};
      CHECK_OK(nxv_fused_pair(d, t, 2, shape, nin, in, 0, NULL, nins, prog, second, fresh,
                              fresh_out));
      CHECK_OK(nxv_fused_pair(d, t, 2, shape, nin, in, 0, NULL, nins, prog, second, blocks,
                              NULL));
      nxv_fused_program *fp = NULL;
      REQUIRE_OK(nxv_fused_program_create_pair(t, nin, nins, prog, second, &fp));
      CHECK(nxv_fused_program_second(fp) == second);
      nxv_tensor *extra;
      REQUIRE_OK(nxv_tensor_upload(d, t, TOTAL, poison, &extra));
      nxv_fused_dest mixed[2] = {{NULL, 0}, {extra, 3}};
      for (int run = 0; run < 2; run++) { /* the memo written, then read */
        if (mixed_out[0]) nxv_tensor_release(mixed_out[0]);
        mixed_out[0] = NULL;
        CHECK_OK(nxv_fused_run_pair(d, fp, 2, shape, in, 0, NULL, mixed, mixed_out));
      }
      /* Refused, nothing written: second out of range, overlapping
       * blocks, an input reading a destination, the wrong entry point. */
      nxv_tensor *none[2] = {NULL, NULL};
      EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT,
                        nxv_fused_pair(d, t, 2, shape, nin, in, 0, NULL, nins, prog,
                                       nin + nins - 1, fresh, none));
      EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT,
                        nxv_fused_pair(d, t, 2, shape, nin, in, 0, NULL, nins, prog, nin - 1,
                                       fresh, none));
      EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT,
                        nxv_fused_program_create_pair(t, nin, nins, prog, nin + nins, &fp));
      nxv_fused_dest overlap[2] = {{extra, 0}, {extra, N - 1}};
      EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT,
                        nxv_fused_run_pair(d, fp, 2, shape, in, 0, NULL, overlap, none));
      nxv_view reads_dst[4];
      memcpy(reads_dst, in, sizeof in);
      reads_dst[0].tensor = extra;
      EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT,
                        nxv_fused_run_pair(d, fp, 2, shape, reads_dst, 0, NULL, mixed, none));
      EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT,
                        nxv_fused_run(d, fp, 2, shape, in, 0, NULL, &none[0]));
      EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT,
                        nxv_fused_run_into(d, fp, 2, shape, in, 0, NULL, extra, 0));
      CHECK(none[0] == NULL && none[1] == NULL);
      nxv_fused_program_free(fp);
      nxv_fused_program *single = NULL;
      REQUIRE_OK(nxv_fused_program_create(t, nin, nins, prog, &single));
      EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT,
                        nxv_fused_run_pair(d, single, 2, shape, in, 0, NULL, fresh, none));
      nxv_fused_program_free(single);
      if (ref[0] && ref[1] && fresh_out[0] && fresh_out[1] && mixed_out[0]) {
        pairs++;
        unsigned char *want[2] = {test_xcalloc(N, es), test_xcalloc(N, es)};
        unsigned char *got = test_xcalloc(N, es), *whole = test_xcalloc(TOTAL, es);
        for (int k = 0; k < 2; k++) CHECK_OK(nxv_tensor_download(ref[k], 0, N, want[k]));
        for (int k = 0; k < 2; k++) {
          CHECK_OK(nxv_tensor_download(fresh_out[k], 0, N, got));
          CHECK_MSG(memcmp(got, want[k], (size_t)N * es) == 0,
                    "%s trial %d: result %d into a new tensor differs", nxv_dtype_name(t),
                    trial, k);
        }
        CHECK_OK(nxv_tensor_download(mixed_out[0], 0, N, got));
        CHECK_MSG(memcmp(got, want[0], (size_t)N * es) == 0,
                  "%s trial %d: the prepared program's result differs", nxv_dtype_name(t),
                  trial);
        CHECK_OK(nxv_tensor_download(dst, 0, TOTAL, whole));
        CHECK_MSG(memcmp(whole, poison, 9 * es) == 0 &&
                      memcmp(whole + 9 * es, want[1], (size_t)N * es) == 0 &&
                      memcmp(whole + (9 + N) * es, want[0], (size_t)N * es) == 0 &&
                      memcmp(whole + (9 + 2 * N) * es, poison, (TOTAL - 9 - 2 * N) * es) == 0,
                  "%s trial %d: blocks of one destination differ", nxv_dtype_name(t), trial);
        CHECK_OK(nxv_tensor_download(extra, 0, TOTAL, whole));
        CHECK_MSG(memcmp(whole, poison, 3 * es) == 0 &&
                      memcmp(whole + 3 * es, want[1], (size_t)N * es) == 0 &&
                      memcmp(whole + (3 + N) * es, poison, (TOTAL - 3 - N) * es) == 0,
                  "%s trial %d: the prepared program's block differs", nxv_dtype_name(t),
                  trial);
        free(want[0]);
        free(want[1]);
        free(got);
        free(whole);
      }
      for (int k = 0; k < 2; k++) {
        if (ref[k]) nxv_tensor_release(ref[k]);
        if (fresh_out[k]) nxv_tensor_release(fresh_out[k]);
        if (mixed_out[k]) nxv_tensor_release(mixed_out[k]);
      }
      free(poison);
      nxv_tensor_release(extra);
      nxv_tensor_release(dst);
      for (uint32_t k = 0; k < nin; k++) nxv_tensor_release(tin[k]);
    }
  }
  CHECK(pairs >= 12);
  nxv_device_release(d);
}

/* nxv_fused_check against runs: for random programs (valid ones, and ones
 * with a bad type, count, word, op for the type or second register) of
 * one result and of two, the check's status is the run's on valid inputs
 * of the program's type, and the checks alone queue nothing and create
 * no pipeline. */
NXV_TEST(fused, check_agrees_with_runs) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  static const nxv_dtype kTypes[] = {NXV_F32, NXV_F16, NXV_F64, NXV_BF16, NXV_S32, NXV_S64,
                                     NXV_U32, NXV_U64, NXV_U8,  NXV_S16,  NXV_C64};
  enum { NT = COUNT(kTypes), N = 4, TRIALS = 400, MAX_RUNS = 40 };
  nxv_tensor *x[NT] = {0};
  unsigned char zeros[N * 16] = {0};
  for (int i = 0; i < NT; i++) REQUIRE_OK(nxv_tensor_upload(d, kTypes[i], N, zeros, &x[i]));
  const uint32_t neg = NXV_FUSED_INSTR(NXV_FUSED_UNARY, NXV_NEG, 0, 0, 0);
  EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_fused_check(NULL, NXV_F32, 1, 1, &neg, 0));
  EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_fused_check(d, NXV_F32, 1, 1, NULL, 0));
  uint64_t rng = 0x5eed0f5u;
  int64_t shape[1] = {N};
  int runs = 0, accepted = 0, refused = 0;
  for (int trial = 0; trial < TRIALS; trial++) {
    int ti = (int)(test_rand_u64(&rng) % NT);
    nxv_dtype t = kTypes[ti];
    bool is_int = t == NXV_S32 || t == NXV_S64 || t == NXV_U32 || t == NXV_U64;
    uint32_t nin = 1 + (uint32_t)(test_rand_u64(&rng) % 3);
    uint32_t ninstrs = 1 + (uint32_t)(test_rand_u64(&rng) % 4);
    uint32_t prog[NXV_FUSED_MAX_INSTRS + 1];
    for (uint32_t k = 0; k < ninstrs; k++)
      prog[k] = is_int ? random_instr(&rng, t, nin + k, kIntUn, COUNT(kIntUn), kIntBin,
                                      COUNT(kIntBin))
                       : random_instr(&rng, t, nin + k, kUn, COUNT(kUn), kBin, COUNT(kBin));
    switch (test_rand_u64(&rng) % 8) {
      case 0: /* any op number of the word's class */
        prog[0] = (prog[0] & ~(63u << 2)) | (uint32_t)(test_rand_u64(&rng) % 64) << 2;
        break;
      case 1: /* a register not written yet */
        prog[ninstrs - 1] = NXV_FUSED_INSTR(NXV_FUSED_UNARY, NXV_NEG, nin + ninstrs, 0, 0);
        break;
      case 2: /* a count out of bounds */
        if (test_rand_u64(&rng) % 2) nin = test_rand_u64(&rng) % 2 ? 0 : NXV_FUSED_MAX_INPUTS + 1;
        else ninstrs = 0;
        break;
      case 3: /* any bits */
        prog[ninstrs - 1] = (uint32_t)test_rand_u64(&rng);
        break;
      default:
        break;
    }
    uint32_t second = 0;
    if (test_rand_u64(&rng) % 2) second = (uint32_t)(test_rand_u64(&rng) % (nin + ninstrs + 1));
    nxv_stats s0, s1;
    REQUIRE_OK(nxv_device_stats(d, &s0));
    nxv_status want = nxv_fused_check(d, t, nin, ninstrs, prog, second);
    REQUIRE_OK(nxv_device_stats(d, &s1));
    CHECK(s1.ops_enqueued == s0.ops_enqueued && s1.pipeline_misses == s0.pipeline_misses);
    if (want == NXV_OK) accepted++;
    else refused++;
    /* Run only what the check refused or, up to MAX_RUNS, accepted (each
     * accepted program's run creates a pipeline). */
    if (want == NXV_OK && runs >= MAX_RUNS) continue;
    if (want == NXV_OK) runs++;
    nxv_view views[NXV_FUSED_MAX_INPUTS + 1];
    for (int k = 0; k < NXV_FUSED_MAX_INPUTS + 1; k++) views[k] = (nxv_view){x[ti], 0, NULL};
    nxv_status got;
    if (second == 0) {
      nxv_tensor *out = NULL;
      got = nxv_fused_imm(d, t, 1, shape, nin, views, 0, NULL, ninstrs, prog, &out);
      if (out) nxv_tensor_release(out);
      CHECK(got != NXV_OK || out != NULL);
    } else {
      nxv_fused_dest dests[NXV_FUSED_MAX_RESULTS] = {{NULL, 0}, {NULL, 0}};
      nxv_tensor *outs[NXV_FUSED_MAX_RESULTS] = {NULL, NULL};
      got = nxv_fused_pair(d, t, 1, shape, nin, views, 0, NULL, ninstrs, prog, second, dests,
                           outs);
      for (int k = 0; k < NXV_FUSED_MAX_RESULTS; k++)
        if (outs[k]) nxv_tensor_release(outs[k]);
    }
    if (got != want)
      fprintf(stderr, "trial %d: %s, %u inputs, %u words (first 0x%08x), second %u: check %s, "
              "run %s\n", trial, nxv_dtype_name(t), nin, ninstrs, prog[0], second,
              nxv_status_name(want), nxv_status_name(got));
    CHECK(got == want);
  }
  CHECK(accepted >= 20 && refused >= 100);
  REQUIRE_OK(nxv_device_synchronize(d));
  for (int i = 0; i < NT; i++) nxv_tensor_release(x[i]);
  nxv_device_release(d);
}
