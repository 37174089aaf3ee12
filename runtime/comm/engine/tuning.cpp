#include "runtime/comm/engine/tuning.h"

#include "runtime/core/error.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <sstream>

namespace shardtrain::comm {

std::string TopologyFingerprint::key() const {
  return fmt::format("{}r-{}n-{}g-{}-{:08x}", ranks, nodes, ranks_per_node, shared_memory ? "shm" : "noshm",
                     hosts_and_library);
}

std::string cached_tuning_path(const TopologyFingerprint& fp) {
  namespace fs = std::filesystem;
  fs::path dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
    dir = fs::path(xdg) / "shardtrain";
  else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    dir = fs::path(home) / ".cache" / "shardtrain";
  else
    dir = fs::temp_directory_path() / "shardtrain";
  return (dir / ("comm-tuning-" + fp.key() + ".json")).string();
}

void Tuning::add(const std::string& op, Choice choice) {
  std::vector<Choice>& v = ops_[op];
  v.push_back(std::move(choice));
  std::sort(v.begin(), v.end(), [](const Choice& a, const Choice& b) { return a.bytes < b.bytes; });
}

const std::string& Tuning::choose(std::string_view op, int64_t bytes) const {
  static const std::string none;
  if (up_to_ > 0 && bytes > up_to_) {
    const auto b = beyond_.find(op);
    return b == beyond_.end() ? none : b->second;
  }
  const auto it = ops_.find(op);
  if (it == ops_.end() || it->second.empty()) return none;
  const Choice* best = nullptr;
  double nearest = 0;
  for (const Choice& c : it->second) {
    const double d = std::fabs(std::log(double(std::max<int64_t>(bytes, 1)) / double(std::max<int64_t>(c.bytes, 1))));
    if (best == nullptr || d < nearest) {
      best = &c;
      nearest = d;
    }
  }
  return best->algorithm;
}

void Tuning::save(const std::string& path) const {
  namespace fs = std::filesystem;
  const fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) fs::create_directories(parent, ec);
  nlohmann::json ops = nlohmann::json::object(), beyond = nlohmann::json::object();
  for (const auto& [op, algorithm] : beyond_) beyond[op] = algorithm;
  for (const auto& [op, choices] : ops_) {
    nlohmann::json rows = nlohmann::json::array();
    for (const Choice& c : choices)
      rows.push_back({{"bytes", c.bytes}, {"algorithm", c.algorithm}, {"seconds", c.seconds}});
    ops[op] = rows;
  }
  const nlohmann::json doc = {{"fingerprint",
                               {{"key", fp_.key()},
                                {"ranks", fp_.ranks},
                                {"nodes", fp_.nodes},
                                {"ranks_per_node", fp_.ranks_per_node},
                                {"shared_memory", fp_.shared_memory},
                                {"hosts_and_library", fp_.hosts_and_library}}},
                              {"applies_up_to", up_to_},
                              {"beyond", beyond},
                              {"ops", ops}};
  // Written aside, then renamed: a job starting meanwhile reads the old
  // file or the new one, never half of one.
  const std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  {
    std::ofstream f(tmp);
    ST_CHECK(f.good(), "comm tuning: cannot write {}", tmp);
    f << doc.dump(1) << "\n";
    ST_CHECK(f.good(), "comm tuning: writing {} failed", tmp);
  }
  fs::rename(tmp, path, ec);
  ST_CHECK(!ec, "comm tuning: cannot rename {} to {}: {}", tmp, path, ec.message());
}

Tuning Tuning::load(const std::string& path) {
  std::ifstream in(path);
  ST_CHECK(in.good(), "comm.tuning: cannot read {} (`shardtrain bench comm --tune-algorithms` writes one)", path);
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

Tuning Tuning::parse(const std::string& text, const std::string& path) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  try {
    const nlohmann::json& f = doc.at("fingerprint");
    TopologyFingerprint fp;
    fp.ranks = f.at("ranks").get<int>();
    fp.nodes = f.at("nodes").get<int>();
    fp.ranks_per_node = f.at("ranks_per_node").get<int>();
    fp.shared_memory = f.at("shared_memory").get<bool>();
    fp.hosts_and_library = f.at("hosts_and_library").get<uint32_t>();
    Tuning t(fp);
    t.apply_up_to(doc.value("applies_up_to", int64_t(0)));
    const nlohmann::json beyond = doc.value("beyond", nlohmann::json::object());
    for (const auto& [op, algorithm] : beyond.items()) t.set_beyond(op, algorithm.get<std::string>());
    for (const auto& [op, rows] : doc.at("ops").items())
      for (const nlohmann::json& r : rows)
        t.add(op, {r.at("bytes").get<int64_t>(), r.at("algorithm").get<std::string>(), r.at("seconds").get<double>()});
    return t;
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("comm.tuning: {} is not a tuning file ({})", path, e.what()));
  }
}

}  // namespace shardtrain::comm
