#include "kernels/spv_prune.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sched/status.h"

/* Opcodes (SPIR-V 1.6 unified grammar). */
enum {
  OP_NOP = 0,
  OP_UNDEF = 1,
  OP_SOURCE_CONTINUED = 2,
  OP_SOURCE = 3,
  OP_SOURCE_EXTENSION = 4,
  OP_NAME = 5,
  OP_MEMBER_NAME = 6,
  OP_STRING = 7,
  OP_LINE = 8,
  OP_EXT_INST_IMPORT = 11,
  OP_ENTRY_POINT = 15,
  OP_TYPE_VOID = 19,
  OP_TYPE_BOOL = 20,
  OP_TYPE_INT = 21,
  OP_TYPE_FORWARD_POINTER = 39,
  OP_CONSTANT_TRUE = 41,
  OP_CONSTANT_FALSE = 42,
  OP_CONSTANT = 43,
  OP_SPEC_CONSTANT_TRUE = 48,
  OP_SPEC_CONSTANT_FALSE = 49,
  OP_SPEC_CONSTANT = 50,
  OP_SPEC_CONSTANT_OP = 52,
  OP_FUNCTION = 54,
  OP_FUNCTION_END = 56,
  OP_FUNCTION_CALL = 57,
  OP_VARIABLE = 59,
  OP_STORE = 62,
  OP_COPY_MEMORY = 63,
  OP_COPY_MEMORY_SIZED = 64,
  OP_DECORATE = 71,
  OP_MEMBER_DECORATE = 72,
  OP_DECORATION_GROUP = 73,
  OP_IMAGE_WRITE = 99,
  OP_UCONVERT = 113,
  OP_SCONVERT = 114,
  OP_SNEGATE = 126,
  OP_IADD = 128,
  OP_ISUB = 130,
  OP_IMUL = 132,
  OP_UDIV = 134,
  OP_SDIV = 135,
  OP_UMOD = 137,
  OP_SREM = 138,
  OP_SMOD = 139,
  OP_LOGICAL_EQUAL = 164,
  OP_LOGICAL_NOT_EQUAL = 165,
  OP_LOGICAL_OR = 166,
  OP_LOGICAL_AND = 167,
  OP_LOGICAL_NOT = 168,
  OP_SELECT = 169,
  OP_IEQUAL = 170,
  OP_INOT_EQUAL = 171,
  OP_UGREATER_THAN = 172,
  OP_SGREATER_THAN = 173,
  OP_UGREATER_THAN_EQUAL = 174,
  OP_SGREATER_THAN_EQUAL = 175,
  OP_ULESS_THAN = 176,
  OP_SLESS_THAN = 177,
  OP_ULESS_THAN_EQUAL = 178,
  OP_SLESS_THAN_EQUAL = 179,
  OP_SHIFT_RIGHT_LOGICAL = 194,
  OP_SHIFT_RIGHT_ARITHMETIC = 195,
  OP_SHIFT_LEFT_LOGICAL = 196,
  OP_BITWISE_OR = 197,
  OP_BITWISE_XOR = 198,
  OP_BITWISE_AND = 199,
  OP_NOT = 200,
  OP_EMIT_VERTEX = 218,
  OP_END_PRIMITIVE = 219,
  OP_EMIT_STREAM_VERTEX = 220,
  OP_END_STREAM_PRIMITIVE = 221,
  OP_CONTROL_BARRIER = 224,
  OP_MEMORY_BARRIER = 225,
  OP_ATOMIC_STORE = 228,
  OP_PHI = 245,
  OP_LOOP_MERGE = 246,
  OP_SELECTION_MERGE = 247,
  OP_LABEL = 248,
  OP_BRANCH = 249,
  OP_BRANCH_CONDITIONAL = 250,
  OP_SWITCH = 251,
  OP_KILL = 252,
  OP_RETURN = 253,
  OP_RETURN_VALUE = 254,
  OP_UNREACHABLE = 255,
  OP_LIFETIME_START = 256,
  OP_LIFETIME_STOP = 257,
  OP_NO_LINE = 317,
  OP_ATOMIC_FLAG_CLEAR = 318,
  OP_MODULE_PROCESSED = 330,
  OP_DECORATE_ID = 332,
  OP_TERMINATE_INVOCATION = 4416,
  OP_COOPMAT_STORE_KHR = 4458,
  OP_IGNORE_INTERSECTION_KHR = 4448,
  OP_TERMINATE_RAY_KHR = 4449,
  OP_EMIT_MESH_TASKS_EXT = 5294,
  OP_SET_MESH_OUTPUTS_EXT = 5295,
  OP_COOPMAT_STORE_NV = 5360,
  OP_BEGIN_INTERLOCK_EXT = 5364,
  OP_END_INTERLOCK_EXT = 5365,
  OP_DEMOTE_TO_HELPER = 5380,
  OP_DECORATE_STRING = 5632,
};
#define DECORATION_SPEC_ID 1u
#define HEADER_WORDS 5u

