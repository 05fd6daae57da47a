//===- Checkpoint.cpp - Save and restore training state -------------------===//

#include "Checkpoint.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace sluice::rt {

namespace fs = std::filesystem;

namespace {
constexpr char kMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'C', 'K'};
// Version 2 records each tensor's row range, so that the vocabulary
// shards (row ranges of a table) load under any partitioning.
constexpr uint32_t kVersion = 2;

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
    if (pos + sizeof(T) > bytes.size())
      return false;
    std::memcpy(&value, bytes.data() + pos, sizeof(T));
    pos += sizeof(T);
    return true;
  }
  bool getBytes(char *out, size_t n) {
    if (pos + n > bytes.size())
      return false;
    std::memcpy(out, bytes.data() + pos, n);
    pos += n;
    return true;
  }
  bool skip(size_t n) {
    if (pos + n > bytes.size())
      return false;
    pos += n;
    return true;
  }

private:
  std::string bytes;
  size_t pos = 0;
};

Status readFile(const std::string &path, std::string &contents) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error("cannot read '" + path + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  contents = buffer.str();
  return Status::ok();
}
} // namespace

Status writeFileAtomically(const std::string &path,
                           const std::string &contents) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      return Status::error("cannot write '" + tmp + "'");
    out.write(contents.data(), std::streamsize(contents.size()));
    out.flush();
    if (!out)
      return Status::error("cannot write '" + tmp + "'");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return Status::error("cannot rename '" + tmp + "' to '" + path + "'");
  }
  return Status::ok();
}

Status saveCheckpoint(const std::string &dir, int64_t step,
                      ParameterStore &params, Communicator &comm) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return Status::error("cannot create checkpoint directory '" + dir + "'");
  std::string name = "rank-" + std::to_string(comm.rank()) + ".step-" +
                     std::to_string(step) + ".bin";
  // The device's weights and moments, on the host.
  std::vector<float> weights, moment1, moment2;
  Status read = params.read(ParameterStore::Tensor::Weights, weights);
  if (read)
    read = params.read(ParameterStore::Tensor::Moment1, moment1);
  if (read)
    read = params.read(ParameterStore::Tensor::Moment2, moment2);
  std::string bytes(kMagic, sizeof(kMagic));
  put(bytes, kVersion);
  put(bytes, step);
  put(bytes, uint32_t(params.specs().size()));
  for (const ParameterSpec &spec : params.specs()) {
    put(bytes, uint32_t(spec.name.size()));
    bytes += spec.name;
    // The real rows only: a shard's padding is not part of the model.
    int64_t rowSize = spec.getRowSize(), rows = spec.getValidRows();
    int64_t n = rows * rowSize, at = params.offset(spec.name);
    put(bytes, spec.firstRow);
    put(bytes, rows);
    put(bytes, rowSize);
    if (read) {
      putFloats(bytes, weights.data() + at, n);
      putFloats(bytes, moment1.data() + at, n);
      putFloats(bytes, moment2.data() + at, n);
    }
  }
  Status st = read ? writeFileAtomically(dir + "/" + name, bytes) : read;
  // Every rank must agree before the manifest moves: one rank's failure
  // leaves the previous checkpoint in force.
  double failed = st ? 0.0 : 1.0;
  Status reduced = comm.allReduceMax(&failed, 1);
  if (!st)
    return st;
  if (!reduced)
    return reduced;
  if (failed > 0)
    return Status::error("another rank could not write its checkpoint file");
  if (comm.rank() == 0) {
    nlohmann::json manifest;
    manifest["format"] = "sluice-checkpoint";
    manifest["version"] = kVersion;
    manifest["step"] = step;
    for (int r = 0; r < comm.size(); ++r)
      manifest["files"].push_back("rank-" + std::to_string(r) + ".step-" +
                                  std::to_string(step) + ".bin");
    st = writeFileAtomically(dir + "/checkpoint.json", manifest.dump(2) + "\n");
    if (!st)
      return st;
  }
  comm.barrier();
  // The manifest now points at this step: older rank files are garbage.
  std::string mine = "rank-" + std::to_string(comm.rank()) + ".step-";
  for (const auto &entry : fs::directory_iterator(dir, ec)) {
    std::string file = entry.path().filename().string();
    if (file.rfind(mine, 0) == 0 && file != name)
      fs::remove(entry.path(), ec);
  }
  return Status::ok();
}

