/*
 * nxv.h - public C API of the nx_vulkan runtime.
 *
 * The runtime queues every operation as a node on a per-device ring and
 * returns at once; a scheduler thread per device records nodes into command
 * buffers and submits them in batches, each submit signalling the device's
 * timeline semaphore with the next epoch. Only downloads (and explicit
 * synchronization) wait, and they wait only for the work enqueued before them.
 *
 * Conventions
 * - Every fallible function returns an nxv_status. On failure, a message
 *   naming what failed is stored for the calling thread and can be read with
 *   nxv_last_error(); output parameters are left untouched.
 * - Results are returned through out_ parameters. A function that returns a
 *   handle through out_ transfers one reference to the caller.
 * - Handles are reference counted. nxv_*_retain adds a reference,
 *   nxv_*_release drops one; the object is destroyed when the last reference
 *   goes. Releasing never blocks on the GPU (except the last release of a
 *   device, which drains its queue).
 * - Thread safety: unless a function says otherwise, it may be called from any
 *   thread concurrently with any other function, on the same or different
 *   handles. Tensors are immutable once created, so they may be shared
 *   between threads freely.
 * - Shapes, strides and offsets are counted in elements, not bytes. Strides
 *   are signed; a stride of 0 broadcasts an axis.
 */
#ifndef NXV_H
#define NXV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Maximum tensor rank the runtime accepts. */
#define NXV_MAX_RANK 16

/* ------------------------------------------------------------------------ */
/* Status                                                                    */
/* ------------------------------------------------------------------------ */

typedef enum nxv_status {
  NXV_OK = 0,
  NXV_ERR_INVALID_ARGUMENT = 1, /* a caller-supplied value is out of range */
  NXV_ERR_UNSUPPORTED = 2,      /* op/type not available on this device */
  NXV_ERR_OUT_OF_DEVICE_MEMORY = 3,
  NXV_ERR_OUT_OF_HOST_MEMORY = 4,
  NXV_ERR_DEVICE_LOST = 5,      /* the device was lost; sticky */
  NXV_ERR_SUBMIT_FAILED = 6,    /* a queue submission failed; sticky */
  NXV_ERR_VULKAN = 7,           /* another Vulkan call failed */
  NXV_ERR_NO_DEVICE = 8,        /* no Vulkan device matches the request */
  NXV_ERR_IO = 9,               /* file system error (pipeline cache) */
} nxv_status;

/* Returns a static, human-readable name of a status ("NXV_ERR_...").
 * Thread-safe. */
const char *nxv_status_name(nxv_status status);

/* Returns the message of the last failure on the calling thread, or "" if
 * none. The string is owned by the thread and valid until its next nxv call.
 * Thread-safe (per-thread storage). */
const char *nxv_last_error(void);

/* ------------------------------------------------------------------------ */
/* Element types                                                             */
/* ------------------------------------------------------------------------ */

typedef enum nxv_dtype {
  NXV_S8, NXV_S16, NXV_S32, NXV_S64,
  NXV_U8, NXV_U16, NXV_U32, NXV_U64,
  NXV_F16, NXV_BF16, NXV_F32, NXV_F64,
  NXV_C64, NXV_C128,
  NXV_DTYPE_COUNT
} nxv_dtype;

/* Size in bytes of one element of dtype, 0 for an invalid dtype. */
size_t nxv_dtype_size(nxv_dtype dtype);
/* Short name ("f32", "s32", ...) of dtype, "invalid" if out of range. */
const char *nxv_dtype_name(nxv_dtype dtype);

/* ------------------------------------------------------------------------ */
/* Devices                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct nxv_device nxv_device;
typedef struct nxv_tensor nxv_tensor;

typedef enum nxv_device_type {
  NXV_DEVICE_OTHER = 0,
  NXV_DEVICE_INTEGRATED_GPU = 1,
  NXV_DEVICE_DISCRETE_GPU = 2,
  NXV_DEVICE_VIRTUAL_GPU = 3,
  NXV_DEVICE_CPU = 4,
} nxv_device_type;

/* Everything the runtime knows about a physical device. Plain data. */
typedef struct nxv_device_info {
  uint32_t index;            /* index in enumeration order */
  char name[256];            /* VkPhysicalDeviceProperties::deviceName */
  char driver_name[256];     /* VkPhysicalDeviceDriverProperties */
  char driver_info[256];
  nxv_device_type type;
  uint32_t vendor_id, device_id, driver_version, api_version;
  uint32_t driver_id;        /* VkDriverId (VkPhysicalDeviceDriverProperties) */
  uint8_t pipeline_cache_uuid[16];

  /* features */
  bool timeline_semaphore;   /* required: devices without it are refused */
  bool float64, int64, int16, int8, float16;
  bool storage_8bit, storage_16bit;
  bool buffer_device_address; /* required */
  bool push_descriptor;
  bool memory_budget;
  bool cooperative_matrix;    /* VK_KHR_ or VK_NV_cooperative_matrix */
  bool coopmat_f16;           /* f16 matmul runs on tensor cores: 16x16x16
                                 f16 x f16 + f32 subgroup products through
                                 VK_KHR_ or VK_NV_cooperative_matrix,
                                 subgroups of 32 */
  bool coopmat_khr;           /* the f16 products go through
                                 VK_KHR_cooperative_matrix (else NV's) */
  bool coopmat_bf16;          /* bf16 matmul runs on tensor cores: 16x16x16
                                 bf16 x bf16 + f32 subgroup products through
                                 VK_KHR_cooperative_matrix and
                                 VK_KHR_shader_bfloat16, subgroups of 32 */
  bool pipeline_creation_feedback;
  bool calibrated_timestamps; /* VK_EXT_calibrated_timestamps samples the
                                 device's timestamps with CLOCK_MONOTONIC:
                                 batch records carry GPU start and end
                                 times on the host's clock */
  uint32_t subgroup_size, subgroup_min_size, subgroup_max_size;
  uint32_t subgroup_operations; /* VkSubgroupFeatureFlags */

  /* limits */
  uint32_t max_push_constants_size;
  uint64_t max_storage_buffer_range;
  uint64_t max_memory_allocation_size;
  uint64_t max_buffer_size;
  uint32_t max_workgroup_count[3];
  uint32_t max_workgroup_size[3];
  uint32_t max_workgroup_invocations;
  uint32_t max_shared_memory;
  uint64_t device_local_heap_size; /* largest DEVICE_LOCAL heap */
  uint32_t queue_family;           /* family of the compute queue in use */
  bool compute_only_queue;         /* that family has no graphics bit */
  uint32_t timestamp_bits;         /* its timestampValidBits: 0 = the queue
                                      writes no timestamps (no GPU time in
                                      nxv_stats.gpu_busy_ns) */
  float timestamp_period_ns;       /* nanoseconds per timestamp tick */
  bool usable;  /* meets the runtime's requirements (timeline, BDA) */
} nxv_device_info;

/* Number of Vulkan physical devices. Thread-safe. */
nxv_status nxv_device_count(uint32_t *out_count);

/* Fills out_info for the physical device at index without opening it.
 * Thread-safe. */
nxv_status nxv_device_query(uint32_t index, nxv_device_info *out_info);

/* The index the default choice picks: NX_VULKAN_DEVICE if set, else the
 * first usable discrete GPU, else integrated, else virtual, else CPU.
 * Thread-safe. */
nxv_status nxv_device_default_index(uint32_t *out_index);

/* Most ops nxv_device_config.reorder_window may hold. */
#define NXV_REORDER_WINDOW_MAX 64
/* Most pipeline_threads a device may have, and its two special values:
 * none (the default) and half the CPUs the process may run on, 1 to 8. */
#define NXV_PIPELINE_THREADS_MAX 64
#define NXV_PIPELINE_THREADS_NONE (-1)
#define NXV_PIPELINE_THREADS_AUTO (-2)

/* Device options. Zero-initialise, then set what you need: zero fields take
 * their defaults. */
