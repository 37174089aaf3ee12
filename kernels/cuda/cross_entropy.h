// Softmax cross-entropy over C classes on the GPU, with the semantics of
// kernels/cpu/cross_entropy.h: logits and dlogits are device pointers, the
// labels are HOST pointers (N int32 class indices), checked on the host first
// (an out-of-range label is an Error naming the row and the label, as on the
// CPU) and copied to the device. One block per row: max, sum of exponentials,
// log-sum-exp; the per-row losses come back to the host and are added in row
// order in double, so the result is deterministic. Each of these calls waits
// for the compute stream (it returns a host value); the training step uses
// softmax_xent_fused_rows below, which does not.
#pragma once

#include <cstdint>

namespace shardtrain::cuda {

// Sum over rows of -log softmax(logits)[label].
double softmax_xent_forward(const float* logits, const int32_t* host_labels, int64_t N, int64_t C);

// dlogits = scale * (softmax(logits) - onehot(label)); returns the summed loss.
// dlogits may be logits (in place).
double softmax_xent_fused(float* dlogits, const float* logits, const int32_t* host_labels, int64_t N, int64_t C,
                          float scale);

// The fused form with DEVICE labels and each row's loss written, as f32, to
// the device array row_loss[N]: no host round trip, nothing waits. Labels
// are not checked (the caller checks them on the host, ops::check_labels); a
// row whose label is outside [0, C) gets a NaN loss and its dlogits row is
// left unwritten, never an out-of-bounds read.
void softmax_xent_fused_rows(float* dlogits, const float* logits, const int32_t* labels, int64_t N, int64_t C,
                             float scale, float* row_loss);

// Rows whose arg-max logit (first one on ties) equals the label.
int64_t count_correct(const float* logits, const int32_t* host_labels, int64_t N, int64_t C);

}  // namespace shardtrain::cuda
