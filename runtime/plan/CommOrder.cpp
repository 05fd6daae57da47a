//===- CommOrder.cpp - One global order of a step's communication ---------===//

#include "CommOrder.h"

#include <map>
#include <optional>
#include <tuple>

namespace sluice::rt {

namespace {

/// The run of every device's program together (CommOrder.h).
class OrderRun {
public:
  explicit OrderRun(const Plan &plan) : plan(plan) {
    int devices = plan.devices;
    pc.assign(devices, 0);
    lastSend.resize(devices);
    order.resize(devices);
    sendOf.resize(devices);
    incoming.resize(devices);
    for (int d = 0; d < devices; ++d) {
      size_t slots = plan.programs[d].buffers.size();
      sendOf[d].assign(slots, -1);
      incoming[d].assign(slots, -1);
    }
  }

  Status run(std::vector<std::vector<size_t>> &out) {
    // The devices take turns, one instruction each, as devices that run
    // at the same time would, and a device whose last send has not
    // completed waits for its receiver while any other device can move
    // (patiently): a send completes, and takes its place in the order,
    // before its device's next pass wherever the receiver allows it.
    // (Running each device until it waited listed a pipeline's first
    // send after all its warm-up forwards, and the runtime issued it
    // there: every stage's fill waited for the one before it to finish
    // its own.) Where only impatient devices could move, they do: plans
    // whose devices both send before they receive stay runnable.
    bool patient = true;
    for (;;) {
      bool moved = false;
      for (int d = 0; d < plan.devices; ++d) {
        if (pc[d] >= plan.programs[d].instructions.size() ||
            (patient && waitsForSend(d)))
          continue;
        if (step(d, pc[d])) {
          ++pc[d];
          moved = true;
        }
      }
      if (moved)
        patient = true;
      else if (patient)
        patient = false;
      else
        break;
    }
    for (int d = 0; d < plan.devices; ++d)
      if (pc[d] < plan.programs[d].instructions.size())
        return stuck();
    out = std::move(order);
    return Status::ok();
  }

private:
  /// A message (from, to, key) and its two ends.
  struct Message {
    size_t sendInstr = 0, recvInstr = 0;
    bool sent = false, received = false;
    bool complete() const { return sent && received; }
  };
  /// A collective (shard, group, mb, slice) and each device's instruction.
  struct Collective {
    std::map<int, size_t> posted; // device -> instruction
    bool complete = false;
  };
  using MessageKey = std::tuple<int, int, int64_t>;
  using CollectiveKey = std::tuple<int, int, int, int>;

  const Instruction &at(int d, size_t i) const {
    return plan.programs[d].instructions[i];
  }

  /// Whether `d`'s last send is still waiting for its receive.
  bool waitsForSend(int d) const {
    return lastSend[d] && !messages.at(*lastSend[d]).complete();
  }

  /// Whether the send last posted from `slot` of `d` has completed (or
  /// there is none).
  bool settled(int d, int32_t slot) const {
    if (slot < 0 || sendOf[d][slot] < 0)
      return true;
    return messages.at(sendSlots.at(sendOf[d][slot])).complete();
  }
  void settle(int d, int32_t slot) {
    if (slot >= 0)
      sendOf[d][slot] = -1;
  }

  /// Performs instruction `i` of `d` if nothing it waits for is missing.
  bool step(int d, size_t i) {
    const Instruction &instr = at(d, i);
    switch (instr.op) {
    case Op::Send: {
      MessageKey key{d, instr.peer, instr.key};
      Message &m = messages[key];
      m.sent = true;
      m.sendInstr = i;
      sendOf[d][instr.buffer] = int64_t(sendSlots.size());
      sendSlots.push_back(key);
      lastSend[d] = key;
      completeMessage(key, m);
      return true;
    }
    case Op::Recv: {
      if (!settled(d, instr.buffer))
        return false;
      settle(d, instr.buffer);
      MessageKey key{instr.peer, d, instr.key};
      Message &m = messages[key];
      m.received = true;
      m.recvInstr = i;
      incoming[d][instr.buffer] = int64_t(recvSlots.size());
      recvSlots.push_back(key);
      completeMessage(key, m);
      return true;
    }
    case Op::Collective: {
      CollectiveKey key{int(instr.shard), instr.group, instr.mb, instr.slice};
      Collective &c = collectives[key];
      if (!c.posted.count(d)) {
        c.posted[d] = i;
        if (int(c.posted.size()) == plan.devices) {
          c.complete = true;
          for (auto [device, instruction] : c.posted)
            order[device].push_back(instruction);
        }
      }
      // The interlaced baseline's collectives block the device.
      return !instr.blocking || c.complete;
    }
    case Op::GradSync:
      // Over the replicas, which run this same program in step.
      order[d].push_back(i);
      return true;
    case Op::Exec:
      return exec(d, i);
    }
    return true;
  }

  bool exec(int d, size_t i) {
    const Instruction &instr = at(d, i);
    if (std::optional<CollectiveRef> in = plan.getCollectiveInput(instr)) {
      auto it = collectives.find(
          {int(in->shard), in->group, instr.mb, instr.slice});
      if (it == collectives.end() || !it->second.complete)
        return false;
    }
    if (instr.in >= 0 && incoming[d][instr.in] >= 0 &&
        !messages.at(recvSlots[incoming[d][instr.in]]).complete())
      return false;
    for (int32_t written : {instr.out, instr.state, instr.wstate, instr.kv})
      if (!settled(d, written))
        return false;
    if (instr.in >= 0)
      incoming[d][instr.in] = -1;
    for (int32_t written : {instr.out, instr.state, instr.wstate, instr.kv})
      settle(d, written);
    order[d].push_back(i);
    return true;
  }

