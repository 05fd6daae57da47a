//===- NcclEmulation.cpp - NCCL's rules over MPI, on the CPU --------------===//

#include "NcclEmulation.h"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

namespace sluice::rt {

namespace {
using Clock = std::chrono::steady_clock;

MPI_Comm mpiComm(const MpiCommunicator &comm) {
  return *static_cast<MPI_Comm *>(comm.getHandle());
}


/// What a point-to-point message says of itself, ahead of its data.
struct Header {
  int64_t key = -1;
  int64_t count = 0;
  int64_t index = 0; // the sender's how-manieth send to this peer
  int32_t type = 0;
  int32_t pad = 0;
  char what[224] = {};
};

constexpr int kHeaderTag = 0, kBodyTag = 1;
/// A message's body goes under a tag of its own among the next 1024 to
/// the same peer: two sends of one group start together, and the second's
/// body may leave before the first's; its receiver, matched by the
/// headers' order, takes it by this tag (1 + 1024 stays below MPI's
/// smallest tag bound, 32767).
int bodyTag(int64_t pairIndex) { return kBodyTag + int(pairIndex % 1024); }
constexpr int kReportAsk = 1, kReportAnswer = 2;

/// A stand-in for the request of an operation that could not be made
/// (the failure is in its status).
class FailedRequest final : public Request {
public:
  explicit FailedRequest(Status why) : why(std::move(why)) {}
  bool test() override { return true; }
  Status waitOn(Stream &) override { return why; }

private:
  Status why;
};
} // namespace

struct NcclEmulation::Op {
  enum class Kind { Send, Recv, Collective, Chain, Group };
  enum class State { Queued, Header, Body, Done };
  Kind kind = Kind::Send;
  Comm *comm = nullptr;
  std::vector<std::string> queues;
  std::string what;
  int64_t index = 0; // on its communicator, from 1
  int64_t seq = 0;   // on this rank, from 1
  // Point to point.
  int peer = -1;
  int64_t key = -1, count = 0, pairIndex = 0;
  DevicePtr data;
  Header header;
  // Collective.
  int64_t signature = 0;
  long long sig[2] = {}, got[2] = {};
  std::function<std::unique_ptr<Request>(MpiCommunicator &)> run;
  std::unique_ptr<Request> inner;
  // A chain of steps (a vocabulary collective), the step running, and the
  // operation it posted.
  std::vector<Communicator::ChainStep> chain;
  size_t step = 0;
  std::shared_ptr<Op> current;
  // A group (startGroup/endGroup): its operations, started together.
  std::vector<std::shared_ptr<Op>> members;
  State state = State::Queued;
  MPI_Request request = MPI_REQUEST_NULL;
};

namespace {
class EmulatedRequest final : public Request {
public:
  EmulatedRequest(NcclEmulation &engine,
                  std::shared_ptr<NcclEmulation::Op> op)
      : engine(engine), op(std::move(op)) {}
  bool test() override {
    if (op->state != NcclEmulation::Op::State::Done)
      engine.progress();
    return op->state == NcclEmulation::Op::State::Done;
  }
  Status waitOn(Stream &) override {
    while (!test())
      std::this_thread::yield();
    return Status::ok();
  }

private:
  NcclEmulation &engine;
  std::shared_ptr<NcclEmulation::Op> op;
};
} // namespace

//===----------------------------------------------------------------------===//
// The engine
//===----------------------------------------------------------------------===//

NcclEmulation::~NcclEmulation() {
  for (void *request : answerRequests)
    delete static_cast<MPI_Request *>(request);
  delete static_cast<MPI_Comm *>(control);
}

Status NcclEmulation::create(const Plan &plan, Order order,
                             double timeoutSeconds,
                             MpiCommunicator *hosts[kMeshGroups],
                             Device &device,
                             std::unique_ptr<NcclEmulation> &out) {
  std::unique_ptr<NcclEmulation> e(new NcclEmulation());
  e->order = order;
  e->timeout = timeoutSeconds;
  MPI_Comm_rank(MPI_COMM_WORLD, &e->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &e->ranks);
  MeshPosition at = getMeshPosition(plan, e->rank);
  e->where = "rank " + std::to_string(e->rank) + " (device " +
             std::to_string(at.device) +
             (plan.dp > 1 ? ", replica " + std::to_string(at.replica) : "") +
             (plan.tp > 1 ? ", shard " + std::to_string(at.shard) : "") + ")";
  auto *control = new MPI_Comm;
  MPI_Comm_dup(MPI_COMM_WORLD, control);
  e->control = control;
  for (int g = 0; g < kMeshGroups; ++g)
    if (hosts[g])
      e->groups[g] = std::make_unique<EmulatedNcclCommunicator>(
          *e, *hosts[g], MeshGroup(g), device);
  // The same communicators as the CUDA backend's, split in the same order.
  auto make = [&](const std::string &name, int color, int key) -> Comm * {
    std::unique_ptr<MpiCommunicator> mpi = MpiCommunicator::split(color, key);
    if (!mpi)
      return nullptr;
    e->comms.push_back(std::make_unique<Comm>());
    e->comms.back()->name = name;
    e->comms.back()->mpi = std::move(mpi);
    return e->comms.back().get();
  };
  for (const CommSpec &spec : getCommLayout(plan, at)) {
    Comm *comm = make(spec.name, spec.color, spec.key);
    EmulatedNcclCommunicator *group = e->groups[int(spec.group)].get();
    if (!comm || !group)
      continue;
    if (!spec.stream) {
      group->groupComms[spec.members] = comm;
      continue;
    }
    group->streamComms[int(*spec.stream)] = comm;
    // Point-to-point: a pipeline's transfers, and ring attention's steps
    // on the context group's one communicator.
    if (*spec.stream == StreamKind::Pipeline || spec.group == MeshGroup::Context)
      group->p2p = comm;
  }
  // The earlier layout: a communicator per vocabulary channel.
  if (order == Order::Plan && plan.devices > 1)
    for (int c = 0; c < Communicator::kChannels; ++c)
      if (Comm *comm = make("vocabulary-channel-" + std::to_string(c),
                            at.replica * plan.tp + at.shard, at.device))
        if (EmulatedNcclCommunicator *pipeline = e->groups[0].get())
          pipeline->channelComms[c] = comm;
  e->lastProgress = Clock::now();
  out = std::move(e);
  return Status::ok();
}

std::unique_ptr<Communicator> NcclEmulation::takeGroup(MeshGroup group) {
  return std::move(groups[int(group)]);
}

void NcclEmulation::startGroup() {
  group = std::make_shared<Op>();
  group->kind = Op::Kind::Group;
}

void NcclEmulation::endGroup() {
  std::shared_ptr<Op> made = std::move(group);
  group = nullptr;
  if (!made || made->members.empty())
    return;
  made->comm = made->members.front()->comm;
  made->what = "a group of " + std::to_string(made->members.size()) +
               " operations, the first " + made->members.front()->what;
  // Queued where any of its operations would have been: it starts once
  // everything issued before any of them has finished.
  for (const std::shared_ptr<Op> &member : made->members)
    for (const std::string &name : member->queues)
      if (std::find(made->queues.begin(), made->queues.end(), name) ==
          made->queues.end())
        made->queues.push_back(name);
  post(std::move(made));
}

std::unique_ptr<Request> NcclEmulation::post(std::shared_ptr<Op> op) {
  if (group && op->kind != Op::Kind::Group) {
    // Held until the group closes; numbered now, in issue order.
    op->index = ++op->comm->issued;
    op->seq = ++sequence;
    group->members.push_back(op);
    lastPosted = op;
    return std::make_unique<EmulatedRequest>(*this, op);
  }
  bool idle = true;
  for (const auto &[name, queue] : queues)
    idle = idle && queue.empty();
  if (idle)
    lastProgress = Clock::now();
  if (op->kind == Op::Kind::Group) {
    op->index = op->members.front()->index;
    op->seq = op->members.front()->seq;
  } else {
    op->index = ++op->comm->issued;
    op->seq = ++sequence;
  }
  for (const std::string &name : op->queues) {
    if (continuation)
      queues[name].push_front(op);
    else
      queues[name].push_back(op);
  }
  continuation = false;
  lastPosted = op;
  auto request = std::make_unique<EmulatedRequest>(*this, op);
  progress();
  return request;
}

bool NcclEmulation::tryStart(Op &op) {
  if (op.state != Op::State::Queued)
    return false;
  for (const std::string &name : op.queues)
    if (queues[name].front().get() != &op)
      return false;
  if (op.kind == Op::Kind::Chain) {
    op.state = Op::State::Header;
    active.push_back(queues[op.queues.front()].front());
    startStep(op);
    return true;
  }
  if (op.kind == Op::Kind::Group) {
    // As NCCL runs a group: every operation of it at once, none behind
    // another.
    op.state = Op::State::Header;
    active.push_back(queues[op.queues.front()].front());
    for (const std::shared_ptr<Op> &member : op.members) {
      begin(*member);
      active.push_back(member);
    }
    return true;
  }
  begin(op);
  active.push_back(queues[op.queues.front()].front());
  return true;
}

void NcclEmulation::begin(Op &op) {
  MPI_Comm comm = mpiComm(*op.comm->mpi);
  switch (op.kind) {
  case Op::Kind::Chain:
  case Op::Kind::Group:
    break;
  case Op::Kind::Send:
    // Synchronous: the header's send completes only once the peer has
    // posted the receive it will match, as an NCCL send waits for its
    // receive.
    MPI_Issend(&op.header, sizeof(Header), MPI_BYTE, op.peer, kHeaderTag,
               comm, &op.request);
    break;
  case Op::Kind::Recv:
    MPI_Irecv(&op.header, sizeof(Header), MPI_BYTE, op.peer, kHeaderTag, comm,
              &op.request);
    break;
  case Op::Kind::Collective:
    // Every member's signature, and its negation: all alike iff the
    // maximum of each is its own.
    op.sig[0] = op.signature;
    op.sig[1] = -op.signature;
    MPI_Iallreduce(op.sig, op.got, 2, MPI_LONG_LONG, MPI_MAX, comm,
                   &op.request);
    break;
  }
  op.state = Op::State::Header;
}

void NcclEmulation::startStep(Op &chain) {
  continuation = true;
  lastPosted = nullptr;
  std::unique_ptr<Request> request = chain.chain[chain.step].start();
  continuation = false;
  if (!lastPosted || !request) {
    Status why = request ? Status::error("it posted nothing")
                         : Status::error("its transport refused it");
    HostStream host;
    if (request)
      why = request->waitOn(host);
    reportMismatch(where + ": step " + std::to_string(chain.step + 1) +
                   " of " + chain.what + " could not start: " + why.message());
  }
  chain.current = lastPosted;
}

bool NcclEmulation::advance(Op &op) {
  if (op.kind == Op::Kind::Group) {
    for (const std::shared_ptr<Op> &member : op.members)
      if (member->state != Op::State::Done)
        return false;
    finish(op);
    return true;
  }
  if (op.kind == Op::Kind::Chain) {
    if (op.current->state != Op::State::Done)
      return false;
    if (op.chain[op.step].after)
      op.chain[op.step].after();
    if (++op.step < op.chain.size())
      startStep(op);
    else
      finish(op);
    return true;
  }
  if (op.state == Op::State::Body && op.kind == Op::Kind::Collective) {
    if (!op.inner->test())
      return false;
    finish(op);
    return true;
  }
  int done = 0;
  MPI_Test(&op.request, &done, MPI_STATUS_IGNORE);
  if (!done)
    return false;
  if (op.state == Op::State::Body) {
    finish(op);
    return true;
  }
  MPI_Comm comm = mpiComm(*op.comm->mpi);
  int64_t bytes = op.count * getSize(op.data.getType());
  switch (op.kind) {
  case Op::Kind::Chain:
  case Op::Kind::Group:
    break;
  case Op::Kind::Send:
    MPI_Isend(op.data.get(), int(bytes), MPI_BYTE, op.peer,
              bodyTag(op.pairIndex), comm,
              &op.request);
    break;
  case Op::Kind::Recv: {
    const Header &h = op.header;
    if (h.key != op.key || h.count != op.count ||
        h.type != int32_t(op.data.getType()))
      reportMismatch(
          where + ": under NCCL's rules its receive " +
          std::to_string(op.pairIndex) + " from rank " +
          std::to_string(op.peer) + " on communicator '" + op.comm->name +
          "' (" + op.what + ", message " + std::to_string(op.key) +
          ") would take that rank's send " + std::to_string(h.index) +
          " to it (" + std::string(h.what) + ", message " +
          std::to_string(h.key) +
          "): NCCL matches messages by order, not by tag, so this order "
          "would corrupt the data or hang");
    MPI_Irecv(op.data.get(), int(bytes), MPI_BYTE, op.peer,
              bodyTag(op.pairIndex), comm,
              &op.request);
    break;
  }
  case Op::Kind::Collective: {
    if (op.got[0] != op.signature || -op.got[1] != op.signature) {
      // Every member sees the same maxima: all of them tell what they
      // issued, the first of them says it.
      char mine[256] = {};
      std::snprintf(mine, sizeof(mine), "%s", op.what.c_str());
      int size = op.comm->mpi->size();
      std::vector<char> all(size_t(size) * sizeof(mine));
      MPI_Allgather(mine, sizeof(mine), MPI_CHAR, all.data(), sizeof(mine),
                    MPI_CHAR, comm);
      std::string message =
          "under NCCL's rules the members of communicator '" + op.comm->name +
          "' issue different operations as its operation " +
          std::to_string(op.index) + ", which would hang:";
      for (int r = 0; r < size; ++r)
        message += "\n  its rank " + std::to_string(r) + ": " +
                   std::string(all.data() + r * sizeof(mine));
      if (op.comm->mpi->rank() == 0)
        reportMismatch(where + ": " + message);
      std::this_thread::sleep_for(std::chrono::seconds(5));
      abort(1);
    }
    op.inner = op.run(*op.comm->mpi);
    break;
  }
  }
  op.state = Op::State::Body;
  return true;
}

void NcclEmulation::finish(Op &op) {
  op.state = Op::State::Done;
  // A group's operations are in no queue: the group is.
  for (const std::string &name : op.queues) {
    std::deque<std::shared_ptr<Op>> &queue = queues[name];
    auto it = std::find_if(queue.begin(), queue.end(),
                           [&](const std::shared_ptr<Op> &o) {
                             return o.get() == &op;
                           });
    if (it != queue.end())
      queue.erase(it);
  }
}

void NcclEmulation::progress() {
  // A chain's step posts from inside progress(): its post must not run
  // the loop again underneath.
  if (progressing)
    return;
  progressing = true;
  struct Done {
    bool &flag;
    ~Done() { flag = false; }
  } done{progressing};
  answerReports();
  bool movedAtAll = false;
  for (bool moved = true; moved;) {
    moved = false;
    for (auto &[name, queue] : queues)
      if (!queue.empty() && tryStart(*queue.front()))
        moved = true;
    for (size_t i = 0; i < active.size(); ++i)
      if (advance(*active[i]))
        moved = true;
    active.erase(std::remove_if(active.begin(), active.end(),
                                [](const std::shared_ptr<Op> &op) {
                                  return op->state == Op::State::Done;
                                }),
                 active.end());
    movedAtAll |= moved;
  }
  auto now = Clock::now();
  if (movedAtAll) {
    lastProgress = now;
    return;
  }
  bool pending = false;
  for (const auto &[name, queue] : queues)
    pending = pending || !queue.empty();
  if (pending &&
      std::chrono::duration<double>(now - lastProgress).count() > timeout)
    reportStall();
}

std::string NcclEmulation::describeState() const {
  // The operation the rank is held in: the oldest one started, else the
  // oldest one issued.
  const Op *held = nullptr;
  std::vector<const Op *> pending;
  for (const auto &[name, queue] : queues)
    for (const std::shared_ptr<Op> &op : queue) {
      if (std::find(pending.begin(), pending.end(), op.get()) ==
          pending.end())
        pending.push_back(op.get());
      bool started = op->state != Op::State::Queued;
      bool heldStarted = held && held->state != Op::State::Queued;
      if (!held || (started && !heldStarted) ||
          (started == heldStarted && op->seq < held->seq))
        held = op.get();
    }
  if (!held)
    return where + ": nothing pending in the transport";
  // A chain waits in the step it started, a group in its first operation
  // not done.
  if (held->kind == Op::Kind::Chain && held->current)
    held = held->current.get();
  if (held->kind == Op::Kind::Group)
    for (const std::shared_ptr<Op> &member : held->members)
      if (member->state != Op::State::Done) {
        held = member.get();
        break;
      }
  return where + ": waits in " + held->what + " on communicator '" +
         held->comm->name + "' (its operation " +
         std::to_string(held->index) + " there)" +
         (held->state == Op::State::Queued
              ? ", not started: behind an earlier operation"
              : "") +
         (pending.size() > 1 ? "; " + std::to_string(pending.size() - 1) +
                                   " more issued"
                             : "");
}

void NcclEmulation::answerReports() {
  MPI_Comm comm = *static_cast<MPI_Comm *>(control);
  for (;;) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kReportAsk, comm, &flag, &status);
    if (!flag)
      return;
    int ask = 0;
    MPI_Recv(&ask, 1, MPI_INT, status.MPI_SOURCE, kReportAsk, comm,
             MPI_STATUS_IGNORE);
    answers.push_back(std::make_unique<std::string>(describeState()));
    auto *request = new MPI_Request;
    MPI_Isend(answers.back()->data(), int(answers.back()->size()), MPI_CHAR,
              status.MPI_SOURCE, kReportAnswer, comm, request);
    answerRequests.push_back(request);
  }
}

