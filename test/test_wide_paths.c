/*
 * The preconditions of the elementwise kernels' wide paths, checked on
 * every elementwise dispatch of every test.
 *
 * The kernels read and write 4 elements or 16 bytes at a time through
 * buffer references declared with that alignment; a wide access from an
 * address that is not aligned faults or reads other bytes on a GPU, while
 * lavapipe (where CI runs) serves it as if it were aligned. So a value
 * check cannot catch an op that takes a wide path it must not. The
 * runner installs nxv_test_ew_hook (kernels/ops.h's hook): each
 * dispatch's flags are checked against what its kernel's accesses require,
 * derived from the shaders (binary.comp, unary.comp, compare.comp,
 * select.comp, tile2d.glsl), not from ops.c's own conditions. A violation
 * fails the running test. The hook also counts the paths it saw, so that
 * kernels.wide_path_preconditions can check that its ops reach each one.
 */
#include <stdarg.h>
#include <string.h>

#include "kernels/ops.h"
#include "test.h"

atomic_ulong nxv_test_ew_paths[NXV_TEST_EW_PATHS];

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
static const char *check_contiguous(const nxv_ops_ew_dispatch *d, bool *seen, char *buf,
                                    size_t cap) {
  uint32_t f = d->flags;
  if (d->select) {
    if (!(f & 128u)) return NULL;
    count(seen, NXV_TEST_EW_SELECT16);
    /* select.comp: W = 16 / size elements per thread, the predicate's W
     * bytes as one access, each value operand's and the result's 16 bytes
     * (bits 0-2: a broadcast scalar, read once). */
    uint64_t w = 16 / d->out_size;
    for (int o = 0; o < 3; o++) {
      if (f & (1u << o)) continue;
      uint64_t need = o == 0 ? w : 16;
      if (d->addr[o] % need)
        return fail(buf, cap, "select: operand %d at 0x%llx read %llu bytes at a time", o,
                    (unsigned long long)d->addr[o], (unsigned long long)need);
    }
    if (d->out_addr % 16) return fail(buf, cap, "select: result not 16-byte aligned");
    return NULL;
  }
  bool unary = d->nops == 1;
  /* Unary conversions to a wider 16- or 64-bit type (bit 8): the input read
   * 4 at a time (16-bit results) or one at a time (64-bit), the result 16
   * bytes at a time. */
  if (unary && (f & 256u)) {
    count(seen, NXV_TEST_EW_WIDEN);
    uint64_t need = d->out_size == 2 ? 4 * d->in_size[0] : d->in_size[0];
    if (!(f & 1u) && d->addr[0] % need)
      return fail(buf, cap, "%s: widening input at 0x%llx read %llu bytes at a time", d->op,
                  (unsigned long long)d->addr[0], (unsigned long long)need);
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
  count(seen, wide ? (d->mixed ? NXV_TEST_EW_MIXED16 : NXV_TEST_EW_WIDE16) : NXV_TEST_EW_VEC4);
  for (int o = 0; o < d->nops; o++) {
    /* Bit o: a broadcast scalar, read once; bit 3 + o: an immediate. */
    if (f & (1u << o)) continue;
    if (!unary && (f & (8u << o))) continue;
    size_t es = d->in_size[o];
    /* 4 elements as one access; with bit 7, 16 bytes of operands of the
     * 16-byte type (a mixed op's other operand is read 4 at a time). */
    uint64_t need = 4 * es;
    if (wide && (!d->mixed || es == d->out_size)) need = 16;
    if (d->addr[o] % need)
      return fail(buf, cap, "%s: operand %d at 0x%llx (%zu-byte elements) read %llu bytes at a time",
                  d->op, o, (unsigned long long)d->addr[o], es, (unsigned long long)need);
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
static const char *check_tiled(const nxv_ops_ew_dispatch *d, bool *seen, char *buf,
                               size_t cap) {
  uint32_t f = d->flags, base = d->variant & 7u;
  const uint32_t *a = d->args;
  if (!a) return fail(buf, cap, "%s: tiled dispatch without its arguments", d->op);
  uint32_t rows = a[0], cols = a[1];
  bool any_wide = false;
  for (int o = 0; o < d->nops; o++) {
    uint32_t mode = (f >> (2 * o)) & 3u;
    if (mode == 3u) continue; /* an immediate */
    const uint32_t *w = a + 2 + 4 * o;
    uint32_t sb = w[0], sr = w[1], sc = w[2];
    size_t es = d->in_size[o];
    uint64_t first = d->addr[o] + (uint64_t)w[3] * es;
    if (mode == 1u) {
      count(seen, NXV_TEST_EW_TILED4);
      if (sc != 1 || first % (4 * es) || sr % 4 || sb % 4)
        return fail(buf, cap,
                    "%s: operand %d read 4 wide with strides %u/%u/%u from 0x%llx (%zu-byte "
                    "elements)",
                    d->op, o, sb, sr, sc, (unsigned long long)first, es);
    }
    if (f & (256u << o)) {
      any_wide = true;
      count(seen, NXV_TEST_EW_TILED_T16);
      if (es != 2 || mode != 2u || first % 16 || sc % 8 || sb % 8 || rows % 8)
        return fail(buf, cap,
                    "%s: operand %d read 8 rows per 16 bytes (mode %u, strides %u/%u/%u, "
                    "0x%llx, %u rows)",
                    d->op, o, mode, sb, sr, sc, (unsigned long long)first, rows);
    }
  }
  if (f & 64u) {
    count(seen, NXV_TEST_EW_VEC_OUT);
    if (cols % 4 || d->out_addr % (4 * d->out_size))
      return fail(buf, cap, "%s: result written 4 wide with %u columns", d->op, cols);
  }
  if (base == 4u) {
    count(seen, NXV_TEST_EW_TILED16);
    if (!any_wide || d->out_size != 2 || cols % 8 || d->out_addr % 16)
      return fail(buf, cap, "%s: 16-byte tiles without their preconditions (%u columns)", d->op,
                  cols);
    for (int o = 0; o < d->nops; o++) {
      if (((f >> (2 * o)) & 3u) == 3u || (f & (256u << o))) continue;
      const uint32_t *w = a + 2 + 4 * o;
      uint64_t first = d->addr[o] + (uint64_t)w[3] * d->in_size[o];
      if (d->in_size[o] != 2 || w[2] != 1 || first % 16 || w[1] % 8 || w[0] % 8)
        return fail(buf, cap,
                    "%s: 16-byte tiles read operand %d 8 columns at a time (strides "
                    "%u/%u/%u, 0x%llx)",
                    d->op, o, w[0], w[1], w[2], (unsigned long long)first);
    }
  }
  return NULL;
}

const char *nxv_test_ew_violation(const nxv_ops_ew_dispatch *d, bool *seen, char *buf,
                                  size_t cap) {
  uint32_t base = d->variant & 7u;
  if (base == 0u) return check_contiguous(d, seen, buf, cap);
  if (base >= 2u && base <= 4u) return check_tiled(d, seen, buf, cap);
  return NULL; /* the strided variant reads one element at a time */
}

void nxv_test_ew_hook(const nxv_ops_ew_dispatch *d) {
  bool seen[NXV_TEST_EW_PATHS] = {false};
  char buf[256];
  const char *why = nxv_test_ew_violation(d, seen, buf, sizeof buf);
  for (int i = 0; i < NXV_TEST_EW_PATHS; i++)
    if (seen[i]) atomic_fetch_add(&nxv_test_ew_paths[i], 1);
  CHECK_MSG(why == NULL, "wide path precondition: %s", why);
}

/* A dispatch of op name over dense operands at addrs, for the checker's
 * own test. */
static nxv_ops_ew_dispatch fake(int nops, size_t es, uint32_t flags, uint64_t a, uint64_t b) {
  nxv_ops_ew_dispatch d = {.op = "fake", .nops = nops, .imm = -1, .out_size = es,
                           .flags = flags, .n = 64, .out_addr = 0x10000};
  d.in_size[0] = d.in_size[1] = d.in_size[2] = es;
  d.addr[0] = a;
  d.addr[1] = b;
  return d;
}

/* A tensor of n elements of type t, filled with zeros. */
static nxv_tensor *zeros(nxv_device *d, nxv_dtype t, uint64_t n) {
  nxv_tensor *x = NULL;
  uint64_t zero = 0;
  if (nxv_fill(d, t, n, &zero, &x) != NXV_OK) return NULL;
  return x;
}

NXV_TEST(kernels, wide_path_preconditions) {
  /* The checker itself: misaligned wide accesses are reported, aligned
   * ones and broadcast scalars are not. */
  bool seen[NXV_TEST_EW_PATHS] = {false};
  char buf[256];
  nxv_ops_ew_dispatch d = fake(2, 4, 4u, 0x1000, 0x2004);
  CHECK(nxv_test_ew_violation(&d, seen, buf, sizeof buf) != NULL);
  d = fake(2, 4, 4u, 0x1000, 0x2010);
  CHECK(nxv_test_ew_violation(&d, seen, buf, sizeof buf) == NULL);
  d = fake(2, 2, 4u | 128u, 0x1000, 0x2008);
  CHECK(nxv_test_ew_violation(&d, seen, buf, sizeof buf) != NULL);
  d = fake(2, 2, 4u | 128u | 2u, 0x1000, 0x2002); /* b a broadcast scalar */
  CHECK(nxv_test_ew_violation(&d, seen, buf, sizeof buf) == NULL);
  d = fake(2, 2, 4u | 128u | 16u, 0x1000, 0x2002); /* b an immediate */
  CHECK(nxv_test_ew_violation(&d, seen, buf, sizeof buf) == NULL);
  d = fake(3, 4, 128u, 0x1002, 0x2000);
  d.select = true;
  d.in_size[0] = 1;
  d.addr[2] = 0x3000;
  CHECK(nxv_test_ew_violation(&d, seen, buf, sizeof buf) != NULL); /* predicate: 4 bytes */
  d.addr[0] = 0x1004;
  CHECK(nxv_test_ew_violation(&d, seen, buf, sizeof buf) == NULL);
  d.addr[2] = 0x3008;
  CHECK(nxv_test_ew_violation(&d, seen, buf, sizeof buf) != NULL); /* on_false: 16 bytes */
  d = fake(1, 1, 256u, 0x1002, 0);
  d.out_size = 2; /* u8 -> f16: 4 inputs at a time */
  CHECK(nxv_test_ew_violation(&d, seen, buf, sizeof buf) != NULL);
  uint32_t args[2 + 4 * 2] = {64, 64, 0, 64, 1, 2, 0, 64, 1, 0};
  d = fake(2, 4, 1u | 64u, 0x1000, 0x2000); /* a in mode 1 at offset 2 */
  d.variant = 2;
  d.args = args;
  CHECK(nxv_test_ew_violation(&d, seen, buf, sizeof buf) != NULL);
  args[5] = 4;
  CHECK(nxv_test_ew_violation(&d, seen, buf, sizeof buf) == NULL);

  /* Ops that take each path, with operands at every offset 0..8: the hook
   * (installed for every test) checks each dispatch; here every path
   * must also have been taken at least once. */
  nxv_device *dev = test_open_device();
  REQUIRE(dev);
  unsigned long before[NXV_TEST_EW_PATHS];
  for (int i = 0; i < NXV_TEST_EW_PATHS; i++) before[i] = atomic_load(&nxv_test_ew_paths[i]);
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
      nxv_view tx = {x, off, dense}, ty = {y, 0, trans};
      nxv_tensor *o = NULL;
      if (nxv_binary_supported(dev, NXV_ADD, t)) {
        if (nxv_binary(dev, NXV_ADD, 1, flat, &vx, &vy, &o) == NXV_OK) nxv_tensor_release(o);
        if (nxv_binary(dev, NXV_ADD, 2, shape, &tx, &ty, &o) == NXV_OK) nxv_tensor_release(o);
        if (nxv_binary(dev, NXV_MUL, 1, flat, &vx, &vu, &o) == NXV_OK)
          nxv_tensor_release(o);
      }
      if (nxv_unary(dev, NXV_NEG, 1, flat, &vx, &o) == NXV_OK) nxv_tensor_release(o);
      if (nxv_unary(dev, NXV_COPY, 2, shape, &ty, &o) == NXV_OK) nxv_tensor_release(o);
      if (nxv_convert(dev, t, 1, flat, &vu, &o) == NXV_OK) nxv_tensor_release(o);
      if (nxv_compare(dev, NXV_LESS, 1, flat, &vx, &vy, &o) == NXV_OK) nxv_tensor_release(o);
      if (nxv_select(dev, 1, flat, &vp, &vx, &vy, &o) == NXV_OK) nxv_tensor_release(o);
    }
    nxv_tensor_release(x);
    nxv_tensor_release(y);
    nxv_tensor_release(p);
    nxv_tensor_release(u);
  }
  CHECK_OK(nxv_device_synchronize(dev));
  static const char *const names[NXV_TEST_EW_PATHS] = {
      "4 elements", "16 bytes", "16 bytes, two types", "select's 16 bytes",
      "widening conversion", "tiled 4-wide rows", "tiled 16-bit transposed",
      "16-byte tiles", "tiled 4-wide stores"};
  for (int i = 0; i < NXV_TEST_EW_PATHS; i++)
    CHECK_MSG(atomic_load(&nxv_test_ew_paths[i]) > before[i], "no dispatch took the %s path",
              names[i]);
  nxv_device_release(dev);
}
