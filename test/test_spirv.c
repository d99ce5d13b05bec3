/*
 * SPIR-V pruning (kernels/spv_prune.h): every embedded module pruned for
 * several specializations is valid SPIR-V (spirv-val, where installed);
 * pruning removes the ops a specialization rules out; malformed input is
 * left alone; and kernels created from pruned modules compute bitwise what
 * the whole modules compute (a device opened with no_spirv_prune).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/spv_prune.h"
#include "spirv.h"
#include "test.h"

static bool have_spirv_val(void) {
  return system("spirv-val --version > /dev/null 2>&1") == 0;
}

/* spirv-val's verdict on a module: true when valid. */
static bool spirv_valid(const uint32_t *w, size_t nwords, const char *dir) {
  char path[256];
  snprintf(path, sizeof path, "%s/m.spv", dir);
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  bool ok = fwrite(w, 4, nwords, f) == nwords;
  ok = fclose(f) == 0 && ok;
  if (!ok) return false;
  char cmd[512];
  snprintf(cmd, sizeof cmd, "spirv-val --target-env vulkan1.2 %s > %s/log 2>&1", path, dir);
  return system(cmd) == 0;
}

static uint64_t hash_words(const uint32_t *w, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) {
    h ^= w[i];
    h *= 1099511628211ull;
  }
  return h;
}

/* A random fused program of nin inputs and nins instructions (a quarter
 * of its binary ops and comparisons with a literal), as specialization
 * constants 3 .. 7 + nins (fused.comp). */
static uint32_t fused_specs(uint64_t *rng, nxv_spv_spec *s) {
  uint32_t nin = 1 + (uint32_t)(test_rand_u64(rng) % 4);
  uint32_t nins = 1 + (uint32_t)(test_rand_u64(rng) % NXV_FUSED_MAX_INSTRS);
  uint32_t n = 0;
  s[n++] = (nxv_spv_spec){0, 64};
  s[n++] = (nxv_spv_spec){1, 0};
  s[n++] = (nxv_spv_spec){2, 0};
  s[n++] = (nxv_spv_spec){3, nin};
  s[n++] = (nxv_spv_spec){4, nins};
  s[n++] = (nxv_spv_spec){5, (uint32_t)(test_rand_u64(rng) % 16)};
  s[n++] = (nxv_spv_spec){6, (uint32_t)(test_rand_u64(rng) % 4)};
  s[n++] = (nxv_spv_spec){7, 0};
  for (uint32_t k = 0; k < nins; k++) {
    uint32_t cls = (uint32_t)(test_rand_u64(rng) % 4);
    uint32_t op = (uint32_t)(test_rand_u64(rng) % (cls == 0 ? 32 : cls == 1 ? 10 : 9));
    if (cls == 3) op = 0;
    uint32_t regs = nin + k;
    uint32_t a = (uint32_t)(test_rand_u64(rng) % regs), b = (uint32_t)(test_rand_u64(rng) % regs),
             c = (uint32_t)(test_rand_u64(rng) % regs);
    bool lit = (cls == 1 || cls == 2) && test_rand_u64(rng) % 4 == 0;
    s[n++] = (nxv_spv_spec){
        8 + k, lit ? NXV_FUSED_INSTR_LIT(cls, op, a, 0x3C00)
                   : NXV_FUSED_INSTR(cls, op, a, cls >= 1 ? b : 0, cls == 3 ? c : 0)};
  }
  return n;
}

