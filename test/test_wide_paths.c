/*
 * The preconditions of the kernels' wide paths, checked on every dispatch
 * of those kernels in every test.
 *
 * The elementwise, reduction, transpose and word-copy kernels read and
 * write 4 elements or 16 bytes at a time through buffer references
 * declared with that alignment; a wide access from an address that is not
 * aligned faults or reads other bytes on a GPU, while lavapipe (where CI
 * runs) serves it as if it were aligned. So a value check cannot catch an
 * op that takes a wide path it must not. The runner installs
 * nxv_test_dispatch_hook (kernels/ops.h's hook): each dispatch's flags are
 * checked against what its kernel's accesses require, derived from the
 * shaders (binary.comp, unary.comp, compare.comp, select.comp,
 * tile2d.glsl, reduce.comp, transpose.comp), not from ops.c's own
 * conditions. A violation fails the running test. The hook also counts
 * the paths it saw, so that kernels.wide_path_preconditions can check that
 * its ops reach each one.
 */
#include <stdarg.h>
#include <string.h>

#include "kernels/ops.h"
#include "test.h"

atomic_ulong nxv_test_paths[NXV_TEST_PATHS];

/* Formats into buf and returns it. */
static const char *fail(char *buf, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, cap, fmt, ap);
  va_end(ap);
  return buf;
}

static void count(bool *seen, int path) { seen[path] = true; }

/* The contiguous variant (0): operand o's first element and the result's
 * against each wide access that reads them. */
static const char *check_contiguous(const nxv_ops_dispatch *d, bool *seen, char *buf,
                                    size_t cap) {
  uint32_t f = d->flags;
  if (d->ew.select) {
    if (!(f & 128u)) return NULL;
    count(seen, NXV_TEST_P_SELECT16);
    /* select.comp: W = 16 / size elements per thread, the predicate's W
     * bytes as one access, each value operand's and the result's 16 bytes
     * (bits 0-2: a broadcast scalar, read once). */
    uint64_t w = 16 / d->out_size;
    for (int o = 0; o < 3; o++) {
      if (f & (1u << o)) continue;
      uint64_t need = o == 0 ? w : 16;
      if (d->ew.addr[o] % need)
        return fail(buf, cap, "select: operand %d at 0x%llx read %llu bytes at a time", o,
                    (unsigned long long)d->ew.addr[o], (unsigned long long)need);
    }
    if (d->out_addr % 16) return fail(buf, cap, "select: result not 16-byte aligned");
    return NULL;
  }
  bool unary = d->ew.nops == 1;
  /* Unary conversions to a wider 16- or 64-bit type (bit 8): the input read
   * 4 at a time (16-bit results) or one at a time (64-bit), the result 16
   * bytes at a time. */
  if (unary && (f & 256u)) {
    count(seen, NXV_TEST_P_WIDEN);
    uint64_t need = d->out_size == 2 ? 4 * d->ew.in_size[0] : d->ew.in_size[0];
    if (!(f & 1u) && d->ew.addr[0] % need)
      return fail(buf, cap, "%s: widening input at 0x%llx read %llu bytes at a time", d->op,
                  (unsigned long long)d->ew.addr[0], (unsigned long long)need);
    if (d->out_addr % 16) return fail(buf, cap, "%s: widening result not 16-byte aligned", d->op);
  }
  bool vec4 = (f & 4u) != 0, wide = (f & 128u) != 0;
  /* binary.comp's repeated rows (bits 5 and 6) are read by its 4-wide and
   * 16-byte loops only. */
  if (!unary && (f & 96u) && !vec4)
    return fail(buf, cap, "%s: repeated rows (bits 5/6) without the 4-wide path", d->op);
  if (!vec4 && !wide) return NULL;
  if (wide && !vec4)
    return fail(buf, cap, "%s: 16-byte path (bit 7) without the 4-wide one (bit 2)", d->op);
  count(seen, wide ? (d->ew.mixed ? NXV_TEST_P_MIXED16 : NXV_TEST_P_WIDE16) : NXV_TEST_P_VEC4);
  for (int o = 0; o < d->ew.nops; o++) {
    /* Bit o: a broadcast scalar, read once; bit 3 + o: an immediate. */
    if (f & (1u << o)) continue;
    if (!unary && (f & (8u << o))) continue;
    size_t es = d->ew.in_size[o];
    /* 4 elements as one access; with bit 7, 16 bytes of operands of the
     * 16-byte type (a mixed op's other operand is read 4 at a time). */
    uint64_t need = 4 * es;
    if (wide && (!d->ew.mixed || es == d->out_size)) need = 16;
    if (d->ew.addr[o] % need)
      return fail(buf, cap, "%s: operand %d at 0x%llx (%zu-byte elements) read %llu bytes at a time",
                  d->op, o, (unsigned long long)d->ew.addr[o], es, (unsigned long long)need);
  }
  /* The result: 4 elements as one access (compare.comp's 4 results as one
   * word), or with bit 7 at most 16 bytes. */
  uint64_t out_need = wide ? 16 : 4 * d->out_size;
  if (d->out_addr % out_need)
    return fail(buf, cap, "%s: result at 0x%llx written %llu bytes at a time", d->op,
                (unsigned long long)d->out_addr, (unsigned long long)out_need);
  return NULL;
}

