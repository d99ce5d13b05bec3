/*
 * spv_coopmat_khr.c - rewrites a SPIR-V module that uses
 * SPV_NV_cooperative_matrix into one that uses SPV_KHR_cooperative_matrix,
 * optionally with bfloat16 matrix elements (SPV_KHR_bfloat16). A build
 * tool: it lets shaders written for GL_NV_cooperative_matrix, which every
 * glslang since 2019 compiles, run through VK_KHR_cooperative_matrix and
 * VK_KHR_shader_bfloat16 where the installed glslang predates
 * GL_KHR_cooperative_matrix and bf16 types (Debian 12's 12.0 does).
 *
 *   spv_coopmat_khr MODE IN.spv OUT.h NAME
 *
 * MODE is "khr", "khr-bf16" or "khr-tensor". OUT.h gets
 * `const uint32_t NAME[] = {...};`, the form glslangValidator --vn writes.
 *
 * The rewrite:
 * - capability CooperativeMatrixNV -> CooperativeMatrixKHR, extension
 *   SPV_NV_cooperative_matrix -> SPV_KHR_cooperative_matrix;
 * - OpTypeCooperativeMatrixNV -> OpTypeCooperativeMatrixKHR with a Use:
 *   the types of OpCooperativeMatrixMulAddNV's A, B and C operands become
 *   MatrixA, MatrixB and MatrixAccumulator. NV types carry no use, so one
 *   NV type can serve as both A and B (16x16 f16 fragments); KHR needs two.
 *   Such a type is split: the values that reach a MulAdd as B (found by
 *   following loads, stores, access chains, copies, phis and selects from
 *   the MulAdd operand back to the variables and loads that produced it)
 *   are given a MatrixB copy of the type, and of the array and pointer
 *   types built on it;
 * - Load/Store/MulAdd/Length NV -> KHR (the column-major bool becomes a
 *   MemoryLayout constant and moves before the stride);
 * - khr-bf16: the module's 16-bit float type becomes bfloat16 (OpTypeFloat
 *   16 BFloat16KHR), capability Float16 is replaced by BFloat16TypeKHR and
 *   BFloat16CooperativeMatrixKHR, extension SPV_KHR_bfloat16 is added. The
 *   shader must use its 16-bit floats only as matrix components (bfloat16
 *   has no arithmetic), which the driver enforces at pipeline creation.
 * - khr-tensor: as khr, then every row-major load of a workgroup-scope
 *   matrix from a PhysicalStorageBuffer element (buf.v[i], stride s in
 *   elements of the buffer, which hold e = 8 matrix components each) becomes
 *   a tensor-addressing load (SPV_NV_tensor_addressing,
 *   SPV_NV_cooperative_matrix2): from buf.v[0] through a 2-D tensor layout
 *   of dimensions (i / s + rows, s * e), sliced at row i / s, column
 *   (i % s) * e, rows x columns of the matrix. Used by the workgroup-scope
 *   benchmark (bench/floor/wg_gemm.comp) to try the driver's own staging;
 *   the runtime does not use it.
 *
 * Exits non-zero, with a message, on a module it cannot rewrite (another
 * coopmat opcode, a type with both A and accumulator uses, a B value that
 * reaches an A operand, an instruction it does not know producing a split
 * type) or whose result fails its checks (verify: no NV instruction left,
 * every product's operands of the right uses, no IEEE half left in bf16
 * mode), so the build fails rather than a pipeline. No state beyond one
 * module; not part of the runtime.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  OP_EXTENSION = 10,
  OP_TYPE_INT = 21,
  OP_TYPE_FLOAT = 22,
  OP_TYPE_ARRAY = 28,
  OP_TYPE_RUNTIME_ARRAY = 29,
  OP_TYPE_POINTER = 32,
  OP_CONSTANT_TRUE = 41,
  OP_CONSTANT_FALSE = 42,
  OP_CONSTANT = 43,
  OP_CONSTANT_COMPOSITE = 44,
  OP_CONSTANT_NULL = 46,
  OP_VARIABLE = 59,
  OP_LOAD = 61,
  OP_STORE = 62,
  OP_COPY_MEMORY = 63,
  OP_ACCESS_CHAIN = 65,
  OP_IN_BOUNDS_ACCESS_CHAIN = 66,
  OP_PTR_ACCESS_CHAIN = 67,
  OP_COPY_OBJECT = 83,
  OP_IADD = 128,
  OP_IMUL = 132,
  OP_UDIV = 134,
  OP_UMOD = 137,
  OP_FUNCTION = 54,
  OP_COOPMAT_LOAD_TENSOR_NV = 5367,
  OP_TYPE_TENSOR_LAYOUT_NV = 5370,
  OP_CREATE_TENSOR_LAYOUT_NV = 5372,
  OP_TENSOR_LAYOUT_SET_DIMENSION_NV = 5373,
  OP_TENSOR_LAYOUT_SLICE_NV = 5375,
  OP_SELECT = 169,
  OP_PHI = 245,
  OP_UNDEF = 1,
  OP_CAPABILITY = 17,
  OP_TYPE_COOPMAT_KHR = 4456,
  OP_COOPMAT_LOAD_KHR = 4457,
  OP_COOPMAT_STORE_KHR = 4458,
  OP_COOPMAT_MULADD_KHR = 4459,
  OP_COOPMAT_LENGTH_KHR = 4460,
  OP_TYPE_COOPMAT_NV = 5358,
  OP_COOPMAT_LOAD_NV = 5359,
  OP_COOPMAT_STORE_NV = 5360,
  OP_COOPMAT_MULADD_NV = 5361,
  OP_COOPMAT_LENGTH_NV = 5362,
};
enum {
  CAP_FLOAT16 = 9,
  CAP_BFLOAT16_TYPE = 5116,
  CAP_BFLOAT16_COOPMAT = 5118,
  CAP_COOPMAT_NV = 5357,
  CAP_COOPMAT_KHR = 6022,
  CAP_COOPMAT_TENSOR_ADDRESSING_NV = 5433,
  CAP_TENSOR_ADDRESSING_NV = 5439,
};
enum { USE_NONE = -1, USE_A = 0, USE_B = 1, USE_ACC = 2 };

/* One instruction: its words (owned), opcode in words[0] & 0xFFFF. */
typedef struct inst {
  uint32_t *w;
  uint32_t n;
} inst;

