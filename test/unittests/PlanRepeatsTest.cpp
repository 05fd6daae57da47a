//===- PlanRepeatsTest.cpp - Plan version 9's repeat blocks ---------------===//
//
// Both ends of a repeat block (sluice/PlanFormat/Repeats.h): the writer's
// findRepeats, expanded here by the rule docs/plan-format.md states, gives
// back every row; the runtime's reader expands a block into the list the
// same plan written out in full holds, and refuses a malformed block by
// name.
//
//===----------------------------------------------------------------------===//

#include "Plan.h"
#include "TinyPlans.h"

#include "sluice/PlanFormat/Repeats.h"

#include <gtest/gtest.h>
#include <map>
#include <optional>
#include <random>
#include <nlohmann/json.hpp>

using namespace sluice::rt;

namespace {

/// The rows `blocks` stand for, by the format's rule: run i of a body adds
/// i steps to microbatches and keys and maps slots i times.
std::vector<RepeatFields> expand(const std::vector<RepeatFields> &rows,
                                 const std::vector<RepeatBlock> &blocks) {
  std::vector<RepeatFields> out;
  size_t next = 0;
  for (const RepeatBlock &b : blocks) {
    for (; next < b.begin; ++next)
      out.push_back(rows[next]);
    for (size_t run = 0; run < b.count; ++run)
      for (size_t j = 0; j < b.length; ++j) {
        RepeatFields row = rows[b.begin + j];
        if (row.mb != RepeatFields::kAbsent)
          row.mb += int64_t(run) * b.mbStep;
        if (row.key != RepeatFields::kAbsent)
          row.key += int64_t(run) * b.keyStep;
        for (int64_t &slot : row.slots)
          for (size_t i = 0; i < run && slot >= 0; ++i)
            for (auto [from, to] : b.slotMap)
              if (from == slot) {
                slot = to;
                break;
              }
        out.push_back(row);
      }
    next = b.begin + b.length * b.count;
  }
  for (; next < rows.size(); ++next)
    out.push_back(rows[next]);
  return out;
}

bool same(const RepeatFields &a, const RepeatFields &b) {
  return a.fixed == b.fixed && a.mb == b.mb && a.key == b.key &&
         a.slots == b.slots;
}

/// A steady state as a 1F1B device runs it: F of microbatch j + 2, B of j,
/// the forward state in a ring of three slots, the message in slot 3.
std::vector<RepeatFields> steadyState(int microbatches) {
  std::vector<RepeatFields> rows;
  for (int j = 0; j < microbatches; ++j) {
    RepeatFields f, b, send;
    f.fixed = {0, 0};
    f.mb = j + 2;
    f.slots[0] = (j + 2) % 3;
    f.slots[4] = 3;
    send.fixed = {1, 0};
    send.mb = j + 2;
    send.key = 100 + 2 * (j + 2);
    send.slots[6] = 3;
    b.fixed = {0, 1};
    b.mb = j;
    b.slots[0] = j % 3;
    rows.insert(rows.end(), {f, send, b});
  }
  return rows;
}

TEST(PlanRepeats, ARingOfSlotsIsOnePeriod) {
  std::vector<RepeatFields> rows = steadyState(40);
  std::vector<RepeatBlock> blocks = findRepeats(rows, 4);
  ASSERT_EQ(blocks.size(), 1u);
  // One microbatch's three instructions, 40 times: the ring's rotation is
  // the slot map (0 -> 1 -> 2 -> 0), not a body three periods long.
  EXPECT_EQ(blocks[0].begin, 0u);
  EXPECT_EQ(blocks[0].length, 3u);
  EXPECT_EQ(blocks[0].count, 40u);
  EXPECT_EQ(blocks[0].mbStep, 1);
  EXPECT_EQ(blocks[0].keyStep, 2);
  std::vector<std::pair<int64_t, int64_t>> ring = {{0, 1}, {1, 2}, {2, 0}};
  EXPECT_EQ(blocks[0].slotMap, ring);
  std::vector<RepeatFields> back = expand(rows, blocks);
  ASSERT_EQ(back.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    EXPECT_TRUE(same(back[i], rows[i])) << "row " << i;
}

TEST(PlanRepeats, ABreakEndsTheBlock) {
  std::vector<RepeatFields> rows = steadyState(30);
  // Microbatch 20's F writes another slot than the ring gives it.
  rows[3 * 18].slots[4] = 2;
  std::vector<RepeatBlock> blocks = findRepeats(rows, 4);
  ASSERT_FALSE(blocks.empty());
  EXPECT_LE(blocks[0].begin + blocks[0].length * blocks[0].count, 3u * 18);
  std::vector<RepeatFields> back = expand(rows, blocks);
  ASSERT_EQ(back.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    EXPECT_TRUE(same(back[i], rows[i])) << "row " << i;
}

TEST(PlanRepeats, NothingRepeatsInIrregularRows) {
  std::vector<RepeatFields> rows;
  for (int i = 0; i < 50; ++i) {
    RepeatFields r;
    r.fixed = {i % 7, (i * i) % 11};
    r.mb = (i * 37) % 13;
    rows.push_back(r);
  }
  for (const RepeatBlock &b : findRepeats(rows, 0))
    for (size_t j = 0; j < b.length * b.count; ++j)
      EXPECT_TRUE(same(expand(rows, {b})[b.begin + j], rows[b.begin + j]));
  // Two runs of three save two rows: under the threshold, kept literal.
  EXPECT_TRUE(findRepeats(steadyState(2), 4).empty());
}

/// findRepeats as first written: every candidate period compared row by
/// row (Repeats.cpp now starts a multiple of a shorter period that held
/// from what that one proved). The same greedy choice, spelled plainly.
std::vector<RepeatBlock> findRepeatsRowByRow(const std::vector<RepeatFields> &rows,
                                            int64_t numSlots, size_t minSaved) {
  auto key = [](const RepeatFields &r) {
    std::vector<int64_t> k(r.fixed.begin(), r.fixed.end());
    k.push_back(r.mb == RepeatFields::kAbsent);
    k.push_back(r.key == RepeatFields::kAbsent);
    for (int64_t slot : r.slots)
      k.push_back(slot < 0);
    return k;
  };
  auto match = [&](size_t begin, size_t length) {
    RepeatBlock block;
    block.begin = begin;
    block.length = length;
    block.count = 1;
    std::map<int64_t, int64_t> map;
    std::optional<int64_t> mbStep, keyStep;
    auto step = [](int64_t a, int64_t b, std::optional<int64_t> &known) {
      if ((a == RepeatFields::kAbsent) != (b == RepeatFields::kAbsent))
        return false;
      if (a == RepeatFields::kAbsent)
        return true;
      if (!known) {
        if (b - a > kMaxRepeatStep || b - a < -kMaxRepeatStep)
          return false;
        known = b - a;
      }
      return b - a == *known;
    };
    while (begin + (block.count + 1) * length <= rows.size()) {
      auto runMap = map;
      auto runMb = mbStep, runKey = keyStep;
      bool holds = true;
      for (size_t j = 0; j < length && holds; ++j) {
        const RepeatFields &a = rows[begin + (block.count - 1) * length + j];
        const RepeatFields &b = rows[begin + block.count * length + j];
        holds = a.fixed == b.fixed && step(a.mb, b.mb, runMb) &&
                step(a.key, b.key, runKey);
        for (size_t r = 0; r < a.slots.size() && holds; ++r) {
          int64_t x = a.slots[r], y = b.slots[r];
          if (x < 0 || y < 0) {
            holds = x == y;
            continue;
          }
          if (x >= numSlots || y >= numSlots) {
            holds = false;
            continue;
          }
          auto [it, inserted] = runMap.try_emplace(x, y);
          holds = it->second == y;
        }
      }
      if (!holds)
        break;
      map = runMap;
      mbStep = runMb;
      keyStep = runKey;
      ++block.count;
    }
    for (auto [from, to] : map)
      if (from != to)
        block.slotMap.push_back({from, to});
    block.mbStep = mbStep.value_or(0);
    block.keyStep = keyStep.value_or(0);
    return block;
  };
  std::vector<RepeatBlock> blocks;
  for (size_t i = 0; i < rows.size();) {
    RepeatBlock best;
    size_t bestSaved = 0, q = i + 1;
    for (int tries = 0; tries < 8; ++tries, ++q) {
      while (q < rows.size() && key(rows[q]) != key(rows[i]))
        ++q;
      if (q >= rows.size() || i + 2 * (q - i) > rows.size())
        break;
      RepeatBlock block = match(i, q - i);
      if (block.count < 2)
        continue;
      size_t saved = (block.count - 1) * block.length - 1;
      if (saved > bestSaved) {
        bestSaved = saved;
        best = block;
      }
    }
    if (bestSaved >= minSaved && bestSaved > 0) {
      i += best.length * best.count;
      blocks.push_back(best);
    } else {
      ++i;
    }
  }
  return blocks;
}

// Steady states of one and two microbatches a period, slot rings of
// several lengths and random breaks: findRepeats chooses exactly the
// blocks of the row-by-row search, and they expand to every row.
TEST(PlanRepeats, MultiplesOfAPeriodChooseAsRowByRow) {
  std::mt19937 random(9);
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<RepeatFields> rows;
    int segments = 1 + int(random() % 4);
    int64_t mb = 0;
    for (int s = 0; s < segments; ++s) {
      int kinds = 1 + int(random() % 3), ring = 1 + int(random() % 4);
      int alternate = 1 + int(random() % 2), runs = 2 + int(random() % 30);
      for (int j = 0; j < runs; ++j, ++mb)
        for (int k = 0; k < kinds; ++k) {
          RepeatFields r;
          r.fixed = {k, s % 2, j % alternate};
          r.mb = mb;
          r.key = k == 0 ? 1000 + 3 * mb : RepeatFields::kAbsent;
          r.slots[0] = (mb + k) % ring;
          r.slots[3] = k == 1 ? 5 + mb % 2 : -1;
          if (random() % 40 == 0)
            r.slots[0] = 7; // a break
          rows.push_back(r);
        }
    }
    std::vector<RepeatBlock> fast = findRepeats(rows, 8, 3),
                             plain = findRepeatsRowByRow(rows, 8, 3);
    ASSERT_EQ(fast.size(), plain.size()) << "trial " << trial;
    for (size_t b = 0; b < fast.size(); ++b) {
      EXPECT_EQ(fast[b].begin, plain[b].begin) << "trial " << trial;
      EXPECT_EQ(fast[b].length, plain[b].length) << "trial " << trial;
      EXPECT_EQ(fast[b].count, plain[b].count) << "trial " << trial;
      EXPECT_EQ(fast[b].mbStep, plain[b].mbStep) << "trial " << trial;
      EXPECT_EQ(fast[b].keyStep, plain[b].keyStep) << "trial " << trial;
      EXPECT_EQ(fast[b].slotMap, plain[b].slotMap) << "trial " << trial;
    }
    std::vector<RepeatFields> back = expand(rows, fast);
    ASSERT_EQ(back.size(), rows.size()) << "trial " << trial;
    for (size_t i = 0; i < rows.size(); ++i)
      ASSERT_TRUE(same(back[i], rows[i])) << "trial " << trial << " row " << i;
  }
}

/// planReusingASentSlot with device 1's list as one block: it is two runs
/// of one microbatch's four instructions, keys one apart, the same slots.
nlohmann::json getBlockedPlan() {
  nlohmann::json plan = nlohmann::json::parse(planReusingASentSlot());
  nlohmann::json &list = plan["programs"][1]["instructions"];
  nlohmann::json body(list.begin(), list.begin() + 4);
  list = nlohmann::json::array({{{"repeat", 2},
                                 {"mb_step", 1},
                                 {"key_step", 1},
                                 {"slots", nlohmann::json::array()},
                                 {"body", body}}});
  return plan;
}

TEST(PlanRepeats, TheReaderExpandsABlockIntoTheFullList) {
  nlohmann::json full = nlohmann::json::parse(planReusingASentSlot());
  nlohmann::json blocked = getBlockedPlan();
  Plan a, b;
  ASSERT_TRUE(parsePlan(full.dump(), "full", a).isOk());
  Status st = parsePlan(blocked.dump(), "blocked", b);
  ASSERT_TRUE(st.isOk()) << st.message();
  const std::vector<Instruction> &x = a.programs[1].instructions,
                                   &y = b.programs[1].instructions;
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(x[i].op, y[i].op) << i;
    EXPECT_EQ(x[i].pass, y[i].pass) << i;
    EXPECT_EQ(x[i].mb, y[i].mb) << i;
    EXPECT_EQ(x[i].key, y[i].key) << i;
    EXPECT_EQ(x[i].state, y[i].state) << i;
    EXPECT_EQ(x[i].in, y[i].in) << i;
    EXPECT_EQ(x[i].out, y[i].out) << i;
    EXPECT_EQ(x[i].buffer, y[i].buffer) << i;
  }
}

/// The reader's message for `edit` applied to a one-block plan.
std::string refusal(void (*edit)(nlohmann::json &block, nlohmann::json &plan)) {
  nlohmann::json plan = getBlockedPlan();
  edit(plan["programs"][1]["instructions"][0], plan);
  Plan parsed;
  Status st = parsePlan(plan.dump(), "edited", parsed);
  EXPECT_FALSE(st.isOk());
  return st.message();
}

TEST(PlanRepeats, AMalformedBlockIsRefusedByName) {
  auto has = [](const std::string &message, const std::string &part) {
    return message.find(part) != std::string::npos;
  };
  std::string m = refusal([](nlohmann::json &, nlohmann::json &plan) {
    plan["version"] = 8;
  });
  EXPECT_TRUE(has(m, "device 1, instruction 0: a repeat block in a version "
                     "8 plan"))
      << m;
  m = refusal([](nlohmann::json &b, nlohmann::json &) {
    b["body"].push_back(b);
  });
  EXPECT_TRUE(has(m, "body instruction 4: repeat blocks do not nest")) << m;
  m = refusal([](nlohmann::json &b, nlohmann::json &) {
    b["slots"] = {{0, 9}};
  });
  EXPECT_TRUE(has(m, "a slot map's slot must be at most 3, got 9")) << m;
  m = refusal([](nlohmann::json &b, nlohmann::json &) {
    b["repeat"] = int64_t(1) << 23;
  });
  EXPECT_TRUE(has(m, "take the device past 16777216 instructions")) << m;
  m = refusal([](nlohmann::json &b, nlohmann::json &) {
    b["mb_step"] = int64_t(1) << 40;
  });
  EXPECT_TRUE(has(m, "'mb_step' must be at most 2147483648")) << m;
  m = refusal([](nlohmann::json &b, nlohmann::json &) {
    b["repeat"] = 0;
  });
  EXPECT_TRUE(has(m, "'repeat' must be at least 1, got 0")) << m;
  m = refusal([](nlohmann::json &b, nlohmann::json &) {
    b["body"] = nlohmann::json::array();
  });
  EXPECT_TRUE(has(m, "'body' must list the block's instructions")) << m;
  // A block that expands into another microbatch's work than the
  // program's is the validator's to refuse, as a written-out one is.
  m = refusal([](nlohmann::json &b, nlohmann::json &) { b["mb_step"] = 5; });
  EXPECT_TRUE(has(m, "microbatch")) << m;
}

} // namespace
