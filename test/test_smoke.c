/* Smoke tests: the shortest end-to-end paths through the runtime. */
#include <math.h>
#include <string.h>

#include "test.h"

NXV_TEST(smoke, upload_add_download) {
  nxv_device *d = test_open_device();
  REQUIRE(d);
  float a[5] = {1, 2, 3, 4, 5}, b[5] = {10, 20, 30, 40, 50}, c[5];
  nxv_tensor *ta, *tb, *tc;
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, 5, a, &ta));
  REQUIRE_OK(nxv_tensor_upload(d, NXV_F32, 5, b, &tb));
  int64_t shape[1] = {5};
  nxv_view va = {ta, 0, NULL}, vb = {tb, 0, NULL};
  REQUIRE_OK(nxv_binary(d, NXV_ADD, 1, shape, &va, &vb, &tc));
  REQUIRE_OK(nxv_tensor_download(tc, 0, 5, c));
  for (int i = 0; i < 5; i++) CHECK(c[i] == a[i] + b[i]);
  nxv_tensor_release(ta);
  nxv_tensor_release(tb);
  nxv_tensor_release(tc);
  nxv_device_release(d);
}