static bool is_terminator(uint32_t op) {
  switch (op) {
    case OP_BRANCH: case OP_BRANCH_CONDITIONAL: case OP_SWITCH: case OP_KILL:
    case OP_RETURN: case OP_RETURN_VALUE: case OP_UNREACHABLE:
    case OP_TERMINATE_INVOCATION: case OP_IGNORE_INTERSECTION_KHR:
    case OP_TERMINATE_RAY_KHR: case OP_EMIT_MESH_TASKS_EXT:
      return true;
    default:
      return false;
  }
}

/* The id an instruction inside a function defines, 0 for none. Every
 * opcode not listed as defining nothing is taken to define word 2 (result
 * type, result id), which holds for all others that may appear in a
 * function body; a wrong guess only matters for decorations, see
 * kept_defs below. */
static uint32_t body_result(const uint32_t *in, uint32_t len) {
  uint32_t op = in[0] & 0xFFFFu;
  if (op == OP_LABEL) return len > 1 ? in[1] : 0;
  if (is_terminator(op)) return 0;
  switch (op) {
    case OP_NOP: case OP_LINE: case OP_NO_LINE: case OP_STORE: case OP_COPY_MEMORY:
    case OP_COPY_MEMORY_SIZED: case OP_IMAGE_WRITE: case OP_CONTROL_BARRIER:
    case OP_MEMORY_BARRIER: case OP_ATOMIC_STORE: case OP_LOOP_MERGE:
    case OP_SELECTION_MERGE: case OP_LIFETIME_START: case OP_LIFETIME_STOP:
    case OP_ATOMIC_FLAG_CLEAR: case OP_EMIT_VERTEX: case OP_END_PRIMITIVE:
    case OP_EMIT_STREAM_VERTEX: case OP_END_STREAM_PRIMITIVE:
    case OP_COOPMAT_STORE_KHR: case OP_COOPMAT_STORE_NV: case OP_SET_MESH_OUTPUTS_EXT:
    case OP_BEGIN_INTERLOCK_EXT: case OP_END_INTERLOCK_EXT: case OP_DEMOTE_TO_HELPER:
    case OP_FUNCTION_END:
      return 0;
    default:
      return len > 2 ? in[2] : 0;
  }
}

/* The id a module-level instruction defines, 0 for none. */
static uint32_t global_result(const uint32_t *in, uint32_t len) {
  uint32_t op = in[0] & 0xFFFFu;
  if (len < 2) return 0;
  if ((op >= OP_TYPE_VOID && op < OP_TYPE_FORWARD_POINTER) || op == 322 || op == 327 ||
      op == 4456 || op == 5358 || op == 5341 || op == 4472 ||
      op == OP_EXT_INST_IMPORT || op == OP_STRING || op == OP_DECORATION_GROUP)
    return in[1];
  if ((op >= OP_CONSTANT_TRUE && op <= OP_SPEC_CONSTANT_OP) || op == OP_VARIABLE ||
      op == OP_UNDEF)
    return len > 2 ? in[2] : 0;
  return 0;
}

static bool is_debug(uint32_t op) {
  return op == OP_SOURCE_CONTINUED || op == OP_SOURCE || op == OP_SOURCE_EXTENSION ||
         op == OP_NAME || op == OP_MEMBER_NAME || op == OP_LINE || op == OP_NO_LINE ||
         op == OP_MODULE_PROCESSED;
}

static bool is_decoration(uint32_t op) {
  return op == OP_DECORATE || op == OP_DECORATE_ID || op == OP_DECORATE_STRING;
}