typedef struct module {
  uint32_t header[5];
  inst *ins;
  size_t count, cap;
} module;

static const char *g_in = "";

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "spv_coopmat_khr: %s: ", g_in);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static void *xmalloc(size_t n) {
  void *p = calloc(1, n ? n : 1);
  if (!p) die("out of memory");
  return p;
}

static uint32_t opcode(const inst *i) { return i->w[0] & 0xFFFFu; }

static inst make_inst(uint32_t op, const uint32_t *operands, uint32_t nops) {
  inst i = {xmalloc((nops + 1) * sizeof(uint32_t)), nops + 1};
  i.w[0] = ((nops + 1) << 16) | op;
  if (nops) memcpy(i.w + 1, operands, nops * sizeof(uint32_t));
  return i;
}

/* Inserts i before position at (at == count appends). */
static void insert(module *m, size_t at, inst i) {
  if (m->count == m->cap) {
    m->cap = m->cap ? 2 * m->cap : 256;
    m->ins = realloc(m->ins, m->cap * sizeof *m->ins);
    if (!m->ins) die("out of memory");
  }
  memmove(m->ins + at + 1, m->ins + at, (m->count - at) * sizeof *m->ins);
  m->ins[at] = i;
  m->count++;
}

static void replace(inst *i, uint32_t op, const uint32_t *operands, uint32_t nops) {
  free(i->w);
  *i = make_inst(op, operands, nops);
}

static void read_module(const char *path, module *m) {
  FILE *f = fopen(path, "rb");
  if (!f) die("cannot open");
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (size < 20 || size % 4) die("not a SPIR-V module (%ld bytes)", size);
  uint32_t *w = xmalloc((size_t)size);
  if (fread(w, 1, (size_t)size, f) != (size_t)size) die("read failed");
  fclose(f);
  if (w[0] != 0x07230203u) die("bad magic 0x%08x (only host-endian modules)", w[0]);
  memcpy(m->header, w, sizeof m->header);
  size_t n = (size_t)size / 4;
  for (size_t p = 5; p < n;) {
    uint32_t wc = w[p] >> 16;
    if (wc == 0 || p + wc > n) die("truncated instruction at word %zu", p);
    inst i = make_inst(w[p] & 0xFFFFu, w + p + 1, wc - 1);
    insert(m, m->count, i);
    p += wc;
  }
  free(w);
}

static uint32_t new_id(module *m) { return m->header[3]++; }

/* ------------------------------------------------------------------ */
/* Value classes (union-find over ids)                                 */
/* ------------------------------------------------------------------ */

static uint32_t *g_parent;

static uint32_t find(uint32_t x) {
  while (g_parent[x] != x) x = g_parent[x] = g_parent[g_parent[x]];
  return x;
}

static void unite(uint32_t a, uint32_t b) {
  a = find(a);
  b = find(b);
  if (a != b) g_parent[a] = b;
}

