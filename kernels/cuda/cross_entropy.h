// Softmax cross-entropy over C classes on the GPU, with the semantics of
// kernels/cpu/cross_entropy.h: logits and dlogits are device pointers, the
// labels are HOST pointers (N int32 class indices), checked on the host first
// (an out-of-range label is an Error naming the row and the label, as on the
// CPU) and copied to the device. One block per row: max, sum of exponentials,
// log-sum-exp; the per-row losses come back to the host and are added in row
// order in double, so the result is deterministic. Each of these calls waits
// for the compute stream (it returns a host value); the training step uses
// softmax_xent_fused_rows below, which does not. With `bf16` the logits (and
// dlogits) hold bf16 values: mixed precision's head writes them so, and
// each gradient value is its f32 value rounded once.
#pragma once

#include <cstdint>

namespace shardtrain::cuda {

// Sum over rows of -log softmax(logits)[label].
double softmax_xent_forward(const void* logits, const int32_t* host_labels, int64_t N, int64_t C, bool bf16 = false);

// dlogits = scale * (softmax(logits) - onehot(label)); returns the summed loss.
// dlogits may be logits (in place).
double softmax_xent_fused(void* dlogits, const void* logits, const int32_t* host_labels, int64_t N, int64_t C,
                          float scale, bool bf16 = false);

// The fused form with DEVICE labels and each row's loss written, as f32, to
// the device array row_loss[N]: no host round trip, nothing waits. Labels
// are not checked (the caller checks them on the host, ops::check_labels); a
// row whose label is outside [0, C) gets a NaN loss and its dlogits row is
// left unwritten, never an out-of-bounds read.
void softmax_xent_fused_rows(void* dlogits, const void* logits, const int32_t* labels, int64_t N, int64_t C,
                             float scale, float* row_loss, bool bf16 = false);

// Rows whose arg-max logit (first one on ties) equals the label.
int64_t count_correct(const void* logits, const int32_t* host_labels, int64_t N, int64_t C, bool bf16 = false);

}  // namespace shardtrain::cuda
