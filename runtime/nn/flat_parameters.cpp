#include "runtime/nn/flat_parameters.h"

#include "runtime/core/device_memory.h"
#include "runtime/core/rng.h"

#include <cmath>

namespace shardtrain::nn {
namespace {

constexpr uint64_t kInitStream = 0x696e6974;  // "init"

int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

void init_param(float* p, const ParamSpec& spec, Rng& rng) {
  const int64_t n = spec.shape.numel();
  switch (spec.init) {
    case Init::fan_in_uniform: {
      const float bound = 1.0f / std::sqrt(float(spec.fan_in));
      for (int64_t i = 0; i < n; ++i) p[i] = rng.uniform(-bound, bound);
      break;
    }
    case Init::normal:
      for (int64_t i = 0; i < n; ++i) p[i] = spec.std * rng.normal();
      break;
    case Init::zeros:
      for (int64_t i = 0; i < n; ++i) p[i] = 0.0f;
      break;
    case Init::ones:
      for (int64_t i = 0; i < n; ++i) p[i] = 1.0f;
      break;
  }
}

}  // namespace

FlatParameters::FlatParameters(const std::vector<std::string>& block_names,
                               const std::vector<std::vector<ParamSpec>>& block_specs, bool allocate) {
  int64_t at = 0;
  for (size_t b = 0; b < block_specs.size(); ++b) {
    BlockRange range{at, 0};
    for (const ParamSpec& spec : block_specs[b]) {
      entries_.push_back({block_names[b] + "." + spec.name, int(b), at, spec});
      at += spec.shape.numel();
    }
    at = round_up(at, kAlignElems);
    range.numel = at - range.offset;
    blocks_.push_back(range);
  }
  numel_ = at;
  if (!allocate) return;
  // Zeroed, so that alignment padding is 0 in both buffers and a reduction
  // over whole block ranges stays exact.
  params_ = Tensor::zeros({at});
  grads_ = Tensor::zeros({at});
}

void FlatParameters::initialize(uint64_t seed) {
  // Drawn on the host (the same values on every device), then copied.
  Tensor host = params_.device().is_cpu() ? params_ : to_device(params_, Device::cpu());
  for (size_t i = 0; i < entries_.size(); ++i) {
    Rng rng(stream_key(seed, kInitStream, i));
    init_param(host.f32() + entries_[i].offset, entries_[i].spec, rng);
  }
  if (!params_.device().is_cpu()) copy_tensor(params_, host);
}

void FlatParameters::to(Device device) {
  params_ = to_device(params_, device);
  grads_ = to_device(grads_, device);
}

int64_t FlatParameters::parameter_count() const {
  int64_t n = 0;
  for (const ParamEntry& e : entries_) n += e.spec.shape.numel();
  return n;
}

std::vector<Tensor> FlatParameters::views(const Tensor& flat, int block) const {
  std::vector<Tensor> out;
  for (const ParamEntry& e : entries_)
    if (e.block == block) out.push_back(flat.view(e.offset, e.spec.shape));
  return out;
}

std::vector<Tensor> FlatParameters::block_views(const Tensor& block_buffer, int block) const {
  const int64_t base = blocks_[size_t(block)].offset;
  std::vector<Tensor> out;
  for (const ParamEntry& e : entries_)
    if (e.block == block) out.push_back(block_buffer.view(e.offset - base, e.spec.shape));
  return out;
}

int64_t FlatParameters::block_param_extent(int block) const {
  int64_t end = blocks_[size_t(block)].offset;
  for (const ParamEntry& e : entries_)
    if (e.block == block) end = std::max(end, e.offset + e.spec.shape.numel());
  return end - blocks_[size_t(block)].offset;
}

void FlatParameters::replace_buffers(const Tensor& params, const Tensor& grads) {
  for (const Tensor* t : {&params, &grads})
    ST_CHECK(t->numel() == numel_ && t->dtype() == DType::f32 && t->device() == params_.device(),
             "replace_buffers: {} elements of {} on {} do not replace {} f32 elements on {}", t->numel(),
             dtype_name(t->dtype()), t->device().str(), numel_, params_.device().str());
  params_ = params;
  grads_ = grads;
}

void FlatParameters::release_buffers() {
  params_ = Tensor();
  grads_ = Tensor();
}

std::vector<Tensor> FlatParameters::param_views(int block) const { return views(params_, block); }
std::vector<Tensor> FlatParameters::grad_views(int block) const { return views(grads_, block); }

}  // namespace shardtrain::nn