/* Whether instruction op has a result type (word 1) and result id (word 2). */
static bool has_type_and_result(uint32_t op) {
  switch (op) {
    case OP_UNDEF: case OP_CONSTANT_TRUE: case OP_CONSTANT_FALSE: case OP_CONSTANT:
    case OP_CONSTANT_COMPOSITE: case OP_CONSTANT_NULL: case OP_VARIABLE: case OP_LOAD:
    case OP_ACCESS_CHAIN: case OP_IN_BOUNDS_ACCESS_CHAIN: case OP_PTR_ACCESS_CHAIN:
    case OP_COPY_OBJECT: case OP_SELECT: case OP_PHI: case OP_COOPMAT_LOAD_NV:
    case OP_COOPMAT_MULADD_NV: case OP_COOPMAT_LENGTH_NV:
      return true;
    default:
      return false;
  }
}

/* Links the ids an instruction passes a matrix (or a pointer to one)
 * between. */
static void link_values(const inst *i) {
  const uint32_t *w = i->w;
  switch (opcode(i)) {
    case OP_LOAD: case OP_COPY_OBJECT:
    case OP_ACCESS_CHAIN: case OP_IN_BOUNDS_ACCESS_CHAIN: case OP_PTR_ACCESS_CHAIN:
      unite(w[2], w[3]);
      break;
    case OP_STORE: case OP_COPY_MEMORY:
      unite(w[1], w[2]);
      break;
    case OP_SELECT:
      unite(w[2], w[4]);
      unite(w[2], w[5]);
      break;
    case OP_PHI:
      for (uint32_t k = 3; k + 1 < i->n; k += 2) unite(w[2], w[k]);
      break;
    default:
      break;
  }
}

/* ------------------------------------------------------------------ */
/* The rewrite                                                         */
/* ------------------------------------------------------------------ */

typedef struct ctx {
  module *m;
  uint32_t bound;        /* ids below this existed in the input */
  int *use;              /* per NV matrix type id: USE_* (USE_NONE unknown) */
  bool *nvtype;          /* id is an OpTypeCooperativeMatrixNV */
  bool *splits;          /* NV type used both as A and B */
  uint32_t *b_copy;      /* type id -> its MatrixB copy (0 none yet) */
  bool *derived;         /* type id is or is built on a split type */
  size_t *def;           /* id -> index of its defining instruction + 1 */
  uint32_t *type_of;     /* value id -> result type id */
  int *cls_use;          /* class root -> USE_A / USE_B / USE_NONE */
} ctx;

static void index_defs(ctx *c) {
  memset(c->def, 0, c->bound * sizeof *c->def);
  for (size_t k = 0; k < c->m->count; k++) {
    inst *i = &c->m->ins[k];
    uint32_t op = opcode(i);
    uint32_t res = 0;
    if (has_type_and_result(op)) res = i->w[2];
    else if (op == OP_TYPE_INT || op == OP_TYPE_FLOAT || op == OP_TYPE_ARRAY ||
             op == OP_TYPE_RUNTIME_ARRAY || op == OP_TYPE_POINTER || op == OP_TYPE_COOPMAT_NV)
      res = i->w[1];
    if (res && res < c->bound) c->def[res] = k + 1;
  }
}

/* The MatrixB copy of type t (t is or is built on a split type); created
 * after t's definition. */
static uint32_t b_type(ctx *c, uint32_t t) {
  if (t < c->bound && c->b_copy[t]) return c->b_copy[t];
  if (t >= c->bound || !c->def[t]) die("type %u has no definition", t);
  size_t at = c->def[t] - 1;
  inst *i = &c->m->ins[at];
  uint32_t op = opcode(i), id = new_id(c->m);
  inst copy;
  switch (op) {
    case OP_TYPE_COOPMAT_NV:  /* rewritten to KHR with its use later */
      copy = make_inst(op, i->w + 1, i->n - 1);
      copy.w[1] = id;
      break;
    case OP_TYPE_ARRAY: {
      uint32_t elem = i->w[2], len = i->w[3];
      uint32_t ops[3] = {id, b_type(c, elem), len};
      copy = make_inst(op, ops, 3);
      break;
    }
    case OP_TYPE_RUNTIME_ARRAY: {
      uint32_t elem = i->w[2];
      uint32_t ops[2] = {id, b_type(c, elem)};
      copy = make_inst(op, ops, 2);
      break;
    }
    case OP_TYPE_POINTER: {
      uint32_t sc = i->w[2], elem = i->w[3];
      uint32_t ops[3] = {id, sc, b_type(c, elem)};
      copy = make_inst(op, ops, 3);
      break;
    }
    default:
      die("cannot copy type %u (opcode %u) for a MatrixB use", t, op);
  }
  /* Definitions may have moved (b_type of the element inserted before). */
  at = c->def[t] - 1;
  insert(c->m, at + 1, copy);
  for (uint32_t k = 0; k < c->bound; k++)
    if (c->def[k] > at + 1) c->def[k]++;
  c->b_copy[t] = id;
  c->use = realloc(c->use, (size_t)c->m->header[3] * sizeof *c->use);
  if (!c->use) die("out of memory");
  c->use[id] = op == OP_TYPE_COOPMAT_NV ? USE_B : USE_NONE;
  return id;
}

