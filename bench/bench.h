/*
 * bench.h - shared pieces of the nx_vulkan C benchmark (build/bench/nxv_bench):
 * failure handling, timing, statistics, element encodings, options, and the
 * figures recorded for the CSV file of the shared benchmark schema
 * (impl,test,dtype,shape,metric,value). See bench/README.md.
 */
#ifndef NXV_BENCH_H
#define NXV_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nxv.h"

#define MIB (1024.0 * 1024.0)

/* ------------------------------------------------------------------ */
/* Failure handling: every problem ends the run with exit status 1.    */
/* ------------------------------------------------------------------ */

void die_status(const char *expr, const char *file, int line, nxv_status st)
    __attribute__((noreturn));
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Every nxv call goes through this: abort with nxv_last_error() on failure. */
#define NXV_CHECK(expr)                                    \
  do {                                                     \
    nxv_status nxv_check_st_ = (expr);                     \
    if (nxv_check_st_ != NXV_OK)                           \
      die_status(#expr, __FILE__, __LINE__, nxv_check_st_); \
  } while (0)

void *xcalloc(size_t n, size_t size);
/* Host buffer of bytes bytes (dies when it does not fit in memory). */
void *xmalloc_bytes(uint64_t bytes);

/* ------------------------------------------------------------------ */
/* Timing and statistics                                               */
/* ------------------------------------------------------------------ */

double now_s(void);
double median_of(const double *v, uint32_t n);
double min_of(const double *v, uint32_t n);
uint64_t splitmix64(uint64_t *state);
/* A fixed pseudo-random 64-bit value of (seed, index). */
uint64_t hash64(uint64_t seed, uint64_t index);

/* ------------------------------------------------------------------ */
/* Elements of the float types on the host                             */
/* ------------------------------------------------------------------ */

/* Round-to-nearest-even encodings of the 16-bit float types. */
uint16_t f16_bits(double x);
double f16_value(uint16_t h);
uint16_t bf16_bits(double x);
double bf16_value(uint16_t b);

/* x as element i of an array of dtype (f16, bf16, f32 or f64). */
void store_elem(nxv_dtype t, void *base, uint64_t i, double x);
/* Element i of an array of dtype (f16, bf16, f32 or f64), as a double. */
double load_elem(nxv_dtype t, const void *base, uint64_t i);
/* Downloads element i of a tensor of f16, bf16, f32 or f64. */
double download_elem(nxv_tensor *t, uint64_t i);
/* Unit roundoff of dtype (2^-11 for f16, 2^-8 for bf16, ...). */
double unit_roundoff(nxv_dtype t);

/* ------------------------------------------------------------------ */
/* Options                                                             */
/* ------------------------------------------------------------------ */

enum {
  SUITE_LATENCY = 1u << 0,
  SUITE_BANDWIDTH = 1u << 1,
  SUITE_MATMUL = 1u << 2,
  SUITE_POOL = 1u << 3,
  SUITE_PIPELINE = 1u << 4,
  SUITE_ALL = (1u << 5) - 1,
};

typedef struct options {
  int32_t device;        /* -1: the runtime's default choice */
  uint64_t ops;          /* N of the tiny-op tests */
  uint64_t mb;           /* requested size of a legacy large tensor, MiB */
  uint32_t reps;         /* timed runs per measurement */
  uint64_t side;         /* bandwidth suite: side of the square operands */
  uint64_t mm_max;       /* matmul suite: largest dimension */
  uint32_t suites;       /* SUITE_* bits */
  uint32_t dtypes;       /* --dtypes: bit 0 f32, 1 f16, 2 f64, 3 bf16;
                            0 = all */
  uint32_t warm_ms;      /* --warm-ms: GPU work before each dtype's timed
                            runs (bandwidth, matmul, large ops) and each
                            large product's */
  const char *csv_out;   /* schema CSV file, or NULL */
  const char *child_dir; /* hidden: run as a pipeline-cache child */
  bool ops_set, mb_set, reps_set, side_set, mm_max_set;
  bool csv, quick;
  char self[4096];       /* path of this executable, for the children */
} options;

/* Keeps a GPU busy for o->warm_ms milliseconds (back-to-back copies of a
 * 64 MiB buffer, synchronized every 16), so that the timed runs after it
 * start at the GPU's working clocks: a GPU left idle for a fraction of a
 * second (uploads, host-side checks) drops its SM clock and needs a few
 * hundred milliseconds of load to raise it again. Nothing on CPU devices
 * or with --warm-ms 0. Dies on failure. */
void gpu_warm(const options *o, nxv_device *dev, const nxv_device_info *info);

/* ------------------------------------------------------------------ */
/* Output                                                              */
/* ------------------------------------------------------------------ */

/* Legacy --csv rows on stdout: test,mode,metric,value,unit. */
void csv_row(const char *test, const char *mode, const char *metric,
             const char *value, const char *unit);
void csv_num(const char *test, const char *mode, const char *metric,
             double value, const char *unit);

/* Records one figure of the schema (impl nx_vulkan_c) for --csv-out. */
void record(const char *test, const char *dtype, const char *shape,
            const char *metric, double value);
/* record(), and in --csv mode also the legacy stdout row
 * test,"dtype shape",metric,value,unit. */
void emit(const char *test, const char *dtype, const char *shape,
          const char *metric, double value);
void set_legacy_csv(bool on);
bool legacy_csv(void);
/* Writes the schema CSV: header, the hw,device row, then every record. */
void results_write(const char *path, const char *device_name);
void results_free(void);

/* ------------------------------------------------------------------ */
/* Devices                                                             */
/* ------------------------------------------------------------------ */

/* Opens device index with the default config, except max_batch_nodes
 * (0: the default), kick_nodes (g_kick_nodes), max_batch_cost
 * (g_max_batch_cost), no_gpu_timestamps
 * (g_no_gpu_timestamps), defer_elementwise (g_defer_elementwise),
 * no_spirv_prune (g_no_spirv_prune) and the
 * on-disk pipeline cache (off). */
nxv_device *open_device(int32_t index, uint32_t max_batch_nodes);
/* The same with nxv_device_config.no_latency_timing (no clock read per
 * op). */
nxv_device *open_device_timing(int32_t index, uint32_t max_batch_nodes,
                               bool no_latency_timing);

/* nxv_device_config.kick_nodes of every device open_device opens (0: the
 * runtime's default); set from --kick-nodes before any device is opened. */
extern uint32_t g_kick_nodes;
/* nxv_device_config.max_batch_cost of every device open_device opens (0:
 * the runtime's default); set from --max-batch-cost before any device is
 * opened. */
extern uint64_t g_max_batch_cost;
/* nxv_device_config.no_gpu_timestamps of every device open_device opens;
 * set from --no-gpu-timestamps before any device is opened. */
extern bool g_no_gpu_timestamps;
/* nxv_device_config.defer_elementwise of every device open_device opens;
 * set from --defer before any device is opened. */
extern bool g_defer_elementwise;
/* nxv_device_config.no_spirv_prune of every device open_device opens and
 * of the pipeline suite's children; set from --no-spirv-prune. */
extern bool g_no_spirv_prune;
/* nxv_device_config.pipeline_threads of every device open_device opens and
 * of the pipeline suite's cold and warm children (0: the runtime's
 * default, none); set from --pipeline-threads. */
extern int32_t g_pipeline_threads;
nxv_stats stats_of(nxv_device *d);
/* The largest buffer the device takes (storage range, allocation and
 * buffer limits, and 2^32-1 elements of 4 bytes). */
uint64_t buffer_limit(const nxv_device_info *info);

/* ------------------------------------------------------------------ */
/* Suites                                                              */
/* ------------------------------------------------------------------ */

void suite_bandwidth(const options *o, nxv_device *dev,
                     const nxv_device_info *info);
void suite_matmul(const options *o, nxv_device *dev,
                  const nxv_device_info *info);
void suite_pool(const options *o, nxv_device *dev);
void suite_pipeline(const options *o, const nxv_device_info *info);
/* The hidden child mode of the pipeline suite; returns the exit status. */
int pipeline_child_main(const options *o);

#endif
