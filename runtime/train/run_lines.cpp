#include "runtime/train/run_lines.h"

#include <fmt/format.h>

#include <algorithm>

namespace shardtrain::train {

std::string describe_target(const Config::Target& t) {
  if (!t.enabled()) return "none";
  return t.metric == TargetMetric::test_accuracy ? fmt::format("test_accuracy >= {:.2f}%", 100 * t.value)
                                                 : fmt::format("test_loss <= {:.4f}", t.value);
}

std::string opening_line(int world, const std::string& strategy, const std::string& config, const std::string& dir) {
  return fmt::format("[init] shardtrain {} on {} rank(s), strategy {}; config {}; run dir {}", "0.1.0", world, strategy,
                     config, dir);
}

std::string device_line(Device device, const std::string& gpu_name, const std::string& gemm) {
  return fmt::format("[init] device: rank 0 on {} ({}), GEMMs in {}; batches copied from pinned host memory",
                     device.str(), gpu_name, gemm);
}

// "data.train", "data.test", "data.train and data.test" or "" for the
// splits that lack what `has` asks for.
template <class Has>
std::string splits_without(const io::DatasetInfo& train, const io::DatasetInfo& test, Has has) {
  std::string missing = has(train) ? "" : "data.train";
  if (!has(test)) missing += missing.empty() ? "data.test" : " and data.test";
  return missing;
}

// Whether the splits' files and samples are checked, and if not why.
std::string checksum_note(const io::DatasetInfo& train, const io::DatasetInfo& test, bool verify) {
  if (!verify) return "shards not checked (data.verify_checksums = false)";
  const std::string no_manifest =
      splits_without(train, test, [](const io::DatasetInfo& d) { return d.checksums_verified || d.files_not_read; });
  const std::string not_read = splits_without(train, test, [](const io::DatasetInfo& d) { return !d.files_not_read; });
  const std::string no_crcs = splits_without(train, test, [](const io::DatasetInfo& d) { return d.samples_verified; });
  std::string files;
  if (!no_manifest.empty())
    files = fmt::format("{} not checked: no manifest.json (shardtrain prep manifest DIR writes one)", no_manifest);
  if (!not_read.empty())
    files += fmt::format("{}{} shards not read whole at start (data.verify_files = false)", files.empty() ? "" : "; ",
                         not_read);
  if (files.empty()) files = "every shard's CRC-32 checked against manifest.json";
  const std::string samples = no_crcs.empty() ? "every sample read checked against /crc32"
                                              : fmt::format(
                                                    "{} samples not checked: format version 1 (shardtrain "
                                                    "prep upgrade DIR adds checksums)",
                                                    no_crcs);
  return files + "; " + samples;
}

std::string data_line(const io::DatasetInfo& train, const io::DatasetInfo& test, int64_t train_samples,
                      int64_t test_samples, bool verify) {
  return fmt::format("[init] data: train {} samples, test {} samples, sample shape {} {}, {} classes; {}",
                     train_samples, test_samples, train.sample_shape.str(), train.dtype, train.num_classes,
                     checksum_note(train, test, verify));
}

std::string stream_line(const io::DatasetInfo& train, const Config& config) {
  const io::LoaderOptions& l = config.data.loader;
  return fmt::format(
      "[init] data: streaming {} shard(s) from {} with parallel HDF5, {} transfer, read engine {} ({} in "
      "flight), {} batch(es) prefetched{}",
      train.shard_files.size(), config.data.train, l.transfer, l.read_engine, l.reads_in_flight, l.prefetch_batches,
      l.cold_cache ? ", cold cache (pages dropped after reading)" : "");
}

std::string model_line(const Config& config, const nn::Model& model) {
  return fmt::format("[init] model {} ({} blocks):\n{}", nn::model_name(config.model), model.num_blocks(),
                     model.summary());
}

// "64 per rank", or for an uneven split (io::Sampler: the slices differ by
// at most one) "64 per rank on 1 rank(s), 63 on 1".
std::string per_rank_batch(int64_t global, int64_t world) {
  const int64_t low = global / world, larger = global % world;
  if (larger == 0) return fmt::format("{} per rank", low);
  return fmt::format("{} per rank on {} rank(s), {} on {}", low + 1, larger, low, world - larger);
}

std::string ready_line(const ReadyFigures& r, const Config::Target& target) {
  return fmt::format(
      "[init] {} optimizer, global batch {} ({}, {} micro-batch(es)), {} steps/epoch, {} steps, target "
      "{}, {} BLAS thread(s); ready in {:.2f} s",
      r.optimizer, r.global_batch, per_rank_batch(r.global_batch, r.world), r.micro_batches, r.steps_per_epoch,
      r.total_steps, describe_target(target), r.blas_threads, r.seconds);
}

std::string checkpoints_line(int64_t every, const std::string& dir, int64_t keep) {
  return fmt::format("[init] checkpoints every {} steps and at the end to {}, newest {} kept", every, dir, keep);
}

std::string resume_line(const std::string& path, const checkpoint::Header& h, int world, const std::string& strategy,
                        double seconds) {
  const checkpoint::Progress& p = h.progress;
  return fmt::format(
      "[resume] {}: step {} (epoch {}, next batch {}), written by {} rank(s) with {}{}; loaded onto {} rank(s) "
      "with {} in {:.2f} s",
      path, p.step, p.epoch, p.batch, h.origin.world, h.origin.strategy,
      h.origin.sharding.empty() ? "" : " " + h.origin.sharding, world, strategy, seconds);
}

std::string eval_line(double epoch, int64_t step, double train_loss, const EvalResult& r, double samples_per_s) {
  return fmt::format(
      "[eval] epoch {:.2f}  step {}  train_loss {:.4f}  test_loss {:.4f}  test_accuracy {:.2f}%  {:.0f} samples/s",
      epoch, step, train_loss, r.loss, 100 * r.accuracy, samples_per_s);
}

std::string memory_lines(const MemoryFigures& m, bool gpu) {
  std::string out = fmt::format(
      "[summary] memory: peak {:.2f} MiB of tensors per rank (max over ranks, {}), the plan predicted {:.2f} MiB "
      "(measured/predicted {:.3f}; `shardtrain plan` breaks it down)",
      m.peak / (1 << 20), m.device, m.planned / (1 << 20), m.peak / m.planned);
  if (gpu)
    out += fmt::format(
        "\n[summary] memory: a rank holds up to {:.2f} MiB of {} from the driver for tensors (cached blocks "
        "included) and {:.2f} MiB of kernel workspaces outside the plan (cuBLAS's own not counted)",
        m.gpu_reserved / (1 << 20), m.device, m.gpu_workspace / (1 << 20));
  else if (m.cpu_workspace > 0)
    out += fmt::format(
        "\n[summary] memory: a rank holds up to {:.2f} MiB outside the plan for oneDNN's convolutions (their "
        "blocked copies and scratchpads, one buffer shared by the layers)",
        m.cpu_workspace / (1 << 20));
  return out;
}

std::string loader_line(const io::LoaderStats& ls) {
  std::string mode = ls.transfer;
  if (ls.transfer == "collective")
    mode += ls.no_collective_cause.empty()
                ? fmt::format(" (HDF5 did: {})", ls.actual_io_mode)
                : fmt::format(" (HDF5 did: {}, because {})", ls.actual_io_mode, ls.no_collective_cause);
  return fmt::format(
             "[summary] data (rank 0): read {:.1f} MB in {} requests ({} batches), {:.2f} s in reads, {} "
             "transfer, read by {}",
             double(ls.bytes) / 1e6, ls.requests, ls.batches, ls.read_s, mode, ls.read_engine) +
         (ls.peer_cache.empty()
              ? std::string()
              : fmt::format("; {}: {:.1f} MB of it from other nodes, {:.1f} MB served to them, {:.1f} "
                            "MB copied from the shared store at start",
                            ls.peer_cache, double(ls.peer_bytes) / 1e6, double(ls.served_bytes) / 1e6,
                            double(ls.staged_bytes) / 1e6));
}

std::string graphs_line(int64_t captures, int64_t launches, const std::string& off_reason) {
  std::string line = fmt::format("[summary] CUDA graphs: {} made, {} micro-batches replayed", captures, launches);
  if (!off_reason.empty()) line += fmt::format("; off since: {}", off_reason);
  return line;
}

std::string summary_lines(const std::string& text) {
  std::string tagged;
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    if (end > at) tagged += (tagged.empty() ? "[summary] " : "\n[summary] ") + text.substr(at, end - at);
    at = end + 1;
  }
  return tagged;
}

std::string done_line(const DoneFigures& d, const Config::Target& target) {
  const std::string outcome =
      !target.enabled()  ? std::string("no target set")
      : d.time_to_target ? fmt::format("target {} reached in {:.1f} s", describe_target(target), *d.time_to_target)
                         : fmt::format("target {} NOT reached", describe_target(target));
  const std::string metrics = !d.final_eval ? std::string("not evaluated")
                                            : fmt::format("final test_accuracy {:.2f}% test_loss {:.4f}",
                                                          100 * d.final_eval->accuracy, d.final_eval->loss);
  return fmt::format(
      "[done] {}: {} steps ({:.2f} epochs) in {:.1f} s, {:.0f} samples/s; {}; {}; results in "
      "{}/result.json",
      d.status, d.steps, d.epochs, d.train_seconds, d.samples_per_s, metrics, outcome, d.dir);
}

}  // namespace shardtrain::train
