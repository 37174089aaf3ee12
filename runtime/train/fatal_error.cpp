#include "runtime/train/fatal_error.h"

#include "runtime/comm/transport/mpi_env.h"
#include "runtime/telemetry/flight_recorder.h"

#include <fmt/format.h>

#include <cstdio>

namespace shardtrain::train {

void say_fatal_error(const std::exception& e, int rank, int world) {
  std::fflush(stdout);
  fmt::print(stderr, "shardtrain: error{}: {}\n", world > 1 ? fmt::format(" (rank {})", rank) : "", e.what());
  std::fflush(stderr);
}

void report_fatal_error(const std::exception& e, int rank, int world, bool say) {
  if (say) say_fatal_error(e, rank, world);
  telemetry::FlightRecorder::dump(e.what());  // no-op unless a run armed it
  // One failing rank must not leave the others waiting in a collective.
  if (world > 1) comm::MpiEnv::abort(1);
}

}  // namespace shardtrain::train
