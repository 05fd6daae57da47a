//===- Checkpoint.cpp - Save and restore training state -------------------===//

#include "Checkpoint.h"

#include "InputFile.h"

#include "sluice/PlanFormat/Json.h"
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <tuple>
#include <fcntl.h>
#include <unistd.h>

namespace sluice::rt {

namespace fs = std::filesystem;

namespace {
constexpr char kMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'C', 'K'};
// Version 2 records each tensor's row range, so that the vocabulary
// shards (row ranges of a table) load under any partitioning; version 3
// records where each tensor's elements sit in the whole tensor as runs
// (getRuns), so that tensor-parallel slices -- column ranges too -- load
// under any (pp, tp).
constexpr uint32_t kVersion = 3;

template <typename T> void put(std::string &out, const T &value) {
  out.append(reinterpret_cast<const char *>(&value), sizeof(T));
}
void putFloats(std::string &out, const float *data, int64_t n) {
  out.append(reinterpret_cast<const char *>(data), n * sizeof(float));
}

/// Reads little-endian values from a byte string, failing on truncation.
class Reader {
public:
  explicit Reader(std::string bytes) : bytes(std::move(bytes)) {}
  template <typename T> bool get(T &value) {
    if (sizeof(T) > remaining())
      return false;
    std::memcpy(&value, bytes.data() + pos, sizeof(T));
    pos += sizeof(T);
    return true;
  }
  bool getBytes(char *out, size_t n) {
    if (n > remaining())
      return false;
    if (n == 0) // an empty tensor's data() may be null: no memcpy of it
      return true;
    std::memcpy(out, bytes.data() + pos, n);
    pos += n;
    return true;
  }
  bool skip(size_t n) {
    if (n > remaining())
      return false;
    pos += n;
    return true;
  }
  /// Bytes not yet read: what any count the file gives must fit in before
  /// anything is allocated for it.
  size_t remaining() const { return bytes.size() - pos; }

private:
  std::string bytes;
  size_t pos = 0;
};
} // namespace

Status readFile(const std::string &path, std::string &contents) {
  std::ifstream in;
  if (Status st = openInputFile(path, "", in); !st)
    return st;
  std::stringstream buffer;
  buffer << in.rdbuf();
  contents = buffer.str();
  return Status::ok();
}

Status writeFileAtomically(const std::string &path,
                           const std::string &contents) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  auto failed = [&](const std::string &what) {
    std::string reason = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Status::error("cannot " + what + " '" + tmp + "': " + reason);
  };
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return Status::error("cannot write '" + tmp + "': " +
                         std::strerror(errno));
  for (size_t done = 0; done < contents.size();) {
    ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      ::close(fd);
      return failed("write");
    }
    done += size_t(n);
  }
  // On the disk before the name points at it: a crash leaves the old file
  // or the new one, never a torn one.
  if (::fsync(fd) != 0) {
    ::close(fd);
    return failed("sync");
  }
  if (::close(fd) != 0)
    return failed("close");
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return failed("rename to '" + path + "'");
  return Status::ok();
}

static std::string getManifestName(int64_t step) {
  return step < 0 ? "checkpoint.json" : "step-" + std::to_string(step) + ".json";
}

static std::string getRankFileName(int rank, int64_t step) {
  return "rank-" + std::to_string(rank) + ".step-" + std::to_string(step) +
         ".bin";
}

