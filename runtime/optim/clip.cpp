#include "runtime/optim/clip.h"

#include "kernels/ops.h"

#include <cmath>

namespace shardtrain::optim {

void clip_to_norm(const Tensor& grads, double norm, double max_norm) {
  if (max_norm > 0 && norm > max_norm) ops::scale_inplace(grads, float(max_norm / (norm + 1e-6)));
}

double clip_grad_norm(const Tensor& grads, double max_norm) {
  const double norm = std::sqrt(ops::sum_squares(grads));
  clip_to_norm(grads, norm, max_norm);
  return norm;
}

}  // namespace shardtrain::optim
