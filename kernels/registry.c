#include "kernels/registry.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/spv_prune.h"
#include "sched/scheduler.h"
#include "sched/status.h"

#define SLOTS (NXV_REGISTRY_OPS * NXV_REGISTRY_VARIANTS)
/* Open-addressing table of program pipelines: twice the cap, a power of
 * two. */
#define PROGRAM_TABLE (2 * NXV_REGISTRY_PROGRAMS)
/* Bytes of a failed creation's message kept for its waiters. */
#define JOB_MSG 384
/* Stack of a worker thread: drivers compile pipelines on it, and threads
 * get 2 MiB by default where the stack limit is unlimited, against the
 * 8 MiB or more a main thread has. Reserved, touched only as used. */
#define WORKER_STACK (16u << 20)

typedef enum entry_state {
  ENTRY_EMPTY = 0,  /* never used: ends a probe */
  ENTRY_PENDING,    /* its pipeline is being created (job) */
  ENTRY_READY,      /* pipeline created */
  ENTRY_DEAD,       /* its creation failed: skipped by lookups, reusable */
} entry_state;

typedef struct job job;

typedef struct program_entry {
  VkPipeline pipeline;              /* owned once ENTRY_READY */
  job *job;                         /* ENTRY_PENDING: its creation (no
                                       reference: the job clears this
                                       before it finishes) */
  uint8_t state;                    /* entry_state */
  uint32_t module;                  /* nxv_spv_module */
  uint32_t nwords;
  uint32_t words[NXV_REGISTRY_PROGRAM_WORDS];
} program_entry;

/* One pipeline's creation. Shared by the threads that asked for it (a
 * reference each), the work queue while queued (one) and the worker that
 * runs it. Fields under the registry's mu unless noted. */
struct job {
  nxv_pending_pipeline base;        /* first: the scheduler's view */
  nxv_registry *r;                  /* not owned */
  atomic_uint refs;
  nxv_spv_module m;                 /* immutable from here */
  uint32_t op, variant;             /* slot jobs */
  int32_t entry;                    /* program jobs: index in r->programs;
                                       -1 for slot jobs */
  uint32_t nwords;                  /* program jobs: the words */
  uint32_t words[NXV_REGISTRY_PROGRAM_WORDS];
  atomic_bool done;                 /* set under mu with the results */
  nxv_status status;
  VkPipeline pipeline;              /* owned by the registry */
  char msg[JOB_MSG];                /* the failure's message */
  job *next;                        /* work queue link */
  job *next_pending;                /* r->pending link (slot jobs) */
};

struct nxv_registry {
  const nxv_vk *vk;                 /* not owned */
  VkPipelineCache cache;            /* not owned; internally synchronized */
  VkPipelineLayout layout;          /* owned */
  uint32_t wg_size;
  bool prune;                       /* nxv_spv_prune each pipeline's module */
  bool serial;                      /* vkCreateComputePipelines under create_mu */
  pthread_mutex_t create_mu;        /* one creation at a time when serial */
  pthread_mutex_t mu;               /* guards jobs, programs, the queue */
  pthread_cond_t work_cv;           /* wakes workers */
  pthread_cond_t done_cv;           /* a job finished */
  _Atomic(VkShaderModule) modules[NXV_SPV_COUNT]; /* owned, lazily */
  _Atomic(VkPipeline) pipelines[NXV_SPV_COUNT][SLOTS]; /* owned, lazily */
  program_entry *programs;          /* owned, PROGRAM_TABLE entries; under mu */
  uint32_t nprograms;               /* entries pending or ready; under mu */
  job *pending;                     /* slot jobs queued or running */
  job *queue_head, *queue_tail;     /* jobs for the workers, FIFO */
  bool stop;                        /* workers exit (destroy) */
  pthread_t *threads;               /* owned, nthreads */
  uint32_t nthreads;
  atomic_uint_fast64_t hits, misses, disk_hits, created, pruned;
  atomic_uint_fast64_t programs_created; /* program pipelines created */
  atomic_bool inject;               /* the next creation fails (test hook) */
  atomic_uint creating;             /* vkCreateComputePipelines calls under way */
  atomic_uint max_creating;         /* the most of them at once */
};