typedef struct nxv_device_config {
  uint32_t ring_capacity;     /* nodes in the op ring (power of two); 4096 */
  uint32_t max_batch_nodes;   /* submit after this many nodes; 512. 1 gives
                                 one submit per op (a reference mode). */
  uint64_t max_batch_cost;    /* submit after this much estimated work
                                 (elements touched; m n k / 16 for a
                                 product); 1<<32 */
  uint32_t idle_flush_us;     /* submit an open batch after the ring has
                                 been empty this long; 20 */
  uint32_t kick_nodes;        /* submit an open batch of this many nodes
                                 at once when nothing is in flight (the
                                 GPU is idle) and the ring holds no more
                                 nodes, of four times as many when it
                                 does; 16 */
  uint32_t kick_inflight;     /* the batch kick_nodes submits on an idle
                                 GPU is also submitted while fewer than
                                 this many batches, of under 2^18
                                 elements of estimated work in all, are
                                 in flight, so that the GPU is fed
                                 instead of handed each batch only once
                                 the last one has been seen complete;
                                 0 = the default, 3; 1 = only on an idle
                                 GPU */
  uint32_t early_inflight;    /* a batch holding 8 ops and 2^18 elements
                                 of estimated work (ops as large as a
                                 training step's products) is submitted
                                 at once only while fewer than this many
                                 submitted batches are incomplete on the
                                 GPU; otherwise it takes more ops until
                                 one completes (then goes at once), so
                                 that a producer ahead of the GPU hands
                                 it fewer, longer batches with fewer
                                 barriers; 0 = the default, 2; 17 or more
                                 never holds a batch */
  int32_t reorder_window;     /* an op that must wait for a barrier is
                                 held in a window of at most this many ops
                                 (up to NXV_REORDER_WINDOW_MAX) while later independent ops
                                 are recorded ahead of it, so that they
                                 share barrier intervals (the first op of
                                 a batch is not held while every
                                 submitted batch has completed); 0 = the
                                 default, 32; -1 = record in queue order */
  uint32_t wait_spin_us;      /* downloads and synchronize busy-poll the
                                 timeline this long before sleeping (and
                                 retire the batches they saw complete);
                                 the completion thread polls at most
                                 50 us of it; 1000 on GPUs, 50 on CPU
                                 devices */
  uint32_t idle_spin_us;      /* the scheduler thread polls an empty ring
                                 this long before sleeping, so an op that
                                 follows soon (a download after its
                                 result) needs no thread wake-up; 200 */
  uint64_t staging_bytes;     /* staging ring size; 64 MiB */
  uint64_t arena_bytes;       /* kernel-argument arena size; 4 MiB */
  uint64_t pool_limit_bytes;  /* cap on reserved device memory; 0 = 90% of
                                 the heap budget */
  uint64_t pool_chunk_bytes;  /* size of the pool's chunks, the device
                                 allocations that buffers of up to 8 MiB
                                 (and slabs of smaller ones) are carved
                                 from; 0 = 64 MiB */
  const char *cache_dir;      /* pipeline cache directory; NULL =
                                 NX_VULKAN_CACHE_DIR, then XDG cache dir */
  bool disable_disk_cache;    /* do not read or write the cache file */
  bool poison_outputs;        /* fill every new op output with 0xFF bytes
                                 before the op runs (tests) */
  bool fast_math;             /* f32 exp/log/sin/cos/tanh/sigmoid with the
                                 driver's builtins (a few ulp) instead of
                                 double-precision evaluation; f32
                                 triangular solves in f32 */
  int32_t chained_solve;      /* triangular solves of order 17 and more
                                 (at most 4096 blocks of 32 rows times
                                 right-hand sides) in one dispatch whose
                                 workgroups wait on one another's rows
                                 (trsv.comp): 0 = on GPUs,
                                 1 = always, CPU devices included, -1 =
                                 never. On llvmpipe a wait that outlasts
                                 its loop limit (65535 iterations) gives
                                 up, and the solve reports it (bit 1 of
                                 its flags); with LP_NUM_THREADS=1 no
                                 block waits. */
  int32_t download_kernel;    /* downloads of at most 64 KiB copy with a
                                 compute kernel instead of a transfer
                                 command: 0 = on GPUs (where it completes
                                 sooner), 1 = always, -1 = never */
  bool unmapped_small;        /* keep buffers of at most 256 bytes out of
                                 host-visible device memory. By default
                                 they live there when the device has such
                                 memory, and a download of at most 64
                                 bytes (256 on CPU devices) reads them in
                                 place once their writer's batch has
                                 completed: no copy is queued, no further
                                 submission is needed; an upload of one
                                 writes it in place, queuing nothing */
  bool no_latency_timing;     /* do not read the clock per op: the
                                 op_latency histogram stays empty (the
                                 per-batch and download figures remain) */
  bool no_gpu_timestamps;     /* write no timestamps at the start and end
                                 of any batch: nxv_stats.gpu_busy_ns, the
                                 batch_gpu histogram and the batch records'
                                 gpu_ns stay 0. Small batches (see
                                 gpu_busy_ns) write none without it,
                                 unless batch records are kept. */
  bool no_round_trip_submit;  /* never submit a round trip's op before
                                 its download arrives (see
                                 nxv_stats.round_trip_submits) */
  bool defer_elementwise;     /* nxv_unary, nxv_binary and
                                 nxv_binary_scalar of f16, bf16, f32 and
                                 f64 of a basic op (copy, negate, abs,
                                 square; add, subtract, multiply, divide,
                                 max, min) queue nothing and return a
                                 deferred result: such an op reading it
                                 takes its program into its own, and it is
                                 computed (one kernel for the program,
                                 bitwise the ops' results) when another op
                                 or a download reads it or, at the latest,
                                 before the device's next kernel. Chains of
                                 tiny ops take fewer kernels; independent
                                 ops cost more host time */
  bool no_spirv_prune;        /* hand the driver each kernel family's whole
                                 module: by default a pipeline's module is
                                 first pruned of the ops and branches its
                                 specialization constants rule out
                                 (kernels/spv_prune.h), which cuts the
                                 creation of pipelines that carry the
                                 double-precision math library from about
                                 a second to milliseconds */
  int32_t pipeline_threads;   /* threads that create pipelines in the
                                 background: an op whose pipeline does not
                                 exist yet returns at once and the
                                 scheduler waits for the pipeline when it
                                 records the op, so the pipelines of a
                                 first training step are created several
                                 at a time (a failed creation then fails
                                 the device, sticky). 0 or
                                 NXV_PIPELINE_THREADS_NONE (the default):
                                 the thread that queues an op creates its
                                 pipeline, and a failure is that op's
                                 error. NXV_PIPELINE_THREADS_AUTO: half the
                                 CPUs the process may run on (its
                                 affinity), 1 to 8. At most
                                 NXV_PIPELINE_THREADS_MAX. Left 0, the
                                 environment variable
                                 NX_VULKAN_PIPELINE_THREADS (auto, off or
                                 a count) decides, if set */
  uint32_t batch_timeout_ms;  /* a batch still running this long after it
                                 became the oldest in flight (submitted,
                                 the batches before it done) fails the
                                 device with NXV_ERR_DEVICE_LOST (sticky):
                                 every waiter wakes with the error instead
                                 of waiting for a GPU that stopped making
                                 progress (a kernel that never ends, a
                                 driver fault). Its work stays in flight
                                 and its buffers are released only if it
                                 completes; releasing the device still
                                 waits for it. 0 (the default): never.
                                 Set it above the longest batch the
                                 application runs */
} nxv_device_config;

/* Opens the device at index (index < 0: the default choice) with config
 * (NULL: defaults). Starts its scheduler and completion threads and loads
 * the on-disk pipeline cache. The caller owns one reference. Thread-safe;
 * each call opens an independent context. */
nxv_status nxv_device_open(int32_t index, const nxv_device_config *config,
                           nxv_device **out_device);

void nxv_device_retain(nxv_device *device);
/* Drops a reference. The last release drains (or, after a sticky error,
 * cancels) queued work, waits for the GPU, saves the pipeline cache and
 * frees everything. Tensors hold references to their device, so the last
 * release happens only after every tensor is released. */
void nxv_device_release(nxv_device *device);

/* Copies the device description into out_info. Thread-safe. */
nxv_status nxv_device_info_get(nxv_device *device, nxv_device_info *out_info);

/* Counters of one device. Plain data; a snapshot, not a consistent cut. */
/* A latency histogram with fixed buckets: bucket 0 counts values below
 * 256 ns, bucket i (1 .. 30) values in [2^(i+7), 2^(i+8)) ns, bucket 31
 * values of 2^38 ns and more. */
#define NXV_HISTOGRAM_BUCKETS 32
typedef struct nxv_histogram {
  uint64_t count;  /* values recorded */
  uint64_t sum_ns; /* their sum */
  uint64_t max_ns; /* the largest */
  uint64_t buckets[NXV_HISTOGRAM_BUCKETS];
} nxv_histogram;

/* Exclusive upper bound in ns of bucket (UINT64_MAX for the last one).
 * Pure function. */
uint64_t nxv_histogram_bucket_limit(uint32_t bucket);

