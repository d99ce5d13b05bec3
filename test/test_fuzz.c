/*
 * test_fuzz.c - malformed arguments of the kind test/fuzz/nif_fuzz.exs
 * feeds the NIF, at the runtime's API: tensors of another device in every
 * op, empty shapes whose other dimensions overflow 64-bit strides, and
 * sort lengths past 2^63. Each call must fail cleanly or return an
 * empty (or identity) result, without overflow or hang; run under
 * UndefinedBehaviorSanitizer by make test-c-asan.
 */
#include <string.h>

#include "test.h"

#define HUGE_DIM ((int64_t)INT32_MAX)

static nxv_tensor *upload(nxv_device *d, nxv_dtype t, uint64_t n) {
  static const uint8_t zeros[256];
  nxv_tensor *out = NULL;
  if (n * nxv_dtype_size(t) > sizeof zeros) return NULL;
  if (nxv_tensor_upload(d, t, n, zeros, &out) != NXV_OK) return NULL;
  return out;
}

/* Every op whose tensors live on two devices (or on a device other than
 * the one named) fails with INVALID_ARGUMENT. */
NXV_TEST(fuzz, ops_refuse_tensors_of_another_device) {
  nxv_device *d = test_open_device(), *e = test_open_device();
  REQUIRE(d && e);
  nxv_tensor *a = upload(d, NXV_F32, 16), *b = upload(e, NXV_F32, 16);
  nxv_tensor *mask = upload(d, NXV_U8, 16), *idx_e = upload(e, NXV_S64, 4);
  nxv_tensor *one_e = upload(e, NXV_F32, 1), *cplx = upload(d, NXV_C64, 16);
  nxv_tensor *dst_d = upload(d, NXV_F32, 16), *dst_e = upload(e, NXV_F32, 16);
  REQUIRE(a && b && mask && idx_e && one_e && cplx && dst_d && dst_e);
  nxv_tensor *out;
  const int64_t shape[1] = {16}, sq[2] = {4, 4};
  nxv_view va = {a, 0, NULL}, vb = {b, 0, NULL}, vm = {mask, 0, NULL};

  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_binary(d, NXV_ADD, 1, shape, &va, &vb, &out));
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_binary(e, NXV_ADD, 1, shape, &vb, &va, &out));
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_unary(e, NXV_COPY, 1, shape, &va, &out));
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_convert(e, NXV_S32, 1, shape, &va, &out));
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out,
              nxv_compare(d, NXV_LESS, 1, shape, &va, &vb, &out));
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out,
              nxv_select(d, 1, shape, &vm, &va, &vb, &out));
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out,
              nxv_reduce(e, NXV_REDUCE_SUM, 1, shape, &va, 1u, &out));
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out,
              nxv_argreduce(e, true, false, 1, shape, &va, 1u, &out));

  const uint32_t add = NXV_FUSED_INSTR(NXV_FUSED_BINARY, NXV_ADD, 0, 1, 0);
  const nxv_view inputs[2] = {va, vb};
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out,
              nxv_fused(d, NXV_F32, 1, shape, 2, inputs, 1, &add, &out));

  const int64_t unit[1] = {1};
  EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_copy_into(d, dst_d, 0, unit, 1, shape, &vb));
  EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_copy_into(d, dst_e, 0, unit, 1, shape, &va));

  const uint32_t perm[2] = {1, 0};
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_transpose(e, 2, sq, a, perm, &out));

  nxv_matmul_desc m = {.batch = 1, .m = 4, .n = 4, .k = 4, .a = a, .a_strides = {16, 4, 1},
                       .b = b, .b_strides = {16, 4, 1}};
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_matmul(d, &m, &out));

  const int64_t gstride[1] = {1}, istride[1] = {1}, adim[1] = {16}, astride[1] = {1};
  nxv_gather_desc g = {.src = a, .indices = idx_e, .rank = 1, .shape = unit,
                       .src_strides = gstride, .index_strides = istride, .depth = 1,
                       .axis_dims = adim, .axis_strides = astride};
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_gather(d, &g, &out));

  nxv_scatter_desc s = {.dst = dst_d, .updates = b, .indices = idx_e, .count = 1,
                        .rank = 1, .slice_shape = unit, .dst_strides = unit, .depth = 1,
                        .axis_dims = adim, .axis_strides = astride};
  EXPECT_FAIL_PLAIN(NXV_ERR_INVALID_ARGUMENT, nxv_scatter(d, &s));

  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_sort(e, a, 4, 4, false, &out, NULL));
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_fft(e, cplx, 4, 4, false, 0.0, &out));

  const int64_t conv_shape[3] = {1, 1, 16}, kshape[3] = {1, 1, 1};
  const int64_t one[1] = {1}, zero[1] = {0};
  nxv_conv_desc c = {.input = a, .kernel = one_e, .rank = 3, .in_shape = conv_shape,
                     .kernel_shape = kshape, .out_shape = conv_shape, .strides = one,
                     .pad_lo = zero, .pad_hi = zero, .input_dilation = one,
                     .kernel_dilation = one, .feature_groups = 1, .batch_groups = 1};
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_conv(d, &c, &out));

  nxv_window_desc w = {.a = a, .rank = 1, .in_shape = shape, .out_shape = shape,
                       .window = one, .strides = one, .dilations = one, .pad_lo = zero};
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_window_reduce(e, NXV_REDUCE_MAX, &w, &out));

  nxv_window_scatter_desc ws = {.a = a, .source = b, .init = one_e, .rank = 1,
                                .in_shape = shape, .window = one, .strides = one,
                                .pad_lo = zero, .pad_hi = zero};
  EXPECT_FAIL(NXV_ERR_INVALID_ARGUMENT, out, nxv_window_scatter(d, &ws, &out));

  nxv_tensor *all[] = {a, b, mask, idx_e, one_e, cplx, dst_d, dst_e};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) nxv_tensor_release(all[i]);
  nxv_device_release(e);
  nxv_device_release(d);
}

