#include "runtime/train/session.h"

#include "runtime/train/lm_batch.h"

#include "io/shard_format.h"
#include "kernels/cpu/gemm.h"
#include "kernels/devices.h"
#include "kernels/ops.h"
#include "runtime/core/device_memory.h"
#include "runtime/core/op_timing.h"
#include "runtime/nn/models.h"
#include "runtime/nn/same_weights.h"
#include "runtime/core/clock.h"
#include "runtime/telemetry/recorder.h"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

namespace shardtrain::train {

std::vector<optim::ParamRange> optimizer_ranges(const nn::FlatParameters& flat) {
  std::vector<optim::ParamRange> ranges;
  for (const nn::ParamEntry& e : flat.entries()) {
    const int64_t n = e.spec.shape.numel();
    if (!ranges.empty() && ranges.back().decay == e.spec.decay &&
        ranges.back().offset + ranges.back().numel == e.offset) {
      ranges.back().numel += n;
    } else {
      ranges.push_back({e.offset, n, e.spec.decay});
    }
  }
  return ranges;
}

Device bring_up_gpu(const Config& config, int local_rank) {
  std::string why;
  const auto gpus = cuda_devices(&why);
  ST_CHECK(!gpus.empty(), "runtime.device = \"cuda\", but no GPU is usable here: {}", why);
  const int index = local_rank % int(gpus.size());
  use_cuda_device(index);
  set_gpu_gemm_precision(std::string(name_of(config.runtime.gpu_gemm_used())));
  set_gpu_linear_backend(std::string(name_of(config.runtime.gpu_linear)));
  set_gpu_attention_backend(std::string(name_of(config.runtime.gpu_attention)));
  return Device::cuda(index);
}

std::unique_ptr<nn::Model> build_job_model(const Config& config, const Shape& input_sample, int64_t num_classes,
                                           bool layout_only) {
  if (config.runtime.device != DeviceKind::emulated)
    return nn::build_model(config.model, input_sample, num_classes, layout_only);
  // An emulated accelerator runs no model (timed_step waits instead): one
  // linear layer over a single value stands in for config.model, so that
  // the strategy's start (a broadcast of the parameters) and the memory
  // held have nothing that grows with the samples: config.model's MLP over
  // a 147 MB sample would be gigabytes of weights per rank.
  nn::ModelSpec stand_in;
  stand_in.hidden = {};
  return nn::build_model(stand_in, Shape{1}, num_classes, layout_only);
}

void set_cpu_products(const Config& config) {
  cpu::set_cpu_backend(config.runtime.cpu_backend);
  const bool mixed = config.runtime.precision == Precision::bf16;
  cpu::set_gemm_precision(mixed ? cpu::GemmPrecision::bf16 : cpu::GemmPrecision::f32);
  ops::set_cpu_linear_keeps_bf16(mixed);
}

Session make_session(const Config& config, io::ShardLocator locator, int local_rank) {
  cpu::set_blas_threads(int(config.runtime.blas_threads));
  set_cpu_products(config);
  Session s;
  // The GPU first: the streaming loader's batch slots are page-locked for it.
  if (config.runtime.device == DeviceKind::cuda) s.device = bring_up_gpu(config, local_rank);
  // The test split first: once the streaming loader exists, its thread owns HDF5.
  s.test_data = with_context("data.test", [&] {
    return io::InMemoryDataset::load(config.data.test, config.data.test_limit, config.data.loader.verify_checksums);
  });
  s.input_unread = config.runtime.input_unread();           // streamed only (config.cpp)
  if (config.data.loader.mode == io::LoaderMode::stream) {  // data.train_limit is refused with it (config.cpp)
    s.train_stream = with_context("data.train", [&] {
      io::LoaderOptions loader = config.data.loader;
      // Token ids, turned into x and labels per step (lm_batch.h); or an
      // emulated accelerator's bytes, which nothing on the host reads.
      loader.raw = nn::is_language_model(config.model.kind) || config.runtime.input_unread();
      loader.pinned_slots = !s.device.is_cpu();  // the step's input, copied to the GPU from there
      return std::make_unique<io::StreamLoader>(config.data.train, loader, config.train.global_batch_size,
                                                uint64_t(config.train.seed), std::move(locator));
    });
  } else {
    s.train_data = with_context("data.train", [&] {
      return io::InMemoryDataset::load(config.data.train, config.data.train_limit, config.data.loader.verify_checksums);
    });
  }
  const io::DatasetInfo& tr = s.train_info();
  const io::DatasetInfo& te = s.test_data.info();
  ST_CHECK(tr.sample_shape == te.sample_shape && tr.num_classes == te.num_classes,
           "data.train ({} samples of shape {}, {} classes) and data.test ({} of shape {}, {} "
           "classes) do not match",
           tr.num_samples, tr.sample_shape.str(), tr.num_classes, te.num_samples, te.sample_shape.str(),
           te.num_classes);
  if (nn::is_language_model(config.model.kind)) {
    // Windows of T+1 token ids (docs/formats.md): the model reads T of them.
    // Both splits are checked now: a float test split would otherwise fail
    // only at the first evaluation, after an epoch of training.
    for (const io::DatasetInfo* info : {&tr, &te})
      ST_CHECK(info->sample_shape.ndim() == 1 && info->sample_shape[0] >= 2 && io::holds_token_ids(info->dtype),
               "model.kind = \"gpt\" needs language-model data: samples of T+1 token ids stored as uint8, uint16 "
               "or int32 (shardtrain prep text or prep tokens); {} has {} samples of shape {}",
               info->path, io::shard_format::dtype_name(info->dtype), info->sample_shape.str());
    s.language_model = true;
    s.lm_tokens = tr.sample_shape[0] - 1;
  }
  s.model = build_job_model(config, s.language_model ? Shape{s.lm_tokens} : tr.sample_shape, tr.num_classes);
  s.model->set_plan_device(config.runtime.device == DeviceKind::cuda ? Device::cuda(0) : Device::cpu());
  s.model->set_activation_dtype(config.runtime.precision == Precision::bf16 ? DType::bf16 : DType::f32);
  s.model->set_activation_checkpointing(config.parallel.activation_checkpointing,
                                        int(config.parallel.checkpoint_every));
  if (config.runtime.device == DeviceKind::emulated) s.emulated.emplace(config.runtime.emulate);
  if (config.runtime.emulate.compute == EmulatedCompute::profile) {
    const ComputeProfile& p =
        s.compute_profile.emplace(load_compute_profile(config.runtime.emulate.profile, config.runtime.emulate.scale));
    // The rest of the step's compute (the loss above all) follows the last
    // Block's forward, where the loss would run.
    std::vector<double> forward = p.forward_s;
    if (!forward.empty()) forward.back() += p.other_s;
    with_context("runtime.emulate.profile", [&] { s.model->emulate_compute(forward, p.backward_s, p.batch); });
  }
  if (config.runtime.device == DeviceKind::cuda) {
    s.cuda_graphs = config.runtime.cuda_graphs;
    s.model->to(s.device);
  }
  s.model->initialize(uint64_t(config.train.seed));
  return s;
}

void make_optimizer(Session& s, const Config& config, parallel::Strategy& strategy) {
  optim::OptimizerConfig oc = config.optim;
  if (s.compute_profile)  // the profile's update of the whole model, per element: a shard waits its share
    oc.emulated_s_per_element = s.compute_profile->optimizer_s / double(s.model->flat().parameter_count());
  s.optimizer = strategy.make_optimizer(oc, optimizer_ranges(s.model->flat()));
}

// The step's input on `device`, and where the host gathers it: the same
// tensor on the CPU, page-locked memory copied on the copy stream for a GPU.
StepBuffers::StepBuffers(const Shape& x_shape, DType x_dtype, const Shape& logits_shape, int64_t n_labels,
                         int64_t batch, Device device)
    : x(Tensor::empty(x_shape, x_dtype, device)),
      x_host(device.is_cpu() ? x : Tensor::empty_pinned(x_shape, x_dtype)),
      classes(logits_shape.cols()),
      labels(size_t(n_labels)),
      indices(size_t(batch)) {
  if (device.is_cpu()) return;
  x_slots_ = {x, Tensor::empty(x_shape, x_dtype, device)};
  x_host_slots_ = {x_host, Tensor::empty_pinned(x_shape, x_dtype)};
  for (size_t i = 0; i < 2; ++i) {
    y_slots_[i] = Tensor::empty({n_labels}, DType::i32, device);
    y_host_slots_[i] = Tensor::empty_pinned({n_labels}, DType::i32);
  }
  y = y_slots_[0];
  y_host = y_host_slots_[0];
  row_loss = Tensor::empty({n_labels}, DType::f32, device);
  row_loss_host = Tensor::empty_pinned({n_labels}, DType::f32);
}

void StepBuffers::next_input() {
  if (!x_slots_[0].defined()) return;
  input_slot ^= 1;
  x = x_slots_[size_t(input_slot)];
  x_host = x_host_slots_[size_t(input_slot)];
  y = y_slots_[size_t(input_slot)];
  y_host = y_host_slots_[size_t(input_slot)];
  wait_input_host_free(input_slot);
}

void StepBuffers::use_input(const Tensor& host) {
  ST_CHECK(host.shape() == x_host.shape() && host.dtype() == x_host.dtype(),
           "the loader's batch is {} {}, the step's input {} {}", host.shape().str(), dtype_name(host.dtype()),
           x_host.shape().str(), dtype_name(x_host.dtype()));
  x_host = host;
  if (x_slots_[0].defined())
    x_host_slots_[size_t(input_slot)] = host;
  else
    x = host;
}

StepBuffers::StepBuffers(const Shape& sample, int64_t num_classes, int64_t batch, Device device)
    : StepBuffers(batched(batch, sample), DType::f32, {batch, num_classes}, batch, batch, device) {}

StepBuffers StepBuffers::language_model(int64_t T, int64_t vocab, int64_t batch, Device device,
                                        io::SampleDType token_dtype) {
  StepBuffers b({batch, T}, DType::i32, {batch, T, vocab}, batch * T, batch, device);
  b.tokens = T;
  b.windows.resize(size_t(batch * (T + 1)) * io::shard_format::dtype_size(token_dtype));
  return b;
}

StepBuffers make_step_buffers(const Session& s, int64_t batch) {
  const io::DatasetInfo& info = s.train_info();
  // Input nothing reads: one value per sample, not a batch of floats.
  const Shape sample = s.input_unread ? Shape{1} : info.sample_shape;
  StepBuffers b = s.language_model
                      ? StepBuffers::language_model(s.lm_tokens, info.num_classes, batch, s.device, info.dtype)
                      : StepBuffers(sample, info.num_classes, batch, s.device);
  if (s.cuda_graphs && !s.device.is_cpu()) b.graphs = std::make_shared<StepGraphs>(gpu_graph_backend(s.device));
  return b;
}

void gather_batch(const Session& s, StepBuffers& b, int64_t n) {
  if (!s.language_model) {
    s.train_data.gather(b.indices.data(), n, b.x_host.f32(), b.labels.data());
    return;
  }
  // The split's /y (each window's last id) lands in b.labels first, then
  // the next-token labels replace it.
  s.train_data.gather_bytes(b.indices.data(), n, b.windows.data(), b.labels.data());
  lm_batch_from_windows({b.windows.data(), s.train_data.info().dtype}, n, s.lm_tokens, b.x_host.i32(), b.labels.data());
}

namespace {

// The micro-batches' forward and backward through the strategy's hooks;
// set_sync(last) before each backward (reduce only after the last: no_sync).
// On the CPU the loss is summed into phases as each forward ends; on a GPU
// each row's loss stays in b.row_loss, copied back (not waited for) after
// the last forward: read_step_loss collects it at the step's end.
// `graph_update`, where not null, is the update's device work: it joins
// the last micro-batch when that one goes through the CUDA graphs, and then
// true is returned (the update is done, its step not yet counted).
bool forward_backward(nn::Model& model, StepBuffers& b, int64_t global_batch, int64_t micro_batches,
                      parallel::Strategy& strategy, const std::function<void()>& graph_update, StepPhases& phases) {
  const int64_t local = b.x.dim(0);
  ST_CHECK(micro_batches >= 1 && micro_batches <= local,
           "{} micro-batches of a {}-sample batch: each needs at least one sample (train.accumulation_steps)",
           micro_batches, local);
  const Shape& sample = model.input_sample();
  // Per sample: b.tokens rows of logits (1, or T for a language model).
  const int64_t classes = b.classes, rows = b.tokens;
  const bool gpu = b.y.defined();
  if (gpu) {
    // The batch and its labels to the GPU on the copy stream; the first
    // kernel waits for them. A bad label, or a bad token id, is an Error
    // here, before any copy, naming its place in its micro-batch as the CPU
    // kernels do. A language model's ids index its embedding, whose rows are
    // the logits' classes (its vocabulary).
    telemetry::Span span("h2d", "data");
    const bool token_ids = b.x_host.dtype() == DType::i32;
    for (int64_t m = 0; m < micro_batches; ++m) {
      const int64_t begin = local * m / micro_batches, end = local * (m + 1) / micro_batches;
      ops::check_labels(b.labels.data() + begin * rows, (end - begin) * rows, classes);
      if (token_ids)
        ops::check_token_ids(b.x_host.i32() + begin * sample.numel(), (end - begin) * sample.numel(), classes);
    }
    std::copy_n(b.labels.data(), local * rows, b.y_host.i32());
    copy_input_async({{b.x, b.x_host}, {b.y, b.y_host}}, b.input_slot);
  }
  // CUDA graphs: micro-batches replay where the strategy's hooks issue no
  // device work (DDP's no_sync ones) and nothing else times the ops (op
  // timing records events per op, which a replay would not).
  StepGraphs* const step_graphs = gpu && b.graphs && !op_timing_enabled() ? b.graphs.get() : nullptr;
  bool updated = false;
  for (int64_t m = 0; m < micro_batches; ++m) {
    const int64_t begin = local * m / micro_batches, end = local * (m + 1) / micro_batches;
    // The update follows the last micro-batch: the ones after the first see
    // the first's parameters, so their bf16 weight copies are reused.
    const nn::SameWeights same_weights(m > 0);
    Tensor x = b.x.view(begin * sample.numel(), batched(end - begin, sample));
    const float scale = 1.0f / float(global_batch * rows);  // the gradient of the mean loss over the global batch
    StepGraphs* const graphs =
        step_graphs != nullptr && strategy.hooks_capturable(m == micro_batches - 1) ? step_graphs : nullptr;
    if (graphs != nullptr) {
      const double t0 = now_seconds();
      strategy.set_sync(m == micro_batches - 1);
      telemetry::Span span("forward_backward", "compute", m);
      const int64_t n = (end - begin) * rows;
      const bool with_update = m == micro_batches - 1 && graph_update;
      graphs->run({m, micro_batches, local, global_batch, b.x.raw(), b.y.raw(), with_update}, [&] {
        Tensor logits = model.forward(x, &strategy);
        ops::softmax_xent_fused_rows(logits, logits, b.y.view(begin * rows, {n}), scale,
                                     b.row_loss.view(begin * rows, {n}));
        model.backward(logits, /*accumulate=*/m > 0, &strategy);
        if (with_update) graph_update();
      });
      updated = with_update;
      if (m == micro_batches - 1) read_back_async(b.row_loss_host, b.row_loss);
      phases.forward_s += now_seconds() - t0;  // a replay is one launch: forward and backward together
      continue;
    }
    // The logits' gradient overwrites the logits (the loss kernels work in
    // place): every model ends in a Linear, whose backward reads its input
    // and weight but not its output, so no f32 copy of a micro-batch's
    // logits (B x T x V for a language model) is ever made.
    Tensor dlogits;
    double t0 = now_seconds();
    {
      telemetry::Span span("forward", "compute", m);
      Tensor logits = model.forward(x, &strategy);
      dlogits = logits;
      if (gpu) {
        const int64_t n = (end - begin) * rows;
        ops::softmax_xent_fused_rows(dlogits, logits, b.y.view(begin * rows, {n}), scale,
                                     b.row_loss.view(begin * rows, {n}));
        if (m == micro_batches - 1) read_back_async(b.row_loss_host, b.row_loss);
      } else if (!model.compute_emulated()) {  // emulated: the loss's time is in the last Block's wait
        phases.loss_sum += ops::softmax_xent_fused(dlogits, logits, b.labels.data() + begin * rows, scale);
      }
    }
    const double t1 = now_seconds();
    phases.forward_s += t1 - t0;
    strategy.set_sync(m == micro_batches - 1);
    {
      telemetry::Span span("backward", "compute", m);
      model.backward(dlogits, /*accumulate=*/m > 0, &strategy);
    }
    phases.backward_s += now_seconds() - t1;
  }
  return updated;
}

// GPU: waits for the losses read back after the last forward (everything
// after it is issued by now) and sums them per micro-batch, rows in order,
// as the CPU does; then the wait for the input copy is known (event-timed).
void read_step_loss(const StepBuffers& b, int64_t micro_batches, StepPhases& phases) {
  if (!b.y.defined()) return;
  wait_read_back(b.row_loss.device());
  const int64_t local = b.x.dim(0), rows = b.tokens;
  const float* loss = b.row_loss_host.f32();
  for (int64_t m = 0; m < micro_batches; ++m) {
    double sum = 0.0;
    for (int64_t r = local * m / micro_batches * rows; r < local * (m + 1) / micro_batches * rows; ++r) sum += loss[r];
    phases.loss_sum += sum;
  }
  phases.h2d_s = device_memory_ops().last_input_copy_seconds();
}

// xs (a host view) copied into the front of dev; returns that part of dev.
Tensor to_device_into(const Tensor& dev, const Tensor& xs) {
  Tensor part = dev.view(0, xs.shape());
  copy_tensor(part, xs);
  return part;
}

}  // namespace

StepPhases train_step(nn::Model& model, optim::Optimizer& optimizer, StepBuffers& b, float lr, double clip_grad_norm,
                      int64_t global_batch, int64_t micro_batches, parallel::Strategy& strategy) {
  StepPhases phases;
  // A strategy whose update is device work alone updates inside the last
  // micro-batch's graph: the step's scalars are written before it (outside
  // the graph, so each replay reads this step's), the step counted after.
  std::function<void()> graph_update;
  if (strategy.update_capturable()) {
    optimizer.prepare(lr);
    graph_update = [&] { strategy.device_update(optimizer, lr, clip_grad_norm); };
  }
  // Emulated compute: the profile's update time includes the clipping it
  // measured; the gradients are not real, and clipping them would compute.
  if (model.compute_emulated()) clip_grad_norm = 0;
  if (forward_backward(model, b, global_batch, micro_batches, strategy, graph_update, phases))
    optimizer.finish_step();
  else
    strategy.update(optimizer, lr, clip_grad_norm, phases.optimizer_s);
  read_step_loss(b, micro_batches, phases);
  return phases;
}

std::vector<std::vector<double>> gather_from_ranks(comm::Communicator& comm, const std::vector<double>& values) {
  // Each double travels as its 8 bytes (two i32 words, which allgather moves
  // untouched): as f32 a loss sum kept 24 bits and a byte count over 16 MiB
  // came back rounded.
  const auto n = int64_t(values.size());
  Tensor mine = Tensor::empty({2 * n}, DType::i32);
  if (n > 0) std::memcpy(mine.raw(), values.data(), size_t(n) * sizeof(double));
  Tensor all = Tensor::empty({2 * n * comm.size()}, DType::i32);
  comm.allgather(mine, all)->wait();
  std::vector<std::vector<double>> out(size_t(comm.size()), std::vector<double>(size_t(n)));
  const auto* bytes = static_cast<const unsigned char*>(all.raw());
  for (int r = 0; r < comm.size(); ++r)
    if (n > 0) std::memcpy(out[size_t(r)].data(), bytes + size_t(r * n) * sizeof(double), size_t(n) * sizeof(double));
  return out;
}

std::vector<double> sum_over_ranks(comm::Communicator& comm, const std::vector<double>& values) {
  std::vector<double> sums(values.size(), 0.0);
  for (const auto& rank_values : gather_from_ranks(comm, values))
    for (size_t i = 0; i < sums.size(); ++i) sums[i] += rank_values[i];
  return sums;
}

EvalResult evaluate(nn::Model& model, const io::InMemoryDataset& data, int64_t batch, comm::Communicator* comm,
                    bool language_model, nn::BlockHooks* hooks) {
  const int rank = comm ? comm->rank() : 0, world = comm ? comm->size() : 1;
  const int64_t first = data.size() * rank / world, last = data.size() * (rank + 1) / world;
  // Shares differ by one sample at most. Every rank uses the batch of the
  // largest share and, with hooks (FSDP gathers each Block in every forward,
  // a collective), makes the same number of forward passes: a rank whose
  // share is used up runs its last pass again on one sample and counts
  // nothing. Otherwise one rank's extra pass would gather alone.
  const int64_t largest_share = (data.size() + world - 1) / world;
  batch = std::max<int64_t>(1, std::min(batch, largest_share));
  const int64_t passes = hooks ? (largest_share + batch - 1) / batch : (last - first + batch - 1) / batch;
  // A language model reads T of a sample's T+1 tokens and predicts T labels.
  const Shape sample = language_model ? model.input_sample() : data.info().sample_shape;
  const int64_t rows = language_model ? sample.numel() : 1;
  const DType x_dtype = language_model ? DType::i32 : DType::f32;
  // Gathered on the host; on a GPU, copied there batch by batch.
  const bool gpu = !model.device().is_cpu();
  Tensor x_host =
      gpu ? Tensor::empty_pinned(batched(batch, sample), x_dtype) : Tensor::empty(batched(batch, sample), x_dtype);
  Tensor x_dev = gpu ? Tensor::empty(batched(batch, sample), x_dtype, model.device()) : x_host;
  std::vector<int32_t> labels(static_cast<size_t>(batch * rows));
  std::vector<int64_t> indices(static_cast<size_t>(batch));
  const io::SampleDType token_dtype = data.info().dtype;
  std::vector<uint8_t> windows(
      language_model ? size_t(batch * data.info().sample_numel()) * io::shard_format::dtype_size(token_dtype) : 0);
  std::vector<int32_t> last_bytes(language_model ? size_t(batch) : 0);
  double loss = 0.0;
  int64_t correct = 0;
  for (int64_t pass = 0; pass < passes; ++pass) {
    const int64_t start = first + pass * batch;
    const bool counted = start < last;
    // An uncounted pass reads sample 0, which exists: passes > 0 means data.
    const int64_t len = counted ? std::min(batch, last - start) : 1;
    std::iota(indices.begin(), indices.begin() + len, counted ? start : 0);
    Tensor xs = x_host.view(0, batched(len, sample));
    if (language_model) {
      data.gather_bytes(indices.data(), len, windows.data(), last_bytes.data());
      lm_batch_from_windows({windows.data(), token_dtype}, len, rows, xs.i32(), labels.data());
    } else {
      data.gather(indices.data(), len, xs.f32(), labels.data());
    }
    Tensor logits = model.forward(gpu ? to_device_into(x_dev, xs) : xs, hooks);
    if (!counted) continue;
    loss += ops::softmax_xent_forward(logits, labels.data());
    correct += ops::count_correct(logits, labels.data());
  }
  if (comm) {
    const std::vector<double> sums = sum_over_ranks(*comm, {loss, double(correct)});
    loss = sums[0];
    correct = int64_t(std::llround(sums[1]));
  }
  const auto n = double(data.size() * rows);
  return {loss / n, double(correct) / n, data.size()};
}

}  // namespace shardtrain::train
