/*
 * defer.c - deferred elementwise results (see defer.h).
 *
 * A pending tensor's program is read or computed only by the thread that
 * moved its state from PENDING to BUSY; that thread puts it back to
 * PENDING (read, or computing failed) or to READY (computed: buf set, the
 * program freed). Threads that find it BUSY yield until it is not.
 */
#include "kernels/defer.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "sched/status.h"

#define MAX_IN NXV_FUSED_MAX_INPUTS
#define MAX_INS NXV_OPS_INTERP_MAX_INSTRS

struct nxv_pending {
  nxv_dtype type;                        /* of the result and every input */
  uint32_t rank;
  int64_t shape[NXV_MAX_RANK];           /* the result's shape */
  uint32_t ninputs, ninstrs;
  uint32_t imm_mask;                     /* bit k: input k is an immediate */
  nxv_tensor *in[MAX_IN];                /* READY inputs, one reference each;
                                            NULL for immediates */
  int64_t offset[MAX_IN];                /* element offset of each input */
  int64_t strides[MAX_IN][NXV_MAX_RANK]; /* over shape, 0 on broadcast axes */
  uint64_t imm[MAX_IN];                  /* an immediate's bits, low bytes */
  uint32_t program[MAX_INS];             /* NXV_FUSED_INSTR words */
};

/* A program under construction: operands refer to input k as k and to
 * instruction k as MAX_IN + k until the input count is known. */
typedef struct builder {
  nxv_pending *p;                        /* inputs as they will be kept */
  nxv_tensor *taken[2];                  /* operands whose programs were
                                            taken in (borrowed) */
  uint32_t ntaken;
  uint32_t cls[MAX_INS], op[MAX_INS], a[MAX_INS], b[MAX_INS], c[MAX_INS];
} builder;

void nxv_defer_discard(nxv_pending *p) {
  if (!p) return;
  for (uint32_t k = 0; k < p->ninputs; k++) nxv_tensor_release(p->in[k]);
  free(p);
}

/* Row-major strides of shape, 0 on size-1 axes (as views resolve them). */
static void dense_strides(uint32_t rank, const int64_t *shape, int64_t *out) {
  int64_t s = 1;
  for (int i = (int)rank - 1; i >= 0; i--) {
    out[i] = shape[i] == 1 ? 0 : s;
    s *= shape[i];
  }
}

static bool same_strides(uint32_t rank, const int64_t *x, const int64_t *y) {
  return rank == 0 || memcmp(x, y, rank * sizeof *x) == 0;
}

/* The index of an input equal to (t, offset, strides) or to the immediate
 * bits (t NULL), adding it (and a reference to t) if there is none; false
 * when the program has no room for it. */
static bool add_input(builder *bd, nxv_tensor *t, int64_t offset, const int64_t *strides,
                      uint64_t bits, uint32_t *out_ref) {
  nxv_pending *p = bd->p;
  for (uint32_t k = 0; k < p->ninputs; k++) {
    if (p->in[k] != t) continue;
    if (t ? p->offset[k] == offset && same_strides(p->rank, p->strides[k], strides)
          : p->imm[k] == bits) {
      *out_ref = k;
      return true;
    }
  }
  if (p->ninputs == MAX_IN) return false;
  uint32_t k = p->ninputs++;
  p->in[k] = t;
  if (t) {
    nxv_tensor_retain(t);
    p->offset[k] = offset;
    memcpy(p->strides[k], strides, p->rank * sizeof *strides);
  } else {
    p->imm_mask |= 1u << k;
    p->imm[k] = bits;
  }
  *out_ref = k;
  return true;
}

/* Takes q's program (a pending tensor's, its state held BUSY by this
 * thread) into bd when the consumer reads it element for element (view
 * strides vs over bd's shape, offset 0) and it fits, leaving room for
 * `reserve` more inputs and the consumer's instruction; *out_ref names its
 * result. False, with bd unchanged, when it cannot be taken in. */