/* Modules whose kernels assume a fixed workgroup size (0: none). */
static uint32_t fixed_wg(nxv_spv_module m, uint32_t variant) {
  if (m >= NXV_SPV_MATMUL_S8 && m <= NXV_SPV_MATMUL_C128) return 256;
  if (m >= NXV_SPV_GEMM_F16 && m <= NXV_SPV_GEMM_F32)
    return (variant & 3u) == 0 || (variant & 3u) == 3 ? 256 : 64; /* gemm.comp's SHAPE */
  if (m == NXV_SPV_COOPMAT_F16 || m == NXV_SPV_COOPMAT_F16_KHR || m == NXV_SPV_COOPMAT_BF16)
    return NXV_COOPMAT_THREADS;
  if (m >= NXV_SPV_TRANSPOSE_16 && m <= NXV_SPV_TRANSPOSE_64) return 256;
  if (m == NXV_SPV_CHOLESKY_F32 || m == NXV_SPV_CHOLESKY_F64 || m == NXV_SPV_TRSM_F32 ||
      m == NXV_SPV_TRSM_F64 || m == NXV_SPV_TRSM_F32_WIDE || m == NXV_SPV_LU_F32 ||
      m == NXV_SPV_LU_F64 || m == NXV_SPV_LU_F32_WIDE || m == NXV_SPV_QR_F32 ||
      m == NXV_SPV_QR_F64 || m == NXV_SPV_QR_F32_WIDE)
    return 256;
  /* The tiled elementwise variants (tile2d.glsl). */
  if (m >= NXV_SPV_BINARY_S8 && m <= NXV_SPV_BINARY_C128 && (variant == 2 || variant == 4)) return 256;
  if (m >= NXV_SPV_UNARY_S8_S8 && m <= NXV_SPV_UNARY_C64_F32_PRECISE && (variant == 3 || variant == 4))
    return 256;
  return 0;
}

static void *worker_main(void *arg);

nxv_status nxv_registry_create(const nxv_vk *vk, VkPipelineCache cache, bool prune,
                               uint32_t threads, bool serial, nxv_registry **out) {
  if (threads > NXV_REGISTRY_MAX_THREADS)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "kernel registry: %u pipeline threads (at most %d)", threads,
                    NXV_REGISTRY_MAX_THREADS);
  nxv_registry *r = calloc(1, sizeof *r);
  if (!r) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "kernel registry");
  r->vk = vk;
  r->cache = cache;
  r->prune = prune;
  r->serial = serial;
  uint32_t limit = vk->info.max_workgroup_invocations;
  if (vk->info.max_workgroup_size[0] < limit) limit = vk->info.max_workgroup_size[0];
  r->wg_size = 256;
  while (r->wg_size > limit) r->wg_size >>= 1;
  uint32_t pc = vk->info.max_push_constants_size;
  if (pc > NXV_PUSH_CONSTANTS_MAX) pc = NXV_PUSH_CONSTANTS_MAX;
  VkPushConstantRange range = {VK_SHADER_STAGE_COMPUTE_BIT, 0, pc};
  VkPipelineLayoutCreateInfo li = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
      .pushConstantRangeCount = 1,
      .pPushConstantRanges = &range};
  VkResult res = vkCreatePipelineLayout(vk->device, &li, NULL, &r->layout);
  if (res != VK_SUCCESS) {
    free(r);
    return nxv_fail_vk(res, "vkCreatePipelineLayout");
  }
  r->programs = calloc(PROGRAM_TABLE, sizeof *r->programs);
  r->threads = threads ? calloc(threads, sizeof *r->threads) : NULL;
  if (!r->programs || (threads && !r->threads)) {
    free(r->programs);
    free(r->threads);
    vkDestroyPipelineLayout(vk->device, r->layout, NULL);
    free(r);
    return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "kernel registry programs");
  }
  pthread_mutex_init(&r->mu, NULL);
  pthread_mutex_init(&r->create_mu, NULL);
  pthread_cond_init(&r->work_cv, NULL);
  pthread_cond_init(&r->done_cv, NULL);
  pthread_attr_t attr;
  bool attr_ok = threads && pthread_attr_init(&attr) == 0;
  if (attr_ok) pthread_attr_setstacksize(&attr, WORKER_STACK); /* else the default */
  for (uint32_t i = 0; i < threads; i++) {
    int e = pthread_create(&r->threads[i], attr_ok ? &attr : NULL, worker_main, r);
    if (e != 0) {
      if (attr_ok) pthread_attr_destroy(&attr);
      nxv_registry_destroy(r); /* joins the r->nthreads started */
      return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY,
                      "kernel registry: starting pipeline thread %u of %u failed (error %d)",
                      i + 1, threads, e);
    }
    (void)pthread_setname_np(r->threads[i], "nxv-pipeline");
    r->nthreads = i + 1;
  }
  if (attr_ok) pthread_attr_destroy(&attr);
  *out = r;
  return NXV_OK;
}

