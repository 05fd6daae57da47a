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
// Every transport, through the path sluice-run opens it: given a plan
// whose pipeline spans the job (--plan=FILE), the suite opens the rank's
// backend as a session does (openBackend, --backend=cpu|cuda,
// --transport=mpi|nccl) and checks the pipeline group's communicator:
//
//   mpirun -np 3 SluiceCommConformanceTests --plan=p3.json --transport=nccl
//
// is the CPU backend's NCCL emulation (every operation in one issue
// order, a send done only once its receive is posted, collectives
// compared across ranks); --backend=cuda, on a GPU, the CUDA backend's
// NCCL or staged MPI communicators (tools/gpu/run.sh). Without --plan the
// job's MPI communicator and a CPU device are checked. The operations are
// issued as NCCL's contract requires of its users, which every transport
// must then run: a ring's sends and receives alternate by rank parity,
// since a send may wait for its receive and each operation for the one
// before it. A transport without an operation's support records it as
// unsupported, with the reason, rather than passing it.
//
// With SLUICE_CONFORMANCE_OUT=FILE, rank 0 writes every rank's results as
// one JSON document (test/runtime/comm-conformance.test).
//
//===----------------------------------------------------------------------===//

#include "CpuDevice.h"
#include "MpiCommunicator.h"
#include "Plan.h"
#include "RankBackend.h"

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

/// The job's MPI communicator (host values, the process group).
MpiCommunicator *world = nullptr;
/// The transport under test and the device its buffers live on.
Communicator *comm = nullptr;
Device *device = nullptr;
std::string backendName = "cpu", transportName = "mpi";
/// This rank's results, "op|type|outcome|detail" each (outcome: pass,
/// FAIL or unsupported).
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

/// A buffer of the device under test in `type`, with its values on the
/// host: set() them, push() them to the device, pull() the device's back.
struct Buffer {
  DeviceBuffer memory;
  DType type;
  std::vector<double> values;
  std::vector<char> staging;
  Buffer(DType t, int64_t n) : type(t), values(size_t(n), 0.0) {
    EXPECT_TRUE(bool(device->allocate(t, std::max<int64_t>(1, n), memory)));
    staging.resize(size_t(std::max<int64_t>(1, n) * getSize(t)));
  }
  DevicePtr ptr() const { return memory.get(); }
  void set(int64_t i, double v) { values[size_t(i)] = v; }
  double get(int64_t i) const { return values[size_t(i)]; }
  void push(Stream &stream) {
    for (size_t i = 0; i < values.size(); ++i)
      if (type == DType::BF16) {
        uint16_t h = toBf16(float(values[i]));
        std::memcpy(&staging[i * 2], &h, 2);
      } else {
        float f = float(values[i]);
        std::memcpy(&staging[i * 4], &f, 4);
      }
    device->upload(ptr(), staging.data(), int64_t(staging.size()), stream);
    EXPECT_TRUE(bool(stream.synchronize()));
  }
  void pull(Stream &stream) {
    device->download(staging.data(), ptr(), int64_t(staging.size()), stream);
    EXPECT_TRUE(bool(stream.synchronize()));
    for (size_t i = 0; i < values.size(); ++i)
      if (type == DType::BF16) {
        uint16_t h;
        std::memcpy(&h, &staging[i * 2], 2);
        values[i] = fromBf16(h);
      } else {
        float f;
        std::memcpy(&f, &staging[i * 4], 4);
        values[i] = f;
      }
  }
};

class CommConformance : public ::testing::TestWithParam<DType> {
protected:
  Stream &stream() { return device->getStream(StreamKind::Compute); }
  int rank() const { return comm->rank(); }
  int ranks() const { return comm->size(); }
  DType type() const { return GetParam(); }
  std::string typeName() const {
    return type() == DType::BF16 ? "bf16" : "f32";
  }

