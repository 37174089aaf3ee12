// What a training job is made of once it is set up: the data, the model and
// its optimizer (Session), the communicators, the strategy, the sampler and
// the schedule, the step's buffers and the checkpoints. Building it logs the
// [init] lines in the order the parts come up.
#pragma once

#include "io/sampler.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/transport/mpi_env.h"
#include "runtime/optim/schedule.h"
#include "runtime/parallel/strategy.h"
#include "runtime/train/checkpointing.h"
#include "runtime/train/config.h"
#include "runtime/train/gradient_comm.h"
#include "runtime/train/memory_plan.h"
#include "runtime/train/node_check.h"
#include "runtime/train/run_context.h"
#include "runtime/train/session.h"
#include "runtime/train/staging.h"

#include <memory>

namespace shardtrain::train {

struct Job {
  // Collective (communicators, the strategy's parameter broadcast).
  Job(const Config& config, RunContext& ctx, const comm::MpiEnv& mpi, std::unique_ptr<parallel::StrategySpec> spec);

  // The bytes a rank will hold at its peak, as `plan` predicts them.
  MemoryPlan memory_plan() const;

  const Config& config;
  RunContext& ctx;
  const comm::MpiEnv& mpi;
  const std::unique_ptr<parallel::StrategySpec> spec;
  Staging staging;
  Session s;
  io::Sampler sampler;  // the streaming loader's thread draws from its own copy
  const int64_t steps_per_epoch, total_steps;
  const optim::LrSchedule schedule;
  StepBuffers buffers;
  std::unique_ptr<comm::Communicator> comm;         // MPI: host tensors (evaluation sums, telemetry); null for one rank
  std::unique_ptr<comm::Communicator> device_comm;  // GPU tensors (runtime.device = "cuda")
  FabricInfo fabric;                                // what NCCL reported (rank 0), for the summary
  NodeCheck nodes;                                  // what the doctor found on each node (rank 0), for the summary
  double injected_comm_s = 0;                       // debug.slow_comm_ms in this rank's collectives, per step
  parallel::Topology topology;
  parallel::PlanInputs plan_inputs;
  std::unique_ptr<parallel::Strategy> strategy;
  std::unique_ptr<Checkpointing> checkpoints;
};

}  // namespace shardtrain::train
