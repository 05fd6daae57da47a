//===- CpuDevice.cpp - The host as a device -------------------------------===//

#include "CpuDevice.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

namespace sluice::rt {

namespace {
/// Host memory aligned like the regions of Layout.h.
constexpr size_t kHostAlignment = 64;

class HostEvent final : public Event {
public:
  void record(Stream &) override { at = std::chrono::steady_clock::now(); }
  bool isComplete() override { return true; }
  double secondsSince(Event &start) override {
    auto &from = static_cast<HostEvent &>(start);
    return std::chrono::duration<double>(at - from.at).count();
  }

private:
  std::chrono::steady_clock::time_point at{};
};
} // namespace

Status CpuDevice::allocate(DType type, int64_t count, DeviceBuffer &out) {
  if (count < 0)
    return Status::error("cannot allocate " + std::to_string(count) +
                         " elements");
  size_t bytes = size_t(count) * size_t(getSize(type));
  size_t rounded =
      (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  void *data =
      std::aligned_alloc(kHostAlignment, std::max<size_t>(rounded, 64));
  if (!data)
    return Status::error("out of host memory allocating " +
                         std::to_string(bytes) + " bytes");
  std::memset(data, 0, rounded);
  out = DeviceBuffer(this, data, type, count);
  return Status::ok();
}

void CpuDevice::release(void *data, int64_t) { std::free(data); }

Stream &CpuDevice::getStream(StreamKind kind) { return streams[int(kind)]; }

std::unique_ptr<Event> CpuDevice::createEvent() {
  return std::make_unique<HostEvent>();
}

void CpuDevice::upload(DevicePtr dst, const void *host, int64_t bytes,
                       Stream &) {
  if (bytes > 0)
    std::memcpy(dst.get(), host, size_t(bytes));
}

void CpuDevice::download(void *host, DevicePtr src, int64_t bytes, Stream &) {
  if (bytes > 0)
    std::memcpy(host, src.get(), size_t(bytes));
}

} // namespace sluice::rt