void NcclEmulation::reportStall() {
  MPI_Comm comm = *static_cast<MPI_Comm *>(control);
  int ask = 1;
  std::vector<MPI_Request> asks(size_t(ranks), MPI_REQUEST_NULL);
  for (int r = 0; r < ranks; ++r)
    if (r != rank)
      MPI_Isend(&ask, 1, MPI_INT, r, kReportAsk, comm, &asks[r]);
  std::map<int, std::string> told;
  auto start = Clock::now();
  while (int(told.size()) < ranks - 1 &&
         Clock::now() - start < std::chrono::seconds(5)) {
    // A lower rank reporting too says it for everyone.
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kReportAsk, comm, &flag, &status);
    if (flag && status.MPI_SOURCE < rank) {
      answerReports();
      for (;;) {
        answerReports();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    answerReports();
    MPI_Iprobe(MPI_ANY_SOURCE, kReportAnswer, comm, &flag, &status);
    if (!flag) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    int length = 0;
    MPI_Get_count(&status, MPI_CHAR, &length);
    std::string text(size_t(length), '\0');
    MPI_Recv(text.data(), length, MPI_CHAR, status.MPI_SOURCE, kReportAnswer,
             comm, MPI_STATUS_IGNORE);
    told[status.MPI_SOURCE] = text;
  }
  // The lowest rank that stalls says it for everyone: a higher one gives
  // a lower one's request time to arrive.
  auto pause = Clock::now();
  while (Clock::now() - pause < std::chrono::milliseconds(200 * rank)) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kReportAsk, comm, &flag, &status);
    if (flag && status.MPI_SOURCE < rank)
      for (;;) {
        answerReports();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::string report =
      where + ": no communication progress for " +
      std::to_string(int64_t(timeout)) +
      " s (--comm-timeout); under NCCL's rules every rank would wait here "
      "for good:";
  for (int r = 0; r < ranks; ++r) {
    std::string line = r == rank ? describeState()
                       : told.count(r)
                           ? told[r]
                           : "rank " + std::to_string(r) +
                                 ": no answer (not waiting in the transport: "
                                 "computing, or waiting outside it)";
    report += "\n  " + line;
  }
  std::fprintf(stderr, "sluice-run: error: %s\n", report.c_str());
  std::fflush(stderr);
  abort(1);
}

void NcclEmulation::reportMismatch(const std::string &message) {
  std::fprintf(stderr, "sluice-run: error: %s\n", message.c_str());
  std::fflush(stderr);
  abort(1);
}

void NcclEmulation::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}

