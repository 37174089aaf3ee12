#include "runtime/train/memory_plan.h"

#include "io/dataset.h"
#include "io/stream_loader.h"
#include "kernels/ops.h"
#include "runtime/nn/models.h"
#include "runtime/train/session.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <iostream>

namespace shardtrain::train {
namespace {

constexpr int64_t kF32 = 4;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The f32 copies an evaluation adds to the peak (bf16 activations on the
// CPU), beyond the Blocks' buffers counted at their largest. Evaluation
// batches of `eval` samples, `share` samples in all, after training
// micro-batches of `micro`: the first batch of the first evaluation, larger
// than any before, regrows every Block's buffers (Model::forward frees them
// first), so while Block i widens, the Blocks after it hold nothing yet;
// later batches, and every batch of a later evaluation (`once` false: more
// than one epoch), find every Block grown.
int64_t evaluation_widened_bytes(const nn::Model& model, int64_t micro, int64_t eval, int64_t share, bool once) {
  const int64_t later = std::min(eval, std::max<int64_t>(0, share - eval));
  if (eval <= micro || !once) return model.widened_bytes(eval, false);
  int64_t most = later > 0 ? model.widened_bytes(later, false) : 0;
  int64_t after = 0;  // the buffers of the Blocks after i, not yet grown
  for (int i = model.num_blocks() - 1; i >= 0; --i) {
    most = std::max(most, model.block(i).widened_bytes(eval, false) - after);
    after += model.block(i).activation_bytes(eval);
  }
  return most;
}

}  // namespace

parallel::Topology plan_topology(const Config& config, int ranks) {
  const int per_node =
      config.comm.ranks_per_node > 0 ? int(std::min<int64_t>(config.comm.ranks_per_node, ranks)) : ranks;
  return {ranks, per_node};
}

parallel::PlanInputs plan_inputs(const Config& config, const parallel::Topology& t) {
  parallel::PlanInputs in;
  in.topology = t;
  // Emulated compute's optimizer keeps no state (optim/emulated_optimizer.h).
  in.state_floats_per_param =
      config.runtime.emulate.compute == EmulatedCompute::profile ? 0 : optim::state_floats_per_param(config.optim);
  in.micro_batches = int(config.train.accumulation_steps);
  in.comm = config.comm;
  return in;
}

MemoryPlan plan_memory(const Config& config, const nn::Model& model, const PlanData& data,
                       const parallel::Topology& t) {
  const std::unique_ptr<parallel::StrategySpec> spec = parallel::make_strategy_spec(config.parallel);
  const int ranks = t.ranks;
  MemoryPlan p;
  p.strategy = spec->name();
  p.ranks = ranks;
  auto add = [&](const std::string& name, int64_t bytes) {
    if (bytes > 0) p.components.push_back({name, bytes});
  };
  // Parameters, gradients, optimizer state (or their shards) and the
  // buffers the strategy adds.
  const parallel::StrategyMemory held = spec->memory(model.flat(), plan_inputs(config, t));
  for (const MemoryComponent& c : held.components) add(c.name, c.bytes);
  p.persistent_bytes = held.persistent_bytes;
  p.comm = spec->comm_layout(model.flat(), plan_inputs(config, t));
  // Activations: the Blocks' buffers grow to the largest batch they see,
  // a training micro-batch or an evaluation batch (each rank evaluates its
  // part of the test split); backward adds the buffers between Blocks.
  const int64_t local = ceil_div(config.train.global_batch_size, ranks);
  const int64_t micro = ceil_div(local, config.train.accumulation_steps);
  const int64_t eval = std::max<int64_t>(1, std::min(config.train.eval_batch_size, ceil_div(data.test_samples, ranks)));
  const int64_t capacity = std::max(micro, eval);
  add("activations", model.activation_bytes(capacity, false) + model.activation_bytes(micro, true) -
                         model.activation_bytes(micro, false));
  // bf16 GEMMs on a GPU, or the CPU's products on bf16 operands: the linear
  // layers' kept bf16 copies, grown to the largest batch as the activations
  // are.
  const bool gpu_keeps = config.runtime.device == DeviceKind::cuda && config.runtime.gpu_gemm_used() == GpuGemm::bf16;
  const bool cpu_keeps = config.runtime.device == DeviceKind::cpu && ops::linear_keeps_bf16(Device::cpu());
  if (gpu_keeps || cpu_keeps) add("bf16 copies for the backward", model.kept_bf16_bytes(capacity));
  // Mixed precision on the CPU: each op widens its bf16 tensors to f32
  // around the f32 kernel, one op at a time; the loss does so with the
  // logits and their gradient (two copies training, one evaluating). Which
  // copies depends on the products this process runs (set_cpu_products).
  if (config.runtime.device == DeviceKind::cpu && config.runtime.precision == Precision::bf16) {
    const int64_t logits = kF32 * model.output_sample().numel();  // per sample
    const bool bf16_logits = model.block(model.num_blocks() - 1).outputs_bf16();
    const int64_t share = ceil_div(data.test_samples, ranks);  // the evaluation's samples on this rank
    add("f32 copies of bf16 values (CPU)",
        std::max({model.widened_bytes(micro, true),
                  evaluation_widened_bytes(model, micro, eval, share, config.train.epochs == 1),
                  bf16_logits ? 2 * micro * logits : 0, bf16_logits ? eval * logits : 0}));
  }
  // The step's input (the whole local batch) and the evaluation's input
  // batch. The logits' gradient overwrites the logits (train::forward_backward).
  // An emulated accelerator's bytes stay in the loader's slots: its step
  // input is one value per sample (train::make_step_buffers), and it is
  // never evaluated.
  const bool input_unread = config.runtime.input_unread();
  add("step input", local * (input_unread ? 1 : data.sample.numel()) * kF32);
  if (config.runtime.device != DeviceKind::emulated) add("evaluation input", eval * data.sample.numel() * kF32);
  // The streaming loader's batch slots, which the step reads in place
  // (io::StreamLoader): the queue, the one being filled and the step's
  // two; of floats, or of the samples as stored where the loader hands
  // them raw (a language model's token ids, an emulated accelerator's
  // bytes). Host memory on a GPU, not counted.
  const bool raw_slots = input_unread || nn::is_language_model(config.model.kind);
  if (config.data.loader.mode == io::LoaderMode::stream && config.runtime.device != DeviceKind::cuda)
    add("stream loader's batches", (config.data.loader.prefetch_batches + 1 + io::StreamLoader::kHeldBatches) * local *
                                       (raw_slots ? data.stored_sample_bytes : data.sample.numel() * kF32));
  // On a GPU the step also holds a second input slot (the next batch is
  // copied while this one computes), the labels of both slots, and a loss
  // per label row (train::StepBuffers); their pinned host twins are host
  // memory, not counted.
  if (config.runtime.device == DeviceKind::cuda)
    add("GPU input slots and losses",
        local * data.sample.numel() * kF32 + local * data.tokens * (2 * int64_t(sizeof(int32_t)) + kF32));
  for (const MemoryComponent& c : p.components) p.peak_bytes += c.bytes;
  return p;
}

std::vector<MemoryPlan> plan_strategies(const Config& config, const nn::Model& model, const PlanData& data, int ranks) {
  const parallel::Topology t = plan_topology(config, ranks);
  std::vector<MemoryPlan> plans;
  Config c = config;
  for (const std::string& name : parallel::strategy_names()) {
    c.parallel.strategy = name;
    for (const parallel::ParallelOptions& variant :
         parallel::make_strategy_spec(c.parallel)->plan_variants(c.parallel, t)) {
      c.parallel = variant;
      plans.push_back(plan_memory(c, model, data, t));
    }
  }
  return plans;
}

std::string plan_table(const std::vector<MemoryPlan>& plans) {
  std::vector<std::string> names;
  for (const MemoryPlan& p : plans)
    for (const MemoryComponent& c : p.components)
      if (std::find(names.begin(), names.end(), c.name) == names.end()) names.push_back(c.name);
  auto mib = [](int64_t b) { return fmt::format("{:.2f}", double(b) / (1 << 20)); };
  std::string out = fmt::format("{:<32}", "MiB per rank");
  for (const MemoryPlan& p : plans) out += fmt::format(" {:>13}", p.strategy);
  out += "\n";
  for (const std::string& n : names) {
    out += fmt::format("{:<32}", n);
    for (const MemoryPlan& p : plans) {
      int64_t b = 0;
      for (const MemoryComponent& c : p.components)
        if (c.name == n) b = c.bytes;
      out += fmt::format(" {:>13}", b > 0 ? mib(b) : "-");
    }
    out += "\n";
  }
  out += fmt::format("{:<32}", "peak");
  for (const MemoryPlan& p : plans) out += fmt::format(" {:>13}", mib(p.peak_bytes));
  out += fmt::format("\n{:<32}", "params + grads + optimizer");
  for (const MemoryPlan& p : plans)
    out += fmt::format(" {:>13}", fmt::format("{} ({:.2f}x)", mib(p.persistent_bytes),
                                              double(p.persistent_bytes) / double(plans.front().persistent_bytes)));
  return out + "\n";
}

nlohmann::json plan_json(const MemoryPlan& p) {
  nlohmann::json components = nlohmann::json::object();
  for (const MemoryComponent& c : p.components) components[c.name] = c.bytes;
  return {{"strategy", p.strategy},
          {"ranks", p.ranks},
          {"peak_bytes", p.peak_bytes},
          {"persistent_bytes", p.persistent_bytes},
          {"components", components}};
}

nlohmann::json plan_json_with_layout(const MemoryPlan& p, const nn::Model& model) {
  nlohmann::json j = plan_json(p);
  nlohmann::json blocks = nlohmann::json::array();
  for (const nn::BlockRange& b : model.flat().blocks()) blocks.push_back(b.numel);
  j["parameters"] = model.flat().parameter_count();
  j["block_numel"] = blocks;
  const parallel::CommLayout& c = p.comm;
  nlohmann::json buckets = nlohmann::json::array();
  for (const parallel::DdpBucketLayout& b : c.buckets)
    buckets.push_back({{"first_block", b.first_block},
                       {"last_block", b.last_block},
                       {"bytes", b.bytes},
                       {"gather_bytes", b.gather_bytes}});
  j["comm"] = {{"buckets", buckets},
               {"bucket_op", c.buckets_scatter ? "reduce_scatter" : "allreduce"},
               {"shard_group", c.shard_group},
               {"replica_group", c.replica_group},
               {"gather_bytes", c.gather_bytes},
               {"reduce_bytes", c.reduce_bytes},
               {"replica_bytes", c.replica_bytes},
               {"prefetch", c.prefetch},
               {"gather_buffers", c.gather_buffers},
               {"grad_buffers", c.grad_buffers},
               {"regather_in_backward", c.regather_in_backward}};
  return j;
}

namespace {

// "1x28x28" -> [1, 28, 28].
Shape parse_shape(const std::string& text) {
  Shape shape;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find('x', at), text.size());
    const std::string dim = text.substr(at, end - at);
    char* stop = nullptr;
    const long long v = dim.empty() ? 0 : std::strtoll(dim.c_str(), &stop, 10);
    ST_CHECK(v > 0 && stop != nullptr && *stop == '\0',
             "plan: --sample-shape \"{}\" is not dimensions like 1x28x28 or 64 (positive integers joined by x)", text);
    shape.push_back(v);
    at = end + 1;
  }
  return shape;
}

PlanData read_plan_data(const Config& config, const PlanDataOverride& given) {
  PlanData data;
  if (given.given()) {
    data.sample = parse_shape(given.sample_shape);
    data.classes = given.classes;
    // Unknown: as many as give every rank full evaluation batches.
    data.test_samples = given.test_samples > 0 ? given.test_samples : std::numeric_limits<int32_t>::max();
    ST_CHECK(data.classes > 1, "plan: --classes must be at least 2 with --sample-shape, got {}", data.classes);
  } else if (nn::is_language_model(config.model.kind) && config.model.block_size > 0 && config.model.vocab_size > 0 &&
             !std::filesystem::exists(config.data.test)) {
    // A language model that names its sequence length and vocabulary, its
    // data not at hand: none needed (a model too large for any data here).
    // Where the data is, its windows (which may be shorter) are planned.
    // Its token ids' stored width is unknown: the loader's slots of them
    // (stored_sample_bytes 0) are left out, megabytes beside such a model.
    data.sample = Shape{config.model.block_size};
    data.classes = config.model.vocab_size;
    data.test_samples = std::numeric_limits<int32_t>::max();
  } else {
    const io::InMemoryDataset test = with_context("data.test", [&] {
      return io::InMemoryDataset::load(config.data.test, config.data.test_limit, config.data.loader.verify_checksums);
    });
    const io::DatasetInfo& info = test.info();
    data.classes = info.num_classes;
    data.test_samples = test.size();
    data.sample = info.sample_shape;
    data.stored_sample_bytes = int64_t(info.sample_bytes());
    // Windows of T+1 tokens: the model reads T, predicts T labels.
    if (nn::is_language_model(config.model.kind)) data.sample = Shape{info.sample_shape[0] - 1};
  }
  if (nn::is_language_model(config.model.kind)) data.tokens = data.sample[0];
  return data;
}

}  // namespace

