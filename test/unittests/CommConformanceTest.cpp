//===- CommConformanceTest.cpp - Every communicator operation, every rank -===//
//
// The communicator half of the conformance suite (ConformanceTest.cpp is
// the kernels'): every operation of the Communicator and ProcessGroup
// interfaces, on every rank of an mpirun, against what the interfaces'
// contracts say the result is. Each rank's inputs are a function of its
// rank, so every rank computes the expected result of every operation on
// its own (in double precision; the values are small multiples of 1/4, so
// fp32 and bf16 sums are exact and the comparisons are too). Uneven counts
// (reduce-scatter, all-gather) and a strict subgroup catch a transport
// that assumes equal parts or the whole world.
//
//   mpirun -np 3 SluiceCommConformanceTests   (test/runtime/comm-conformance.test)
//
// With SLUICE_CONFORMANCE_OUT=FILE, rank 0 writes every rank's results as
// one JSON document. The MPI communicator is the transport checked here;
// the NCCL emulation enforces one global order computed from a plan, so
// it is exercised by the plans' equivalence runs instead, and NCCL itself
// by the GPU suite (docs/gpu.md).
//
//===----------------------------------------------------------------------===//

#include "CpuDevice.h"
#include "MpiCommunicator.h"

#include <gtest/gtest.h>
#include <mpi.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using namespace sluice::rt;