//===----------------------------------------------------------------------===//
// A group's communicator
//===----------------------------------------------------------------------===//

std::string EmulatedNcclCommunicator::takeWhat(const std::string &kind) {
  std::string what = next.empty() ? kind : kind + " (" + next + ")";
  next.clear();
  return what;
}

std::unique_ptr<Request>
EmulatedNcclCommunicator::sendAsync(DevicePtr data, int64_t count, int peer,
                                    int tag, Stream &) {
  if (!p2p)
    return std::make_unique<FailedRequest>(
        Status::error("NCCL emulation: no communicator carries sends"));
  auto op = std::make_shared<NcclEmulation::Op>();
  op->kind = NcclEmulation::Op::Kind::Send;
  op->comm = p2p;
  op->peer = peer;
  op->key = tag;
  op->count = count;
  op->data = data;
  op->pairIndex = ++p2p->sent[peer];
  op->what = takeWhat("send of " + std::to_string(count) + " " +
                      getName(data.getType()) + " to rank " +
                      std::to_string(peer));
  op->header.key = tag;
  op->header.count = count;
  op->header.index = op->pairIndex;
  op->header.type = int32_t(data.getType());
  std::snprintf(op->header.what, sizeof(op->header.what), "%s",
                op->what.c_str());
  op->queues = {engine.getOrder() == NcclEmulation::Order::Global
                    ? std::string("rank")
                    : "link " + std::to_string(rank()) + "->" +
                          std::to_string(peer)};
  return engine.post(std::move(op));
}