static void mark_derived(ctx *c) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (size_t k = 0; k < c->m->count; k++) {
      inst *i = &c->m->ins[k];
      uint32_t op = opcode(i), res = 0, elem = 0;
      if (op == OP_TYPE_ARRAY || op == OP_TYPE_RUNTIME_ARRAY) res = i->w[1], elem = i->w[2];
      else if (op == OP_TYPE_POINTER) res = i->w[1], elem = i->w[3];
      else continue;
      if (elem < c->bound && c->derived[elem] && !c->derived[res]) {
        c->derived[res] = true;
        changed = true;
      }
    }
  }
}

/* Checks the rewritten module's invariants, so that a shader change the
 * rewrite does not handle fails the build instead of a pipeline: no NV
 * matrix instruction or capability is left; every MulAdd's A, B and C
 * operands and result have KHR types of uses A, B, accumulator, B having
 * its own type; every Use operand is one of the constants 0-2; in bf16
 * mode no IEEE 16-bit float type or Float16 capability is left. */
static void verify(const module *m, bool bf16) {
  uint32_t bound = m->header[3];
  uint32_t *type_of = xmalloc(bound * sizeof *type_of);
  int *use = xmalloc(bound * sizeof *use);
  int64_t *cval = xmalloc(bound * sizeof *cval);
  for (uint32_t k = 0; k < bound; k++) use[k] = USE_NONE, cval[k] = -1;
  for (size_t k = 0; k < m->count; k++) {
    const inst *i = &m->ins[k];
    uint32_t op = opcode(i);
    if (op >= OP_TYPE_COOPMAT_NV && op <= OP_COOPMAT_LENGTH_NV)
      die("verify: NV matrix opcode %u left", op);
    if (op == OP_CAPABILITY && i->w[1] == CAP_COOPMAT_NV) die("verify: NV capability left");
    if (bf16 && op == OP_CAPABILITY && i->w[1] == CAP_FLOAT16)
      die("verify: Float16 capability left in a bf16 module");
    if (bf16 && op == OP_TYPE_FLOAT && i->w[2] == 16 && i->n < 4)
      die("verify: an IEEE 16-bit float type is left in a bf16 module");
    if (op == OP_CONSTANT && i->n == 4) cval[i->w[2]] = i->w[3];
    if (op == OP_TYPE_COOPMAT_KHR) {
      int64_t u = cval[i->w[6]];
      if (u < USE_A || u > USE_ACC) die("verify: matrix type %u has no valid use", i->w[1]);
      use[i->w[1]] = (int)u;
    }
    if (i->n > 2 && has_type_and_result(op)) type_of[i->w[2]] = i->w[1];
    if (op == OP_COOPMAT_LOAD_KHR || op == OP_COOPMAT_MULADD_KHR) type_of[i->w[2]] = i->w[1];
    if (op == OP_COOPMAT_MULADD_KHR) {
      static const int want[4] = {USE_ACC, USE_A, USE_B, USE_ACC};
      uint32_t ids[4] = {i->w[2], i->w[3], i->w[4], i->w[5]};
      for (int r = 0; r < 4; r++)
        if (use[type_of[ids[r]]] != want[r])
          die("verify: MulAdd operand %u has a matrix type of use %d, not %d", ids[r],
              use[type_of[ids[r]]], want[r]);
    }
  }
  free(type_of), free(use), free(cval);
}

/* Inserts OpExtension name after the module's last OpCapability or
 * OpExtension. */
static void add_extension(module *m, const char *name) {
  size_t at = 0;
  for (size_t k = 0; k < m->count; k++) {
    uint32_t op = opcode(&m->ins[k]);
    if (op == OP_CAPABILITY || op == OP_EXTENSION) at = k + 1;
  }
  uint32_t ops[16] = {0};
  size_t len = strlen(name) + 1;
  if (len > sizeof ops) die("extension name too long");
  memcpy(ops, name, len);
  insert(m, at, make_inst(OP_EXTENSION, ops, (uint32_t)((len + 3) / 4)));
}