namespace {

MpiCommunicator *world = nullptr;
/// This rank's results, "op|type|pass|detail" each.
std::vector<std::string> results;

/// Rank r's element i: a multiple of 1/4 below 64, so sums of a few ranks'
/// stay exact in bf16 (8 significant bits) as in fp32.
double input(int r, int64_t i) {
  return double((r * 7 + i * 3) % 23) * 0.25 + (r == 1 ? 0.5 : 0.0);
}

uint16_t toBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return uint16_t(bits >> 16); // exact for the values above
}
float fromBf16(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// A host-memory buffer of the CPU device in `type`.
struct Buffer {
  DeviceBuffer memory;
  DType type;
  Buffer(Device &device, DType t, int64_t n) : type(t) {
    EXPECT_TRUE(bool(device.allocate(t, std::max<int64_t>(1, n), memory)));
  }
  DevicePtr ptr() const { return memory.get(); }
  void set(int64_t i, double v) {
    if (type == DType::BF16)
      memory.get().as<uint16_t>()[i] = toBf16(float(v));
    else
      memory.get().f32()[i] = float(v);
  }
  double get(int64_t i) const {
    return type == DType::BF16 ? fromBf16(memory.get().as<uint16_t>()[i])
                               : memory.get().f32()[i];
  }
};

class CommConformance : public ::testing::TestWithParam<DType> {
protected:
  CpuDevice device;
  Stream &stream() { return device.getStream(StreamKind::Compute); }
  int rank() const { return world->rank(); }
  int ranks() const { return world->size(); }
  DType type() const { return GetParam(); }
  std::string typeName() const {
    return type() == DType::BF16 ? "bf16" : "f32";
  }

  /// Completes `request` (advancing it until the host is done, then
  /// ordering the stream after it).
  void finish(std::unique_ptr<Request> request, const std::string &what) {
    ASSERT_TRUE(request) << what << ": the transport returned no request";
    while (!request->test()) {
    }
    Status st = request->waitOn(stream());
    ASSERT_TRUE(bool(st)) << what << ": " << st.message();
  }

  /// Compares `got` with `want` element by element; records the outcome.
  void expectEqual(const std::string &op, const Buffer &got,
                   const std::vector<double> &want, int64_t offset = 0) {
    int64_t wrong = -1;
    for (size_t i = 0; i < want.size(); ++i)
      if (got.get(offset + int64_t(i)) != want[i]) {
        wrong = int64_t(i);
        break;
      }
    std::string detail =
        wrong < 0 ? std::to_string(want.size()) + " elements"
                  : "element " + std::to_string(wrong) + " is " +
                        std::to_string(got.get(offset + wrong)) +
                        ", expected " + std::to_string(want[wrong]);
    results.push_back(op + "|" + typeName() + "|" +
                      (wrong < 0 ? "pass" : "FAIL") + "|" + detail);
    EXPECT_LT(wrong, 0) << op << " (" << typeName() << ", rank " << rank()
                        << "): " << detail;
  }
};

TEST_P(CommConformance, SendAndReceiveAroundARing) {
  const int64_t n = 37;
  int next = (rank() + 1) % ranks(), prev = (rank() + ranks() - 1) % ranks();
  Buffer out(device, type(), n), in(device, type(), n);
  for (int64_t i = 0; i < n; ++i)
    out.set(i, input(rank(), i));
  std::unique_ptr<Request> recv = world->recvAsync(in.ptr(), n, prev, 5, stream());
  std::unique_ptr<Request> send = world->sendAsync(out.ptr(), n, next, 5, stream());
  finish(std::move(recv), "recv");
  finish(std::move(send), "send");
  std::vector<double> want(n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = input(prev, i);
  expectEqual("send/recv ring", in, want);
}

TEST_P(CommConformance, BroadcastFromANonZeroRoot) {
  const int64_t n = 19;
  int root = ranks() - 1;
  Buffer data(device, type(), n);
  for (int64_t i = 0; i < n; ++i)
    data.set(i, input(rank(), i));
  finish(world->broadcastAsync(data.ptr(), n, root, 1, stream()), "broadcast");
  std::vector<double> want(n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = input(root, i);
  expectEqual("broadcast", data, want);
}

TEST_P(CommConformance, AllReduceSumAndMax) {
  const int64_t n = 29;
  for (Reduction reduction : {Reduction::Sum, Reduction::Max}) {
    Buffer data(device, type(), n);
    for (int64_t i = 0; i < n; ++i)
      data.set(i, input(rank(), i));
    finish(world->allReduceAsync(data.ptr(), n, reduction, 0, stream()),
           "all-reduce");
    std::vector<double> want(n, reduction == Reduction::Sum ? 0.0 : -1e30);
    for (int r = 0; r < ranks(); ++r)
      for (int64_t i = 0; i < n; ++i)
        want[i] = reduction == Reduction::Sum ? want[i] + input(r, i)
                                              : std::max(want[i], input(r, i));
    expectEqual(reduction == Reduction::Sum ? "all-reduce sum" : "all-reduce max",
                data, want);
  }
}

TEST_P(CommConformance, ReduceSumToARoot) {
  const int64_t n = 11;
  int root = ranks() > 1 ? 1 : 0;
  Buffer data(device, type(), n);
  for (int64_t i = 0; i < n; ++i)
    data.set(i, input(rank(), i));
  finish(world->reduceSumAsync(data.ptr(), n, root, 2, stream()), "reduce");
  std::vector<double> want(n, 0.0);
  for (int64_t i = 0; i < n; ++i)
    if (rank() == root)
      for (int r = 0; r < ranks(); ++r)
        want[i] += input(r, i);
    else
      want[i] = input(rank(), i); // left as it was
  expectEqual(rank() == root ? "reduce to root" : "reduce leaves non-roots",
              data, want);
}

/// Uneven parts: rank r's is r + 2 elements (the last ones of ZeRO-1's
/// runs are shorter, so a transport must not assume equal parts).
std::vector<int64_t> unevenCounts(int ranks) {
  std::vector<int64_t> counts;
  for (int r = 0; r < ranks; ++r)
    counts.push_back(r + 2);
  return counts;
}

TEST_P(CommConformance, ReduceScatterUnevenParts) {
  std::vector<int64_t> counts = unevenCounts(ranks());
  int64_t total = 0, first = 0;
  for (int r = 0; r < ranks(); ++r) {
    if (r == rank())
      first = total;
    total += counts[r];
  }
  Buffer data(device, type(), total), out(device, type(), counts[rank()]);
  for (int64_t i = 0; i < total; ++i)
    data.set(i, input(rank(), i));
  finish(world->reduceScatterAsync(data.ptr(), out.ptr(), counts, 0, stream()),
         "reduce-scatter");
  std::vector<double> want(counts[rank()], 0.0);
  for (int r = 0; r < ranks(); ++r)
    for (int64_t i = 0; i < counts[rank()]; ++i)
      want[i] += input(r, first + i);
  expectEqual("reduce-scatter (uneven)", out, want);
}

TEST_P(CommConformance, AllGatherUnevenPartsInPlace) {
  std::vector<int64_t> counts = unevenCounts(ranks());
  int64_t total = 0;
  std::vector<int64_t> firsts;
  for (int r = 0; r < ranks(); ++r) {
    firsts.push_back(total);
    total += counts[r];
  }
  Buffer data(device, type(), total);
  // Only this rank's part holds its values; the rest must be overwritten.
  for (int64_t i = 0; i < total; ++i)
    data.set(i, -1.0);
  for (int64_t i = 0; i < counts[rank()]; ++i)
    data.set(firsts[rank()] + i, input(rank(), i));
  finish(world->allGatherAsync(data.ptr(), counts, 1, stream()), "all-gather");
  std::vector<double> want;
  for (int r = 0; r < ranks(); ++r)
    for (int64_t i = 0; i < counts[r]; ++i)
      want.push_back(input(r, i));
  expectEqual("all-gather (uneven, in place)", data, want);
}

TEST_P(CommConformance, AllReduceSumOverASubgroup) {
  // The first and the last rank only (a tied table's two ends).
  if (ranks() < 2)
    GTEST_SKIP() << "needs two ranks";
  const int64_t n = 13;
  int group[2] = {0, ranks() - 1};
  bool member = rank() == group[0] || rank() == group[1];
  Buffer data(device, type(), n);
  for (int64_t i = 0; i < n; ++i)
    data.set(i, input(rank(), i));
  if (member) {
    Status st = world->allReduceSum(data.ptr(), n, group, 2, stream());
    ASSERT_TRUE(bool(st)) << st.message();
  }
  std::vector<double> want(n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = member ? input(group[0], i) + input(group[1], i)
                     : input(rank(), i);
  expectEqual(member ? "subgroup sum" : "subgroup leaves others", data, want);
}

INSTANTIATE_TEST_SUITE_P(Types, CommConformance,
                         ::testing::Values(DType::F32, DType::BF16),
                         [](const auto &info) {
                           return info.param == DType::BF16 ? "bf16" : "f32";
                         });

/// Host values and the process group (ProcessGroup.h).
TEST(HostConformance, HostReductionsGatherAndProcessGroup) {
  auto record = [](const std::string &op, bool pass, const std::string &detail) {
    results.push_back(op + "|host|" + (pass ? "pass" : "FAIL") + "|" + detail);
    EXPECT_TRUE(pass) << op << ": " << detail;
  };
  int rank = world->rank(), ranks = world->size();
  double sums[2] = {double(rank), 1.5}, maxima[1] = {double(rank)};
  ASSERT_TRUE(bool(world->allReduceSum(sums, 2)));
  ASSERT_TRUE(bool(world->allReduceMax(maxima, 1)));
  record("host all-reduce sum", sums[0] == ranks * (ranks - 1) / 2.0 &&
                                    sums[1] == 1.5 * ranks,
         std::to_string(sums[0]) + ", " + std::to_string(sums[1]));
  record("host all-reduce max", maxima[0] == ranks - 1,
         std::to_string(maxima[0]));

  std::vector<std::string> all;
  ASSERT_TRUE(bool(world->gatherToRoot(std::string(size_t(rank), 'x'), all)));
  bool gathered = rank != 0 || int(all.size()) == ranks;
  for (size_t r = 0; gathered && rank == 0 && r < all.size(); ++r)
    gathered = all[r] == std::string(r, 'x');
  record("gather strings to root", gathered,
         std::to_string(all.size()) + " strings");

  ProcessGroup &group = *world;
  int64_t ints[2] = {rank, 10 - rank};
  ASSERT_TRUE(bool(group.allReduceInts(ints, 2, Reduction::Max)));
  record("process group: integer max", ints[0] == ranks - 1 && ints[1] == 10,
         std::to_string(ints[0]) + ", " + std::to_string(ints[1]));
  std::vector<int32_t> everyone(ranks, -1);
  int32_t mine = 100 + rank;
  ASSERT_TRUE(bool(group.allGatherBytes(&mine, sizeof(mine), everyone.data())));
  bool inOrder = true;
  for (int r = 0; r < ranks; ++r)
    inOrder = inOrder && everyone[r] == 100 + r;
  record("process group: all-gather bytes", inOrder, "rank order");
  char word[8] = {};
  if (rank == ranks - 1)
    std::strcpy(word, "sluice");
  ASSERT_TRUE(bool(group.broadcastBytes(word, sizeof(word), ranks - 1)));
  record("process group: broadcast bytes", std::string(word) == "sluice",
         word);
  // Every rank of this test runs on one host: the host's group is the
  // world, ranked alike.
  std::unique_ptr<ProcessGroup> host = group.splitByHost();
  record("process group: split by host",
         host && host->size() == ranks && host->rank() == rank,
         host ? std::to_string(host->size()) + " ranks" : "none");
  std::unique_ptr<ProcessGroup> parity = group.splitGroup(rank % 2, -rank);
  int64_t count = 1;
  if (parity) {
    ASSERT_TRUE(bool(parity->allReduceInts(&count, 1, Reduction::Sum)));
  }
  int same = (ranks + (rank % 2 == 0 ? 1 : 0)) / 2;
  record("process group: split by color, ranked by key",
         parity && count == same && parity->size() == same &&
             parity->rank() == (same - 1) - rank / 2,
         parity ? std::to_string(parity->size()) + " ranks, rank " +
                      std::to_string(parity->rank())
                : "none");
}

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int status;
  {
    MpiCommunicator comm;
    world = &comm;
    ::testing::InitGoogleTest(&argc, argv);
    // One rank's report is enough on the terminal; every rank's verdict
    // counts (the exit status).
    if (comm.rank() != 0)
      delete ::testing::UnitTest::GetInstance()->listeners().Release(
          ::testing::UnitTest::GetInstance()->listeners().default_result_printer());
    status = RUN_ALL_TESTS();
    std::string mine;
    for (const std::string &r : results)
      mine += r + "\n";
    std::vector<std::string> all;
    if (comm.gatherToRoot(mine, all) && comm.rank() == 0)
      if (const char *path = std::getenv("SLUICE_CONFORMANCE_OUT")) {
        nlohmann::json doc = {{"format", "sluice-comm-conformance"},
                              {"version", 1},
                              {"transport", "mpi"},
                              {"ranks", comm.size()},
                              {"results", nlohmann::json::array()}};
        for (size_t r = 0; r < all.size(); ++r) {
          size_t at = 0;
          while (at < all[r].size()) {
            size_t end = all[r].find('\n', at);
            std::string line = all[r].substr(at, end - at);
            at = end + 1;
            size_t a = line.find('|'), b = line.find('|', a + 1),
                   c = line.find('|', b + 1);
            doc["results"].push_back({{"rank", r},
                                      {"op", line.substr(0, a)},
                                      {"type", line.substr(a + 1, b - a - 1)},
                                      {"pass", line.substr(b + 1, c - b - 1) ==
                                                   "pass"},
                                      {"detail", line.substr(c + 1)}});
          }
        }
        std::ofstream(path) << doc.dump(2) << "\n";
      }
    int failed = status != 0, anyFailed = failed;
    MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    status = anyFailed;
  }
  MPI_Finalize();
  return status;
}
