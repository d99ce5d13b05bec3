// types.glsl - element types by Nx type id (the order of nxv_dtype in
// include/nxv.h): T_ID names the input type, O_ID (optional) the output
// type, U_ID (optional) a second input type that binary.comp reads for one
// operand (a real type other than T). Include it right after
// GL_GOOGLE_include_directive, before any declaration: it enables the
// storage extensions the types need.
//
// For each slot X in {T, O} it defines:
//   X          the storage type (what the buffer holds)
//   XC         the compute type: narrow integers compute in 32 bits, f16 and
//              bf16 in f32; arithmetic wraps to X's width on store
//   X4, XC4    4-vectors of both (X_VEC is 1 where 4-wide loads apply)
//   X_KIND     0 float, 1 signed integer, 2 unsigned integer
//   X_BITS     storage width; XC_BITS compute width
//   X_ALIGN    element alignment in bytes
//   XR         complex types only: the component type (float, double)
//   X_MIN/MAX  integer range, as XC literals
//   X_LD(v)    storage -> compute;  X_ST(c) compute -> storage
// U defines only U (storage), U4, U_ALIGN, U_LD(v) and U_LD4(v) (a U4),
// v in U's own compute type (int or uint for narrow integers, float for
// f16 and bf16).
// Complex types (c64, c128) are float pairs (vec2, dvec2: re, im) computed
// in their own precision; X_FROM_REAL(x) makes one from a real value.
// bf16 is stored as its bits (uint16_t): the upper half of an f32, written
// by truncation as Nx.BinaryBackend writes it (NaN stays NaN;
// nxv_bf16_st in common.glsl).
#define KIND_FLOAT 0
#define KIND_SINT 1
#define KIND_UINT 2
#define KIND_COMPLEX 3

#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

#if (T_ID == 0 || T_ID == 4) || (defined(O_ID) && (O_ID == 0 || O_ID == 4)) || \
    (defined(U_ID) && (U_ID == 0 || U_ID == 4)) || defined(NEED_8BIT)
#extension GL_EXT_shader_8bit_storage : require
#endif
#if (T_ID == 1 || T_ID == 5 || T_ID == 8 || T_ID == 9) || \
    (defined(O_ID) && (O_ID == 1 || O_ID == 5 || O_ID == 8 || O_ID == 9)) || \
    (defined(U_ID) && (U_ID == 1 || U_ID == 5 || U_ID == 8 || U_ID == 9))
#extension GL_EXT_shader_16bit_storage : require
#endif

#define T_VEC 1
#if T_ID == 0
#define T int8_t
#define T4 i8vec4
#define TC int
#define TC4 ivec4
#define T_KIND 1
#define T_BITS 8
#define TC_BITS 32
#define T_ALIGN 1
#define T_MIN (-128)
#define T_MAX 127
#elif T_ID == 1
#define T int16_t
#define T4 i16vec4
#define TC int
#define TC4 ivec4
#define T_KIND 1
#define T_BITS 16
#define TC_BITS 32
#define T_ALIGN 2
#define T_MIN (-32768)
#define T_MAX 32767
#elif T_ID == 2
#define T int
#define T4 ivec4
#define TC int
#define TC4 ivec4
#define T_KIND 1
#define T_BITS 32
#define TC_BITS 32
#define T_ALIGN 4
#define T_MIN (-2147483647 - 1)
#define T_MAX 2147483647
#elif T_ID == 3
#define T int64_t
#define T4 i64vec4
#define TC int64_t
#define TC4 i64vec4
#define T_KIND 1
#define T_BITS 64
#define TC_BITS 64
#define T_ALIGN 8
#define T_MIN (-9223372036854775807l - 1l)
#define T_MAX 9223372036854775807l
#elif T_ID == 4
#define T uint8_t
#define T4 u8vec4
#define TC uint
#define TC4 uvec4
#define T_KIND 2
#define T_BITS 8
#define TC_BITS 32
#define T_ALIGN 1
#define T_MIN 0u
#define T_MAX 255u
#elif T_ID == 5
#define T uint16_t
#define T4 u16vec4
#define TC uint
#define TC4 uvec4
#define T_KIND 2
#define T_BITS 16
#define TC_BITS 32
#define T_ALIGN 2
#define T_MIN 0u
#define T_MAX 65535u
#elif T_ID == 6
#define T uint
#define T4 uvec4
#define TC uint
#define TC4 uvec4
#define T_KIND 2
#define T_BITS 32
#define TC_BITS 32
#define T_ALIGN 4
#define T_MIN 0u
#define T_MAX 4294967295u
#elif T_ID == 7
#define T uint64_t
#define T4 u64vec4
#define TC uint64_t
#define TC4 u64vec4
#define T_KIND 2
#define T_BITS 64
#define TC_BITS 64
#define T_ALIGN 8
#define T_MIN 0ul
#define T_MAX 18446744073709551615ul
#elif T_ID == 8
#define T float16_t
#define T4 f16vec4
#define TC float
#define TC4 vec4
#define T_KIND 0
#define T_BITS 16
#define TC_BITS 32
#define T_ALIGN 2
#elif T_ID == 9
#define T uint16_t
#define T4 u16vec4
#define TC float
#define TC4 vec4
#define T_KIND 0
#define T_BITS 16
#define TC_BITS 32
#define T_ALIGN 2
#define T_BF16 1
#undef T_VEC
#define T_VEC 0
#elif T_ID == 10
#define T float
#define T4 vec4
#define TC float
#define TC4 vec4
#define T_KIND 0
#define T_BITS 32
#define TC_BITS 32
#define T_ALIGN 4
#elif T_ID == 11
#define T double
#define T4 dvec4
#define TC double
#define TC4 dvec4
#define T_KIND 0
#define T_BITS 64
#define TC_BITS 64
#define T_ALIGN 8
#elif T_ID == 12
#define T vec2
#define T4 vec2
#define TC vec2
#define TC4 vec2
#define TR float
#define T_KIND 3
#define T_BITS 64
#define TC_BITS 32
#define T_ALIGN 8
#undef T_VEC
#define T_VEC 0
#elif T_ID == 13
#define T dvec2
#define T4 dvec2
#define TC dvec2
#define TC4 dvec2
#define TR double
#define T_KIND 3
#define T_BITS 128
#define TC_BITS 64
#define T_ALIGN 16
#undef T_VEC
#define T_VEC 0
#else
#error "T_ID must name an Nx type (0..13)"
#endif