static bool take_in(builder *bd, const nxv_pending *q, int64_t offset, const int64_t *vs,
                    uint32_t reserve, uint32_t *out_ref) {
  nxv_pending *p = bd->p;
  int64_t dense[NXV_MAX_RANK];
  dense_strides(p->rank, p->shape, dense);
  if (offset != 0 || !same_strides(p->rank, vs, dense)) return false;
  if (p->ninputs + q->ninputs + reserve > MAX_IN || p->ninstrs + q->ninstrs + 1 > MAX_INS)
    return false;
  /* q's inputs over bd's shape: as they are when the shapes agree; else
   * only broadcast scalars and dense inputs carry over (a reshape). */
  bool same_shape = q->rank == p->rank &&
                    (p->rank == 0 || memcmp(q->shape, p->shape, p->rank * sizeof *p->shape) == 0);
  int64_t qdense[NXV_MAX_RANK], zero[NXV_MAX_RANK] = {0};
  dense_strides(q->rank, q->shape, qdense);
  const int64_t *in_strides[MAX_IN];
  for (uint32_t k = 0; k < q->ninputs; k++) {
    in_strides[k] = q->strides[k];
    if (!q->in[k] || same_shape) continue;
    if (same_strides(q->rank, q->strides[k], zero)) in_strides[k] = zero;
    else if (same_strides(q->rank, q->strides[k], qdense)) in_strides[k] = dense;
    else return false;
  }
  uint32_t map[MAX_IN + MAX_INS];
  for (uint32_t k = 0; k < q->ninputs; k++) {
    bool ok = add_input(bd, q->in[k], q->in[k] ? q->offset[k] : 0, in_strides[k], q->imm[k],
                        &map[k]);
    (void)ok; /* room was checked above */
  }
  uint32_t base = p->ninstrs;
  for (uint32_t k = 0; k < q->ninstrs; k++) {
    uint32_t w = q->program[k], i = base + k;
    uint32_t regs[3] = {NXV_FUSED_A(w), NXV_FUSED_B(w), NXV_FUSED_C(w)};
    uint32_t cls = NXV_FUSED_CLASS(w);
    int nops = cls == NXV_FUSED_UNARY ? 1 : cls == NXV_FUSED_SELECT ? 3 : 2;
    uint32_t ref[3] = {0, 0, 0};
    for (int o = 0; o < nops; o++)
      ref[o] = regs[o] < q->ninputs ? map[regs[o]] : MAX_IN + base + (regs[o] - q->ninputs);
    bd->cls[i] = cls;
    bd->op[i] = NXV_FUSED_OP(w);
    bd->a[i] = ref[0];
    bd->b[i] = ref[1];
    bd->c[i] = ref[2];
  }
  p->ninstrs += q->ninstrs;
  *out_ref = MAX_IN + p->ninstrs - 1;
  return true;
}

/* Adds operand v (resolved strides vs) to bd: a READY tensor as an input, a
 * pending one's program taken in where it can be, else computed first and
 * read as an input. */
static nxv_status add_operand(builder *bd, const nxv_view *v, const int64_t *vs,
                              uint32_t reserve, uint32_t *out_ref) {
  nxv_tensor *t = v->tensor;
  for (;;) {
    int s = atomic_load_explicit(&t->state, memory_order_acquire);
    if (s == NXV_TENSOR_READY) break;
    if (s == NXV_TENSOR_PENDING) {
      int expected = NXV_TENSOR_PENDING;
      if (!atomic_compare_exchange_strong_explicit(&t->state, &expected, NXV_TENSOR_BUSY,
                                                   memory_order_acquire,
                                                   memory_order_relaxed))
        continue;
      bool taken = take_in(bd, t->pending, v->offset, vs, reserve, out_ref);
      atomic_store_explicit(&t->state, NXV_TENSOR_PENDING, memory_order_release);
      if (taken) {
        bd->taken[bd->ntaken++] = t;
        return NXV_OK;
      }
      NXV_TRY(nxv_tensor_ready(t));
      break;
    }
    sched_yield(); /* BUSY: another thread reads or computes it */
  }
  if (!add_input(bd, t, v->offset, vs, 0, out_ref))
    return nxv_fail(NXV_ERR_UNSUPPORTED, "deferred op: program full");
  return NXV_OK;
}

static void try_compute(nxv_tensor *t);

/* Makes t the device's window and returns the previous one with a
 * reference of the caller's, or NULL (none, or its last release is under
 * way: it is leaving the window). */
static nxv_tensor *window_swap(nxv_device *d, nxv_tensor *t) {
  pthread_mutex_lock(&d->defer_mu);
  nxv_tensor *prev = atomic_exchange_explicit(&d->defer_window, t, memory_order_relaxed);
  if (prev) {
    unsigned r = atomic_load_explicit(&prev->refs, memory_order_relaxed);
    while (r && !atomic_compare_exchange_weak_explicit(&prev->refs, &r, r + 1,
                                                       memory_order_relaxed,
                                                       memory_order_relaxed)) {
    }
    if (!r) prev = NULL;
  }
  pthread_mutex_unlock(&d->defer_mu);
  return prev;
}

