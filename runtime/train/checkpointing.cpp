#include "runtime/train/checkpointing.h"

#include "runtime/checkpoint/checkpoint_dir.h"
#include "runtime/comm/agree_or_throw.h"
#include "runtime/core/clock.h"

#include <csignal>
#include <ctime>
#include <filesystem>
#include <map>
#include <sstream>

namespace shardtrain::train {
namespace {

// The resolved config without what legitimately differs between the runs of
// one training job (where it writes).
std::string comparable_toml(Config c) {
  c.run.dir.clear();
  return to_toml(c);
}

// "key = value" lines of a TOML text under their [section] names.
std::map<std::string, std::string> toml_values(const std::string& toml) {
  std::map<std::string, std::string> out;
  std::stringstream in(toml);
  std::string section;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      section = line.substr(1, line.find(']') - 1);
      continue;
    }
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos) continue;
    out[(section.empty() ? "" : section + ".") + line.substr(0, eq)] = line.substr(eq + 3);
  }
  return out;
}

}  // namespace

Checkpointing::Checkpointing(const Config& config, const std::string& run_dir, Session& s, parallel::Strategy& strategy,
                             const std::string& strategy_name, int rank, int world)
    : config_(config),
      s_(s),
      strategy_(strategy),
      strategy_name_(strategy_name),
      rank_(rank),
      world_(world),
      dir_(config.checkpoint.dir.empty() ? (std::filesystem::path(run_dir) / "checkpoints").string()
                                         : config.checkpoint.dir),
      config_toml_(comparable_toml(config)),
      every_(config.checkpoint.every_steps),
      keep_(config.checkpoint.keep) {}

checkpoint::Identity Checkpointing::identity() const {
  checkpoint::Identity id;
  id.model = nn::model_name(config_.model);
  const nn::FlatParameters& flat = s_.model->flat();
  for (const nn::ParamEntry& e : flat.entries())
    id.model_signature += fmt::format("{} {} @{}\n", e.name, e.spec.shape.str(), e.offset);
  id.flat_numel = flat.numel();
  id.optimizer = std::string(name_of(config_.optim.kind));
  for (const auto& [name, t] : s_.optimizer->state()) id.state_names.push_back(name);
  id.seed = config_.train.seed;
  id.global_batch = config_.train.global_batch_size;
  return id;
}

checkpoint::Buffers Checkpointing::buffers() const {
  const parallel::CheckpointView view = strategy_.checkpoint_view();
  checkpoint::Buffers b;
  b.state = s_.optimizer->state();
  b.params = view.params;
  b.write = view.write;
  b.read = view.read;
  return b;
}

std::pair<std::string, double> Checkpointing::save(const checkpoint::Progress& progress, int64_t fault_step) {
  const double t0 = now_seconds();
  checkpoint::Header h;
  h.identity = identity();
  h.progress = progress;
  h.progress.optimizer_steps = s_.optimizer->steps_taken();
  // "fsdp full": the strategy, then its sharding mode.
  const size_t space = strategy_name_.find(' ');
  h.origin.strategy = strategy_name_.substr(0, space);
  h.origin.sharding = space == std::string::npos ? "" : strategy_name_.substr(space + 1);
  h.origin.world = world_;
  h.origin.config_toml = config_toml_;
  const std::string path = checkpoint::checkpoint_path(dir_, progress.step);
  // Fault injection (tests/fault/checkpoint_resume_test.sh): debug.slow_rank
  // is killed after the parameters are written, before the rest.
  const bool kill_here =
      fault_step >= 0 && config_.debug.kill_in_checkpoint == fault_step && config_.debug.slow_rank == rank_;
  checkpoint::save(path, MPI_COMM_WORLD, h, buffers(), [&] {
    if (kill_here) std::raise(SIGKILL);
  });
  if (rank_ == 0) checkpoint::keep_latest(dir_, keep_);
  MPI_Barrier(MPI_COMM_WORLD);  // nobody lists the directory while rank 0 prunes it
  return {path, now_seconds() - t0};
}

std::vector<std::string> Checkpointing::set_aside_newer_than(int64_t step) {
  std::vector<std::string> moved;
  std::string error;
  if (rank_ == 0) {
    try {
      moved = checkpoint::set_aside_newer_than(dir_, step, std::to_string(std::time(nullptr)));
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  comm::agree_or_throw(MPI_COMM_WORLD, error);  // nobody lists the directory while rank 0 renames
  return moved;
}

std::vector<std::string> Checkpointing::candidates(const std::string& resume) const {
  if (resume != "auto") return {resume};
  std::vector<std::string> newest_first;
  const auto listed = checkpoint::list_checkpoints(dir_);
  for (auto it = listed.rbegin(); it != listed.rend(); ++it) newest_first.push_back(it->path);
  return newest_first;
}

checkpoint::Header Checkpointing::load(const std::string& path) {
  checkpoint::Buffers b = buffers();
  checkpoint::Header h = checkpoint::load(path, MPI_COMM_WORLD, identity(), b);
  s_.optimizer->set_steps_taken(h.progress.optimizer_steps);
  strategy_.loaded();
  return h;
}

std::vector<std::string> Checkpointing::config_changes(const checkpoint::Header& h, size_t limit) const {
  const auto before = toml_values(h.origin.config_toml), now = toml_values(config_toml_);
  std::vector<std::string> all;
  for (const auto& [key, value] : now) {
    const auto it = before.find(key);
    const std::string old = it == before.end() ? "(unset)" : it->second;
    if (old != value) all.push_back(fmt::format("{}: {} -> {}", key, old, value));
  }
  for (const auto& [key, value] : before)  // keys this build no longer has
    if (!now.contains(key)) all.push_back(fmt::format("{}: {} -> (no such key now)", key, value));
  if (all.size() <= limit) return all;
  std::vector<std::string> out(all.begin(), all.begin() + std::ptrdiff_t(limit));
  out.push_back(fmt::format("... and {} more (the checkpoint's config is its `config` attribute)", all.size() - limit));
  return out;
}

}  // namespace shardtrain::train
