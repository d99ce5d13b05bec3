/*
 * nxv_nif.c - the Erlang NIF over the runtime (module Nx.Vulkan.NIF).
 *
 * Resources
 *   device: owns one nxv_device reference; never freed before every tensor
 *           of the device (tensors hold their own device references).
 *   tensor: owns one nxv_tensor reference until deallocate/1 or the
 *           destructor. Destructors only drop references: cheap, never
 *           blocking (the buffer returns to the pool when the GPU is done).
 *
 * Scheduling: op NIFs only queue work and return (normal schedulers).
 * download/3 starts on a normal scheduler when small, busy-polls there
 * briefly, and continues on a dirty I/O scheduler when the copy is large or
 * still running; synchronize/1, open_device/2, save_pipeline_cache/1 and
 * upload_dirty/3 run on dirty schedulers. replay/2 makes a plan's op NIF
 * calls in one call on a normal scheduler, yielding it (enif_schedule_nif)
 * about every millisecond.
 *
 * Errors: invalid arguments raise ArgumentError; unsupported op/type
 * combinations raise ArgumentError naming op, type and device; device
 * failures raise Nx.Vulkan.Error with :status and :message.
 *
 * Concurrency: a tensor resource may be used by many processes at once and
 * deallocated concurrently; grab() and deallocate() coordinate through two
 * atomics so a tensor is never released while another call is retaining it.
 */
#include <erl_nif.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "nxv.h"

typedef struct dev_res {
  nxv_device *dev;   /* one reference, owned */
  int32_t index;
} dev_res;

typedef struct tensor_res {
  _Atomic(nxv_tensor *) t; /* one reference, owned; NULL once deallocated */
  atomic_uint users;       /* calls between reading t and retaining it */
} tensor_res;

/* A small download still in flight after the normal-scheduler spin, handed
 * to its dirty continuation. */
typedef struct download_res {
  _Atomic(nxv_download *) dl; /* owned; NULL once the continuation took it */
} download_res;

/* A fused program prepared by fused_program/3 (a compiled plan's fused
 * op): immutable but for the program's own memo (nxv_fused_run). */
typedef struct program_res {
  nxv_fused_program *p; /* owned, freed by the destructor */
} program_res;

static ErlNifResourceType *DEV_RES;
static ErlNifResourceType *TENSOR_RES;
static ErlNifResourceType *DOWNLOAD_RES;
static ErlNifResourceType *PROGRAM_RES;

/* ------------------------------------------------------------------ */
/* Atoms                                                               */
/* ------------------------------------------------------------------ */

static ERL_NIF_TERM am_ok, am_nil, am_true, am_false, am_error,
    am_already_deallocated, am_struct, am_exception, am_message, am_status,
    am_argument_error, am_vulkan_error, am_binary, am_unary;
static ERL_NIF_TERM am_types[NXV_DTYPE_COUNT];
static ERL_NIF_TERM am_cmpops[NXV_COMPARE_OP_COUNT];
static ERL_NIF_TERM am_compare, am_select, am_convert;
static ERL_NIF_TERM am_spec_p, am_spec_s, am_spec_c, am_spec_v, am_spec_l, am_spec_t;
static ERL_NIF_TERM am_binops[NXV_BINARY_OP_COUNT];
static ERL_NIF_TERM am_unops[NXV_UNARY_OP_COUNT];
static ERL_NIF_TERM am_redops[NXV_REDUCE_OP_COUNT];

static const char *kStatusAtoms[] = {
    "ok", "invalid_argument", "unsupported", "out_of_device_memory",
    "out_of_host_memory", "device_lost", "submit_failed", "vulkan_error",
    "no_device", "io_error"};


static ERL_NIF_TERM mk_atom(ErlNifEnv *env, const char *name) {
  ERL_NIF_TERM a;
  if (enif_make_existing_atom(env, name, &a, ERL_NIF_LATIN1)) return a;
  return enif_make_atom(env, name);
}

static ERL_NIF_TERM mk_binary(ErlNifEnv *env, const char *s) {
  ERL_NIF_TERM t;
  size_t n = strlen(s);
  unsigned char *p = enif_make_new_binary(env, n, &t);
  memcpy(p, s, n);
  return t;
}

/* ------------------------------------------------------------------ */
/* Exceptions                                                          */
/* ------------------------------------------------------------------ */