/* A block of a function: instruction indices [first, term]. */
typedef struct block {
  uint32_t label;
  uint32_t first;      /* index of its OpLabel */
  uint32_t term;       /* index of its terminator */
  int32_t merge;       /* index of its OpSelectionMerge / OpLoopMerge, or -1 */
  uint32_t taken;      /* rewritten: the one target (a label), or 0 */
  bool reachable;
  bool stub;           /* a declared merge block left unreachable */
} block;

typedef struct fn {
  uint32_t id;
  uint32_t first, end;  /* OpFunction and OpFunctionEnd indices */
  uint32_t b0, nb;      /* its blocks in the block array */
  bool live;
} fn;

typedef struct pass {
  const uint32_t *w;
  size_t nwords;
  uint32_t bound;
  uint32_t *at;         /* instruction start offsets */
  uint32_t ninst;
  /* Per id. */
  uint8_t *known;       /* 1: val holds the value of a constant */
  uint64_t *val;
  uint8_t *width;       /* int type: its width; bool type: 1; else 0 */
  uint8_t *vwidth;      /* known constant: the width of its type */
  int64_t *spec;        /* SpecId of a spec constant, or -1 */
  int32_t *block_of;    /* label -> index into blocks while its function is walked */
  uint8_t *removed;     /* ids defined by removed code */
  uint8_t *kept;        /* ids defined by kept code */
  block *blocks;
  uint32_t nblocks;
  fn *fns;
  uint32_t nfns;
  uint32_t int_const;   /* a 32-bit integer constant, for one-target switches */
  bool oom;             /* an allocation failed */
} pass;

static inline uint32_t ilen(const pass *p, uint32_t i) { return p->w[p->at[i]] >> 16; }
static inline const uint32_t *inst(const pass *p, uint32_t i) { return p->w + p->at[i]; }

/* Makes room for item n of *items (capacity *cap items of size bytes,
 * doubled as needed); false, with p->oom set, when host memory runs out. */
static bool grow(pass *p, void *items, uint32_t *cap, uint32_t n, size_t size) {
  void **arr = items;
  if (*arr && n < *cap) return true;
  uint32_t c = *arr ? *cap * 2 : *cap;
  void *m = realloc(*arr, (size_t)c * size);
  if (!m) {
    p->oom = true;
    return false;
  }
  *arr = m;
  *cap = c;
  return true;
}

static uint64_t mask_of(uint32_t width) {
  return width >= 64 ? ~0ull : width == 0 ? 1ull : ((1ull << width) - 1ull);
}

static int64_t sext(uint64_t v, uint32_t width) {
  if (width >= 64 || width == 0) return (int64_t)v;
  uint64_t sign = 1ull << (width - 1);
  return (int64_t)((v ^ sign) - sign);
}

/* Evaluates OpSpecConstantOp in (the integer and boolean opcodes); false
 * when an operand is unknown or the opcode is not one handled. */
