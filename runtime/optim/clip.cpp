#include "runtime/optim/clip.h"

#include "kernels/ops.h"

namespace shardtrain::optim {

void clip_grad_norm(const Tensor& grads, double max_norm) { ops::clip_to_max_norm(grads, max_norm); }

}  // namespace shardtrain::optim