static void job_release(job *j) {
  if (atomic_fetch_sub_explicit(&j->refs, 1, memory_order_acq_rel) == 1) free(j);
}

/* Records j's result (under mu): publishes the pipeline, or frees its
 * place, and wakes its waiters. */
static void job_finish_locked(nxv_registry *r, job *j, nxv_status st, VkPipeline p,
                              const char *msg) {
  j->status = st;
  j->pipeline = p;
  if (st != NXV_OK) snprintf(j->msg, sizeof j->msg, "%s", msg);
  if (j->entry < 0) {
    if (st == NXV_OK)
      atomic_store_explicit(&r->pipelines[j->m][j->op * NXV_REGISTRY_VARIANTS + j->variant],
                            p, memory_order_release);
    for (job **q = &r->pending; *q; q = &(*q)->next_pending)
      if (*q == j) {
        *q = j->next_pending;
        break;
      }
  } else {
    program_entry *e = &r->programs[j->entry];
    e->job = NULL;
    if (st == NXV_OK) {
      e->pipeline = p;
      e->state = ENTRY_READY;
      atomic_fetch_add(&r->programs_created, 1);
    } else {
      e->state = ENTRY_DEAD;
      r->nprograms--;
    }
  }
  atomic_store(&j->done, true);
  pthread_cond_broadcast(&r->done_cv);
}

void nxv_registry_destroy(nxv_registry *r) {
  if (!r) return;
  pthread_mutex_lock(&r->mu);
  r->stop = true;
  pthread_cond_broadcast(&r->work_cv);
  pthread_mutex_unlock(&r->mu);
  for (uint32_t i = 0; i < r->nthreads; i++) pthread_join(r->threads[i], NULL);
  /* Queued jobs nobody ran: their waiters (if any still hold one) fail. */
  pthread_mutex_lock(&r->mu);
  while (r->queue_head) {
    job *j = r->queue_head;
    r->queue_head = j->next;
    job_finish_locked(r, j, NXV_ERR_VULKAN, VK_NULL_HANDLE,
                      "the kernel registry was destroyed before the pipeline was created");
    job_release(j);
  }
  pthread_mutex_unlock(&r->mu);
  VkDevice dev = r->vk->device;
  for (int m = 0; m < NXV_SPV_COUNT; m++) {
    for (int i = 0; i < SLOTS; i++) {
      VkPipeline p = atomic_load(&r->pipelines[m][i]);
      if (p) vkDestroyPipeline(dev, p, NULL);
    }
    VkShaderModule sm = atomic_load(&r->modules[m]);
    if (sm) vkDestroyShaderModule(dev, sm, NULL);
  }
  for (int i = 0; i < PROGRAM_TABLE; i++)
    if (r->programs[i].state == ENTRY_READY)
      vkDestroyPipeline(dev, r->programs[i].pipeline, NULL);
  free(r->programs);
  free(r->threads);
  vkDestroyPipelineLayout(dev, r->layout, NULL);
  pthread_cond_destroy(&r->done_cv);
  pthread_cond_destroy(&r->work_cv);
  pthread_mutex_destroy(&r->create_mu);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

VkPipelineLayout nxv_registry_layout(nxv_registry *r) { return r->layout; }
uint32_t nxv_registry_workgroup_size(nxv_registry *r) { return r->wg_size; }

/* The whole module m, created on first use; concurrent first uses each
 * create one and all but the first to publish destroy theirs. */
static nxv_status shared_module(nxv_registry *r, nxv_spv_module m, VkShaderModule *out) {
  VkShaderModule sm = atomic_load_explicit(&r->modules[m], memory_order_acquire);
  if (!sm) {
    VkShaderModuleCreateInfo mi = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = nxv_spv_size[m],
        .pCode = nxv_spv_code[m]};
    VkResult res = vkCreateShaderModule(r->vk->device, &mi, NULL, &sm);
    if (res != VK_SUCCESS)
      return nxv_fail(nxv_status_from_vk(res), "vkCreateShaderModule(%s) failed: %s",
                      nxv_spv_name[m], nxv_vk_result_name(res));
    VkShaderModule none = VK_NULL_HANDLE;
    if (!atomic_compare_exchange_strong(&r->modules[m], &none, sm)) {
      vkDestroyShaderModule(r->vk->device, sm, NULL);
      sm = none;
    }
  }
  *out = sm;
  return NXV_OK;
}

