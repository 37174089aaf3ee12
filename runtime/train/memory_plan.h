// `shardtrain plan`: the bytes one rank will hold at its peak, by component,
// for a config at a world size, for DDP and each FSDP strategy, before any
// job runs. Every figure is computed from the model's layout and the
// config's batch sizes (nn::Model::activation_bytes, parallel::fsdp_memory),
// the way the runtime allocates them; the trainer prints its own plan next
// to the measured peak (tests/integration/plan_test.sh holds them within
// 10%). Counted: tensors (what the allocator accounts); not counted: the
// in-memory data set, MPI's and HDF5's own buffers, code, and on a GPU the
// CUDA context's scratch buffers (kernels/cuda/context.h: conv2d's im2col
// passes up to 128 MiB, attention's score gradients as large as its
// probabilities, cuBLAS's bf16 operand copies).
#pragma once

#include "runtime/nn/model.h"
#include "runtime/train/config.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace shardtrain::train {

struct MemoryComponent {
  std::string name;  // "parameters", "gradients", "optimizer state", ...
  int64_t bytes = 0;
};

struct MemoryPlan {
  std::string strategy;  // "none", "ddp", "fsdp full", "fsdp grad_op", "fsdp hybrid"
  int ranks = 1;
  std::vector<MemoryComponent> components;
  int64_t peak_bytes = 0;  // their sum: everything is held at once during an evaluation
  int64_t persistent_bytes = 0;  // parameters, gradients and optimizer state (or their shards)
};

// What the run needs to know about its data.
struct PlanData {
  Shape sample;             // the model's input sample (a language model: [T] tokens)
  int64_t classes = 0;      // logits per row
  int64_t tokens = 1;       // label rows per sample (T for a language model)
  int64_t test_samples = 0;
};

// The plan of `config`'s strategy (config.parallel) at `ranks` ranks, for
// the rank with the most samples; `model` built from the config.
// `shard_group`: HYBRID's ranks per node as the job found them (0: from
// comm.ranks_per_node, else all ranks, as on one machine).
MemoryPlan plan_memory(const Config& config, const nn::Model& model, const PlanData& data, int ranks,
                       int shard_group = 0);

// The strategies `shardtrain plan` compares: DDP, FULL_SHARD, SHARD_GRAD_OP
// and HYBRID (when comm.ranks_per_node > 0 divides the ranks).
std::vector<MemoryPlan> plan_strategies(const Config& config, const nn::Model& model, const PlanData& data,
                                        int ranks);

std::string plan_table(const std::vector<MemoryPlan>& plans);
nlohmann::json plan_json(const MemoryPlan& plan);

// The subcommand: reads the config and its test split, prints the table (or
// JSON). Returns the exit code.
int plan_command(const std::string& config_path, const std::vector<std::string>& overrides, int ranks, bool json);

}  // namespace shardtrain::train