namespace {
nlohmann::json toJson(const TrainingSettings &t) {
  return {{"lr", t.schedule.peak},
          {"beta1", t.adam.beta1},
          {"beta2", t.adam.beta2},
          {"epsilon", t.adam.epsilon},
          {"weight_decay", t.adam.weightDecay},
          {"warmup_steps", t.schedule.warmup},
          {"lr_decay", LearningRateSchedule::getDecayName(t.schedule.decay)},
          {"lr_decay_steps", t.schedule.decaySteps},
          {"min_lr", t.schedule.minimum},
          {"clip_grad", t.clipNorm},
          {"seed", t.seed},
          {"held_out", t.heldOut},
          {"tokens_per_step", t.tokensPerStep}};
}

/// The settings a manifest recorded, each checked as sluice-run checks
/// its flag: a hand-edited or damaged manifest must not resume with a
/// decay it misspells as none, or an epsilon of -1.
Status fromJson(const nlohmann::json &j, const std::string &path,
                TrainingSettings &t) {
  auto number = [&](const char *key, double low, double high,
                    bool lowOpen, double &out) -> Status {
    const nlohmann::json &v = j.at(key);
    double x = v.is_number() ? v.get<double>() : std::nan("");
    bool above = lowOpen ? x > low : x >= low;
    if (!std::isfinite(x) || !above || x > high) {
      auto shortest = [](double value) {
        char text[32];
        std::snprintf(text, sizeof(text), "%g", value);
        return std::string(text);
      };
      return Status::error("'" + path + "': training setting '" + key +
                           "' is " + v.dump() + ", not a number in " +
                           (lowOpen ? "(" : "[") + shortest(low) + ", " +
                           shortest(high) + "]");
    }
    out = x;
    return Status::ok();
  };
  const double floatMax = std::numeric_limits<float>::max();
  double lr = 0, beta1 = 0, beta2 = 0, epsilon = 0, decay = 0, minimum = 0,
         clip = 0, heldOut = 0, warmup = 0, decaySteps = 0;
  for (auto [key, low, high, open, out] :
       {std::tuple{"lr", 0.0, floatMax, true, &lr},
        std::tuple{"beta1", 0.0, 0.999999, false, &beta1},
        std::tuple{"beta2", 0.0, 0.999999, false, &beta2},
        // At least fp32's smallest normal number: the optimizer adds it in
        // fp32, where a smaller one is a denormal or 0 (a division by
        // zero for a parameter whose gradients were all 0).
        std::tuple{"epsilon", double(std::numeric_limits<float>::min()), 1.0,
                   false, &epsilon},
        std::tuple{"weight_decay", 0.0, floatMax, false, &decay},
        std::tuple{"min_lr", 0.0, floatMax, false, &minimum},
        std::tuple{"clip_grad", 0.0, floatMax, false, &clip},
        std::tuple{"warmup_steps", 0.0, 1e15, false, &warmup},
        std::tuple{"lr_decay_steps", 0.0, 1e15, false, &decaySteps}})
    if (Status st = number(key, low, high, open, *out); !st)
      return st;
  if (j.contains("held_out"))
    if (Status st = number("held_out", 0.0, 0.999999, false, heldOut); !st)
      return st;
  std::string decayName = j.at("lr_decay").get<std::string>();
  if (!LearningRateSchedule::parseDecay(decayName, t.schedule.decay))
    return Status::error("'" + path + "': training setting 'lr_decay' is '" +
                         decayName + "' (expected none, linear or cosine)");
  t.schedule.peak = float(lr);
  t.adam.beta1 = float(beta1);
  t.adam.beta2 = float(beta2);
  t.adam.epsilon = float(epsilon);
  t.adam.weightDecay = float(decay);
  t.schedule.minimum = float(minimum);
  t.schedule.warmup = int64_t(warmup);
  t.schedule.decaySteps = int64_t(decaySteps);
  t.clipNorm = clip;
  t.heldOut = heldOut;
  t.seed = j.at("seed").get<uint64_t>();
  if (j.contains("tokens_per_step") && j["tokens_per_step"].is_number_integer())
    t.tokensPerStep = std::max<int64_t>(0, j["tokens_per_step"].get<int64_t>());
  return Status::ok();
}

/// The step of a step manifest's name (step-N.json), or -1.
int64_t getManifestStep(const std::string &file) {
  long long step = -1;
  if (std::sscanf(file.c_str(), "step-%lld.json", &step) != 1 || step < 0 ||
      file != getManifestName(step))
    return -1;
  return step;
}

/// The steps whose manifests `dir` holds, newest first.
std::vector<int64_t> listSavedSteps(const std::string &dir) {
  std::vector<int64_t> saved;
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(dir, ec))
    if (int64_t step = getManifestStep(entry.path().filename().string());
        step >= 0)
      saved.push_back(step);
  std::sort(saved.rbegin(), saved.rend());
  return saved;
}

/// The step of a rank file's name, or -1 for any other file.
int64_t getRankFileStep(const std::string &file) {
  int rank = -1;
  long long step = -1;
  if (std::sscanf(file.c_str(), "rank-%d.step-%lld.bin", &rank, &step) != 2 ||
      file != getRankFileName(rank, step))
    return -1;
  return step;
}
} // namespace

