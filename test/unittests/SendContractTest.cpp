//===- SendContractTest.cpp - Sends copy nothing; the executor waits ------===//
//
// The runtime half of the plan-buffers contract (docs/plan-format.md):
// a send reads its slot until it completes, so the executor must wait for
// it before any instruction writes that slot again. A hand-written plan
// reuses a sent slot at once; a communicator that reads a send's data only
// when it completes sees whether the executor waited.
//
//===----------------------------------------------------------------------===//

#include "CpuDevice.h"
#include "TinyPlans.h"
#include "Executor.h"
#include "sluice/Blocks/Layout.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>

using namespace sluice::rt;

namespace {

/// Delivers a send's data when the send completes, as a transport that
/// reads lazily (an MPI rendezvous) does; receives get zeros.
class LazyCommunicator final : public Communicator {
public:
  struct Sent {
    std::vector<float> posted, delivered;
  };
  std::vector<Sent> sent;

  class LazyRequest final : public Request {
  public:
    LazyRequest(LazyCommunicator *owner, size_t index, DevicePtr data,
                int64_t count)
        : owner(owner), index(index), data(data), count(count) {}
    /// Completes on the third test (or a wait): late enough that an
    /// executor which merely polls once before writing the slot is caught.
    bool test() override {
      if (++tests >= 3)
        complete();
      return done;
    }
    Status waitOn(Stream &) override {
      complete();
      return Status::ok();
    }

  private:
    void complete() {
      if (owner && !done) {
        const float *p = data.f32();
        owner->sent[index].delivered.assign(p, p + count);
      }
      done = true;
    }
    LazyCommunicator *owner;
    size_t index;
    DevicePtr data;
    int64_t count;
    int tests = 0;
    bool done = false;
  };

  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::unique_ptr<Request> sendAsync(DevicePtr data, int64_t count, int, int,
                                     Stream &) override {
    const float *p = data.f32();
    sent.push_back({std::vector<float>(p, p + count), {}});
    return std::make_unique<LazyRequest>(this, sent.size() - 1, data, count);
  }
  std::unique_ptr<Request> recvAsync(DevicePtr data, int64_t count, int, int,
                                     Stream &) override {
    std::memset(data.get(), 0, size_t(count) * sizeof(float));
    return std::make_unique<LazyRequest>(nullptr, 0, data, count);
  }
  int maxTag() const override { return 1 << 20; }
  std::unique_ptr<Request> broadcastAsync(DevicePtr, int64_t, int, int,
                                          Stream &) override {
    return nullptr;
  }
  std::unique_ptr<Request> allReduceAsync(DevicePtr, int64_t, Reduction, int,
                                          Stream &) override {
    return nullptr;
  }
  std::unique_ptr<Request> reduceSumAsync(DevicePtr, int64_t, int, int,
                                          Stream &) override {
    return nullptr;
  }
  Status allReduceSum(DevicePtr, int64_t, const int *, int, Stream &) override {
    return Status::ok();
  }
  Status allReduceSum(double *, int64_t) override { return Status::ok(); }
  Status allReduceMax(double *, int64_t) override { return Status::ok(); }
  Status gatherToRoot(const std::string &,
                      std::vector<std::string> &) override {
    return Status::ok();
  }
  void barrier() override {}
  [[noreturn]] void abort(int) override { std::abort(); }
};


TEST(SendContract, AWrittenSlotWaitsForItsSend) {
  Plan plan;
  Status parsed = parsePlan(planReusingASentSlot(), "hand-written", plan);
  ASSERT_TRUE(parsed.isOk()) << parsed.message();
  CpuDevice device;
  LazyCommunicator comm;
  std::unique_ptr<TokenSource> data = makeSyntheticTokens(1, 11, 2);
  TrainerOptions options;
  Executor executor(plan, 0, device, comm, *data, options);
  ASSERT_TRUE(executor.prepare());
  double loss = 0;
  ASSERT_TRUE(executor.runStep(0, loss));
  ASSERT_EQ(comm.sent.size(), 2u);
  for (const LazyCommunicator::Sent &s : comm.sent) {
    ASSERT_EQ(s.delivered.size(), s.posted.size());
    EXPECT_EQ(s.delivered, s.posted)
        << "a slot was written while its send was still reading it";
  }
  // The two microbatches' activations differ: the check can fail.
  EXPECT_NE(comm.sent[0].posted, comm.sent[1].posted);
}

} // namespace