static ERL_NIF_TERM raise_argument(ErlNifEnv *env, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static ERL_NIF_TERM raise_argument(ErlNifEnv *env, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  ERL_NIF_TERM keys[3] = {am_struct, am_exception, am_message};
  ERL_NIF_TERM vals[3] = {am_argument_error, am_true, mk_binary(env, msg)};
  ERL_NIF_TERM map;
  enif_make_map_from_arrays(env, keys, vals, 3, &map);
  return enif_raise_exception(env, map);
}

/* Raises the exception that fits a failed runtime call: "what: detail",
 * or the runtime's detail alone where it already starts with "what:". */
static ERL_NIF_TERM raise_status(ErlNifEnv *env, nxv_status st,
                                 const char *what) {
  const char *detail = nxv_last_error();
  size_t wl = strlen(what);
  const char *sep = ": ";
  if (strncmp(detail, what, wl) == 0 && detail[wl] == ':') what = sep = "";
  if (st == NXV_ERR_INVALID_ARGUMENT || st == NXV_ERR_UNSUPPORTED)
    return raise_argument(env, "%s%s%s", what, sep, detail);
  char msg[768];
  snprintf(msg, sizeof msg, "%s%s%s", what, sep, detail);
  unsigned idx = (unsigned)st < sizeof kStatusAtoms / sizeof kStatusAtoms[0]
                     ? (unsigned)st : 7;
  ERL_NIF_TERM keys[4] = {am_struct, am_exception, am_message, am_status};
  ERL_NIF_TERM vals[4] = {am_vulkan_error, am_true, mk_binary(env, msg),
                          mk_atom(env, kStatusAtoms[idx])};
  ERL_NIF_TERM map;
  enif_make_map_from_arrays(env, keys, vals, 4, &map);
  return enif_raise_exception(env, map);
}

/* ------------------------------------------------------------------ */
/* Decoding                                                            */
/* ------------------------------------------------------------------ */

static bool get_dtype(ErlNifEnv *env, ERL_NIF_TERM t, nxv_dtype *out) {
  (void)env;
  for (int i = 0; i < NXV_DTYPE_COUNT; i++)
    if (enif_is_identical(t, am_types[i])) {
      *out = (nxv_dtype)i;
      return true;
    }
  return false;
}

static int find_atom(ERL_NIF_TERM t, const ERL_NIF_TERM *atoms, int n) {
  for (int i = 0; i < n; i++)
    if (enif_is_identical(t, atoms[i])) return i;
  return -1;
}

static bool get_i64(ErlNifEnv *env, ERL_NIF_TERM t, int64_t *out) {
  ErlNifSInt64 v;
  if (!enif_get_int64(env, t, &v)) return false;
  *out = (int64_t)v;
  return true;
}

/* A list of at most NXV_MAX_RANK integers. */
static bool get_int_list(ErlNifEnv *env, ERL_NIF_TERM list, int64_t *out,
                         unsigned *out_len) {
  unsigned len;
  if (!enif_get_list_length(env, list, &len) || len > NXV_MAX_RANK)
    return false;
  ERL_NIF_TERM head, tail = list;
  for (unsigned i = 0; i < len; i++) {
    if (!enif_get_list_cell(env, tail, &head, &tail)) return false;
    if (!get_i64(env, head, &out[i])) return false;
  }
  *out_len = len;
  return true;
}

static bool get_dev(ErlNifEnv *env, ERL_NIF_TERM t, dev_res **out) {
  return enif_get_resource(env, t, DEV_RES, (void **)out);
}

/* Retains the tensor of a resource, or returns NULL if it is not a tensor
 * resource or was deallocated. The caller releases. */
static nxv_tensor *grab(ErlNifEnv *env, ERL_NIF_TERM term, bool *out_dead) {
  tensor_res *r;
  *out_dead = false;
  if (!enif_get_resource(env, term, TENSOR_RES, (void **)&r)) return NULL;
  atomic_fetch_add(&r->users, 1);
  nxv_tensor *t = atomic_load(&r->t);
  if (t) nxv_tensor_retain(t);
  atomic_fetch_sub(&r->users, 1);
  if (!t) *out_dead = true;
  return t;
}

static ERL_NIF_TERM bad_tensor(ErlNifEnv *env, const char *what, bool dead) {
  return dead ? raise_argument(env, "%s: the tensor was deallocated", what)
              : raise_argument(env, "%s: expected a Nx.Vulkan tensor", what);
}

static ERL_NIF_TERM wrap_tensor(ErlNifEnv *env, nxv_tensor *t) {
  tensor_res *r = enif_alloc_resource(TENSOR_RES, sizeof *r);
  if (!r) {
    nxv_tensor_release(t);
    return raise_argument(env, "out of memory allocating a tensor resource");
  }
  atomic_init(&r->t, t);
  atomic_init(&r->users, 0);
  ERL_NIF_TERM term = enif_make_resource(env, r);
  enif_release_resource(r);
  return term;
}

/* Decodes (tensor, offset, strides|nil) for a view over rank dims. */
typedef struct view_arg {
  nxv_tensor *t;
  int64_t offset;
  int64_t strides[NXV_MAX_RANK];
  bool has_strides;
} view_arg;

/* get_view/5 naming the view "what part" in its errors (part NULL: what
 * alone). The name is only formatted when an error is raised: ops decode
 * their operands on every call. */
static ERL_NIF_TERM get_view_part(ErlNifEnv *env, const char *what, const char *part,
                                  const ERL_NIF_TERM argv[3], unsigned rank, view_arg *v) {
  const char *sep = part ? " " : "";
  if (!part) part = "";
  bool dead;
  v->t = grab(env, argv[0], &dead);
  if (!v->t)
    return dead ? raise_argument(env, "%s%s%s: the tensor was deallocated", what, sep, part)
                : raise_argument(env, "%s%s%s: expected a Nx.Vulkan tensor", what, sep, part);
  if (!get_i64(env, argv[1], &v->offset)) {
    nxv_tensor_release(v->t);
    v->t = NULL;
    return raise_argument(env, "%s%s%s: offset must be an integer", what, sep, part);
  }
  v->has_strides = !enif_is_identical(argv[2], am_nil);
  if (v->has_strides) {
    unsigned n;
    if (!get_int_list(env, argv[2], v->strides, &n) || n != rank) {
      nxv_tensor_release(v->t);
      v->t = NULL;
      return raise_argument(env, "%s%s%s: strides must be nil or a list of %u integers", what,
                            sep, part, rank);
    }
  }
  return am_ok;
}

static ERL_NIF_TERM get_view(ErlNifEnv *env, const char *what, const ERL_NIF_TERM argv[3],
                             unsigned rank, view_arg *v) {
  return get_view_part(env, what, NULL, argv, rank, v);
}

static nxv_view to_view(const view_arg *v) {
  return (nxv_view){v->t, v->offset, v->has_strides ? v->strides : NULL};
}

/* Finishes an op: raises on failure, wraps the result otherwise. */
static ERL_NIF_TERM op_result(ErlNifEnv *env, nxv_status st, nxv_tensor *out,
                              const char *what) {
  if (st != NXV_OK) return raise_status(env, st, what);
  return wrap_tensor(env, out);
}

/* ------------------------------------------------------------------ */
/* Devices                                                             */
/* ------------------------------------------------------------------ */

static ERL_NIF_TERM nif_device_count(ErlNifEnv *env, int argc,
                                     const ERL_NIF_TERM argv[]) {
  (void)argc;
  (void)argv;
  uint32_t n = 0;
  nxv_status st = nxv_device_count(&n);
  if (st == NXV_ERR_NO_DEVICE) return enif_make_uint(env, 0);
  if (st != NXV_OK) return raise_status(env, st, "device_count");
  return enif_make_uint(env, n);
}

static ERL_NIF_TERM nif_default_device_index(ErlNifEnv *env, int argc,
                                             const ERL_NIF_TERM argv[]) {
  (void)argc;
  (void)argv;
  uint32_t i = 0;
  nxv_status st = nxv_device_default_index(&i);
  if (st != NXV_OK) return raise_status(env, st, "default device");
  return enif_make_uint(env, i);
}

#define PUT(map, key, val) \
  enif_make_map_put(env, map, mk_atom(env, key), val, &map)
#define PUT_BOOL(map, key, b) PUT(map, key, (b) ? am_true : am_false)
#define PUT_U64(map, key, v) PUT(map, key, enif_make_uint64(env, (ErlNifUInt64)(v)))

static ERL_NIF_TERM info_map(ErlNifEnv *env, const nxv_device_info *i) {
  static const char *types[] = {"other", "integrated_gpu", "discrete_gpu",
                                "virtual_gpu", "cpu"};
  ERL_NIF_TERM m = enif_make_new_map(env), f = enif_make_new_map(env),
               l = enif_make_new_map(env);
  char ver[32];
  snprintf(ver, sizeof ver, "%u.%u.%u", i->api_version >> 22,
           (i->api_version >> 12) & 0x3ffu, i->api_version & 0xfffu);
  PUT_U64(m, "index", i->index);
  PUT(m, "name", mk_binary(env, i->name));
  PUT(m, "type", mk_atom(env, types[(unsigned)i->type < 5 ? i->type : 0]));
  PUT_U64(m, "vendor_id", i->vendor_id);
  PUT_U64(m, "device_id", i->device_id);
  PUT_U64(m, "driver_version", i->driver_version);
  PUT(m, "driver_name", mk_binary(env, i->driver_name));
  PUT(m, "driver_info", mk_binary(env, i->driver_info));
  PUT(m, "api_version", mk_binary(env, ver));
  PUT_BOOL(m, "usable", i->usable);
  PUT_BOOL(f, "timeline_semaphore", i->timeline_semaphore);
  PUT_BOOL(f, "float64", i->float64);
  PUT_BOOL(f, "int64", i->int64);
  PUT_BOOL(f, "int16", i->int16);
  PUT_BOOL(f, "int8", i->int8);
  PUT_BOOL(f, "float16", i->float16);
  PUT_BOOL(f, "storage_8bit", i->storage_8bit);
  PUT_BOOL(f, "storage_16bit", i->storage_16bit);
  PUT_BOOL(f, "buffer_device_address", i->buffer_device_address);
  PUT_BOOL(f, "push_descriptor", i->push_descriptor);
  PUT_BOOL(f, "memory_budget", i->memory_budget);
  PUT_BOOL(f, "cooperative_matrix", i->cooperative_matrix);
  PUT_BOOL(f, "coopmat_f16", i->coopmat_f16);
  PUT_BOOL(f, "coopmat_bf16", i->coopmat_bf16);
  PUT_BOOL(f, "coopmat_khr", i->coopmat_khr);
  PUT_BOOL(f, "pipeline_creation_feedback", i->pipeline_creation_feedback);
  PUT_BOOL(f, "calibrated_timestamps", i->calibrated_timestamps);
  PUT_U64(f, "subgroup_size", i->subgroup_size);
  PUT_U64(f, "subgroup_min_size", i->subgroup_min_size);
  PUT_U64(f, "subgroup_max_size", i->subgroup_max_size);
  PUT_U64(l, "max_push_constants_size", i->max_push_constants_size);
  PUT_U64(l, "max_storage_buffer_range", i->max_storage_buffer_range);
  PUT_U64(l, "max_memory_allocation_size", i->max_memory_allocation_size);
  PUT_U64(l, "max_buffer_size", i->max_buffer_size);
  PUT_U64(l, "max_workgroup_invocations", i->max_workgroup_invocations);
  PUT_U64(l, "max_shared_memory", i->max_shared_memory);
  PUT_U64(l, "device_local_heap_size", i->device_local_heap_size);
  PUT_U64(l, "queue_family", i->queue_family);
  PUT_BOOL(l, "compute_only_queue", i->compute_only_queue);
  PUT_U64(l, "timestamp_bits", i->timestamp_bits);
  PUT(m, "features", f);
  PUT(m, "limits", l);
  return m;
}

static ERL_NIF_TERM nif_device_info(ErlNifEnv *env, int argc,
                                    const ERL_NIF_TERM argv[]) {
  (void)argc;
  unsigned index;
  if (!enif_get_uint(env, argv[0], &index))
    return raise_argument(env, "device_info: index must be a non-negative integer");
  nxv_device_info info;
  nxv_status st = nxv_device_query(index, &info);
  if (st == NXV_ERR_NO_DEVICE)
    return raise_argument(env, "device_info: %s", nxv_last_error());
  if (st != NXV_OK) return raise_status(env, st, "device_info");
  return info_map(env, &info);
}

static bool opt_u64(ErlNifEnv *env, ERL_NIF_TERM map, const char *key,
                    uint64_t *out, bool *bad) {
  ERL_NIF_TERM v;
  if (!enif_get_map_value(env, map, mk_atom(env, key), &v)) return false;
  ErlNifUInt64 u;
  if (!enif_get_uint64(env, v, &u)) {
    *bad = true;
    return false;
  }
  *out = (uint64_t)u;
  return true;
}

static bool opt_bool(ErlNifEnv *env, ERL_NIF_TERM map, const char *key,
                     bool *out, bool *bad) {
  ERL_NIF_TERM v;
  if (!enif_get_map_value(env, map, mk_atom(env, key), &v)) return false;
  if (enif_is_identical(v, am_true)) *out = true;
  else if (enif_is_identical(v, am_false)) *out = false;
  else *bad = true;
  return true;
}

/* open_device(index, opts): dirty IO (creates the Vulkan device, loads the
 * pipeline cache). */
static ERL_NIF_TERM nif_open_device(ErlNifEnv *env, int argc,
                                    const ERL_NIF_TERM argv[]) {
  (void)argc;
  int index;
  if (!enif_get_int(env, argv[0], &index) || index < -1)
    return raise_argument(env, "open_device: index must be an integer >= -1");
  if (!enif_is_map(env, argv[1]))
    return raise_argument(env, "open_device: options must be a map");
  uint32_t count = 0;
  if (index >= 0 && (nxv_device_count(&count) != NXV_OK || (uint32_t)index >= count))
    return raise_argument(env, "open_device: no Vulkan device %d (%u present)",
                          index, count);
  nxv_device_config cfg = {0};
  bool bad = false;
  uint64_t v;
  char cache_dir[512];
  if (opt_u64(env, argv[1], "max_batch_nodes", &v, &bad)) cfg.max_batch_nodes = (uint32_t)v;
  if (opt_u64(env, argv[1], "idle_flush_us", &v, &bad)) cfg.idle_flush_us = (uint32_t)v;
  if (opt_u64(env, argv[1], "kick_nodes", &v, &bad)) cfg.kick_nodes = (uint32_t)v;
  if (opt_u64(env, argv[1], "kick_inflight", &v, &bad)) cfg.kick_inflight = (uint32_t)v;
  if (opt_u64(env, argv[1], "early_inflight", &v, &bad)) cfg.early_inflight = (uint32_t)v;
  if (opt_u64(env, argv[1], "wait_spin_us", &v, &bad)) cfg.wait_spin_us = (uint32_t)v;
  if (opt_u64(env, argv[1], "idle_spin_us", &v, &bad)) cfg.idle_spin_us = (uint32_t)v;
  if (opt_u64(env, argv[1], "ring_capacity", &v, &bad)) cfg.ring_capacity = (uint32_t)v;
  if (opt_u64(env, argv[1], "staging_bytes", &v, &bad)) cfg.staging_bytes = v;
  if (opt_u64(env, argv[1], "arena_bytes", &v, &bad)) cfg.arena_bytes = v;
  if (opt_u64(env, argv[1], "pool_limit_bytes", &v, &bad)) cfg.pool_limit_bytes = v;
  if (opt_u64(env, argv[1], "pool_chunk_bytes", &v, &bad)) cfg.pool_chunk_bytes = v;
  if (opt_u64(env, argv[1], "max_batch_cost", &v, &bad)) cfg.max_batch_cost = v;
  if (opt_u64(env, argv[1], "batch_timeout_ms", &v, &bad)) {
    if (v > UINT32_MAX) bad = true;
    else cfg.batch_timeout_ms = (uint32_t)v;
  }
  opt_bool(env, argv[1], "disable_disk_cache", &cfg.disable_disk_cache, &bad);
  opt_bool(env, argv[1], "poison_outputs", &cfg.poison_outputs, &bad);
  opt_bool(env, argv[1], "fast_math", &cfg.fast_math, &bad);
  opt_bool(env, argv[1], "unmapped_small", &cfg.unmapped_small, &bad);
  opt_bool(env, argv[1], "no_latency_timing", &cfg.no_latency_timing, &bad);
  opt_bool(env, argv[1], "no_gpu_timestamps", &cfg.no_gpu_timestamps, &bad);
  opt_bool(env, argv[1], "no_round_trip_submit", &cfg.no_round_trip_submit, &bad);
  opt_bool(env, argv[1], "defer_elementwise", &cfg.defer_elementwise, &bad);
  opt_bool(env, argv[1], "no_spirv_prune", &cfg.no_spirv_prune, &bad);
  ERL_NIF_TERM rw;
  if (enif_get_map_value(env, argv[1], mk_atom(env, "reorder_window"), &rw)) {
    unsigned w;
    if (enif_is_identical(rw, mk_atom(env, "off"))) cfg.reorder_window = -1;
    else if (enif_get_uint(env, rw, &w) && w <= NXV_REORDER_WINDOW_MAX)
      cfg.reorder_window = (int32_t)w;
    else bad = true;
  }
  ERL_NIF_TERM pt;
  if (enif_get_map_value(env, argv[1], mk_atom(env, "pipeline_threads"), &pt)) {
    unsigned w;
    if (enif_is_identical(pt, mk_atom(env, "off"))) cfg.pipeline_threads = NXV_PIPELINE_THREADS_NONE;
    else if (enif_is_identical(pt, mk_atom(env, "auto"))) cfg.pipeline_threads = NXV_PIPELINE_THREADS_AUTO;
    else if (enif_get_uint(env, pt, &w) && w <= NXV_PIPELINE_THREADS_MAX)
      cfg.pipeline_threads = (int32_t)w;
    else bad = true;
  }
  ERL_NIF_TERM dk;
  if (enif_get_map_value(env, argv[1], mk_atom(env, "download_kernel"), &dk)) {
    if (enif_is_identical(dk, mk_atom(env, "auto"))) cfg.download_kernel = 0;
    else if (enif_is_identical(dk, mk_atom(env, "always"))) cfg.download_kernel = 1;
    else if (enif_is_identical(dk, mk_atom(env, "never"))) cfg.download_kernel = -1;
    else bad = true;
  }
  ERL_NIF_TERM cs;
  if (enif_get_map_value(env, argv[1], mk_atom(env, "chained_solve"), &cs)) {
    if (enif_is_identical(cs, mk_atom(env, "auto"))) cfg.chained_solve = 0;
    else if (enif_is_identical(cs, mk_atom(env, "always"))) cfg.chained_solve = 1;
    else if (enif_is_identical(cs, mk_atom(env, "never"))) cfg.chained_solve = -1;
    else bad = true;
  }
  ERL_NIF_TERM dir;
  if (enif_get_map_value(env, argv[1], mk_atom(env, "cache_dir"), &dir)) {
    ErlNifBinary b;
    if (!enif_inspect_binary(env, dir, &b) || b.size >= sizeof cache_dir ||
        memchr(b.data, 0, b.size))
      bad = true;
    else {
      memcpy(cache_dir, b.data, b.size);
      cache_dir[b.size] = 0;
      cfg.cache_dir = cache_dir;
    }
  }
  if (bad)
    return raise_argument(env, "open_device: an option has the wrong type "
                               "(integers >= 0, booleans, cache_dir a binary, reorder_window "
                               "0..64 or :off)");
  nxv_device *d;
  nxv_status st = nxv_device_open(index, &cfg, &d);
  if (st != NXV_OK) return raise_status(env, st, "open_device");
  dev_res *r = enif_alloc_resource(DEV_RES, sizeof *r);
  if (!r) {
    nxv_device_release(d);
    return raise_argument(env, "out of memory allocating a device resource");
  }
  nxv_device_info info;
  nxv_device_info_get(d, &info);
  r->dev = d;
  r->index = (int32_t)info.index;
  ERL_NIF_TERM term = enif_make_resource(env, r);
  enif_release_resource(r);
  return term;
}

/* %{count:, sum_ns:, max_ns:, buckets: [count per bucket]} */
static ERL_NIF_TERM histogram_map(ErlNifEnv *env, const nxv_histogram *h) {
  ERL_NIF_TERM buckets[NXV_HISTOGRAM_BUCKETS];
  for (uint32_t i = 0; i < NXV_HISTOGRAM_BUCKETS; i++)
    buckets[i] = enif_make_uint64(env, (ErlNifUInt64)h->buckets[i]);
  ERL_NIF_TERM m = enif_make_new_map(env);
  PUT_U64(m, "count", h->count);
  PUT_U64(m, "sum_ns", h->sum_ns);
  PUT_U64(m, "max_ns", h->max_ns);
  PUT(m, "buckets", enif_make_list_from_array(env, buckets, NXV_HISTOGRAM_BUCKETS));
  return m;
}

static ERL_NIF_TERM nif_device_stats(ErlNifEnv *env, int argc,
                                     const ERL_NIF_TERM argv[]) {
  (void)argc;
  dev_res *r;
  if (!get_dev(env, argv[0], &r)) return raise_argument(env, "stats: expected a device");
  nxv_stats s;
  nxv_status st = nxv_device_stats(r->dev, &s);
  if (st != NXV_OK) return raise_status(env, st, "stats");
  ERL_NIF_TERM m = enif_make_new_map(env);
  PUT_U64(m, "device", r->index);
  PUT_U64(m, "pool_bytes_reserved", s.pool_bytes_reserved);
  PUT_U64(m, "pool_bytes_in_use", s.pool_bytes_in_use);
  PUT_U64(m, "pool_bytes_peak", s.pool_bytes_peak);
  PUT_U64(m, "pool_hits", s.pool_hits);
  PUT_U64(m, "pool_misses", s.pool_misses);
  PUT_U64(m, "pool_allocations", s.pool_allocations);
  PUT_U64(m, "pool_frees", s.pool_frees);
  PUT_U64(m, "pool_trims", s.pool_trims);
  PUT_U64(m, "pool_live_buffers", s.pool_live_buffers);
  PUT_U64(m, "pool_bytes_mapped", s.pool_bytes_mapped);
  PUT_U64(m, "staging_bytes", s.staging_bytes);
  PUT_U64(m, "staging_dedicated", s.staging_dedicated);
  PUT_U64(m, "ops_enqueued", s.ops_enqueued);
  PUT_U64(m, "ops_completed", s.ops_completed);
  PUT_U64(m, "submits", s.submits);
  PUT_U64(m, "barriers", s.barriers);
  PUT_U64(m, "gpu_busy_ns", s.gpu_busy_ns);
  PUT_U64(m, "batches_untimed", s.batches_untimed);
  PUT_U64(m, "bytes_submitted", s.bytes_submitted);
  PUT(m, "op_latency", histogram_map(env, &s.op_latency));
  PUT(m, "queue_wait", histogram_map(env, &s.queue_wait));
  PUT(m, "batch_gpu", histogram_map(env, &s.batch_gpu));
  PUT(m, "download_wait", histogram_map(env, &s.download_wait));
  PUT_U64(m, "epoch_submitted", s.epoch_submitted);
  PUT_U64(m, "epoch_completed", s.epoch_completed);
  PUT_U64(m, "ring_full_waits", s.ring_full_waits);
  PUT_U64(m, "scheduler_wakeups", s.scheduler_wakeups);
  PUT_U64(m, "reads_in_place", s.reads_in_place);
  PUT_U64(m, "ops_reordered", s.ops_reordered);
  PUT_U64(m, "barriers_ahead", s.barriers_ahead);
  PUT_U64(m, "round_trip_submits", s.round_trip_submits);
  PUT_U64(m, "pipelined_kicks", s.pipelined_kicks);
  PUT_U64(m, "deferred_ops", s.deferred_ops);
  PUT_U64(m, "deferred_fused", s.deferred_fused);
  PUT_U64(m, "pipeline_hits", s.pipeline_hits);
  PUT_U64(m, "pipeline_misses", s.pipeline_misses);
  PUT_U64(m, "pipeline_disk_hits", s.pipeline_disk_hits);
  PUT_U64(m, "pipelines", s.pipelines);
  PUT_U64(m, "pipelines_pruned", s.pipelines_pruned);
  PUT_U64(m, "program_pipelines", s.program_pipelines);
  PUT_U64(m, "pipeline_waits", s.pipeline_waits);
  PUT_U64(m, "pipeline_wait_ns", s.pipeline_wait_ns);
  PUT_BOOL(m, "cache_file_loaded", s.cache_file_loaded);
  PUT_BOOL(m, "cache_file_rejected", s.cache_file_rejected);
  PUT(m, "cache_reject_reason", mk_binary(env, s.cache_reject_reason));
  PUT(m, "cache_path", mk_binary(env, s.cache_path));
  return m;
}

static ERL_NIF_TERM nif_record_batches(ErlNifEnv *env, int argc,
                                       const ERL_NIF_TERM argv[]) {
  (void)argc;
  dev_res *r;
  if (!get_dev(env, argv[0], &r)) return raise_argument(env, "record_batches: expected a device");
  bool on;
  if (enif_is_identical(argv[1], am_true)) on = true;
  else if (enif_is_identical(argv[1], am_false)) on = false;
  else return raise_argument(env, "record_batches: expected a boolean");
  nxv_status st = nxv_device_record_batches(r->dev, on);
  if (st != NXV_OK) return raise_status(env, st, "record_batches");
  return am_ok;
}

/* {[{ops, bytes, queue_wait_ns, gpu_ns, latency_ns, record_time_ns,
 * submit_time_ns, gpu_start_time_ns, gpu_end_time_ns}], dropped}, oldest
 * first; at most 256 records per call (they live on the stack). */
static ERL_NIF_TERM nif_take_batches(ErlNifEnv *env, int argc,
                                     const ERL_NIF_TERM argv[]) {
  (void)argc;
  dev_res *r;
  if (!get_dev(env, argv[0], &r)) return raise_argument(env, "take_batches: expected a device");
  nxv_batch_record rec[256];
  uint32_t n = 0;
  uint64_t dropped = 0;
  nxv_status st = nxv_device_take_batches(r->dev, rec, 256, &n, &dropped);
  if (st != NXV_OK) return raise_status(env, st, "take_batches");
  ERL_NIF_TERM list = enif_make_list(env, 0);
  for (uint32_t i = n; i-- > 0;) {
    ERL_NIF_TERM t = enif_make_tuple9(
        env, enif_make_uint64(env, rec[i].ops), enif_make_uint64(env, rec[i].bytes),
        enif_make_uint64(env, rec[i].queue_wait_ns), enif_make_uint64(env, rec[i].gpu_ns),
        enif_make_uint64(env, rec[i].latency_ns), enif_make_uint64(env, rec[i].record_time_ns),
        enif_make_uint64(env, rec[i].submit_time_ns),
        enif_make_uint64(env, rec[i].gpu_start_time_ns),
        enif_make_uint64(env, rec[i].gpu_end_time_ns));
    list = enif_make_list_cell(env, t, list);
  }
  return enif_make_tuple2(env, list, enif_make_uint64(env, dropped));
}

/* nxv_clock_ns: the clock of the batch records' times. */
static ERL_NIF_TERM nif_clock_ns(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  (void)argv;
  return enif_make_uint64(env, nxv_clock_ns());
}

static ERL_NIF_TERM nif_synchronize(ErlNifEnv *env, int argc,
                                    const ERL_NIF_TERM argv[]) {
  (void)argc;
  dev_res *r;
  if (!get_dev(env, argv[0], &r)) return raise_argument(env, "synchronize: expected a device");
  nxv_status st = nxv_device_synchronize(r->dev);
  if (st != NXV_OK) return raise_status(env, st, "synchronize");
  return am_ok;
}

static ERL_NIF_TERM nif_device_status(ErlNifEnv *env, int argc,
                                      const ERL_NIF_TERM argv[]) {
  (void)argc;
  dev_res *r;
  if (!get_dev(env, argv[0], &r)) return raise_argument(env, "device_status: expected a device");
  const char *msg = NULL;
  nxv_status st = nxv_device_status(r->dev, &msg);
  if (st == NXV_OK) return am_ok;
  unsigned idx = (unsigned)st < sizeof kStatusAtoms / sizeof kStatusAtoms[0]
                     ? (unsigned)st : 7;
  return enif_make_tuple2(env, mk_atom(env, kStatusAtoms[idx]),
                          mk_binary(env, msg ? msg : ""));
}

static ERL_NIF_TERM nif_trim(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  dev_res *r;
  if (!get_dev(env, argv[0], &r)) return raise_argument(env, "trim: expected a device");
  nxv_device_trim(r->dev);
  return am_ok;
}

static ERL_NIF_TERM nif_save_pipeline_cache(ErlNifEnv *env, int argc,
                                            const ERL_NIF_TERM argv[]) {
  (void)argc;
  dev_res *r;
  if (!get_dev(env, argv[0], &r))
    return raise_argument(env, "save_pipeline_cache: expected a device");
  nxv_status st = nxv_device_save_pipeline_cache(r->dev);
  if (st != NXV_OK) return raise_status(env, st, "save_pipeline_cache");
  return am_ok;
}

static ERL_NIF_TERM nif_inject_fault(ErlNifEnv *env, int argc,
                                     const ERL_NIF_TERM argv[]) {
  (void)argc;
  dev_res *r;
  if (!get_dev(env, argv[0], &r)) return raise_argument(env, "inject_fault: expected a device");
  if (enif_is_identical(argv[1], mk_atom(env, "device_lost")))
    nxv_device_inject_fault(r->dev, NXV_ERR_DEVICE_LOST);
  else if (enif_is_identical(argv[1], mk_atom(env, "submit_failed")))
    nxv_device_inject_fault(r->dev, NXV_ERR_SUBMIT_FAILED);
  else if (enif_is_identical(argv[1], mk_atom(env, "pipeline_failed")))
    nxv_device_inject_pipeline_fault(r->dev);
  else if (enif_is_identical(argv[1], mk_atom(env, "hang")))
    nxv_device_inject_hang(r->dev);
  else
    return raise_argument(
        env, "inject_fault: expected :device_lost, :submit_failed, :pipeline_failed or :hang");
  return am_ok;
}

static ERL_NIF_TERM nif_supported(ErlNifEnv *env, int argc,
                                  const ERL_NIF_TERM argv[]) {
  (void)argc;
  dev_res *r;
  nxv_dtype t;
  if (!get_dev(env, argv[0], &r)) return raise_argument(env, "supported: expected a device");
  if (!get_dtype(env, argv[3], &t)) return raise_argument(env, "supported: unknown type");
  if (enif_is_identical(argv[1], am_binary)) {
    int op = find_atom(argv[2], am_binops, NXV_BINARY_OP_COUNT);
    return op >= 0 && nxv_binary_supported(r->dev, (nxv_binary_op)op, t) ? am_true : am_false;
  }
  if (enif_is_identical(argv[1], am_unary)) {
    int op = find_atom(argv[2], am_unops, NXV_UNARY_OP_COUNT);
    return op >= 0 && nxv_unary_supported(r->dev, (nxv_unary_op)op, t) ? am_true : am_false;
  }
  if (enif_is_identical(argv[1], am_compare)) {
    int op = find_atom(argv[2], am_cmpops, NXV_COMPARE_OP_COUNT);
    return op >= 0 && nxv_compare_supported(r->dev, (nxv_compare_op)op, t) ? am_true : am_false;
  }
  if (enif_is_identical(argv[1], am_select))
    return nxv_mask_type_supported(r->dev, t) ? am_true : am_false;
  if (enif_is_identical(argv[1], am_convert))
    return nxv_convert_supported(r->dev, t) ? am_true : am_false;
  if (enif_is_identical(argv[1], mk_atom(env, "linalg")))
    return nxv_linalg_supported(r->dev, t) ? am_true : am_false;
  return raise_argument(
      env, "supported: kind must be :binary, :unary, :compare, :select, :convert or :linalg");
}

/* ------------------------------------------------------------------ */
/* Tensors                                                             */
/* ------------------------------------------------------------------ */

static ERL_NIF_TERM nif_upload(ErlNifEnv *env, int argc,
                               const ERL_NIF_TERM argv[]) {
  (void)argc;
  dev_res *r;
  nxv_dtype t;
  ErlNifBinary bin;
  if (!get_dev(env, argv[0], &r)) return raise_argument(env, "upload: expected a device");
  if (!get_dtype(env, argv[1], &t)) return raise_argument(env, "upload: unknown type");
  if (!enif_inspect_binary(env, argv[2], &bin))
    return raise_argument(env, "upload: expected a binary");
  size_t es = nxv_dtype_size(t);
  if (bin.size % es)
    return raise_argument(env, "upload: %zu bytes is not a whole number of %s elements",
                          bin.size, nxv_dtype_name(t));
  nxv_tensor *out;
  nxv_status st = nxv_tensor_upload(r->dev, t, bin.size / es, bin.data, &out);
  return op_result(env, st, out, "upload");
}

/* Downloads of at most this many bytes start on the calling (normal)
 * scheduler and busy-poll there for up to DOWNLOAD_SPIN_US: a scalar's
 * round trip then costs no switch to a dirty scheduler. Larger ones, and
 * small ones still running after the spin, wait on a dirty I/O scheduler.
 * The spin stays far below the millisecond a NIF may hold a scheduler. */
#define DOWNLOAD_FAST_BYTES 65536u
#define DOWNLOAD_SPIN_US 40u

/* Checks download/3's arguments; on success *out_t holds a retained tensor
 * and *out_off, *out_count the range; otherwise returns the exception. */
static bool download_args(ErlNifEnv *env, const ERL_NIF_TERM argv[], nxv_tensor **out_t,
                          ErlNifUInt64 *out_off, ErlNifUInt64 *out_count,
                          ERL_NIF_TERM *out_error) {
  bool dead;
  nxv_tensor *t = grab(env, argv[0], &dead);
  if (!t) {
    *out_error = bad_tensor(env, "download", dead);
    return false;
  }
  if (!enif_get_uint64(env, argv[1], out_off) || !enif_get_uint64(env, argv[2], out_count)) {
    nxv_tensor_release(t);
    *out_error = raise_argument(env, "download: offset and count must be non-negative integers");
    return false;
  }
  uint64_t n = nxv_tensor_count(t);
  if (*out_off > n || *out_count > n - *out_off) {
    nxv_tensor_release(t);
    *out_error = raise_argument(env, "download: elements [%llu, %llu) of a tensor of %llu",
                                (unsigned long long)*out_off,
                                (unsigned long long)(*out_off + *out_count),
                                (unsigned long long)n);
    return false;
  }
  *out_t = t;
  return true;
}

/* The bytes of a completed download as a binary; releases dl. */
static ERL_NIF_TERM download_result(ErlNifEnv *env, nxv_download *dl) {
  uint64_t bytes = nxv_download_bytes(dl);
  ErlNifBinary bin;
  if (!enif_alloc_binary(bytes, &bin)) {
    nxv_download_release(dl);
    return raise_argument(env, "download: cannot allocate %llu bytes",
                          (unsigned long long)bytes);
  }
  nxv_status st = nxv_download_read(dl, bin.data);
  nxv_download_release(dl);
  if (st != NXV_OK) {
    enif_release_binary(&bin);
    return raise_status(env, st, "download");
  }
  return enif_make_binary(env, &bin);
}

/* Dirty continuation of a small download that outlasted the spin:
 * argv[0] is its download resource, used by this call only. */
static ERL_NIF_TERM nif_download_wait(ErlNifEnv *env, int argc,
                                      const ERL_NIF_TERM argv[]) {
  (void)argc;
  download_res *r;
  if (!enif_get_resource(env, argv[0], DOWNLOAD_RES, (void **)&r))
    return raise_argument(env, "download: lost its pending download");
  nxv_download *dl = atomic_exchange(&r->dl, NULL);
  if (!dl) return raise_argument(env, "download: pending download already taken");
  nxv_status st = nxv_download_wait(dl);
  if (st != NXV_OK) {
    nxv_download_release(dl);
    return raise_status(env, st, "download");
  }
  return download_result(env, dl);
}

/* Starts downloading count elements of t from off and releases t; then
 * waits for the copy (wait) or polls it for DOWNLOAD_SPIN_US (*out_done
 * tells whether it completed). On failure nothing is left to release. */
static nxv_status download_begin(nxv_tensor *t, uint64_t off, uint64_t count,
                                 bool wait, nxv_download **out_dl, bool *out_done) {
  nxv_status st = nxv_download_start(t, off, count, out_dl);
  nxv_tensor_release(t);
  if (st != NXV_OK) return st;
  *out_done = wait;
  st = wait ? nxv_download_wait(*out_dl)
            : nxv_download_poll(*out_dl, DOWNLOAD_SPIN_US, out_done);
  if (st != NXV_OK) nxv_download_release(*out_dl);
  return st;
}

/* Dirty path of large downloads: the staging allocation and the wait. */
static ERL_NIF_TERM nif_download_dirty(ErlNifEnv *env, int argc,
                                       const ERL_NIF_TERM argv[]) {
  (void)argc;
  nxv_tensor *t;
  ErlNifUInt64 off, count;
  ERL_NIF_TERM err;
  if (!download_args(env, argv, &t, &off, &count, &err)) return err;
  nxv_download *dl;
  bool done;
  nxv_status st = download_begin(t, off, count, true, &dl, &done);
  if (st != NXV_OK) return raise_status(env, st, "download");
  return download_result(env, dl);
}

static ERL_NIF_TERM nif_download(ErlNifEnv *env, int argc,
                                 const ERL_NIF_TERM argv[]) {
  nxv_tensor *t;
  ErlNifUInt64 off, count;
  ERL_NIF_TERM err;
  if (!download_args(env, argv, &t, &off, &count, &err)) return err;
  if (count * nxv_dtype_size(nxv_tensor_dtype(t)) > DOWNLOAD_FAST_BYTES) {
    nxv_tensor_release(t);
    return enif_schedule_nif(env, "download", ERL_NIF_DIRTY_JOB_IO_BOUND,
                             nif_download_dirty, argc, argv);
  }
  nxv_download *dl;
  bool done;
  nxv_status st = download_begin(t, off, count, false, &dl, &done);
  if (st != NXV_OK) return raise_status(env, st, "download");
  if (done) return download_result(env, dl);
  download_res *r = enif_alloc_resource(DOWNLOAD_RES, sizeof *r);
  if (!r) {
    nxv_download_release(dl);
    return raise_argument(env, "download: cannot allocate its pending state");
  }
  atomic_init(&r->dl, dl);
  ERL_NIF_TERM term = enif_make_resource(env, r);
  enif_release_resource(r);
  return enif_schedule_nif(env, "download", ERL_NIF_DIRTY_JOB_IO_BOUND,
                           nif_download_wait, 1, &term);
}

/* Drops the handle's reference to its tensor: false if it had none left. */
static bool deallocate_res(tensor_res *r) {
  nxv_tensor *t = atomic_exchange(&r->t, NULL);
  if (!t) return false;
  /* Wait out calls that read the pointer before the exchange: they are
   * between two atomics, never blocked. */
  while (atomic_load(&r->users) != 0) {
  }
  nxv_tensor_release(t);
  return true;
}

static ERL_NIF_TERM nif_deallocate(ErlNifEnv *env, int argc,
                                   const ERL_NIF_TERM argv[]) {
  (void)argc;
  tensor_res *r;
  if (!enif_get_resource(env, argv[0], TENSOR_RES, (void **)&r))
    return raise_argument(env, "deallocate: expected a Nx.Vulkan tensor");
  return deallocate_res(r) ? am_ok : am_already_deallocated;
}

/* deallocate_many(tensors): deallocate/1 of each; :ok. A list holding
 * anything but tensors raises and deallocates none of them. */
static ERL_NIF_TERM nif_deallocate_many(ErlNifEnv *env, int argc,
                                        const ERL_NIF_TERM argv[]) {
  (void)argc;
  ERL_NIF_TERM head, tail = argv[0];
  tensor_res *r;
  if (!enif_is_list(env, tail))
    return raise_argument(env, "deallocate_many: expected a list of Nx.Vulkan tensors");
  while (enif_get_list_cell(env, tail, &head, &tail))
    if (!enif_get_resource(env, head, TENSOR_RES, (void **)&r))
      return raise_argument(env, "deallocate_many: expected a list of Nx.Vulkan tensors");
  if (!enif_is_empty_list(env, tail))
    return raise_argument(env, "deallocate_many: expected a list of Nx.Vulkan tensors");
  tail = argv[0];
  while (enif_get_list_cell(env, tail, &head, &tail)) {
    enif_get_resource(env, head, TENSOR_RES, (void **)&r);
    deallocate_res(r);
  }
  return am_ok;
}

static ERL_NIF_TERM nif_tensor_info(ErlNifEnv *env, int argc,
                                    const ERL_NIF_TERM argv[]) {
  (void)argc;
  bool dead;
  nxv_tensor *t = grab(env, argv[0], &dead);
  if (!t) return bad_tensor(env, "tensor_info", dead);
  ERL_NIF_TERM res = enif_make_tuple2(env, am_types[nxv_tensor_dtype(t)],
                                      enif_make_uint64(env, nxv_tensor_count(t)));
  nxv_tensor_release(t);
  return res;
}

static ERL_NIF_TERM nif_reinterpret(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  nxv_dtype type;
  if (!get_dtype(env, argv[1], &type)) return raise_argument(env, "reinterpret: unknown type");
  bool dead;
  nxv_tensor *t = grab(env, argv[0], &dead);
  if (!t) return bad_tensor(env, "reinterpret", dead);
  nxv_tensor *out = NULL;
  nxv_status st = nxv_tensor_reinterpret(t, type, &out);
  nxv_tensor_release(t);
  return op_result(env, st, out, "bitcast");
}

static ERL_NIF_TERM nif_empty(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  dev_res *r;
  nxv_dtype t;
  ErlNifUInt64 count;
  if (!get_dev(env, argv[0], &r)) return raise_argument(env, "empty: expected a device");
  if (!get_dtype(env, argv[1], &t)) return raise_argument(env, "empty: unknown type");
  if (!enif_get_uint64(env, argv[2], &count))
    return raise_argument(env, "empty: count must be a non-negative integer");
  nxv_tensor *out = NULL;
  nxv_status st = nxv_tensor_empty(r->dev, t, count, &out);
  return op_result(env, st, out, "empty");
}

/* copy_into(dst, dst_offset, dst_strides, shape, src, src_offset, src_strides) */
static ERL_NIF_TERM nif_copy_into(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  int64_t shape[NXV_MAX_RANK], dst_strides[NXV_MAX_RANK], dst_offset;
  unsigned rank, nds;
  if (!get_int_list(env, argv[3], shape, &rank))
    return raise_argument(env, "copy_into: shape must be a list of at most %d integers",
                          NXV_MAX_RANK);
  if (!get_i64(env, argv[1], &dst_offset) ||
      !get_int_list(env, argv[2], dst_strides, &nds) || nds != rank)
    return raise_argument(env, "copy_into: destination offset and %u strides expected", rank);
  bool dead;
  nxv_tensor *dst = grab(env, argv[0], &dead);
  if (!dst) return bad_tensor(env, "copy_into destination", dead);
  view_arg src;
  ERL_NIF_TERM e = get_view(env, "copy_into source", argv + 4, rank, &src);
  if (!enif_is_identical(e, am_ok)) {
    nxv_tensor_release(dst);
    return e;
  }
  nxv_view vs = to_view(&src);
  nxv_status st = nxv_copy_into(nxv_tensor_device(dst), dst, dst_offset, dst_strides,
                                rank, shape, &vs);
  nxv_tensor_release(dst);
  nxv_tensor_release(src.t);
  if (st != NXV_OK) return raise_status(env, st, "copy_into");
  return am_ok;
}

static ERL_NIF_TERM nif_copy(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  bool dead;
  nxv_tensor *t = grab(env, argv[0], &dead);
  if (!t) return bad_tensor(env, "copy", dead);
  nxv_tensor *out;
  nxv_status st = nxv_tensor_copy(t, &out);
  nxv_tensor_release(t);
  return op_result(env, st, out, "copy");
}

/* ------------------------------------------------------------------ */
/* Ops                                                                 */
/* ------------------------------------------------------------------ */

/* Decodes a shape (argv[0]) and nviews views (argv[1..], three terms
 * each) for an elementwise op. On success returns am_ok and the views hold
 * one tensor reference each (release_views drops them); otherwise raises
 * and holds nothing. */
static ERL_NIF_TERM decode_views(ErlNifEnv *env, const char *what,
                                 const ERL_NIF_TERM argv[], int nviews,
                                 int64_t *shape, unsigned *rank, view_arg *v) {
  static const char *const names[3] = {"operand a", "operand b", "operand c"};
  if (!get_int_list(env, argv[0], shape, rank))
    return raise_argument(env, "%s: shape must be a list of at most %d integers",
                          what, NXV_MAX_RANK);
  for (int i = 0; i < nviews; i++) {
    ERL_NIF_TERM e = get_view_part(env, what, names[i], argv + 1 + 3 * i, *rank, &v[i]);
    if (!enif_is_identical(e, am_ok)) {
      for (int j = 0; j < i; j++) nxv_tensor_release(v[j].t);
      return e;
    }
  }
  return am_ok;
}

static void release_views(view_arg *v, int nviews) {
  for (int i = 0; i < nviews; i++) nxv_tensor_release(v[i].t);
}

/* Decodes the operands of binary/8 and compare/8 (argv: shape, then a
 * and b as tensor, offset, strides each). Either operand may instead be a
 * binary: one element of the other operand's type, an immediate scalar
 * (offset 0, strides nil). On success v[0], v[1] hold the tensors (the
 * immediate's NULL where *out_imm is set: it points into argv's binary,
 * and *out_imm_first says whether it is operand a) and the caller
 * releases them with release_views. */
static ERL_NIF_TERM decode_two(ErlNifEnv *env, const char *what, const ERL_NIF_TERM argv[],
                               int64_t *shape, unsigned *rank, view_arg v[2],
                               const void **out_imm, bool *out_imm_first) {
  *out_imm = NULL;
  *out_imm_first = false;
  int imm_at = enif_is_binary(env, argv[1]) ? 0 : enif_is_binary(env, argv[4]) ? 1 : -1;
  if (imm_at < 0) return decode_views(env, what, argv, 2, shape, rank, v);
  if (!get_int_list(env, argv[0], shape, rank))
    return raise_argument(env, "%s: shape must be a list of at most %d integers", what,
                          NXV_MAX_RANK);
  const ERL_NIF_TERM *it = argv + 1 + 3 * imm_at, *xt = argv + 1 + 3 * (1 - imm_at);
  view_arg *x = &v[1 - imm_at];
  ERL_NIF_TERM e = get_view_part(env, what, imm_at ? "operand a" : "operand b", xt, *rank, x);
  if (!enif_is_identical(e, am_ok)) return e;
  v[imm_at].t = NULL;
  ErlNifBinary bin;
  int64_t off;
  nxv_dtype t = nxv_tensor_dtype(x->t);
  size_t es = nxv_dtype_size(t);
  if (!enif_inspect_binary(env, it[0], &bin) || bin.size != es || !get_i64(env, it[1], &off) ||
      off != 0 || !enif_is_identical(it[2], am_nil)) {
    nxv_tensor_release(x->t);
    x->t = NULL;
    return raise_argument(env,
                          "%s operand %c: an immediate operand must be one %s element "
                          "(%zu bytes) with offset 0 and strides nil",
                          what, imm_at ? 'b' : 'a', nxv_dtype_name(t), es);
  }
  *out_imm = bin.data;
  *out_imm_first = imm_at == 0;
  return am_ok;
}

/* The two families of two-operand elementwise ops: binary/8's
 * arithmetic and compare/8's comparisons, whose ops are numbered apart
 * (nxv_binary_op, nxv_compare_op). */
typedef enum { PAIR_BINARY, PAIR_COMPARE } pair_kind;

/* Op number op of kind for the atom op_t; -1 for an unknown one. */
static int pair_op(pair_kind kind, ERL_NIF_TERM op_t) {
  return kind == PAIR_COMPARE ? find_atom(op_t, am_cmpops, NXV_COMPARE_OP_COUNT)
                              : find_atom(op_t, am_binops, NXV_BINARY_OP_COUNT);
}

static const char *pair_op_name(pair_kind kind, int op) {
  return kind == PAIR_COMPARE ? nxv_compare_op_name((nxv_compare_op)op)
                              : nxv_binary_op_name((nxv_binary_op)op);
}

/* Queues op (of kind) on v[0] and v[1], as decode_two leaves them: where
 * imm is set it is one element of the other operand's type and stands
 * for operand a (imm_first) or b, whose view is unused. The views stay
 * the caller's to release. */
static nxv_status run_pair(pair_kind kind, int op, unsigned rank, const int64_t *shape,
                           const view_arg v[2], const void *imm, bool imm_first,
                           nxv_tensor **out_t) {
  bool cmp = kind == PAIR_COMPARE;
  if (imm) {
    const view_arg *x = &v[imm_first ? 1 : 0];
    nxv_device *d = nxv_tensor_device(x->t);
    nxv_view vx = to_view(x);
    return cmp ? nxv_compare_scalar(d, (nxv_compare_op)op, rank, shape, &vx, imm_first, imm,
                                    out_t)
               : nxv_binary_scalar(d, (nxv_binary_op)op, rank, shape, &vx, imm_first, imm,
                                   out_t);
  }
  nxv_device *d = nxv_tensor_device(v[0].t);
  nxv_view va = to_view(&v[0]), vb = to_view(&v[1]);
  return cmp ? nxv_compare(d, (nxv_compare_op)op, rank, shape, &va, &vb, out_t)
             : nxv_binary(d, (nxv_binary_op)op, rank, shape, &va, &vb, out_t);
}

/* binary/8 and compare/8: op, shape, then a and b (decode_two). */
static ERL_NIF_TERM nif_pair(ErlNifEnv *env, pair_kind kind, const ERL_NIF_TERM argv[]) {
  const char *what = kind == PAIR_COMPARE ? "compare" : "binary";
  int op = pair_op(kind, argv[0]);
  if (op < 0) return raise_argument(env, "%s: unknown op", what);
  int64_t shape[NXV_MAX_RANK];
  unsigned rank;
  view_arg v[2];
  const void *imm;
  bool imm_first;
  ERL_NIF_TERM e = decode_two(env, what, argv + 1, shape, &rank, v, &imm, &imm_first);
  if (!enif_is_identical(e, am_ok)) return e;
  nxv_tensor *out = NULL;
  nxv_status st = run_pair(kind, op, rank, shape, v, imm, imm_first, &out);
  release_views(v, 2);
  return op_result(env, st, out, pair_op_name(kind, op));
}

static ERL_NIF_TERM nif_binary(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  return nif_pair(env, PAIR_BINARY, argv);
}

static ERL_NIF_TERM nif_compare(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  return nif_pair(env, PAIR_COMPARE, argv);
}

static ERL_NIF_TERM nif_select(ErlNifEnv *env, int argc,
                               const ERL_NIF_TERM argv[]) {
  (void)argc;
  int64_t shape[NXV_MAX_RANK];
  unsigned rank;
  view_arg v[3];
  ERL_NIF_TERM e = decode_views(env, "select", argv, 3, shape, &rank, v);
  if (!enif_is_identical(e, am_ok)) return e;
  nxv_view vp = to_view(&v[0]), va = to_view(&v[1]), vb = to_view(&v[2]);
  nxv_tensor *out = NULL;
  nxv_status st = nxv_select(nxv_tensor_device(v[0].t), rank, shape, &vp, &va, &vb, &out);
  release_views(v, 3);
  return op_result(env, st, out, "select");
}

static ERL_NIF_TERM nif_unary(ErlNifEnv *env, int argc,
                              const ERL_NIF_TERM argv[]) {
  (void)argc;
  int op = find_atom(argv[0], am_unops, NXV_UNARY_OP_COUNT);
  if (op < 0) return raise_argument(env, "unary: unknown op");
  int64_t shape[NXV_MAX_RANK];
  unsigned rank;
  view_arg a;
  ERL_NIF_TERM e = decode_views(env, "unary", argv + 1, 1, shape, &rank, &a);
  if (!enif_is_identical(e, am_ok)) return e;
  nxv_view va = to_view(&a);
  nxv_tensor *out = NULL;
  nxv_status st = nxv_unary(nxv_tensor_device(a.t), (nxv_unary_op)op, rank,
                            shape, &va, &out);
  nxv_tensor_release(a.t);
  return op_result(env, st, out, nxv_unary_op_name((nxv_unary_op)op));
}

/* The element of size bytes (1, 2, 4 or 8) at data, in native byte order,
 * as the low bits of a word. */
static uint64_t imm_value(const unsigned char *data, size_t size) {
  uint8_t b1;
  uint16_t b2;
  uint32_t b4;
  uint64_t b8;
  switch (size) {
    case 1: memcpy(&b1, data, 1); return b1;
    case 2: memcpy(&b2, data, 2); return b2;
    case 4: memcpy(&b4, data, 4); return b4;
    default: memcpy(&b8, data, 8); return b8;
  }
}

/* The new tensors of a program of two results, as a tuple: those whose
 * dests[k].dst is NULL, in order. */
static ERL_NIF_TERM pair_result(ErlNifEnv *env, const nxv_fused_dest *dests,
                                nxv_tensor *const *outs) {
  ERL_NIF_TERM made[NXV_FUSED_MAX_RESULTS];
  unsigned n = 0;
  for (unsigned k = 0; k < NXV_FUSED_MAX_RESULTS; k++)
    if (!dests[k].dst) made[n++] = wrap_tensor(env, outs[k]);
  return enif_make_tuple_from_array(env, made, n);
}

/* fused(type, shape, program, inputs): program a list of instruction
 * words (nxv_fused), inputs a list of {tensor, offset, strides | nil} or
 * immediates: binaries of one element of type (native byte order), passed
 * in the dispatch (nxv_fused_imm). At least one input is a tensor, whose
 * device runs the program. With second (not 0) the program has a second
 * result (nxv_fused_pair) and dests says where each goes; else the
 * result goes into dests[0].dst when dests is not NULL, or to a new
 * tensor. */
static ERL_NIF_TERM fused_call(ErlNifEnv *env, const ERL_NIF_TERM argv[], uint32_t second,
                               const nxv_fused_dest *dests) {
  nxv_tensor *dst = !second && dests ? dests[0].dst : NULL;
  int64_t dst_offset = dst ? dests[0].offset : 0;
  nxv_dtype t;
  if (!get_dtype(env, argv[0], &t)) return raise_argument(env, "fused: unknown type");
  int64_t shape[NXV_MAX_RANK];
  unsigned rank, ninstrs, ninputs;
  if (!get_int_list(env, argv[1], shape, &rank))
    return raise_argument(env, "fused: shape must be a list of at most %d integers",
                          NXV_MAX_RANK);
  uint32_t program[NXV_FUSED_MAX_INSTRS];
  ERL_NIF_TERM head, tail = argv[2];
  program_res *prepared = NULL;
  if (enif_get_resource(env, argv[2], PROGRAM_RES, (void **)&prepared)) {
    ninstrs = 0;
  } else {
    if (!enif_get_list_length(env, argv[2], &ninstrs) || ninstrs > NXV_FUSED_MAX_INSTRS)
      return raise_argument(env, "fused: program must be a list of at most %d words or a "
                            "prepared program (fused_program/3)", NXV_FUSED_MAX_INSTRS);
    for (unsigned i = 0; i < ninstrs; i++) {
      enif_get_list_cell(env, tail, &head, &tail);
      unsigned w;
      if (!enif_get_uint(env, head, &w))
        return raise_argument(env, "fused: program word %u is not a 32-bit integer", i);
      program[i] = w;
    }
  }
  if (!enif_get_list_length(env, argv[3], &ninputs) || ninputs < 1 ||
      ninputs > NXV_FUSED_MAX_INPUTS)
    return raise_argument(env, "fused: inputs must be a list of 1 to %d views",
                          NXV_FUSED_MAX_INPUTS);
  if (prepared && (nxv_fused_program_dtype(prepared->p) != t ||
                   nxv_fused_program_inputs(prepared->p) != ninputs))
    return raise_argument(env, "fused: the prepared program is of %s over %u inputs, the "
                          "call gives %s and %u inputs",
                          nxv_dtype_name(nxv_fused_program_dtype(prepared->p)),
                          nxv_fused_program_inputs(prepared->p), nxv_dtype_name(t), ninputs);
  if (prepared && nxv_fused_program_second(prepared->p) != second)
    return raise_argument(env, "fused: the prepared program's second result is register %u, "
                          "the call gives %u (0: none)",
                          nxv_fused_program_second(prepared->p), second);
  /* The inputs' names in errors ("fused input 3: ..."), not formatted per
   * call. */
  _Static_assert(NXV_FUSED_MAX_INPUTS == 12, "one name per fused input");
  static const char *const kInputs[NXV_FUSED_MAX_INPUTS] = {
      "input 0", "input 1", "input 2", "input 3", "input 4",  "input 5",
      "input 6", "input 7", "input 8", "input 9", "input 10", "input 11"};
  view_arg v[NXV_FUSED_MAX_INPUTS] = {0};
  nxv_view views[NXV_FUSED_MAX_INPUTS];
  uint64_t imm_bits[NXV_FUSED_MAX_INPUTS] = {0};
  uint32_t imm_mask = 0;
  nxv_device *device = NULL;
  size_t elem_size = nxv_dtype_size(t);
  tail = argv[3];
  for (unsigned i = 0; i < ninputs; i++) {
    enif_get_list_cell(env, tail, &head, &tail);
    const ERL_NIF_TERM *elems;
    int arity;
    ErlNifBinary imm;
    ERL_NIF_TERM e;
    if (enif_inspect_binary(env, head, &imm)) {
      e = imm.size == elem_size && elem_size <= sizeof *imm_bits
              ? am_ok
              : raise_argument(env, "fused input %u: an immediate must be one %s element "
                               "(%zu bytes), got %zu bytes", i, nxv_dtype_name(t), elem_size,
                               imm.size);
      if (enif_is_identical(e, am_ok)) {
        imm_bits[i] = imm_value(imm.data, imm.size);
        imm_mask |= 1u << i;
      }
    } else {
      e = enif_get_tuple(env, head, &arity, &elems) && arity == 3
              ? get_view_part(env, "fused", kInputs[i], elems, rank, &v[i])
              : raise_argument(env, "fused input %u must be {tensor, offset, strides} or an "
                               "immediate", i);
    }
    if (!enif_is_identical(e, am_ok)) {
      release_views(v, (int)i);
      return e;
    }
    views[i] = to_view(&v[i]);
    if (!device && v[i].t) device = nxv_tensor_device(v[i].t);
  }
  if (!device) {
    release_views(v, (int)ninputs);
    return raise_argument(env, "fused: at least one input must be a tensor");
  }
  nxv_tensor *out = NULL, *outs[NXV_FUSED_MAX_RESULTS] = {NULL, NULL};
  nxv_status st;
  if (second)
    st = prepared ? nxv_fused_run_pair(device, prepared->p, rank, shape, views, imm_mask,
                                       imm_bits, dests, outs)
                  : nxv_fused_pair(device, t, rank, shape, ninputs, views, imm_mask, imm_bits,
                                   ninstrs, program, second, dests, outs);
  else if (dst)
    st = prepared ? nxv_fused_run_into(device, prepared->p, rank, shape, views, imm_mask,
                                       imm_bits, dst, dst_offset)
                  : nxv_fused_into(device, t, rank, shape, ninputs, views, imm_mask, imm_bits,
                                   ninstrs, program, dst, dst_offset);
  else
    st = prepared ? nxv_fused_run(device, prepared->p, rank, shape, views, imm_mask, imm_bits,
                                  &out)
                  : nxv_fused_imm(device, t, rank, shape, ninputs, views, imm_mask, imm_bits,
                                  ninstrs, program, &out);
  release_views(v, (int)ninputs);
  if (second)
    return st == NXV_OK ? pair_result(env, dests, outs) : raise_status(env, st, "fused");
  if (dst) return st == NXV_OK ? am_ok : raise_status(env, st, "fused");
  return op_result(env, st, out, "fused");
}

static ERL_NIF_TERM nif_fused(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  return fused_call(env, argv, 0, NULL);
}

/* A destination of fused_pair/9: nil (a new tensor) or a tensor, with its
 * offset (an integer either way); *dest->dst retained. am_ok or a raised
 * exception. */
static ERL_NIF_TERM pair_dest(ErlNifEnv *env, ERL_NIF_TERM dst_t, ERL_NIF_TERM off_t,
                              unsigned k, nxv_fused_dest *dest) {
  dest->dst = NULL;
  dest->offset = 0;
  bool dead;
  if (!get_i64(env, off_t, &dest->offset))
    return raise_argument(env, "fused_pair: destination %u's offset must be an integer", k);
  if (enif_is_identical(dst_t, am_nil)) return am_ok;
  dest->dst = grab(env, dst_t, &dead);
  if (!dest->dst)
    return bad_tensor(env, k ? "fused_pair second destination" : "fused_pair destination",
                      dead);
  return am_ok;
}

/* fused_pair(type, shape, program, second, inputs, dst0, offset0, dst1,
 * offset1): fused/4 of a program with a second result, register second
 * (nxv_fused_pair; program a list of words or a program prepared by
 * fused_program/4): the program's result goes into dst0 from element
 * offset0 on, the second into dst1 from offset1, or, where a dst is nil,
 * to a new tensor. Returns a tuple of the new tensors, in that order. */
static ERL_NIF_TERM nif_fused_pair(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  unsigned second;
  if (!enif_get_uint(env, argv[3], &second) || second == 0)
    return raise_argument(env, "fused_pair: the second result's register must be a positive "
                          "integer");
  nxv_fused_dest dests[NXV_FUSED_MAX_RESULTS];
  ERL_NIF_TERM e = pair_dest(env, argv[5], argv[6], 0, &dests[0]);
  if (!enif_is_identical(e, am_ok)) return e;
  e = pair_dest(env, argv[7], argv[8], 1, &dests[1]);
  if (!enif_is_identical(e, am_ok)) {
    if (dests[0].dst) nxv_tensor_release(dests[0].dst);
    return e;
  }
  const ERL_NIF_TERM args[4] = {argv[0], argv[1], argv[2], argv[4]};
  ERL_NIF_TERM r = fused_call(env, args, second, dests);
  for (unsigned k = 0; k < NXV_FUSED_MAX_RESULTS; k++)
    if (dests[k].dst) nxv_tensor_release(dests[k].dst);
  return r;
}

/* fused_into(dst, dst_offset, type, shape, program, inputs): fused/4 with
 * its result written into dst from element dst_offset on
 * (nxv_fused_into); returns :ok. */
static ERL_NIF_TERM nif_fused_into(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  bool dead;
  int64_t off;
  if (!get_i64(env, argv[1], &off))
    return raise_argument(env, "fused_into: the destination offset must be an integer");
  nxv_tensor *dst = grab(env, argv[0], &dead);
  if (!dst) return bad_tensor(env, "fused_into destination", dead);
  nxv_fused_dest dest = {dst, off};
  ERL_NIF_TERM r = fused_call(env, argv + 2, 0, &dest);
  nxv_tensor_release(dst);
  return r;
}

/* fused_program(type, ninputs, program): the program (a list of words, as
 * fused/4 takes it) prepared for runs over ninputs inputs of type, for
 * fused/4 in its place (nxv_fused_program_create); fused_program(type,
 * ninputs, program, second): a program with a second result, register
 * second, for fused_pair/9 (nxv_fused_program_create_pair). */
static ERL_NIF_TERM nif_fused_program(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  unsigned second = 0;
  if (argc == 4 && (!enif_get_uint(env, argv[3], &second) || second == 0))
    return raise_argument(env, "fused_program: the second result's register must be a "
                          "positive integer");
  nxv_dtype t;
  unsigned ninputs, ninstrs;
  uint32_t program[NXV_FUSED_MAX_INSTRS];
  ERL_NIF_TERM head, tail = argv[2];
  if (!get_dtype(env, argv[0], &t)) return raise_argument(env, "fused_program: unknown type");
  if (!enif_get_uint(env, argv[1], &ninputs))
    return raise_argument(env, "fused_program: the input count must be an integer");
  if (!enif_get_list_length(env, argv[2], &ninstrs) || ninstrs > NXV_FUSED_MAX_INSTRS)
    return raise_argument(env, "fused_program: program must be a list of at most %d words",
                          NXV_FUSED_MAX_INSTRS);
  for (unsigned i = 0; i < ninstrs; i++) {
    enif_get_list_cell(env, tail, &head, &tail);
    if (!enif_get_uint(env, head, &program[i]))
      return raise_argument(env, "fused_program: program word %u is not a 32-bit integer", i);
  }
  nxv_fused_program *p = NULL;
  nxv_status st = second ? nxv_fused_program_create_pair(t, ninputs, ninstrs, program, second, &p)
                         : nxv_fused_program_create(t, ninputs, ninstrs, program, &p);
  if (st != NXV_OK) return raise_status(env, st, "fused");
  program_res *r = enif_alloc_resource(PROGRAM_RES, sizeof *r);
  if (!r) {
    nxv_fused_program_free(p);
    return raise_argument(env, "fused_program: out of memory");
  }
  r->p = p;
  ERL_NIF_TERM term = enif_make_resource(env, r);
  enif_release_resource(r);
  return term;
}

/* fused_check(device, type, ninputs, program, second): :ok when the
 * device would run the program (nxv_fused_check; second 0: one result),
 * else raises as fused/4 and fused_pair/9 would. */
static ERL_NIF_TERM nif_fused_check(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  dev_res *r;
  nxv_dtype t;
  unsigned ninputs, ninstrs, second;
  uint32_t program[NXV_FUSED_MAX_INSTRS];
  ERL_NIF_TERM head, tail = argv[3];
  if (!get_dev(env, argv[0], &r)) return raise_argument(env, "fused_check: expected a device");
  if (!get_dtype(env, argv[1], &t)) return raise_argument(env, "fused_check: unknown type");
  if (!enif_get_uint(env, argv[2], &ninputs))
    return raise_argument(env, "fused_check: the input count must be an integer");
  if (!enif_get_list_length(env, argv[3], &ninstrs) || ninstrs > NXV_FUSED_MAX_INSTRS)
    return raise_argument(env, "fused_check: program must be a list of at most %d words",
                          NXV_FUSED_MAX_INSTRS);
  for (unsigned i = 0; i < ninstrs; i++) {
    enif_get_list_cell(env, tail, &head, &tail);
    if (!enif_get_uint(env, head, &program[i]))
      return raise_argument(env, "fused_check: program word %u is not a 32-bit integer", i);
  }
  if (!enif_get_uint(env, argv[4], &second))
    return raise_argument(env, "fused_check: the second result's register must be a "
                          "non-negative integer (0: none)");
  nxv_status st = nxv_fused_check(r->dev, t, ninputs, ninstrs, program, second);
  if (st != NXV_OK) return raise_status(env, st, "fused");
  return am_ok;
}

static ERL_NIF_TERM nif_convert(ErlNifEnv *env, int argc,
                                const ERL_NIF_TERM argv[]) {
  (void)argc;
  nxv_dtype t;
  if (!get_dtype(env, argv[0], &t)) return raise_argument(env, "convert: unknown type");
  int64_t shape[NXV_MAX_RANK];
  unsigned rank;
  view_arg a;
  ERL_NIF_TERM e = decode_views(env, "convert", argv + 1, 1, shape, &rank, &a);
  if (!enif_is_identical(e, am_ok)) return e;
  nxv_view va = to_view(&a);
  nxv_tensor *out = NULL;
  nxv_status st = nxv_convert(nxv_tensor_device(a.t), t, rank, shape, &va, &out);
  nxv_tensor_release(a.t);
  return op_result(env, st, out, "as_type");
}

/* Decodes an axes list of a reduction over rank into a bit mask; false
 * (with *out_error set) on a bad list. */
static bool get_axes_mask(ErlNifEnv *env, const char *what, ERL_NIF_TERM list,
                          unsigned rank, uint32_t *out_mask, ERL_NIF_TERM *out_error) {
  int64_t axes[NXV_MAX_RANK];
  unsigned naxes;
  if (!get_int_list(env, list, axes, &naxes)) {
    *out_error = raise_argument(env, "%s: axes must be a list of integers", what);
    return false;
  }
  uint32_t mask = 0;
  for (unsigned i = 0; i < naxes; i++) {
    if (axes[i] < 0 || axes[i] >= (int64_t)rank) {
      *out_error = raise_argument(env, "%s: axis %lld out of rank %u", what,
                                  (long long)axes[i], rank);
      return false;
    }
    mask |= 1u << axes[i];
  }
  *out_mask = mask;
  return true;
}

/* reduce(op, shape, ref, offset, strides, axes, type): type is the
 * result's, the operand's or (sums and products of narrow integers) the
 * 64-bit type of its sign (nxv_reduce_to). */
static ERL_NIF_TERM nif_reduce(ErlNifEnv *env, int argc,
                               const ERL_NIF_TERM argv[]) {
  (void)argc;
  int op = find_atom(argv[0], am_redops, NXV_REDUCE_OP_COUNT);
  if (op < 0) return raise_argument(env, "reduce: unknown op");
  int64_t shape[NXV_MAX_RANK];
  unsigned rank;
  if (!get_int_list(env, argv[1], shape, &rank))
    return raise_argument(env, "reduce: shape must be a list of at most %d integers",
                          NXV_MAX_RANK);
  uint32_t mask;
  ERL_NIF_TERM e;
  if (!get_axes_mask(env, "reduce", argv[5], rank, &mask, &e)) return e;
  nxv_dtype out_type;
  if (!get_dtype(env, argv[6], &out_type))
    return raise_argument(env, "reduce: unknown result type");
  view_arg a;
  e = get_view(env, "reduce operand", argv + 2, rank, &a);
  if (!enif_is_identical(e, am_ok)) return e;
  nxv_view va = to_view(&a);
  nxv_tensor *out = NULL;
  nxv_status st = nxv_reduce_to(nxv_tensor_device(a.t), (nxv_reduce_op)op, out_type,
                                rank, shape, &va, mask, &out);
  nxv_tensor_release(a.t);
  return op_result(env, st, out, nxv_reduce_op_name((nxv_reduce_op)op));
}

/* argreduce(:argmax | :argmin, tie_high, shape, ref, offset, strides, axes) */
static ERL_NIF_TERM nif_argreduce(ErlNifEnv *env, int argc,
                                  const ERL_NIF_TERM argv[]) {
  (void)argc;
  bool is_max;
  if (enif_is_identical(argv[0], enif_make_atom(env, "argmax"))) is_max = true;
  else if (enif_is_identical(argv[0], enif_make_atom(env, "argmin"))) is_max = false;
  else return raise_argument(env, "argreduce: op must be :argmax or :argmin");
  bool high = enif_is_identical(argv[1], am_true);
  if (!high && !enif_is_identical(argv[1], am_false))
    return raise_argument(env, "argreduce: tie_high must be a boolean");
  int64_t shape[NXV_MAX_RANK];
  unsigned rank;
  if (!get_int_list(env, argv[2], shape, &rank))
    return raise_argument(env, "argreduce: shape must be a list of at most %d integers",
                          NXV_MAX_RANK);
  uint32_t mask;
  ERL_NIF_TERM e;
  if (!get_axes_mask(env, "argreduce", argv[6], rank, &mask, &e)) return e;
  view_arg a;
  e = get_view(env, "argreduce operand", argv + 3, rank, &a);
  if (!enif_is_identical(e, am_ok)) return e;
  nxv_view va = to_view(&a);
  nxv_tensor *out = NULL;
  nxv_status st = nxv_argreduce(nxv_tensor_device(a.t), is_max, high, rank, shape,
                                &va, mask, &out);
  nxv_tensor_release(a.t);
  return op_result(env, st, out, is_max ? "argmax" : "argmin");
}

static ERL_NIF_TERM nif_transpose(ErlNifEnv *env, int argc,
                                  const ERL_NIF_TERM argv[]) {
  (void)argc;
  int64_t shape[NXV_MAX_RANK], perm64[NXV_MAX_RANK];
  unsigned rank, nperm;
  if (!get_int_list(env, argv[0], shape, &rank))
    return raise_argument(env, "transpose: shape must be a list of at most %d integers",
                          NXV_MAX_RANK);
  if (!get_int_list(env, argv[2], perm64, &nperm) || nperm != rank)
    return raise_argument(env, "transpose: axes must be a list of %u integers", rank);
  uint32_t perm[NXV_MAX_RANK];
  for (unsigned i = 0; i < rank; i++) {
    if (perm64[i] < 0 || perm64[i] >= (int64_t)rank)
      return raise_argument(env, "transpose: axis %lld out of rank %u",
                            (long long)perm64[i], rank);
    perm[i] = (uint32_t)perm64[i];
  }
  bool dead;
  nxv_tensor *t = grab(env, argv[1], &dead);
  if (!t) return bad_tensor(env, "transpose", dead);
  nxv_tensor *out = NULL;
  nxv_status st = nxv_transpose(nxv_tensor_device(t), rank, shape, t, perm, &out);
  nxv_tensor_release(t);
  return op_result(env, st, out, "transpose");
}

static ERL_NIF_TERM nif_matmul(ErlNifEnv *env, int argc,
                               const ERL_NIF_TERM argv[]) {
  (void)argc;
  ErlNifUInt64 dims[4];
  for (int i = 0; i < 4; i++)
    if (!enif_get_uint64(env, argv[i], &dims[i]))
      return raise_argument(env, "matmul: batch, m, n, k must be non-negative integers");
  int64_t as[NXV_MAX_RANK], bs[NXV_MAX_RANK], aoff, boff;
  unsigned na, nb;
  if (!get_i64(env, argv[5], &aoff) || !get_i64(env, argv[8], &boff))
    return raise_argument(env, "matmul: offsets must be integers");
  if (!get_int_list(env, argv[6], as, &na) || na != 3 ||
      !get_int_list(env, argv[9], bs, &nb) || nb != 3)
    return raise_argument(env, "matmul: strides must be lists of 3 integers");
  bool dead;
  nxv_tensor *a = grab(env, argv[4], &dead);
  if (!a) return bad_tensor(env, "matmul operand a", dead);
  nxv_tensor *b = grab(env, argv[7], &dead);
  if (!b) {
    nxv_tensor_release(a);
    return bad_tensor(env, "matmul operand b", dead);
  }
  nxv_matmul_desc m = {.batch = dims[0], .m = dims[1], .n = dims[2], .k = dims[3],
                       .a = a, .a_offset = aoff, .a_strides = {as[0], as[1], as[2]},
                       .b = b, .b_offset = boff, .b_strides = {bs[0], bs[1], bs[2]}};
  nxv_tensor *out = NULL;
  nxv_status st = nxv_matmul(nxv_tensor_device(a), &m, &out);
  nxv_tensor_release(a);
  nxv_tensor_release(b);
  return op_result(env, st, out, "dot");
}

/* gather(src, src_offset, indices, shape, src_strides, index_strides,
 *        axis_dims, axis_strides) */
static ERL_NIF_TERM nif_gather(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  int64_t off, shape[NXV_MAX_RANK], ss[NXV_MAX_RANK], is[NXV_MAX_RANK],
      ad[NXV_MAX_RANK], as[NXV_MAX_RANK];
  unsigned rank, n1, n2, depth, n3;
  if (!get_i64(env, argv[1], &off))
    return raise_argument(env, "gather: offset must be an integer");
  if (!get_int_list(env, argv[3], shape, &rank) || !get_int_list(env, argv[4], ss, &n1) ||
      !get_int_list(env, argv[5], is, &n2) || n1 != rank || n2 != rank)
    return raise_argument(env, "gather: shape and both stride lists must have the "
                               "same length (at most %d)", NXV_MAX_RANK);
  if (!get_int_list(env, argv[6], ad, &depth) || !get_int_list(env, argv[7], as, &n3) ||
      n3 != depth)
    return raise_argument(env, "gather: axis dims and strides must be lists of the "
                               "same length");
  bool dead;
  nxv_tensor *src = grab(env, argv[0], &dead);
  if (!src) return bad_tensor(env, "gather source", dead);
  nxv_tensor *idx = grab(env, argv[2], &dead);
  if (!idx) {
    nxv_tensor_release(src);
    return bad_tensor(env, "gather indices", dead);
  }
  nxv_gather_desc g = {.src = src, .src_offset = off, .indices = idx, .rank = rank,
                       .shape = shape, .src_strides = ss, .index_strides = is,
                       .depth = depth, .axis_dims = ad, .axis_strides = as};
  nxv_tensor *out = NULL;
  nxv_status st = nxv_gather(nxv_tensor_device(src), &g, &out);
  nxv_tensor_release(src);
  nxv_tensor_release(idx);
  return op_result(env, st, out, "gather");
}

/* scatter(:put | :add, dst, updates, indices, count, slice_shape,
 *         dst_strides, axis_dims, axis_strides): in place, returns :ok. */
static ERL_NIF_TERM nif_scatter(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  bool add;
  if (enif_is_identical(argv[0], enif_make_atom(env, "add"))) add = true;
  else if (enif_is_identical(argv[0], enif_make_atom(env, "put"))) add = false;
  else return raise_argument(env, "scatter: op must be :put or :add");
  ErlNifUInt64 count;
  if (!enif_get_uint64(env, argv[4], &count))
    return raise_argument(env, "scatter: count must be a non-negative integer");
  int64_t shape[NXV_MAX_RANK], ds[NXV_MAX_RANK], ad[NXV_MAX_RANK], as[NXV_MAX_RANK];
  unsigned rank, n1, depth, n2;
  if (!get_int_list(env, argv[5], shape, &rank) || !get_int_list(env, argv[6], ds, &n1) ||
      n1 != rank)
    return raise_argument(env, "scatter: slice shape and strides must have the same "
                               "length (at most %d)", NXV_MAX_RANK);
  if (!get_int_list(env, argv[7], ad, &depth) || !get_int_list(env, argv[8], as, &n2) ||
      n2 != depth)
    return raise_argument(env, "scatter: axis dims and strides must be lists of the "
                               "same length");
  bool dead;
  nxv_tensor *t[3] = {NULL, NULL, NULL};
  static const char *const what[3] = {"scatter target", "scatter updates",
                                      "scatter indices"};
  for (int i = 0; i < 3; i++) {
    t[i] = grab(env, argv[1 + i], &dead);
    if (!t[i]) {
      for (int j = 0; j < i; j++) nxv_tensor_release(t[j]);
      return bad_tensor(env, what[i], dead);
    }
  }
  nxv_scatter_desc sd = {.dst = t[0], .updates = t[1], .indices = t[2], .count = count,
                         .add = add, .rank = rank, .slice_shape = shape,
                         .dst_strides = ds, .depth = depth, .axis_dims = ad,
                         .axis_strides = as};
  nxv_status st = nxv_scatter(nxv_tensor_device(t[0]), &sd);
  for (int i = 0; i < 3; i++) nxv_tensor_release(t[i]);
  if (st != NXV_OK) return raise_status(env, st, add ? "indexed_add" : "indexed_put");
  return am_ok;
}

/* sort(ref, rows, len, descending, :values | :indices | :both) */
static ERL_NIF_TERM nif_sort(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  ErlNifUInt64 rows, len;
  if (!enif_get_uint64(env, argv[1], &rows) || !enif_get_uint64(env, argv[2], &len))
    return raise_argument(env, "sort: rows and len must be non-negative integers");
  bool desc = enif_is_identical(argv[3], am_true);
  if (!desc && !enif_is_identical(argv[3], am_false))
    return raise_argument(env, "sort: descending must be a boolean");
  bool want_v = enif_is_identical(argv[4], enif_make_atom(env, "values")) ||
                enif_is_identical(argv[4], enif_make_atom(env, "both"));
  bool want_i = enif_is_identical(argv[4], enif_make_atom(env, "indices")) ||
                enif_is_identical(argv[4], enif_make_atom(env, "both"));
  if (!want_v && !want_i)
    return raise_argument(env, "sort: want :values, :indices or :both");
  bool dead;
  nxv_tensor *a = grab(env, argv[0], &dead);
  if (!a) return bad_tensor(env, "sort operand", dead);
  nxv_tensor *v = NULL, *i = NULL;
  nxv_status st = nxv_sort(nxv_tensor_device(a), a, rows, len, desc,
                           want_v ? &v : NULL, want_i ? &i : NULL);
  nxv_tensor_release(a);
  if (st != NXV_OK) return raise_status(env, st, want_v ? "sort" : "argsort");
  if (want_v && want_i)
    return enif_make_tuple2(env, wrap_tensor(env, v), wrap_tensor(env, i));
  return wrap_tensor(env, want_v ? v : i);
}

/* fft(ref, rows, n, inverse, eps): the DFT of each row of a dense complex
 * rows x n tensor. */
static ERL_NIF_TERM nif_fft(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  ErlNifUInt64 rows, n;
  double eps;
  if (!enif_get_uint64(env, argv[1], &rows) || !enif_get_uint64(env, argv[2], &n))
    return raise_argument(env, "fft: rows and n must be non-negative integers");
  bool inverse = enif_is_identical(argv[3], am_true);
  if (!inverse && !enif_is_identical(argv[3], am_false))
    return raise_argument(env, "fft: inverse must be a boolean");
  if (!enif_get_double(env, argv[4], &eps))
    return raise_argument(env, "fft: eps must be a float");
  bool dead;
  nxv_tensor *a = grab(env, argv[0], &dead);
  if (!a) return bad_tensor(env, "fft operand", dead);
  nxv_tensor *out = NULL;
  nxv_status st = nxv_fft(nxv_tensor_device(a), a, rows, n, inverse, eps, &out);
  nxv_tensor_release(a);
  if (st != NXV_OK) return raise_status(env, st, inverse ? "ifft" : "fft");
  return wrap_tensor(env, out);
}

/* cholesky(ref, batch, n, eps): the Cholesky factors of a dense batch of
 * n x n f32 or f64 matrices. */
static ERL_NIF_TERM nif_cholesky(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  ErlNifUInt64 batch, n;
  double eps;
  if (!enif_get_uint64(env, argv[1], &batch) || !enif_get_uint64(env, argv[2], &n))
    return raise_argument(env, "cholesky: batch and n must be non-negative integers");
  if (!enif_get_double(env, argv[3], &eps))
    return raise_argument(env, "cholesky: eps must be a float");
  bool dead;
  nxv_tensor *a = grab(env, argv[0], &dead);
  if (!a) return bad_tensor(env, "cholesky operand", dead);
  nxv_tensor *out = NULL;
  nxv_status st = nxv_cholesky(nxv_tensor_device(a), a, batch, n, eps, &out);
  nxv_tensor_release(a);
  if (st != NXV_OK) return raise_status(env, st, "cholesky");
  return wrap_tensor(env, out);
}

/* lu(ref, batch, n, eps): {p, l, u}, the LU factorizations with partial
 * pivoting of a dense batch of n x n matrices (A = P L U). */
static ERL_NIF_TERM nif_lu(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  ErlNifUInt64 batch, n;
  double eps;
  if (!enif_get_uint64(env, argv[1], &batch) || !enif_get_uint64(env, argv[2], &n))
    return raise_argument(env, "lu: batch and n must be non-negative integers");
  if (!enif_get_double(env, argv[3], &eps)) return raise_argument(env, "lu: eps must be a float");
  bool dead;
  nxv_tensor *a = grab(env, argv[0], &dead);
  if (!a) return bad_tensor(env, "lu operand", dead);
  nxv_tensor *p = NULL, *l = NULL, *u = NULL;
  nxv_status st = nxv_lu(nxv_tensor_device(a), a, batch, n, eps, &p, &l, &u);
  nxv_tensor_release(a);
  if (st != NXV_OK) return raise_status(env, st, "lu");
  return enif_make_tuple3(env, wrap_tensor(env, p), wrap_tensor(env, l), wrap_tensor(env, u));
}

/* qr(ref, batch, m, n, complete, eps): {q, r}, the QR factorizations by
 * Householder reflections of a dense batch of m x n matrices (A = Q R). */
static ERL_NIF_TERM nif_qr(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  ErlNifUInt64 batch, m, n;
  double eps;
  if (!enif_get_uint64(env, argv[1], &batch) || !enif_get_uint64(env, argv[2], &m) ||
      !enif_get_uint64(env, argv[3], &n))
    return raise_argument(env, "qr: batch, m and n must be non-negative integers");
  bool complete = enif_is_identical(argv[4], am_true);
  if (!complete && !enif_is_identical(argv[4], am_false))
    return raise_argument(env, "qr: complete must be a boolean");
  if (!enif_get_double(env, argv[5], &eps)) return raise_argument(env, "qr: eps must be a float");
  bool dead;
  nxv_tensor *a = grab(env, argv[0], &dead);
  if (!a) return bad_tensor(env, "qr operand", dead);
  nxv_tensor *q = NULL, *r = NULL;
  nxv_status st = nxv_qr(nxv_tensor_device(a), a, batch, m, n, complete, eps, &q, &r);
  nxv_tensor_release(a);
  if (st != NXV_OK) return raise_status(env, st, "qr");
  return enif_make_tuple2(env, wrap_tensor(env, q), wrap_tensor(env, r));
}

/* eigh_iterate(a, q, batch, n, max_iter, eps): {a, q} after eigh's QR
 * iteration on a dense batch of n x n matrices (q nil: a reduced to
 * tridiagonal form first, q from the reflections). */
static ERL_NIF_TERM nif_eigh_iterate(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  ErlNifUInt64 batch, n, max_iter;
  double eps;
  if (!enif_get_uint64(env, argv[2], &batch) || !enif_get_uint64(env, argv[3], &n) ||
      !enif_get_uint64(env, argv[4], &max_iter))
    return raise_argument(env, "eigh_iterate: batch, n and max_iter must be non-negative integers");
  if (!enif_get_double(env, argv[5], &eps))
    return raise_argument(env, "eigh_iterate: eps must be a float");
  bool dead;
  nxv_tensor *a = grab(env, argv[0], &dead);
  if (!a) return bad_tensor(env, "eigh_iterate A", dead);
  /* Q nil: A reduced to tridiagonal form first. */
  nxv_tensor *q = NULL;
  if (!enif_is_identical(argv[1], am_nil) && !(q = grab(env, argv[1], &dead))) {
    nxv_tensor_release(a);
    return bad_tensor(env, "eigh_iterate Q", dead);
  }
  nxv_tensor *ra = NULL, *rq = NULL;
  nxv_status st =
      nxv_eigh_iterate(nxv_tensor_device(a), a, q, batch, n, max_iter, eps, &ra, &rq);
  nxv_tensor_release(a);
  if (q) nxv_tensor_release(q);
  if (st != NXV_OK) return raise_status(env, st, "eigh_iterate");
  return enif_make_tuple2(env, wrap_tensor(env, ra), wrap_tensor(env, rq));
}

/* triangular_solve(a, b, batch, n, cols, lower, left_side, transpose_a):
 * {x, singular}, singular a u32 per system (1: a zero on A's diagonal). */
static ERL_NIF_TERM nif_triangular_solve(ErlNifEnv *env, int argc,
                                         const ERL_NIF_TERM argv[]) {
  (void)argc;
  ErlNifUInt64 batch, n, cols;
  if (!enif_get_uint64(env, argv[2], &batch) || !enif_get_uint64(env, argv[3], &n) ||
      !enif_get_uint64(env, argv[4], &cols))
    return raise_argument(env,
                          "triangular_solve: batch, n and cols must be non-negative integers");
  bool flags[3];
  for (int i = 0; i < 3; i++) {
    flags[i] = enif_is_identical(argv[5 + i], am_true);
    if (!flags[i] && !enif_is_identical(argv[5 + i], am_false))
      return raise_argument(env,
                            "triangular_solve: lower, left_side and transpose_a must be booleans");
  }
  bool dead;
  nxv_tensor *a = grab(env, argv[0], &dead);
  if (!a) return bad_tensor(env, "triangular_solve a", dead);
  nxv_tensor *b = grab(env, argv[1], &dead);
  if (!b) {
    nxv_tensor_release(a);
    return bad_tensor(env, "triangular_solve b", dead);
  }
  nxv_trsm_desc desc = {.batch = batch, .n = n, .cols = cols, .a = a, .b = b,
                        .lower = flags[0], .left_side = flags[1], .transpose_a = flags[2]};
  nxv_tensor *x = NULL, *singular = NULL;
  nxv_status st = nxv_triangular_solve(nxv_tensor_device(a), &desc, &x, &singular);
  nxv_tensor_release(a);
  nxv_tensor_release(b);
  if (st != NXV_OK) return raise_status(env, st, "triangular_solve");
  return enif_make_tuple2(env, wrap_tensor(env, x), wrap_tensor(env, singular));
}

/* window_reduce(op, ref, in_shape, out_shape, window, strides, dilations,
 *               pad_lo) */
static ERL_NIF_TERM nif_window_reduce(ErlNifEnv *env, int argc,
                                      const ERL_NIF_TERM argv[]) {
  (void)argc;
  int op = find_atom(argv[0], am_redops, NXV_REDUCE_OP_COUNT);
  if (op < 0) return raise_argument(env, "window_reduce: unknown op");
  int64_t lists[6][NXV_MAX_RANK];
  unsigned rank = 0;
  for (int i = 0; i < 6; i++) {
    unsigned n;
    if (!get_int_list(env, argv[2 + i], lists[i], &n) || (i > 0 && n != rank))
      return raise_argument(env, "window_reduce: shapes, window, strides, dilations "
                                 "and padding must be lists of one length (at most %d)",
                            NXV_MAX_RANK);
    if (i == 0) rank = n;
  }
  bool dead;
  nxv_tensor *a = grab(env, argv[1], &dead);
  if (!a) return bad_tensor(env, "window_reduce operand", dead);
  nxv_window_desc w = {.a = a, .rank = rank, .in_shape = lists[0], .out_shape = lists[1],
                       .window = lists[2], .strides = lists[3], .dilations = lists[4],
                       .pad_lo = lists[5]};
  nxv_tensor *out = NULL;
  nxv_status st = nxv_window_reduce(nxv_tensor_device(a), (nxv_reduce_op)op, &w, &out);
  nxv_tensor_release(a);
  return op_result(env, st, out, "window_reduce");
}

/* conv(input, kernel, in_shape, kernel_shape, out_shape, strides, pad_lo,
 *      pad_hi, input_dilation, kernel_dilation, feature_groups,
 *      batch_groups): canonical layouts (see nxv_conv). */
static ERL_NIF_TERM nif_conv(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  int64_t shapes[3][NXV_MAX_RANK], spatial[5][NXV_MAX_RANK];
  unsigned rank = 0;
  for (int i = 0; i < 3; i++) {
    unsigned n;
    if (!get_int_list(env, argv[2 + i], shapes[i], &n) || (i > 0 && n != rank))
      return raise_argument(env, "conv: input, kernel and output shapes must be lists of "
                                 "one length (at most %d)", NXV_MAX_RANK);
    if (i == 0) rank = n;
  }
  if (rank < 2)
    return raise_argument(env, "conv: shapes need a batch and a channel axis, got rank %u",
                          rank);
  for (int i = 0; i < 5; i++) {
    unsigned n;
    if (!get_int_list(env, argv[5 + i], spatial[i], &n) || n != rank - 2)
      return raise_argument(env, "conv: strides, padding and dilations must be lists of "
                                 "%u integers (one per spatial axis)", rank - 2);
  }
  int64_t fg, bg;
  if (!get_i64(env, argv[10], &fg) || !get_i64(env, argv[11], &bg))
    return raise_argument(env, "conv: group sizes must be integers");
  bool dead;
  nxv_tensor *in = grab(env, argv[0], &dead);
  if (!in) return bad_tensor(env, "conv input", dead);
  nxv_tensor *k = grab(env, argv[1], &dead);
  if (!k) {
    nxv_tensor_release(in);
    return bad_tensor(env, "conv kernel", dead);
  }
  nxv_conv_desc c = {.input = in, .kernel = k, .rank = rank, .in_shape = shapes[0],
                     .kernel_shape = shapes[1], .out_shape = shapes[2],
                     .strides = spatial[0], .pad_lo = spatial[1], .pad_hi = spatial[2],
                     .input_dilation = spatial[3], .kernel_dilation = spatial[4],
                     .feature_groups = fg, .batch_groups = bg};
  nxv_tensor *out = NULL;
  nxv_status st = nxv_conv(nxv_tensor_device(in), &c, &out);
  nxv_tensor_release(in);
  nxv_tensor_release(k);
  return op_result(env, st, out, "conv");
}

/* window_scatter(:max | :min, a, source, init, in_shape, window, strides,
 *                pad_lo, pad_hi) */
static ERL_NIF_TERM nif_window_scatter(ErlNifEnv *env, int argc,
                                       const ERL_NIF_TERM argv[]) {
  (void)argc;
  bool is_min;
  if (enif_is_identical(argv[0], enif_make_atom(env, "max"))) is_min = false;
  else if (enif_is_identical(argv[0], enif_make_atom(env, "min"))) is_min = true;
  else return raise_argument(env, "window_scatter: op must be :max or :min");
  const char *name = is_min ? "window_scatter_min" : "window_scatter_max";
  int64_t lists[5][NXV_MAX_RANK];
  unsigned rank = 0;
  for (int i = 0; i < 5; i++) {
    unsigned n;
    if (!get_int_list(env, argv[4 + i], lists[i], &n) || (i > 0 && n != rank))
      return raise_argument(env, "%s: shape, window, strides and padding must be lists "
                                 "of one length (at most %d)", name, NXV_MAX_RANK);
    if (i == 0) rank = n;
  }
  static const char *const what[3] = {"window_scatter operand", "window_scatter source",
                                      "window_scatter init"};
  nxv_tensor *t[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3; i++) {
    bool dead;
    t[i] = grab(env, argv[1 + i], &dead);
    if (!t[i]) {
      for (int j = 0; j < i; j++) nxv_tensor_release(t[j]);
      return bad_tensor(env, what[i], dead);
    }
  }
  nxv_window_scatter_desc w = {.a = t[0], .source = t[1], .init = t[2], .is_min = is_min,
                               .rank = rank, .in_shape = lists[0], .window = lists[1],
                               .strides = lists[2], .pad_lo = lists[3], .pad_hi = lists[4]};
  nxv_tensor *out = NULL;
  nxv_status st = nxv_window_scatter(nxv_tensor_device(t[0]), &w, &out);
  for (int i = 0; i < 3; i++) nxv_tensor_release(t[i]);
  return op_result(env, st, out, name);
}

static ERL_NIF_TERM nif_fill(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  dev_res *r;
  nxv_dtype t;
  ErlNifUInt64 count;
  ErlNifBinary v;
  if (!get_dev(env, argv[0], &r)) return raise_argument(env, "fill: expected a device");
  if (!get_dtype(env, argv[1], &t)) return raise_argument(env, "fill: unknown type");
  if (!enif_get_uint64(env, argv[2], &count))
    return raise_argument(env, "fill: count must be a non-negative integer");
  if (!enif_inspect_binary(env, argv[3], &v) || v.size != nxv_dtype_size(t))
    return raise_argument(env, "fill: value must be a binary of one %s element (%zu bytes)",
                          nxv_dtype_name(t), nxv_dtype_size(t));
  nxv_tensor *out = NULL;
  nxv_status st = nxv_fill(r->dev, t, count, v.data, &out);
  return op_result(env, st, out, "fill");
}

static ERL_NIF_TERM nif_iota(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  dev_res *r;
  nxv_dtype t;
  int64_t shape[NXV_MAX_RANK];
  unsigned rank, axis;
  if (!get_dev(env, argv[0], &r)) return raise_argument(env, "iota: expected a device");
  if (!get_dtype(env, argv[1], &t)) return raise_argument(env, "iota: unknown type");
  if (!get_int_list(env, argv[2], shape, &rank))
    return raise_argument(env, "iota: shape must be a list of at most %d integers",
                          NXV_MAX_RANK);
  if (!enif_get_uint(env, argv[3], &axis))
    return raise_argument(env, "iota: axis must be a non-negative integer");
  nxv_tensor *out = NULL;
  nxv_status st = nxv_iota(r->dev, t, rank, shape, axis, &out);
  return op_result(env, st, out, "iota");
}

/* ------------------------------------------------------------------ */
/* Plan replay                                                         */
/* ------------------------------------------------------------------ */

/* The NIF table (defined at the end of this file) and its length. */
static const ErlNifFunc *nif_table(unsigned *out_count);

/* The NIFs a plan may call: those that only queue device work or make,
 * describe and drop handles, on a normal scheduler, and return fresh
 * handles (never one of their arguments). replay/2 relies on the last
 * point: every handle in a slot is its own, to deallocate on failure. */
static const char *const kReplayable[] = {
    "upload", "deallocate", "deallocate_many", "tensor_info", "copy", "empty",
    "reinterpret", "copy_into", "binary", "fused", "fused_into", "fused_pair", "unary", "compare",
    "select", "convert", "reduce", "argreduce", "gather", "scatter", "sort", "window_reduce",
    "conv", "window_scatter", "transpose", "matmul", "fill", "iota", "fft", "cholesky",
    "lu", "qr", "eigh_iterate", "triangular_solve"};

/* Bounds of a plan's terms: nesting of argument specs, elements of a
 * tuple spec, NIF arity, slots. */
#define REPLAY_MAX_DEPTH 8
#define REPLAY_MAX_TUPLE 64
#define REPLAY_MAX_ARGS 16
#define REPLAY_MAX_SLOTS (1u << 24)
/* A replay checks the clock every REPLAY_CHECK_EVERY ops and yields its
 * scheduler (continuing through enif_schedule_nif) after REPLAY_SLICE_US. */
#define REPLAY_CHECK_EVERY 8
#define REPLAY_SLICE_US 1000

/* Whether the NIF table's entry i may be called by a plan: set once by
 * load() (replay_mark()), read-only after. */
#define REPLAY_MAX_NIFS 96
static bool g_replayable[REPLAY_MAX_NIFS];
/* The name of the NIF table's entry i as an atom: an op names the NIF it
 * calls besides its index, so that a plan made against another build of
 * this library (another table) is refused, not run with other functions.
 * Set once by load(). */
static ERL_NIF_TERM g_nif_names[REPLAY_MAX_NIFS];

static bool replayable_entry(const ErlNifFunc *f) {
  if (f->flags != 0) return false;
  for (size_t i = 0; i < sizeof kReplayable / sizeof kReplayable[0]; i++)
    if (strcmp(f->name, kReplayable[i]) == 0) return true;
  return false;
}

/* Fills g_replayable and g_nif_names; false when the table outgrows
 * them. */
static bool replay_mark(ErlNifEnv *env) {
  unsigned n;
  const ErlNifFunc *table = nif_table(&n);
  if (n > REPLAY_MAX_NIFS) return false;
  for (unsigned i = 0; i < n; i++) {
    g_replayable[i] = replayable_entry(&table[i]);
    g_nif_names[i] = enif_make_atom(env, table[i].name);
  }
  return true;
}

/* replay_index(name, arity): the index replay/2 calls the NIF name/arity
 * by, or nil when a plan may not call it. */
static ERL_NIF_TERM nif_replay_index(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  char name[64];
  unsigned arity;
  if (!enif_is_atom(env, argv[0]) || !enif_get_uint(env, argv[1], &arity))
    return raise_argument(env, "replay_index: expected a NIF name (atom) and an arity");
  if (!enif_get_atom(env, argv[0], name, sizeof name, ERL_NIF_LATIN1)) return am_nil;
  unsigned n;
  const ErlNifFunc *table = nif_table(&n);
  for (unsigned i = 0; i < n; i++)
    if (table[i].arity == arity && strcmp(table[i].name, name) == 0)
      return g_replayable[i] ? enif_make_uint(env, i) : am_nil;
  return am_nil;
}

/* What a slot holds: nothing, a handle (a term), or a tensor that no
 * term refers to yet (the result of an op run without its NIF,
 * replay_direct: made a handle only when an op needs
 * a term for it, or when it is returned or the replay yields). */
enum { SLOT_EMPTY = 0, SLOT_TERM = 1, SLOT_RAW = 2 };

/* One replay's state. The slot arrays are owned by the replay and freed
 * when it returns or yields; the handles and tensors in live slots are the
 * replay's until it returns them (outputs) or deallocates them. */
typedef struct replay_ctx {
  ErlNifEnv *env;
  const ERL_NIF_TERM *params; /* the params tuple's elements (borrowed) */
  int nparams;
  ERL_NIF_TERM *slots;        /* slot i's handle where live[i] is SLOT_TERM */
  nxv_tensor **raw;           /* slot i's tensor (one reference, the
                                 replay's) where live[i] is SLOT_RAW */
  unsigned char *live;        /* SLOT_* */
  unsigned nslots;
  unsigned op;                /* the op being run, for messages */
  uint64_t direct, via_nif;   /* ops run without / through their NIF, not
                                 yet added to the process-wide counts */
} replay_ctx;

/* Ops every replay ran without their NIF and through it (replay_counts/0):
 * added once per replay call, when it returns or yields. */
static _Atomic uint64_t g_replay_direct, g_replay_via_nif;

static void replay_count(replay_ctx *c) {
  if (c->direct) atomic_fetch_add_explicit(&g_replay_direct, c->direct, memory_order_relaxed);
  if (c->via_nif)
    atomic_fetch_add_explicit(&g_replay_via_nif, c->via_nif, memory_order_relaxed);
  c->direct = c->via_nif = 0;
}

static void replay_drop(ErlNifEnv *env, ERL_NIF_TERM handle) {
  tensor_res *r;
  if (enif_get_resource(env, handle, TENSOR_RES, (void **)&r)) deallocate_res(r);
}

/* Deallocates every handle in the term (a handle, or lists and tuples of
 * them): an op's results that the plan cannot take. */
static void replay_drop_all(ErlNifEnv *env, ERL_NIF_TERM term, int depth) {
  int arity;
  const ERL_NIF_TERM *e;
  ERL_NIF_TERM head, tail = term;
  if (depth > REPLAY_MAX_DEPTH) return;
  if (enif_is_ref(env, term)) {
    replay_drop(env, term);
  } else if (enif_get_tuple(env, term, &arity, &e)) {
    for (int i = 0; i < arity; i++) replay_drop_all(env, e[i], depth + 1);
  } else {
    while (enif_get_list_cell(env, tail, &head, &tail)) replay_drop_all(env, head, depth + 1);
  }
}

/* Deallocates slot i's handle or tensor and empties it. */
static void replay_free_slot(replay_ctx *c, unsigned i) {
  if (c->live[i] == SLOT_TERM) replay_drop(c->env, c->slots[i]);
  else if (c->live[i] == SLOT_RAW) nxv_tensor_release(c->raw[i]);
  c->live[i] = SLOT_EMPTY;
}

/* Slot i (live) as a handle: a tensor of its own is wrapped first (the
 * slot then holds the handle). am_ok, or a raised exception (the slot
 * then empty). */
static ERL_NIF_TERM replay_term(replay_ctx *c, unsigned i) {
  if (c->live[i] != SLOT_RAW) return am_ok;
  c->live[i] = SLOT_EMPTY;
  ERL_NIF_TERM term = wrap_tensor(c->env, c->raw[i]);
  if (enif_has_pending_exception(c->env, NULL)) return term;
  c->slots[i] = term;
  c->live[i] = SLOT_TERM;
  return am_ok;
}

/* Deallocates every live slot's handle or tensor but those marked keep
 * (or all when keep is NULL), and frees the slot arrays. */
static void replay_finish(replay_ctx *c, const unsigned char *keep) {
  replay_count(c);
  for (unsigned i = 0; i < c->nslots; i++)
    if (!(keep && keep[i])) replay_free_slot(c, i);
  enif_free(c->slots);
  c->slots = NULL;
  c->raw = NULL;
  c->live = NULL;
}

static ERL_NIF_TERM replay_bad_spec(replay_ctx *c) {
  return raise_argument(c->env, "replay: op %u has a malformed argument spec", c->op);
}

/* The argument a spec names: {:p, i} the i-th parameter, {:s, i} slot i's
 * handle, {:c, term} term, {:v, spec, offset, strides} the view tuple,
 * {:l, specs} / {:t, specs} (specs a tuple) a list / tuple of arguments.
 * am_ok, or a raised exception. */
static ERL_NIF_TERM replay_arg(replay_ctx *c, ERL_NIF_TERM spec, int depth, ERL_NIF_TERM *out) {
  ErlNifEnv *env = c->env;
  int arity;
  const ERL_NIF_TERM *e;
  unsigned i;
  if (depth > REPLAY_MAX_DEPTH || !enif_get_tuple(env, spec, &arity, &e) || arity < 2)
    return replay_bad_spec(c);
  ERL_NIF_TERM tag = e[0];
  /* Constants first: most arguments are. */
  if (arity == 2 && enif_is_identical(tag, am_spec_c)) {
    *out = e[1];
    return am_ok;
  }
  if (arity == 2 && enif_is_identical(tag, am_spec_s)) {
    if (!enif_get_uint(env, e[1], &i) || i >= c->nslots) return replay_bad_spec(c);
    if (!c->live[i])
      return raise_argument(env, "replay: op %u reads slot %u, which holds no tensor", c->op,
                            i);
    ERL_NIF_TERM r = replay_term(c, i);
    if (!enif_is_identical(r, am_ok)) return r;
    *out = c->slots[i];
    return am_ok;
  }
  if (arity == 2 && enif_is_identical(tag, am_spec_p)) {
    if (!enif_get_uint(env, e[1], &i)) return replay_bad_spec(c);
    if (i >= (unsigned)c->nparams)
      return raise_argument(env, "replay: op %u reads parameter %u of %d", c->op, i,
                            c->nparams);
    *out = c->params[i];
    return am_ok;
  }
  if (arity == 4 && enif_is_identical(tag, am_spec_v)) {
    ERL_NIF_TERM t, r = replay_arg(c, e[1], depth + 1, &t);
    if (!enif_is_identical(r, am_ok)) return r;
    *out = enif_make_tuple3(env, t, e[2], e[3]);
    return am_ok;
  }
  bool list = enif_is_identical(tag, am_spec_l);
  if (arity == 2 && (list || enif_is_identical(tag, am_spec_t))) {
    int n;
    const ERL_NIF_TERM *specs;
    ERL_NIF_TERM items[REPLAY_MAX_TUPLE];
    if (!enif_get_tuple(env, e[1], &n, &specs) || n > REPLAY_MAX_TUPLE)
      return replay_bad_spec(c);
    for (int k = 0; k < n; k++) {
      ERL_NIF_TERM r = replay_arg(c, specs[k], depth + 1, &items[k]);
      if (!enif_is_identical(r, am_ok)) return r;
    }
    *out = list ? enif_make_list_from_array(env, items, (unsigned)n)
                : enif_make_tuple_from_array(env, items, (unsigned)n);
    return am_ok;
  }
  return replay_bad_spec(c);
}

/* Puts the handles of an op's result (a handle, or lists and tuples of
 * them, in order; other terms skipped) into the slots outs names. Returns
 * how many handles the result holds; stops filling past nouts. */
static unsigned replay_take(replay_ctx *c, ERL_NIF_TERM term, const unsigned *outs,
                            unsigned nouts, unsigned taken, int depth) {
  ErlNifEnv *env = c->env;
  int arity;
  const ERL_NIF_TERM *e;
  ERL_NIF_TERM head, tail = term;
  if (depth > REPLAY_MAX_DEPTH) return taken;
  if (enif_is_ref(env, term)) {
    if (taken < nouts) {
      c->slots[outs[taken]] = term;
      c->live[outs[taken]] = SLOT_TERM;
    }
    return taken + 1;
  }
  if (enif_get_tuple(env, term, &arity, &e)) {
    for (int k = 0; k < arity; k++) taken = replay_take(c, e[k], outs, nouts, taken, depth + 1);
    return taken;
  }
  while (enif_get_list_cell(env, tail, &head, &tail))
    taken = replay_take(c, head, outs, nouts, taken, depth + 1);
  return taken;
}

/* A tuple of slot indices below nslots: its elements in *out_e. */
static bool slot_terms(ErlNifEnv *env, ERL_NIF_TERM term, unsigned nslots, int *out_n,
                       const ERL_NIF_TERM **out_e) {
  if (!enif_get_tuple(env, term, out_n, out_e)) return false;
  for (int k = 0; k < *out_n; k++) {
    unsigned i;
    if (!enif_get_uint(env, (*out_e)[k], &i) || i >= nslots) return false;
  }
  return true;
}

/* Decodes a tuple of at most max slot indices below nslots into out. */
static bool slot_tuple(ErlNifEnv *env, ERL_NIF_TERM term, unsigned nslots, unsigned max,
                       unsigned *out, unsigned *out_n) {
  int n;
  const ERL_NIF_TERM *e;
  if (!enif_get_tuple(env, term, &n, &e) || (unsigned)n > max) return false;
  for (int k = 0; k < n; k++)
    if (!enif_get_uint(env, e[k], &out[k]) || out[k] >= nslots) return false;
  *out_n = (unsigned)n;
  return true;
}

/* The term a {:c, term} spec holds, in *out; false for any other spec. */
static bool spec_constant(ErlNifEnv *env, ERL_NIF_TERM spec, ERL_NIF_TERM *out) {
  int arity;
  const ERL_NIF_TERM *e;
  if (!enif_get_tuple(env, spec, &arity, &e) || arity != 2 ||
      !enif_is_identical(e[0], am_spec_c))
    return false;
  *out = e[1];
  return true;
}

/* A view's offset and strides (nil or rank integers) into v, its tensor
 * already in v->t; false (nothing raised) when they do not decode. */
static bool view_parts_quiet(ErlNifEnv *env, ERL_NIF_TERM offset, ERL_NIF_TERM strides,
                             unsigned rank, view_arg *v) {
  unsigned n;
  if (!get_i64(env, offset, &v->offset)) return false;
  v->has_strides = !enif_is_identical(strides, am_nil);
  return !v->has_strides || (get_int_list(env, strides, v->strides, &n) && n == rank);
}

/* The tensor a source spec names, retained: {:s, i} a slot's (its handle's
 * or its own), {:p, i} a parameter's handle's, {:c, handle}; NULL
 * (nothing raised) for anything else or a deallocated tensor. */
static nxv_tensor *replay_source(replay_ctx *c, ERL_NIF_TERM spec) {
  ErlNifEnv *env = c->env;
  const ERL_NIF_TERM *src;
  int arity;
  unsigned i;
  bool dead;
  if (!enif_get_tuple(env, spec, &arity, &src) || arity != 2) return NULL;
  if (enif_is_identical(src[0], am_spec_s)) {
    if (!enif_get_uint(env, src[1], &i) || i >= c->nslots || !c->live[i]) return NULL;
    if (c->live[i] == SLOT_TERM) return grab(env, c->slots[i], &dead);
    nxv_tensor_retain(c->raw[i]);
    return c->raw[i];
  }
  if (enif_is_identical(src[0], am_spec_p)) {
    if (!enif_get_uint(env, src[1], &i) || i >= (unsigned)c->nparams) return NULL;
    return grab(env, c->params[i], &dead);
  }
  if (enif_is_identical(src[0], am_spec_c)) return grab(env, src[1], &dead);
  return NULL;
}

/* An operand of binary/8 or unary/5 from its three specs (source, then
 * {:c, offset} and {:c, strides}): true with v->t retained; false,
 * nothing retained or raised, otherwise. */
static bool replay_operand(replay_ctx *c, const ERL_NIF_TERM specs[3], unsigned rank,
                           view_arg *v) {
  ERL_NIF_TERM off, strides;
  if (!spec_constant(c->env, specs[1], &off) || !spec_constant(c->env, specs[2], &strides))
    return false;
  v->t = replay_source(c, specs[0]);
  if (!v->t) return false;
  if (view_parts_quiet(c->env, off, strides, rank, v)) return true;
  nxv_tensor_release(v->t);
  v->t = NULL;
  return false;
}

/* Keeps an op's result as its slot's own tensor; *result am_ok, or the
 * exception for st (raised as the op's NIF raises it). */
static void replay_keep(replay_ctx *c, nxv_status st, nxv_tensor *out, unsigned out_slot,
                        const char *what, ERL_NIF_TERM *result) {
  if (st != NXV_OK) {
    *result = raise_status(c->env, st, what);
    return;
  }
  c->raw[out_slot] = out;
  c->live[out_slot] = SLOT_RAW;
  *result = am_ok;
}

/* Which elementwise NIF replay_elementwise runs. */
typedef enum { REPLAY_BINARY, REPLAY_COMPARE, REPLAY_UNARY } replay_ew;

/* binary/8 and compare/8 (op, shape, then a and b as source, offset and
 * strides specs; one of them may be an immediate {:c, binary} of one
 * element of the other's type, offset 0 and strides nil) and unary/5 (op,
 * shape, a) run without their NIF, as replay_fused runs fused/4. */
static bool replay_elementwise(replay_ctx *c, replay_ew kind, const ERL_NIF_TERM *specs,
                               unsigned out_slot, ERL_NIF_TERM *result) {
  ErlNifEnv *env = c->env;
  ERL_NIF_TERM op_t, shape_t, imm_t[2], off, strides;
  int64_t shape[NXV_MAX_RANK];
  unsigned rank;
  if (!spec_constant(env, specs[0], &op_t) || !spec_constant(env, specs[1], &shape_t) ||
      !get_int_list(env, shape_t, shape, &rank))
    return false;
  int op = kind == REPLAY_UNARY     ? find_atom(op_t, am_unops, NXV_UNARY_OP_COUNT)
           : kind == REPLAY_COMPARE ? pair_op(PAIR_COMPARE, op_t)
                                    : pair_op(PAIR_BINARY, op_t);
  if (op < 0) return false;
  view_arg v[2] = {{0}};
  nxv_tensor *out = NULL;
  if (kind == REPLAY_UNARY) {
    if (!replay_operand(c, specs + 2, rank, &v[0])) return false;
    nxv_view va = to_view(&v[0]);
    nxv_status st =
        nxv_unary(nxv_tensor_device(v[0].t), (nxv_unary_op)op, rank, shape, &va, &out);
    release_views(v, 1);
    replay_keep(c, st, out, out_slot, nxv_unary_op_name((nxv_unary_op)op), result);
    return true;
  }
  /* An immediate operand: {:c, binary}, offset {:c, 0}, strides {:c, nil}. */
  int imm_at = -1;
  for (int k = 0; k < 2; k++) {
    int64_t o;
    if (spec_constant(env, specs[2 + 3 * k], &imm_t[k]) && enif_is_binary(env, imm_t[k])) {
      if (imm_at >= 0 || !spec_constant(env, specs[3 + 3 * k], &off) ||
          !spec_constant(env, specs[4 + 3 * k], &strides) || !get_i64(env, off, &o) || o != 0 ||
          !enif_is_identical(strides, am_nil))
        return false;
      imm_at = k;
    }
  }
  for (int k = 0; k < 2; k++)
    if (k != imm_at && !replay_operand(c, specs + 2 + 3 * k, rank, &v[k])) {
      release_views(v, 2);
      return false;
    }
  pair_kind pk = kind == REPLAY_COMPARE ? PAIR_COMPARE : PAIR_BINARY;
  const void *imm = NULL;
  if (imm_at >= 0) {
    ErlNifBinary bin;
    if (!enif_inspect_binary(env, imm_t[imm_at], &bin) ||
        bin.size != nxv_dtype_size(nxv_tensor_dtype(v[1 - imm_at].t))) {
      release_views(v, 2);
      return false;
    }
    imm = bin.data;
  }
  nxv_status st = run_pair(pk, op, rank, shape, v, imm, imm_at == 0, &out);
  release_views(v, 2);
  replay_keep(c, st, out, out_slot, pair_op_name(pk, op), result);
  return true;
}

/* select/10 (shape, then pred, on_true and on_false as source, offset
 * and strides specs) run without its NIF. */
static bool replay_select(replay_ctx *c, const ERL_NIF_TERM *specs, unsigned out_slot,
                          ERL_NIF_TERM *result) {
  ERL_NIF_TERM shape_t;
  int64_t shape[NXV_MAX_RANK];
  unsigned rank;
  if (!spec_constant(c->env, specs[0], &shape_t) || !get_int_list(c->env, shape_t, shape, &rank))
    return false;
  view_arg v[3] = {{0}};
  for (int k = 0; k < 3; k++)
    if (!replay_operand(c, specs + 1 + 3 * k, rank, &v[k])) {
      release_views(v, k);
      return false;
    }
  nxv_view vp = to_view(&v[0]), va = to_view(&v[1]), vb = to_view(&v[2]);
  nxv_tensor *out = NULL;
  nxv_status st = nxv_select(nxv_tensor_device(v[0].t), rank, shape, &vp, &va, &vb, &out);
  release_views(v, 3);
  replay_keep(c, st, out, out_slot, "select", result);
  return true;
}

/* reduce/7 (op, shape, the operand's source, offset and strides specs,
 * axes, result type) run without its NIF. */
static bool replay_reduce(replay_ctx *c, const ERL_NIF_TERM *specs, unsigned out_slot,
                          ERL_NIF_TERM *result) {
  ErlNifEnv *env = c->env;
  ERL_NIF_TERM op_t, shape_t, axes_t, type_t;
  int64_t shape[NXV_MAX_RANK], axes[NXV_MAX_RANK];
  unsigned rank, naxes;
  nxv_dtype type;
  if (!spec_constant(env, specs[0], &op_t) || !spec_constant(env, specs[1], &shape_t) ||
      !spec_constant(env, specs[5], &axes_t) || !spec_constant(env, specs[6], &type_t) ||
      !get_int_list(env, shape_t, shape, &rank) || !get_int_list(env, axes_t, axes, &naxes) ||
      !get_dtype(env, type_t, &type))
    return false;
  int op = find_atom(op_t, am_redops, NXV_REDUCE_OP_COUNT);
  if (op < 0) return false;
  uint32_t mask = 0;
  for (unsigned i = 0; i < naxes; i++) {
    if (axes[i] < 0 || axes[i] >= (int64_t)rank) return false;
    mask |= 1u << axes[i];
  }
  view_arg a;
  if (!replay_operand(c, specs + 2, rank, &a)) return false;
  nxv_view va = to_view(&a);
  nxv_tensor *out = NULL;
  nxv_status st =
      nxv_reduce_to(nxv_tensor_device(a.t), (nxv_reduce_op)op, type, rank, shape, &va, mask, &out);
  nxv_tensor_release(a.t);
  replay_keep(c, st, out, out_slot, nxv_reduce_op_name((nxv_reduce_op)op), result);
  return true;
}

/* copy_into/7 (the destination's source spec, its offset and strides, the
 * shape, then the source's source, offset and strides specs) run without
 * its NIF: it writes the destination in place and returns no tensor. */
static bool replay_copy_into(replay_ctx *c, const ERL_NIF_TERM *specs, ERL_NIF_TERM *result) {
  ErlNifEnv *env = c->env;
  ERL_NIF_TERM off_t, strides_t, shape_t;
  int64_t shape[NXV_MAX_RANK], dst_strides[NXV_MAX_RANK], dst_offset;
  unsigned rank, nds;
  if (!spec_constant(env, specs[1], &off_t) || !spec_constant(env, specs[2], &strides_t) ||
      !spec_constant(env, specs[3], &shape_t) || !get_int_list(env, shape_t, shape, &rank) ||
      !get_i64(env, off_t, &dst_offset) || !get_int_list(env, strides_t, dst_strides, &nds) ||
      nds != rank)
    return false;
  nxv_tensor *dst = replay_source(c, specs[0]);
  if (!dst) return false;
  view_arg src;
  if (!replay_operand(c, specs + 4, rank, &src)) {
    nxv_tensor_release(dst);
    return false;
  }
  nxv_view vs = to_view(&src);
  nxv_status st =
      nxv_copy_into(nxv_tensor_device(dst), dst, dst_offset, dst_strides, rank, shape, &vs);
  nxv_tensor_release(dst);
  nxv_tensor_release(src.t);
  *result = st == NXV_OK ? am_ok : raise_status(env, st, "copy_into");
  return true;
}

/* empty/3 (a device as {:c, device} or a parameter, a type, a count) and
 * reinterpret/2 (a tensor's source spec, a type) run without their NIF. */
static bool replay_empty(replay_ctx *c, const ERL_NIF_TERM *specs, unsigned out_slot,
                         ERL_NIF_TERM *result) {
  ErlNifEnv *env = c->env;
  ERL_NIF_TERM dev_t, type_t, count_t;
  const ERL_NIF_TERM *e;
  int arity;
  unsigned i;
  dev_res *r;
  nxv_dtype type;
  ErlNifUInt64 count;
  if (enif_get_tuple(env, specs[0], &arity, &e) && arity == 2 &&
      enif_is_identical(e[0], am_spec_p) && enif_get_uint(env, e[1], &i) &&
      i < (unsigned)c->nparams)
    dev_t = c->params[i];
  else if (!spec_constant(env, specs[0], &dev_t))
    return false;
  if (!spec_constant(env, specs[1], &type_t) ||
      !spec_constant(env, specs[2], &count_t) || !get_dev(env, dev_t, &r) ||
      !get_dtype(env, type_t, &type) || !enif_get_uint64(env, count_t, &count))
    return false;
  nxv_tensor *out = NULL;
  nxv_status st = nxv_tensor_empty(r->dev, type, count, &out);
  replay_keep(c, st, out, out_slot, "empty", result);
  return true;
}

static bool replay_reinterpret(replay_ctx *c, const ERL_NIF_TERM *specs, unsigned out_slot,
                               ERL_NIF_TERM *result) {
  ERL_NIF_TERM type_t;
  nxv_dtype type;
  if (!spec_constant(c->env, specs[1], &type_t) || !get_dtype(c->env, type_t, &type))
    return false;
  nxv_tensor *t = replay_source(c, specs[0]);
  if (!t) return false;
  nxv_tensor *out = NULL;
  nxv_status st = nxv_tensor_reinterpret(t, type, &out);
  nxv_tensor_release(t);
  replay_keep(c, st, out, out_slot, "bitcast", result);
  return true;
}

/* One input of a fused op replay_fused runs: from an input spec (a
 * {:v, source, offset, strides} view of a slot, parameter or constant
 * tensor, or {:c, term}) or, spec false, the term itself (an element of a
 * constant input list): a {tensor, offset, strides} view, or an
 * immediate (a binary of one element of es bytes, its bits in *imm).
 * true with v->t retained (NULL for an immediate) and *is_imm set; false,
 * nothing retained and nothing raised, for anything else. */
static bool replay_fused_input(replay_ctx *c, ERL_NIF_TERM item, bool spec, unsigned rank,
                               size_t es, view_arg *v, bool *is_imm, uint64_t *imm) {
  ErlNifEnv *env = c->env;
  int arity;
  const ERL_NIF_TERM *e;
  ErlNifBinary bin;
  bool dead;
  *is_imm = false;
  v->t = NULL;
  v->offset = 0;
  v->has_strides = false;
  if (spec) {
    if (!enif_get_tuple(env, item, &arity, &e)) return false;
    if (arity == 2 && enif_is_identical(e[0], am_spec_c))
      return replay_fused_input(c, e[1], false, rank, es, v, is_imm, imm);
    if (arity != 4 || !enif_is_identical(e[0], am_spec_v)) return false;
    /* {:v, source, offset, strides} */
    v->t = replay_source(c, e[1]);
    if (!v->t) return false;
    if (view_parts_quiet(env, e[2], e[3], rank, v)) return true;
  } else {
    if (enif_inspect_binary(env, item, &bin)) {
      if (bin.size != es || es > sizeof *imm) return false;
      *imm = imm_value(bin.data, bin.size);
      *is_imm = true;
      return true;
    }
    if (!enif_get_tuple(env, item, &arity, &e) || arity != 3) return false;
    v->t = grab(env, e[0], &dead);
    if (!v->t) return false;
    if (view_parts_quiet(env, e[1], e[2], rank, v)) return true;
  }
  nxv_tensor_release(v->t);
  v->t = NULL;
  return false;
}

static bool replay_fused_run(replay_ctx *c, const ERL_NIF_TERM *specs, uint32_t second,
                             const nxv_fused_dest *dests, const unsigned *out_slots,
                             ERL_NIF_TERM *result);

/* A fused op (fused/4) of a prepared program run without its NIF: the
 * arguments decoded from the specs without making terms, the result kept
 * as a tensor in out_slot (SLOT_RAW), or, with dst, written into dst from
 * element dst_offset on (fused_into/6; the caller keeps its reference).
 * false, with nothing done or raised, when the op is not of that form or
 * an argument does not decode: the caller then makes the NIF call, which
 * raises what fused/4 (fused_into/6) raises. true with *result am_ok, or
 * the exception the run raised. */
static bool replay_fused(replay_ctx *c, const ERL_NIF_TERM *specs, unsigned out_slot,
                         nxv_tensor *dst, int64_t dst_offset, ERL_NIF_TERM *result) {
  nxv_fused_dest dest = {dst, dst_offset};
  return replay_fused_run(c, specs, 0, &dest, &out_slot, result);
}

/* replay_fused for programs of one result (second 0: dests[0] says where
 * it goes) or two (fused_pair/9: specs are its type, shape, program and
 * inputs specs; dests[k] says where result k goes); the new tensors are
 * kept in out_slots, in order. */
static bool replay_fused_run(replay_ctx *c, const ERL_NIF_TERM *specs, uint32_t second,
                             const nxv_fused_dest *dests, const unsigned *out_slots,
                             ERL_NIF_TERM *result) {
  nxv_tensor *dst = dests[0].dst;
  int64_t dst_offset = dests[0].offset;
  ErlNifEnv *env = c->env;
  ERL_NIF_TERM type_t, shape_t, prog_t, head, tail;
  nxv_dtype t;
  int64_t shape[NXV_MAX_RANK];
  unsigned rank;
  program_res *pr;
  if (!spec_constant(env, specs[0], &type_t) || !spec_constant(env, specs[1], &shape_t) ||
      !spec_constant(env, specs[2], &prog_t) || !get_dtype(env, type_t, &t) ||
      !get_int_list(env, shape_t, shape, &rank) ||
      !enif_get_resource(env, prog_t, PROGRAM_RES, (void **)&pr) ||
      nxv_fused_program_dtype(pr->p) != t || nxv_fused_program_second(pr->p) != second)
    return false;
  /* The inputs: {:l, specs} (a tuple of specs) or {:c, list}. */
  ERL_NIF_TERM items[NXV_FUSED_MAX_INPUTS];
  const ERL_NIF_TERM *in_specs = NULL;
  int arity, nin = 0;
  const ERL_NIF_TERM *e;
  bool from_specs;
  if (!enif_get_tuple(env, specs[3], &arity, &e) || arity != 2) return false;
  if (enif_is_identical(e[0], am_spec_l)) {
    if (!enif_get_tuple(env, e[1], &nin, &in_specs)) return false;
    from_specs = true;
  } else if (enif_is_identical(e[0], am_spec_c)) {
    tail = e[1];
    while (nin < NXV_FUSED_MAX_INPUTS && enif_get_list_cell(env, tail, &head, &tail))
      items[nin++] = head;
    if (!enif_is_empty_list(env, tail)) return false;
    from_specs = false;
  } else {
    return false;
  }
  if ((unsigned)nin != nxv_fused_program_inputs(pr->p)) return false;
  view_arg v[NXV_FUSED_MAX_INPUTS];
  nxv_view views[NXV_FUSED_MAX_INPUTS];
  uint64_t imm_bits[NXV_FUSED_MAX_INPUTS] = {0};
  uint32_t imm_mask = 0;
  nxv_device *device = NULL;
  size_t es = nxv_dtype_size(t);
  for (int k = 0; k < nin; k++) {
    bool is_imm;
    if (!replay_fused_input(c, from_specs ? in_specs[k] : items[k], from_specs, rank, es, &v[k],
                            &is_imm, &imm_bits[k])) {
      release_views(v, k);
      return false;
    }
    if (is_imm) imm_mask |= 1u << k;
    views[k] = to_view(&v[k]);
    if (!device && v[k].t) device = nxv_tensor_device(v[k].t);
  }
  if (!device) {
    release_views(v, nin);
    return false;
  }
  nxv_tensor *out = NULL;
  nxv_status st;
  if (second) {
    nxv_tensor *outs[NXV_FUSED_MAX_RESULTS] = {NULL, NULL};
    st = nxv_fused_run_pair(device, pr->p, rank, shape, views, imm_mask, imm_bits, dests, outs);
    *result = st == NXV_OK ? am_ok : raise_status(env, st, "fused");
    for (unsigned k = 0, j = 0; st == NXV_OK && k < NXV_FUSED_MAX_RESULTS; k++)
      if (!dests[k].dst) replay_keep(c, st, outs[k], out_slots[j++], "fused", result);
  } else if (dst) {
    st = nxv_fused_run_into(device, pr->p, rank, shape, views, imm_mask, imm_bits, dst,
                            dst_offset);
    *result = st == NXV_OK ? am_ok : raise_status(env, st, "fused");
  } else {
    st = nxv_fused_run(device, pr->p, rank, shape, views, imm_mask, imm_bits, &out);
    replay_keep(c, st, out, out_slots[0], "fused", result);
  }
  release_views(v, nin);
  return true;
}

/* fused_into/6 (the destination's source spec, its offset, then fused/4's
 * specs) run without its NIF, as replay_fused runs fused/4; it writes the
 * destination in place and returns no tensor. */
static bool replay_fused_into(replay_ctx *c, const ERL_NIF_TERM *specs, ERL_NIF_TERM *result) {
  ERL_NIF_TERM off_t;
  int64_t off;
  if (!spec_constant(c->env, specs[1], &off_t) || !get_i64(c->env, off_t, &off)) return false;
  nxv_tensor *dst = replay_source(c, specs[0]);
  if (!dst) return false;
  bool done = replay_fused(c, specs + 2, 0, dst, off, result);
  nxv_tensor_release(dst);
  return done;
}

/* fused_pair/9 (type, shape, program, second, inputs, then each
 * result's destination source spec, {:c, nil} for a new tensor, and
 * offset) run without its NIF, as replay_fused runs fused/4: its new
 * tensors kept in outs (nouts of them, one per new result). */
static bool replay_fused_pair(replay_ctx *c, const ERL_NIF_TERM *specs, const unsigned *outs,
                              unsigned nouts, ERL_NIF_TERM *result) {
  ErlNifEnv *env = c->env;
  ERL_NIF_TERM second_t, term;
  unsigned second, fresh = 0;
  if (!spec_constant(env, specs[3], &second_t) || !enif_get_uint(env, second_t, &second) ||
      second == 0)
    return false;
  nxv_fused_dest dests[NXV_FUSED_MAX_RESULTS] = {{NULL, 0}, {NULL, 0}};
  bool ok = true;
  for (unsigned k = 0; ok && k < NXV_FUSED_MAX_RESULTS; k++) {
    /* The offset is an integer either way, as fused_pair/9 requires. */
    ok = spec_constant(env, specs[6 + 2 * k], &term) && get_i64(env, term, &dests[k].offset);
    if (!ok) break;
    if (spec_constant(env, specs[5 + 2 * k], &term) && enif_is_identical(term, am_nil)) {
      dests[k].offset = 0;
      fresh++;
      continue;
    }
    dests[k].dst = replay_source(c, specs[5 + 2 * k]);
    ok = dests[k].dst != NULL;
  }
  bool done = false;
  if (ok && fresh == nouts) {
    const ERL_NIF_TERM fs[4] = {specs[0], specs[1], specs[2], specs[4]};
    done = replay_fused_run(c, fs, second, dests, outs, result);
  }
  for (unsigned k = 0; k < NXV_FUSED_MAX_RESULTS; k++)
    if (dests[k].dst) nxv_tensor_release(dests[k].dst);
  return done;
}

typedef ERL_NIF_TERM (*replay_nif)(ErlNifEnv *, int, const ERL_NIF_TERM[]);

/* Runs the op without its NIF where its kind allows (fused ops of prepared
 * programs, into new tensors or destinations; binary, compare, unary,
 * select, reduce, copy_into, empty and reinterpret ops), its result kept
 * as its slot's own tensor: false, with
 * nothing done or raised, when it does not or an argument does not
 * decode this way (the caller then makes the NIF call, which raises what
 * that NIF raises); true with *result am_ok or the exception the op's run
 * raised. */
static bool replay_direct(replay_ctx *c, replay_nif fptr, const ERL_NIF_TERM *specs,
                          const unsigned *outs, unsigned nouts, ERL_NIF_TERM *result) {
  if (fptr == nif_copy_into) return nouts == 0 && replay_copy_into(c, specs, result);
  if (fptr == nif_fused_into) return nouts == 0 && replay_fused_into(c, specs, result);
  if (fptr == nif_fused_pair) return replay_fused_pair(c, specs, outs, nouts, result);
  if (nouts != 1) return false;
  unsigned o = outs[0];
  if (fptr == nif_fused) return replay_fused(c, specs, o, NULL, 0, result);
  if (fptr == nif_binary) return replay_elementwise(c, REPLAY_BINARY, specs, o, result);
  if (fptr == nif_compare) return replay_elementwise(c, REPLAY_COMPARE, specs, o, result);
  if (fptr == nif_unary) return replay_elementwise(c, REPLAY_UNARY, specs, o, result);
  if (fptr == nif_select) return replay_select(c, specs, o, result);
  if (fptr == nif_reduce) return replay_reduce(c, specs, o, result);
  if (fptr == nif_empty) return replay_empty(c, specs, o, result);
  if (fptr == nif_reinterpret) return replay_reinterpret(c, specs, o, result);
  return false;
}

/* Runs one op of the plan: am_ok, or a raised exception. */
static ERL_NIF_TERM replay_op(replay_ctx *c, ERL_NIF_TERM op_term, const ErlNifFunc *table,
                              unsigned ntable) {
  ErlNifEnv *env = c->env;
  int arity, nargs;
  const ERL_NIF_TERM *op, *specs;
  unsigned index, nouts, nfrees, outs[REPLAY_MAX_TUPLE], frees[REPLAY_MAX_TUPLE];
  if (!enif_get_tuple(env, op_term, &arity, &op) || arity != 5 ||
      !enif_get_uint(env, op[1], &index) || index >= ntable ||
      !enif_get_tuple(env, op[2], &nargs, &specs) ||
      !slot_tuple(env, op[3], c->nslots, REPLAY_MAX_TUPLE, outs, &nouts) ||
      !slot_tuple(env, op[4], c->nslots, REPLAY_MAX_TUPLE, frees, &nfrees))
    return raise_argument(env,
                          "replay: op %u is not {name, nif_index, arg_specs, out_slots, "
                          "free_slots} (at most %d of each slot list)", c->op,
                          REPLAY_MAX_TUPLE);
  const ErlNifFunc *f = &table[index];
  if (!enif_is_identical(op[0], g_nif_names[index]))
    return raise_argument(env, "replay: op %u names another NIF than %s, index %u of this "
                          "library (a plan made against another build)", c->op, f->name,
                          index);
  if (!g_replayable[index])
    return raise_argument(env, "replay: op %u calls %s/%u, which a plan may not call", c->op,
                          f->name, f->arity);
  if ((unsigned)nargs != f->arity || nargs > REPLAY_MAX_ARGS)
    return raise_argument(env, "replay: op %u calls %s/%u with %d arguments", c->op, f->name,
                          f->arity, nargs);
  /* Out slots must be distinct and empty. */
  for (unsigned k = 0; k < nouts; k++) {
    bool twice = false;
    for (unsigned j = 0; j < k; j++) twice = twice || outs[j] == outs[k];
    if (twice || c->live[outs[k]])
      return raise_argument(env, "replay: op %u writes slot %u, which %s", c->op, outs[k],
                            twice ? "it names twice" : "holds a tensor");
  }
  ERL_NIF_TERM fast;
  if (replay_direct(c, f->fptr, specs, outs, nouts, &fast)) {
    c->direct++;
    if (!enif_is_identical(fast, am_ok)) return fast;
    for (unsigned k = 0; k < nfrees; k++) replay_free_slot(c, frees[k]);
    return am_ok;
  }
  c->via_nif++;
  ERL_NIF_TERM args[REPLAY_MAX_ARGS];
  for (int k = 0; k < nargs; k++) {
    ERL_NIF_TERM r = replay_arg(c, specs[k], 0, &args[k]);
    if (!enif_is_identical(r, am_ok)) return r;
  }
  ERL_NIF_TERM result = f->fptr(env, nargs, args);
  if (enif_has_pending_exception(env, NULL)) return result;
  unsigned got = replay_take(c, result, outs, nouts, 0, 0);
  if (got != nouts) {
    /* Unassign what was taken, then drop every handle of the result. */
    for (unsigned k = 0; k < nouts && k < got; k++) c->live[outs[k]] = 0;
    replay_drop_all(env, result, 0);
    return raise_argument(env, "replay: op %u (%s) returned %u tensors, the plan expects %u",
                          c->op, f->name, got, nouts);
  }
  for (unsigned k = 0; k < nfrees; k++) replay_free_slot(c, frees[k]);
  return am_ok;
}

static ERL_NIF_TERM nif_replay_resume(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);

/* Runs ops from start; slots_term NULL at the first call, else the tuple
 * a yield left (a handle or nil per slot). */
static ERL_NIF_TERM replay_run(ErlNifEnv *env, ERL_NIF_TERM plan, ERL_NIF_TERM params,
                               unsigned start, const ERL_NIF_TERM *slots_term) {
  int arity, nops, nouts;
  const ERL_NIF_TERM *p, *ops, *outs;
  replay_ctx c = {.env = env, .op = start};
  if (!enif_get_tuple(env, plan, &arity, &p) || arity != 3 ||
      !enif_get_uint(env, p[0], &c.nslots) || c.nslots > REPLAY_MAX_SLOTS ||
      !enif_get_tuple(env, p[1], &nops, &ops) ||
      !slot_terms(env, p[2], c.nslots, &nouts, &outs))
    return raise_argument(env, "replay: expected a plan {slot_count, ops, output_slots}");
  if (!enif_get_tuple(env, params, &c.nparams, &c.params))
    return raise_argument(env, "replay: parameters must be a tuple");
  c.slots = enif_alloc((size_t)c.nslots * (sizeof *c.slots + sizeof *c.raw + 1) + 1);
  if (!c.slots) return raise_argument(env, "replay: out of memory for %u slots", c.nslots);
  c.raw = (nxv_tensor **)(c.slots + c.nslots);
  c.live = (unsigned char *)(c.raw + c.nslots);
  memset(c.live, SLOT_EMPTY, c.nslots);
  if (slots_term) {
    int n;
    const ERL_NIF_TERM *e;
    enif_get_tuple(env, *slots_term, &n, &e); /* built by the yield below */
    for (unsigned i = 0; i < c.nslots && (int)i < n; i++)
      if (!enif_is_identical(e[i], am_nil)) {
        c.slots[i] = e[i];
        c.live[i] = SLOT_TERM;
      }
  }
  unsigned ntable;
  const ErlNifFunc *table = nif_table(&ntable);
  ErlNifTime t0 = enif_monotonic_time(ERL_NIF_USEC);
  for (unsigned k = start; k < (unsigned)nops; k++) {
    c.op = k;
    ERL_NIF_TERM r = replay_op(&c, ops[k], table, ntable);
    if (!enif_is_identical(r, am_ok)) {
      replay_finish(&c, NULL);
      return r;
    }
    if ((k - start + 1) % REPLAY_CHECK_EVERY == 0 && k + 1 < (unsigned)nops) {
      ErlNifTime spent = enif_monotonic_time(ERL_NIF_USEC) - t0;
      if (spent >= REPLAY_SLICE_US) {
        for (unsigned i = 0; i < c.nslots; i++) {
          ERL_NIF_TERM w = replay_term(&c, i);
          if (!enif_is_identical(w, am_ok)) {
            replay_finish(&c, NULL);
            return w;
          }
        }
        ERL_NIF_TERM *held = enif_alloc(((size_t)c.nslots + 1) * sizeof *held);
        if (!held) {
          replay_finish(&c, NULL);
          return raise_argument(env, "replay: out of memory for %u slots", c.nslots);
        }
        for (unsigned i = 0; i < c.nslots; i++) held[i] = c.live[i] ? c.slots[i] : am_nil;
        ERL_NIF_TERM next[4] = {plan, params, enif_make_uint(env, k + 1),
                                enif_make_tuple_from_array(env, held, c.nslots)};
        enif_free(held);
        enif_free(c.slots);
        replay_count(&c);
        enif_consume_timeslice(env, 100);
        return enif_schedule_nif(env, "replay", 0, nif_replay_resume, 4, next);
      }
    }
  }
  ERL_NIF_TERM *res = enif_alloc(((size_t)nouts + 1) * sizeof *res);
  unsigned char *keep = enif_alloc((size_t)c.nslots + 1);
  if (!res || !keep) {
    enif_free(res);
    enif_free(keep);
    replay_finish(&c, NULL);
    return raise_argument(env, "replay: out of memory for %d outputs", nouts);
  }
  memset(keep, 0, c.nslots);
  for (int k = 0; k < nouts; k++) {
    unsigned i;
    enif_get_uint(env, outs[k], &i);
    ERL_NIF_TERM w = c.live[i]
                         ? replay_term(&c, i)
                         : raise_argument(env, "replay: output %d is slot %u, which holds no "
                                          "tensor", k, i);
    if (!enif_is_identical(w, am_ok)) {
      enif_free(res);
      enif_free(keep);
      replay_finish(&c, NULL);
      return w;
    }
    res[k] = c.slots[i];
    keep[i] = 1;
  }
  ERL_NIF_TERM out = enif_make_tuple_from_array(env, res, (unsigned)nouts);
  replay_finish(&c, keep);
  enif_free(res);
  enif_free(keep);
  return out;
}

/* replay(plan, params): runs a plan of NIF calls in this one call.
 *   plan: {slot_count, ops, output_slots}; ops a tuple of
 *         {name, nif_index, arg_specs, out_slots, free_slots} (the NIF's
 *         name, its index from replay_index/2, arg_specs a tuple with one
 *         spec per argument,
 *         out_slots the slots that take the handles of the result in
 *         order, free_slots those whose handles are deallocated after it);
 *         output_slots the slots whose handles are returned.
 *   params: a tuple, read by {:p, i} specs.
 * Returns the tuple of the output slots' handles; every other handle the
 * plan made is deallocated. Raises what an op raises, or ArgumentError for
 * a malformed plan, after deallocating every handle it made (the ops
 * already queued run, their results unread). Yields its scheduler every
 * REPLAY_SLICE_US of a long plan. */
static ERL_NIF_TERM nif_replay(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  return replay_run(env, argv[0], argv[1], 0, NULL);
}

/* replay_counts(): {direct, via_nif}, the ops every replay in this
 * process has run without their NIF (replay_direct) and through it, as
 * counted when each replay call returned or yielded. */
static ERL_NIF_TERM nif_replay_counts(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  (void)argv;
  return enif_make_tuple2(
      env, enif_make_uint64(env, atomic_load_explicit(&g_replay_direct, memory_order_relaxed)),
      enif_make_uint64(env, atomic_load_explicit(&g_replay_via_nif, memory_order_relaxed)));
}

static ERL_NIF_TERM nif_replay_resume(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  unsigned start;
  enif_get_uint(env, argv[2], &start);
  return replay_run(env, argv[0], argv[1], start, &argv[3]);
}

/* ------------------------------------------------------------------ */
/* Load                                                                */
/* ------------------------------------------------------------------ */

static void dev_dtor(ErlNifEnv *env, void *obj) {
  (void)env;
  dev_res *r = obj;
  if (r->dev) nxv_device_release(r->dev);
}

static void tensor_dtor(ErlNifEnv *env, void *obj) {
  (void)env;
  tensor_res *r = obj;
  nxv_tensor *t = atomic_exchange(&r->t, NULL);
  if (t) nxv_tensor_release(t);
}

static void program_dtor(ErlNifEnv *env, void *obj) {
  (void)env;
  nxv_fused_program_free(((program_res *)obj)->p);
}

static void download_dtor(ErlNifEnv *env, void *obj) {
  (void)env;
  download_res *r = obj;
  nxv_download_release(atomic_exchange(&r->dl, NULL));
}

static int load(ErlNifEnv *env, void **priv, ERL_NIF_TERM info) {
  (void)priv;
  (void)info;
  ErlNifResourceFlags flags = ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER;
  DEV_RES = enif_open_resource_type(env, NULL, "nx_vulkan_device", dev_dtor, flags, NULL);
  TENSOR_RES = enif_open_resource_type(env, NULL, "nx_vulkan_tensor", tensor_dtor, flags, NULL);
  DOWNLOAD_RES = enif_open_resource_type(env, NULL, "nx_vulkan_download", download_dtor,
                                         flags, NULL);
  PROGRAM_RES = enif_open_resource_type(env, NULL, "nx_vulkan_fused_program", program_dtor,
                                        flags, NULL);
  if (!DEV_RES || !TENSOR_RES || !DOWNLOAD_RES || !PROGRAM_RES) return 1;
  am_ok = enif_make_atom(env, "ok");
  am_nil = enif_make_atom(env, "nil");
  am_true = enif_make_atom(env, "true");
  am_false = enif_make_atom(env, "false");
  am_error = enif_make_atom(env, "error");
  am_already_deallocated = enif_make_atom(env, "already_deallocated");
  am_struct = enif_make_atom(env, "__struct__");
  am_exception = enif_make_atom(env, "__exception__");
  am_message = enif_make_atom(env, "message");
  am_status = enif_make_atom(env, "status");
  am_argument_error = enif_make_atom(env, "Elixir.ArgumentError");
  am_vulkan_error = enif_make_atom(env, "Elixir.Nx.Vulkan.Error");
  am_binary = enif_make_atom(env, "binary");
  am_unary = enif_make_atom(env, "unary");
  for (int i = 0; i < NXV_DTYPE_COUNT; i++)
    am_types[i] = enif_make_atom(env, nxv_dtype_name((nxv_dtype)i));
  for (int i = 0; i < NXV_BINARY_OP_COUNT; i++)
    am_binops[i] = enif_make_atom(env, nxv_binary_op_name((nxv_binary_op)i));
  for (int i = 0; i < NXV_UNARY_OP_COUNT; i++)
    am_unops[i] = enif_make_atom(env, nxv_unary_op_name((nxv_unary_op)i));
  for (int i = 0; i < NXV_COMPARE_OP_COUNT; i++)
    am_cmpops[i] = enif_make_atom(env, nxv_compare_op_name((nxv_compare_op)i));
  am_compare = enif_make_atom(env, "compare");
  am_select = enif_make_atom(env, "select");
  am_convert = enif_make_atom(env, "convert");
  for (int i = 0; i < NXV_REDUCE_OP_COUNT; i++)
    am_redops[i] = enif_make_atom(env, nxv_reduce_op_name((nxv_reduce_op)i));
  am_spec_p = enif_make_atom(env, "p");
  am_spec_s = enif_make_atom(env, "s");
  am_spec_c = enif_make_atom(env, "c");
  am_spec_v = enif_make_atom(env, "v");
  am_spec_l = enif_make_atom(env, "l");
  am_spec_t = enif_make_atom(env, "t");
  if (!replay_mark(env)) return 1;
  return 0;
}

static int upgrade(ErlNifEnv *env, void **priv, void **old, ERL_NIF_TERM info) {
  (void)old;
  return load(env, priv, info);
}

static ErlNifFunc funcs[] = {
    {"device_count", 0, nif_device_count, 0},
    {"default_device_index", 0, nif_default_device_index, 0},
    {"device_info", 1, nif_device_info, 0},
    {"open_device", 2, nif_open_device, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"device_stats", 1, nif_device_stats, 0},
    {"record_batches", 2, nif_record_batches, 0},
    {"take_batches", 1, nif_take_batches, 0},
    {"clock_ns", 0, nif_clock_ns, 0},
    {"synchronize", 1, nif_synchronize, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"device_status", 1, nif_device_status, 0},
    {"trim", 1, nif_trim, 0},
    {"save_pipeline_cache", 1, nif_save_pipeline_cache, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"inject_fault", 2, nif_inject_fault, 0},
    {"supported", 4, nif_supported, 0},
    {"fft", 5, nif_fft, 0},
    {"cholesky", 4, nif_cholesky, 0},
    {"lu", 4, nif_lu, 0},
    {"qr", 6, nif_qr, 0},
    {"eigh_iterate", 6, nif_eigh_iterate, 0},
    {"triangular_solve", 8, nif_triangular_solve, 0},
    {"upload", 3, nif_upload, 0},
    {"upload_dirty", 3, nif_upload, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"download", 3, nif_download, 0},
    {"deallocate", 1, nif_deallocate, 0},
    {"deallocate_many", 1, nif_deallocate_many, 0},
    {"tensor_info", 1, nif_tensor_info, 0},
    {"copy", 1, nif_copy, 0},
    {"empty", 3, nif_empty, 0},
    {"reinterpret", 2, nif_reinterpret, 0},
    {"copy_into", 7, nif_copy_into, 0},
    {"binary", 8, nif_binary, 0},
    {"fused", 4, nif_fused, 0},
    {"fused_into", 6, nif_fused_into, 0},
    {"fused_program", 3, nif_fused_program, 0},
    {"fused_program", 4, nif_fused_program, 0},
    {"fused_check", 5, nif_fused_check, 0},
    {"fused_pair", 9, nif_fused_pair, 0},
    {"unary", 5, nif_unary, 0},
    {"compare", 8, nif_compare, 0},
    {"select", 10, nif_select, 0},
    {"convert", 5, nif_convert, 0},
    {"reduce", 7, nif_reduce, 0},
    {"argreduce", 7, nif_argreduce, 0},
    {"gather", 8, nif_gather, 0},
    {"scatter", 9, nif_scatter, 0},
    {"sort", 5, nif_sort, 0},
    {"window_reduce", 8, nif_window_reduce, 0},
    {"conv", 12, nif_conv, 0},
    {"window_scatter", 9, nif_window_scatter, 0},
    {"transpose", 3, nif_transpose, 0},
    {"matmul", 10, nif_matmul, 0},
    {"fill", 4, nif_fill, 0},
    {"iota", 4, nif_iota, 0},
    {"replay_index", 2, nif_replay_index, 0},
    {"replay", 2, nif_replay, 0},
    {"replay_counts", 0, nif_replay_counts, 0},
};

static const ErlNifFunc *nif_table(unsigned *out_count) {
  *out_count = sizeof funcs / sizeof funcs[0];
  return funcs;
}

ERL_NIF_INIT(Elixir.Nx.Vulkan.NIF, funcs, load, NULL, upgrade, NULL)
