// comm_watchdog_probe: provokes a stuck or mismatched collective on purpose,
// for tests/fault/watchdog_test.sh. Every rank runs allreduce #0 normally;
// then, for collective #1:
//
//   skip           rank 1 never issues it and sleeps (stuck in "compute")
//   mismatch-op    rank 1 issues a broadcast where the others all-reduce
//   mismatch-size  rank 1 all-reduces twice as many bytes
//   mismatch-gather  the others reduce-scatter the buffer, rank 1
//                  all-gathers into it (the same bytes, another collective)
//   freeze         rank 1 stops its whole process (SIGSTOP): it cannot answer
//   skip-in-group  the others issue #1, then #2 and #3 while #1 waits for a
//                  late rank 1 (so #2 and #3 run as one group); rank 1 runs
//                  #1 and #2 and never issues #3
//   late           rank 1 issues it 0.75 x --timeout late: after the others
//                  were asked what they do, before the timeout (the probe
//                  must exit 0, with no watchdog line)
//   ok             nobody misbehaves (the probe exits 0)
//
//   comm_watchdog_probe MODE [--bytes N] [--algorithm auto|shm|oneshot|mpi|ring] [--timeout S]
//
// The job must end (non-zero exit) with the watchdog's one-line report on
// stderr, within a few seconds of --timeout (default 2 s).
#include "runtime/comm/communicator.h"
#include "runtime/comm/transport/mpi_env.h"
#include "runtime/core/error.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

using namespace shardtrain;

int main(int argc, char** argv) {
  comm::MpiEnv mpi(&argc, &argv);
  std::string mode = argc > 1 ? argv[1] : "";
  comm::CommOptions options;
  options.timeout_s = 2;
  int64_t bytes = 4096;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--bytes") {
      bytes = std::stoll(value);
    } else if (key == "--algorithm") {
      const auto algorithm = parse_enum<comm::AllreduceAlgorithm>(value);
      if (!algorithm) {
        std::fprintf(stderr, "comm_watchdog_probe: --algorithm %s is not one of %s\n", value.c_str(),
                     enum_choices<comm::AllreduceAlgorithm>().c_str());
        return 2;
      }
      options.allreduce_algorithm = *algorithm;
    } else if (key == "--timeout") {
      options.timeout_s = std::stod(value);
    } else {
      std::fprintf(stderr, "comm_watchdog_probe: unknown option %s\n", key.c_str());
      return 2;
    }
  }
  if (mode != "skip" && mode != "mismatch-op" && mode != "mismatch-size" && mode != "mismatch-gather" &&
      mode != "freeze" && mode != "skip-in-group" && mode != "late" && mode != "ok") {
    std::fprintf(
        stderr,
        "usage: comm_watchdog_probe skip|mismatch-op|mismatch-size|mismatch-gather|freeze|skip-in-group|late|ok "
        "[--bytes N] [--algorithm A] [--timeout S]\n");
    return 2;
  }
  try {
    auto world = comm::make_mpi_world_communicator(options);
    const int64_t n = bytes / 4;
    Tensor t = Tensor::zeros({n});
    world->allreduce(t, comm::ReduceOp::sum)->wait();  // #0: everyone

    const bool culprit = world->rank() == 1 && mode != "ok";
    if (culprit && mode == "late") {
      std::this_thread::sleep_for(std::chrono::duration<double>(0.75 * options.timeout_s));
      world->allreduce(t, comm::ReduceOp::sum)->wait();  // #1, late
      world->allreduce(t, comm::ReduceOp::sum)->wait();  // #2: the job went on
      std::printf("comm_watchdog_probe: late: rank 1 completed #1 and #2\n");
      return 0;
    }
    if (mode == "late") {
      world->allreduce(t, comm::ReduceOp::sum)->wait();  // #1
      world->allreduce(t, comm::ReduceOp::sum)->wait();  // #2
      if (world->rank() == 0) std::printf("comm_watchdog_probe: late: every collective completed\n");
      return 0;
    }
    if (mode == "skip-in-group") {
      Tensor b = Tensor::zeros({n}), c = Tensor::zeros({n});  // disjoint buffers: they may be grouped
      if (culprit) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        world->allreduce(t, comm::ReduceOp::sum)->wait();
        world->allreduce(b, comm::ReduceOp::sum)->wait();
        std::this_thread::sleep_for(std::chrono::seconds(60));
      } else {
        auto first = world->allreduce(t, comm::ReduceOp::sum);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));  // #1 is running: #2 and #3 queue
        auto second = world->allreduce(b, comm::ReduceOp::sum);
        auto third = world->allreduce(c, comm::ReduceOp::sum);
        first->wait();
        second->wait();
        third->wait();
      }
    } else if (mode == "mismatch-gather") {
      Tensor part = Tensor::zeros({n / world->size()});
      Tensor whole = t.view(0, {part.numel() * world->size()});
      if (culprit)
        world->allgather(part, whole)->wait();
      else
        world->reduce_scatter(whole, part, comm::ReduceOp::sum)->wait();
    } else if (!culprit) {
      world->allreduce(t, comm::ReduceOp::sum)->wait();  // #1
    } else if (mode == "skip") {
      std::this_thread::sleep_for(std::chrono::seconds(60));
    } else if (mode == "freeze") {
      std::raise(SIGSTOP);
    } else if (mode == "mismatch-op") {
      world->broadcast(t, 0)->wait();
    } else {
      Tensor twice = Tensor::zeros({2 * n});
      world->allreduce(twice, comm::ReduceOp::sum)->wait();
    }
    if (world->rank() == 0) std::printf("comm_watchdog_probe: %s: every collective completed\n", mode.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "comm_watchdog_probe: %s\n", e.what());
    comm::MpiEnv::abort(1);
  }
  return 0;
}
