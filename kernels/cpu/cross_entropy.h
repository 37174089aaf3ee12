// Softmax cross-entropy over C classes, numerically stable (max-subtracted,
// log-sum-exp kept in f32 per row). labels are class indices in [0, C); an
// out-of-range label is an Error naming the row and the label.
#pragma once

#include <cstdint>

namespace shardtrain::cpu {

// Sum over rows of -log softmax(logits)[label]. Writes each row's log-sum-exp
// into lse[N] when lse is not null (the backward pass reuses it).
double softmax_xent_forward(const float* logits, const int32_t* labels, int64_t N, int64_t C, float* lse);

// dlogits = scale * (softmax(logits) - onehot(label)), using lse from forward.
// With scale = 1/global_batch the result is the gradient of the mean loss.
void softmax_xent_backward(float* dlogits, const float* logits, const float* lse, const int32_t* labels, int64_t N,
                           int64_t C, float scale);

// Forward and backward fused, one pass over each row while it is in cache.
// Returns the summed loss; dlogits as in softmax_xent_backward.
double softmax_xent_fused(float* dlogits, const float* logits, const int32_t* labels, int64_t N, int64_t C,
                          float scale);

// softmax_xent_fused with each row's loss written to row_loss[N] (rounded
// to f32) instead of summed: the CPU reference of the GPU's form, which
// keeps the losses on the device until the step reads them once.
void softmax_xent_fused_rows(float* dlogits, const float* logits, const int32_t* labels, int64_t N, int64_t C,
                             float scale, float* row_loss);

// The loss kernels' label check on its own: an Error naming the first row
// whose label is outside [0, C).
void check_labels(const int32_t* labels, int64_t N, int64_t C);

// Number of rows whose arg-max logit (first one on ties) equals the label.
int64_t count_correct(const float* logits, const int32_t* labels, int64_t N, int64_t C);

}  // namespace shardtrain::cpu