/* The tiled variants (2 and 3; 4 the 16-byte form): per operand its mode
 * (tile2d.glsl) against its strides, offset and buffer address. */
static const char *check_tiled(const nxv_ops_dispatch *d, bool *seen, char *buf,
                               size_t cap) {
  uint32_t f = d->flags, base = d->variant & 7u;
  const uint32_t *a = d->ew.args;
  if (!a) return fail(buf, cap, "%s: tiled dispatch without its arguments", d->op);
  uint32_t rows = a[0], cols = a[1];
  bool any_wide = false;
  for (int o = 0; o < d->ew.nops; o++) {
    uint32_t mode = (f >> (2 * o)) & 3u;
    if (mode == 3u) continue; /* an immediate */
    const uint32_t *w = a + 2 + 4 * o;
    uint32_t sb = w[0], sr = w[1], sc = w[2];
    size_t es = d->ew.in_size[o];
    uint64_t first = d->ew.addr[o] + (uint64_t)w[3] * es;
    if (mode == 1u) {
      count(seen, NXV_TEST_P_TILED4);
      if (sc != 1 || first % (4 * es) || sr % 4 || sb % 4)
        return fail(buf, cap,
                    "%s: operand %d read 4 wide with strides %u/%u/%u from 0x%llx (%zu-byte "
                    "elements)",
                    d->op, o, sb, sr, sc, (unsigned long long)first, es);
    }
    if (f & (256u << o)) {
      any_wide = true;
      count(seen, NXV_TEST_P_TILED_T16);
      if (es != 2 || mode != 2u || first % 16 || sc % 8 || sb % 8 || rows % 8)
        return fail(buf, cap,
                    "%s: operand %d read 8 rows per 16 bytes (mode %u, strides %u/%u/%u, "
                    "0x%llx, %u rows)",
                    d->op, o, mode, sb, sr, sc, (unsigned long long)first, rows);
    }
  }
  if (f & 64u) {
    count(seen, NXV_TEST_P_VEC_OUT);
    if (cols % 4 || d->out_addr % (4 * d->out_size))
      return fail(buf, cap, "%s: result written 4 wide with %u columns", d->op, cols);
  }
  if (base == 4u) {
    count(seen, NXV_TEST_P_TILED16);
    if (!any_wide || d->out_size != 2 || cols % 8 || d->out_addr % 16)
      return fail(buf, cap, "%s: 16-byte tiles without their preconditions (%u columns)", d->op,
                  cols);
    for (int o = 0; o < d->ew.nops; o++) {
      if (((f >> (2 * o)) & 3u) == 3u || (f & (256u << o))) continue;
      const uint32_t *w = a + 2 + 4 * o;
      uint64_t first = d->ew.addr[o] + (uint64_t)w[3] * d->ew.in_size[o];
      if (d->ew.in_size[o] != 2 || w[2] != 1 || first % 16 || w[1] % 8 || w[0] % 8)
        return fail(buf, cap,
                    "%s: 16-byte tiles read operand %d 8 columns at a time (strides "
                    "%u/%u/%u, 0x%llx)",
                    d->op, o, w[0], w[1], w[2], (unsigned long long)first);
    }
  }
  return NULL;
}