/* Creates the pipeline of module m with specialization constants 0 (the
 * workgroup size), 1 op, 2 variant and 3 .. 2 + nextra the words extra.
 * Holds no lock: runs on several threads at once. */
static nxv_status create_pipeline(nxv_registry *r, nxv_spv_module m, uint32_t op,
                                  uint32_t variant, const uint32_t *extra,
                                  uint32_t nextra, VkPipeline *out) {
  VkDevice dev = r->vk->device;
  uint32_t wg = fixed_wg(m, variant) ? fixed_wg(m, variant) : r->wg_size;
  uint32_t data[3 + NXV_REGISTRY_PROGRAM_WORDS] = {wg, op, variant};
  VkSpecializationMapEntry entries[3 + NXV_REGISTRY_PROGRAM_WORDS];
  nxv_spv_spec specs[3 + NXV_REGISTRY_PROGRAM_WORDS];
  uint32_t count = 3 + nextra;
  for (uint32_t i = 0; i < nextra; i++) data[3 + i] = extra[i];
  for (uint32_t i = 0; i < count; i++) {
    entries[i] = (VkSpecializationMapEntry){i, 4 * i, 4};
    specs[i] = (nxv_spv_spec){i, data[i]};
  }
  VkSpecializationInfo spec = {count, entries, 4 * count, data};
  /* The module pruned for these constants, when that removes anything. */
  VkShaderModule own = VK_NULL_HANDLE, module = VK_NULL_HANDLE;
  if (r->prune) {
    uint32_t *words = NULL;
    size_t nwords = 0;
    NXV_TRY(nxv_spv_prune(nxv_spv_code[m], nxv_spv_size[m] / 4, specs, count, &words,
                          &nwords));
    if (words) {
      VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                     .codeSize = nwords * 4,
                                     .pCode = words};
      VkResult res = vkCreateShaderModule(dev, &mi, NULL, &own);
      free(words);
      if (res != VK_SUCCESS)
        return nxv_fail(nxv_status_from_vk(res),
                        "vkCreateShaderModule(%s pruned, op %u, variant %u) failed: %s",
                        nxv_spv_name[m], op, variant, nxv_vk_result_name(res));
      module = own;
    }
  }
  if (!module) NXV_TRY(shared_module(r, m, &module));
  VkPipelineCreationFeedback fb = {0}, stage_fb = {0};
  VkPipelineCreationFeedbackCreateInfo fbi = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO,
      .pPipelineCreationFeedback = &fb,
      .pipelineStageCreationFeedbackCount = 1,
      .pPipelineStageCreationFeedbacks = &stage_fb};
  VkComputePipelineCreateInfo ci = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .pNext = r->vk->has_feedback ? &fbi : NULL,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = module,
                .pName = "main",
                .pSpecializationInfo = &spec},
      .layout = r->layout};
  VkPipeline p = VK_NULL_HANDLE;
  bool injected = atomic_exchange(&r->inject, false);
  if (r->serial) pthread_mutex_lock(&r->create_mu);
  unsigned now = atomic_fetch_add(&r->creating, 1) + 1;
  unsigned most = atomic_load(&r->max_creating);
  while (now > most && !atomic_compare_exchange_weak(&r->max_creating, &most, now)) {
  }
  VkResult res = injected ? VK_ERROR_OUT_OF_DEVICE_MEMORY
                          : vkCreateComputePipelines(dev, r->cache, 1, &ci, NULL, &p);
  atomic_fetch_sub(&r->creating, 1);
  if (r->serial) pthread_mutex_unlock(&r->create_mu);
  if (own) {
    vkDestroyShaderModule(dev, own, NULL);
    if (res == VK_SUCCESS) atomic_fetch_add(&r->pruned, 1);
  }
  if (res != VK_SUCCESS)
    return nxv_fail(nxv_status_from_vk(res),
                    "vkCreateComputePipelines(%s, op %u, variant %u) failed: %s%s",
                    nxv_spv_name[m], op, variant, nxv_vk_result_name(res),
                    injected ? " (injected fault)" : "");
  if ((fb.flags & VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT) &&
      (fb.flags &
       VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT))
    atomic_fetch_add(&r->disk_hits, 1);
  atomic_fetch_add(&r->created, 1);
  *out = p;
  return NXV_OK;
}