typedef struct nxv_stats {
  /* pool */
  uint64_t pool_bytes_reserved;  /* device memory held by the pool */
  uint64_t pool_bytes_in_use;    /* size-class bytes of live buffers */
  uint64_t pool_bytes_peak;      /* high-water mark of in_use */
  uint64_t pool_hits, pool_misses;
  uint64_t pool_allocations, pool_frees; /* vkAllocateMemory / vkFreeMemory */
  uint64_t pool_trims;
  uint64_t pool_live_buffers;
  uint64_t pool_bytes_mapped;    /* part of reserved that is host-visible
                                    (small buffers read in place) */
  /* staging */
  uint64_t staging_bytes, staging_dedicated; /* ring size, one-off buffers */
  /* queue */
  uint64_t ops_enqueued, ops_completed, submits, barriers;
  uint64_t barriers_ahead;       /* of barriers, those recorded into an
                                    empty batch while the scheduler idled,
                                    after a batch ending with a host read
                                    (a download), once the GPU had
                                    completed everything submitted: ahead
                                    of the batch's first op, which then
                                    records none */
  uint64_t round_trip_submits;   /* of submits, batches of one op that
                                    writes a small mapped result, submitted
                                    as soon as it was recorded (the first
                                    op after a download that read in place
                                    and followed a single op, the GPU idle,
                                    nothing more queued) rather than when
                                    its download arrived */
  uint64_t pipelined_kicks;      /* of submits, batches kick_nodes
                                    submitted behind batches still in
                                    flight (kick_inflight) */
  uint64_t epoch_submitted, epoch_completed;
  uint64_t ring_full_waits;      /* times a producer found the ring full */
  uint64_t scheduler_wakeups;    /* times a producer woke the sleeping
                                    scheduler thread (one per sleep at
                                    most, whatever the producers) */
  uint64_t ops_reordered;        /* ops recorded ahead of an op queued
                                    before them (reorder_window) */
  uint64_t reads_in_place;       /* downloads read from a mapped buffer
                                    whose writer was already submitted
                                    (no copy, no submission of their own)
                                    or had completed (not even a node) */
  uint64_t gpu_busy_ns;          /* GPU time of the retired batches, from
                                    timestamps written at the start and end
                                    of each; 0 where the queue has none.
                                    Batches of at most 2 ops under 2^16
                                    elements of work in all (a small op and
                                    its download) are not timed, and a
                                    batch is timed from the op that takes
                                    it past that (from its start while
                                    batch records are kept) */
  uint64_t batches_untimed;      /* retired batches without timestamps
                                    (small ones; every batch where the
                                    queue has none or no_gpu_timestamps) */
  uint64_t deferred_ops;         /* elementwise ops that returned a
                                    deferred result (defer_elementwise) */
  uint64_t deferred_fused;       /* deferred results computed by one
                                    kernel for two or more ops */
  uint64_t bytes_submitted;      /* bytes the submitted ops write: the
                                    size-class bytes of the buffers a kernel
                                    writes, a copy's or fill's byte count */
  /* latency, recorded since the device opened */
  nxv_histogram op_latency;      /* each op, from its enqueue to the
                                    completion thread seeing its batch done */
  nxv_histogram queue_wait;      /* each batch, from the enqueue of its
                                    first op to its submission */
  nxv_histogram batch_gpu;       /* each timed batch's GPU time
                                    (timestamps; empty where the queue has
                                    none; see gpu_busy_ns) */
  nxv_histogram download_wait;   /* each download, from its start to the
                                    caller seeing it complete */
  /* pipelines */
  uint64_t pipeline_hits, pipeline_misses; /* in-memory lookups */
  uint64_t pipeline_disk_hits;   /* creations served by the disk cache, when
                                    the driver reports it */
  uint64_t pipelines;            /* pipelines created */
  uint64_t pipelines_pruned;     /* of those, created from a module pruned
                                    for their specialization constants */
  uint64_t program_pipelines;    /* pipelines specialized for a fused
                                    program (nxv_fused, fused deferred ops),
                                    among pipelines */
  uint64_t pipeline_waits;       /* ops whose pipeline was still being
                                    created (pipeline_threads) when the
                                    scheduler recorded them */
  uint64_t pipeline_wait_ns;     /* the scheduler's time waiting for them */
  bool cache_file_loaded;
  bool cache_file_rejected;
  char cache_reject_reason[128]; /* why the file was rejected, "" if not */
  char cache_path[512];
} nxv_stats;

nxv_status nxv_device_stats(nxv_device *device, nxv_stats *out_stats);

/* One retired batch, kept for telemetry (nxv_device_take_batches). */
typedef struct nxv_batch_record {
  uint64_t epoch;         /* timeline value its submission signalled */
  uint64_t ops;           /* ops it ran */
  uint64_t bytes;         /* bytes they write (as nxv_stats.bytes_submitted) */
  uint64_t queue_wait_ns; /* enqueue of its first op -> its submission */
  uint64_t gpu_ns;        /* GPU time from timestamps; 0 without them */
  uint64_t latency_ns;    /* submission -> completion seen */
  /* Times on the CLOCK_MONOTONIC clock, in ns: its first op taken off
   * the queue to be recorded, its submission (the call to vkQueueSubmit),
   * and its start and end timestamps on the GPU converted to that clock
   * through VK_EXT_calibrated_timestamps (the last two 0 where the device
   * cannot calibrate them or writes no timestamps). submit_time_ns -
   * record_time_ns is how long it took to record; gpu_start_time_ns -
   * submit_time_ns how long the GPU took to start the batch; the start of
   * one batch minus the end of the one before is how long the GPU idled
   * between them. */
  uint64_t record_time_ns;
  uint64_t submit_time_ns;
  uint64_t gpu_start_time_ns;
  uint64_t gpu_end_time_ns;
} nxv_batch_record;

/* The runtime's clock: CLOCK_MONOTONIC in nanoseconds, the clock of
 * nxv_batch_record's times. Thread-safe. */
uint64_t nxv_clock_ns(void);

/* Most records a device keeps between two nxv_device_take_batches calls;
 * further batches are counted as dropped. */
#define NXV_BATCH_RECORDS 4096

/* Starts (enable) or stops keeping a record of each batch the device
 * retires; off when a device opens. Stopping discards the records kept.
 * Thread-safe. */
nxv_status nxv_device_record_batches(nxv_device *device, bool enable);

/* Moves up to max of the oldest records into out: *out_count records, and
 * in *out_dropped the batches not recorded since the previous call because
 * NXV_BATCH_RECORDS were waiting. Thread-safe. */
nxv_status nxv_device_take_batches(nxv_device *device, nxv_batch_record *out,
                                   uint32_t max, uint32_t *out_count,
                                   uint64_t *out_dropped);

/* Waits until every op enqueued on device before the call has completed
 * and been retired (buffers it released are back in the pool).
 * Blocks. Returns the sticky error if the device has failed. */
nxv_status nxv_device_synchronize(nxv_device *device);

/* Frees the pool's unused device memory. Thread-safe. */
nxv_status nxv_device_trim(nxv_device *device);

/* NXV_OK, or the device's sticky error (and its message in *out_message,
 * which stays valid while the device lives; may be NULL). */
nxv_status nxv_device_status(nxv_device *device, const char **out_message);

/* Writes the pipeline cache file now (also done on the last release). */
nxv_status nxv_device_save_pipeline_cache(nxv_device *device);

/* Test hook: makes the device fail as if the driver had returned fault
 * (NXV_ERR_DEVICE_LOST or NXV_ERR_SUBMIT_FAILED) to the next queue
 * submission. A device loss while work is on the GPU strikes at once,
 * as the wait for that work would report it: every waiter wakes with the
 * error (the buffers of that work are released only once it has really
 * finished). Thread-safe. */
void nxv_device_inject_fault(nxv_device *device, nxv_status fault);

/* Test hook: the device's next pipeline creation fails as if the driver
 * had returned VK_ERROR_OUT_OF_DEVICE_MEMORY. With pipeline_threads the op
 * that needed it is queued and the device fails (sticky) when the
 * scheduler reaches it; without, that op returns the error and the device
 * goes on. Thread-safe. */
void nxv_device_inject_pipeline_fault(nxv_device *device);

/* Test hook: the device's next submission does not run until the device
 * is released (it waits on a semaphore that only the release signals), as
 * if the GPU had stopped making progress. With batch_timeout_ms the device
 * fails once that batch has been the oldest in flight that long. Releasing
 * the device ends the hang. Thread-safe. */
void nxv_device_inject_hang(nxv_device *device);

/* Test hook: while paused, the device's scheduler thread takes no op off
 * its ring: ops are still queued (producers wait once ring_capacity - 1
 * are), as if the scheduler were slower than its producers; resuming lets
 * it record what waits. Destroying a paused device is allowed. Thread-safe. */
void nxv_device_inject_pause(nxv_device *device, bool paused);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/* ------------------------------------------------------------------------ */

/* A tensor is a reference-counted handle on a pooled device buffer holding
 * `count` elements of `dtype`, densely packed. It keeps its device alive.
 * Shapes live with the caller: ops take shapes and strides explicitly. */

void nxv_tensor_retain(nxv_tensor *tensor);
/* Drops a reference; the buffer returns to the pool once the GPU is done
 * with it. Never blocks. */
void nxv_tensor_release(nxv_tensor *tensor);
nxv_dtype nxv_tensor_dtype(const nxv_tensor *tensor);
uint64_t nxv_tensor_count(const nxv_tensor *tensor);
nxv_device *nxv_tensor_device(const nxv_tensor *tensor);

/* New tensor with uninitialised contents. Returns at once. */
nxv_status nxv_tensor_empty(nxv_device *device, nxv_dtype dtype,
                            uint64_t count, nxv_tensor **out_tensor);

/* New tensor holding a copy of count elements at data. The host bytes are
 * copied before the call returns (data may be reused at once); the device
 * copy is queued, or, for a small tensor in mapped memory (see
 * unmapped_small), the bytes are written into its buffer in place and
 * nothing is queued. Returns at once. Thread-safe. */
nxv_status nxv_tensor_upload(nxv_device *device, nxv_dtype dtype,
                             uint64_t count, const void *data,
                             nxv_tensor **out_tensor);

/* Copies elements [offset, offset+count) of tensor into dst. Blocks until
 * the ops enqueued before the call that produce the tensor are done (and no
 * longer). Returns the device's sticky error if it failed. */