/* reduce.comp's first pass (bits 0-2 of its flags). */
static const char *check_reduce(const nxv_ops_dispatch *d, bool *seen, char *buf, size_t cap) {
  uint32_t f = d->flags, v = d->variant;
  size_t es = d->reduce.in_size;
  uint32_t rk = d->reduce.rank_kept, rr = d->reduce.rank_red;
  const int64_t *ks = d->reduce.kept_shape, *kst = d->reduce.kept_strides,
                *rst = d->reduce.red_strides;
  uint64_t first = d->reduce.addr + (uint64_t)d->reduce.offset * es;
  if (f & 1u) {
    /* A workgroup per result reads its run 4 at a time: every run (and
     * every chunk of one) starts 4-aligned. */
    count(seen, NXV_TEST_P_REDUCE_RUNS4);
    bool ok = (v == 1 || v == 3) && rr == 1 && rst[0] == 1 && first % (4 * es) == 0 &&
              (d->reduce.nsplit <= 1 || d->reduce.kchunk % 4 == 0);
    for (uint32_t i = 0; i < rk && ok; i++) ok = kst[i] % 4 == 0;
    if (!ok)
      return fail(buf, cap, "reduce %s: runs read 4 at a time (variant %u, first at 0x%llx)",
                  d->op, v, (unsigned long long)first);
  }
  for (uint32_t bit = 2u; bit <= 4u; bit *= 2u) {
    if (!(f & bit)) continue;
    /* A thread takes g neighbouring results, reading g elements at once. */
    uint64_t g = bit == 2u ? 4 : 8;
    count(seen, bit == 2u ? NXV_TEST_P_REDUCE_QUADS : NXV_TEST_P_REDUCE_OCTETS);
    bool ok = (v == 0 || v == 2) && rk >= 1 && kst[rk - 1] == 1 && ks[rk - 1] % (int64_t)g == 0 &&
              first % (g * es) == 0 && (bit == 2u || es == 2);
    for (uint32_t i = 0; ok && i + 1 < rk; i++) ok = kst[i] % (int64_t)g == 0;
    for (uint32_t i = 0; ok && i < rr; i++) ok = rst[i] % (int64_t)g == 0;
    if (!ok)
      return fail(buf, cap,
                  "reduce %s: %llu results a thread, %llu elements a load (variant %u, first "
                  "at 0x%llx, %zu-byte elements)",
                  d->op, (unsigned long long)g, (unsigned long long)g, v,
                  (unsigned long long)first, es);
  }
  return NULL;
}

/* transpose.comp: every access moves 16 bytes, ve = 16 / size elements. */
static const char *check_transpose(const nxv_ops_dispatch *d, bool *seen, char *buf,
                                   size_t cap) {
  count(seen, NXV_TEST_P_TRANSPOSE16);
  int64_t ve = 16 / (int64_t)d->transpose.size;
  uint64_t first = d->transpose.addr + (uint64_t)d->transpose.offset * d->transpose.size;
  if (first % 16 || d->out_addr % 16 || d->transpose.rows % ve || d->transpose.cols % ve ||
      d->transpose.col_stride % ve || d->transpose.depth_stride % ve)
    return fail(buf, cap,
                "transpose: 16-byte tiles over %lldx%lld from 0x%llx (strides %lld/%lld)",
                (long long)d->transpose.rows, (long long)d->transpose.cols,
                (unsigned long long)first, (long long)d->transpose.depth_stride,
                (long long)d->transpose.col_stride);
  return NULL;
}

