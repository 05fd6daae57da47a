//===- CudaDeviceTest.cpp - CUDA device discovery -------------------------===//
//
// Runs everywhere the CUDA backend is built. Without a GPU the list is
// empty and the test is skipped; on a GPU machine it checks what the
// backend will rely on when it places one rank per device.

#include "Device.h"

#include <gtest/gtest.h>

using namespace sluice::rt;

TEST(CudaDevice, ListsUsableDevices) {
  std::vector<cuda::DeviceInfo> devices;
  Status status = cuda::listDevices(devices);
  ASSERT_TRUE(status.isOk()) << status.message();
  if (devices.empty())
    GTEST_SKIP() << "no CUDA device on this machine";
  for (size_t i = 0; i < devices.size(); ++i) {
    const cuda::DeviceInfo &device = devices[i];
    EXPECT_EQ(device.index, static_cast<int>(i));
    EXPECT_FALSE(device.name.empty());
    EXPECT_GE(device.computeMajor, 7) << "Volta or newer";
    EXPECT_GT(device.multiprocessors, 0);
    EXPECT_GT(device.globalMemoryBytes, std::size_t(1) << 30);
  }
}