nxv_status nxv_tensor_download(nxv_tensor *tensor, uint64_t offset,
                               uint64_t count, void *dst);

/* A download in flight: nxv_tensor_download in steps, so that a caller
 * that must not block long (an Erlang scheduler) can queue the copy, poll
 * briefly and hand the wait to another thread. Owned by its creator; not
 * thread-safe (one thread at a time may use it); holds a device
 * reference. */
typedef struct nxv_download nxv_download;

/* Queues the copy of elements [offset, offset+count) of tensor to host
 * memory, after the ops enqueued before the call, and returns at once.
 * A small result in mapped memory whose every queued write has completed
 * is read in place with nothing queued: the download is then complete on
 * return. The tensor may be released right after. */
nxv_status nxv_download_start(nxv_tensor *tensor, uint64_t offset,
                              uint64_t count, nxv_download **out_download);

/* Busy-polls for up to spin_us microseconds (at least one check; on CPU
 * devices, whose copy needs the cores, only that check) for the copy;
 * *out_done says whether it has completed. Never sleeps. Returns the
 * device's sticky error if it failed. */
nxv_status nxv_download_poll(nxv_download *download, uint32_t spin_us,
                             bool *out_done);

/* Blocks until the copy has completed (busy-polling the device's
 * wait_spin_us first), or returns the device's sticky error. */
nxv_status nxv_download_wait(nxv_download *download);

/* Bytes the download copies (count times the element size). */
uint64_t nxv_download_bytes(const nxv_download *download);

/* Copies the downloaded bytes to dst (nxv_download_bytes of them). Only
 * after a poll reported done or a wait succeeded. */
nxv_status nxv_download_read(const nxv_download *download, void *dst);

/* Frees the download. Safe at any time: a copy still in flight keeps its
 * staging memory until it retires. NULL is ignored. */
void nxv_download_release(nxv_download *download);

/* New handle on the same buffer with the elements read as dtype, which must
 * have the element size of tensor's dtype (a bitcast: no copy, no GPU
 * work). */
nxv_status nxv_tensor_reinterpret(nxv_tensor *tensor, nxv_dtype dtype,
                                  nxv_tensor **out_tensor);

/* New tensor, a device-side copy of tensor. Returns at once. */
nxv_status nxv_tensor_copy(nxv_tensor *tensor, nxv_tensor **out_tensor);

/* ------------------------------------------------------------------------ */
/* Ops                                                                       */
/* ------------------------------------------------------------------------ */

/* A strided view of a tensor, in the coordinate system of an op's output.
 * Element (i0..in) of the view is tensor[offset + sum_k i_k*strides[k]].
 * strides == NULL means the row-major strides of the output shape, i.e. the
 * tensor holds exactly the output shape. Every element the view can reach
 * must lie inside the tensor, or the op fails with INVALID_ARGUMENT. */
typedef struct nxv_view {
  nxv_tensor *tensor;
  int64_t offset;
  const int64_t *strides; /* rank entries or NULL */
} nxv_view;

/* Fills in_strides (out_rank entries) with the strides that broadcast a
 * row-major tensor of shape in_shape (in_rank <= out_rank) to out_shape,
 * numpy-style (trailing axes aligned, size-1 axes broadcast). Fails if the
 * shapes are not broadcast-compatible. Pure function. */
nxv_status nxv_broadcast_strides(uint32_t in_rank, const int64_t *in_shape,
                                 uint32_t out_rank, const int64_t *out_shape,
                                 int64_t *out_strides);

typedef enum nxv_binary_op {
  NXV_ADD, NXV_SUB, NXV_MUL, NXV_DIV, NXV_MAX, NXV_MIN, NXV_POW,
  NXV_REM, NXV_QUOTIENT, NXV_ATAN2,
  NXV_BITWISE_AND, NXV_BITWISE_OR, NXV_BITWISE_XOR,
  NXV_LEFT_SHIFT, NXV_RIGHT_SHIFT,
  NXV_BINARY_OP_COUNT
} nxv_binary_op;

typedef enum nxv_unary_op {
  NXV_COPY, NXV_NEG, NXV_ABS, NXV_SIGN, NXV_SQRT, NXV_RSQRT,
  NXV_EXP, NXV_LOG, NXV_SIN, NXV_COS, NXV_TANH, NXV_SIGMOID,
  NXV_FLOOR, NXV_CEIL, NXV_ROUND, NXV_BITWISE_NOT, NXV_SQUARE,
  NXV_EXPM1, NXV_LOG1P, NXV_ERF, NXV_ERFC, NXV_ERF_INV, NXV_TAN, NXV_SINH,
  NXV_COSH, NXV_CBRT, NXV_ASIN, NXV_ACOS, NXV_ATAN, NXV_ASINH, NXV_ACOSH,
  NXV_ATANH, NXV_CLZ, NXV_POPCOUNT,
  /* Complex types only. abs, real, imag and phase of a complex tensor
   * produce its component type (c64 -> f32, c128 -> f64). */
  NXV_CONJ, NXV_REAL, NXV_IMAG, NXV_PHASE,
  NXV_UNARY_OP_COUNT
} nxv_unary_op;

typedef enum nxv_compare_op {
  NXV_EQUAL, NXV_NOT_EQUAL, NXV_LESS, NXV_LESS_EQUAL, NXV_GREATER,
  NXV_GREATER_EQUAL, NXV_LOGICAL_AND, NXV_LOGICAL_OR, NXV_LOGICAL_XOR,
  NXV_COMPARE_OP_COUNT
} nxv_compare_op;

typedef enum nxv_reduce_op {
  NXV_REDUCE_SUM, NXV_REDUCE_PRODUCT, NXV_REDUCE_MAX, NXV_REDUCE_MIN,
  NXV_REDUCE_OP_COUNT
} nxv_reduce_op;

/* Name of an op ("add", "exp", "sum"), for messages. */
const char *nxv_binary_op_name(nxv_binary_op op);
const char *nxv_unary_op_name(nxv_unary_op op);
const char *nxv_reduce_op_name(nxv_reduce_op op);
const char *nxv_compare_op_name(nxv_compare_op op);

/* out[i] = a[i] op b[i] over shape (rank dims), a and b of the same dtype
 * (every dtype; which ops each supports: nxv_binary_supported, docs/ops.md).
 * Broadcasting is expressed through the views' strides. The result is a new
 * dense tensor of that shape.
 * Mixed types: one operand of float type T (f16, bf16, f32, f64) and the
 * other of an integer type, or of a float type narrower than T (f32 with
 * f16 or bf16; f64 with f16, bf16 or f32), give a result of type T, the
 * other operand converted to T as it is read, exactly as nxv_convert would
 * convert it (Nx's type promotion of such a pair is T). So do an integer
 * type T and an integer type that T holds every value of: a narrower
 * signed type into a signed T (s8 into s16, s32, s64; s16 into s32, s64;
 * s32 into s64), a narrower unsigned type into any T (u8 into s16, s32,
 * s64, u16, u32, u64; u16 into s32, s64, u32, u64; u32 into s64, u64).
 * Any other pair of distinct types (s32 with u32, which Nx widens both of
 * to s64; u64 with s64, whose values s64 does not all hold) is
 * NXV_ERR_INVALID_ARGUMENT. */
nxv_status nxv_binary(nxv_device *device, nxv_binary_op op, uint32_t rank,
                      const int64_t *shape, const nxv_view *a,
                      const nxv_view *b, nxv_tensor **out_tensor);

/* nxv_binary with one operand a scalar given by value: out[i] = value op
 * x[i] when scalar_first, else x[i] op value. value is one element of x's
 * dtype (its bytes as a tensor holds them; read before the call returns);
 * x's dtype must be at most 8 bytes wide (not c128: NXV_ERR_UNSUPPORTED).
 * The value travels in the kernel's push constants, whatever x's strides:
 * no buffer, no device op besides the kernel. */
nxv_status nxv_binary_scalar(nxv_device *device, nxv_binary_op op, uint32_t rank,
                             const int64_t *shape, const nxv_view *x, bool scalar_first,
                             const void *value, nxv_tensor **out_tensor);

/* out[i] = op(a[i]) over shape; out has a's dtype, except abs, real, imag
 * and phase of a complex dtype, which have its component type. */
nxv_status nxv_unary(nxv_device *device, nxv_unary_op op, uint32_t rank,
                     const int64_t *shape, const nxv_view *a,
                     nxv_tensor **out_tensor);

/* out[i] = (a[i] op b[i]) ? 1 : 0 as u8, over shape; a and b share a dtype
 * (any; complex: equal, not_equal and the logical ops). Comparisons follow
 * IEEE 754 (false with NaN except not_equal; complex values are equal when
 * both parts are); logical ops treat any non-zero value, NaN included, as
 * true.
 * Needs 8-bit storage (nxv_device_info.storage_8bit). */
nxv_status nxv_compare(nxv_device *device, nxv_compare_op op, uint32_t rank,
                       const int64_t *shape, const nxv_view *a,
                       const nxv_view *b, nxv_tensor **out_tensor);