Status loadCheckpoint(const std::string &dir, ParameterStore &params,
                      int64_t &step) {
  std::string text;
  Status st = readFile(dir + "/checkpoint.json", text);
  if (!st)
    return Status::error("'" + dir +
                         "' is not a complete checkpoint: " + st.message());
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(text);
    if (manifest.at("format") != "sluice-checkpoint" ||
        manifest.at("version").get<uint32_t>() > kVersion)
      return Status::error("'" + dir + "/checkpoint.json' is not a version " +
                           std::to_string(kVersion) +
                           " (or older) sluice checkpoint");
    step = manifest.at("step").get<int64_t>();
  } catch (const nlohmann::json::exception &e) {
    return Status::error("'" + dir + "/checkpoint.json': " + e.what());
  }
  // Rows restored per parameter: shards of one table may come from
  // several files, in other row ranges than this partitioning's.
  std::vector<int64_t> restored(params.specs().size(), 0);
  std::vector<float> weights, moment1, moment2;
  if (Status s = params.read(ParameterStore::Tensor::Weights, weights); !s)
    return s;
  if (Status s = params.read(ParameterStore::Tensor::Moment1, moment1); !s)
    return s;
  if (Status s = params.read(ParameterStore::Tensor::Moment2, moment2); !s)
    return s;
  for (const auto &file : manifest["files"]) {
    std::string path = dir + "/" + file.get<std::string>();
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
    for (uint32_t k = 0; k < count; ++k) {
      uint32_t length = 0;
      int64_t firstRow = 0, rows = 0, rowSize = 0, n = 0;
      std::string name;
      if (!in.get(length))
        return Status::error("'" + path + "' is truncated");
      name.resize(length);
      if (!in.getBytes(name.data(), length))
        return Status::error("'" + path + "' is truncated");
      const auto &specs = params.specs();
      auto it =
          std::find_if(specs.begin(), specs.end(),
                       [&](const ParameterSpec &s) { return s.name == name; });
      if (version >= 2) {
        if (!in.get(firstRow) || !in.get(rows) || !in.get(rowSize))
          return Status::error("'" + path + "' is truncated");
        n = rows * rowSize;
      } else {
        // Version 1: whole tensors.
        if (!in.get(n))
          return Status::error("'" + path + "' is truncated");
        rowSize = it == specs.end() ? 1 : it->getRowSize();
        rows = n / std::max<int64_t>(rowSize, 1);
      }
      std::vector<float> w(n), m(n), v(n);
      if (!in.getBytes(reinterpret_cast<char *>(w.data()), n * sizeof(float)) ||
          !in.getBytes(reinterpret_cast<char *>(m.data()), n * sizeof(float)) ||
          !in.getBytes(reinterpret_cast<char *>(v.data()), n * sizeof(float)))
        return Status::error("'" + path + "' is truncated");
      if (it == specs.end())
        continue;
      if (rowSize != it->getRowSize())
        return Status::error("'" + path + "': parameter " + name + " has " +
                             std::to_string(rowSize) +
                             " values per row, the model " +
                             std::to_string(it->getRowSize()));
      // The rows both this parameter and the file's tensor hold.
      int64_t lo = std::max(firstRow, it->firstRow);
      int64_t hi = std::min(firstRow + rows, it->firstRow + it->getValidRows());
      if (lo >= hi)
        continue;
      int64_t at = params.offset(name) + (lo - it->firstRow) * rowSize;
      int64_t from = (lo - firstRow) * rowSize, count = (hi - lo) * rowSize;
      std::copy_n(w.data() + from, count, weights.data() + at);
      std::copy_n(m.data() + from, count, moment1.data() + at);
      std::copy_n(v.data() + from, count, moment2.data() + at);
      restored[it - specs.begin()] += hi - lo;
    }
  }
  for (size_t k = 0; k < restored.size(); ++k) {
    const ParameterSpec &spec = params.specs()[k];
    if (restored[k] == 0 && spec.getValidRows() > 0)
      return Status::error("checkpoint '" + dir + "' has no parameter " +
                           spec.name);
    if (restored[k] != spec.getValidRows())
      return Status::error("checkpoint '" + dir + "' holds " +
                           std::to_string(restored[k]) + " of the " +
                           std::to_string(spec.getValidRows()) + " rows of " +
                           spec.name + " this device needs");
  }
  if (Status s = params.write(ParameterStore::Tensor::Weights, weights); !s)
    return s;
  if (Status s = params.write(ParameterStore::Tensor::Moment1, moment1); !s)
    return s;
  return params.write(ParameterStore::Tensor::Moment2, moment2);
}

} // namespace sluice::rt
