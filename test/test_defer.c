/*
 * Deferred elementwise results (kernels/defer.c): random chains of unary,
 * binary and immediate ops over every float type and input layout, checked
 * bitwise against the same ops run one kernel each (nxv_ops_*_eager);
 * deferred results read by every other kind of op, through reshaping and
 * offset views; unread results that queue nothing; long chains and many
 * inputs; a computation that fails for lack of memory and succeeds later;
 * deferral off by default; and (concurrency suite, run under
 * ThreadSanitizer) one deferred result taken in and read by many threads.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "test.h"

static const nxv_dtype kTypes[4] = {NXV_F32, NXV_F64, NXV_F16, NXV_BF16};

static uint64_t bits_of(nxv_dtype t, double v) {
  return nxv_test_encode(t, (nxv_test_val){.f = v});
}

/* Uploads count random values of t in [-2, 2], one in 16 zero. */
static nxv_tensor *upload_random(nxv_device *d, nxv_dtype t, uint64_t count, uint64_t *rng) {
  size_t es = nxv_dtype_size(t);
  unsigned char *host = test_xcalloc(count ? count : 1, es);
  for (uint64_t i = 0; i < count; i++) {
    double v = test_rand_uniform(rng, -2.0, 2.0);
    if (test_rand_u64(rng) % 16 == 0) v = 0;
    uint64_t b = bits_of(t, v);
    memcpy(host + i * es, &b, es);
  }
  nxv_tensor *x = NULL;
  CHECK_OK(nxv_tensor_upload(d, t, count, host, &x));
  free(host);
  return x;
}

/* Whether a and b hold the same n elements of t bitwise (NaN matching any
 * NaN); reports the first few differences under label. */
static bool same_contents(nxv_tensor *a, nxv_tensor *b, nxv_dtype t, uint64_t n,
                          const char *label) {
  size_t es = nxv_dtype_size(t);
  unsigned char *x = test_xcalloc(n ? n : 1, es), *y = test_xcalloc(n ? n : 1, es);
  CHECK_OK(nxv_tensor_download(a, 0, n, x));
  CHECK_OK(nxv_tensor_download(b, 0, n, y));
  int bad = 0;
  for (uint64_t i = 0; i < n; i++) {
    double u = nxv_test_float_at(t, x, i), v = nxv_test_float_at(t, y, i);
    bool ok = (isnan(u) || isnan(v)) ? isnan(u) && isnan(v)
                                     : memcmp(x + i * es, y + i * es, es) == 0;
    if (!ok && bad++ < 3)
      CHECK_MSG(false, "%s %s [%llu]: deferred %.9g, one by one %.9g", label,
                nxv_dtype_name(t), (unsigned long long)i, u, v);
  }
  free(x);
  free(y);
  return bad == 0;
}

static const nxv_unary_op kUn[] = {NXV_NEG, NXV_ABS, NXV_EXP, NXV_LOG, NXV_SQRT,
                                   NXV_TANH, NXV_SIGMOID, NXV_SQUARE, NXV_FLOOR,
                                   NXV_SIGN, NXV_RSQRT, NXV_SIN, NXV_COPY};
static const nxv_binary_op kBin[] = {NXV_ADD, NXV_SUB, NXV_MUL, NXV_DIV,
                                     NXV_MAX, NXV_MIN, NXV_POW, NXV_REM};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* A value of a random chain: the deferred path's tensor, the eager path's,
 * and the view both are read through (strides NULL: dense). */
typedef struct value {
  nxv_tensor *def, *ref;
  int64_t offset;
  int64_t strides[NXV_MAX_RANK];
  bool dense;
} value;

static nxv_view view_of(const value *v, bool deferred) {
  return (nxv_view){deferred ? v->def : v->ref, v->offset, v->dense ? NULL : v->strides};
}