/* nxv_compare with one operand a scalar given by value, as
 * nxv_binary_scalar. */
nxv_status nxv_compare_scalar(nxv_device *device, nxv_compare_op op, uint32_t rank,
                              const int64_t *shape, const nxv_view *x, bool scalar_first,
                              const void *value, nxv_tensor **out_tensor);

/* out[i] = pred[i] != 0 ? on_true[i] : on_false[i] over shape; pred is u8,
 * on_true and on_false share the result's dtype (any). */
nxv_status nxv_select(nxv_device *device, uint32_t rank, const int64_t *shape,
                      const nxv_view *pred, const nxv_view *on_true,
                      const nxv_view *on_false, nxv_tensor **out_tensor);

/* Fused elementwise programs: one kernel computing what a chain of
 * elementwise ops would, without writing the intermediate results.
 * Registers 0 .. ninputs-1 hold the inputs' elements at each index of the
 * shape; instruction k writes register ninputs + k; the result is the last
 * register. An instruction word is NXV_FUSED_INSTR(class, op, a, b, c):
 *   NXV_FUSED_UNARY    op(a)           nxv_unary_op
 *   NXV_FUSED_BINARY   a op b          nxv_binary_op
 *   NXV_FUSED_COMPARE  (a op b) ? 1 : 0  nxv_compare_op
 *   NXV_FUSED_SELECT   a != 0 ? b : c  (op 0)
 * Bits 0-1 are the class, 2-7 the op, 9-15, 16-22 and 23-29 the registers
 * a, b and c. A binary or comparison word made by
 * NXV_FUSED_INSTR_LIT(class, op, a, literal) sets bit 8 instead, and its
 * operand b is the literal in bits 16-31, a number of the program's type:
 * for float types the f16 value of those bits (a normal number or a zero)
 * rounded to the type as intermediate results are (exact but for bf16,
 * which truncates), for signed integers their value as int16_t, for
 * unsigned ones as uint16_t. A literal costs no input (a constant of the
 * computation, such as a shift amount, is part of the program and of its
 * pipeline).
 * Each op computes exactly what its own kernel would (nxv_unary,
 * nxv_binary, nxv_compare, nxv_select on the same dtype, intermediate
 * results rounded to it; the unary op's f32/f16/bf16 transcendentals in
 * double under the same rule), so a program's result is bitwise the
 * result of its ops run one by one. */
#define NXV_FUSED_MAX_INPUTS 12
#define NXV_FUSED_MAX_INSTRS 112
typedef enum nxv_fused_class {
  NXV_FUSED_UNARY = 0,
  NXV_FUSED_BINARY = 1,
  NXV_FUSED_COMPARE = 2,
  NXV_FUSED_SELECT = 3
} nxv_fused_class;
#define NXV_FUSED_INSTR(cls, op, a, b, c)                                  \
  ((uint32_t)(cls) | ((uint32_t)(op) << 2) | ((uint32_t)(a) << 9) |        \
   ((uint32_t)(b) << 16) | ((uint32_t)(c) << 23))
#define NXV_FUSED_INSTR_LIT(cls, op, a, literal)                           \
  ((uint32_t)(cls) | ((uint32_t)(op) << 2) | (1u << 8) |                   \
   ((uint32_t)(a) << 9) | ((uint32_t)(uint16_t)(literal) << 16))
/* The fields of an instruction word. */
#define NXV_FUSED_CLASS(w) ((uint32_t)(w) & 3u)
#define NXV_FUSED_OP(w) (((uint32_t)(w) >> 2) & 63u)
#define NXV_FUSED_HAS_LIT(w) ((((uint32_t)(w) >> 8) & 1u) != 0u)
#define NXV_FUSED_A(w) (((uint32_t)(w) >> 9) & 127u)
#define NXV_FUSED_B(w) (((uint32_t)(w) >> 16) & 127u)
#define NXV_FUSED_C(w) (((uint32_t)(w) >> 23) & 127u)
#define NXV_FUSED_LIT(w) ((uint32_t)(w) >> 16)

/* Runs a fused program of ninstrs (1 .. NXV_FUSED_MAX_INSTRS) words over
 * ninputs (1 .. NXV_FUSED_MAX_INPUTS) views of dtype (f16, bf16, f32 or
 * f64; f16 intermediates are rounded to nearest even, as f16 stores are
 * on the devices tested; or s32, s64, u32 or u64, whose unary ops are
 * those that keep the type: copy, negate, abs, sign, bitwise_not, square,
 * count_leading_zeros and population_count) over shape; out is a new
 * dense tensor of dtype and shape. Operands must name registers written
 * before; every op must be supported for dtype (NXV_ERR_UNSUPPORTED
 * otherwise); unused operand fields and bits 30-31 must be 0, and only
 * binary and comparison words may carry a literal (for a float type, one
 * whose bits are a normal f16 number or a zero).
 * Each distinct program (its words, input count and which inputs are
 * scalars or strided) is a pipeline of its own, created on first use and
 * kept with the device, at most 1024 per device
 * (NXV_ERR_UNSUPPORTED beyond). Thread-safe. */
nxv_status nxv_fused(nxv_device *device, nxv_dtype dtype, uint32_t rank,
                     const int64_t *shape, uint32_t ninputs,
                     const nxv_view *inputs, uint32_t ninstrs,
                     const uint32_t *program, nxv_tensor **out_tensor);

/* nxv_fused where the inputs whose bit is set in imm_mask (bits below
 * ninputs) are immediates: one value of dtype broadcast over shape, its
 * bits in the low bytes of imm_bits[k] (imm_bits has ninputs entries; the
 * others are ignored), passed in the dispatch's push constants instead of
 * read from memory. Their views are ignored (their tensor may be NULL).
 * A program's pipeline is specialized for its words and which inputs are
 * immediates, not for the immediates' values. Thread-safe. */
nxv_status nxv_fused_imm(nxv_device *device, nxv_dtype dtype, uint32_t rank,
                         const int64_t *shape, uint32_t ninputs,
                         const nxv_view *inputs, uint32_t imm_mask,
                         const uint64_t *imm_bits, uint32_t ninstrs,
                         const uint32_t *program, nxv_tensor **out_tensor);

/* The checks nxv_fused_imm (second 0) or nxv_fused_pair (second: the
 * second result's register) makes of a program on device before it looks
 * at any input: the program's type there, its counts, each word's
 * operands and whether the device supports each word's op for the type.
 * NXV_OK when a run with valid inputs and free space in the device's
 * table of programs would queue; the run's own error otherwise. Creates
 * no pipeline and queues nothing (what a planner calls to choose programs
 * before it creates the pipelines of those it keeps). Thread-safe. */
nxv_status nxv_fused_check(nxv_device *device, nxv_dtype dtype, uint32_t ninputs,
                           uint32_t ninstrs, const uint32_t *program, uint32_t second);

/* A fused program prepared for repeated runs (a compiled plan's fused
 * ops): its words decoded once, and a memo of the last device it ran on
 * (the checks of its ops there and the pipeline of its first input
 * layout), so that a run with that device and layout neither checks the
 * program again nor looks its pipeline up. Opaque. */
typedef struct nxv_fused_program nxv_fused_program;

/* Prepares a program of ninstrs (1 .. NXV_FUSED_MAX_INSTRS) words over
 * ninputs (1 .. NXV_FUSED_MAX_INPUTS) inputs of dtype (a type nxv_fused
 * runs); the words are copied. Checks the counts, the type and each
 * word's operands (registers written before it, unused fields 0); which
 * ops a device supports is checked at its first run there. The caller
 * owns *out_program (nxv_fused_program_free). Thread-safe. */
nxv_status nxv_fused_program_create(nxv_dtype dtype, uint32_t ninputs, uint32_t ninstrs,
                                    const uint32_t *program,
                                    nxv_fused_program **out_program);

/* Frees a program (NULL is ignored); no run may be using it. */
void nxv_fused_program_free(nxv_fused_program *program);

/* The dtype and input count a program was prepared for. Thread-safe. */
nxv_dtype nxv_fused_program_dtype(const nxv_fused_program *program);
uint32_t nxv_fused_program_inputs(const nxv_fused_program *program);

/* nxv_fused_imm of a prepared program, with its dtype and input count:
 * the same result, errors and pipelines. Thread-safe: runs of one
 * program on several threads or devices at once are allowed (the memo
 * is written once, by the first run that finds its pipeline created). */
nxv_status nxv_fused_run(nxv_device *device, nxv_fused_program *program, uint32_t rank,
                         const int64_t *shape, const nxv_view *inputs, uint32_t imm_mask,
                         const uint64_t *imm_bits, nxv_tensor **out_tensor);

/* nxv_fused_imm and nxv_fused_run writing their result into an existing
 * tensor instead of a new one: the n elements of shape, in row-major
 * order, go to dst[dst_offset .. dst_offset + n - 1] (a concatenation's
 * block computed in place, with no copy). dst must be of the program's
 * dtype and hold that block, and no input may read dst's buffer (a
 * program reads and writes in one dispatch). Like nxv_copy_into, this
 * modifies dst: the caller must hold it exclusively (a tensor it just
 * created and has shared with no one). The caller keeps its reference to
 * dst; a run of no elements queues nothing. Errors as nxv_fused_imm's,
 * and NXV_ERR_INVALID_ARGUMENT for a destination of another dtype, a block
 * past its end or an input reading it. Thread-safe. */
