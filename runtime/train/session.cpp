#include "runtime/train/session.h"

#include "kernels/cpu/gemm.h"
#include "kernels/ops.h"
#include "runtime/nn/models.h"
#include "runtime/optim/clip.h"

#include <algorithm>
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

Session make_session(const Config& config) {
  cpu::set_blas_threads(int(config.runtime.blas_threads));
  Session s;
  s.train_data = with_context("data.train", [&] {
    return io::InMemoryDataset::load(config.data.train, config.data.train_limit);
  });
  s.test_data = with_context("data.test", [&] {
    return io::InMemoryDataset::load(config.data.test, config.data.test_limit);
  });
  const io::DatasetInfo& tr = s.train_data.info();
  const io::DatasetInfo& te = s.test_data.info();
  ST_CHECK(tr.sample_shape == te.sample_shape && tr.num_classes == te.num_classes,
           "data.train ({} samples of shape {}, {} classes) and data.test ({} of shape {}, {} "
           "classes) do not match",
           tr.num_samples, tr.sample_shape.str(), tr.num_classes, te.num_samples,
           te.sample_shape.str(), te.num_classes);
  s.model = nn::build_model(config.model, tr.sample_shape, tr.num_classes);
  s.model->initialize(uint64_t(config.train.seed));
  s.optimizer = optim::make_optimizer(config.optim, s.model->flat().numel(),
                                      optimizer_ranges(s.model->flat()));
  return s;
}

StepBuffers::StepBuffers(const Shape& sample, int64_t classes, int64_t batch)
    : x(Tensor::empty(batched(batch, sample))),
      dlogits(Tensor::empty({batch, classes})),
      labels(size_t(batch)),
      indices(size_t(batch)) {}

double train_step(nn::Model& model, optim::Optimizer& optimizer, StepBuffers& b, float lr,
                  double clip_grad_norm, int64_t global_batch) {
  Tensor logits = model.forward(b.x);
  const double loss_sum =
      ops::softmax_xent_fused(b.dlogits, logits, b.labels.data(), 1.0f / float(global_batch));
  model.backward(b.dlogits);
  const nn::FlatParameters& flat = model.flat();
  if (clip_grad_norm > 0) optim::clip_grad_norm(flat.grads(), clip_grad_norm);
  optimizer.step(flat.params(), flat.grads(), lr);
  return loss_sum;
}

EvalResult evaluate(nn::Model& model, const io::InMemoryDataset& data, int64_t batch) {
  const int64_t n = data.size();
  batch = std::min(batch, n);
  Tensor x = Tensor::empty(batched(batch, data.info().sample_shape));
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  std::vector<int64_t> indices(static_cast<size_t>(batch));
  double loss = 0.0;
  int64_t correct = 0;
  for (int64_t start = 0; start < n; start += batch) {
    const int64_t len = std::min(batch, n - start);
    std::iota(indices.begin(), indices.begin() + len, start);
    Tensor xs = x.view(0, batched(len, data.info().sample_shape));
    data.gather(indices.data(), len, xs.f32(), labels.data());
    Tensor logits = model.forward(xs);
    loss += ops::softmax_xent_forward(logits, labels.data());
    correct += ops::count_correct(logits, labels.data());
  }
  return {loss / double(n), double(correct) / double(n), n};
}

}  // namespace shardtrain::train