std::unique_ptr<Request>
EmulatedNcclCommunicator::recvAsync(DevicePtr data, int64_t count, int peer,
                                    int tag, Stream &) {
  if (!p2p)
    return std::make_unique<FailedRequest>(
        Status::error("NCCL emulation: no communicator carries receives"));
  auto op = std::make_shared<NcclEmulation::Op>();
  op->kind = NcclEmulation::Op::Kind::Recv;
  op->comm = p2p;
  op->peer = peer;
  op->key = tag;
  op->count = count;
  op->data = data;
  op->pairIndex = ++p2p->received[peer];
  op->what = takeWhat("receive of " + std::to_string(count) + " " +
                      getName(data.getType()) + " from rank " +
                      std::to_string(peer));
  op->queues = {engine.getOrder() == NcclEmulation::Order::Global
                    ? std::string("rank")
                    : "link " + std::to_string(peer) + "->" +
                          std::to_string(rank())};
  return engine.post(std::move(op));
}

std::unique_ptr<Request> EmulatedNcclCommunicator::collective(
    const std::string &kind, Stream &stream, int channel,
    std::function<std::unique_ptr<Request>(MpiCommunicator &)> run) {
  // The communicator the CUDA backend would use (NcclCommunicator::
  // commFor): the one of the stream's kind (a group with one takes
  // everything; with several, a stream none is for is refused), or in the
  // plan layout the pipeline's communicator per vocabulary channel.
  int streamKind = -1;
  for (int k = 0; k < kStreamKinds; ++k)
    if (&device.getStream(StreamKind(k)) == &stream)
      streamKind = k;
  bool planLayout = engine.getOrder() == NcclEmulation::Order::Plan;
  NcclEmulation::Comm *comm = nullptr;
  if (planLayout && group == MeshGroup::Pipeline) {
    auto it = channelComms.find(channel);
    comm = it == channelComms.end() ? nullptr : it->second;
  } else {
    auto it = streamComms.find(streamKind);
    comm = it != streamComms.end()      ? it->second
           : streamComms.size() == 1 ? streamComms.begin()->second
                                     : nullptr;
  }
  if (!comm)
    return std::make_unique<FailedRequest>(Status::error(
        "NCCL emulation: no communicator carries " + kind +
        (streamComms.size() > 1 ? " on the stream it was issued on (the "
                                  "group's communicators are each for "
                                  "another)"
                                : "")));
  return post(comm, kind,
              planLayout ? "stream " + std::to_string(std::max(streamKind, 0))
                                     : std::string("rank"),
              std::move(run));
}