int plan_command(const std::string& config_path, const std::vector<std::string>& overrides, int ranks, bool json,
                 const PlanDataOverride& given) {
  ST_CHECK(ranks >= 1, "plan: --ranks must be at least 1, got {}", ranks);
  const Config config = load_config(config_path, overrides, /*for_plan=*/true);
  for (const std::string& notice : config.notices) std::cerr << "shardtrain: notice: " << notice << "\n";
  const PlanData data = read_plan_data(config, given);
  set_cpu_products(config);
  const std::unique_ptr<nn::Model> model = build_job_model(config, data.sample, data.classes, /*layout_only=*/true);
  model->set_plan_device(config.runtime.device == DeviceKind::cuda ? Device::cuda(0) : Device::cpu());
  model->set_activation_dtype(config.runtime.precision == Precision::bf16 ? DType::bf16 : DType::f32);
  model->set_activation_checkpointing(config.parallel.activation_checkpointing, int(config.parallel.checkpoint_every));
  const std::vector<MemoryPlan> plans = plan_strategies(config, *model, data, ranks);
  if (json) {
    nlohmann::json all = nlohmann::json::array();
    for (const MemoryPlan& p : plans) all.push_back(plan_json_with_layout(p, *model));
    std::cout << all.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "memory plan: {} ({}, {} parameters), {} ranks, global batch {} ({} per rank, {} micro-batch(es)), "
      "evaluation batch {}, optimizer {}\n(tensor bytes per rank at the peak, an evaluation after training; "
      "not counted: the in-memory data set, MPI and HDF5 buffers)\n\n",
      config_path, nn::model_name(config.model), model->flat().parameter_count(), ranks, config.train.global_batch_size,
      ceil_div(config.train.global_batch_size, ranks), config.train.accumulation_steps, config.train.eval_batch_size,
      config.optim.kind);
  std::cout << plan_table(plans);
  return 0;
}

}  // namespace shardtrain::train
