#include "kernels/cpu/cross_entropy.h"

#include "kernels/cpu/vec_math.h"
#include "runtime/core/error.h"

#include <cmath>

namespace shardtrain::cpu {
namespace {

int32_t checked_label(const int32_t* labels, int64_t n, int64_t C) {
  const int32_t y = labels[n];
  ST_CHECK(y >= 0 && y < C, "softmax cross-entropy: row {} has label {}, outside [0, {})", n, y, C);
  return y;
}

// -log softmax(x)[y] = log(sum_i e^{x_i - max}) + (max - x_y), in double, so
// that logits of 1e4 (where an f32 lse has a 1e-3 ulp) lose nothing.
double row_loss(float max, float sum, float x_y) { return std::log(double(sum)) + (double(max) - double(x_y)); }

}  // namespace

double softmax_xent_forward(const float* logits, const int32_t* labels, int64_t N, int64_t C, float* lse) {
  double loss = 0.0;  // rows added in order: deterministic
  for (int64_t n = 0; n < N; ++n) {
    const float* x = logits + n * C;
    const int32_t y = checked_label(labels, n, C);
    // Subtracting the row max makes every exponent <= 0: no overflow.
    const float m = detail::lane_max(x, C);
    const float s = detail::lane_sum(C, [&](int64_t i) { return detail::exp_nonpos(x[i] - m); });
    if (lse != nullptr) lse[n] = m + std::log(s);
    loss += row_loss(m, s, x[y]);
  }
  return loss;
}

void softmax_xent_backward(float* dlogits, const float* logits, const float* lse, const int32_t* labels, int64_t N,
                           int64_t C, float scale) {
  for (int64_t n = 0; n < N; ++n) {
    const float* x = logits + n * C;
    float* d = dlogits + n * C;
    const int32_t y = checked_label(labels, n, C);
    // softmax_i = e^{x_i - lse}; x_i <= lse, so the exponent is <= 0.
    const float l = lse[n];
    for (int64_t i = 0; i < C; ++i) d[i] = scale * detail::exp_nonpos(x[i] - l);
    d[y] -= scale;
  }
}

double softmax_xent_fused(float* dlogits, const float* logits, const int32_t* labels, int64_t N, int64_t C,
                          float scale) {
  double loss = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    const float* x = logits + n * C;
    float* d = dlogits + n * C;
    const int32_t y = checked_label(labels, n, C);
    // Everything read from x (max, x_y) is read before d is written, so the
    // kernel also works in place (dlogits == logits).
    const float m = detail::lane_max(x, C);
    const float x_y = x[y];
    // The exponentials go into d and are summed from there while the row is
    // in cache, so the normalization pass needs no second exp. (Two plain
    // loops: GCC does not vectorize a store inside the lanes of a reduction.)
    for (int64_t i = 0; i < C; ++i) d[i] = detail::exp_nonpos(x[i] - m);
    const float s = detail::lane_sum(C, [&](int64_t i) { return d[i]; });
    const float k = scale / s;
    for (int64_t i = 0; i < C; ++i) d[i] *= k;
    d[y] -= scale;
    loss += row_loss(m, s, x_y);
  }
  return loss;
}

void softmax_xent_fused_rows(float* dlogits, const float* logits, const int32_t* labels, int64_t N, int64_t C,
                             float scale, float* row_loss) {
  check_labels(labels, N, C);  // rows named by their index in the whole batch
  for (int64_t n = 0; n < N; ++n)
    row_loss[n] = float(softmax_xent_fused(dlogits + n * C, logits + n * C, labels + n, 1, C, scale));
}

void check_labels(const int32_t* labels, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) checked_label(labels, n, C);
}

int64_t count_correct(const float* logits, const int32_t* labels, int64_t N, int64_t C) {
  int64_t correct = 0;
  for (int64_t n = 0; n < N; ++n) {
    const float* x = logits + n * C;
    const int32_t y = checked_label(labels, n, C);
    // Strict '>' keeps the first of equal maxima (as torch.argmax).
    int64_t best = 0;
    for (int64_t i = 1; i < C; ++i) best = x[i] > x[best] ? i : best;
    correct += best == y ? 1 : 0;
  }
  return correct;
}

}  // namespace shardtrain::cpu