std::unique_ptr<Request> EmulatedNcclCommunicator::post(
    NcclEmulation::Comm *comm, const std::string &kind,
    const std::string &queue,
    std::function<std::unique_ptr<Request>(MpiCommunicator &)> run) {
  auto op = std::make_shared<NcclEmulation::Op>();
  op->kind = NcclEmulation::Op::Kind::Collective;
  op->comm = comm;
  op->what = takeWhat(kind);
  // Kept clear of the extremes, whose negation overflows.
  op->signature = int64_t(std::hash<std::string>{}(kind) >> 2);
  op->run = std::move(run);
  op->queues = {queue};
  return engine.post(std::move(op));
}

std::unique_ptr<Request>
EmulatedNcclCommunicator::postChain(std::vector<ChainStep> steps) {
  auto op = std::make_shared<NcclEmulation::Op>();
  op->kind = NcclEmulation::Op::Kind::Chain;
  // Counted on the communicator its steps use first (the vocabulary one).
  auto it = streamComms.find(int(StreamKind::Vocabulary));
  op->comm = it != streamComms.end()     ? it->second
             : !channelComms.empty() ? channelComms.begin()->second
             : streamComms.empty()   ? nullptr
                                     : streamComms.begin()->second;
  if (!op->comm)
    return nullptr;
  op->what = takeWhat("a collective of " + std::to_string(steps.size()) +
                      (steps.size() == 1 ? " step" : " steps"));
  op->chain = std::move(steps);
  op->queues = {engine.getOrder() == NcclEmulation::Order::Global
                    ? std::string("rank")
                    : "stream " + std::to_string(int(StreamKind::Vocabulary))};
  return engine.post(std::move(op));
}

