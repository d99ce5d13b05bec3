// common.glsl - shared declarations of every nx_vulkan compute shader.
//
// Kernels receive their buffers as buffer device addresses in push
// constants (no descriptors). Metadata that does not fit in push constants
// (shapes and strides) lives in the argument arena, also by address.
// Specialization constant 0 is the workgroup size; 1 is the op; 2 the
// variant of a kernel family.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference2 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = 0;
layout(constant_id = 2) const uint VARIANT = 0;

layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer ArgsRef {
  uint d[];
};

#define NXV_MAX_RANK 16

#if defined(T_BF16) || defined(O_BF16)
// f32 -> bf16 bits by truncation; a NaN keeps a quiet NaN's pattern (its
// upper half alone could read as infinity).
uint16_t nxv_bf16_st(float c) {
  return uint16_t(isnan(c) ? 0x7FC0u : (floatBitsToUint(c) >> 16));
}
#endif

#if defined(T_KIND) && !(T_KIND == KIND_COMPLEX && TC_BITS == 64)
// An immediate operand: one element of T given as its bits (the low T_BITS
// of bits, as the buffer would hold them), in the compute type. Kernels
// with such operands (binary.comp, compare.comp) take the bits from push
// constants instead of reading a one-element buffer. Not for c128, whose
// 16 bytes do not fit.
#define NXV_IMM 1
TC nxv_imm(uint64_t bits) {
  uint lo = uint(bits);
#if T_ID == 8
  return unpackHalf2x16(lo).x;
#elif defined(T_BF16)
  return uintBitsToFloat(lo << 16);
#elif T_KIND == KIND_COMPLEX
  return vec2(uintBitsToFloat(lo), uintBitsToFloat(uint(bits >> 32)));
#elif T_KIND == KIND_FLOAT && TC_BITS == 64
  return packDouble2x32(uvec2(lo, uint(bits >> 32)));
#elif T_KIND == KIND_FLOAT
  return uintBitsToFloat(lo);
#elif TC_BITS == 64
  return TC(bits);
#elif T_KIND == KIND_SINT
  return bitfieldExtract(int(lo), 0, T_BITS);
#else
  return bitfieldExtract(lo, 0, T_BITS);
#endif
}
#endif

// Grid-stride helpers.
uint nxv_gid() { return gl_GlobalInvocationID.x; }
uint nxv_nthreads() { return gl_NumWorkGroups.x * gl_WorkGroupSize.x; }