static bool eval_op(const pass *p, const uint32_t *in, uint32_t len, uint64_t *out) {
  if (len < 5 || in[1] >= p->bound) return false;
  uint32_t rw = p->width[in[1]], op = in[3], n = len - 4;
  if (rw == 0 || n > 3) return false;
  uint64_t a[3] = {0, 0, 0};
  uint32_t aw[3] = {0, 0, 0};
  for (uint32_t k = 0; k < n; k++) {
    uint32_t id = in[4 + k];
    if (id >= p->bound || !p->known[id]) return false;
    a[k] = p->val[id];
    aw[k] = p->vwidth[id];
  }
  bool unary = op == OP_UCONVERT || op == OP_SCONVERT || op == OP_SNEGATE || op == OP_NOT ||
               op == OP_LOGICAL_NOT;
  if (n != (unary ? 1u : op == OP_SELECT ? 3u : 2u)) return false;
  uint64_t r;
  switch (op) {
    case OP_UCONVERT: r = a[0]; break;
    case OP_SCONVERT: r = (uint64_t)sext(a[0], aw[0]); break;
    case OP_SNEGATE: r = (uint64_t)0 - a[0]; break;
    case OP_NOT: r = ~a[0]; break;
    case OP_IADD: r = a[0] + a[1]; break;
    case OP_ISUB: r = a[0] - a[1]; break;
    case OP_IMUL: r = a[0] * a[1]; break;
    case OP_UDIV: if (a[1] == 0) return false; r = a[0] / a[1]; break;
    case OP_UMOD: if (a[1] == 0) return false; r = a[0] % a[1]; break;
    case OP_SDIV: case OP_SREM: case OP_SMOD: {
      int64_t x = sext(a[0], aw[0]), y = sext(a[1], aw[1]);
      if (y == 0 || (y == -1 && x == INT64_MIN)) return false;
      int64_t q = op == OP_SDIV ? x / y : x % y;
      if (op == OP_SMOD && q != 0 && ((q < 0) != (y < 0))) q += y;
      r = (uint64_t)q;
      break;
    }
    case OP_SHIFT_RIGHT_LOGICAL: if (a[1] >= aw[0]) return false; r = a[0] >> a[1]; break;
    case OP_SHIFT_RIGHT_ARITHMETIC:
      if (a[1] >= aw[0]) return false;
      r = (uint64_t)(sext(a[0], aw[0]) >> a[1]);
      break;
    case OP_SHIFT_LEFT_LOGICAL: if (a[1] >= aw[0]) return false; r = a[0] << a[1]; break;
    case OP_BITWISE_OR: r = a[0] | a[1]; break;
    case OP_BITWISE_XOR: r = a[0] ^ a[1]; break;
    case OP_BITWISE_AND: r = a[0] & a[1]; break;
    case OP_LOGICAL_EQUAL: r = (a[0] != 0) == (a[1] != 0); break;
    case OP_LOGICAL_NOT_EQUAL: r = (a[0] != 0) != (a[1] != 0); break;
    case OP_LOGICAL_OR: r = (a[0] != 0) || (a[1] != 0); break;
    case OP_LOGICAL_AND: r = (a[0] != 0) && (a[1] != 0); break;
    case OP_LOGICAL_NOT: r = a[0] == 0; break;
    case OP_SELECT: r = a[0] ? a[1] : a[2]; break;
    case OP_IEQUAL: r = a[0] == a[1]; break;
    case OP_INOT_EQUAL: r = a[0] != a[1]; break;
    case OP_UGREATER_THAN: r = a[0] > a[1]; break;
    case OP_UGREATER_THAN_EQUAL: r = a[0] >= a[1]; break;
    case OP_ULESS_THAN: r = a[0] < a[1]; break;
    case OP_ULESS_THAN_EQUAL: r = a[0] <= a[1]; break;
    case OP_SGREATER_THAN: r = sext(a[0], aw[0]) > sext(a[1], aw[1]); break;
    case OP_SGREATER_THAN_EQUAL: r = sext(a[0], aw[0]) >= sext(a[1], aw[1]); break;
    case OP_SLESS_THAN: r = sext(a[0], aw[0]) < sext(a[1], aw[1]); break;
    case OP_SLESS_THAN_EQUAL: r = sext(a[0], aw[0]) <= sext(a[1], aw[1]); break;
    default: return false;
  }
  *out = r & mask_of(rw);
  return true;
}

static void set_known(pass *p, uint32_t id, uint32_t type, uint64_t v) {
  if (id >= p->bound || type >= p->bound || p->width[type] == 0) return;
  p->known[id] = 1;
  p->vwidth[id] = p->width[type];
  p->val[id] = v & mask_of(p->width[type]);
}

