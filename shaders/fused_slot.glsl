// fused_slot.glsl - the ops of one instruction slot of fused.comp: SLOT_UN,
// SLOT_BIN and SLOT_CMP, which compute the unary, binary and comparison op
// named by bits 2-7 of the slot's instruction word SLOT_W (a
// specialization constant). Included once per slot; the includer defines
// the four names first, and they are undefined after.
#undef UNARY_FN
#undef UNARY_ARGS
#undef UNARY_SEL
#define UNARY_FN SLOT_UN
#define UNARY_ARGS
#define UNARY_SEL (((SLOT_W) >> 2) & 63u)
#include "unary_ops.glsl"
#undef BINARY_FN
#undef BINARY_ARGS
#undef BINARY_SEL
#define BINARY_FN SLOT_BIN
#define BINARY_ARGS
#define BINARY_SEL (((SLOT_W) >> 2) & 63u)
#include "binary_ops.glsl"
#undef COMPARE_FN
#undef COMPARE_ARGS
#undef COMPARE_SEL
#define COMPARE_FN SLOT_CMP
#define COMPARE_ARGS
#define COMPARE_SEL (((SLOT_W) >> 2) & 63u)
#include "compare_ops.glsl"
#undef SLOT_W
#undef SLOT_UN
#undef SLOT_BIN
#undef SLOT_CMP
