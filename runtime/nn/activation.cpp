#include "runtime/nn/activation.h"

#include "kernels/ops.h"

namespace shardtrain::nn {

void ReLU::forward(const Tensor& in, const Tensor& out) {
  out_ = out;
  ops::relu_forward(out, in);
}

void ReLU::backward(const Tensor& dout, const Tensor& din, bool /*accumulate*/) {
  if (din.defined()) ops::relu_backward(din, dout, out_);
}

void GELU::forward(const Tensor& in, const Tensor& out) {
  in_ = in;
  ops::gelu_forward(out, in);
}

void GELU::backward(const Tensor& dout, const Tensor& din, bool /*accumulate*/) {
  if (din.defined()) ops::gelu_backward(din, dout, in_);
}

}  // namespace shardtrain::nn