/* Splits the module into instructions and evaluates its constants. */
static bool scan(pass *p, const nxv_spv_spec *specs, uint32_t nspecs) {
  size_t off = HEADER_WORDS;
  uint32_t cap = 1024;
  while (off < p->nwords) {
    uint32_t len = p->w[off] >> 16;
    if (len == 0 || off + len > p->nwords) return false;
    if (!grow(p, &p->at, &cap, p->ninst, sizeof *p->at)) return false;
    p->at[p->ninst++] = (uint32_t)off;
    off += len;
  }
  for (uint32_t i = 0; i < p->ninst; i++) {
    const uint32_t *in = inst(p, i);
    uint32_t op = in[0] & 0xFFFFu, len = ilen(p, i);
    if (op == OP_DECORATION_GROUP) return false; /* group decorations: not handled */
    if (op == OP_DECORATE && len >= 4 && in[2] == DECORATION_SPEC_ID && in[1] < p->bound)
      p->spec[in[1]] = in[3];
    else if (op == OP_TYPE_INT && len >= 4 && in[1] < p->bound && in[2] <= 64)
      p->width[in[1]] = (uint8_t)in[2];
    else if (op == OP_TYPE_BOOL && len >= 2 && in[1] < p->bound)
      p->width[in[1]] = 1;
  }
  for (uint32_t i = 0; i < p->ninst; i++) {
    const uint32_t *in = inst(p, i);
    uint32_t op = in[0] & 0xFFFFu, len = ilen(p, i);
    if (op == OP_FUNCTION) break; /* constants precede the functions */
    if (len < 3 || in[2] >= p->bound || in[1] >= p->bound) continue;
    uint32_t type = in[1], id = in[2];
    int64_t sid = p->spec[id];
    const nxv_spv_spec *given = NULL;
    for (uint32_t k = 0; sid >= 0 && k < nspecs; k++)
      if (specs[k].id == (uint32_t)sid) given = &specs[k];
    switch (op) {
      case OP_CONSTANT_TRUE: set_known(p, id, type, 1); break;
      case OP_CONSTANT_FALSE: set_known(p, id, type, 0); break;
      case OP_CONSTANT:
        if (p->width[type] > 1 && len >= 4)
          set_known(p, id, type, in[3] | (len >= 5 ? (uint64_t)in[4] << 32 : 0));
        if (p->width[type] == 32 && !p->int_const) p->int_const = id;
        break;
      case OP_SPEC_CONSTANT_TRUE: case OP_SPEC_CONSTANT_FALSE:
        set_known(p, id, type, given ? given->value != 0 : op == OP_SPEC_CONSTANT_TRUE);
        break;
      case OP_SPEC_CONSTANT:
        if (p->width[type] <= 1 || len < 4) break;
        if (given && p->width[type] > 32) break; /* given as 32 bits: leave it */
        set_known(p, id, type,
                  given ? given->value : in[3] | (len >= 5 ? (uint64_t)in[4] << 32 : 0));
        break;
      case OP_SPEC_CONSTANT_OP: {
        uint64_t v;
        if (eval_op(p, in, len, &v)) set_known(p, id, type, v);
        break;
      }
      default: break;
    }
  }
  return true;
}

/* Collects functions and blocks; decides the rewritten selections. */
static bool collect(pass *p) {
  uint32_t bcap = 256, fcap = 32;
  fn *f = NULL;
  block *b = NULL;
  for (uint32_t i = 0; i < p->ninst; i++) {
    const uint32_t *in = inst(p, i);
    uint32_t op = in[0] & 0xFFFFu, len = ilen(p, i);
    if (op == OP_FUNCTION) {
      if (f || len < 5 || !grow(p, &p->fns, &fcap, p->nfns, sizeof *p->fns)) return false;
      f = &p->fns[p->nfns++];
      *f = (fn){.id = in[2], .first = i, .b0 = p->nblocks};
    } else if (op == OP_FUNCTION_END) {
      if (!f || b) return false;
      f->end = i;
      f->nb = p->nblocks - f->b0;
      f = NULL;
    } else if (op == OP_LABEL) {
      if (!f || b || len < 2 || in[1] >= p->bound ||
          !grow(p, &p->blocks, &bcap, p->nblocks, sizeof *p->blocks))
        return false;
      b = &p->blocks[p->nblocks++];
      *b = (block){.label = in[1], .first = i, .merge = -1};
    } else if (b && (op == OP_SELECTION_MERGE || op == OP_LOOP_MERGE)) {
      b->merge = (int32_t)i;
    } else if (b && is_terminator(op)) {
      b->term = i;
      if (b->merge >= 0 && b->merge + 1 == (int32_t)i &&
          (inst(p, (uint32_t)b->merge)[0] & 0xFFFFu) == OP_SELECTION_MERGE) {
        if (op == OP_BRANCH_CONDITIONAL && len >= 4 && in[1] < p->bound && p->known[in[1]] &&
            p->int_const)
          b->taken = p->val[in[1]] ? in[2] : in[3];
        else if (op == OP_SWITCH && len >= 3 && in[1] < p->bound && p->known[in[1]] &&
                 p->vwidth[in[1]] <= 32 && (len - 3) % 2 == 0) {
          b->taken = in[2];
          for (uint32_t k = 3; k + 1 < len; k += 2)
            if ((in[k] & mask_of(p->vwidth[in[1]])) == p->val[in[1]]) {
              b->taken = in[k + 1];
              break;
            }
        }
      }
      b = NULL;
    }
  }
  return f == NULL && b == NULL;
}