/* unary.comp's word copy: bit 2 moves 4 words (16 bytes) at a time. */
static const char *check_words(const nxv_ops_dispatch *d, bool *seen, char *buf, size_t cap) {
  if (!(d->flags & 4u)) return NULL;
  count(seen, NXV_TEST_P_WORDS4);
  if (d->words.src % 16 || d->out_addr % 16)
    return fail(buf, cap, "copy: 16 bytes at a time from 0x%llx to 0x%llx",
                (unsigned long long)d->words.src, (unsigned long long)d->out_addr);
  return NULL;
}

const char *nxv_test_dispatch_violation(const nxv_ops_dispatch *d, bool *seen, char *buf,
                                        size_t cap) {
  switch (d->kind) {
    case NXV_OPS_ELEMENTWISE: {
      uint32_t base = d->variant & 7u;
      if (base == 0u) return check_contiguous(d, seen, buf, cap);
      if (base >= 2u && base <= 4u) return check_tiled(d, seen, buf, cap);
      return NULL; /* the strided variant reads one element at a time */
    }
    case NXV_OPS_REDUCE: return check_reduce(d, seen, buf, cap);
    case NXV_OPS_TRANSPOSE: return check_transpose(d, seen, buf, cap);
    case NXV_OPS_WORD_COPY: return check_words(d, seen, buf, cap);
  }
  return fail(buf, cap, "unknown dispatch kind %d", (int)d->kind);
}

void nxv_test_dispatch_hook(const nxv_ops_dispatch *d) {
  bool seen[NXV_TEST_PATHS] = {false};
  char buf[256];
  const char *why = nxv_test_dispatch_violation(d, seen, buf, sizeof buf);
  for (int i = 0; i < NXV_TEST_PATHS; i++)
    if (seen[i]) atomic_fetch_add(&nxv_test_paths[i], 1);
  CHECK_MSG(why == NULL, "wide path precondition: %s", why);
}

/* An elementwise dispatch of nops dense operands of es-byte elements at
 * a and b, for the checker's own test. */
static nxv_ops_dispatch fake(int nops, size_t es, uint32_t flags, uint64_t a, uint64_t b) {
  nxv_ops_dispatch d = {.kind = NXV_OPS_ELEMENTWISE, .op = "fake", .flags = flags,
                        .out_addr = 0x10000, .out_size = es};
  d.ew.nops = nops;
  d.ew.imm = -1;
  d.ew.n = 64;
  d.ew.in_size[0] = d.ew.in_size[1] = d.ew.in_size[2] = es;
  d.ew.addr[0] = a;
  d.ew.addr[1] = b;
  return d;
}

/* A tensor of n elements of type t, filled with zeros. */
static nxv_tensor *zeros(nxv_device *d, nxv_dtype t, uint64_t n) {
  nxv_tensor *x = NULL;
  uint64_t zero = 0;
  if (nxv_fill(d, t, n, &zero, &x) != NXV_OK) return NULL;
  return x;
}

/* The checker on made-up dispatches: misaligned wide accesses are
 * reported, aligned ones and broadcast scalars are not. */