NXV_TEST(defer, random_chains_match_ops_one_by_one) {
  nxv_device *d = test_open_device_deferred();
  REQUIRE(d);
  nxv_device_info info;
  REQUIRE_OK(nxv_device_info_get(d, &info));
  nxv_stats s0;
  REQUIRE_OK(nxv_device_stats(d, &s0));
  uint64_t rng = 0xDEFE55;
  static const int64_t kDims[] = {1, 2, 3, 5, 7, 16, 33};
  int chains = 0, results = 0, reads_midway = 0;
  for (int ti = 0; ti < 4; ti++) {
    nxv_dtype t = kTypes[ti];
    if (t == NXV_F64 && !info.float64) continue;
    if ((t == NXV_F16 || t == NXV_BF16) && !info.storage_16bit) continue;
    for (int trial = 0; trial < 8; trial++) {
      uint32_t rank = (uint32_t)(trial % 5);
      int64_t shape[NXV_MAX_RANK];
      uint64_t n = 1;
      for (uint32_t i = 0; i < rank; i++) {
        shape[i] = kDims[test_rand_u64(&rng) % COUNT(kDims)];
        n *= (uint64_t)shape[i];
      }
      value vals[64];
      int nv = 0;
      /* Inputs: dense, dense at an offset, a broadcast scalar, the last
       * axis broadcast, and (rank >= 2) the last two axes transposed. */
      for (int lay = 0; lay < 5; lay++) {
        if (lay == 4 && rank < 2) continue;
        value *v = &vals[nv++];
        memset(v, 0, sizeof *v);
        uint64_t count = lay == 1 ? n + 3 : lay == 2 ? 1 : lay == 3 ? (rank ? (uint64_t)shape[rank - 1] : 1) : n;
        v->def = v->ref = upload_random(d, t, count, &rng);
        REQUIRE(v->def);
        nxv_tensor_retain(v->ref);
        v->dense = lay <= 1;
        v->offset = lay == 1 ? 3 : 0;
        if (lay == 3 && rank) v->strides[rank - 1] = 1;
        if (lay == 4) {
          int64_t s = 1;
          for (int i = (int)rank - 1; i >= 0; i--) {
            v->strides[i] = s;
            s *= shape[i];
          }
          /* element (.., i, j) of the view is (.., j, i) of a tensor of
           * shape (.., n-1, n-2) */
          int64_t r2 = shape[rank - 2], r1 = shape[rank - 1];
          v->strides[rank - 2] = 1;
          v->strides[rank - 1] = r2;
          (void)r1;
        }
      }
      /* The chain is drawn first, then run deferred, then one kernel per
       * op (a kernel computes a waiting deferred result: interleaving the
       * two would compute every op at once). */
      typedef struct step {
        int cls, a, b, roll;
        uint32_t op;
        bool first;
        uint64_t imm;
      } step;
      step steps[48];
      int nsteps = 10 + (int)(test_rand_u64(&rng) % 30);
      for (int k = 0, live = nv; k < nsteps; k++) {
        step *st = &steps[k];
        st->cls = (int)(test_rand_u64(&rng) % 4); /* 0 unary, 1-2 binary, 3 immediate */
        /* Mostly the latest value, so that chains form. */
        st->a = test_rand_u64(&rng) % 3 ? live - 1 : (int)(test_rand_u64(&rng) % (uint64_t)live);
        st->b = (int)(test_rand_u64(&rng) % (uint64_t)live);
        do {
          st->op = st->cls == 0 ? (uint32_t)kUn[test_rand_u64(&rng) % COUNT(kUn)]
                                : (uint32_t)kBin[test_rand_u64(&rng) % COUNT(kBin)];
        } while (st->cls == 0 && !nxv_unary_supported(d, (nxv_unary_op)st->op, t));
        st->first = test_rand_u64(&rng) % 2;
        st->imm = bits_of(t, test_rand_uniform(&rng, -2.0, 2.0));
        /* 0: read right away (later ops read it computed); 1: dropped by
         * the caller (whatever took it in keeps its inputs). */
        st->roll = (int)(test_rand_u64(&rng) % 10);
        live += st->roll == 1 ? 0 : 1;
      }
      int nv0 = nv;
      for (int pass = 0; pass < 2; pass++) {
        bool deferred = pass == 0;
        nv = nv0;
        for (int k = 0; k < nsteps; k++) {
          const step *st = &steps[k];
          nxv_view va = view_of(&vals[st->a], deferred), vb = view_of(&vals[st->b], deferred);
          nxv_tensor *r = NULL;
          nxv_status sr;
          if (st->cls == 0)
            sr = deferred ? nxv_unary(d, (nxv_unary_op)st->op, rank, shape, &va, &r)
                          : nxv_ops_unary_eager(d, (nxv_unary_op)st->op, rank, shape, &va, &r);
          else if (st->cls < 3)
            sr = deferred ? nxv_binary(d, (nxv_binary_op)st->op, rank, shape, &va, &vb, &r)
                          : nxv_ops_binary_eager(d, (nxv_binary_op)st->op, rank, shape, &va,
                                                 &vb, NULL, &r);
          else
            sr = deferred ? nxv_binary_scalar(d, (nxv_binary_op)st->op, rank, shape, &va,
                                              st->first, &st->imm, &r)
                          : nxv_ops_binary_eager(d, (nxv_binary_op)st->op, rank, shape,
                                                 st->first ? NULL : &va,
                                                 st->first ? &va : NULL, &st->imm, &r);
          REQUIRE_OK(sr);
          value *v = &vals[nv];
          if (deferred) {
            memset(v, 0, sizeof *v);
            v->def = r;
            v->dense = true;
          } else {
            v->ref = r;
          }
          if (st->roll == 0 && deferred) {
            reads_midway++;
            unsigned char *tmp = test_xcalloc(n, nxv_dtype_size(t));
            CHECK_OK(nxv_tensor_download(r, 0, n, tmp));
            free(tmp);
          }
          if (st->roll == 1) nxv_tensor_release(r);
          else nv++;
        }
      }
      for (int i = 0; i < nv; i++) {
        results++;
        char label[64];
        snprintf(label, sizeof label, "trial %d rank %u value %d", trial, rank, i);
        same_contents(vals[i].def, vals[i].ref, t, vals[i].dense ? n : 0, label);
        nxv_tensor_release(vals[i].def);
        nxv_tensor_release(vals[i].ref);
      }
      chains++;
    }
  }
  nxv_stats s1;
  REQUIRE_OK(nxv_device_stats(d, &s1));
  CHECK(s1.deferred_ops > s0.deferred_ops);
  CHECK(s1.deferred_fused > s0.deferred_fused);
  printf("  %d chains, %d results compared (%d read midway), %llu ops deferred, "
         "%llu fused kernels\n",
         chains, results, reads_midway,
         (unsigned long long)(s1.deferred_ops - s0.deferred_ops),
         (unsigned long long)(s1.deferred_fused - s0.deferred_fused));
  nxv_device_release(d);
}