#if defined(T_BF16)
#define T_LD(v) uintBitsToFloat(uint(v) << 16)
#define T_ST(c) nxv_bf16_st(c)
#else
#define T_LD(v) TC(v)
#define T_ST(c) T(c)
#endif
// 4-vectors: T_LD4(v) a T4 -> TC4, T_ST4(c) a TC4 -> T4 (bf16: its bits,
// stored as nxv_bf16_st stores them). bf16 has no T_VEC (a TC4(T4)
// conversion would convert its bits as numbers): the flat paths of
// binary.comp and unary.comp that take it use these.
#if defined(T_BF16)
#define T_LD4(v) uintBitsToFloat(uvec4(v) << 16)
#define T_ST4(c) T4(mix(floatBitsToUint(c) >> 16, uvec4(0x7FC0u), isnan(c)))
#else
#define T_LD4(v) TC4(v)
#define T_ST4(c) T4(c)
#endif
#if T_KIND == KIND_COMPLEX
#define T_FROM_REAL(x) TC(TR(x), TR(0))
#else
#define T_FROM_REAL(x) TC(x)
#endif

#if defined(O_ID)
#define O_VEC 1
#if O_ID == 0
#define O int8_t
#define O4 i8vec4
#define OC int
#define OC4 ivec4
#define O_KIND 1
#define O_BITS 8
#define O_ALIGN 1
#define O_MIN (-128)
#define O_MAX 127
#elif O_ID == 1
#define O int16_t
#define O4 i16vec4
#define OC int
#define OC4 ivec4
#define O_KIND 1
#define O_BITS 16
#define O_ALIGN 2
#define O_MIN (-32768)
#define O_MAX 32767
#elif O_ID == 2
#define O int
#define O4 ivec4
#define OC int
#define OC4 ivec4
#define O_KIND 1
#define O_BITS 32
#define O_ALIGN 4
#define O_MIN (-2147483647 - 1)
#define O_MAX 2147483647
#elif O_ID == 3
#define O int64_t
#define O4 i64vec4
#define OC int64_t
#define OC4 i64vec4
#define O_KIND 1
#define O_BITS 64
#define O_ALIGN 8
#define O_MIN (-9223372036854775807l - 1l)
#define O_MAX 9223372036854775807l
#elif O_ID == 4
#define O uint8_t
#define O4 u8vec4
#define OC uint
#define OC4 uvec4
#define O_KIND 2
#define O_BITS 8
#define O_ALIGN 1
#define O_MIN 0u
#define O_MAX 255u
#elif O_ID == 5
#define O uint16_t
#define O4 u16vec4
#define OC uint
#define OC4 uvec4
#define O_KIND 2
#define O_BITS 16
#define O_ALIGN 2
#define O_MIN 0u
#define O_MAX 65535u
#elif O_ID == 6
#define O uint
#define O4 uvec4
#define OC uint
#define OC4 uvec4
#define O_KIND 2
#define O_BITS 32
#define O_ALIGN 4
#define O_MIN 0u
#define O_MAX 4294967295u
#elif O_ID == 7
#define O uint64_t
#define O4 u64vec4
#define OC uint64_t
#define OC4 u64vec4
#define O_KIND 2
#define O_BITS 64
#define O_ALIGN 8
#define O_MIN 0ul
#define O_MAX 18446744073709551615ul
#elif O_ID == 8
#define O float16_t
#define O4 f16vec4
#define OC float
#define OC4 vec4
#define O_KIND 0
#define O_BITS 16
#define O_ALIGN 2
#elif O_ID == 9
#define O uint16_t
#define O4 u16vec4
#define OC float
#define OC4 vec4
#define O_KIND 0
#define O_BITS 16
#define O_ALIGN 2
#define O_BF16 1
#undef O_VEC
#define O_VEC 0
#elif O_ID == 10
#define O float
#define O4 vec4
#define OC float
#define OC4 vec4
#define O_KIND 0
#define O_BITS 32
#define O_ALIGN 4
#elif O_ID == 11
#define O double
#define O4 dvec4
#define OC double
#define OC4 dvec4
#define O_KIND 0
#define O_BITS 64
#define O_ALIGN 8
#elif O_ID == 12
#define O vec2
#define O4 vec2
#define OC vec2
#define OC4 vec2
#define OR float
#define O_KIND 3
#define O_BITS 64
#define O_ALIGN 8
#undef O_VEC
#define O_VEC 0
#elif O_ID == 13
#define O dvec2
#define O4 dvec2
#define OC dvec2
#define OC4 dvec2
#define OR double
#define O_KIND 3
#define O_BITS 128
#define O_ALIGN 16
#undef O_VEC
#define O_VEC 0
#else
#error "O_ID must name an Nx type (0..13)"
#endif
#if defined(O_BF16)
#define O_ST(c) nxv_bf16_st(c)
#define O_ST4(c) O4(mix(floatBitsToUint(c) >> 16, uvec4(0x7FC0u), isnan(c)))
#else
#define O_ST(c) O(c)
#define O_ST4(c) O4(c)
#endif
#endif