/* Runs BODY with L bound to each successor label of block b, after its
 * rewrite. */
#define FOR_SUCC(p, b, L, BODY)                                              \
  do {                                                                       \
    const uint32_t *t_ = inst(p, (b)->term);                                 \
    uint32_t top_ = t_[0] & 0xFFFFu, tl_ = ilen(p, (b)->term);               \
    if ((b)->taken) { uint32_t L = (b)->taken; BODY; }                       \
    else if (top_ == OP_BRANCH && tl_ >= 2) { uint32_t L = t_[1]; BODY; }    \
    else if (top_ == OP_BRANCH_CONDITIONAL && tl_ >= 4) {                    \
      { uint32_t L = t_[2]; BODY; }                                          \
      { uint32_t L = t_[3]; BODY; }                                          \
    } else if (top_ == OP_SWITCH && tl_ >= 3) {                              \
      { uint32_t L = t_[2]; BODY; }                                          \
      for (uint32_t k_ = 4; k_ < tl_; k_ += 2) { uint32_t L = t_[k_]; BODY; } \
    }                                                                        \
  } while (0)

/* Marks each function's reachable blocks and declared-but-unreachable
 * merge blocks. False on what the pass does not handle. */
static bool reach(pass *p, uint32_t *stack) {
  for (uint32_t fi = 0; fi < p->nfns; fi++) {
    fn *f = &p->fns[fi];
    if (f->nb == 0) continue; /* a declaration */
    for (uint32_t k = 0; k < f->nb; k++)
    p->block_of[p->blocks[f->b0 + k].label] = (int32_t)(f->b0 + k);
    uint32_t sp = 0;
    p->blocks[f->b0].reachable = true;
    stack[sp++] = f->b0;
    bool ok = true;
    while (sp > 0 && ok) {
      block *b = &p->blocks[stack[--sp]];
      FOR_SUCC(p, b, L, {
        int32_t t = L < p->bound ? p->block_of[L] : -1;
        if (t < 0) ok = false;
        else if (!p->blocks[t].reachable) {
          p->blocks[t].reachable = true;
          stack[sp++] = (uint32_t)t;
        }
      });
    }
    for (uint32_t k = 0; ok && k < f->nb; k++) {
      block *b = &p->blocks[f->b0 + k];
      if (!b->reachable || b->merge < 0) continue;
      const uint32_t *m = inst(p, (uint32_t)b->merge);
      uint32_t mop = m[0] & 0xFFFFu;
      int32_t mb = m[1] < p->bound ? p->block_of[m[1]] : -1;
      if (mb < 0) ok = false;
      else if (!p->blocks[mb].reachable) p->blocks[mb].stub = true;
      if (mop == OP_LOOP_MERGE) {
        int32_t cb = m[2] < p->bound ? p->block_of[m[2]] : -1;
        if (cb < 0 || !p->blocks[cb].reachable) ok = false;
      }
    }
    for (uint32_t k = 0; k < f->nb; k++) p->block_of[p->blocks[f->b0 + k].label] = -1;
    if (!ok) return false;
  }
  return true;
}

/* Marks the function id live and pushes it onto the stack, once. */
static void mark_live(pass *p, uint32_t id, uint32_t *stack, uint32_t *sp) {
  for (uint32_t fi = 0; fi < p->nfns; fi++)
    if (p->fns[fi].id == id && !p->fns[fi].live) {
      p->fns[fi].live = true;
      stack[(*sp)++] = fi;
    }
}

/* Marks the functions called, transitively, from the entry points. */
static void liveness(pass *p, uint32_t *stack) {
  uint32_t sp = 0;
  for (uint32_t i = 0; i < p->ninst; i++) {
    const uint32_t *in = inst(p, i);
    if ((in[0] & 0xFFFFu) == OP_ENTRY_POINT && ilen(p, i) >= 3) mark_live(p, in[2], stack, &sp);
  }
  while (sp > 0) {
    fn *f = &p->fns[stack[--sp]];
    for (uint32_t k = 0; k < f->nb; k++) {
      block *b = &p->blocks[f->b0 + k];
      if (!b->reachable) continue;
      for (uint32_t i = b->first; i < b->term; i++) {
        const uint32_t *in = inst(p, i);
        if ((in[0] & 0xFFFFu) == OP_FUNCTION_CALL && ilen(p, i) >= 4)
          mark_live(p, in[3], stack, &sp);
      }
    }
  }
}