/* Downloads n f32 elements of t. */
static void read_f32(nxv_tensor *t, uint64_t n, float *out) {
  CHECK_OK(nxv_tensor_download(t, 0, n, out));
}

/* y = x * 2 + 1 over {R, C}, deferred (two ops, one program). */
static nxv_tensor *affine(nxv_device *d, nxv_tensor *x, int64_t rows, int64_t cols) {
  int64_t shape[2] = {rows, cols};
  nxv_view vx = {x, 0, NULL};
  float two = 2.0f, one = 1.0f;
  nxv_tensor *m = NULL, *y = NULL;
  CHECK_OK(nxv_binary_scalar(d, NXV_MUL, 2, shape, &vx, false, &two, &m));
  if (!m) return NULL;
  nxv_view vm = {m, 0, NULL};
  CHECK_OK(nxv_binary_scalar(d, NXV_ADD, 2, shape, &vm, false, &one, &y));
  nxv_tensor_release(m);
  return y;
}

NXV_TEST(defer, deferred_results_read_by_other_ops) {
  nxv_device *d = test_open_device_deferred();
  REQUIRE(d);
  enum { R = 4, C = 6, N = R * C };
  float x[N], want[N], got[2 * N];
  for (int i = 0; i < N; i++) {
    x[i] = (float)(i % 7) - 2.5f;
    want[i] = x[i] * 2.0f + 1.0f;
  }
  nxv_tensor *tx;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, N, x, &tx));
  nxv_stats s0;
  REQUIRE_OK(nxv_device_stats(d, &s0));

  /* A download. */
  nxv_tensor *y = affine(d, tx, R, C);
  REQUIRE(y);
  read_f32(y, N, got);
  CHECK(memcmp(got, want, sizeof want) == 0);
  nxv_tensor_release(y);

  /* A reduction over the columns. */
  y = affine(d, tx, R, C);
  int64_t shape[2] = {R, C};
  nxv_view vy = {y, 0, NULL};
  nxv_tensor *r;
  REQUIRE_OK(nxv_reduce(d, NXV_REDUCE_SUM, 2, shape, &vy, 2u, &r));
  read_f32(r, R, got);
  for (int i = 0; i < R; i++) {
    double s = 0;
    for (int j = 0; j < C; j++) s += want[i * C + j];
    CHECK_MSG(fabs(got[i] - s) < 1e-4, "row sum %d: %g, want %g", i, got[i], s);
  }
  nxv_tensor_release(r);
  nxv_tensor_release(y);

  /* A product: y (R x C) times ones (C x 2). */
  y = affine(d, tx, R, C);
  float ones[C * 2];
  for (int i = 0; i < C * 2; i++) ones[i] = 1.0f;
  nxv_tensor *tones;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, C * 2, ones, &tones));
  nxv_matmul_desc m = {.a = y, .b = tones, .batch = 1, .m = R, .n = 2, .k = C,
                       .a_strides = {0, C, 1}, .b_strides = {0, 2, 1}};
  nxv_tensor *p;
  REQUIRE_OK(nxv_matmul(d, &m, &p));
  read_f32(p, R * 2, got);
  for (int i = 0; i < R; i++) {
    double s = 0;
    for (int j = 0; j < C; j++) s += want[i * C + j];
    CHECK_MSG(fabs(got[2 * i] - s) < 1e-4 && fabs(got[2 * i + 1] - s) < 1e-4,
              "product row %d: %g %g, want %g", i, got[2 * i], got[2 * i + 1], s);
  }
  nxv_tensor_release(p);
  nxv_tensor_release(tones);
  nxv_tensor_release(y);

  /* A transpose, a copy, a reinterpretation and a conversion. */
  y = affine(d, tx, R, C);
  static const uint32_t perm[2] = {1, 0};
  nxv_tensor *tr, *cp, *ri, *cv;
  REQUIRE_OK(nxv_transpose(d, 2, shape, y, perm, &tr));
  read_f32(tr, N, got);
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) CHECK(got[j * R + i] == want[i * C + j]);
  nxv_tensor_release(tr);
  nxv_tensor_release(y);
  y = affine(d, tx, R, C);
  REQUIRE_OK(nxv_tensor_copy(y, &cp));
  read_f32(cp, N, got);
  CHECK(memcmp(got, want, sizeof want) == 0);
  nxv_tensor_release(cp);
  nxv_tensor_release(y);
  y = affine(d, tx, R, C);
  REQUIRE_OK(nxv_tensor_reinterpret(y, NXV_U32, &ri));
  uint32_t bits[N];
  CHECK_OK(nxv_tensor_download(ri, 0, N, bits));
  CHECK(memcmp(bits, want, sizeof want) == 0);
  nxv_tensor_release(ri);
  nxv_tensor_release(y);
  y = affine(d, tx, R, C);
  vy = (nxv_view){y, 0, NULL};
  REQUIRE_OK(nxv_convert(d, NXV_F64, 2, shape, &vy, &cv));
  double dv[N];
  CHECK_OK(nxv_tensor_download(cv, 0, N, dv));
  for (int i = 0; i < N; i++) CHECK(dv[i] == (double)want[i]);
  nxv_tensor_release(cv);
  nxv_tensor_release(y);

  /* A comparison with a deferred operand. */
  y = affine(d, tx, R, C);
  vy = (nxv_view){y, 0, NULL};
  float thr = 2.0f;
  nxv_tensor *cmp;
  REQUIRE_OK(nxv_compare_scalar(d, NXV_GREATER, 2, shape, &vy, false, &thr, &cmp));
  uint8_t mask[N];
  CHECK_OK(nxv_tensor_download(cmp, 0, N, mask));
  for (int i = 0; i < N; i++) CHECK(mask[i] == (want[i] > 2.0f));
  nxv_tensor_release(cmp);
  nxv_tensor_release(y);

  /* A deferred destination is computed before a copy overwrites part of
   * it: row 1 becomes x's row 0. */
  y = affine(d, tx, R, C);
  int64_t row[1] = {C}, unit[1] = {1};
  nxv_view src = {tx, 0, unit};
  REQUIRE_OK(nxv_copy_into(d, y, C, unit, 1, row, &src));
  read_f32(y, N, got);
  for (int i = 0; i < N; i++) {
    float w = i >= C && i < 2 * C ? x[i - C] : want[i];
    CHECK_MSG(got[i] == w, "copy_into [%d]: %g, want %g", i, got[i], w);
  }
  nxv_tensor_release(y);

  /* Read through another shape: {C, R} dense (its program is taken in),
   * then at an offset (computed first). */
  y = affine(d, tx, R, C);
  int64_t tshape[2] = {C, R};
  vy = (nxv_view){y, 0, NULL};
  float three = 3.0f;
  nxv_tensor *z;
  REQUIRE_OK(nxv_binary_scalar(d, NXV_ADD, 2, tshape, &vy, false, &three, &z));
  read_f32(z, N, got);
  for (int i = 0; i < N; i++) CHECK(got[i] == want[i] + 3.0f);
  nxv_tensor_release(z);
  int64_t half[2] = {R / 2, C};
  vy = (nxv_view){y, C * (R / 2), (int64_t[]){C, 1}};
  REQUIRE_OK(nxv_binary_scalar(d, NXV_ADD, 2, half, &vy, false, &three, &z));
  read_f32(z, N / 2, got);
  for (int i = 0; i < N / 2; i++) CHECK(got[i] == want[N / 2 + i] + 3.0f);
  nxv_tensor_release(z);
  nxv_tensor_release(y);

  /* A program whose input is a row broadcast, read through a reshape:
   * it cannot be taken in, so it is computed first. */
  int64_t bst[2] = {0, 1};
  nxv_tensor *b;
  vy = (nxv_view){tx, 0, bst};
  float half_v = 0.5f;
  REQUIRE_OK(nxv_binary_scalar(d, NXV_MUL, 2, shape, &vy, false, &half_v, &b));
  nxv_view vb = {b, 0, NULL};
  REQUIRE_OK(nxv_binary_scalar(d, NXV_ADD, 2, tshape, &vb, false, &three, &z));
  read_f32(z, N, got);
  for (int i = 0; i < N; i++) CHECK(got[i] == x[i % C] * 0.5f + 3.0f);
  nxv_tensor_release(z);
  nxv_tensor_release(b);

  nxv_stats s1;
  REQUIRE_OK(nxv_device_stats(d, &s1));
  CHECK(s1.deferred_fused - s0.deferred_fused >= 10);
  nxv_tensor_release(tx);
  nxv_device_release(d);
}