/* Creates j's pipeline on the calling thread and records the result. */
static void job_run(job *j) {
  nxv_registry *r = j->r;
  VkPipeline p = VK_NULL_HANDLE;
  nxv_status st = j->entry < 0
                      ? create_pipeline(r, j->m, j->op, j->variant, NULL, 0, &p)
                      : create_pipeline(r, j->m, 0, 0, j->words, j->nwords, &p);
  pthread_mutex_lock(&r->mu);
  job_finish_locked(r, j, st, p, st == NXV_OK ? "" : nxv_last_error());
  pthread_mutex_unlock(&r->mu);
}

static void *worker_main(void *arg) {
  nxv_registry *r = arg;
  pthread_mutex_lock(&r->mu);
  for (;;) {
    while (!r->queue_head && !r->stop) pthread_cond_wait(&r->work_cv, &r->mu);
    if (r->stop) break; /* destroy fails what is still queued */
    job *j = r->queue_head;
    r->queue_head = j->next;
    if (!r->queue_head) r->queue_tail = NULL;
    pthread_mutex_unlock(&r->mu);
    job_run(j);
    job_release(j); /* the queue's reference */
    pthread_mutex_lock(&r->mu);
  }
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

/* nxv_pending_pipeline's functions for a job. */
static bool job_done(nxv_pending_pipeline *p) {
  return atomic_load(&((job *)p)->done);
}

static nxv_status job_wait(nxv_pending_pipeline *p, VkPipeline *out) {
  job *j = (job *)p;
  nxv_registry *r = j->r;
  pthread_mutex_lock(&r->mu);
  while (!atomic_load(&j->done)) pthread_cond_wait(&r->done_cv, &r->mu);
  nxv_status st = j->status;
  VkPipeline pipeline = j->pipeline;
  pthread_mutex_unlock(&r->mu);
  if (st != NXV_OK) return nxv_fail(st, "%s", j->msg);
  *out = pipeline;
  return NXV_OK;
}

static void job_release_pending(nxv_pending_pipeline *p) { job_release((job *)p); }

/* A new job (under mu) with one reference for the caller and, when the
 * registry has workers, one for the queue it joins. NULL: out of memory. */
static job *job_new_locked(nxv_registry *r, nxv_spv_module m, uint32_t op,
                           uint32_t variant, int32_t entry, const uint32_t *words,
                           uint32_t nwords) {
  job *j = calloc(1, sizeof *j);
  if (!j) return NULL;
  j->base = (nxv_pending_pipeline){job_done, job_wait, job_release_pending};
  j->r = r;
  j->m = m;
  j->op = op;
  j->variant = variant;
  j->entry = entry;
  j->nwords = nwords;
  if (nwords) memcpy(j->words, words, nwords * sizeof *words);
  atomic_init(&j->done, false);
  atomic_init(&j->refs, r->nthreads ? 2u : 1u);
  atomic_fetch_add(&r->misses, 1);
  if (r->nthreads) {
    if (r->queue_tail) r->queue_tail->next = j;
    else r->queue_head = j;
    r->queue_tail = j;
    pthread_cond_signal(&r->work_cv);
  }
  return j;
}

/* The end of the *_start functions once j (one reference, the caller's)
 * stands for the pipeline: without workers, a new job (fresh) runs here,
 * and the caller waits for a joined one, so that nothing is left pending
 * and a failure is this call's. */
static nxv_status job_hand_over(nxv_registry *r, job *j, bool fresh, VkPipeline *out,
                                nxv_pending_pipeline **out_pending) {
  if (r->nthreads) {
    *out = VK_NULL_HANDLE;
    *out_pending = &j->base;
    return NXV_OK;
  }
  if (fresh) job_run(j);
  nxv_status st = job_wait(&j->base, out);
  job_release(j);
  *out_pending = NULL;
  return st;
}

nxv_status nxv_registry_pipeline_start(nxv_registry *r, nxv_spv_module m, uint32_t op,
                                       uint32_t variant, VkPipeline *out,
                                       nxv_pending_pipeline **out_pending) {
  *out_pending = NULL;
  if ((unsigned)m >= NXV_SPV_COUNT || op >= NXV_REGISTRY_OPS ||
      variant >= NXV_REGISTRY_VARIANTS)
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "no kernel slot for module %d op %u variant %u", (int)m,
                    op, variant);
  _Atomic(VkPipeline) *slot = &r->pipelines[m][op * NXV_REGISTRY_VARIANTS + variant];
  VkPipeline p = atomic_load_explicit(slot, memory_order_acquire);
  if (p) {
    atomic_fetch_add_explicit(&r->hits, 1, memory_order_relaxed);
    *out = p;
    return NXV_OK;
  }
  pthread_mutex_lock(&r->mu);
  p = atomic_load_explicit(slot, memory_order_acquire);
  if (p) {
    pthread_mutex_unlock(&r->mu);
    atomic_fetch_add_explicit(&r->hits, 1, memory_order_relaxed);
    *out = p;
    return NXV_OK;
  }
  job *j = r->pending;
  while (j && !(j->m == m && j->op == op && j->variant == variant)) j = j->next_pending;
  bool fresh = j == NULL;
  if (j) {
    atomic_fetch_add(&j->refs, 1);
    atomic_fetch_add_explicit(&r->hits, 1, memory_order_relaxed);
  } else {
    j = job_new_locked(r, m, op, variant, -1, NULL, 0);
    if (!j) {
      pthread_mutex_unlock(&r->mu);
      return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "pipeline creation job");
    }
    j->next_pending = r->pending;
    r->pending = j;
  }
  pthread_mutex_unlock(&r->mu);
  return job_hand_over(r, j, fresh, out, out_pending);
}

