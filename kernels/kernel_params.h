// The parameters of the kernels that take more than tensors, shared by
// every device's implementation and by the layers that call them through
// kernels/ops.h: convolution and pooling shapes, optimizer hyperparameters
// and the per-step scalars of an update.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace shardtrain::kernels {

struct Conv2dShape {
  int64_t B, C, H, W;  // input
  int64_t OC, K;       // output channels, kernel size
  int64_t stride = 1, pad = 0;
  int64_t OH() const { return (H + 2 * pad - K) / stride + 1; }
  int64_t OW() const { return (W + 2 * pad - K) / stride + 1; }
  // Floats of the per-sample column buffer the caller provides: C*K*K*OH*OW.
  int64_t col_floats() const { return C * K * K * OH() * OW(); }
  double forward_flops() const { return 2.0 * double(B * OC * OH() * OW()) * double(C * K * K); }
};

struct Pool2dShape {
  int64_t B, C, H, W;
  int64_t K = 2, stride = 2;
  int64_t OH() const { return (H - K) / stride + 1; }
  int64_t OW() const { return (W - K) / stride + 1; }
};

struct SgdParams {
  float lr = 0.01f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  float weight_decay = 0.0f;  // L2, added to the gradient (as torch.optim.SGD)
  bool nesterov = false;
};

struct AdamWParams {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;  // decoupled: p -= lr*wd*p
};

// What an update needs that changes from step to step: the learning rate,
// and SGD's first step or AdamW's bias corrections. The hyperparameters
// stay kernel arguments; these are computed on the host in double and
// rounded once to f32, as torch computes them in Python before they scale
// f32 tensors. An update reads them from a small tensor on its own device
// (ops::store_floats writes them in stream order before it), so an update
// captured into a CUDA graph replays with each step's values.
struct SgdStep {
  static constexpr int kFloats = 2;
  float lr = 0.0f;
  float first = 0.0f;  // 1 on the first step: the momentum buffer is set, not blended
  std::array<float, kFloats> floats() const { return {lr, first}; }
  static SgdStep of(const SgdParams& hp, bool first_step) { return {hp.lr, first_step ? 1.0f : 0.0f}; }
};

struct AdamWStep {
  static constexpr int kFloats = 3;
  float decay = 1.0f;      // 1 - lr*wd
  float step_size = 0.0f;  // lr / (1 - beta1^step)
  float bc2_sqrt = 1.0f;   // sqrt(1 - beta2^step)
  std::array<float, kFloats> floats() const { return {decay, step_size, bc2_sqrt}; }
  // step is 1-based.
  static AdamWStep of(const AdamWParams& hp, int64_t step) {
    const double b1 = hp.beta1, b2 = hp.beta2;
    return {float(1.0 - double(hp.lr) * double(hp.weight_decay)),
            float(double(hp.lr) / (1.0 - std::pow(b1, double(step)))),
            float(std::sqrt(1.0 - std::pow(b2, double(step))))};
  }
};

}  // namespace shardtrain::kernels