/* Programs over large tensors (2^22 elements and more) run through a
 * pipeline specialized for them, numbers as immediates included: the same
 * bits as the ops one kernel each, and one program pipeline created. */
NXV_TEST(defer, large_programs_take_specialized_pipelines) {
  nxv_device *dd = test_open_device_deferred(), *d = test_open_device();
  REQUIRE(dd && d);
  nxv_device_info info;
  REQUIRE_OK(nxv_device_info_get(d, &info));
  const int64_t shape[2] = {2048, 2049}; /* 4,196,352 elements */
  const uint64_t n = 2048ull * 2049ull;
  uint64_t rng = 0xB16;
  const nxv_dtype types[2] = {NXV_F32, NXV_F16};
  for (int ti = 0; ti < 2; ti++) {
    nxv_dtype t = types[ti];
    if (t == NXV_F16 && !info.storage_16bit) continue;
    nxv_tensor *hx = upload_random(d, t, n, &rng), *hy = upload_random(d, t, n, &rng);
    size_t es = nxv_dtype_size(t);
    unsigned char *host = test_xcalloc(n, es);
    CHECK_OK(nxv_tensor_download(hx, 0, n, host));
    nxv_tensor *dx = NULL, *dy = NULL;
    CHECK_OK(nxv_tensor_upload(dd, t, n, host, &dx));
    CHECK_OK(nxv_tensor_download(hy, 0, n, host));
    CHECK_OK(nxv_tensor_upload(dd, t, n, host, &dy));
    free(host);
    uint64_t half = bits_of(t, 0.5), three = bits_of(t, 3.0);
    /* ((x * 0.5 - y) max 3) / (|y| + x) on both devices */
    nxv_tensor *out[2] = {NULL, NULL};
    nxv_device *devs[2] = {dd, d};
    nxv_tensor *xs[2] = {dx, hx}, *ys[2] = {dy, hy};
    nxv_stats before;
    CHECK_OK(nxv_device_stats(dd, &before));
    for (int k = 0; k < 2; k++) {
      nxv_view vx = {xs[k], 0, NULL}, vy = {ys[k], 0, NULL};
      nxv_tensor *a = NULL, *b = NULL, *c = NULL, *e = NULL, *f = NULL;
      CHECK_OK(nxv_binary_scalar(devs[k], NXV_MUL, 2, shape, &vx, false, &half, &a));
      nxv_view va = {a, 0, NULL};
      CHECK_OK(nxv_binary(devs[k], NXV_SUB, 2, shape, &va, &vy, &b));
      nxv_view vb = {b, 0, NULL};
      CHECK_OK(nxv_binary_scalar(devs[k], NXV_MAX, 2, shape, &vb, false, &three, &c));
      CHECK_OK(nxv_unary(devs[k], NXV_ABS, 2, shape, &vy, &e));
      nxv_view ve = {e, 0, NULL};
      CHECK_OK(nxv_binary(devs[k], NXV_ADD, 2, shape, &ve, &vx, &f));
      nxv_view vc = {c, 0, NULL}, vf = {f, 0, NULL};
      CHECK_OK(nxv_binary(devs[k], NXV_DIV, 2, shape, &vc, &vf, &out[k]));
      nxv_tensor *tmp[5] = {a, b, c, e, f};
      for (int i = 0; i < 5; i++)
        if (tmp[i]) nxv_tensor_release(tmp[i]);
    }
    if (out[0] && out[1]) CHECK(same_contents(out[0], out[1], t, n, "large program"));
    nxv_stats after;
    CHECK_OK(nxv_device_stats(dd, &after));
    CHECK_MSG(after.deferred_fused > before.deferred_fused, "%s: nothing fused",
              nxv_dtype_name(t));
    CHECK_MSG(after.program_pipelines > before.program_pipelines,
              "%s: no pipeline specialized for the program", nxv_dtype_name(t));
    for (int k = 0; k < 2; k++)
      if (out[k]) nxv_tensor_release(out[k]);
    nxv_tensor *all[4] = {hx, hy, dx, dy};
    for (int i = 0; i < 4; i++)
      if (all[i]) nxv_tensor_release(all[i]);
  }
  nxv_device_release(dd);
  nxv_device_release(d);
}

