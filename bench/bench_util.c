/*
 * bench_util.c - failure handling, timing, element encodings, output and
 * the recorded figures of the benchmark (declared in bench.h).
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"

/* ------------------------------------------------------------------ */
/* Failure handling                                                    */
/* ------------------------------------------------------------------ */

void die_status(const char *expr, const char *file, int line, nxv_status st) {
  fflush(stdout);
  fprintf(stderr, "nxv_bench: %s:%d: %s returned %s: %s\n", file, line, expr,
          nxv_status_name(st), nxv_last_error());
  exit(EXIT_FAILURE);
}

void die(const char *fmt, ...) {
  va_list ap;
  fflush(stdout);
  va_start(ap, fmt);
  fputs("nxv_bench: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(EXIT_FAILURE);
}

void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p) die("out of host memory");
  return p;
}

void *xmalloc_bytes(uint64_t bytes) {
  if (bytes > SIZE_MAX) die("a host buffer of %" PRIu64 " bytes", bytes);
  void *p = malloc(bytes ? (size_t)bytes : 1);
  if (!p) die("out of host memory (%" PRIu64 " bytes)", bytes);
  return p;
}

/* ------------------------------------------------------------------ */
/* Timing and statistics                                               */
/* ------------------------------------------------------------------ */

double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void gpu_warm(const options *o, nxv_device *dev, const nxv_device_info *info) {
  if (!o->warm_ms || info->type == NXV_DEVICE_CPU) return;
  const uint64_t n = 16u << 20; /* 64 MiB of f32 */
  const float one = 1.0f;
  nxv_tensor *src;
  NXV_CHECK(nxv_fill(dev, NXV_F32, n, &one, &src));
  const double end = now_s() + o->warm_ms * 1e-3;
  do {
    for (int i = 0; i < 16; i++) {
      nxv_tensor *y;
      NXV_CHECK(nxv_tensor_copy(src, &y));
      nxv_tensor_release(y);
    }
    NXV_CHECK(nxv_device_synchronize(dev));
  } while (now_s() < end);
  nxv_tensor_release(src);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double median_of(const double *v, uint32_t n) {
  double *s = xcalloc(n, sizeof *s);
  memcpy(s, v, n * sizeof *s);
  qsort(s, n, sizeof *s, cmp_double);
  double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  free(s);
  return m;
}

double min_of(const double *v, uint32_t n) {
  double m = v[0];
  for (uint32_t i = 1; i < n; i++)
    if (v[i] < m) m = v[i];
  return m;
}

uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t hash64(uint64_t seed, uint64_t index) {
  uint64_t s = seed * 0xD1B54A32D192ED03ull + index;
  return splitmix64(&s);
}

/* ------------------------------------------------------------------ */
/* Elements                                                            */
/* ------------------------------------------------------------------ */

uint16_t f16_bits(double x) {
  uint16_t sign = signbit(x) ? 0x8000u : 0u;
  if (isnan(x)) return 0x7E00u;
  x = fabs(x);
  if (x >= 65520.0) return sign | 0x7C00u; /* past 65504 + half an ulp */
  if (x < 0x1p-14) /* subnormal: units of 2^-24 */
    return sign | (uint16_t)nearbyint(x * 0x1p24);
  int e;
  double m = nearbyint(ldexp(frexp(x, &e), 11)); /* 1024 .. 2048 */
  if (m == 2048.0) {
    m = 1024.0;
    e++;
  }
  return sign | (uint16_t)((e + 14) << 10) | (uint16_t)(m - 1024.0);
}

double f16_value(uint16_t h) {
  int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  double v = e == 0 ? ldexp(m, -24)
             : e == 31 ? (m ? NAN : INFINITY)
                       : ldexp(m + 1024, e - 25);
  return (h & 0x8000u) ? -v : v;
}

uint16_t bf16_bits(double x) {
  float f = (float)x;
  uint32_t u;
  if (isnan(f)) return 0x7FC0u;
  memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u); /* round to nearest even */
  return (uint16_t)(u >> 16);
}