/// An error naming the first parameter whose weights or moments hold a
/// value that is not finite.
Status checkFinite(ParameterStore &params, const std::vector<float> &weights,
                   const std::vector<float> &moment1,
                   const std::vector<float> &moment2, const std::string &what,
                   const std::string &consequence) {
  for (const ParameterSpec &spec : params.specs()) {
    int64_t at = params.offset(spec.name);
    for (const std::vector<float> *tensor : {&weights, &moment1, &moment2})
      for (int64_t i = 0; i < spec.size(); ++i) {
        float value = (*tensor)[size_t(at + i)];
        if (!std::isfinite(value))
          return Status::error(what + " hold " + std::to_string(value) +
                               " in " + spec.name +
                               (tensor == &weights ? ""
                                                   : "'s optimizer moments") +
                               ": " + consequence);
        // Adam's second moment is a mean of squares: a negative one
        // (a damaged file) would take the square root of it.
        if (tensor == &moment2 && value < 0)
          return Status::error(what + " hold a negative second moment (" +
                               std::to_string(value) + ") in " + spec.name +
                               ": " + consequence);
      }
  }
  return Status::ok();
}

namespace {

/// This rank's file: its parameters' real elements (a shard's padding is
/// not part of the model), each run under its place in the whole tensor,
/// weights then both moments. Refused when the weights are not finite.
Status serializeRankFile(int64_t step, ParameterStore &params,
                         const WrittenParameters &writes, std::string &bytes) {
  std::vector<float> weights, moment1, moment2;
  Status read = params.read(ParameterStore::Tensor::Weights, weights);
  if (read)
    read = params.read(ParameterStore::Tensor::Moment1, moment1);
  if (read)
    read = params.read(ParameterStore::Tensor::Moment2, moment2);
  // A diverged update (a learning rate far too high) leaves NaN or
  // infinity in the weights: never saved, so a resume cannot inherit it.
  if (read)
    read = checkFinite(params, weights, moment1, moment2,
                       "the weights after step " + std::to_string(step),
                       "not saved: the run diverged (lower --lr, or set "
                       "--clip-grad)");
  if (!read)
    return read;
  bytes.assign(kMagic, sizeof(kMagic));
  put(bytes, kVersion);
  put(bytes, step);
  uint32_t count = 0;
  for (const ParameterSpec &spec : params.specs())
    count += !writes || writes(spec);
  put(bytes, count);
  for (const ParameterSpec &spec : params.specs()) {
    if (writes && !writes(spec))
      continue;
    put(bytes, uint32_t(spec.name.size()));
    bytes += spec.name;
    std::vector<TensorRun> runs = getRuns(spec);
    put(bytes, getWholeElements(spec));
    put(bytes, uint32_t(runs.size()));
    for (const TensorRun &run : runs) {
      put(bytes, run.global);
      put(bytes, run.count);
    }
    int64_t at = params.offset(spec.name);
    for (const std::vector<float> *tensor : {&weights, &moment1, &moment2})
      for (const TensorRun &run : runs)
        putFloats(bytes, tensor->data() + at + run.local, run.count);
  }
  return Status::ok();
}

/// Whether every rank succeeded (`mine` is this rank's outcome); `what`
/// names the others' failure.
Status agreeAcross(Communicator &comm, const Status &mine,
                   const std::string &what) {
  double failed = mine ? 0.0 : 1.0;
  Status reduced = comm.allReduceMax(&failed, 1);
  if (!mine)
    return mine;
  if (!reduced)
    return reduced;
  if (failed > 0)
    return Status::error(what);
  return Status::ok();
}

/// Once the manifests point at the newest step: the steps beyond the
/// newest `keep` are garbage, and so is any rank file of no kept step (an
/// interrupted save's, or an older run's).
void removeStaleFiles(const std::string &dir, int keep) {
  std::error_code ec;
  std::vector<int64_t> saved = listSavedSteps(dir);
  saved.resize(std::min(saved.size(), size_t(std::max(1, keep))));
  auto kept = [&](int64_t s) {
    return std::find(saved.begin(), saved.end(), s) != saved.end();
  };
  for (const auto &entry : fs::directory_iterator(dir, ec)) {
    std::string file = entry.path().filename().string();
    // Every rank has written its file by now: a temporary one left is an
    // interrupted save's.
    if (file.find(".tmp.") != std::string::npos &&
        (file.rfind("rank-", 0) == 0 || file.rfind("step-", 0) == 0 ||
         file.rfind("checkpoint.json", 0) == 0)) {
      fs::remove(entry.path(), ec);
      continue;
    }
    int64_t fileStep = getRankFileStep(file);
    if (fileStep < 0)
      fileStep = getManifestStep(file);
    if (fileStep >= 0 && !kept(fileStep))
      fs::remove(entry.path(), ec);
  }
}

} // namespace

