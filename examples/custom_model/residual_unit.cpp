#include "residual_unit.h"

namespace resmlp {

using namespace shardtrain;

ResidualUnit::ResidualUnit(int64_t width, int64_t hidden)
    : width_(width), hidden_(hidden), up_(width, hidden), down_(hidden, width) {}

std::vector<nn::ParamSpec> ResidualUnit::param_specs() const {
  std::vector<nn::ParamSpec> specs;
  for (auto [prefix, layer] : {std::pair{"up.", &up_}, std::pair{"down.", &down_}}) {
    for (nn::ParamSpec p : layer->param_specs()) {
      p.name = prefix + p.name;
      specs.push_back(std::move(p));
    }
  }
  return specs;
}

void ResidualUnit::bind(std::span<const Tensor> params, std::span<const Tensor> grads) {
  // FSDP binds again whenever it gathers the Block: the views change.
  up_.bind(params.subspan(0, 2), grads.subspan(0, 2));
  down_.bind(params.subspan(2, 2), grads.subspan(2, 2));
}

Shape ResidualUnit::output_shape(const Shape& in) const {
  ST_CHECK(in.ndim() == 1 && in[0] == width_, "a residual unit of width {} takes samples [{}], got {}", width_, width_,
           in.str());
  return in;
}

void ResidualUnit::ensure_buffers(int64_t batch, Device device) {
  if (batch <= capacity_ && pre_.device() == device) return;
  release_activations();  // the old buffers go before the new ones exist
  capacity_ = batch;
  for (Tensor* t : {&pre_, &act_, &dpre_, &dact_}) *t = Tensor::empty({batch, hidden_}, DType::f32, device);
}

void ResidualUnit::forward(const Tensor& in, const Tensor& out) {
  batch_ = in.dim(0);
  ensure_buffers(batch_, in.device());
  const Tensor pre = pre_.view(0, {batch_, hidden_}), act = act_.view(0, {batch_, hidden_});
  up_.forward(in, pre);
  relu_.forward(pre, act);
  down_.forward(act, out);
  ops::add(out, out, in);  // the skip path
}

void ResidualUnit::backward(const Tensor& dout, const Tensor& din, bool accumulate) {
  const Tensor dact = dact_.view(0, {batch_, hidden_}), dpre = dpre_.view(0, {batch_, hidden_});
  down_.backward(dout, dact, accumulate);
  relu_.backward(dact, dpre, accumulate);
  up_.backward(dpre, din, accumulate);
  if (din.defined()) ops::add(din, din, dout);  // the skip path's gradient
}

void ResidualUnit::release_activations() {
  pre_ = act_ = dpre_ = dact_ = Tensor();
  capacity_ = 0;
  up_.release_activations();
  down_.release_activations();
  relu_.release_activations();
}

int64_t ResidualUnit::workspace_bytes(const Shape& /*in*/, int64_t batch) const {
  return 4 * batch * hidden_ * int64_t(sizeof(float));
}

}  // namespace resmlp