std::unique_ptr<Request>
EmulatedNcclCommunicator::broadcastAsync(DevicePtr data, int64_t count,
                                         int root, int channel,
                                         Stream &stream) {
  std::string kind = "broadcast of " + std::to_string(count) + " " +
                     getName(data.getType()) + " from rank " +
                     std::to_string(root);
  return collective(kind, stream, channel, [=](MpiCommunicator &c) {
    HostStream host;
    return c.broadcastAsync(data, count, root, 0, host);
  });
}

std::unique_ptr<Request>
EmulatedNcclCommunicator::allReduceAsync(DevicePtr data, int64_t count,
                                         Reduction reduction, int channel,
                                         Stream &stream) {
  std::string kind = std::string("all-reduce (") +
                     (reduction == Reduction::Max ? "max" : "sum") + ") of " +
                     std::to_string(count) + " " + getName(data.getType());
  return collective(kind, stream, channel, [=](MpiCommunicator &c) {
    HostStream host;
    return c.allReduceAsync(data, count, reduction, 0, host);
  });
}

std::unique_ptr<Request>
EmulatedNcclCommunicator::reduceSumAsync(DevicePtr data, int64_t count,
                                         int root, int channel,
                                         Stream &stream) {
  std::string kind = "reduce of " + std::to_string(count) + " " +
                     getName(data.getType()) + " onto rank " +
                     std::to_string(root);
  return collective(kind, stream, channel, [=](MpiCommunicator &c) {
    HostStream host;
    return c.reduceSumAsync(data, count, root, 0, host);
  });
}