nxv_status nxv_defer_op(nxv_device *d, uint32_t cls, uint32_t op, nxv_dtype t,
                        uint32_t rank, const int64_t *shape, uint32_t nops,
                        const nxv_view *const operands[], const void *imm,
                        bool *out_deferred, nxv_tensor **out) {
  *out_deferred = false;
  if (!d->config.defer_elementwise || !nxv_ops_fused_basic(cls, op)) return NXV_OK;
  if (t != NXV_F16 && t != NXV_BF16 && t != NXV_F32 && t != NXV_F64) return NXV_OK;
  uint64_t n;
  /* Invalid or empty: the op reports or handles it. */
  if (nxv_ops_check_shape(rank, shape, &n) != NXV_OK || n == 0) return NXV_OK;
  for (uint32_t o = 0; o < nops; o++)
    if (operands[o] && (!operands[o]->tensor || operands[o]->tensor->dtype != t))
      return NXV_OK; /* the op reports it */
  NXV_TRY(nxv_device_check(d));
  int64_t vs[2][NXV_MAX_RANK];
  static const char *const names[2] = {"operand a", "operand b"};
  for (uint32_t o = 0; o < nops; o++)
    if (operands[o])
      NXV_TRY(nxv_ops_view_strides(d, names[o], operands[o], rank, shape, n, vs[o]));
  builder bd;
  bd.ntaken = 0;
  bd.p = calloc(1, sizeof *bd.p);
  if (!bd.p) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "deferred op");
  nxv_pending *p = bd.p;
  p->type = t;
  p->rank = rank;
  if (rank) memcpy(p->shape, shape, rank * sizeof *shape);
  uint32_t ref[2] = {0, 0};
  size_t es = nxv_dtype_size(t);
  for (uint32_t o = 0; o < nops; o++) {
    uint32_t reserve = nops - 1 - o;
    nxv_status st = NXV_OK;
    if (operands[o]) {
      st = add_operand(&bd, operands[o], vs[o], reserve, &ref[o]);
    } else {
      uint64_t bits = 0;
      memcpy(&bits, imm, es);
      if (!add_input(&bd, NULL, 0, NULL, bits, &ref[o]))
        st = nxv_fail(NXV_ERR_UNSUPPORTED, "deferred op: program full");
    }
    if (st != NXV_OK) {
      nxv_defer_discard(p);
      return st;
    }
  }
  uint32_t i = p->ninstrs++;
  bd.cls[i] = cls;
  bd.op[i] = op;
  bd.a[i] = ref[0];
  bd.b[i] = nops > 1 ? ref[1] : 0;
  bd.c[i] = 0;
  /* Registers: inputs first, then one per instruction. */
  for (uint32_t k = 0; k < p->ninstrs; k++) {
    int nk = bd.cls[k] == NXV_FUSED_UNARY ? 1 : bd.cls[k] == NXV_FUSED_SELECT ? 3 : 2;
    uint32_t r[3] = {bd.a[k], bd.b[k], bd.c[k]};
    for (int o = 0; o < 3; o++)
      r[o] = o >= nk ? 0 : r[o] < MAX_IN ? r[o] : p->ninputs + (r[o] - MAX_IN);
    p->program[k] = NXV_FUSED_INSTR(bd.cls[k], bd.op[k], r[0], r[1], r[2]);
  }
  nxv_tensor *res = calloc(1, sizeof *res);
  if (!res) {
    nxv_defer_discard(p);
    return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "tensor handle");
  }
  atomic_init(&res->refs, 1);
  atomic_init(&res->state, NXV_TENSOR_PENDING);
  res->device = d;
  res->pending = p;
  res->deferred = true;
  res->dtype = t;
  res->count = n;
  nxv_device_retain(d);
  atomic_fetch_add_explicit(&d->deferred_ops, 1, memory_order_relaxed);
  /* The window's previous result, unless this op took it in, is computed
   * now; then res takes its place. A result another thread put there
   * meanwhile is computed too. Failures leave them deferred: their readers
   * report them. */
  nxv_tensor *prev = window_swap(d, NULL);
  if (prev) {
    bool taken = false;
    for (uint32_t k = 0; k < bd.ntaken; k++) taken |= bd.taken[k] == prev;
    if (!taken) try_compute(prev);
    nxv_tensor_release(prev);
  }
  prev = window_swap(d, res);
  if (prev) {
    try_compute(prev);
    nxv_tensor_release(prev);
  }
  *out = res;
  *out_deferred = true;
  return NXV_OK;
}

void nxv_defer_flush(nxv_device *d) {
  if (!atomic_load_explicit(&d->defer_window, memory_order_relaxed)) return;
  nxv_tensor *prev = window_swap(d, NULL);
  if (prev) {
    try_compute(prev);
    nxv_tensor_release(prev);
  }
}

void nxv_defer_forget(nxv_tensor *t) {
  nxv_device *d = t->device;
  pthread_mutex_lock(&d->defer_mu);
  nxv_tensor *expected = t;
  atomic_compare_exchange_strong_explicit(&d->defer_window, &expected, NULL,
                                          memory_order_relaxed, memory_order_relaxed);
  pthread_mutex_unlock(&d->defer_mu);
  if (t->pending) nxv_defer_discard(t->pending); /* never computed */
}