/* The synchronous end of a *_start call that returned st: waits for what
 * it left pending, if anything, and drops it. */
static nxv_status await_start(nxv_status st, nxv_pending_pipeline *pending, VkPipeline *out) {
  if (st != NXV_OK || !pending) return st;
  st = pending->wait(pending, out);
  pending->release(pending);
  return st;
}

nxv_status nxv_registry_pipeline(nxv_registry *r, nxv_spv_module m, uint32_t op,
                                 uint32_t variant, VkPipeline *out) {
  nxv_pending_pipeline *pending;
  nxv_status st = nxv_registry_pipeline_start(r, m, op, variant, out, &pending);
  return await_start(st, pending, out);
}

/* FNV-1a over the module and the words. */
static uint32_t program_hash(nxv_spv_module m, const uint32_t *words, uint32_t n) {
  uint32_t h = 2166136261u ^ (uint32_t)m;
  h *= 16777619u;
  for (uint32_t i = 0; i < n; i++) {
    h ^= words[i];
    h *= 16777619u;
  }
  return h;
}

nxv_status nxv_registry_program_start(nxv_registry *r, nxv_spv_module m,
                                      const uint32_t *words, uint32_t nwords,
                                      VkPipeline *out,
                                      nxv_pending_pipeline **out_pending) {
  *out_pending = NULL;
  if ((unsigned)m >= NXV_SPV_COUNT || nwords > NXV_REGISTRY_PROGRAM_WORDS ||
      (nwords && !words))
    return nxv_fail(NXV_ERR_INVALID_ARGUMENT,
                    "no program pipeline for module %d with %u words", (int)m, nwords);
  uint32_t i = program_hash(m, words, nwords) & (PROGRAM_TABLE - 1);
  int32_t free_at = -1; /* the first dead entry of the probe */
  pthread_mutex_lock(&r->mu);
  /* Failed creations leave dead entries that only a later insertion
   * reuses, so empty ones may run out: the probe stops after a full turn.
   * At most NXV_REGISTRY_PROGRAMS entries are live in a table twice that
   * size, so a full turn has passed a dead entry if no empty one. */
  for (uint32_t probed = 0; probed < PROGRAM_TABLE;
       probed++, i = (i + 1) & (PROGRAM_TABLE - 1)) {
    program_entry *e = &r->programs[i];
    if (e->state == ENTRY_EMPTY) break;
    if (e->state == ENTRY_DEAD) {
      if (free_at < 0) free_at = (int32_t)i;
      continue;
    }
    if (e->module == (uint32_t)m && e->nwords == nwords &&
        memcmp(e->words, words, nwords * sizeof *words) == 0) {
      atomic_fetch_add_explicit(&r->hits, 1, memory_order_relaxed);
      if (e->state == ENTRY_READY) {
        *out = e->pipeline;
        pthread_mutex_unlock(&r->mu);
        return NXV_OK;
      }
      job *j = e->job;
      atomic_fetch_add(&j->refs, 1);
      pthread_mutex_unlock(&r->mu);
      return job_hand_over(r, j, false, out, out_pending);
    }
  }
  if (r->nprograms >= NXV_REGISTRY_PROGRAMS) {
    pthread_mutex_unlock(&r->mu);
    return nxv_fail(NXV_ERR_UNSUPPORTED, "%s: more than %d distinct programs on one device",
                    nxv_spv_name[m], NXV_REGISTRY_PROGRAMS);
  }
  if (free_at >= 0) i = (uint32_t)free_at;
  job *j = job_new_locked(r, m, 0, 0, (int32_t)i, words, nwords);
  if (!j) {
    pthread_mutex_unlock(&r->mu);
    return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "pipeline creation job");
  }
  program_entry *e = &r->programs[i];
  e->state = ENTRY_PENDING;
  e->job = j;
  e->module = (uint32_t)m;
  e->nwords = nwords;
  if (nwords) memcpy(e->words, words, nwords * sizeof *words);
  r->nprograms++;
  pthread_mutex_unlock(&r->mu);
  return job_hand_over(r, j, true, out, out_pending);
}

nxv_status nxv_registry_program(nxv_registry *r, nxv_spv_module m,
                                const uint32_t *words, uint32_t nwords,
                                VkPipeline *out) {
  nxv_pending_pipeline *pending;
  nxv_status st = nxv_registry_program_start(r, m, words, nwords, out, &pending);
  return await_start(st, pending, out);
}

void nxv_registry_inject_fault(nxv_registry *r) { atomic_store(&r->inject, true); }

uint32_t nxv_registry_max_concurrent_creations(nxv_registry *r) {
  return atomic_load(&r->max_creating);
}

void nxv_registry_stats(nxv_registry *r, nxv_stats *st) {
  st->pipeline_hits = atomic_load(&r->hits);
  st->pipeline_misses = atomic_load(&r->misses);
  st->pipeline_disk_hits = atomic_load(&r->disk_hits);
  st->pipelines = atomic_load(&r->created);
  st->pipelines_pruned = atomic_load(&r->pruned);
  st->program_pipelines = atomic_load(&r->programs_created);
}