  /// n elements of `type`, element i `value(i)`, on the device.
  Buffer make(int64_t n, const std::function<double(int64_t)> &value) {
    Buffer b(type(), n);
    for (int64_t i = 0; i < n; ++i)
      b.set(i, value(i));
    b.push(stream());
    return b;
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

  /// Records `op` as one the transport does not run, and why.
  void unsupported(const std::string &op, const std::string &why) {
    results.push_back(op + "|" + typeName() + "|unsupported|" + why);
  }

  /// Compares the device's `got` with `want` element by element; records
  /// the outcome.
  void expectEqual(const std::string &op, Buffer &got,
                   const std::vector<double> &want, int64_t offset = 0) {
    got.pull(stream());
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
  Buffer out = make(n, [&](int64_t i) { return input(rank(), i); });
  Buffer in = make(n, [](int64_t) { return -1.0; });
  // Even ranks send first, odd ones receive first: under NCCL a send may
  // complete only once its receive is posted, and each operation of a
  // rank may wait for the one issued before it, so a ring in which every
  // rank receives first never starts. With an odd number of ranks the
  // last (even) rank sends to rank 0, which receives once its own send
  // is done: the ring still closes.
  std::unique_ptr<Request> first, second;
  if (rank() % 2 == 0) {
    first = comm->sendAsync(out.ptr(), n, next, 5, stream());
    second = comm->recvAsync(in.ptr(), n, prev, 5, stream());
  } else {
    first = comm->recvAsync(in.ptr(), n, prev, 5, stream());
    second = comm->sendAsync(out.ptr(), n, next, 5, stream());
  }
  finish(std::move(first), "first of send/recv");
  finish(std::move(second), "second of send/recv");
  std::vector<double> want(n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = input(prev, i);
  expectEqual("send/recv ring", in, want);
}

TEST_P(CommConformance, SendAndReceiveInOneGroup) {
  // Every rank sends first: under NCCL's rules, where each operation may
  // wait for the one issued before it, this ring starts only because the
  // two are one group (Communicator::startGroup, ncclGroupStart), as the
  // executor issues adjacent transfers. Two messages each way, so that
  // two sends to one peer are in flight at once.
  const int64_t n = 29;
  int next = (rank() + 1) % ranks(), prev = (rank() + ranks() - 1) % ranks();
  Buffer out = make(2 * n, [&](int64_t i) { return input(rank(), i); });
  Buffer in = make(2 * n, [](int64_t) { return -1.0; });
  comm->startGroup();
  std::unique_ptr<Request> requests[4] = {
      comm->sendAsync(out.ptr(), n, next, 7, stream()),
      comm->sendAsync(out.ptr() + n, n, next, 8, stream()),
      comm->recvAsync(in.ptr(), n, prev, 7, stream()),
      comm->recvAsync(in.ptr() + n, n, prev, 8, stream())};
  Status grouped = comm->endGroup();
  ASSERT_TRUE(bool(grouped)) << grouped.message();
  for (std::unique_ptr<Request> &request : requests)
    finish(std::move(request), "a grouped send or receive");
  std::vector<double> want(2 * n);
  for (int64_t i = 0; i < 2 * n; ++i)
    want[i] = input(prev, i);
  expectEqual("grouped send/recv ring", in, want);
}

TEST_P(CommConformance, BroadcastFromANonZeroRoot) {
  const int64_t n = 19;
  int root = ranks() - 1;
  Buffer data = make(n, [&](int64_t i) { return input(rank(), i); });
  finish(comm->broadcastAsync(data.ptr(), n, root, 1, stream()), "broadcast");
  std::vector<double> want(n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = input(root, i);
  expectEqual("broadcast", data, want);
}

/// Element i of the all-reduce of every rank's input(r, i).
double reduced(Reduction reduction, int ranks, int64_t i) {
  double v = reduction == Reduction::Sum ? 0.0 : -1e30;
  for (int r = 0; r < ranks; ++r)
    v = reduction == Reduction::Sum ? v + input(r, i) : std::max(v, input(r, i));
  return v;
}

TEST_P(CommConformance, AllReduceSumAndMax) {
  const int64_t n = 29;
  for (Reduction reduction : {Reduction::Sum, Reduction::Max}) {
    Buffer data = make(n, [&](int64_t i) { return input(rank(), i); });
    finish(comm->allReduceAsync(data.ptr(), n, reduction, 0, stream()),
           "all-reduce");
    std::vector<double> want(n);
    for (int64_t i = 0; i < n; ++i)
      want[i] = reduced(reduction, ranks(), i);
    expectEqual(reduction == Reduction::Sum ? "all-reduce sum" : "all-reduce max",
                data, want);
  }
}

TEST_P(CommConformance, ReduceSumToARoot) {
  const int64_t n = 11;
  int root = ranks() > 1 ? 1 : 0;
  Buffer data = make(n, [&](int64_t i) { return input(rank(), i); });
  finish(comm->reduceSumAsync(data.ptr(), n, root, 2, stream()), "reduce");
  std::vector<double> want(n, 0.0);
  for (int64_t i = 0; i < n; ++i)
    want[i] = rank() == root ? reduced(Reduction::Sum, ranks(), i)
                             : input(rank(), i); // left as it was
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
  Buffer data = make(total, [&](int64_t i) { return input(rank(), i); });
  Buffer out = make(counts[rank()], [](int64_t) { return -1.0; });
  std::unique_ptr<Request> request =
      comm->reduceScatterAsync(data.ptr(), out.ptr(), counts, 0, stream());
  if (!request)
    return unsupported("reduce-scatter (uneven)",
                       "the transport has no reduce-scatter (an optional "
                       "operation of DeviceCollectives.def)");
  finish(std::move(request), "reduce-scatter");
  std::vector<double> want(counts[rank()], 0.0);
  for (int64_t i = 0; i < counts[rank()]; ++i)
    want[i] = reduced(Reduction::Sum, ranks(), first + i);
  expectEqual("reduce-scatter (uneven)", out, want);
}

TEST_P(CommConformance, AllGatherUnevenPartsInPlace) {
  std::vector<int64_t> counts = unevenCounts(ranks());
  int64_t total = 0, mine = 0;
  for (int r = 0; r < ranks(); ++r) {
    if (r == rank())
      mine = total;
    total += counts[r];
  }
  // Only this rank's part holds its values; the rest must be overwritten.
  Buffer data = make(total, [&](int64_t i) {
    return i >= mine && i < mine + counts[rank()] ? input(rank(), i - mine)
                                                  : -1.0;
  });
  std::unique_ptr<Request> request =
      comm->allGatherAsync(data.ptr(), counts, 1, stream());
  if (!request)
    return unsupported("all-gather (uneven, in place)",
                       "the transport has no all-gather (an optional "
                       "operation of DeviceCollectives.def)");
  finish(std::move(request), "all-gather");
  std::vector<double> want;
  for (int r = 0; r < ranks(); ++r)
    for (int64_t i = 0; i < counts[r]; ++i)
      want.push_back(input(r, i));
  expectEqual("all-gather (uneven, in place)", data, want);
}

// Every rank sends rank q part(r, q) elements and receives part(q, r)
// from it: uneven, some empty, itself included.
TEST_P(CommConformance, AllToAllUnevenParts) {
  auto part = [](int from, int to) { return int64_t((2 * from + to) % 3); };
  // Element i of rank `from`'s part for rank `to` (exact in bf16).
  auto value = [](int from, int to, int64_t i) {
    return double(from * 16 + to * 4 + i);
  };
  std::vector<int64_t> sendCounts, recvCounts;
  std::vector<double> sendValues, want;
  for (int q = 0; q < ranks(); ++q) {
    sendCounts.push_back(part(rank(), q));
    recvCounts.push_back(part(q, rank()));
    for (int64_t i = 0; i < part(rank(), q); ++i)
      sendValues.push_back(value(rank(), q, i));
    for (int64_t i = 0; i < part(q, rank()); ++i)
      want.push_back(value(q, rank(), i));
  }
  // One element more on each side, so an empty exchange has a buffer.
  Buffer send = make(int64_t(sendValues.size()) + 1, [&](int64_t i) {
    return i < int64_t(sendValues.size()) ? sendValues[size_t(i)] : -2.0;
  });
  Buffer recv = make(int64_t(want.size()) + 1, [](int64_t) { return -1.0; });
  std::unique_ptr<Request> request = comm->allToAllAsync(
      send.ptr(), sendCounts, recv.ptr(), recvCounts, 0, stream());
  if (!request)
    return unsupported("all-to-all (uneven)",
                       "the transport has no all-to-all (an optional "
                       "operation of DeviceCollectives.def)");
  finish(std::move(request), "all-to-all");
  // What arrives, and nothing past it.
  want.push_back(-1.0);
  expectEqual("all-to-all (uneven)", recv, want);
}

TEST_P(CommConformance, AllReduceSumOverASubgroup) {
  // The first and the last rank only (a tied table's two ends).
  if (ranks() < 2)
    GTEST_SKIP() << "needs two ranks";
  const int64_t n = 13;
  int group[2] = {0, ranks() - 1};
  bool member = rank() == group[0] || rank() == group[1];
  Buffer data = make(n, [&](int64_t i) { return input(rank(), i); });
  if (member) {
    Status st = comm->allReduceSum(data.ptr(), n, group, 2, stream());
    ASSERT_TRUE(bool(st)) << st.message();
  }
  std::vector<double> want(n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = member ? input(group[0], i) + input(group[1], i)
                     : input(rank(), i);
  expectEqual(member ? "subgroup sum" : "subgroup leaves others", data, want);
}

TEST_P(CommConformance, ChainedStepsInIssueOrder) {
  // A vocabulary collective's steps (CollectiveQueue): a max, host work,
  // then a sum of the max -- which is ranks x the max only if the sum
  // started after the max was done everywhere -- and a broadcast issued
  // after the chain, which must not overtake it.
  const char *op = "chained max then sum";
  if (!comm->chainsSteps())
    return unsupported(op, "the transport runs a collective's steps as "
                           "operations of their own (Communicator::"
                           "chainsSteps is false; the vocabulary queue "
                           "issues them one by one)");
  const int64_t n = 17;
  Buffer data = make(n, [&](int64_t i) { return input(rank(), i); });
  Buffer last = make(n, [&](int64_t i) { return input(rank(), i); });
  std::vector<std::string> order;
  std::vector<Communicator::ChainStep> steps(2);
  steps[0].start = [&] {
    order.push_back("max");
    return comm->allReduceAsync(data.ptr(), n, Reduction::Max, 0, stream());
  };
  steps[0].after = [&] { order.push_back("after max"); };
  steps[1].start = [&] {
    order.push_back("sum");
    return comm->allReduceAsync(data.ptr(), n, Reduction::Sum, 0, stream());
  };
  std::unique_ptr<Request> chain = comm->postChain(std::move(steps));
  std::unique_ptr<Request> broadcast =
      comm->broadcastAsync(last.ptr(), n, 0, 1, stream());
  finish(std::move(chain), "chain");
  finish(std::move(broadcast), "broadcast after the chain");
  std::string sequence;
  for (const std::string &s : order)
    sequence += (sequence.empty() ? "" : ", ") + s;
  results.push_back(std::string("chain steps in order|") + typeName() + "|" +
                    (sequence == "max, after max, sum" ? "pass" : "FAIL") +
                    "|" + sequence);
  EXPECT_EQ(sequence, "max, after max, sum");
  std::vector<double> want(n), first(n);
  for (int64_t i = 0; i < n; ++i) {
    want[i] = ranks() * reduced(Reduction::Max, ranks(), i);
    first[i] = input(0, i);
  }
  expectEqual(op, data, want);
  expectEqual("broadcast after a chain", last, first);
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
  // The transport's host side (a Communicator's host values and strings),
  // then the job's process group.
  int rank = comm->rank(), ranks = comm->size();
  double sums[2] = {double(rank), 1.5}, maxima[1] = {double(rank)};
  ASSERT_TRUE(bool(comm->allReduceSum(sums, 2)));
  ASSERT_TRUE(bool(comm->allReduceMax(maxima, 1)));
  record("host all-reduce sum", sums[0] == ranks * (ranks - 1) / 2.0 &&
                                    sums[1] == 1.5 * ranks,
         std::to_string(sums[0]) + ", " + std::to_string(sums[1]));
  record("host all-reduce max", maxima[0] == ranks - 1,
         std::to_string(maxima[0]));

  std::vector<std::string> all;
  ASSERT_TRUE(bool(comm->gatherToRoot(std::string(size_t(rank), 'x'), all)));
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

/// Takes `--NAME=VALUE` out of argv; the value, or `fallback`.
std::string takeFlag(int &argc, char **argv, const std::string &name,
                     const std::string &fallback) {
  std::string prefix = "--" + name + "=", value = fallback;
  int kept = 1;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0)
      value = argv[i] + prefix.size();
    else
      argv[kept++] = argv[i];
  argc = kept;
  return value;
}

/// Every rank's result lines as one JSON document.
nlohmann::json describeResults(const std::vector<std::string> &all) {
  nlohmann::json doc = {{"format", "sluice-comm-conformance"},
                        {"version", 2},
                        {"backend", backendName},
                        {"transport", transportName},
                        {"ranks", all.size()},
                        {"results", nlohmann::json::array()}};
  for (size_t r = 0; r < all.size(); ++r) {
    size_t at = 0;
    while (at < all[r].size()) {
      size_t end = all[r].find('\n', at);
      std::string line = all[r].substr(at, end - at);
      at = end + 1;
      size_t a = line.find('|'), b = line.find('|', a + 1),
             c = line.find('|', b + 1);
      std::string outcome = line.substr(b + 1, c - b - 1);
      doc["results"].push_back({{"rank", r},
                                {"op", line.substr(0, a)},
                                {"type", line.substr(a + 1, b - a - 1)},
                                {"pass", outcome == "pass"},
                                {"outcome", outcome},
                                {"detail", line.substr(c + 1)}});
    }
  }
  return doc;
}

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int status;
  {
    MpiCommunicator mpi;
    world = &mpi;
    std::string planPath = takeFlag(argc, argv, "plan", "");
    backendName = takeFlag(argc, argv, "backend", "cpu");
    transportName = takeFlag(argc, argv, "transport", "mpi");
    // Without a plan: the job's MPI communicator on a CPU device. With
    // one: the rank's backend and pipeline communicator as a session
    // opens them (a failure ends the job with its message).
    CpuDevice cpu;
    device = &cpu;
    comm = &mpi;
    Plan plan;
    session::RankBackend backend;
    if (!planPath.empty()) {
      if (Status st = loadPlan(planPath, plan); !st) {
        std::fprintf(stderr, "error: %s\n", st.message().c_str());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      if (plan.getRanks() != mpi.size() || plan.dp * plan.tp != 1) {
        std::fprintf(stderr,
                     "error: plan '%s' runs on %d ranks as %d x %d x %d; the "
                     "suite needs a pipeline over all %d ranks of the job\n",
                     planPath.c_str(), plan.getRanks(), plan.devices, plan.tp,
                     plan.dp, mpi.size());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      SessionOptions options;
      options.programName = "SluiceCommConformanceTests";
      options.planPath = planPath;
      options.backend = backendName;
      options.transport = transportName;
      options.commTimeout = 60;
      session::openBackend(mpi, plan, options, backend);
      device = backend.device.get();
      comm = backend.comm;
    }
    ::testing::InitGoogleTest(&argc, argv);
    // One rank's report is enough on the terminal; every rank's verdict
    // counts (the exit status).
    if (mpi.rank() != 0)
      delete ::testing::UnitTest::GetInstance()->listeners().Release(
          ::testing::UnitTest::GetInstance()->listeners().default_result_printer());
    status = RUN_ALL_TESTS();
    std::string mine;
    for (const std::string &r : results)
      mine += r + "\n";
    std::vector<std::string> all;
    if (mpi.gatherToRoot(mine, all) && mpi.rank() == 0)
      if (const char *path = std::getenv("SLUICE_CONFORMANCE_OUT"))
        std::ofstream(path) << describeResults(all).dump(2) << "\n";
    int failed = status != 0, anyFailed = failed;
    MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    status = anyFailed;
  }
  MPI_Finalize();
  return status;
}