NXV_TEST(defer, unread_results_queue_nothing) {
  nxv_device *d = test_open_device_deferred();
  REQUIRE(d);
  float x[64];
  for (int i = 0; i < 64; i++) x[i] = (float)i;
  nxv_tensor *tx;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, 64, x, &tx));
  REQUIRE_OK(nxv_device_synchronize(d));
  nxv_stats s0, s1;
  REQUIRE_OK(nxv_device_stats(d, &s0));
  int64_t shape[1] = {64};
  nxv_view v = {tx, 0, NULL};
  for (int i = 0; i < 100; i++) {
    nxv_tensor *a, *b;
    REQUIRE_OK(nxv_unary(d, NXV_NEG, 1, shape, &v, &a));
    nxv_view va = {a, 0, NULL};
    REQUIRE_OK(nxv_binary(d, NXV_ADD, 1, shape, &va, &v, &b));
    nxv_tensor_release(a);
    nxv_tensor_release(b);
  }
  REQUIRE_OK(nxv_device_synchronize(d));
  REQUIRE_OK(nxv_device_stats(d, &s1));
  /* The synchronize's marker is the one op queued. */
  CHECK_MSG(s1.ops_enqueued - s0.ops_enqueued <= 1, "%llu ops queued",
            (unsigned long long)(s1.ops_enqueued - s0.ops_enqueued));
  CHECK(s1.deferred_ops - s0.deferred_ops == 200);
  CHECK(s1.pool_live_buffers == s0.pool_live_buffers);
  nxv_tensor_release(tx);
  nxv_device_release(d);
}