/* khr-tensor (see the header): rewrites the workgroup-scope row-major
 * loads of m into tensor-addressing loads. zero_id and two_id are uint
 * constants 0 and 2, row_major_id the layout constant of row-major loads.
 * Returns how many loads it rewrote. */
static size_t tensor_loads(module *m, uint32_t uint_type, uint32_t zero_id, uint32_t two_id,
                           uint32_t row_major_id) {
  uint32_t bound = m->header[3];
  size_t *def = xmalloc(bound * sizeof *def); /* types: instruction index + 1 */
  uint32_t *value = xmalloc(bound * sizeof *value);
  bool *is_const = xmalloc(bound);
  for (size_t k = 0; k < m->count; k++) {
    const inst *i = &m->ins[k];
    uint32_t op = opcode(i);
    if (op == OP_TYPE_COOPMAT_KHR && i->n > 1) def[i->w[1]] = k + 1;
    if (op == OP_CONSTANT && i->n == 4 && i->w[1] == uint_type) {
      is_const[i->w[2]] = true;
      value[i->w[2]] = i->w[3];
    }
  }
  size_t first_fn = m->count;
  for (size_t k = 0; k < m->count && first_fn == m->count; k++)
    if (opcode(&m->ins[k]) == OP_FUNCTION) first_fn = k;
  uint32_t eight = new_id(m), layout_type = new_id(m);
  uint32_t c8[3] = {uint_type, eight, 8};
  uint32_t tl[3] = {layout_type, two_id, zero_id}; /* 2-D, clamp mode undefined */
  insert(m, first_fn++, make_inst(OP_CONSTANT, c8, 3));
  insert(m, first_fn++, make_inst(OP_TYPE_TENSOR_LAYOUT_NV, tl, 3));
  size_t rewritten = 0;
  for (size_t k = first_fn; k < m->count; k++) {
    inst *i = &m->ins[k];
    /* type, result, pointer, layout, stride, [memory operands] */
    if (opcode(i) != OP_COOPMAT_LOAD_KHR || i->n < 6 || i->w[4] != row_major_id) continue;
    uint32_t mtype = i->w[1], ptr = i->w[3], stride = i->w[5];
    if (mtype >= bound || !def[mtype]) continue;
    const inst *t = &m->ins[def[mtype] - 1]; /* types precede the insertions */
    /* OpTypeCooperativeMatrixKHR result, component, scope, rows, columns, use */
    if (t->n != 7 || !is_const[t->w[3]] || value[t->w[3]] != 2) continue;
    /* The pointer's definition: an earlier instruction of the function. */
    size_t at = k;
    while (at > first_fn && !(has_type_and_result(opcode(&m->ins[at - 1])) &&
                              m->ins[at - 1].n > 2 && m->ins[at - 1].w[2] == ptr))
      at--;
    if (at == first_fn) continue;
    const inst *chain = &m->ins[at - 1];
    /* OpAccessChain type, result, base, member, element */
    if (opcode(chain) != OP_ACCESS_CHAIN || chain->n != 6) continue;
    uint32_t ptr_type = chain->w[1], base = chain->w[3], member = chain->w[4];
    uint32_t element = chain->w[5], rows = t->w[4], cols = t->w[5];
    uint32_t nmem = i->n - 6, mem[8];
    if (nmem > 8) die("long OpCooperativeMatrixLoadKHR");
    memcpy(mem, i->w + 6, nmem * sizeof *mem);
    uint32_t res = i->w[2];
    uint32_t start = new_id(m), row = new_id(m), colw = new_id(m), col = new_id(m);
    uint32_t width = new_id(m), height = new_id(m), l0 = new_id(m), l1 = new_id(m);
    uint32_t l2 = new_id(m), undef = new_id(m);
    uint32_t u[2] = {mtype, undef};
    insert(m, first_fn++, make_inst(OP_UNDEF, u, 2));
    k++;
    const uint32_t seq[][8] = {
        {OP_ACCESS_CHAIN, 5, ptr_type, start, base, member, zero_id},
        {OP_UDIV, 4, uint_type, row, element, stride},
        {OP_UMOD, 4, uint_type, colw, element, stride},
        {OP_IMUL, 4, uint_type, col, colw, eight},
        {OP_IMUL, 4, uint_type, width, stride, eight},
        {OP_IADD, 4, uint_type, height, row, rows},
        {OP_CREATE_TENSOR_LAYOUT_NV, 2, layout_type, l0},
        {OP_TENSOR_LAYOUT_SET_DIMENSION_NV, 5, layout_type, l1, l0, height, width},
    };
    for (size_t q = 0; q < sizeof seq / sizeof seq[0]; q++)
      insert(m, k++, make_inst(seq[q][0], seq[q] + 2, seq[q][1]));
    uint32_t slice[7] = {layout_type, l2, l1, row, rows, col, cols};
    insert(m, k++, make_inst(OP_TENSOR_LAYOUT_SLICE_NV, slice, 7));
    /* type, result, pointer, object, tensor layout, memory operands,
     * tensor addressing operands (none) */
    uint32_t ops[16] = {mtype, res, start, undef, l2};
    uint32_t n = 5;
    if (nmem == 0) ops[n++] = 0;
    for (uint32_t q = 0; q < nmem; q++) ops[n++] = mem[q];
    ops[n++] = 0;
    replace(&m->ins[k], OP_COOPMAT_LOAD_TENSOR_NV, ops, n);
    rewritten++;
  }
  if (rewritten) {
    size_t cap_at = 0;
    for (size_t k = 0; k < m->count; k++)
      if (opcode(&m->ins[k]) == OP_CAPABILITY) cap_at = k + 1;
    uint32_t caps[2] = {CAP_TENSOR_ADDRESSING_NV, CAP_COOPMAT_TENSOR_ADDRESSING_NV};
    for (int q = 0; q < 2; q++) insert(m, cap_at++, make_inst(OP_CAPABILITY, caps + q, 1));
    add_extension(m, "SPV_NV_tensor_addressing");
    add_extension(m, "SPV_NV_cooperative_matrix2");
  }
  free(def), free(value), free(is_const);
  return rewritten;
}