Status saveCheckpoint(const std::string &dir, int64_t step,
                      ParameterStore &params, Communicator &comm,
                      const TrainingSettings &settings, int keep,
                      const WrittenParameters &writes) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return Status::error("cannot create checkpoint directory '" + dir + "'");
  std::string bytes;
  Status st = serializeRankFile(step, params, writes, bytes);
  if (st)
    st = writeFileAtomically(dir + "/" + getRankFileName(comm.rank(), step),
                             bytes);
  // Every rank must agree before the manifest moves: one rank's failure
  // leaves the previous checkpoint in force.
  if (Status all = agreeAcross(
          comm, st, "another rank could not write its checkpoint file");
      !all)
    return all;
  if (comm.rank() == 0) {
    nlohmann::json manifest;
    manifest["format"] = "sluice-checkpoint";
    manifest["version"] = kVersion;
    manifest["step"] = step;
    for (int r = 0; r < comm.size(); ++r)
      manifest["files"].push_back(getRankFileName(r, step));
    manifest["training"] = toJson(settings);
    std::string text = manifest.dump(2) + "\n";
    st = writeFileAtomically(dir + "/" + getManifestName(step), text);
    if (st)
      st = writeFileAtomically(dir + "/" + getManifestName(-1), text);
    if (st)
      removeStaleFiles(dir, keep);
  }
  return agreeAcross(comm, st,
                     "rank 0 could not write the checkpoint's manifest");
}

Status readCheckpointManifest(const std::string &dir, int64_t step,
                              CheckpointManifest &out) {
  std::string path = dir + "/" + getManifestName(step), text;
  if (Status st = readFile(path, text); !st) {
    if (step < 0)
      return Status::error("'" + dir +
                           "' is not a complete checkpoint: " + st.message());
    std::vector<int64_t> saved = listSavedSteps(dir);
    std::string have;
    for (int64_t s : saved)
      have += (have.empty() ? "" : ", ") + std::to_string(s);
    return Status::error("'" + dir + "' has no checkpoint of step " +
                         std::to_string(step) + " (it has " +
                         (have.empty() ? std::string("none") : "steps " + have) +
                         ")");
  }
  try {
    nlohmann::json manifest = parseJson(text);
    if (manifest.at("format") != "sluice-checkpoint" ||
        manifest.at("version").get<uint32_t>() < 1 ||
        manifest.at("version").get<uint32_t>() > kVersion)
      return Status::error("'" + path + "' is not a version " +
                           std::to_string(kVersion) +
                           " (or older) sluice checkpoint");
    out.step = manifest.at("step").get<int64_t>();
    if (out.step < 0)
      return Status::error("'" + path + "' records step " +
                           std::to_string(out.step));
    out.files.clear();
    for (const auto &file : manifest.at("files")) {
      // Only this checkpoint's own rank files: a path elsewhere (../,
      // /etc) is never read.
      std::string name = file.get<std::string>();
      if (getRankFileStep(name) != out.step)
        return Status::error("'" + path + "' lists '" + name +
                             "', which is not a rank file of its step " +
                             std::to_string(out.step) + " in '" + dir + "'");
      out.files.push_back(name);
    }
    out.settings.reset();
    if (manifest.contains("training")) {
      TrainingSettings settings;
      if (Status st = fromJson(manifest.at("training"), path, settings); !st)
        return st;
      out.settings = settings;
    }
  } catch (const nlohmann::json::exception &e) {
    return Status::error("'" + path + "': " + e.what());
  }
  return Status::ok();
}

namespace {
/// Restores one device's parameters and moments from a checkpoint's files.
/// Shards and slices of one tensor may come from several files, in other
/// ranges than this partitioning's, and a tensor every tensor-parallel
/// shard holds whole comes once per shard: each element this device needs
/// is copied from whichever file has it, and every one must be found.
class CheckpointLoader {
public:
  CheckpointLoader(const std::string &dir, int64_t atStep,
                   ParameterStore &params)
      : dir(dir), atStep(atStep), params(params), specs(params.specs()), restored(specs.size()),
        wanted(specs.size()) {
    for (size_t k = 0; k < specs.size(); ++k) {
      restored[k].assign(specs[k].size(), 0);
      wanted[k] = getRuns(specs[k]);
      std::sort(wanted[k].begin(), wanted[k].end(),
                [](const TensorRun &a, const TensorRun &b) {
                  return a.global < b.global;
                });
    }
  }

