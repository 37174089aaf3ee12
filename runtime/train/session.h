// What a training job is made of, built from a Config: the data splits and
// the model (initialized from the seed); the optimizer comes from the
// strategy (parallel::Strategy::make_optimizer: the whole model, or this
// rank's shard). `train` and `bench step` build the same thing through
// make_session.
#pragma once

#include "io/dataset.h"
#include "io/stream_loader.h"
#include "runtime/nn/model.h"
#include "runtime/optim/optimizer.h"
#include "runtime/parallel/strategy.h"
#include "runtime/train/config.h"
#include "runtime/train/compute_profile.h"
#include "runtime/train/emulated_device.h"
#include "runtime/train/step_graphs.h"

#include <array>
#include <memory>
#include <optional>
#include <vector>

namespace shardtrain::train {

struct Session {
  // The training split: in memory (data.loader = "memory"), or streamed from
  // its shard files (train_stream; train_data stays empty).
  io::InMemoryDataset train_data, test_data;
  std::unique_ptr<io::StreamLoader> train_stream;
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<optim::Optimizer> optimizer;  // set by make_optimizer once the strategy exists
  // model.kind = "gpt": samples are windows of T+1 token ids (uint8, uint16
  // or int32), the model reads T of them (lm_tokens) and is trained on all T
  // next-token labels.
  bool language_model = false;
  int64_t lm_tokens = 0;
  // Where the model, its optimizer state and the step's tensors live
  // (runtime.device); batches are gathered on the host and copied there.
  Device device = Device::cpu();
  // runtime.cuda_graphs on a GPU: micro-batches replay as CUDA graphs where
  // the strategy allows (step_graphs.h).
  bool cuda_graphs = false;
  // runtime.device = "emulated": steps wait this accelerator's time instead of computing.
  std::optional<EmulatedDevice> emulated;
  // runtime.emulate.compute = "profile": the model's Blocks, its optimizer
  // and its loss wait these times instead of computing.
  std::optional<ComputeProfile> compute_profile;
  // runtime.emulate.input = "bytes": the batches stay as stored in the
  // streaming loader's slots, and no step on the host reads them.
  bool input_unread = false;
  // Whether the model really computes (evaluation needs it).
  bool computes() const { return !emulated && !compute_profile; }

  const io::DatasetInfo& train_info() const { return train_stream ? train_stream->info() : train_data.info(); }
  int64_t train_size() const { return train_info().num_samples; }
};

// The job's model over `input_sample`: config.model, or for
// runtime.device = "emulated", which runs none, a one-value stand-in.
std::unique_ptr<nn::Model> build_job_model(const Config& config, const Shape& input_sample, int64_t num_classes,
                                           bool layout_only = false);

// The CPU's products as the config asks (runtime.cpu_backend, and bf16
// operands under runtime.precision = "bf16"): process-wide, set by
// make_session, and by `shardtrain plan`, whose plan of a bf16 job's copies
// depends on which products run.
void set_cpu_products(const Config& config);

// With data.loader = "stream", collective over MPI_COMM_WORLD (every rank
// calls it) and MPI must be initialized; `locator` says where staged shards
// are (io/cache.h). After it returns, only the loader's thread calls HDF5.
// runtime.device = "cuda" brings up the GPU of `local_rank` (modulo the GPUs
// this process sees) and moves the model there.
Session make_session(const Config& config, io::ShardLocator locator = {}, int local_rank = 0);

// Brings up the GPU for this rank (runtime.device = "cuda"): an Error naming
// the reason when the build or the machine has none.
Device bring_up_gpu(const Config& config, int local_rank);

// The optimizer's ranges: runs of contiguous parameters with one weight-decay
// setting (alignment padding between Blocks belongs to none).
std::vector<optim::ParamRange> optimizer_ranges(const nn::FlatParameters& flat);
// s.optimizer: config.optim over what `strategy` has this rank update.
void make_optimizer(Session& s, const Config& config, parallel::Strategy& strategy);

// Reusable buffers of one training step: no allocation per step.
struct StepBuffers {
  Tensor x;                     // [local batch, sample...]; language model: i32 [local batch, T]
  Tensor x_host;                // x on the host (pinned), where batches are gathered; x itself on the CPU
  int input_slot = 0;           // GPU: which of the two input slots x, x_host, y and y_host are
  int64_t classes = 0;          // logits per label row (the head's width; a language model's V)
  std::vector<int32_t> labels;  // local batch; language model: local batch * T
  // GPU only (undefined on the CPU, where the loss takes `labels` directly):
  Tensor y, y_host;                // the labels on the device, and the input slot's pinned copy of them
  Tensor row_loss, row_loss_host;  // f32, one per label row: written on the device, read once per step
  std::vector<int64_t> indices;
  int64_t tokens = 1;            // labels (logit rows) per sample: 1, or T for a language model
  std::vector<uint8_t> windows;  // language model: the raw samples [local batch, T+1] of the split's dtype
  // GPU with runtime.cuda_graphs: the micro-batches' graphs (null otherwise).
  std::shared_ptr<StepGraphs> graphs;
  StepBuffers(const Shape& sample, int64_t num_classes, int64_t batch, Device device = Device::cpu());
  // A language model's: T tokens per sample, vocabulary V, ids stored as token_dtype.
  static StepBuffers language_model(int64_t T, int64_t vocab, int64_t batch, Device device = Device::cpu(),
                                    io::SampleDType token_dtype = io::SampleDType::u8);