NXV_TEST(defer, long_chains_and_many_inputs) {
  nxv_device *d = test_open_device_deferred();
  REQUIRE(d);
  enum { N = 1000, STEPS = 1000, INPUTS = 30 };
  uint64_t rng = 0x10C4A1;
  nxv_tensor *x = upload_random(d, NXV_F32, N, &rng);
  REQUIRE(x);
  int64_t shape[1] = {N};
  nxv_stats s0, s1;
  REQUIRE_OK(nxv_device_stats(d, &s0));
  /* x * 0.999, + 0.001, negated, abs, again and again: deferred, then one
   * kernel per op (a kernel computes a waiting deferred result). */
  nxv_tensor *chain[2];
  for (int pass = 0; pass < 2; pass++) {
    nxv_tensor *c = x;
    nxv_tensor_retain(x);
    for (int k = 0; k < STEPS; k++) {
      nxv_view v = {c, 0, NULL};
      nxv_tensor *next;
      if (k % 2) {
        nxv_unary_op op = k % 4 == 1 ? NXV_NEG : NXV_ABS;
        REQUIRE_OK(pass ? nxv_ops_unary_eager(d, op, 1, shape, &v, &next)
                        : nxv_unary(d, op, 1, shape, &v, &next));
      } else {
        float cst = k % 4 ? 0.999f : 0.001f;
        nxv_binary_op op = k % 4 ? NXV_MUL : NXV_ADD;
        REQUIRE_OK(pass ? nxv_ops_binary_eager(d, op, 1, shape, &v, NULL, &cst, &next)
                        : nxv_binary_scalar(d, op, 1, shape, &v, false, &cst, &next));
      }
      nxv_tensor_release(c);
      c = next;
    }
    chain[pass] = c;
    if (pass == 0) REQUIRE_OK(nxv_device_stats(d, &s1));
  }
  nxv_tensor *cd = chain[0], *cr = chain[1];
  CHECK(same_contents(cd, cr, NXV_F32, N, "long chain"));
  uint64_t fused = s1.deferred_fused - s0.deferred_fused;
  CHECK_MSG(fused >= STEPS / NXV_FUSED_MAX_INSTRS && fused <= STEPS / 8,
            "%llu fused kernels for %d ops", (unsigned long long)fused, STEPS);
  nxv_tensor_release(cd);
  nxv_tensor_release(cr);

  /* The sum of INPUTS distinct tensors: more inputs than one program holds. */
  nxv_tensor *in[INPUTS];
  for (int k = 0; k < INPUTS; k++) in[k] = upload_random(d, NXV_F32, N, &rng);
  for (int pass = 0; pass < 2; pass++) {
    nxv_tensor *c = in[0];
    nxv_tensor_retain(c);
    for (int k = 1; k < INPUTS; k++) {
      nxv_view v = {c, 0, NULL}, vk = {in[k], 0, NULL};
      nxv_tensor *next;
      REQUIRE_OK(pass ? nxv_ops_binary_eager(d, NXV_ADD, 1, shape, &v, &vk, NULL, &next)
                      : nxv_binary(d, NXV_ADD, 1, shape, &v, &vk, &next));
      nxv_tensor_release(c);
      c = next;
    }
    chain[pass] = c;
  }
  cd = chain[0];
  cr = chain[1];
  CHECK(same_contents(cd, cr, NXV_F32, N, "many inputs"));
  nxv_tensor_release(cd);
  nxv_tensor_release(cr);
  for (int k = 0; k < INPUTS; k++) nxv_tensor_release(in[k]);
  nxv_tensor_release(x);
  nxv_device_release(d);
}

