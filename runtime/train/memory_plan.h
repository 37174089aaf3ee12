// `shardtrain plan`: the bytes one rank will hold at its peak, by component,
// for a config at a world size, for every strategy, before any job runs.
// Every figure is computed from the model's layout and the config's batch
// sizes (nn::Model::activation_bytes, each strategy's
// parallel::StrategySpec::memory), the way the runtime allocates them; the
// trainer prints its own plan next to the measured peak
// (tests/integration/memory_plan_test.sh holds them within 10%). Counted: tensors (what the allocator accounts); not
// counted: the in-memory data set, MPI's and HDF5's own buffers, code, and on a GPU the CUDA context's scratch buffers
// (kernels/cuda/context.h: conv2d's im2col passes up to 128 MiB, attention's score gradients as large as its
// probabilities, cuBLAS's bf16 operand copies).
#pragma once

#include "runtime/nn/model.h"
#include "runtime/train/config.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace shardtrain::train {

using parallel::MemoryComponent;

struct MemoryPlan {
  std::string strategy;  // parallel::StrategySpec::name: "none", "ddp", "zero1", "fsdp full", ...
  int ranks = 1;
  std::vector<MemoryComponent> components;
  int64_t peak_bytes = 0;        // their sum: everything is held at once during an evaluation
  int64_t persistent_bytes = 0;  // parameters, gradients and optimizer state (or their shards)
  parallel::CommLayout comm;     // the collectives of a step (for `study predict`)
};

// What the run needs to know about its data.
struct PlanData {
  Shape sample;         // the model's input sample (a language model: [T] tokens)
  int64_t classes = 0;  // logits per row
  int64_t tokens = 1;   // label rows per sample (T for a language model)
  int64_t test_samples = 0;
  int64_t stored_sample_bytes = 0;  // a sample as the split stores it
};

// Where a plan's job runs: `ranks`, with the nodes comm.ranks_per_node
// makes (0: all ranks on one node, as on one machine).
parallel::Topology plan_topology(const Config& config, int ranks);
// What every strategy's models are asked for this config at `t`.
parallel::PlanInputs plan_inputs(const Config& config, const parallel::Topology& t);

// The plan of `config`'s strategy (config.parallel) at `t`, for the rank
// with the most samples; `model` built from the config.
MemoryPlan plan_memory(const Config& config, const nn::Model& model, const PlanData& data, const parallel::Topology& t);

// The strategies `shardtrain plan` compares: each strategy's plan variants
// (parallel::StrategySpec::plan_variants) at `ranks`.
std::vector<MemoryPlan> plan_strategies(const Config& config, const nn::Model& model, const PlanData& data, int ranks);

std::string plan_table(const std::vector<MemoryPlan>& plans);
nlohmann::json plan_json(const MemoryPlan& plan);
// The plan with what `shardtrain study predict` reads: the Blocks' sizes
// and the step's collectives.
nlohmann::json plan_json_with_layout(const MemoryPlan& plan, const nn::Model& model);

// What the data of a plan is when no split is read: the sample shape
// ("1x28x28", or T for a language model), the classes (the vocabulary) and
// the test samples.
struct PlanDataOverride {
  std::string sample_shape;
  int64_t classes = 0, test_samples = 0;
  bool given() const { return !sample_shape.empty(); }
};

// The subcommand: reads the config and its test split (or takes `data`),
// builds the model's layout (no parameter buffers: a plan may describe a
// model larger than this machine), prints the table (or JSON). Returns the
// exit code.
int plan_command(const std::string& config_path, const std::vector<std::string>& overrides, int ranks, bool json,
                 const PlanDataOverride& data = {});

}  // namespace shardtrain::train
