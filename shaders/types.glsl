// types.glsl - element-type helpers. The including shader defines, for each
// type slot X in {T (input), O (output)}:
//   X        the GLSL scalar type (float, double, int)
//   X4       its 4-vector type
//   X_KIND   0 = float, 1 = signed integer, 2 = unsigned integer
//   X_BITS   width in bits
#define KIND_FLOAT 0
#define KIND_SINT 1
#define KIND_UINT 2