/* Input k of p as a view (no tensor for an immediate). */
static nxv_view input_view(const nxv_pending *p, uint32_t k) {
  return (nxv_view){.tensor = p->in[k], .offset = p->offset[k], .strides = p->strides[k]};
}

/* Runs a program of one op with that op's own kernel. */
static nxv_status run_op(nxv_device *d, const nxv_pending *p, nxv_tensor **out) {
  uint32_t w = p->program[0], cls = NXV_FUSED_CLASS(w), op = NXV_FUSED_OP(w);
  uint32_t regs[2] = {NXV_FUSED_A(w), NXV_FUSED_B(w)};
  nxv_view v[2];
  const nxv_view *pv[2] = {NULL, NULL};
  const void *imm = NULL;
  for (int o = 0; o < (cls == NXV_FUSED_UNARY ? 1 : 2); o++) {
    if ((p->imm_mask >> regs[o]) & 1u) {
      imm = &p->imm[regs[o]];
    } else {
      v[o] = input_view(p, regs[o]);
      pv[o] = &v[o];
    }
  }
  if (cls == NXV_FUSED_UNARY)
    return nxv_ops_unary_eager(d, (nxv_unary_op)op, p->rank, p->shape, pv[0], out);
  return nxv_ops_binary_eager(d, (nxv_binary_op)op, p->rank, p->shape, pv[0], pv[1], imm, out);
}

/* Programs of at least this many elements run through a pipeline
 * specialized for them rather than the interpreting kernel, which reads
 * memory at about a fifth of the rate: at 2^22 f32 elements a pass saves
 * about 50 us on an H100, so the pipeline's creation (15-40 ms there, once
 * per program and device) pays for itself within a few hundred runs of
 * the program, and smaller tensors, whose passes are short, never wait for
 * one. */
#define SPECIALIZE_MIN_ELEMENTS (1ull << 22)

/* Queues the kernel computing p into a new READY tensor *out: the op's
 * own for one op; for more, a pipeline specialized for the program on
 * large tensors (the interpreting kernel once the device holds as many
 * programs as it keeps), else the interpreting fused kernel. */
static nxv_status compute(nxv_device *d, const nxv_pending *p, nxv_tensor **out) {
  if (p->ninstrs == 1) return run_op(d, p, out);
  nxv_view views[MAX_IN];
  for (uint32_t k = 0; k < p->ninputs; k++) views[k] = input_view(p, k);
  uint64_t n = 1;
  for (uint32_t i = 0; i < p->rank; i++) n *= (uint64_t)p->shape[i];
  nxv_status st = NXV_ERR_UNSUPPORTED;
  if (n >= SPECIALIZE_MIN_ELEMENTS)
    st = nxv_ops_fused(d, p->type, p->rank, p->shape, p->ninputs, views, p->imm_mask,
                       p->imm, p->ninstrs, p->program, false, out);
  if (st == NXV_ERR_UNSUPPORTED) /* small, or no room for another program */
    st = nxv_ops_fused(d, p->type, p->rank, p->shape, p->ninputs, views, p->imm_mask,
                       p->imm, p->ninstrs, p->program, true, out);
  if (st == NXV_OK) atomic_fetch_add_explicit(&d->deferred_fused, 1, memory_order_relaxed);
  return st;
}

/* Computes t, whose state this thread moved to BUSY. */
static nxv_status compute_held(nxv_tensor *t) {
  nxv_pending *p = t->pending;
  nxv_tensor *r;
  nxv_status st = compute(t->device, p, &r);
  if (st != NXV_OK) {
    atomic_store_explicit(&t->state, NXV_TENSOR_PENDING, memory_order_release);
    return st;
  }
  t->buf = r->buf;
  nxv_buffer_retain(r->buf);
  nxv_tensor_release(r);
  t->pending = NULL;
  atomic_store_explicit(&t->state, NXV_TENSOR_READY, memory_order_release);
  nxv_defer_discard(p);
  return NXV_OK;
}

/* Moves t from PENDING to BUSY: false when it is not PENDING. */
static bool hold(nxv_tensor *t) {
  int expected = NXV_TENSOR_PENDING;
  return atomic_compare_exchange_strong_explicit(&t->state, &expected, NXV_TENSOR_BUSY,
                                                 memory_order_acquire, memory_order_relaxed);
}

nxv_status nxv_defer_materialize(nxv_tensor *t) {
  for (;;) {
    int s = atomic_load_explicit(&t->state, memory_order_acquire);
    if (s == NXV_TENSOR_READY) return NXV_OK;
    if (s == NXV_TENSOR_PENDING) {
      if (hold(t)) return compute_held(t);
      continue;
    }
    sched_yield(); /* BUSY: another thread reads or computes it */
  }
}

static void try_compute(nxv_tensor *t) {
  if (hold(t)) (void)compute_held(t);
}