nxv_status nxv_fused_into(nxv_device *device, nxv_dtype dtype, uint32_t rank,
                          const int64_t *shape, uint32_t ninputs, const nxv_view *inputs,
                          uint32_t imm_mask, const uint64_t *imm_bits, uint32_t ninstrs,
                          const uint32_t *program, nxv_tensor *dst, int64_t dst_offset);
nxv_status nxv_fused_run_into(nxv_device *device, nxv_fused_program *program, uint32_t rank,
                              const int64_t *shape, const nxv_view *inputs, uint32_t imm_mask,
                              const uint64_t *imm_bits, nxv_tensor *dst, int64_t dst_offset);

/* Programs with two results: a program computes, besides its result (its
 * last register), the value of one earlier instruction (register
 * second, ninputs <= second < ninputs + ninstrs - 1) at every element,
 * such as the two words of a counter-based generator's round, which
 * single-result programs would each compute in full. Where each result
 * goes: */
#define NXV_FUSED_MAX_RESULTS 2
typedef struct nxv_fused_dest {
  nxv_tensor *dst; /* NULL: a new dense tensor of the program's dtype and
                      shape; else a tensor the caller holds exclusively
                      (as nxv_fused_into's dst), not owned by the call */
  int64_t offset;  /* with dst: the element of dst where the block of
                      the result's n elements (row-major) starts */
} nxv_fused_dest;

/* nxv_fused_into with a second result: dests[0] receives the program's
 * result, dests[1] the value of register second. Where dests[k].dst is
 * NULL, out_tensors[k] is the new tensor (the caller owns it); elsewhere
 * out_tensors[k] is left alone (out_tensors may be NULL when both go into
 * destinations). Two blocks of one buffer must not overlap. On error
 * nothing is queued or returned. Errors as nxv_fused_into's, and
 * NXV_ERR_INVALID_ARGUMENT for a second register that is not an
 * instruction's before the last or overlapping blocks. Thread-safe. */
nxv_status nxv_fused_pair(nxv_device *device, nxv_dtype dtype, uint32_t rank,
                          const int64_t *shape, uint32_t ninputs, const nxv_view *inputs,
                          uint32_t imm_mask, const uint64_t *imm_bits, uint32_t ninstrs,
                          const uint32_t *program, uint32_t second,
                          const nxv_fused_dest dests[NXV_FUSED_MAX_RESULTS],
                          nxv_tensor *out_tensors[NXV_FUSED_MAX_RESULTS]);

/* nxv_fused_program_create for a program with a second result (register
 * second, as nxv_fused_pair takes it), run by nxv_fused_run_pair only. */
nxv_status nxv_fused_program_create_pair(nxv_dtype dtype, uint32_t ninputs, uint32_t ninstrs,
                                         const uint32_t *program, uint32_t second,
                                         nxv_fused_program **out_program);

/* The register of a program's second result, 0 for a program of one.
 * Thread-safe. */
uint32_t nxv_fused_program_second(const nxv_fused_program *program);

/* nxv_fused_pair of a prepared program of two results: the same results,
 * errors and pipelines (nxv_fused_run and nxv_fused_run_into refuse such
 * a program, and this a program of one). Thread-safe as nxv_fused_run. */
nxv_status nxv_fused_run_pair(nxv_device *device, nxv_fused_program *program, uint32_t rank,
                              const int64_t *shape, const nxv_view *inputs, uint32_t imm_mask,
                              const uint64_t *imm_bits,
                              const nxv_fused_dest dests[NXV_FUSED_MAX_RESULTS],
                              nxv_tensor *out_tensors[NXV_FUSED_MAX_RESULTS]);

/* Element type conversion of a strided view into a dense tensor of dtype
 * (any two types; f16 and bf16 round through f32, bf16 by truncation as
 * Nx.BinaryBackend; complex to real keeps the real part, real to complex
 * has a zero imaginary part). Float to integer truncates toward zero,
 * saturates at the integer range, and maps NaN to 0; integer to integer
 * wraps modulo the target width. */
nxv_status nxv_convert(nxv_device *device, nxv_dtype dtype, uint32_t rank,
                       const int64_t *shape, const nxv_view *a,
                       nxv_tensor **out_tensor);

/* Reduces a (a view over in_shape) over the axes whose bit is set in
 * axes_mask (bit k = axis k). The result is dense, with the kept axes in
 * order (keep_axes is a reshape for the caller). Reducing no axes copies.
 * Identity for empty reductions: 0, 1, -inf/INT_MIN, +inf/INT_MAX. Any
 * dtype for sum and product; real dtypes for max and min. */
nxv_status nxv_reduce(nxv_device *device, nxv_reduce_op op, uint32_t rank,
                      const int64_t *in_shape, const nxv_view *a,
                      uint32_t axes_mask, nxv_tensor **out_tensor);

/* nxv_reduce with a result of out_dtype: the input's dtype, or for sum and
 * product of an 8-, 16- or 32-bit integer input the 64-bit integer type of
 * its signedness (Nx's type for those sums: s8 -> s64, u8 -> u64). The
 * elements are widened as they are read and accumulate in 64 bits, wrapping
 * modulo 2^64, so no converted copy of the input is made. Any other pair is
 * NXV_ERR_UNSUPPORTED. Thread-safe. */
nxv_status nxv_reduce_to(nxv_device *device, nxv_reduce_op op, nxv_dtype out_dtype,
                         uint32_t rank, const int64_t *in_shape, const nxv_view *a,
                         uint32_t axes_mask, nxv_tensor **out_tensor);

/* Index of the largest (is_max) or smallest element along the axes of
 * axes_mask, counted row-major over those axes, as an s64 tensor of the
 * kept axes (as nxv_reduce). Ties go to the lowest index, or the highest
 * with tie_high. NaN follows Nx.BinaryBackend's sequential scan: NaNs are
 * skipped, but a NaN first element is never displaced (result 0, or the
 * last NaN with tie_high). Any real dtype; thread-safe like nxv_reduce. */
nxv_status nxv_argreduce(nxv_device *device, bool is_max, bool tie_high,
                         uint32_t rank, const int64_t *in_shape,
                         const nxv_view *a, uint32_t axes_mask,
                         nxv_tensor **out_tensor);

/* Indexed read (Nx gather, take, take_along_axis): a dense output of
 * rank/shape where output coordinates x read
 *   src[src_offset + sum_d x[d] * src_strides[d]
 *       + sum_j clamp(indices[p + j], 0, axis_dims[j] - 1) * axis_strides[j]]
 * with p = sum_d x[d] * index_strides[d] (the position of x's index tuple
 * of depth entries in indices, an s64 tensor). Out-of-range indices are
 * clamped. Every reachable element must lie within its tensor and offsets
 * within 2^31. src any dtype. */
typedef struct nxv_gather_desc {
  nxv_tensor *src;              /* borrowed */
  int64_t src_offset;
  nxv_tensor *indices;          /* borrowed; s64 */
  uint32_t rank;
  const int64_t *shape;         /* rank output dims */
  const int64_t *src_strides;   /* rank */
  const int64_t *index_strides; /* rank */
  uint32_t depth;
  const int64_t *axis_dims;     /* depth */
  const int64_t *axis_strides;  /* depth */
} nxv_gather_desc;
nxv_status nxv_gather(nxv_device *device, const nxv_gather_desc *desc,
                      nxv_tensor **out_tensor);

/* Indexed write (Nx indexed_put, indexed_add) into dst, in place: for
 * each of count updates u and slice position s (a dense slice of rank
 * dims slice_shape), the element at
 *   sum_d s[d] * dst_strides[d] + sum_j indices[u * depth + j] * axis_strides[j]
 * becomes updates[u * slice + s] (put) or is incremented by it (add).
 * Updates of one destination apply in order (the last put wins); updates
 * with an index outside [0, axis_dims[j]) are skipped. updates has dst's
 * dtype; indices is s64, dense count x depth. Queued after every earlier
 * use of dst. */
typedef struct nxv_scatter_desc {
  nxv_tensor *dst;              /* borrowed; written */
  nxv_tensor *updates;          /* borrowed */
  nxv_tensor *indices;          /* borrowed; s64 */
  uint64_t count;
  bool add;
  uint32_t rank;
  const int64_t *slice_shape;   /* rank */
  const int64_t *dst_strides;   /* rank */
  uint32_t depth;
  const int64_t *axis_dims;     /* depth */
  const int64_t *axis_strides;  /* depth */
} nxv_scatter_desc;
nxv_status nxv_scatter(nxv_device *device, const nxv_scatter_desc *desc);

/* Stable sort of each row of a dense rows x len tensor a (any real dtype),
 * ascending (-inf .. +inf, then NaN) or descending (NaN, +inf .. -inf),
 * equal keys in their original order either way (Nx.BinaryBackend's
 * order). out_values (a's dtype) and out_indices (s64, the source position
 * of each sorted element) are dense rows x len; either may be NULL when not
 * wanted, not both. A bitonic network: O(log^2 len) dispatches. */