static void check_the_checker(void) {
  bool seen[NXV_TEST_PATHS] = {false};
  char buf[256];
#define VIOLATES(dispatch) (nxv_test_dispatch_violation(&(dispatch), seen, buf, sizeof buf) != NULL)
  nxv_ops_dispatch d = fake(2, 4, 4u, 0x1000, 0x2004);
  CHECK(VIOLATES(d));
  d = fake(2, 4, 4u, 0x1000, 0x2010);
  CHECK(!VIOLATES(d));
  d = fake(2, 2, 4u | 128u, 0x1000, 0x2008);
  CHECK(VIOLATES(d));
  d = fake(2, 2, 4u | 128u | 2u, 0x1000, 0x2002); /* b a broadcast scalar */
  CHECK(!VIOLATES(d));
  d = fake(2, 2, 4u | 128u | 16u, 0x1000, 0x2002); /* b an immediate */
  CHECK(!VIOLATES(d));
  d = fake(3, 4, 128u, 0x1002, 0x2000);
  d.ew.select = true;
  d.ew.in_size[0] = 1;
  d.ew.addr[2] = 0x3000;
  CHECK(VIOLATES(d)); /* the predicate: 4 bytes at a time */
  d.ew.addr[0] = 0x1004;
  CHECK(!VIOLATES(d));
  d.ew.addr[2] = 0x3008;
  CHECK(VIOLATES(d)); /* on_false: 16 bytes at a time */
  d = fake(1, 1, 256u, 0x1002, 0);
  d.out_size = 2; /* u8 -> f16: 4 inputs at a time */
  CHECK(VIOLATES(d));
  uint32_t args[2 + 4 * 2] = {64, 64, 0, 64, 1, 2, 0, 64, 1, 0};
  d = fake(2, 4, 1u | 64u, 0x1000, 0x2000); /* a in mode 1 at offset 2 */
  d.variant = 2;
  d.ew.args = args;
  CHECK(VIOLATES(d));
  args[5] = 4;
  CHECK(!VIOLATES(d));
  int64_t ks[1] = {64}, kst[1] = {1}, rs[1] = {32}, rst[1] = {64};
  nxv_ops_dispatch r = {.kind = NXV_OPS_REDUCE, .op = "sum", .variant = 0, .flags = 4u,
                        .out_addr = 0x10000, .out_size = 2};
  r.reduce.addr = 0x1000;
  r.reduce.offset = 4; /* 8 bytes in: not 16-byte aligned */
  r.reduce.in_size = 2;
  r.reduce.rank_kept = r.reduce.rank_red = 1;
  r.reduce.kept_shape = ks;
  r.reduce.kept_strides = kst;
  r.reduce.red_shape = rs;
  r.reduce.red_strides = rst;
  r.reduce.nsplit = 1;
  CHECK(VIOLATES(r));
  r.reduce.offset = 8;
  CHECK(!VIOLATES(r));
  nxv_ops_dispatch t = {.kind = NXV_OPS_TRANSPOSE, .op = "transpose", .out_addr = 0x10000,
                        .out_size = 4};
  t.transpose.addr = 0x1000;
  t.transpose.offset = 2;
  t.transpose.size = 4;
  t.transpose.rows = t.transpose.cols = t.transpose.col_stride = 64;
  CHECK(VIOLATES(t));
  t.transpose.offset = 4;
  CHECK(!VIOLATES(t));
  nxv_ops_dispatch w = {.kind = NXV_OPS_WORD_COPY, .op = "copy", .flags = 4u,
                        .out_addr = 0x10000, .out_size = 4};
  w.words.src = 0x1004;
  w.words.words = 64;
  CHECK(VIOLATES(w));
#undef VIOLATES
}

