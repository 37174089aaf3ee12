// GPU tests skip with "skipped: no CUDA device" where there is none, so the
// `gpu` label runs everywhere; on a GPU machine they check the real device.
#include "kernels/devices.h"

#include <gtest/gtest.h>

using namespace shardtrain;

TEST(CudaDevices, VisibleDevicesAreDescribed) {
  std::string why;
  const auto devices = cuda_devices(&why);
  if (devices.empty()) GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  ASSERT_TRUE(cuda_backend_built());
  for (size_t i = 0; i < devices.size(); ++i) {
    EXPECT_EQ(devices[i].index, int(i));
    EXPECT_FALSE(devices[i].name.empty());
    EXPECT_GT(devices[i].total_memory_bytes, size_t(1) << 30);
    EXPECT_NE(devices[i].compute_capability.find('.'), std::string::npos);
  }
}

TEST(CudaDevices, NoDeviceIsNotAnError) {
  std::string why;
  const auto devices = cuda_devices(&why);
  if (!devices.empty()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(why.empty()) << "an empty device list must say why";
}
