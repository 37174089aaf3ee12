#include "runtime/train/compute_profile.h"

#include "runtime/core/error.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace shardtrain::train {
namespace {

double seconds(const nlohmann::json& j, const std::string& path, const std::string& key) {
  ST_CHECK(j.is_number() && j.get<double>() >= 0, "runtime.emulate.profile {}: \"{}\" must be seconds >= 0, got {}",
           path, key, j.dump());
  return j.get<double>();
}

std::vector<double> per_block(const nlohmann::json& doc, const std::string& path, const std::string& key) {
  ST_CHECK(doc.contains(key) && doc[key].is_array() && !doc[key].empty(),
           "runtime.emulate.profile {}: needs \"{}\", a list of seconds per Block", path, key);
  std::vector<double> out;
  out.reserve(doc[key].size());
  for (size_t b = 0; b < doc[key].size(); ++b) out.push_back(seconds(doc[key][b], path, fmt::format("{}[{}]", key, b)));
  return out;
}

}  // namespace

ComputeProfile load_compute_profile(const std::string& path, double scale) {
  std::ifstream in(path);
  ST_CHECK(in.good(), "runtime.emulate.profile: cannot read {} (a per-Block compute profile: docs/scaling.md)", path);
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ST_CHECK(doc.is_object(), "runtime.emulate.profile {}: not a JSON object (a per-Block compute profile)", path);
  ComputeProfile p;
  p.forward_s = per_block(doc, path, "forward");
  p.backward_s = per_block(doc, path, "backward");
  ST_CHECK(p.forward_s.size() == p.backward_s.size(), "runtime.emulate.profile {}: {} forward but {} backward times",
           path, p.forward_s.size(), p.backward_s.size());
  for (const char* key : {"optimizer_s", "other_s", "batch"})
    ST_CHECK(doc.contains(key), "runtime.emulate.profile {}: needs \"{}\"", path, key);
  p.optimizer_s = seconds(doc["optimizer_s"], path, "optimizer_s");
  p.other_s = seconds(doc["other_s"], path, "other_s");
  ST_CHECK(doc["batch"].is_number_integer() && doc["batch"].get<int64_t>() > 0,
           "runtime.emulate.profile {}: \"batch\" must be the samples per rank it was measured at, got {}", path,
           doc["batch"].dump());
  p.batch = doc["batch"].get<int64_t>();
  for (double& s : p.forward_s) s *= scale;
  for (double& s : p.backward_s) s *= scale;
  p.optimizer_s *= scale;
  p.other_s *= scale;
  p.source = fmt::format("{} ({} Blocks, batch {}){}", path, p.forward_s.size(), p.batch,
                         scale == 1.0 ? std::string() : fmt::format(" x {:g}", scale));
  return p;
}

}  // namespace shardtrain::train
