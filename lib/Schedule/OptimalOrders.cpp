//===- OptimalOrders.cpp - The exact schedule of small pipelines ----------===//

#include "sluice/Schedule/OptimalOrders.h"

#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::sched;

namespace {
/// One row of the program: sum(coef * column) >= lower.
struct Row {
  std::vector<int> columns;
  std::vector<double> coefficients;
  double lower;
};

struct ProblemDeleter {
  void operator()(glp_prob *p) const { glp_delete_prob(p); }
};

/// GLPK prints its progress to stdout by default; a compiler is quiet.
int silence(void *, const char *) { return 1; }
} // namespace

/// Memory: when F_k starts, its device holds F_k's activations, every
/// earlier F's, less every earlier W's (BW's): at most the cap.
///   cap - a_k >= sum_j a_j [F_j before F_k] - sum_j a_j [W_j before F_k]
/// with [a before b] the order variable y of the pair or 1 - y.
static void addMemoryRows(llvm::ArrayRef<Work> works,
                          llvm::ArrayRef<int> device,
                          const std::map<std::pair<int, int>, int> &order,
                          llvm::function_ref<double(int)> activation,
                          llvm::ArrayRef<double> cap, std::vector<Row> &rows) {
  int n = int(works.size());
  for (int k = 0; k < n; ++k) {
    if (works[k].kind != PassKind::F)
      continue;
    Row row;
    double constant = 0;
    auto before = [&](int a, int b, double weight) {
      if (a < b) {
        row.columns.push_back(order.at({a, b}));
        row.coefficients.push_back(weight);
      } else {
        row.columns.push_back(order.at({b, a}));
        row.coefficients.push_back(-weight);
        constant += weight;
      }
    };
    for (int j = 0; j < n; ++j) {
      if (j == k || device[j] != device[k])
        continue;
      PassKind kind = works[j].kind;
      if (kind == PassKind::F)
        before(j, k, -activation(j));
      else if (kind == PassKind::W || kind == PassKind::BW)
        before(j, k, activation(j));
    }
    // sum(coef * column) + constant >= a_k - cap.
    row.lower = activation(k) - cap[device[k]] - constant;
    rows.push_back(std::move(row));
  }
}

/// The mixed-integer program in GLPK: starts 1..n and the makespan are
/// non-negative, the order variables binary (those a dependency decides
/// fixed), each row `sum >= lower`; the makespan is minimised.
static std::unique_ptr<glp_prob, ProblemDeleter>
loadProblem(int n, int columns, int makespan,
            const std::map<std::pair<int, int>, int> &order,
            llvm::ArrayRef<std::pair<int, int>> fixed,
            llvm::ArrayRef<Row> rows) {
  std::unique_ptr<glp_prob, ProblemDeleter> lp(glp_create_prob());
  glp_term_hook(silence, nullptr);
  glp_set_obj_dir(lp.get(), GLP_MIN);
  glp_add_cols(lp.get(), columns);
  for (int c = 1; c <= n; ++c)
    glp_set_col_bnds(lp.get(), c, GLP_LO, 0.0, 0.0);
  for (const auto &entry : order)
    glp_set_col_kind(lp.get(), entry.second, GLP_BV);
  for (auto [column, value] : fixed)
    glp_set_col_bnds(lp.get(), column, GLP_FX, value, value);
  glp_set_col_bnds(lp.get(), makespan, GLP_LO, 0.0, 0.0);
  glp_set_obj_coef(lp.get(), makespan, 1.0);
  glp_add_rows(lp.get(), int(rows.size()));
  for (size_t r = 0; r < rows.size(); ++r) {
    const Row &row = rows[r];
    glp_set_row_bnds(lp.get(), int(r) + 1, GLP_LO, row.lower, 0.0);
    // GLPK's arrays are 1-based too.
    std::vector<int> index(1, 0);
    std::vector<double> value(1, 0.0);
    // A pair may name a column twice (never here, but GLPK refuses it).
    std::map<int, double> merged;
    for (size_t k = 0; k < row.columns.size(); ++k)
      merged[row.columns[k]] += row.coefficients[k];
    for (auto [column, coefficient] : merged) {
      index.push_back(column);
      value.push_back(coefficient);
    }
    glp_set_mat_row(lp.get(), int(r) + 1, int(index.size()) - 1, index.data(),
                    value.data());
  }
  return lp;
}

/// Each device's passes in the order of their starts in the solution.
static std::vector<std::vector<Work>> readOrders(glp_prob *lp,
                                                 llvm::ArrayRef<Work> works,
                                                 llvm::ArrayRef<int> device,
                                                 int devices) {
  std::vector<std::vector<std::pair<double, int>>> starts(devices);
  for (int j = 0; j < int(works.size()); ++j)
    starts[device[j]].push_back({glp_mip_col_val(lp, j + 1), j});
  std::vector<std::vector<Work>> orders(devices);
  for (int d = 0; d < devices; ++d) {
    std::sort(starts[d].begin(), starts[d].end());
    for (auto [start, j] : starts[d])
      orders[d].push_back(works[j]);
  }
  return orders;
}