NXV_TEST(kernels, wide_path_preconditions) {
  check_the_checker();
  /* Ops that take each path, with operands at every offset 0..8: the hook
   * (installed for every test) checks each dispatch; here every path
   * must also have been taken at least once. */
  nxv_device *dev = test_open_device();
  REQUIRE(dev);
  unsigned long before[NXV_TEST_PATHS];
  for (int i = 0; i < NXV_TEST_PATHS; i++) before[i] = atomic_load(&nxv_test_paths[i]);
  enum { R = 32, C = 64, LEN = R * C + 16 };
  static const nxv_dtype types[] = {NXV_U8, NXV_F16, NXV_BF16, NXV_F32, NXV_F64};
  for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
    nxv_dtype t = types[ti];
    if (!nxv_convert_supported(dev, t)) continue;
    nxv_tensor *x = zeros(dev, t, LEN), *y = zeros(dev, t, LEN), *p = zeros(dev, NXV_U8, LEN),
               *u = zeros(dev, NXV_U8, LEN);
    REQUIRE(x && y && p && u);
    for (int64_t off = 0; off <= 8; off++) {
      const int64_t flat[1] = {R * C}, one[1] = {1};
      const int64_t shape[2] = {R, C}, dense[2] = {C, 1}, trans[2] = {1, R};
      nxv_view vx = {x, off, one}, vy = {y, 8 - off, one}, vp = {p, off, one},
               vu = {u, off, one};
      nxv_view tx = {x, off, dense}, ty = {y, off, trans};
      nxv_tensor *o = NULL;
      if (nxv_binary_supported(dev, NXV_ADD, t)) {
        if (nxv_binary(dev, NXV_ADD, 1, flat, &vx, &vy, &o) == NXV_OK) nxv_tensor_release(o);
        if (nxv_binary(dev, NXV_ADD, 2, shape, &tx, &ty, &o) == NXV_OK) nxv_tensor_release(o);
        if (nxv_binary(dev, NXV_MUL, 1, flat, &vx, &vu, &o) == NXV_OK) nxv_tensor_release(o);
      }
      if (nxv_unary(dev, NXV_NEG, 1, flat, &vx, &o) == NXV_OK) nxv_tensor_release(o);
      if (nxv_unary(dev, NXV_COPY, 2, shape, &ty, &o) == NXV_OK) nxv_tensor_release(o);
      if (nxv_convert(dev, t, 1, flat, &vu, &o) == NXV_OK) nxv_tensor_release(o);
      if (nxv_compare(dev, NXV_LESS, 1, flat, &vx, &vy, &o) == NXV_OK) nxv_tensor_release(o);
      if (nxv_select(dev, 1, flat, &vp, &vx, &vy, &o) == NXV_OK) nxv_tensor_release(o);
      /* Sums along the rows (a run per result) and down the columns
       * (neighbouring results). */
      if (nxv_reduce(dev, NXV_REDUCE_SUM, 2, shape, &tx, 2u, &o) == NXV_OK) nxv_tensor_release(o);
      if (nxv_reduce(dev, NXV_REDUCE_MAX, 2, shape, &tx, 1u, &o) == NXV_OK) nxv_tensor_release(o);
    }
    nxv_tensor_release(x);
    nxv_tensor_release(y);
    nxv_tensor_release(p);
    nxv_tensor_release(u);
  }
  CHECK_OK(nxv_device_synchronize(dev));
  /* Small downloads through the word-copy kernel (a device that copies
   * them so, its small buffers outside mapped memory), from every offset
   * 0..8 of an f32 tensor. */
  nxv_device *kdev =
      test_open_device_with((nxv_device_config){.download_kernel = 1, .unmapped_small = true});
  REQUIRE(kdev);
  nxv_tensor *k = zeros(kdev, NXV_F32, 64);
  REQUIRE(k);
  float got[32];
  for (uint64_t off = 0; off <= 8; off++) CHECK_OK(nxv_tensor_download(k, off, 32, got));
  nxv_tensor_release(k);
  nxv_device_release(kdev);
  static const char *const names[NXV_TEST_PATHS] = {
      "4 elements", "16 bytes", "16 bytes, two types", "select's 16 bytes",
      "widening conversion", "tiled 4-wide rows", "tiled 16-bit transposed",
      "16-byte tiles", "tiled 4-wide stores", "reduction runs 4 at a time",
      "reduction 4 results a thread", "reduction 8 results a thread",
      "16-byte transpose", "16-byte word copy"};
  for (int i = 0; i < NXV_TEST_PATHS; i++)
    CHECK_MSG(atomic_load(&nxv_test_paths[i]) > before[i], "no dispatch took the %s path",
              names[i]);
  nxv_device_release(dev);
}