/* Computing a deferred result fails while device memory is exhausted; the
 * result stays deferred, loses nothing, and is computed once memory is
 * free again. */
NXV_TEST(defer, failed_computation_stays_deferred) {
  nxv_device_config cfg = {.disable_disk_cache = true, .pool_limit_bytes = 8u << 20,
                           .defer_elementwise = true};
  nxv_device *d;
  REQUIRE_OK(nxv_device_open(-1, &cfg, &d));
  enum { N = 1 << 20 }; /* 4 MiB of f32 */
  float *x = test_xcalloc(N, 4), *got = test_xcalloc(N, 4);
  for (int i = 0; i < N; i++) x[i] = (float)(i % 1000);
  nxv_tensor *tx, *filler = NULL;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, N, x, &tx));
  int64_t shape[1] = {N};
  nxv_view v = {tx, 0, NULL};
  float two = 2.0f;
  nxv_tensor *y;
  REQUIRE_OK(nxv_binary_scalar(d, NXV_MUL, 1, shape, &v, false, &two, &y));
  /* The rest of the pool. */
  nxv_status st = nxv_tensor_empty(d, NXV_F32, N, &filler);
  if (st == NXV_OK) {
    char msg[512];
    st = nxv_tensor_download(y, 0, N, got);
    snprintf(msg, sizeof msg, "%s", nxv_last_error());
    CHECK_MSG(st == NXV_ERR_OUT_OF_DEVICE_MEMORY, "download of a deferred result with "
              "the pool full: %s (%s)", nxv_status_name(st), msg);
    nxv_tensor_release(filler);
  } else {
    CHECK_MSG(false, "cannot fill the pool: %s", nxv_last_error());
  }
  CHECK_OK(nxv_tensor_download(y, 0, N, got));
  int bad = 0;
  for (int i = 0; i < N && bad < 3; i++)
    if (got[i] != x[i] * 2.0f) CHECK_MSG(++bad > 3, "[%d] %g, want %g", i, got[i], x[i] * 2);
  nxv_tensor_release(y);
  nxv_tensor_release(tx);
  free(x);
  free(got);
  nxv_device_release(d);
}