#if defined(U_ID)
#if U_ID == 0
#define U int8_t
#define U4 i8vec4
#define U_ALIGN 1
#define U_LD(v) int(v)
#define U_LD4(v) ivec4(v)
#elif U_ID == 1
#define U int16_t
#define U4 i16vec4
#define U_ALIGN 2
#define U_LD(v) int(v)
#define U_LD4(v) ivec4(v)
#elif U_ID == 2
#define U int
#define U4 ivec4
#define U_ALIGN 4
#define U_LD(v) (v)
#define U_LD4(v) (v)
#elif U_ID == 3
#define U int64_t
#define U4 i64vec4
#define U_ALIGN 8
#define U_LD(v) (v)
#define U_LD4(v) (v)
#elif U_ID == 4
#define U uint8_t
#define U4 u8vec4
#define U_ALIGN 1
#define U_LD(v) uint(v)
#define U_LD4(v) uvec4(v)
#elif U_ID == 5
#define U uint16_t
#define U4 u16vec4
#define U_ALIGN 2
#define U_LD(v) uint(v)
#define U_LD4(v) uvec4(v)
#elif U_ID == 6
#define U uint
#define U4 uvec4
#define U_ALIGN 4
#define U_LD(v) (v)
#define U_LD4(v) (v)
#elif U_ID == 7
#define U uint64_t
#define U4 u64vec4
#define U_ALIGN 8
#define U_LD(v) (v)
#define U_LD4(v) (v)
#elif U_ID == 8
#define U float16_t
#define U4 f16vec4
#define U_ALIGN 2
#define U_LD(v) float(v)
#define U_LD4(v) vec4(v)
#elif U_ID == 9
#define U uint16_t
#define U4 u16vec4
#define U_ALIGN 2
#define U_LD(v) uintBitsToFloat(uint(v) << 16)
#define U_LD4(v) uintBitsToFloat(uvec4(v) << 16)
#elif U_ID == 10
#define U float
#define U4 vec4
#define U_ALIGN 4
#define U_LD(v) (v)
#define U_LD4(v) (v)
#else
#error "U_ID must name a real type other than f64 (0..10)"
#endif
#endif