/* Checks that out is a tensor of n elements, all zero bytes. */
static void check_zeros(nxv_tensor *out, uint64_t n) {
  CHECK(nxv_tensor_count(out) == n);
  uint8_t bytes[64];
  size_t size = n * nxv_dtype_size(nxv_tensor_dtype(out));
  if (size > sizeof bytes) return;
  CHECK_OK(nxv_tensor_download(out, 0, n, bytes));
  for (size_t i = 0; i < size; i++) CHECK_MSG(bytes[i] == 0, "byte %zu is %u", i, bytes[i]);
}

/* A view, window or convolution of zero elements is valid whatever its
 * other dimensions and strides: nothing is read, and no stride or size
 * product is formed from them. */
NXV_TEST(fuzz, empty_shapes_with_huge_dimensions) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  nxv_tensor *empty = upload(d, NXV_F32, 0), *one = upload(d, NXV_F32, 1), *out;
  REQUIRE(empty && one);

  /* Dense strides of [0, 2^62, 8] overflow. */
  const int64_t s3[3] = {0, INT64_C(1) << 62, 8};
  nxv_view v = {empty, 0, NULL};
  CHECK_OK(nxv_unary(d, NXV_COPY, 3, s3, &v, &out));
  if (out) check_zeros(out, 0), nxv_tensor_release(out);
  const uint32_t perm[3] = {2, 1, 0};
  out = NULL;
  CHECK_OK(nxv_transpose(d, 3, s3, empty, perm, &out));
  if (out) check_zeros(out, 0), nxv_tensor_release(out);

  /* A sum over an empty axis, the kept axes with strides whose products
   * overflow: the identity, the strides unused. */
  const int64_t rshape[3] = {0, 3, 3};
  const int64_t rstrides[3] = {1, INT64_C(1) << 62, INT64_C(1) << 62};
  nxv_view rv = {empty, 0, rstrides};
  out = NULL;
  CHECK_OK(nxv_reduce(d, NXV_REDUCE_SUM, 3, rshape, &rv, 1u, &out));
  if (out) check_zeros(out, 9), nxv_tensor_release(out);

  /* Sums and argmaxes over empty axes next to huge ones (found by the
   * fuzzer: collapsing the reduced axes multiplied 2^40 by 2^40). */
  const int64_t hshape[4] = {3, INT64_C(1) << 40, INT64_C(1) << 40, 0};
  nxv_view hv = {empty, 0, NULL};
  out = NULL;
  CHECK_OK(nxv_reduce(d, NXV_REDUCE_SUM, 4, hshape, &hv, 0xEu, &out));
  if (out) check_zeros(out, 3), nxv_tensor_release(out);
  out = NULL;
  CHECK_OK(nxv_argreduce(d, true, false, 4, hshape, &hv, 0xEu, &out));
  if (out) check_zeros(out, 3), nxv_tensor_release(out);

  /* One window of padding over an empty input of huge other axes. */
  const int64_t in4[4] = {0, HUGE_DIM, HUGE_DIM, HUGE_DIM}, ones4[4] = {1, 1, 1, 1};
  const int64_t str4[4] = {1, HUGE_DIM, HUGE_DIM, HUGE_DIM}, lo4[4] = {1, 0, 0, 0};
  const int64_t zeros4[4] = {0, 0, 0, 0};
  nxv_window_desc w = {.a = empty, .rank = 4, .in_shape = in4, .out_shape = ones4,
                       .window = ones4, .strides = str4, .dilations = ones4, .pad_lo = lo4};
  out = NULL;
  CHECK_OK(nxv_window_reduce(d, NXV_REDUCE_SUM, &w, &out));
  if (out) check_zeros(out, 1), nxv_tensor_release(out);

  nxv_window_scatter_desc ws = {.a = empty, .source = empty, .init = one, .rank = 4,
                                .in_shape = in4, .window = ones4, .strides = str4,
                                .pad_lo = zeros4, .pad_hi = zeros4};
  out = NULL;
  CHECK_OK(nxv_window_scatter(d, &ws, &out));
  if (out) check_zeros(out, 0), nxv_tensor_release(out);

  /* A convolution of an empty input, one output of padding. */
  const int64_t cin[6] = {1, 1, 0, HUGE_DIM, HUGE_DIM, HUGE_DIM};
  const int64_t cones[6] = {1, 1, 1, 1, 1, 1};
  nxv_conv_desc c = {.input = empty, .kernel = one, .rank = 6, .in_shape = cin,
                     .kernel_shape = cones, .out_shape = cones, .strides = str4,
                     .pad_lo = lo4, .pad_hi = zeros4, .input_dilation = ones4,
                     .kernel_dilation = ones4, .feature_groups = 1, .batch_groups = 1};
  out = NULL;
  CHECK_OK(nxv_conv(d, &c, &out));
  if (out) check_zeros(out, 1), nxv_tensor_release(out);

  nxv_tensor_release(empty);
  nxv_tensor_release(one);
  nxv_device_release(d);
}

/* Zero rows of a length past 2^63: refused at once (the padded length was
 * once doubled until it passed len, forever). */
NXV_TEST(fuzz, sort_of_huge_rows) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  nxv_tensor *empty = upload(d, NXV_F32, 0), *out, *idx = NULL;
  REQUIRE(empty);
  EXPECT_FAIL(NXV_ERR_UNSUPPORTED, out, nxv_sort(d, empty, 0, UINT64_MAX, false, &out, NULL));
  EXPECT_FAIL(NXV_ERR_UNSUPPORTED, out,
              nxv_sort(d, empty, 0, UINT64_C(1) << 63, true, &out, &idx));
  CHECK(idx == NULL);
  /* Still a valid empty sort. */
  out = NULL;
  CHECK_OK(nxv_sort(d, empty, 0, 5, false, &out, NULL));
  if (out) check_zeros(out, 0), nxv_tensor_release(out);
  nxv_tensor_release(empty);
  nxv_device_release(d);
}