  void completeMessage(const MessageKey &key, const Message &m) {
    if (!m.complete())
      return;
    order[std::get<0>(key)].push_back(m.sendInstr);
    order[std::get<1>(key)].push_back(m.recvInstr);
  }

  /// What each unfinished device waits at.
  Status stuck() const {
    std::string why = "the plan's programs cannot all run to the end: ";
    bool first = true;
    for (int d = 0; d < plan.devices; ++d) {
      const std::vector<Instruction> &program = plan.programs[d].instructions;
      if (pc[d] >= program.size())
        continue;
      why += (first ? "" : "; ") + std::string("device ") + std::to_string(d) +
             " waits at instruction " + std::to_string(pc[d]) + " (" +
             plan.describe(program[pc[d]]) + ")";
      first = false;
    }
    for (const auto &[key, m] : messages)
      if (!m.complete()) {
        auto [from, to, k] = key;
        why += "; message " + std::to_string(k) + " from device " +
               std::to_string(from) + " to device " + std::to_string(to) +
               (m.sent ? " is sent but not yet received"
                       : " is received but not yet sent");
        break;
      }
    return Status::error(why);
  }

  const Plan &plan;
  std::vector<size_t> pc;
  std::vector<std::vector<size_t>> order;
  std::map<MessageKey, Message> messages;
  std::map<CollectiveKey, Collective> collectives;
  /// Per device and slot: the last send posted from it, and the receive
  /// filling it, as indices into sendSlots/recvSlots (-1: none).
  std::vector<std::vector<int64_t>> sendOf, incoming;
  std::vector<MessageKey> sendSlots, recvSlots;
  /// Per device, its last send (waitsForSend).
  std::vector<std::optional<MessageKey>> lastSend;
};

} // namespace

Status orderCommunication(const Plan &plan,
                          std::vector<std::vector<size_t>> &order) {
  if (int(plan.programs.size()) != plan.devices)
    return Status::error("the plan has " + std::to_string(plan.programs.size()) +
                         " device programs for " +
                         std::to_string(plan.devices) + " devices");
  return OrderRun(plan).run(order);
}

Status applyCommunicationOrder(Plan &plan) {
  std::vector<std::vector<size_t>> order;
  if (Status st = orderCommunication(plan, order); !st)
    return st;
  for (int d = 0; d < plan.devices; ++d) {
    std::vector<Instruction> &program = plan.programs[d].instructions;
    if (order[d].size() != program.size())
      return Status::error("device " + std::to_string(d) +
                           ": the communication order lost instructions");
    std::vector<Instruction> ordered;
    ordered.reserve(program.size());
    for (size_t i : order[d])
      ordered.push_back(program[i]);
    program = std::move(ordered);
  }
  return Status::ok();
}

Status checkSerializedOrder(const Plan &plan) {
  // Each device's communication operations in issue order (gradient sums
  // are between replicas running this same program: never a cycle).
  std::vector<std::vector<size_t>> ops(plan.devices);
  for (int d = 0; d < plan.devices; ++d) {
    const std::vector<Instruction> &program = plan.programs[d].instructions;
    for (size_t i = 0; i < program.size(); ++i)
      if (program[i].op == Op::Send || program[i].op == Op::Recv ||
          program[i].op == Op::Collective)
        ops[d].push_back(i);
  }
  std::vector<size_t> head(plan.devices, 0);
  auto current = [&](int d) -> const Instruction * {
    return head[d] < ops[d].size()
               ? &plan.programs[d].instructions[ops[d][head[d]]]
               : nullptr;
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (int d = 0; d < plan.devices; ++d) {
      const Instruction *op = current(d);
      if (!op)
        continue;
      if (op->op == Op::Collective) {
        bool all = true;
        for (int e = 0; e < plan.devices && all; ++e) {
          const Instruction *other = current(e);
          all = other && other->op == Op::Collective &&
                other->shard == op->shard && other->group == op->group &&
                other->mb == op->mb && other->slice == op->slice;
        }
        if (all) {
          for (int e = 0; e < plan.devices; ++e)
            ++head[e];
          moved = true;
        }
        continue;
      }
      // A message: the peer's current operation must be its other end.
      const Instruction *other = current(op->peer);
      Op want = op->op == Op::Send ? Op::Recv : Op::Send;
      if (other && other->op == want && other->peer == d &&
          other->key == op->key) {
        ++head[d];
        ++head[op->peer];
        moved = true;
      }
    }
  }
  std::string why;
  for (int d = 0; d < plan.devices; ++d)
    if (const Instruction *op = current(d))
      why += std::string(why.empty() ? "" : "; ") + "device " +
             std::to_string(d) + " waits in " + plan.describe(*op);
  if (why.empty())
    return Status::ok();
  return Status::error("issued as they stand, the programs would wait for "
                       "good under NCCL's rules: " +
                       why);
}

} // namespace sluice::rt