NXV_TEST(spirv, pruned_modules_are_valid) {
  bool validate = have_spirv_val();
  if (!validate) printf("  spirv-val not found: modules are pruned, not validated\n");
  char dir[] = "/tmp/nxv_spirv_XXXXXX";
  REQUIRE(mkdtemp(dir) != NULL);
  static const uint32_t kCombos[][2] = {{0, 0}, {1, 1}, {6, 2}, {10, 3}, {21, 0}, {33, 4}};
  enum { NCOMBO = sizeof kCombos / sizeof kCombos[0], NFUSED = 12 };
  uint64_t rng = 0x5B1C;
  int pruned = 0, validated = 0, invalid_whole = 0;
  for (int m = 0; m < NXV_SPV_COUNT; m++) {
    const uint32_t *code = nxv_spv_code[m];
    size_t nwords = nxv_spv_size[m] / 4;
    /* Modules this spirv-val cannot read (extensions newer than it) are
     * pruned but not validated. */
    bool check = validate && spirv_valid(code, nwords, dir);
    if (validate && !check) invalid_whole++;
    bool fused = strncmp(nxv_spv_name[m], "fused", 5) == 0;
    int ncases = fused ? NFUSED : NCOMBO;
    uint64_t seen[NFUSED > NCOMBO ? NFUSED : NCOMBO];
    int nseen = 0;
    for (int c = 0; c < ncases; c++) {
      nxv_spv_spec specs[8 + NXV_FUSED_MAX_INSTRS];
      uint32_t nspecs;
      if (fused) {
        nspecs = fused_specs(&rng, specs);
      } else {
        specs[0] = (nxv_spv_spec){0, 64};
        specs[1] = (nxv_spv_spec){1, kCombos[c][0]};
        specs[2] = (nxv_spv_spec){2, kCombos[c][1]};
        nspecs = 3;
      }
      uint32_t *out = NULL;
      size_t nout = 0;
      CHECK_OK(nxv_spv_prune(code, nwords, specs, nspecs, &out, &nout));
      if (!out) continue;
      pruned++;
      CHECK_MSG(nout <= nwords + 16 && out[0] == code[0] && out[3] == code[3],
                "%s: pruned module of %zu words from %zu", nxv_spv_name[m], nout, nwords);
      uint64_t h = hash_words(out, nout);
      bool dup = false;
      for (int k = 0; k < nseen; k++) dup = dup || seen[k] == h;
      if (check && !dup) {
        seen[nseen++] = h;
        validated++;
        CHECK_MSG(spirv_valid(out, nout, dir), "%s pruned for spec case %d is not valid SPIR-V",
                  nxv_spv_name[m], c);
      }
      free(out);
    }
  }
  printf("  %d pruned modules, %d validated (%d whole modules unreadable by spirv-val)\n",
         pruned, validated, invalid_whole);
  CHECK(pruned > NXV_SPV_COUNT);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

NXV_TEST(spirv, pruning_strips_the_ops_ruled_out) {
  const uint32_t *u = nxv_spv_code[NXV_SPV_UNARY_F64_F64];
  size_t un = nxv_spv_size[NXV_SPV_UNARY_F64_F64] / 4;
  nxv_spv_spec neg[3] = {{0, 64}, {1, NXV_NEG}, {2, 0}}, ex[3] = {{0, 64}, {1, NXV_EXP}, {2, 0}};
  uint32_t *a = NULL, *b = NULL;
  size_t an = 0, bn = 0;
  REQUIRE_OK(nxv_spv_prune(u, un, neg, 3, &a, &an));
  REQUIRE_OK(nxv_spv_prune(u, un, ex, 3, &b, &bn));
  REQUIRE(a && b);
  /* Negation needs none of the math library; exp needs exp64 alone. */
  CHECK_MSG(an * 4 < un, "unary f64 for negate: %zu of %zu words", an, un);
  CHECK_MSG(bn > an && bn * 3 < un, "unary f64 for exp: %zu of %zu words", bn, un);
  free(a);
  free(b);

  /* A one-instruction fused program keeps one slot's op. */
  const uint32_t *f = nxv_spv_code[NXV_SPV_FUSED_F32_PRECISE];
  size_t fn = nxv_spv_size[NXV_SPV_FUSED_F32_PRECISE] / 4;
  nxv_spv_spec prog[8] = {{0, 64}, {1, 0}, {2, 0}, {3, 1}, {4, 1}, {5, 0}, {6, 0},
                          {7, NXV_FUSED_INSTR(NXV_FUSED_UNARY, NXV_EXP, 0, 0, 0)}};
  REQUIRE_OK(nxv_spv_prune(f, fn, prog, 8, &a, &an));
  REQUIRE(a);
  CHECK_MSG(an * 6 < fn, "fused f32 (precise) for one exp: %zu of %zu words", an, fn);
  free(a);

  /* Not a module, or a truncated one: left alone. */
  uint32_t junk[64];
  for (int i = 0; i < 64; i++) junk[i] = 0xDEADBEEFu * (uint32_t)i;
  CHECK_OK(nxv_spv_prune(junk, 64, neg, 3, &a, &an));
  CHECK(a == NULL && an == 0);
  CHECK_OK(nxv_spv_prune(u, 3, neg, 3, &a, &an));
  CHECK(a == NULL);
  uint32_t *cut = test_xcalloc(un, 4);
  memcpy(cut, u, un * 4);
  CHECK_OK(nxv_spv_prune(cut, un / 2 + 1, neg, 3, &a, &an)); /* ends mid-function */
  CHECK(a == NULL);
  size_t at = 5; /* the first instruction past a third of the module */
  while (at < un / 3) at += cut[at] >> 16;
  cut[at] = 0; /* made an instruction of zero words */
  CHECK_OK(nxv_spv_prune(cut, un, neg, 3, &a, &an));
  CHECK(a == NULL);
  free(cut);
}

/* Runs op kind k on device d over x (and y) of type t: unary, binary,
 * compare or a fused program. */
enum { K_UNARY, K_BINARY, K_COMPARE, K_FUSED };
typedef struct prune_case {
  int kind;
  nxv_dtype type;
  int op;
} prune_case;

static nxv_tensor *run_case(nxv_device *d, const prune_case *c, nxv_tensor *x, nxv_tensor *y,
                            int64_t n) {
  nxv_view vx = {x, 0, NULL}, vy = {y, 0, NULL};
  int64_t shape[1] = {n};
  nxv_tensor *out = NULL;
  nxv_status st;
  if (c->kind == K_UNARY) {
    st = nxv_unary(d, (nxv_unary_op)c->op, 1, shape, &vx, &out);
  } else if (c->kind == K_BINARY) {
    st = nxv_binary(d, (nxv_binary_op)c->op, 1, shape, &vx, &vy, &out);
  } else if (c->kind == K_COMPARE) {
    st = nxv_compare(d, (nxv_compare_op)c->op, 1, shape, &vx, &vy, &out);
  } else {
    /* exp(x) + y, log of that, divided by x, compared with y, selected */
    const uint32_t prog[6] = {
        NXV_FUSED_INSTR(NXV_FUSED_UNARY, NXV_EXP, 0, 0, 0),
        NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_ADD, 2, 1, 0),
        NXV_FUSED_INSTR(NXV_FUSED_UNARY, NXV_LOG, 3, 0, 0),
        NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_POW, 4, 0, 0),
        NXV_FUSED_INSTR(NXV_FUSED_COMPARE, NXV_LESS, 5, 1, 0),
        NXV_FUSED_INSTR(NXV_FUSED_SELECT, 0, 6, 5, 4)};
    nxv_view in[2] = {vx, vy};
    st = nxv_fused(d, c->type, 1, shape, 2, in, 6, prog, &out);
  }
  CHECK_OK(st);
  return st == NXV_OK ? out : NULL;
}