nxv_status nxv_sort(nxv_device *device, nxv_tensor *a, uint64_t rows, uint64_t len,
                    bool descending, nxv_tensor **out_values,
                    nxv_tensor **out_indices);

/* Window reduction (sum, product, max or min) of a dense tensor a of rank
 * dims in_shape into a dense tensor of out_shape: output coordinate x
 * reduces the input at x[d] * strides[d] + w[d] * dilations[d] - pad_lo[d]
 * for 0 <= w[d] < window[d]; padding positions contribute the identity
 * (0, 1, -inf/MIN, +inf/MAX). Any real dtype. */
typedef struct nxv_window_desc {
  nxv_tensor *a;             /* borrowed; dense */
  uint32_t rank;
  const int64_t *in_shape;   /* rank */
  const int64_t *out_shape;  /* rank */
  const int64_t *window;     /* rank, >= 1 */
  const int64_t *strides;    /* rank, >= 1 */
  const int64_t *dilations;  /* rank, >= 1 */
  const int64_t *pad_lo;     /* rank */
} nxv_window_desc;
nxv_status nxv_window_reduce(nxv_device *device, nxv_reduce_op op,
                             const nxv_window_desc *desc, nxv_tensor **out_tensor);

/* Convolution (Nx conv) in the canonical layout: a dense input of shape
 * [N, C, s_1 .. s_S], a dense kernel [O, C / feature_groups, k_1 .. k_S]
 * of the input's dtype, and a dense result [N / batch_groups, O,
 * o_1 .. o_S] of that dtype (permuted layouts are transposes for the
 * caller). Along spatial axis d, result coordinate x and kernel tap j read
 * the input zero-padded by pad_lo[d] / pad_hi[d] (negative values crop)
 * after input dilation (input_dilation[d] - 1 zeros between elements), at
 *   x * strides[d] + j * kernel_dilation[d]
 * so o_d = floor((pad_lo + (s_d - 1) * input_dilation + 1 + pad_hi
 *                 - ((k_d - 1) * kernel_dilation + 1)) / strides) + 1
 * (0 when the dilated kernel is larger than the padded input). The result
 * sums input x kernel over the kernel taps and its C / feature_groups
 * channels. Groups split the output channels into G = feature_groups *
 * batch_groups equal blocks; block g reads input channels g * C/G ..
 * (feature groups) or input batch n + g * N / batch_groups (batch groups).
 * Products accumulate in the compute type (f16 and bf16 in f32, integers
 * wrapping). Any real dtype, and c64 and c128 (complex products; c128
 * needs shaderFloat64). Returns at once; thread-safe. */
typedef struct nxv_conv_desc {
  nxv_tensor *input;              /* borrowed; dense [N, C, spatial...] */
  nxv_tensor *kernel;             /* borrowed; dense [O, C / feature_groups,
                                     spatial...], the input's dtype */
  uint32_t rank;                  /* 2 + spatial rank, 2 .. NXV_MAX_RANK */
  const int64_t *in_shape;        /* rank */
  const int64_t *kernel_shape;    /* rank */
  const int64_t *out_shape;       /* rank: must equal the shape the
                                     geometry gives (checked) */
  const int64_t *strides;         /* rank - 2, >= 1 */
  const int64_t *pad_lo;          /* rank - 2, zeros before each spatial
                                     axis (negative: elements dropped) */
  const int64_t *pad_hi;          /* rank - 2, zeros after (likewise) */
  const int64_t *input_dilation;  /* rank - 2, >= 1 */
  const int64_t *kernel_dilation; /* rank - 2, >= 1 */
  int64_t feature_groups;         /* >= 1; divides O, C = kernel C * it */
  int64_t batch_groups;           /* >= 1; divides N and O; one of the
                                     two group counts must be 1 */
} nxv_conv_desc;
nxv_status nxv_conv(nxv_device *device, const nxv_conv_desc *desc,
                    nxv_tensor **out_tensor);

/* Window scatter (Nx window_scatter_max / window_scatter_min, the
 * gradient of window max/min). The windows of a (dense, in_shape) start at
 * w[d] * strides[d] - pad_lo[d] and span window[d] positions; there are
 * floor((in_shape[d] + pad_lo[d] + pad_hi[d] - window[d]) / strides[d]) + 1
 * along axis d, and source holds one value per window (dense, row-major
 * over the windows). Each window selects one element of a: scanning its
 * positions in row-major order, positions inside a only (padding is never
 * selected), the largest (smallest with is_min) by >= (<=), so ties go to
 * the last position and a NaN is neither selected over nor displaces the
 * current selection. The result, dense over in_shape in source's dtype,
 * is at each element init plus the source values of the windows that
 * selected it, added in window order. a may have any real dtype (compared
 * in its compute type); source any real dtype; init one element of
 * source's dtype. Deterministic (no atomics). Returns at once;
 * thread-safe. */
typedef struct nxv_window_scatter_desc {
  nxv_tensor *a;             /* borrowed; dense in_shape; what is compared */
  nxv_tensor *source;        /* borrowed; dense, one value per window */
  nxv_tensor *init;          /* borrowed; one element of source's dtype */
  bool is_min;               /* select the minimum (else the maximum) */
  uint32_t rank;
  const int64_t *in_shape;   /* rank */
  const int64_t *window;     /* rank, >= 1 */
  const int64_t *strides;    /* rank, >= 1 */
  const int64_t *pad_lo;     /* rank, may be negative */
  const int64_t *pad_hi;     /* rank, may be negative */
} nxv_window_scatter_desc;
nxv_status nxv_window_scatter(nxv_device *device,
                              const nxv_window_scatter_desc *desc,
                              nxv_tensor **out_tensor);

/* Writes a strided view of src over shape, converted to dst's dtype, into
 * dst: element i of the view goes to dst[dst_offset + sum_k i_k *
 * dst_strides[k]]. This is the one op that modifies an existing tensor:
 * the caller must hold dst exclusively (a tensor it just created and has
 * shared with no one), and the written positions must be distinct (no zero
 * stride on an axis longer than 1). Used to assemble concatenations, pads
 * and slice updates. Types: those of nxv_convert. */
nxv_status nxv_copy_into(nxv_device *device, nxv_tensor *dst, int64_t dst_offset,
                         const int64_t *dst_strides, uint32_t rank,
                         const int64_t *shape, const nxv_view *src);

/* General N-D transpose: out shape[k] = in_shape[perm[k]]. perm must be a
 * permutation of 0..rank-1. */
nxv_status nxv_transpose(nxv_device *device, uint32_t rank,
                         const int64_t *in_shape, nxv_tensor *a,
                         const uint32_t *perm, nxv_tensor **out_tensor);

/* Batched matrix product out[b] = A[b] (m x k) * B[b] (k x n), out dense
 * [batch, m, n]. Operand element A[b][i][p] is
 * a.tensor[a.offset + b*a_strides[0] + i*a_strides[1] + p*a_strides[2]];
 * B[b][p][j] likewise with b_strides (batch, k, n). Transposed operands are
 * expressed by swapping strides; a batch stride of 0 broadcasts. */
typedef struct nxv_matmul_desc {
  uint64_t batch, m, n, k;
  nxv_tensor *a;
  int64_t a_offset, a_strides[3];
  nxv_tensor *b;
  int64_t b_offset, b_strides[3];
} nxv_matmul_desc;

nxv_status nxv_matmul(nxv_device *device, const nxv_matmul_desc *desc,
                      nxv_tensor **out_tensor);

/* New tensor of count elements all equal to *value (one element of dtype,
 * read before the call returns). */
nxv_status nxv_fill(nxv_device *device, nxv_dtype dtype, uint64_t count,
                    const void *value, nxv_tensor **out_tensor);

/* New dense tensor of shape whose elements equal their index along axis. */
nxv_status nxv_iota(nxv_device *device, nxv_dtype dtype, uint32_t rank,
                    const int64_t *shape, uint32_t axis,
                    nxv_tensor **out_tensor);

/* Discrete Fourier transform of each row of a, a dense rows x n tensor of
 * c64 or c128 (rows * n elements): out[r][k] = sum_j a[r][j] w^(j k),
 * w = exp(-2 pi i / n); the inverse uses exp(+2 pi i / n) and divides by
 * n. Components of magnitude <= eps in the result are flushed to zero.
 * Decimation in time as Nx.BinaryBackend's: direct transforms of length m
 * for n = 2^p m (m odd), then p radix-2 stages, each one dispatch;
 * evaluated in double where the device has it (c64 intermediates kept in
 * double, rounded once on the final store).
 * a is retained until the work completes; *out_tensor is new. */
nxv_status nxv_fft(nxv_device *device, nxv_tensor *a, uint64_t rows, uint64_t n,
                   bool inverse, double eps, nxv_tensor **out_tensor);

