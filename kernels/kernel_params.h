// The parameters of the kernels that take more than tensors, shared by
// every device's implementation and by the layers that call them through
// kernels/ops.h: convolution and pooling shapes, optimizer hyperparameters.
#pragma once

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

}  // namespace shardtrain::kernels