  Status run(int64_t &step) {
    CheckpointManifest manifest;
    if (Status s = readCheckpointManifest(dir, atStep, manifest); !s)
      return s;
    step = manifest.step;
    const std::vector<std::string> &files = manifest.files;
    if (Status s = params.read(ParameterStore::Tensor::Weights, weights); !s)
      return s;
    if (Status s = params.read(ParameterStore::Tensor::Moment1, moment1); !s)
      return s;
    if (Status s = params.read(ParameterStore::Tensor::Moment2, moment2); !s)
      return s;
    for (const std::string &file : files)
      if (Status s = loadFile(dir + "/" + file, step); !s)
        return s;
    if (Status s = checkComplete(); !s)
      return s;
    if (Status s = checkFinite(params, weights, moment1, moment2,
                               "checkpoint '" + dir + "' step " +
                                   std::to_string(step) + ": its values",
                               "the run that saved it had diverged, or the "
                               "file is damaged");
        !s)
      return s;
    if (Status s = params.write(ParameterStore::Tensor::Weights, weights); !s)
      return s;
    if (Status s = params.write(ParameterStore::Tensor::Moment1, moment1); !s)
      return s;
    return params.write(ParameterStore::Tensor::Moment2, moment2);
  }

private:
  Status loadFile(const std::string &path, int64_t step) {
    std::string bytes;
    if (Status s = readFile(path, bytes); !s)
      return s;
    Reader in(std::move(bytes));
    char magic[8];
    uint32_t version = 0, count = 0;
    int64_t fileStep = 0;
    if (!in.getBytes(magic, 8) || std::memcmp(magic, kMagic, 8) != 0 ||
        !in.get(version) || version < 1 || version > kVersion ||
        !in.get(fileStep) || !in.get(count))
      return Status::error("'" + path + "' is not a sluice checkpoint file");
    if (fileStep != step)
      return Status::error("'" + path + "' holds step " +
                           std::to_string(fileStep) + ", the manifest step " +
                           std::to_string(step));
    for (uint32_t k = 0; k < count; ++k)
      if (Status s = loadEntry(in, path, version); !s)
        return s;
    return Status::ok();
  }

  /// One parameter's entry: its name, its runs, then the weights and the
  /// two moments of those runs.
  Status loadEntry(Reader &in, const std::string &path, uint32_t version) {
    Status truncated = Status::error("'" + path + "' is truncated");
    uint32_t length = 0;
    std::string name;
    if (!in.get(length) || length > in.remaining())
      return truncated;
    name.resize(length);
    if (!in.getBytes(name.data(), length))
      return truncated;
    auto it =
        std::find_if(specs.begin(), specs.end(),
                     [&](const ParameterSpec &s) { return s.name == name; });
    const ParameterSpec *spec = it == specs.end() ? nullptr : &*it;
    std::vector<TensorRun> runs;
    int64_t n = 0, wholeElements = -1;
    if (Status s =
            readRuns(in, path, version, name, spec, runs, n, wholeElements);
        !s)
      return s;
    // Weights and two moments per value: the file must hold them before
    // anything is allocated for them.
    if (n < 0 || uint64_t(n) > in.remaining() / (3 * sizeof(float)))
      return truncated;
    std::vector<float> w(n), m(n), v(n);
    if (!in.getBytes(reinterpret_cast<char *>(w.data()), n * sizeof(float)) ||
        !in.getBytes(reinterpret_cast<char *>(m.data()), n * sizeof(float)) ||
        !in.getBytes(reinterpret_cast<char *>(v.data()), n * sizeof(float)))
      return truncated;
    if (!spec)
      return Status::ok();
    int64_t mine = getWholeElements(*spec);
    if (wholeElements >= 0 && mine >= 0 && wholeElements != mine)
      return Status::error("'" + path + "': parameter " + name + " has " +
                           std::to_string(wholeElements) +
                           " values, the model " + std::to_string(mine));
    copyRuns(size_t(it - specs.begin()), runs, w, m, v);
    return Status::ok();
  }