/* Cholesky factor L (A = L L^T) of each of batch dense n x n matrices of
 * a (f32 or f64; batch * n * n elements), as Nx's default implementation
 * defines it: L[j][j] = sqrt(A[j][j] - sum_{k<j} L[j][k]^2),
 * L[i][j] = (A[i][j] - sum_{k<j} L[i][k] L[j][k]) / (L[j][j] + eps) for
 * i > j, zeros above the diagonal, and every |L[i][j]| <= eps set to 0.
 * Only the lower triangle of each matrix is read; one that is not positive
 * definite gets NaN from the first negative square root on. Computed in
 * dtype, as Nx's implementation computes it. Orders up to 64 take one
 * dispatch (a workgroup per matrix, the matrix in registers); larger ones
 * are factored in panels of 32 columns, three dispatches a panel (the
 * diagonal block, the rows below it, the trailing update, each over every
 * matrix of the batch), plus a copy and a final pass. n is at most
 * NXV_CHOLESKY_MAX_ORDER, else NXV_ERR_UNSUPPORTED.
 * a is retained until the work completes; *out_tensor is new (dense
 * batch x n x n). */
nxv_status nxv_cholesky(nxv_device *device, nxv_tensor *a, uint64_t batch, uint64_t n,
                        double eps, nxv_tensor **out_tensor);

/* batch triangular systems, as Nx.LinAlg.triangular_solve defines them:
 * op(A) X = B when left_side, X op(A) = B otherwise, op(A) = A^T when
 * transpose_a, else A; A lower triangular when lower, upper otherwise,
 * only that triangle read. a: dense batch x n x n; b: dense batch x n x
 * cols (left side) or batch x cols x n (right side), of a's type (f32 or
 * f64). */
typedef struct nxv_trsm_desc {
  uint64_t batch, n, cols;
  nxv_tensor *a, *b; /* borrowed; retained by the call until the work completes */
  bool lower, left_side, transpose_a;
} nxv_trsm_desc;

/* Solves desc's systems: *out_x (new) is laid out as b; *out_singular
 * (new) holds one u32 per system: bit 0 set where A has a zero on its
 * diagonal (that system's solution then holds infinities or NaN; Nx
 * raises), bit 1 where a chained solve's wait gave up (see chained_solve
 * in nxv_device_config: that solution is not valid), else 0. On GPUs,
 * orders from 17 (up to 4096 blocks of 32 rows times right-hand sides)
 * are one dispatch of a workgroup per 32 rows and chunk of 1 to 8
 * right-hand sides, the blocks of a chunk waiting on one another's rows;
 * otherwise up to
 * order 128 (and 4 rows of a right-hand side per invocation) one
 * dispatch, a workgroup per system and 16 right-hand sides; up to order
 * 512 and 8 right-hand sides a workgroup per system; larger systems in
 * panels of 32 rows, two dispatches a panel. f32 is computed
 * in double where the device has f64, unless fast_math (as
 * Nx.BinaryBackend computes), each solution rounded once. Thread-safe, as
 * every op: the queued work holds a, b and the results' buffers. */
nxv_status nxv_triangular_solve(nxv_device *device, const nxv_trsm_desc *desc,
                                nxv_tensor **out_x, nxv_tensor **out_singular);

/* LU factorization with partial pivoting (LAPACK's getrf) of each of
 * batch dense n x n matrices of a (f32 or f64; batch * n * n elements), as
 * Nx.LinAlg.lu returns it: A = P L U with P a permutation matrix, L unit
 * lower triangular and U upper triangular, three new dense batch x n x n
 * tensors of a's type. Step j pivots on the first row of the largest
 * magnitude in column j at or below the diagonal; a zero pivot (a
 * singular matrix) leaves its column of L zero. Entries of L and U of
 * magnitude below eps are written as zero (as Nx.BinaryBackend does). f32
 * is computed in double where the device has f64, unless fast_math, each
 * result rounded once. Up to order 64 (32 on devices with less shared
 * memory) one dispatch, a workgroup per matrix holding it in shared
 * memory; larger orders in panels of 32 columns, three dispatches a panel
 * over every matrix of the batch, in a workspace. n is at most
 * NXV_CHOLESKY_MAX_ORDER (on CPU devices 14848), and the first panel's
 * trailing update must fit the device's grid, else NXV_ERR_UNSUPPORTED.
 * a is retained until the work completes; the outputs are new. Thread-safe,
 * as every op. */
nxv_status nxv_lu(nxv_device *device, nxv_tensor *a, uint64_t batch, uint64_t n, double eps,
                  nxv_tensor **out_p, nxv_tensor **out_l, nxv_tensor **out_u);

/* QR factorization by Householder reflections of each of batch dense
 * m x n matrices of a (f32 or f64; batch * m * n elements), as Nx's
 * default implementation (Nx.LinAlg.QR) defines it: A = Q R, reflection
 * i mapping column i of the current R at and below row i to its norm
 * times e_i (R's diagonal non-negative) unless the sum of squares below
 * row i is under eps (then the identity, what it leaves below the
 * diagonal changed by the later reflections, as Nx's H R over every
 * column; Nx leaves the last column of a square matrix unreflected). complete: Q is m x m and R m x n; else
 * (Nx's :reduced) Q m x k and R k x n, k = min(m, n). Two new dense
 * tensors of a's type; entries of magnitude at most eps are written as
 * zero. f32 is computed in double where the device has f64, unless
 * fast_math, each result rounded once. Matrices of at most 64 x 64: three
 * dispatches over the batch (one a workgroup per matrix); larger: a
 * dispatch a reflection applying it to R's columns right of it and those
 * an identity reflection left (a
 * workgroup per 8 columns, the one holding the next column computing the
 * next reflection), then Q's columns a workgroup per 8, many reflections
 * a dispatch (157 at m = 1024: llvmpipe ends long loops). m and n are at
 * most NXV_CHOLESKY_MAX_ORDER and m * n below 2^32, else
 * NXV_ERR_UNSUPPORTED.
 * a is retained until the work completes; the outputs are new. Thread-safe,
 * as every op. */
nxv_status nxv_qr(nxv_device *device, nxv_tensor *a, uint64_t batch, uint64_t m, uint64_t n,
                  bool complete, double eps, nxv_tensor **out_q, nxv_tensor **out_r);
/* Steps of the unshifted QR iteration of Nx.BinaryBackend's eigh on each
 * of batch dense n x n matrices of a, with the matching matrices of q (a
 * and q f32 or f64, of one type, batch * n * n elements each; q NULL:
 * each symmetric A first reduced to tridiagonal form as that eigh does,
 * by the Householder reflections of columns 0 .. n - 3 below their
 * subdiagonal, the identity where the squares below the subdiagonal
 * entry sum under eps, entries under eps in magnitude then zero, and Q
 * starting as the product of those reflections): each step
 * {Q', R} = qr(A) as nxv_qr computes it (square: columns 0 .. n - 2
 * reflected; entries of magnitude at most eps zero), then A <- R Q' and
 * Q <- Q Q'; a matrix stops after the step that moved every entry of Q by
 * at most eps (NaN counts as not moved), all after max_iter steps (at
 * least one). Computed in a's type. Two new dense tensors, the final A
 * and Q. A workgroup per matrix, the steps split over dispatches (on CPU
 * devices as llvmpipe ends long loops; on GPUs about 50 steps a dispatch
 * at order 64, 570 at order 8), a stopped matrix returning at once. n is at
 * most 64, max_iter at most NXV_EIGH_MAX_ITER (the steps are all
 * issued up front: a larger bound would issue that many for matrices long
 * stopped) and batch below 2^32, else NXV_ERR_UNSUPPORTED or
 * NXV_ERR_INVALID_ARGUMENT. a and q are retained until the work
 * completes; the outputs are new. Thread-safe, as every op. */
#define NXV_EIGH_MAX_ITER 65536
nxv_status nxv_eigh_iterate(nxv_device *device, nxv_tensor *a, nxv_tensor *q, uint64_t batch,
                            uint64_t n, uint64_t max_iter, double eps, nxv_tensor **out_a,
                            nxv_tensor **out_q);
/* True when nxv_cholesky, nxv_triangular_solve, nxv_lu and nxv_qr run on
 * dtype (f32, or f64 on devices with shaderFloat64; workgroups of 256
 * invocations and 29 KiB of shared memory). */
bool nxv_linalg_supported(nxv_device *device, nxv_dtype dtype);
/* The largest order nxv_cholesky takes (a matrix's elements are indexed
 * in 32 bits). */
#define NXV_CHOLESKY_MAX_ORDER 65535

/* True when the device has a kernel for op on dtype. */
bool nxv_binary_supported(nxv_device *device, nxv_binary_op op,
                          nxv_dtype dtype);
bool nxv_unary_supported(nxv_device *device, nxv_unary_op op,
                         nxv_dtype dtype);
/* True when nxv_compare (on operands of dtype) and nxv_select (choosing
 * between values of dtype) have kernels for dtype on the device. */
bool nxv_mask_type_supported(nxv_device *device, nxv_dtype dtype);
/* True when nxv_compare has a kernel for op on operands of dtype. */
bool nxv_compare_supported(nxv_device *device, nxv_compare_op op, nxv_dtype dtype);
/* True when nxv_convert to and from dtype, and strided copies of it, have
 * kernels on the device. */
bool nxv_convert_supported(nxv_device *device, nxv_dtype dtype);

#ifdef __cplusplus
}
#endif

#endif /* NXV_H */