double bf16_value(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

void store_elem(nxv_dtype t, void *base, uint64_t i, double x) {
  switch (t) {
    case NXV_F16: ((uint16_t *)base)[i] = f16_bits(x); break;
    case NXV_BF16: ((uint16_t *)base)[i] = bf16_bits(x); break;
    case NXV_F32: ((float *)base)[i] = (float)x; break;
    case NXV_F64: ((double *)base)[i] = x; break;
    case NXV_U8: ((uint8_t *)base)[i] = (uint8_t)x; break;
    default: die("store_elem: dtype %s", nxv_dtype_name(t));
  }
}

double load_elem(nxv_dtype t, const void *base, uint64_t i) {
  switch (t) {
    case NXV_F16: return f16_value(((const uint16_t *)base)[i]);
    case NXV_BF16: return bf16_value(((const uint16_t *)base)[i]);
    case NXV_F32: return ((const float *)base)[i];
    case NXV_F64: return ((const double *)base)[i];
    case NXV_U8: return ((const uint8_t *)base)[i];
    default: die("load_elem: dtype %s", nxv_dtype_name(t));
  }
}

double download_elem(nxv_tensor *t, uint64_t i) {
  unsigned char buf[8];
  NXV_CHECK(nxv_tensor_download(t, i, 1, buf));
  return load_elem(nxv_tensor_dtype(t), buf, 0);
}

double unit_roundoff(nxv_dtype t) {
  switch (t) {
    case NXV_F16: return 0x1p-11;
    case NXV_BF16: return 0x1p-8;
    case NXV_F32: return 0x1p-24;
    case NXV_F64: return 0x1p-53;
    default: die("unit_roundoff: dtype %s", nxv_dtype_name(t));
  }
}

/* ------------------------------------------------------------------ */
/* Legacy stdout CSV                                                   */
/* ------------------------------------------------------------------ */

static void csv_field(FILE *f, const char *s) {
  if (!strpbrk(s, ",\"\n")) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

void csv_row(const char *test, const char *mode, const char *metric,
             const char *value, const char *unit) {
  csv_field(stdout, test);
  putchar(',');
  csv_field(stdout, mode);
  putchar(',');
  csv_field(stdout, metric);
  putchar(',');
  csv_field(stdout, value);
  putchar(',');
  csv_field(stdout, unit);
  putchar('\n');
}

void csv_num(const char *test, const char *mode, const char *metric,
             double value, const char *unit) {
  char buf[64];
  if (value == floor(value) && fabs(value) < 9007199254740992.0)
    snprintf(buf, sizeof buf, "%.0f", value); /* counts, bytes */
  else
    snprintf(buf, sizeof buf, "%.6g", value);
  csv_row(test, mode, metric, buf, unit);
}

/* ------------------------------------------------------------------ */
/* Schema records                                                      */
/* ------------------------------------------------------------------ */

typedef struct figure {
  char test[32], dtype[8], shape[48], metric[16];
  double value;
} figure;

static figure *g_figs;
static size_t g_nfigs, g_capfigs;
static bool g_legacy_csv;

void set_legacy_csv(bool on) { g_legacy_csv = on; }
bool legacy_csv(void) { return g_legacy_csv; }

static void copy_field(char *dst, size_t cap, const char *src, const char *what) {
  if (strlen(src) >= cap || strpbrk(src, ",\"\n"))
    die("record: %s '%s' is too long or has CSV special characters", what, src);
  memcpy(dst, src, strlen(src) + 1);
}

void record(const char *test, const char *dtype, const char *shape,
            const char *metric, double value) {
  if (!isfinite(value))
    die("record: %s %s %s %s is not finite", test, dtype, shape, metric);
  if (g_nfigs == g_capfigs) {
    size_t cap = g_capfigs ? 2 * g_capfigs : 64;
    figure *f = realloc(g_figs, cap * sizeof *f);
    if (!f) die("out of host memory");
    g_figs = f;
    g_capfigs = cap;
  }
  figure *f = &g_figs[g_nfigs++];
  copy_field(f->test, sizeof f->test, test, "test");
  copy_field(f->dtype, sizeof f->dtype, dtype, "dtype");
  copy_field(f->shape, sizeof f->shape, shape, "shape");
  copy_field(f->metric, sizeof f->metric, metric, "metric");
  f->value = value;
}

static const char *unit_of(const char *metric) {
  if (!strcmp(metric, "us_per_op") || !strcmp(metric, "us")) return "us";
  if (!strcmp(metric, "ms")) return "ms";
  if (!strcmp(metric, "GB_s")) return "GB/s";
  if (!strcmp(metric, "TFLOP_s")) return "TFLOP/s";
  return "";
}

void emit(const char *test, const char *dtype, const char *shape,
          const char *metric, double value) {
  record(test, dtype, shape, metric, value);
  if (g_legacy_csv) {
    char mode[64];
    snprintf(mode, sizeof mode, "%s %s", dtype, shape);
    csv_num(test, mode, metric, value, unit_of(metric));
  }
}

void results_write(const char *path, const char *device_name) {
  FILE *f = fopen(path, "w");
  if (!f) die("--csv-out: cannot open '%s' for writing", path);
  /* The device name goes in the shape column; CSV special characters
   * become ';' and ' ' so that a plain split on commas still works. */
  char name[256];
  snprintf(name, sizeof name, "%s", device_name);
  for (char *p = name; *p; p++) {
    if (*p == ',') *p = ';';
    else if (*p == '"' || *p == '\n' || *p == '\r') *p = ' ';
  }
  fprintf(f, "impl,test,dtype,shape,metric,value\n");
  fprintf(f, "hw,device,-,%s,count,1\n", name);
  for (size_t i = 0; i < g_nfigs; i++) {
    const figure *g = &g_figs[i];
    fprintf(f, "nx_vulkan_c,%s,%s,%s,%s,%.6g\n", g->test, g->dtype, g->shape,
            g->metric, g->value);
  }
  if (ferror(f) | fclose(f)) die("--csv-out: error writing '%s'", path);
}

void results_free(void) {
  free(g_figs);
  g_figs = NULL;
  g_nfigs = g_capfigs = 0;
}

/* ------------------------------------------------------------------ */
/* Devices                                                             */
/* ------------------------------------------------------------------ */

uint32_t g_kick_nodes;
uint64_t g_max_batch_cost;
bool g_no_gpu_timestamps;
bool g_defer_elementwise;
bool g_no_spirv_prune;
int32_t g_pipeline_threads;

nxv_device *open_device(int32_t index, uint32_t max_batch_nodes) {
  return open_device_timing(index, max_batch_nodes, false);
}

nxv_device *open_device_timing(int32_t index, uint32_t max_batch_nodes,
                               bool no_latency_timing) {
  nxv_device_config config;
  memset(&config, 0, sizeof config);
  config.max_batch_nodes = max_batch_nodes;
  config.no_latency_timing = no_latency_timing;
  config.kick_nodes = g_kick_nodes;
  config.max_batch_cost = g_max_batch_cost;
  config.no_gpu_timestamps = g_no_gpu_timestamps;
  config.defer_elementwise = g_defer_elementwise;
  config.no_spirv_prune = g_no_spirv_prune;
  config.pipeline_threads = g_pipeline_threads;
  config.disable_disk_cache = true;
  nxv_device *d = NULL;
  NXV_CHECK(nxv_device_open(index, &config, &d));
  return d;
}

nxv_stats stats_of(nxv_device *d) {
  nxv_stats s;
  NXV_CHECK(nxv_device_stats(d, &s));
  return s;
}

uint64_t buffer_limit(const nxv_device_info *info) {
  uint64_t lim = info->max_storage_buffer_range;
  if (info->max_memory_allocation_size &&
      info->max_memory_allocation_size < lim)
    lim = info->max_memory_allocation_size;
  if (info->max_buffer_size && info->max_buffer_size < lim)
    lim = info->max_buffer_size;
  if ((uint64_t)UINT32_MAX * 4 < lim) lim = (uint64_t)UINT32_MAX * 4;
  return lim;
}