NXV_TEST(spirv, pruned_kernels_match_whole_modules) {
  nxv_device *pruned = test_open_device();
  REQUIRE(pruned);
  nxv_device_config cfg = {.disable_disk_cache = true, .poison_outputs = true,
                           .no_spirv_prune = true};
  nxv_device *whole = NULL;
  REQUIRE_OK(nxv_device_open(-1, &cfg, &whole));
  nxv_device_info info;
  REQUIRE_OK(nxv_device_info_get(pruned, &info));
  const prune_case cases[] = {
      {K_UNARY, NXV_F32, NXV_EXP},      {K_UNARY, NXV_F32, NXV_TANH},
      {K_UNARY, NXV_F64, NXV_ERF},      {K_UNARY, NXV_F16, NXV_SIN},
      {K_BINARY, NXV_F64, NXV_POW},     {K_BINARY, NXV_F32, NXV_ATAN2},
      {K_COMPARE, NXV_F64, NXV_LESS},   {K_FUSED, NXV_F32, 0},
      {K_FUSED, NXV_F64, 0},
  };
  enum { N = 1000 };
  uint64_t rng = 0xC0DE;
  int compared = 0;
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const prune_case *c = &cases[ci];
    if (c->type == NXV_F64 && !info.float64) continue;
    if (c->type == NXV_F16 && !info.storage_16bit) continue;
    size_t es = nxv_dtype_size(c->type);
    unsigned char *hx = test_xcalloc(N, es), *hy = test_xcalloc(N, es);
    for (int i = 0; i < N; i++) {
      uint64_t bx = nxv_test_encode(c->type, (nxv_test_val){.f = test_rand_uniform(&rng, -4, 4)});
      uint64_t by = nxv_test_encode(c->type, (nxv_test_val){.f = test_rand_uniform(&rng, -4, 4)});
      memcpy(hx + (size_t)i * es, &bx, es);
      memcpy(hy + (size_t)i * es, &by, es);
    }
    nxv_tensor *t[2][2] = {{NULL, NULL}, {NULL, NULL}}, *out[2] = {NULL, NULL};
    nxv_device *devs[2] = {pruned, whole};
    for (int k = 0; k < 2; k++) {
      CHECK_OK(nxv_tensor_upload(devs[k], c->type, N, hx, &t[k][0]));
      CHECK_OK(nxv_tensor_upload(devs[k], c->type, N, hy, &t[k][1]));
      if (t[k][0] && t[k][1]) out[k] = run_case(devs[k], c, t[k][0], t[k][1], N);
    }
    if (out[0] && out[1]) {
      size_t ob = nxv_dtype_size(nxv_tensor_dtype(out[0]));
      unsigned char *g0 = test_xcalloc(N, ob), *g1 = test_xcalloc(N, ob);
      CHECK_OK(nxv_tensor_download(out[0], 0, N, g0));
      CHECK_OK(nxv_tensor_download(out[1], 0, N, g1));
      int bad = 0;
      for (int i = 0; i < N; i++, compared++)
        if (memcmp(g0 + (size_t)i * ob, g1 + (size_t)i * ob, ob) != 0 && bad++ < 3)
          CHECK_MSG(false, "case %zu (%s) [%d]: pruned and whole modules differ", ci,
                    nxv_dtype_name(c->type), i);
      free(g0);
      free(g1);
    }
    for (int k = 0; k < 2; k++) {
      if (out[k]) nxv_tensor_release(out[k]);
      if (t[k][0]) nxv_tensor_release(t[k][0]);
      if (t[k][1]) nxv_tensor_release(t[k][1]);
    }
    free(hx);
    free(hy);
  }
  nxv_stats s0, s1;
  CHECK_OK(nxv_device_stats(pruned, &s0));
  CHECK_OK(nxv_device_stats(whole, &s1));
  CHECK_MSG(s0.pipelines_pruned > 0 && s0.pipelines_pruned <= s0.pipelines,
            "%llu of %llu pipelines pruned", (unsigned long long)s0.pipelines_pruned,
            (unsigned long long)s0.pipelines);
  CHECK(s1.pipelines > 0 && s1.pipelines_pruned == 0);
  printf("  %d elements compared, %llu of %llu pipelines pruned\n", compared,
         (unsigned long long)s0.pipelines_pruned, (unsigned long long)s0.pipelines);
  nxv_device_release(whole);
  nxv_device_release(pruned);
}