typedef struct out_buf {
  uint32_t *w;
  size_t n, cap;
  bool failed;  /* something the pass does not handle, or oom */
  bool oom;     /* host memory ran out */
} out_buf;

static void emit(out_buf *o, const uint32_t *w, uint32_t n) {
  if (o->failed) return;
  if (o->n + n > o->cap) {
    size_t cap = o->cap ? o->cap : 1024;
    while (cap < o->n + n) cap *= 2;
    uint32_t *nw = realloc(o->w, cap * sizeof *nw);
    if (!nw) {
      o->failed = o->oom = true;
      return;
    }
    o->w = nw;
    o->cap = cap;
  }
  memcpy(o->w + o->n, w, n * sizeof *w);
  o->n += n;
}

/* Whether block b (rewritten or not) branches to label. */
static bool branches_to(const pass *p, const block *b, uint32_t label) {
  bool yes = false;
  FOR_SUCC(p, b, L, { if (L == label) yes = true; });
  return yes;
}

/* Writes the kept part of live function f into o. */
static void write_function(pass *p, fn *f, out_buf *o) {
  uint32_t body = f->nb ? p->blocks[f->b0].first : f->end;
  for (uint32_t i = f->first; i < body; i++) /* OpFunction, parameters */
    if (!is_debug(inst(p, i)[0] & 0xFFFFu)) emit(o, inst(p, i), ilen(p, i));
  for (uint32_t k = 0; k < f->nb; k++)
    p->block_of[p->blocks[f->b0 + k].label] = (int32_t)(f->b0 + k);
  for (uint32_t k = 0; k < f->nb && !o->failed; k++) {
    const block *b = &p->blocks[f->b0 + k];
    if (!b->reachable) {
      if (b->stub) {
        const uint32_t stub[3] = {(2u << 16) | OP_LABEL, b->label, (1u << 16) | OP_UNREACHABLE};
        emit(o, stub, 3);
      }
      continue;
    }
    for (uint32_t i = b->first; i <= b->term && !o->failed; i++) {
      const uint32_t *in = inst(p, i);
      uint32_t op = in[0] & 0xFFFFu, len = ilen(p, i);
      if (is_debug(op)) continue;
      if (op == OP_PHI) {
        uint32_t tmp[3 + 2 * 64];
        if (len > 3 + 2 * 64) {
          o->failed = true;
          break;
        }
        uint32_t n = 3;
        tmp[1] = in[1];
        tmp[2] = in[2];
        for (uint32_t j = 3; j + 1 < len; j += 2) {
          uint32_t parent = in[j + 1];
          int32_t pb = parent < p->bound ? p->block_of[parent] : -1;
          if (pb >= 0 && p->blocks[pb].reachable && branches_to(p, &p->blocks[pb], b->label)) {
            tmp[n++] = in[j];
            tmp[n++] = parent;
          }
        }
        if (n == 3) { /* a reachable block without predecessors */
          o->failed = true;
          break;
        }
        tmp[0] = (n << 16) | OP_PHI;
        emit(o, tmp, n);
      } else if (i == b->term && b->taken) {
        const uint32_t sw[3] = {(3u << 16) | OP_SWITCH, op == OP_SWITCH ? in[1] : p->int_const,
                                b->taken};
        emit(o, sw, 3);
      } else {
        emit(o, in, len);
      }
    }
  }
  for (uint32_t k = 0; k < f->nb; k++) p->block_of[p->blocks[f->b0 + k].label] = -1;
  emit(o, inst(p, f->end), ilen(p, f->end));
}

