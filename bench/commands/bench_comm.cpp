#include "bench/commands/bench_comm.h"

#include "bench/commands/bench_comm_case.h"
#include "bench/commands/bench_stats.h"

#include "kernels/cpu/gemm.h"

#include "runtime/comm/algorithms/mpi_native.h"
#include "runtime/comm/engine/mpi_communicator.h"
#include "runtime/comm/engine/scratch.h"
#include "runtime/core/error.h"
#include "runtime/core/tensor.h"

#include <fmt/format.h>
#include <mpi.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <thread>
#include <vector>

namespace shardtrain::comm {
namespace {

using cases::all_ranks;
using cases::buffers_for;
using cases::Case;
using cases::max_over_ranks;

struct Row {
  std::string op, impl, algorithm, mode;
  int64_t bytes = 0;
  int buffers = 1;
  double time_us = 0, algbw_gbs = 0, busbw_gbs = 0;
  bool ok = true;
};

using bench::median;

std::string human(int64_t bytes) {
  if (bytes >= (int64_t(1) << 20) && bytes % (int64_t(1) << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= 1024 && bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

// The row's last column: which implementation, if any, was wrong.
const char* verdict(bool shardtrain_ok, bool mpi_ok) {
  if (shardtrain_ok && mpi_ok) return "ok";
  if (!shardtrain_ok && !mpi_ok) return "WRONG (both)";
  return shardtrain_ok ? "WRONG (mpi)" : "WRONG (shardtrain)";
}

// `threads` threads of 256x256x256 f32 GEMMs until destroyed: a training
// step's compute, competing for the cores with the collectives.
class BusyLoad {
 public:
  explicit BusyLoad(int threads) {
    for (int i = 0; i < threads; ++i)
      threads_.emplace_back([this] {
        constexpr int64_t n = 256;
        std::vector<float> a(n * n, 1.0f), b(n * n, 0.5f), c(n * n);
        while (!stop_.load(std::memory_order_relaxed))
          cpu::gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
      });
  }
  BusyLoad(const BusyLoad&) = delete;
  BusyLoad& operator=(const BusyLoad&) = delete;
  ~BusyLoad() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// The MPI communicator of this rank's --group: the ranks of its node, the
// ranks with its node-local index, or all (nodes split as the runtime's
// communicator splits them).
MPI_Comm group_comm(const BenchCommOptions& options, int world_rank) {
  MPI_Comm node = split_node(MPI_COMM_WORLD, options.comm.ranks_per_node), out;
  if (options.group == "node") return node;
  int local_rank = 0;
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_free(&node);
  check_mpi(MPI_Comm_split(MPI_COMM_WORLD, options.group == "cross" ? local_rank : 0, world_rank, &out),
            "MPI_Comm_split");
  return out;
}

struct Measured {
  double shardtrain_s = 0, mpi_s = 0;  // per operation, median round
  std::string algorithm;
  bool ok_shardtrain = true, ok_mpi = true;
};

// One op, size and mode: correctness of each implementation on fresh inputs,
// warm-up, then the alternating timed rounds, started together and timed
// over every rank of `sync` (the world: all groups of --group at once).
Measured measure(Case& c, bool latency, const BenchCommOptions& options, MPI_Comm sync) {
  Measured m;
  int next = 0;  // the buffer set of the next operation
  auto shardtrain_run = [&](int n) {
    WorkPtr last;
    for (int i = 0; i < n; ++i) {
      last = c.run_shardtrain(next++);
      if (latency) last->wait();
    }
    last->wait();  // issue order: the last done means all done
    m.algorithm = last->algorithm();
  };
  auto mpi_run = [&](int n) {
    for (int i = 0; i < n; ++i) c.run_mpi(next++);
  };

  c.fill(false);
  next = 0;
  shardtrain_run(1);
  m.ok_shardtrain = c.check(1);
  c.fill(false);
  next = 0;
  mpi_run(1);
  m.ok_mpi = c.check(1);

  // Warm-up, then the number of operations per round (the same on every rank).
  // The fill resets every output, so the final check may only look at the
  // buffer sets run after it: count them from 0 again.
  c.fill(true);
  next = 0;
  const BusyLoad load(options.busy_threads);
  for (int i = 0; i < options.warmup; ++i) {
    shardtrain_run(1);
    mpi_run(1);
  }
  int iters = options.iters;
  if (iters == 0) {
    MPI_Barrier(sync);
    double t0 = MPI_Wtime();
    shardtrain_run(1);
    mpi_run(1);
    const double one = max_over_ranks((MPI_Wtime() - t0) / 2, sync);
    iters = int(std::clamp(0.05 / std::max(one, 1e-7), 1.0, 2000.0));
  }

  std::vector<double> t_st, t_mpi;
  for (int round = 0; round < options.rounds; ++round) {
    for (int k = 0; k < 2; ++k) {
      const bool st = (round + k) % 2 == 0;  // alternate which goes first
      MPI_Barrier(sync);
      const double t0 = MPI_Wtime();
      if (st)
        shardtrain_run(iters);
      else
        mpi_run(iters);
      const double t = max_over_ranks((MPI_Wtime() - t0) / iters, sync);
      (st ? t_st : t_mpi).push_back(t);
    }
  }
  const bool ok_after = c.check(next);  // the timed runs' last results
  m.ok_shardtrain = all_ranks(m.ok_shardtrain && ok_after, sync);
  m.ok_mpi = all_ranks(m.ok_mpi && ok_after, sync);
  m.shardtrain_s = median(t_st);
  m.mpi_s = median(t_mpi);
  return m;
}

// Every row as a JSON array, to options.json_path (rank 0).
void write_json(const BenchCommOptions& options, const std::vector<Row>& rows, int ranks) {
  nlohmann::json out = nlohmann::json::array();
  for (const Row& r : rows)
    out.push_back({{"op", r.op},
                   {"mode", r.mode},
                   {"bytes", r.bytes},
                   {"impl", r.impl},
                   {"algorithm", r.algorithm},
                   {"ranks", ranks},
                   {"group", options.group},
                   {"dtype", options.dtype},
                   {"buffers", r.buffers},
                   {"busy_threads", options.busy_threads},
                   {"arrival_check", options.comm.check_arrival},
                   {"time_us", r.time_us},
                   {"algbw_gbs", r.algbw_gbs},
                   {"busbw_gbs", r.busbw_gbs},
                   {"ok", r.ok}});
  std::ofstream f(options.json_path);
  ST_CHECK(f.good(), "bench comm: cannot write {}", options.json_path);
  f << out.dump(1) << "\n";
}

void check_options(const BenchCommOptions& options) {
  ST_CHECK(options.dtype == "f32" || options.dtype == "bf16", "bench comm: dtype must be f32 or bf16, not '{}'",
           options.dtype);
  ST_CHECK(options.mode == "throughput" || options.mode == "latency" || options.mode == "both",
           "bench comm: mode must be throughput, latency or both, not '{}'", options.mode);
  ST_CHECK(options.min_bytes > 0 && options.min_bytes <= options.max_bytes,
           "bench comm: need 0 < min_bytes <= max_bytes (got {} and {})", options.min_bytes, options.max_bytes);
  for (const int64_t size : options.sizes) ST_CHECK(size > 0, "bench comm: --sizes must be positive, got {}", size);
  ST_CHECK(options.rounds >= 1 && options.iters >= 0 && options.warmup >= 0 && options.busy_threads >= 0,
           "bench comm: rounds >= 1, iters >= 0, warmup >= 0 and busy_threads >= 0");
  ST_CHECK(!options.tune || options.group == "world", "bench comm: --tune-algorithms tunes the world, not --group {}",
           options.group);
  ST_CHECK(options.group == "world" || options.group == "node" || options.group == "cross",
           "bench comm: --group must be world, node or cross, not '{}'", options.group);
}

}  // namespace

int bench_comm(const BenchCommOptions& options) {
  check_options(options);
  if (options.tune) return bench_comm_tune(options);
  const DType dtype = options.dtype == "bf16" ? DType::bf16 : DType::f32;
  std::vector<std::string> modes;
  if (options.mode != "latency") modes.push_back("throughput");
  if (options.mode != "throughput") modes.push_back("latency");
  auto world = make_mpi_world_communicator(options.comm);
  Communicator& comm = options.group == "node"    ? world->node()
                       : options.group == "cross" ? world->cross_node()
                                                  : *world;
  MPI_Comm sync;
  MPI_Comm_dup(MPI_COMM_WORLD, &sync);
  MPI_Comm mpi_comm = group_comm(options, world->rank());  // the MPI library's collectives run on one of their own
  // Blocking MPI collectives across nodes stall beside another group's
  // (docs/comm.md): the comparison polls them there.
  const BackoffPolicy poll = BackoffPolicy::for_node(MPI_COMM_WORLD);
  MpiNative native(mpi_comm, options.group == "cross" ? &poll : nullptr);
  Scratch scratch;
  const int ranks = comm.size();
  const bool print = world->rank() == 0;

  std::vector<Row> rows;
  bool all_ok = true;
  for (const std::string& mode : modes) {
    if (print) {
      const auto limit = [](int64_t b) { return b >= (int64_t(1) << 62) ? std::string("any size") : human(b); };
      fmt::print(
          "shardtrain bench comm, mode {}: {} ranks{}, {}, algorithm {}, chunk {}; MPI's own collectives up to: "
          "allreduce {}, reduce_scatter {}, allgather {}; arrival check {}; busy threads per rank {}\n",
          mode, ranks,
          options.group == "world"
              ? std::string()
              : fmt::format(" in each {} group, all {} groups at once", options.group, world->size() / ranks),
          options.dtype, options.comm.allreduce_algorithm, human(options.comm.chunk_bytes),
          limit(options.comm.small_message_bytes), limit(options.comm.reduce_scatter_small_bytes),
          limit(options.comm.allgather_small_bytes), options.comm.check_arrival ? "on" : "off", options.busy_threads);
      fmt::print("  {}\n", comm.algorithm_choice());
      fmt::print("  {}\n", mode == "latency"
                               ? "latency: one operation issued and waited for at a time, nothing queued"
                               : "throughput: operations issued back to back, the last waited for (shardtrain may "
                                 "coalesce queued small all-reduces); MPI: blocking calls");
      fmt::print("{:<15}{:>10}{:>4} | {:>10}{:>8}{:>8} {:<13}| {:>10}{:>8}{:>8} | {:>6} {}\n", "op", "bytes", "buf",
                 "time_us", "algbw", "busbw", "shardtrain", "time_us", "algbw", "busbw", "ratio", "ok");
      std::fflush(stdout);
    }
    std::vector<int64_t> sizes = options.sizes;
    if (sizes.empty())
      for (int64_t size = options.min_bytes; size <= options.max_bytes; size *= 2) sizes.push_back(size);
    for (const std::string& op : options.ops) {
      for (const int64_t size : sizes) {
        const int buffers = buffers_for(size);
        Case c(op, size, buffers, dtype, comm, native, scratch);
        const Measured m = measure(c, mode == "latency", options, sync);
        all_ok = all_ok && m.ok_shardtrain && m.ok_mpi;

        const int64_t bytes = c.bytes();
        auto row = [&](const char* impl, double t, bool ok, const std::string& algo) {
          Row r;
          r.op = op;
          r.impl = impl;
          r.algorithm = algo;
          r.mode = mode;
          r.bytes = bytes;
          r.buffers = buffers;
          r.time_us = t * 1e6;
          r.algbw_gbs = double(bytes) / t / 1e9;
          r.busbw_gbs = r.algbw_gbs * c.bus_factor();
          r.ok = ok;
          return r;
        };
        rows.push_back(row("shardtrain", m.shardtrain_s, m.ok_shardtrain, m.algorithm));
        rows.push_back(row("mpi", m.mpi_s, m.ok_mpi, "mpi"));
        if (print) {
          const Row& s = rows[rows.size() - 2];
          const Row& r = rows.back();
          fmt::print("{:<15}{:>10}{:>4} | {:>10.1f}{:>8.2f}{:>8.2f} {:<13}| {:>10.1f}{:>8.2f}{:>8.2f} | {:>6.2f} {}\n",
                     op, bytes, buffers, s.time_us, s.algbw_gbs, s.busbw_gbs, s.algorithm, r.time_us, r.algbw_gbs,
                     r.busbw_gbs, m.mpi_s / m.shardtrain_s, verdict(s.ok, r.ok));
          std::fflush(stdout);
        }
      }
    }
  }

  if (print && !options.json_path.empty()) write_json(options, rows, ranks);
  if (print && !all_ok) fmt::print(stderr, "bench comm: some results were WRONG\n");
  world.reset();
  MPI_Comm_free(&mpi_comm);
  MPI_Comm_free(&sync);
  return all_ok ? 0 : 1;
}

}  // namespace shardtrain::comm
