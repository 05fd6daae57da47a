//===- CudaDeviceTest.cpp - CUDA device discovery -------------------------===//
//
// Runs everywhere the CUDA backend is built. Without a GPU the list is
// empty and the tests are skipped; on a GPU machine they check what the
// backend will rely on when it places one rank per device, and the
// lanes an overlapped group's two passes run on.

#include "CudaDevice.h"
#include "Device.h"

#include <gtest/gtest.h>

#include <thread>

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

// Lanes (Device::openLanes): a thread in lane 1 enqueues through the same
// Compute stream and kernels on a stream of its own, ordered against lane
// 0 only by the events the caller records -- as an overlapped group's
// two passes run (Executor::runGroup).
TEST(CudaDevice, LaneOneHasAStreamOfItsOwn) {
  std::vector<cuda::DeviceInfo> devices;
  ASSERT_TRUE(cuda::listDevices(devices).isOk());
  if (devices.empty())
    GTEST_SKIP() << "no CUDA device on this machine";
  std::unique_ptr<cuda::CudaDevice> gpu;
  Status st = cuda::CudaDevice::open(0, gpu);
  ASSERT_TRUE(st.isOk()) << st.message();
  Stream &compute = gpu->getStream(StreamKind::Compute);
  Kernels &kernels = gpu->getKernels(StreamKind::Compute);
  cudaStream_t first = cuda::CudaDevice::getHandle(compute);
  // Before openLanes, lane 1 is lane 0.
  std::thread([&] {
    gpu->setLane(1);
    EXPECT_EQ(cuda::CudaDevice::getHandle(compute), first);
    gpu->setLane(0);
  }).join();
  ASSERT_TRUE(gpu->openLanes().isOk());

  const int64_t n = 64;
  std::vector<float> a(n * n), b(n * n);
  for (int64_t i = 0; i < n * n; ++i) {
    a[size_t(i)] = float(i % 7) - 3.0f;
    b[size_t(i)] = float(i % 5) * 0.5f;
  }
  DeviceBuffer da, db, dc;
  for (DeviceBuffer *buffer : {&da, &db, &dc})
    ASSERT_TRUE(gpu->allocate(DType::F32, n * n, *buffer).isOk());
  gpu->upload(da.get(), a.data(), n * n * 4, compute);
  gpu->upload(db.get(), b.data(), n * n * 4, compute);
  std::unique_ptr<Event> fork = gpu->createEvent(), join = gpu->createEvent();
  fork->record(compute);
  cudaStream_t second = nullptr;
  std::thread([&] {
    gpu->setLane(1);
    second = cuda::CudaDevice::getHandle(compute);
    compute.wait(*fork);
    kernels.gemm(false, false, n, n, n, 1.0f, da.get(), n, db.get(), n, 0.0f,
                 dc.get(), n);
    join->record(compute);
    gpu->setLane(0);
  }).join();
  EXPECT_NE(second, first);
  EXPECT_EQ(cuda::CudaDevice::getHandle(compute), first);
  compute.wait(*join);
  std::vector<float> c(size_t(n * n));
  gpu->download(c.data(), dc.get(), n * n * 4, compute);
  st = compute.synchronize();
  ASSERT_TRUE(st.isOk()) << st.message();
  for (int64_t i = 0; i < n; i += 13)
    for (int64_t j = 0; j < n; j += 11) {
      double sum = 0;
      for (int64_t k = 0; k < n; ++k)
        sum += double(a[size_t(i * n + k)]) * double(b[size_t(k * n + j)]);
      EXPECT_NEAR(c[size_t(i * n + j)], sum, 1e-4) << i << ", " << j;
    }
}