/* Writes the pruned module into o. */
static void write_module(pass *p, out_buf *o) {
  /* Ids defined by what is removed, and by what is kept: the module-level
   * instructions (functions skipped), then each function's. */
  for (uint32_t i = 0, fi = 0; i < p->ninst; i++) {
    if (fi < p->nfns && i == p->fns[fi].first) {
      i = p->fns[fi++].end;
      continue;
    }
    uint32_t id = global_result(inst(p, i), ilen(p, i));
    if (id && id < p->bound) p->kept[id] = 1;
  }
  for (uint32_t fi = 0; fi < p->nfns; fi++) {
    fn *f = &p->fns[fi];
    uint32_t bk = 0;
    for (uint32_t i = f->first; i <= f->end; i++) {
      while (bk < f->nb && p->blocks[f->b0 + bk].term < i) bk++;
      const block *b =
          bk < f->nb && i >= p->blocks[f->b0 + bk].first ? &p->blocks[f->b0 + bk] : NULL;
      bool keep = f->live && (!b || b->reachable || (b->stub && i == b->first));
      uint32_t id = body_result(inst(p, i), ilen(p, i));
      if (id && id < p->bound) {
        if (keep) p->kept[id] = 1;
        else p->removed[id] = 1;
      }
    }
  }
  emit(o, p->w, HEADER_WORDS);
  uint32_t fi = 0;
  for (uint32_t i = 0; i < p->ninst && !o->failed; i++) {
    const uint32_t *in = inst(p, i);
    uint32_t op = in[0] & 0xFFFFu, len = ilen(p, i);
    if (op != OP_FUNCTION) {
      if (is_debug(op)) continue;
      if (is_decoration(op) && len >= 2 && in[1] < p->bound && p->removed[in[1]] &&
          !p->kept[in[1]])
        continue;
      emit(o, in, len);
      continue;
    }
    fn *f = &p->fns[fi++];
    i = f->end;
    if (f->live) write_function(p, f, o);
  }
}

nxv_status nxv_spv_prune(const uint32_t *words, size_t nwords,
                         const nxv_spv_spec *specs, uint32_t nspecs,
                         uint32_t **out_words, size_t *out_nwords) {
  *out_words = NULL;
  *out_nwords = 0;
  if (!words || nwords < HEADER_WORDS || words[0] != 0x07230203u || words[3] == 0 ||
      words[3] > (1u << 22))
    return NXV_OK;
  pass p = {.w = words, .nwords = nwords, .bound = words[3]};
  size_t b = p.bound;
  p.known = calloc(b, 1);
  p.val = calloc(b, sizeof *p.val);
  p.width = calloc(b, 1);
  p.vwidth = calloc(b, 1);
  p.spec = malloc(b * sizeof *p.spec);
  p.block_of = malloc(b * sizeof *p.block_of);
  p.removed = calloc(b, 1);
  p.kept = calloc(b, 1);
  uint32_t *stack = NULL;
  nxv_status st = NXV_OK;
  if (!p.known || !p.val || !p.width || !p.vwidth || !p.spec || !p.block_of || !p.removed ||
      !p.kept) {
    st = nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "pruning a SPIR-V module of %u ids", p.bound);
    goto done;
  }
  for (size_t i = 0; i < b; i++) {
    p.spec[i] = -1;
    p.block_of[i] = -1;
  }
  if (!scan(&p, specs, nspecs) || !collect(&p)) {
    if (p.oom) st = nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "pruning a SPIR-V module");
    goto done;
  }
  stack = malloc((p.nblocks + p.nfns + 1) * sizeof *stack);
  if (!stack) {
    st = nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "pruning a SPIR-V module");
    goto done;
  }
  if (!reach(&p, stack)) goto done;
  liveness(&p, stack);
  bool changed = false;
  for (uint32_t i = 0; i < p.nblocks && !changed; i++)
    changed = p.blocks[i].taken != 0 || !p.blocks[i].reachable;
  for (uint32_t i = 0; i < p.nfns && !changed; i++) changed = !p.fns[i].live;
  if (!changed) goto done;
  out_buf o = {0};
  write_module(&p, &o);
  if (o.failed) {
    free(o.w);
    if (o.oom) st = nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "writing a pruned SPIR-V module");
    goto done;
  }
  *out_words = o.w;
  *out_nwords = o.n;
done:
  free(stack);
  free(p.at);
  free(p.blocks);
  free(p.fns);
  free(p.known);
  free(p.val);
  free(p.width);
  free(p.vwidth);
  free(p.spec);
  free(p.block_of);
  free(p.removed);
  free(p.kept);
  return st;
}