/// Every pass of the pipeline and the device it runs on.
static void collectPasses(const Pipeline &pipeline, std::vector<Work> &works,
                          std::vector<int> &device) {
  for (int stage = 0; stage < pipeline.getNumStages(); ++stage)
    for (PassKind kind : getStagePasses(pipeline))
      for (int mb = 0; mb < pipeline.microbatches; ++mb) {
        Work work{kind, stage, mb, 0};
        if (!hasWork(pipeline, work))
          continue;
        works.push_back(work);
        device.push_back(pipeline.getWorkDevice(work));
      }
}

/// Runs GLPK's branch and cut for at most `timeLimit` seconds and reads
/// the orders of the best schedule found.
static FailureOr<OptimalResult> solve(glp_prob *lp, double timeLimit,
                                      const std::vector<Work> &works,
                                      const std::vector<int> &device,
                                      int devices, std::string &error) {
  glp_iocp parameters;
  glp_init_iocp(&parameters);
  parameters.presolve = GLP_ON;
  parameters.msg_lev = GLP_MSG_OFF;
  parameters.tm_lim = int(std::min(timeLimit * 1000.0, 2.0e9));
  int status = glp_intopt(lp, &parameters);
  int found = glp_mip_status(lp);
  if (found != GLP_OPT && found != GLP_FEAS) {
    error = found == GLP_NOFEAS
                ? "no schedule keeps every device within its memory cap"
                : "no schedule found within the time limit (GLPK status " +
                      std::to_string(status) + ")";
    return failure();
  }
  OptimalResult result;
  result.makespan = glp_mip_obj_val(lp);
  result.proven = found == GLP_OPT;
  result.orders = readOrders(lp, works, device, devices);
  return result;
}

FailureOr<OptimalResult> sched::findOptimalOrders(const Pipeline &pipeline,
                                                  const Durations &durations,
                                                  const OptimalOptions &options,
                                                  std::string &error) {
  if (pipeline.vocab.any() || pipeline.slices != 1) {
    error = "the exact schedule covers pipelines without vocabulary passes "
            "or token slices";
    return failure();
  }
  int p = pipeline.devices;
  if (!options.memoryCap.empty() && int(options.memoryCap.size()) != p) {
    error = "one memory cap per device is needed (got " +
            std::to_string(options.memoryCap.size()) + " for " +
            std::to_string(p) + " devices)";
    return failure();
  }
  // The passes, numbered from 1 (GLPK's columns are 1-based); column 0 of
  // the program is unused, the makespan is the last.
  std::vector<Work> works;
  std::vector<int> device;
  collectPasses(pipeline, works, device);
  int n = int(works.size());
  std::map<std::tuple<int, int, int, int>, int> number;
  auto key = [](const Work &w) {
    return std::make_tuple(int(w.kind), w.stage, w.microbatch, w.slice);
  };
  for (int j = 0; j < n; ++j)
    number[key(works[j])] = j;
  auto duration = [&](int j) { return durations.compute(works[j]); };
  auto activation = [&](int j) {
    Work owner = works[j];
    owner.kind = PassKind::F;
    return durations.activation ? durations.activation(owner) : 1.0;
  };
  // A bound on any start: everything one after another, every transfer.
  double big = 0;
  for (int j = 0; j < n; ++j)
    big += duration(j) + durations.transfer;

  // Columns: starts 1..n, then an order variable per pair on one device
  // (1: the first of the pair runs before the second), then the makespan.
  std::map<std::pair<int, int>, int> order;
  int columns = n;
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j)
      if (device[i] == device[j])
        order[{i, j}] = ++columns;
  int makespan = ++columns;

  std::vector<Row> rows;
  llvm::SmallVector<Work, 8> deps;
  std::vector<std::pair<int, int>> fixed; // (order column, value)
  for (int j = 0; j < n; ++j) {
    // Dependencies: s_j - s_i >= d_i (+ a transfer between devices).
    deps.clear();
    getDependencies(pipeline, works[j], deps);
    for (const Work &dep : deps) {
      auto it = number.find(key(dep));
      if (it == number.end())
        continue;
      int i = it->second;
      double gap =
          duration(i) + (device[i] != device[j] ? durations.transfer : 0.0);
      rows.push_back({{j + 1, i + 1}, {1.0, -1.0}, gap});
      if (device[i] == device[j])
        fixed.push_back(
            {order[{std::min(i, j), std::max(i, j)}], i < j ? 1 : 0});
    }
    // The makespan: C - s_j >= d_j.
    rows.push_back({{makespan, j + 1}, {1.0, -1.0}, duration(j)});
  }
  // One pass at a time per device: for i < j with y = [i before j],
  //   s_j - s_i - M y >= d_i - M   and   s_i - s_j + M y >= d_j.
  for (auto [pair, column] : order) {
    auto [i, j] = pair;
    rows.push_back(
        {{j + 1, i + 1, column}, {1.0, -1.0, -big}, duration(i) - big});
    rows.push_back({{i + 1, j + 1, column}, {1.0, -1.0, big}, duration(j)});
  }
  if (!options.memoryCap.empty())
    addMemoryRows(works, device, order, activation, options.memoryCap, rows);

  std::unique_ptr<glp_prob, ProblemDeleter> lp =
      loadProblem(n, columns, makespan, order, fixed, rows);
  return solve(lp.get(), options.timeLimit, works, device, p, error);
}
