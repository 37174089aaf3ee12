#include "runtime/checkpoint/header_io.h"

#include "io/hdf5_attributes.h"
#include "runtime/core/error.h"

#include <sstream>

namespace shardtrain::checkpoint {
namespace {

using namespace io::h5;

constexpr const char* kFormat = "shardtrain-checkpoint";

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

std::string config_hash(const std::string& config_toml) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, 64 bits
  for (const unsigned char c : config_toml) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return fmt::format("fnv1a64:{:016x}", h);
}

void write_header(hid_t file, const Header& h) {
  write_string_attribute(file, "format", kFormat);
  write_int_attribute(file, "format_version", h.format_version);
  write_string_attribute(file, "model", h.identity.model);
  write_string_attribute(file, "model_signature", h.identity.model_signature);
  write_int_attribute(file, "flat_numel", h.identity.flat_numel);
  write_string_attribute(file, "optimizer", h.identity.optimizer);
  write_string_attribute(file, "optimizer_state", join(h.identity.state_names));
  write_int_attribute(file, "seed", h.identity.seed);
  write_int_attribute(file, "global_batch_size", h.identity.global_batch);
  write_int_attribute(file, "step", h.progress.step);
  write_int_attribute(file, "sampler_epoch", h.progress.epoch);
  write_int_attribute(file, "sampler_batch", h.progress.batch);
  write_int_attribute(file, "schedule_total_steps", h.progress.total_steps);
  write_int_attribute(file, "optimizer_steps", h.progress.optimizer_steps);
  write_int_attribute(file, "target_reached_ms", h.progress.target_reached_ms);
  write_string_attribute(file, "strategy", h.origin.strategy);
  write_string_attribute(file, "sharding", h.origin.sharding);
  write_int_attribute(file, "world_size", h.origin.world);
  write_string_attribute(file, "config", h.origin.config_toml);
  write_string_attribute(file, "config_hash", config_hash(h.origin.config_toml));
  // No random-number state advances while training: every draw comes from a
  // counter-based stream keyed by train.seed (initialization, sampler order),
  // so the seed above is the whole RNG state.
  write_string_attribute(file, "rng", "counter-based streams of train.seed; no other state");
}

Header read_header_attributes(hid_t file) {
  ST_CHECK(has_attribute(file, "format") && read_string_attribute(file, "format") == kFormat,
           "not a shardtrain checkpoint (no format = \"{}\" attribute)", kFormat);
  Header h;
  h.format_version = int(read_int_attribute(file, "format_version"));
  ST_CHECK(h.format_version >= 1 && h.format_version <= kFormatVersion,
           "checkpoint format version {}, this build reads versions 1 to {}", h.format_version, kFormatVersion);
  h.identity.model = read_string_attribute(file, "model");
  h.identity.model_signature = read_string_attribute(file, "model_signature");
  h.identity.flat_numel = read_int_attribute(file, "flat_numel");
  h.identity.optimizer = read_string_attribute(file, "optimizer");
  h.identity.state_names = split(read_string_attribute(file, "optimizer_state"));
  h.identity.seed = read_int_attribute(file, "seed");
  h.identity.global_batch = read_int_attribute(file, "global_batch_size");
  h.progress.step = read_int_attribute(file, "step");
  h.progress.epoch = read_int_attribute(file, "sampler_epoch");
  h.progress.batch = read_int_attribute(file, "sampler_batch");
  h.progress.total_steps = read_int_attribute(file, "schedule_total_steps");
  h.progress.optimizer_steps = read_int_attribute(file, "optimizer_steps");
  if (has_attribute(file, "target_reached_ms"))
    h.progress.target_reached_ms = read_int_attribute(file, "target_reached_ms");
  h.origin.strategy = read_string_attribute(file, "strategy");
  h.origin.sharding = read_string_attribute(file, "sharding");
  h.origin.world = int(read_int_attribute(file, "world_size"));
  h.origin.config_toml = read_string_attribute(file, "config");
  return h;
}

std::string identity_mismatch(const Identity& saved, const Identity& expected) {
  if (saved.model != expected.model)
    return fmt::format("it holds the model \"{}\", this config builds \"{}\"", saved.model, expected.model);
  if (saved.model_signature != expected.model_signature) {
    const auto a = lines(saved.model_signature), b = lines(expected.model_signature);
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
      const std::string x = i < a.size() ? a[i] : "(none)", y = i < b.size() ? b[i] : "(none)";
      if (x != y)
        return fmt::format(
            "the models differ at parameter {}: checkpoint \"{}\", this config \"{}\" ({} against {} "
            "parameters)",
            i, x, y, a.size(), b.size());
    }
  }
  if (saved.flat_numel != expected.flat_numel)
    return fmt::format("flat parameter buffer of {} elements, this model has {}", saved.flat_numel,
                       expected.flat_numel);
  if (saved.optimizer != expected.optimizer || saved.state_names != expected.state_names)
    return fmt::format("optimizer {} with state [{}], this config has {} with state [{}]", saved.optimizer,
                       join(saved.state_names), expected.optimizer, join(expected.state_names));
  if (saved.seed != expected.seed)
    return fmt::format("train.seed = {}, this config has {} (the data order would not continue)", saved.seed,
                       expected.seed);
  if (saved.global_batch != expected.global_batch)
    return fmt::format(
        "train.global_batch_size = {}, this config has {} (the sampler position counts global "
        "batches)",
        saved.global_batch, expected.global_batch);
  return "";
}

}  // namespace shardtrain::checkpoint
