/*
 * demo.c - the runtime end to end on the default device (lavapipe when
 * there is no GPU): lists the devices, runs a small two-layer perceptron
 * forward pass (matmul, broadcast add, relu as max with 0, row sums,
 * transpose), checks it against a CPU computation and prints the runtime's
 * counters.
 *
 *   make demo            (NX_VULKAN_DEVICE=N picks another device)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nxv.h"

#define TRY(expr)                                                        \
  do {                                                                   \
    nxv_status st_ = (expr);                                             \
    if (st_ != NXV_OK) {                                                 \
      fprintf(stderr, "%s failed: %s: %s\n", #expr, nxv_status_name(st_), \
              nxv_last_error());                                         \
      exit(1);                                                           \
    }                                                                    \
  } while (0)

static const char *type_name(nxv_device_type t) {
  switch (t) {
    case NXV_DEVICE_DISCRETE_GPU: return "discrete GPU";
    case NXV_DEVICE_INTEGRATED_GPU: return "integrated GPU";
    case NXV_DEVICE_VIRTUAL_GPU: return "virtual GPU";
    case NXV_DEVICE_CPU: return "CPU";
    default: return "other";
  }
}

int main(void) {
  uint32_t count = 0, def = 0;
  TRY(nxv_device_count(&count));
  TRY(nxv_device_default_index(&def));
  for (uint32_t i = 0; i < count; i++) {
    nxv_device_info info;
    TRY(nxv_device_query(i, &info));
    printf("%c device %u: %s (%s; %s %s) f64=%d i64=%d f16=%d subgroup=%u "
           "coopmat=%d usable=%d\n",
           i == def ? '*' : ' ', i, info.name, type_name(info.type),
           info.driver_name, info.driver_info, info.float64, info.int64,
           info.float16, info.subgroup_size, info.cooperative_matrix,
           info.usable);
  }
  nxv_device *d;
  TRY(nxv_device_open(-1, NULL, &d));

  /* x[B,I] -> h = relu(x W1 + b1) [B,H] -> y = h W2 [B,O]; s = sum(y, 1) */
  enum { B = 32, I = 64, H = 48, O = 10 };
  static float x[B * I], w1[I * H], b1[H], w2[H * O];
  srand(7);
  for (int i = 0; i < B * I; i++) x[i] = (float)rand() / RAND_MAX - 0.5f;
  for (int i = 0; i < I * H; i++) w1[i] = (float)rand() / RAND_MAX - 0.5f;
  for (int i = 0; i < H; i++) b1[i] = (float)rand() / RAND_MAX - 0.5f;
  for (int i = 0; i < H * O; i++) w2[i] = (float)rand() / RAND_MAX - 0.5f;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  nxv_tensor *tx, *tw1, *tb1, *tw2, *xw, *h, *zero, *hr, *y, *s, *yt;
  TRY(nxv_tensor_upload(d, NXV_F32, B * I, x, &tx));
  TRY(nxv_tensor_upload(d, NXV_F32, I * H, w1, &tw1));
  TRY(nxv_tensor_upload(d, NXV_F32, H, b1, &tb1));
  TRY(nxv_tensor_upload(d, NXV_F32, H * O, w2, &tw2));
  nxv_matmul_desc m1 = {.batch = 1, .m = B, .n = H, .k = I, .a = tx,
                        .a_strides = {0, I, 1}, .b = tw1, .b_strides = {0, H, 1}};
  TRY(nxv_matmul(d, &m1, &xw));
  int64_t bh[2] = {B, H}, hshape[1] = {H}, bstr[2];
  TRY(nxv_broadcast_strides(1, hshape, 2, bh, bstr));
  nxv_view vxw = {xw, 0, NULL}, vb1 = {tb1, 0, bstr};
  TRY(nxv_binary(d, NXV_ADD, 2, bh, &vxw, &vb1, &h));
  float zf = 0.0f;
  TRY(nxv_fill(d, NXV_F32, 1, &zf, &zero));
  int64_t zs[2] = {0, 0};
  nxv_view vh = {h, 0, NULL}, vz = {zero, 0, zs};
  TRY(nxv_binary(d, NXV_MAX, 2, bh, &vh, &vz, &hr));
  nxv_matmul_desc m2 = {.batch = 1, .m = B, .n = O, .k = H, .a = hr,
                        .a_strides = {0, H, 1}, .b = tw2, .b_strides = {0, O, 1}};
  TRY(nxv_matmul(d, &m2, &y));
  int64_t bo[2] = {B, O};
  nxv_view vy = {y, 0, NULL};
  TRY(nxv_reduce(d, NXV_REDUCE_SUM, 2, bo, &vy, 2u, &s));
  TRY(nxv_transpose(d, 2, bo, y, (uint32_t[2]){1, 0}, &yt));
  static float gs[B], gyt[O * B];
  TRY(nxv_tensor_download(s, 0, B, gs));
  TRY(nxv_tensor_download(yt, 0, O * B, gyt));
  clock_gettime(CLOCK_MONOTONIC, &t1);

  double max_err = 0;
  for (int b = 0; b < B; b++) {
    double hs[H], ys = 0;
    for (int j = 0; j < H; j++) {
      double acc = b1[j];
      for (int i = 0; i < I; i++) acc += (double)x[b * I + i] * w1[i * H + j];
      hs[j] = acc > 0 ? acc : 0;
    }
    for (int o = 0; o < O; o++) {
      double acc = 0;
      for (int j = 0; j < H; j++) acc += hs[j] * w2[j * O + o];
      ys += acc;
      max_err = fmax(max_err, fabs(acc - gyt[o * B + b]));
    }
    max_err = fmax(max_err, fabs(ys - gs[b]));
  }
  printf("MLP forward %dx%d -> %d -> %d: row sums[0..3] = %.5f %.5f %.5f %.5f\n",
         B, I, H, O, gs[0], gs[1], gs[2], gs[3]);
  printf("max abs error vs CPU double reference: %.2e (%s)\n", max_err,
         max_err < 1e-3 ? "ok" : "MISMATCH");
  printf("wall time incl. pipeline creation: %.2f ms\n",
         (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
             (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
  nxv_stats st;
  TRY(nxv_device_stats(d, &st));
  printf("ops %llu, submits %llu, barriers %llu, pool reserved %llu B (peak "
         "in use %llu B, hits %llu, misses %llu), pipelines %llu, cache file "
         "%s%s%s\n",
         (unsigned long long)st.ops_enqueued, (unsigned long long)st.submits,
         (unsigned long long)st.barriers,
         (unsigned long long)st.pool_bytes_reserved,
         (unsigned long long)st.pool_bytes_peak,
         (unsigned long long)st.pool_hits, (unsigned long long)st.pool_misses,
         (unsigned long long)st.pipelines,
         st.cache_file_loaded ? "loaded" : "not loaded",
         st.cache_file_rejected ? ", rejected: " : "",
         st.cache_reject_reason);
  nxv_tensor *all[] = {tx, tw1, tb1, tw2, xw, h, zero, hr, y, s, yt};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) nxv_tensor_release(all[i]);
  nxv_device_release(d);
  return max_err < 1e-3 ? 0 : 1;
}