int main(int argc, char **argv) {
  if (argc != 5 ||
      (strcmp(argv[1], "khr") && strcmp(argv[1], "khr-bf16") && strcmp(argv[1], "khr-tensor"))) {
    fprintf(stderr, "usage: spv_coopmat_khr khr|khr-bf16|khr-tensor IN.spv OUT.h NAME\n");
    return 2;
  }
  bool bf16 = !strcmp(argv[1], "khr-bf16");
  bool tensor = !strcmp(argv[1], "khr-tensor");
  g_in = argv[2];
  module m = {0};
  read_module(argv[2], &m);
  ctx c = {.m = &m, .bound = m.header[3]};
  uint32_t bound = c.bound;
  c.use = xmalloc(bound * sizeof *c.use);
  c.nvtype = xmalloc(bound);
  c.splits = xmalloc(bound);
  c.b_copy = xmalloc(bound * sizeof *c.b_copy);
  c.derived = xmalloc(bound);
  c.def = xmalloc(bound * sizeof *c.def);
  c.type_of = xmalloc(bound * sizeof *c.type_of);
  c.cls_use = xmalloc(bound * sizeof *c.cls_use);
  g_parent = xmalloc(bound * sizeof *g_parent);
  for (uint32_t k = 0; k < bound; k++) {
    c.use[k] = USE_NONE;
    c.cls_use[k] = USE_NONE;
    g_parent[k] = k;
  }

  /* Types, uses and value classes. */
  uint32_t uint_type = 0, half_type = 0;
  bool *is_true = xmalloc(bound), *is_false = xmalloc(bound);
  for (size_t k = 0; k < m.count; k++) {
    inst *i = &m.ins[k];
    uint32_t op = opcode(i);
    if (i->n > 1 && has_type_and_result(op)) {
      if (i->w[2] >= bound || i->w[1] >= bound) die("id out of bounds");
      c.type_of[i->w[2]] = i->w[1];
    }
    if (op == OP_TYPE_INT && i->w[2] == 32 && i->w[3] == 0 && !uint_type) uint_type = i->w[1];
    if (op == OP_TYPE_FLOAT && i->w[2] == 16) half_type = i->w[1];
    if (op == OP_TYPE_COOPMAT_NV) c.nvtype[i->w[1]] = true;
    if (op == OP_CONSTANT_TRUE) is_true[i->w[2]] = true;
    if (op == OP_CONSTANT_FALSE) is_false[i->w[2]] = true;
    if (op == OP_TYPE_COOPMAT_KHR || op == OP_COOPMAT_LOAD_KHR) die("already uses KHR matrices");
    link_values(i);
  }
  if (!uint_type) die("no 32-bit unsigned integer type");
  if (bf16 && !half_type) die("khr-bf16: no 16-bit float type");
  for (size_t k = 0; k < m.count; k++) {
    inst *i = &m.ins[k];
    if (opcode(i) != OP_COOPMAT_MULADD_NV) continue;
    uint32_t roles[3] = {i->w[3], i->w[4], i->w[5]};
    for (int r = 0; r < 3; r++) {
      uint32_t t = c.type_of[roles[r]];
      if (!c.nvtype[t]) die("MulAdd operand %u is not a matrix", roles[r]);
      if (r == USE_ACC || c.use[t] == USE_ACC) {
        if (c.use[t] != USE_NONE && c.use[t] != USE_ACC)
          die("matrix type %u is both an accumulator and an operand", t);
        c.use[t] = USE_ACC;
      } else if (c.use[t] == USE_NONE) {
        c.use[t] = r;
      } else if (c.use[t] != r) {
        c.splits[t] = true;
      }
      if (r != USE_ACC) {
        uint32_t root = find(roles[r]);
        if (c.cls_use[root] != USE_NONE && c.cls_use[root] != r)
          die("one value reaches a MulAdd both as A and as B");
        c.cls_use[root] = r;
      }
    }
    c.use[c.type_of[i->w[2]]] = USE_ACC;
  }
  /* A split type stays MatrixA; MatrixB values get copies. */
  for (uint32_t t = 0; t < bound; t++) {
    if (c.splits[t]) {
      c.use[t] = USE_A;
      c.derived[t] = true;
    } else if (c.nvtype[t] && c.use[t] == USE_NONE) {
      c.use[t] = USE_ACC; /* unused in products: any use is valid */
    }
  }
  mark_derived(&c);
  index_defs(&c);
  /* Values that reach a MulAdd as B, of a split type or one built on it:
   * first the types they need (copies are inserted, moving instructions),
   * then the retyping. */
  bool *need_b = xmalloc(bound);
  for (size_t k = 0; k < m.count; k++) {
    inst *i = &m.ins[k];
    uint32_t op = opcode(i);
    if (!has_type_and_result(op) || i->w[1] >= bound || !c.derived[i->w[1]]) continue;
    if (c.cls_use[find(i->w[2])] != USE_B) continue;
    if (op != OP_VARIABLE && op != OP_LOAD && op != OP_ACCESS_CHAIN &&
        op != OP_IN_BOUNDS_ACCESS_CHAIN && op != OP_PTR_ACCESS_CHAIN && op != OP_COPY_OBJECT &&
        op != OP_SELECT && op != OP_PHI && op != OP_COOPMAT_LOAD_NV && op != OP_UNDEF)
      die("opcode %u produces a MatrixB value; not supported", op);
    need_b[i->w[1]] = true;
  }
  for (uint32_t t = 0; t < bound; t++)
    if (need_b[t]) (void)b_type(&c, t);
  for (size_t k = 0; k < m.count; k++) {
    inst *i = &m.ins[k];
    uint32_t op = opcode(i);
    if (!has_type_and_result(op) || i->w[1] >= bound || !need_b[i->w[1]]) continue;
    if (i->w[2] < bound && c.cls_use[find(i->w[2])] == USE_B) i->w[1] = c.b_copy[i->w[1]];
  }

  /* Constants for uses and layouts, after the 32-bit uint type. */
  uint32_t cst[3];
  size_t uint_at = 0;
  for (size_t k = 0; k < m.count; k++)
    if (opcode(&m.ins[k]) == OP_TYPE_INT && m.ins[k].w[1] == uint_type) uint_at = k;
  for (uint32_t v = 0; v < 3; v++) {
    cst[v] = new_id(&m);
    uint32_t ops[3] = {uint_type, cst[v], v};
    insert(&m, uint_at + 1 + v, make_inst(OP_CONSTANT, ops, 3));
  }
  if (m.header[3] > bound) {
    c.use = realloc(c.use, (size_t)m.header[3] * sizeof *c.use);
    if (!c.use) die("out of memory");
  }

  /* Opcodes. */
  bool saw_nv_cap = false;
  for (size_t k = 0; k < m.count; k++) {
    inst *i = &m.ins[k];
    uint32_t op = opcode(i), *w = i->w;
    switch (op) {
      case OP_CAPABILITY:
        if (w[1] == CAP_COOPMAT_NV) {
          w[1] = CAP_COOPMAT_KHR;
          saw_nv_cap = true;
          if (bf16) {
            uint32_t a = CAP_BFLOAT16_TYPE, b = CAP_BFLOAT16_COOPMAT;
            insert(&m, k + 1, make_inst(OP_CAPABILITY, &a, 1));
            insert(&m, k + 2, make_inst(OP_CAPABILITY, &b, 1));
            k += 2;
          }
        } else if (bf16 && w[1] == CAP_FLOAT16) {
          free(i->w);
          memmove(m.ins + k, m.ins + k + 1, (m.count - k - 1) * sizeof *m.ins);
          m.count--;
          k--;
        }
        break;
      case OP_EXTENSION:
        if (!strcmp((const char *)(w + 1), "SPV_NV_cooperative_matrix")) {
          static const char kKhr[] = "SPV_KHR_cooperative_matrix";
          uint32_t ops[8] = {0};
          memcpy(ops, kKhr, sizeof kKhr);
          replace(i, OP_EXTENSION, ops, (uint32_t)(sizeof kKhr + 3) / 4);
          if (bf16) {
            static const char kBf[] = "SPV_KHR_bfloat16";
            uint32_t bops[8] = {0};
            memcpy(bops, kBf, sizeof kBf);
            insert(&m, k + 1, make_inst(OP_EXTENSION, bops, (uint32_t)(sizeof kBf + 3) / 4));
            k++;
          }
        }
        break;
      case OP_TYPE_FLOAT:
        if (bf16 && w[1] == half_type) {
          uint32_t ops[3] = {w[1], 16, 0 /* BFloat16KHR */};
          replace(i, OP_TYPE_FLOAT, ops, 3);
        }
        break;
      case OP_TYPE_COOPMAT_NV: {
        int use = c.use[w[1]];
        if (use == USE_NONE) die("matrix type %u without a use", w[1]);
        uint32_t ops[6] = {w[1], w[2], w[3], w[4], w[5], cst[use]};
        replace(i, OP_TYPE_COOPMAT_KHR, ops, 6);
        break;
      }
      case OP_COOPMAT_LOAD_NV: {
        /* type, result, pointer, stride, column-major, [memory operands] */
        if (i->n < 6) die("short OpCooperativeMatrixLoadNV");
        bool col = is_true[w[5]];
        if (!col && !is_false[w[5]]) die("column-major operand %u is not a constant", w[5]);
        uint32_t n = i->n - 1, ops[16];
        if (n > 16) die("long OpCooperativeMatrixLoadNV");
        ops[0] = w[1], ops[1] = w[2], ops[2] = w[3], ops[3] = cst[col ? 1 : 0], ops[4] = w[4];
        for (uint32_t q = 5; q < n; q++) ops[q] = w[q + 1];
        replace(i, OP_COOPMAT_LOAD_KHR, ops, n);
        break;
      }
      case OP_COOPMAT_STORE_NV: {
        /* pointer, object, stride, column-major, [memory operands] */
        if (i->n < 5) die("short OpCooperativeMatrixStoreNV");
        bool col = is_true[w[4]];
        if (!col && !is_false[w[4]]) die("column-major operand %u is not a constant", w[4]);
        uint32_t n = i->n - 1, ops[16];
        if (n > 16) die("long OpCooperativeMatrixStoreNV");
        ops[0] = w[1], ops[1] = w[2], ops[2] = cst[col ? 1 : 0], ops[3] = w[3];
        for (uint32_t q = 4; q < n; q++) ops[q] = w[q + 1];
        replace(i, OP_COOPMAT_STORE_KHR, ops, n);
        break;
      }
      case OP_COOPMAT_MULADD_NV:
        w[0] = (w[0] & 0xFFFF0000u) | OP_COOPMAT_MULADD_KHR;
        break;
      case OP_COOPMAT_LENGTH_NV:
        w[0] = (w[0] & 0xFFFF0000u) | OP_COOPMAT_LENGTH_KHR;
        break;
      default:
        break;
    }
  }
  if (!saw_nv_cap) die("no CooperativeMatrixNV capability: nothing to rewrite");
  if (tensor && tensor_loads(&m, uint_type, cst[0], cst[2], cst[0]) == 0)
    die("khr-tensor: no row-major workgroup-scope load from a buffer element");
  verify(&m, bf16);

  FILE *out = fopen(argv[3], "w");
  if (!out) die("cannot write %s", argv[3]);
  fprintf(out, "/* %s rewritten by tools/spv_coopmat_khr.c (%s). */\n", argv[2], argv[1]);
  fprintf(out, "const uint32_t %s[] = {\n", argv[4]);
  size_t col = 0;
  for (int k = 0; k < 5; k++) fprintf(out, "0x%08x,%s", m.header[k], ++col % 8 ? "" : "\n");
  for (size_t k = 0; k < m.count; k++)
    for (uint32_t q = 0; q < m.ins[k].n; q++)
      fprintf(out, "0x%08x,%s", m.ins[k].w[q], ++col % 8 ? "" : "\n");
  fprintf(out, "\n};\n");
  if (fclose(out) != 0) die("writing %s failed", argv[3]);
  for (size_t k = 0; k < m.count; k++) free(m.ins[k].w);
  free(m.ins);
  free(c.use), free(c.nvtype), free(c.splits), free(c.b_copy), free(c.derived);
  free(c.def), free(c.type_of), free(c.cls_use), free(g_parent);
  free(is_true), free(is_false), free(need_b);
  return 0;
}