NXV_TEST(defer, off_by_default_each_op_queued) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, got[8];
  nxv_tensor *tx, *a, *b;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, 8, x, &tx));
  REQUIRE_OK(nxv_device_synchronize(d));
  nxv_stats s0, s1;
  REQUIRE_OK(nxv_device_stats(d, &s0));
  int64_t shape[1] = {8};
  nxv_view v = {tx, 0, NULL};
  REQUIRE_OK(nxv_unary(d, NXV_NEG, 1, shape, &v, &a));
  nxv_view va = {a, 0, NULL};
  REQUIRE_OK(nxv_binary(d, NXV_MUL, 1, shape, &va, &v, &b));
  REQUIRE_OK(nxv_device_stats(d, &s1));
  CHECK(s1.deferred_ops == s0.deferred_ops);
  /* Two kernels and each output's poison fill. */
  CHECK_MSG(s1.ops_enqueued - s0.ops_enqueued == 4, "%llu ops queued",
            (unsigned long long)(s1.ops_enqueued - s0.ops_enqueued));
  CHECK_OK(nxv_tensor_download(b, 0, 8, got));
  for (int i = 0; i < 8; i++) CHECK(got[i] == -x[i] * x[i]);
  nxv_tensor_release(a);
  nxv_tensor_release(b);
  nxv_tensor_release(tx);
  nxv_device_release(d);
}

/* Threads take one deferred result into their own ops, read it and drop
 * their results, all at once. */
enum { SHARE_THREADS = 6, SHARE_ROUNDS = 20, SHARE_N = 256 };

typedef struct share_ctx {
  nxv_device *d;
  nxv_tensor *shared; /* deferred x * 2 + 1 */
  const float *x;
  int id;
  int bad;
} share_ctx;

static void *share_thread(void *arg) {
  share_ctx *c = arg;
  int64_t shape[1] = {SHARE_N};
  float got[SHARE_N];
  for (int r = 0; r < SHARE_ROUNDS; r++) {
    nxv_view v = {c->shared, 0, NULL};
    float k = (float)(c->id * 100 + r);
    nxv_tensor *q = NULL;
    if (nxv_binary_scalar(c->d, NXV_ADD, 1, shape, &v, false, &k, &q) != NXV_OK) {
      c->bad++;
      continue;
    }
    nxv_tensor *read = (r + c->id) % 3 == 0 ? c->shared : q;
    if (nxv_tensor_download(read, 0, SHARE_N, got) != NXV_OK) c->bad++;
    else
      for (int i = 0; i < SHARE_N; i++) {
        float want = c->x[i] * 2.0f + 1.0f;
        if (read == q) want += k;
        if (got[i] != want) {
          c->bad++;
          break;
        }
      }
    nxv_tensor_release(q);
  }
  return NULL;
}

NXV_TEST(concurrency, deferred_result_shared_by_threads) {
  nxv_device *d = test_open_device_deferred();
  REQUIRE(d);
  float x[SHARE_N];
  for (int i = 0; i < SHARE_N; i++) x[i] = (float)i * 0.25f;
  nxv_tensor *tx;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, SHARE_N, x, &tx));
  for (int round = 0; round < 4; round++) {
    nxv_tensor *shared = affine(d, tx, 1, SHARE_N);
    REQUIRE(shared);
    share_ctx ctx[SHARE_THREADS];
    pthread_t th[SHARE_THREADS];
    for (int i = 0; i < SHARE_THREADS; i++) {
      ctx[i] = (share_ctx){.d = d, .shared = shared, .x = x, .id = i};
      REQUIRE(pthread_create(&th[i], NULL, share_thread, &ctx[i]) == 0);
    }
    for (int i = 0; i < SHARE_THREADS; i++) {
      pthread_join(th[i], NULL);
      CHECK_MSG(ctx[i].bad == 0, "round %d thread %d: %d wrong reads", round, i, ctx[i].bad);
    }
    nxv_tensor_release(shared);
  }
  nxv_tensor_release(tx);
  nxv_device_release(d);
}