  /// The file's runs of a parameter, in its order (their values follow one
  /// another; `n` in all). Versions 1 and 2 stored whole tensors and row
  /// ranges.
  Status readRuns(Reader &in, const std::string &path, uint32_t version,
                  const std::string &name, const ParameterSpec *spec,
                  std::vector<TensorRun> &runs, int64_t &n,
                  int64_t &wholeElements) {
    Status truncated = Status::error("'" + path + "' is truncated");
    if (version >= 3) {
      uint32_t runCount = 0;
      if (!in.get(wholeElements) || !in.get(runCount))
        return truncated;
      for (uint32_t r = 0; r < runCount; ++r) {
        TensorRun run;
        run.local = n;
        if (!in.get(run.global) || !in.get(run.count) ||
            (run.count > 0 && uint64_t(run.count) > in.remaining()))
          return truncated;
        if (run.count < 0 || run.global < 0 ||
            run.count > std::numeric_limits<int64_t>::max() - run.global ||
            (wholeElements >= 0 && run.global + run.count > wholeElements))
          return Status::error("'" + path + "' is damaged: parameter " +
                               name + " has a run of " +
                               std::to_string(run.count) + " values at " +
                               std::to_string(run.global) + " in a tensor of " +
                               std::to_string(wholeElements));
        n += run.count;
        if (uint64_t(n) > in.remaining())
          return truncated;
        runs.push_back(run);
      }
      return Status::ok();
    }
    int64_t firstRow = 0, rows = 0, rowSize = 0;
    if (version == 2) {
      if (!in.get(firstRow) || !in.get(rows) || !in.get(rowSize) ||
          firstRow < 0 || rows < 0 || rowSize < 1 ||
          uint64_t(rows) > in.remaining() / uint64_t(rowSize) ||
          firstRow > std::numeric_limits<int64_t>::max() / rowSize - rows)
        return truncated;
      n = rows * rowSize;
    } else {
      // Version 1: whole tensors.
      if (!in.get(n))
        return truncated;
      rowSize = spec ? spec->getRowSize() : 1;
    }
    if (spec && rowSize != spec->getRowSize() && !spec->isSlice())
      return Status::error("'" + path + "': parameter " + name + " has " +
                           std::to_string(rowSize) +
                           " values per row, the model " +
                           std::to_string(spec->getRowSize()));
    runs.push_back({0, firstRow * rowSize, n});
    return Status::ok();
  }

  /// Copies what each file run has in common with parameter `p`'s runs.
  void copyRuns(size_t p, const std::vector<TensorRun> &runs,
                const std::vector<float> &w, const std::vector<float> &m,
                const std::vector<float> &v) {
    const std::vector<TensorRun> &want = wanted[p];
    int64_t base = params.offset(specs[p].name);
    for (const TensorRun &run : runs) {
      auto first = std::upper_bound(
          want.begin(), want.end(), run.global,
          [](int64_t g, const TensorRun &r) { return g < r.global; });
      if (first != want.begin())
        --first;
      for (auto w2 = first;
           w2 != want.end() && w2->global < run.global + run.count; ++w2) {
        int64_t lo = std::max(run.global, w2->global);
        int64_t hi = std::min(run.global + run.count, w2->global + w2->count);
        if (lo >= hi)
          continue;
        int64_t from = run.local + (lo - run.global);
        int64_t to = w2->local + (lo - w2->global);
        std::copy_n(w.data() + from, hi - lo, weights.data() + base + to);
        std::copy_n(m.data() + from, hi - lo, moment1.data() + base + to);
        std::copy_n(v.data() + from, hi - lo, moment2.data() + base + to);
        std::fill_n(restored[p].begin() + to, hi - lo, 1);
      }
    }
  }

  /// Every element this device needs came from some file.
  Status checkComplete() const {
    for (size_t k = 0; k < specs.size(); ++k) {
      int64_t needed = 0, found = 0;
      for (const TensorRun &run : wanted[k]) {
        needed += run.count;
        found += std::count(restored[k].begin() + run.local,
                            restored[k].begin() + run.local + run.count, 1);
      }
      if (found == 0 && needed > 0)
        return Status::error("checkpoint '" + dir + "' has no parameter " +
                             specs[k].name);
      if (found != needed)
        return Status::error("checkpoint '" + dir + "' holds " +
                             std::to_string(found) + " of the " +
                             std::to_string(needed) + " values of " +
                             specs[k].name + " this device needs");
    }
    return Status::ok();
  }

  const std::string &dir;
  int64_t atStep;
  ParameterStore &params;
  const std::vector<ParameterSpec> &specs;
  /// Which elements of each parameter some file restored.
  std::vector<std::vector<char>> restored;
  /// Each parameter's runs, by their place in the whole tensor.
  std::vector<std::vector<TensorRun>> wanted;
  std::vector<float> weights, moment1, moment2;
};
} // namespace

Status loadCheckpoint(const std::string &dir, int64_t step,
                      ParameterStore &params, int64_t &loaded) {
  return CheckpointLoader(dir, step, params).run(loaded);
}

} // namespace sluice::rt