  // On a GPU, switches x, x_host, y and y_host to the other input slot and
  // waits until its host buffers may be refilled: the next batch is gathered
  // there and copied while the step before still computes (device_memory.h). Call
  // before gathering each step's batch; nothing happens on the CPU. Steps
  // that never call it reuse one slot: correct, without the overlap.
  void next_input();
  // The step's input is `host` (a streaming loader's batch slot, read where
  // the loader wrote it) instead of x_host's own buffer: on the CPU it is x
  // itself; on a GPU the source of this input slot's copy, kept until
  // next_input() comes back to the slot and waits for that copy. Call after
  // next_input(); the loader keeps the slot unchanged that long
  // (io::StreamLoader::kHeldBatches).
  void use_input(const Tensor& host);

 private:
  StepBuffers(const Shape& x_shape, DType x_dtype, const Shape& logits_shape, int64_t labels, int64_t batch,
              Device device);
  std::array<Tensor, 2> x_slots_, x_host_slots_, y_slots_, y_host_slots_;  // GPU only
};

// The buffers for `batch` samples of this session's training data and model.
StepBuffers make_step_buffers(const Session& s, int64_t batch);
// Reads samples b.indices[0..n) of the in-memory training split into b:
// normalized f32 and labels, or for a language model x and next-token labels
// (lm_batch_from_windows).
void gather_batch(const Session& s, StepBuffers& b, int64_t n);

// Where a train_step's time went (the phases overlap communication).
struct StepPhases {
  double loss_sum = 0;  // summed loss of this rank's samples
  double forward_s = 0, backward_s = 0, optimizer_s = 0;
  double h2d_s = 0;  // GPU: how long the compute stream waited for the batch's copy (not hidden)
};

// One optimizer step on this rank's slice of the global batch (in buffers):
// `micro_batches` forward/backward passes through the strategy's hooks
// accumulating gradients (the strategy reduces only after the last:
// no_sync), fused softmax cross-entropy, then the strategy's update (the
// wait for the gradients, optional clipping, the optimizer). The gradient is
// that of the mean loss over the global batch.
// On a GPU the labels travel with the batch (they and a language model's
// token ids are checked on the host first, per micro-batch, with the CPU
// kernels' messages), the loss stays on the device until the step's end,
// and the step waits for the device once, for the last forward's losses,
// after issuing everything else.
StepPhases train_step(nn::Model& model, optim::Optimizer& optimizer, StepBuffers& buffers, float lr,
                      double clip_grad_norm, int64_t global_batch, int64_t micro_batches, parallel::Strategy& strategy);

struct EvalResult {
  double loss = 0.0;      // mean over samples (language model: over tokens)
  double accuracy = 0.0;  // fraction correct (language model: of next-token predictions)
  int64_t samples = 0;
};

// Forward passes over the whole split, in order, `batch` samples at a time.
// With a communicator, each rank evaluates a contiguous part of the split and
// the sums are combined: every rank returns the same result. With
// language_model, samples are windows of T+1 tokens and every one of the T
// next-token predictions counts. `hooks` see every Block's forward (FSDP
// gathers each Block for it); with hooks every rank makes the same number of
// forward passes, also when the split does not divide evenly.
EvalResult evaluate(nn::Model& model, const io::InMemoryDataset& data, int64_t batch,
                    comm::Communicator* comm = nullptr, bool language_model = false, nn::BlockHooks* hooks = nullptr);

// Sums each value over all ranks (every rank gets the sums, added in rank
// order). Values travel exactly (their bytes), so one rank's sum is its value.
std::vector<double> sum_over_ranks(comm::Communicator& comm, const std::vector<double>& values);
// Every rank's values: result[r][i] is value i of rank r.
std::vector<std::vector<double>> gather_from_ranks(comm::Communicator& comm, const std::vector<double>& values);

}  // namespace shardtrain::train