namespace {
std::string describeParts(const std::vector<int64_t> &counts) {
  std::string parts;
  for (int64_t c : counts)
    parts += (parts.empty() ? "" : ", ") + std::to_string(c);
  return parts;
}
} // namespace

std::unique_ptr<Request> EmulatedNcclCommunicator::reduceScatterAsync(
    DevicePtr data, DevicePtr out, const std::vector<int64_t> &counts,
    int channel, Stream &stream) {
  std::string kind = std::string("reduce-scatter of ") +
                     getName(data.getType()) + " in parts " +
                     describeParts(counts);
  return collective(kind, stream, channel, [=](MpiCommunicator &c) {
    HostStream host;
    return c.reduceScatterAsync(data, out, counts, 0, host);
  });
}

std::unique_ptr<Request>
EmulatedNcclCommunicator::allGatherAsync(DevicePtr data,
                                         const std::vector<int64_t> &counts,
                                         int channel, Stream &stream) {
  std::string kind = std::string("all-gather of ") + getName(data.getType()) +
                     " in parts " + describeParts(counts);
  return collective(kind, stream, channel, [=](MpiCommunicator &c) {
    HostStream host;
    return c.allGatherAsync(data, counts, 0, host);
  });
}

std::unique_ptr<Request> EmulatedNcclCommunicator::allToAllAsync(
    DevicePtr send, const std::vector<int64_t> &sendCounts, DevicePtr recv,
    const std::vector<int64_t> &recvCounts, int channel, Stream &stream) {
  // The parts differ by rank (each sends its own), so the operation the
  // members must agree on is the all-to-all and its type.
  std::string kind = std::string("all-to-all of ") + getName(send.getType());
  return collective(kind, stream, channel, [=](MpiCommunicator &c) {
    HostStream host;
    return c.allToAllAsync(send, sendCounts, recv, recvCounts, 0, host);
  });
}

Status EmulatedNcclCommunicator::allReduceSum(DevicePtr data, int64_t count,
                                              const int *members,
                                              int groupSize, Stream &stream) {
  std::vector<int> list(members, members + groupSize);
  auto it = groupComms.find(list);
  if (it == groupComms.end())
    return Status::error("NCCL emulation: no communicator was made for a "
                         "group of " +
                         std::to_string(groupSize) + " ranks");
  std::string kind = "group sum of " + std::to_string(count) + " " +
                     getName(data.getType());
  std::unique_ptr<Request> request =
      post(it->second, kind,
           engine.getOrder() == NcclEmulation::Order::Global
               ? std::string("rank")
               : "group " + it->second->name,
           [=](MpiCommunicator &c) {
             HostStream host;
             return c.allReduceAsync(data, count, Reduction::Sum, 0, host);
           });
  return request->waitOn(stream);
}

} // namespace sluice::rt
