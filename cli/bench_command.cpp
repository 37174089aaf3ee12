// shardtrain bench step | telemetry | io | comm: the benchmark commands
// (bench/commands/), each measuring against its reference in one run.
#include "bench/commands/bench_comm.h"
#include "bench/commands/bench_io.h"
#include "bench/commands/bench_step.h"
#include "bench/commands/bench_telemetry.h"
#include "cli/command.h"
#include "runtime/train/config.h"

namespace shardtrain::cli {
namespace {

struct ConfigArgs {
  std::string path;
  std::vector<std::string> overrides;
};

void add_config_args(CLI::App* cmd, ConfigArgs& a) {
  cmd->add_option("config", a.path, "TOML config")->required();
  cmd->add_option("--set", a.overrides, "Override a config key (repeatable)")->allow_extra_args(false);
}

void add_step(CLI::App* bench, std::vector<Command>& out) {
  struct Args {
    ConfigArgs config;
    train::BenchStepOptions options;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd =
      bench->add_subcommand("step", "Training-step GFLOP/s against the same products (GEMMs, convolutions) alone");
  add_config_args(cmd, a->config);
  cmd->add_option("--steps", a->options.steps, "Steps per round")
      ->check(CLI::Range(1, kMaxCount))
      ->capture_default_str();
  cmd->add_option("--rounds", a->options.rounds, "Alternating rounds (medians reported)")
      ->check(CLI::Range(1, kMaxCount))
      ->capture_default_str();
  cmd->add_option("--warmup", a->options.warmup, "Untimed steps first")
      ->check(CLI::Range(0, kMaxCount))
      ->capture_default_str();
  cmd->add_option("--json", a->options.json_path, "Also write the figures to this JSON file");
  out.push_back({cmd, [a](Process&) {
                   return train::bench_step(train::load_config(a->config.path, a->config.overrides), a->options);
                 }});
}

void add_telemetry(CLI::App* bench, std::vector<Command>& out) {
  struct Args {
    ConfigArgs config;
    train::BenchTelemetryOptions options;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = bench->add_subcommand("telemetry", "Step time with telemetry on and off, alternating");
  add_config_args(cmd, a->config);
  cmd->add_option("--steps", a->options.steps, "Steps per round")
      ->check(CLI::Range(1, kMaxCount))
      ->capture_default_str();
  cmd->add_option("--rounds", a->options.rounds, "Rounds per setting")
      ->check(CLI::Range(1, kMaxCount))
      ->capture_default_str();
  cmd->add_option("--warmup", a->options.warmup, "Untimed steps first")
      ->check(CLI::Range(0, kMaxCount))
      ->capture_default_str();
  cmd->add_option("--json", a->options.json_path, "Also write the figures to this JSON file");
  out.push_back({cmd, [a](Process& p) {
                   const train::Config config = train::load_config(a->config.path, a->config.overrides);
                   return train::bench_telemetry(config, a->options, p.mpi());
                 }});
}

// O_DIRECT needs whole 4 KiB pages; over 1 GiB a request buffer per depth
// would exhaust memory before it measured anything.
CLI::Validator direct_io_block() {
  return CLI::Validator(
      [](std::string& v) {
        const long long bytes = std::stoll(v);
        return bytes >= 4096 && bytes <= (1LL << 30) && bytes % 4096 == 0
                   ? std::string()
                   : fmt::format("{} bytes is not a multiple of 4K between 4K and 1G", v);
      },
      "4K..1G, multiple of 4K");
}

void add_io(CLI::App* bench, std::vector<Command>& out) {
  auto o = std::make_shared<io::BenchIoOptions>();
  CLI::App* cmd = bench->add_subcommand("io",
                                        "The streaming loader against a raw O_DIRECT read of the same files, and "
                                        "under a concurrent ingest (run under mpirun)");
  cmd->add_option("--data", o->data,
                  "A split directory (e.g. from `prep synthetic`), or an s3:// prefix: the object-store tier is "
                  "measured first (needs --cache-dir)")
      ->required();
  cmd->add_option("--cache-dir", o->cache_dir, "Where an s3:// split's copies go (node-local)");
  cmd->add_option("--s3-sweep", o->s3_sweep, "Connection counts the store's rate is measured with")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  add_s3_options(cmd, o->s3);
  cmd->add_option("--global-batch", o->global_batch, "Samples per global batch")
      ->check(CLI::Range(1, kMaxCount))
      ->capture_default_str();
  cmd->add_option("--batches", o->batches, "Batches per loader trial (0: one epoch)")
      ->check(CLI::Range(0, kMaxCount))
      ->capture_default_str();
  cmd->add_flag("--cold", o->loader.cold_cache, "Drop the pages after reading: every read from storage");
  add_enum_option(cmd, "--transfer", o->loader.transfer, "collective or independent");
  add_enum_option(cmd, "--order", o->loader.order, "global or shard");
  cmd->add_option("--window", o->loader.shuffle_window, "order shard: samples shuffled together (0: a shard)")
      ->check(CLI::Range(0, kMaxCount))
      ->capture_default_str();
  cmd->add_option("--prefetch", o->loader.prefetch_batches, "Batches read ahead")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--raw-block", o->raw_block_bytes, "O_DIRECT request size (e.g. 8M), a multiple of 4K")
      ->transform(CLI::AsSizeValue(false))
      ->check(direct_io_block())
      ->capture_default_str();
  cmd->add_option("--raw-depth", o->raw_depth, "O_DIRECT requests in flight per rank")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  add_enum_option(cmd, "--engine", o->loader.read_engine, "auto, pool or hdf5 (data.read_engine)");
  cmd->add_option("--in-flight", o->loader.reads_in_flight, "The read pool's reads in flight per rank")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  add_enum_option(cmd, "--direct-io", o->loader.direct_io,
                  "auto, on or off: the read pool's O_DIRECT (data.direct_io)");
  cmd->add_option("--random-depth", o->random_depth, "Random O_DIRECT reads in flight per rank (the reference)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--rounds", o->rounds, "Random reads and loader trials alternating this often (medians reported)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_flag("--compare-hdf5", o->compare_hdf5,
                "Also time the loader with read_engine = hdf5 (one read at a time), side by side");
  cmd->add_flag("!--no-ingest", o->ingest, "Skip the concurrent-ingest experiment");
  cmd->add_option("--ingest-blocks", o->ingest_blocks, "Writer block sizes (e.g. 128K,1M,4M), multiples of 4K")
      ->delimiter(',')
      ->transform(CLI::AsSizeValue(false))
      ->check(direct_io_block());
  cmd->add_option("--ingest-rate", o->ingest_rate_mb_s,
                  "The limited writer rate, MB/s (0: a quarter of the raw read rate)")
      ->check(CLI::Range(0.0, 1e12))
      ->capture_default_str();
  cmd->add_option("--ingest-dir", o->ingest_dir, "Where the writer writes (default: next to the data)");
  cmd->add_option("--json", o->json_path, "Also write the figures to this JSON file");
  out.push_back({cmd, [o](Process& p) {
                   p.mpi();
                   return io::bench_io(*o);
                 }});
}

void add_comm(CLI::App* bench, std::vector<Command>& out) {
  auto o = std::make_shared<comm::BenchCommOptions>();
  CLI::App* cmd =
      bench->add_subcommand("comm", "Collectives: shardtrain's against the MPI library's (run under mpirun)");
  cmd->add_option("--min-bytes", o->min_bytes, "Smallest size (e.g. 4K)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd->add_option("--max-bytes", o->max_bytes, "Largest size (e.g. 256M)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd->add_option("--sizes", o->sizes, "These sizes instead of the powers of 2 (e.g. 3215360,4M)")
      ->delimiter(',')
      ->transform(CLI::AsSizeValue(false));
  cmd->add_option("--ops", o->ops, "Operations: allreduce, reduce_scatter, allgather, broadcast")->delimiter(',');
  cmd->add_option("--iters", o->iters, "Operations per timed round (0: fill ~50 ms)")->capture_default_str();
  cmd->add_option("--rounds", o->rounds, "Alternating timed rounds (median reported)")->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "f32 or bf16")->capture_default_str();
  add_enum_option(cmd, "--algorithm", o->comm.allreduce_algorithm, "auto, shm, oneshot, mpi, ring or hierarchical");
  cmd->add_option("--small-message-bytes", o->comm.small_message_bytes, "Threshold for the MPI library's own algorithm")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd->add_option("--chunk-bytes", o->comm.chunk_bytes,
                  "Ring pipeline chunk (at most 65472 where no two ranks share a node)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd->add_option("--ranks-per-node", o->comm.ranks_per_node,
                  "Emulate nodes of this many consecutive ranks (0: real nodes)")
      ->capture_default_str();
  cmd->add_option("--json", o->json_path, "Also write every row to this JSON file");
  cmd->add_option("--group", o->group,
                  "world, or node / cross: every node's ranks (the ranks with one node-local index) as a group, "
                  "all groups at once, as HYBRID runs them")
      ->capture_default_str();
  cmd->add_option("--busy-threads", o->busy_threads,
                  "GEMM threads per rank while timing: collectives as they compete with a step's compute")
      ->capture_default_str();
  cmd->add_option("--mode", o->mode, "throughput (back to back, as nccl-tests), latency (one at a time) or both")
      ->capture_default_str();
  cmd->add_flag("!--no-shared-memory", o->comm.shared_memory, "Do not use the shared-memory all-reduce");
  cmd->add_flag("!--no-arrival-check", o->comm.check_arrival,
                "Do not wait for every rank before each of the MPI library's collectives (comm.check_arrival)");
  cmd->add_flag("--tune-algorithms", o->tune,
                "Time every algorithm of each op and size (latency mode), and the job-start probes' choice beside "
                "them, and write the fastest into the tuning file of this topology, which comm.tuning = \"auto\" "
                "follows");
  cmd->add_option("--tune-file", o->tune_file,
                  "With --tune-algorithms: write here instead of the cache of this topology");
  cmd->add_option("--tuning", o->comm.tuning,
                  "comm.tuning for shardtrain's side: auto (this topology's tuning file; without one, probes at start "
                  "across nodes), probe, off, or a path")
      ->capture_default_str();
  out.push_back({cmd, [o](Process& p) {
                   p.mpi();
                   return comm::bench_comm(*o);
                 }});
}

}  // namespace

void add_bench_commands(CLI::App& app, std::vector<Command>& out) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  add_step(bench, out);
  add_telemetry(bench, out);
  add_io(bench, out);
  add_comm(bench, out);
}

}  // namespace shardtrain::cli
