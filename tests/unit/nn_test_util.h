// Helpers shared by the nn_*_test.cpp files: deterministic random values and
// token windows.
#pragma once

#include "runtime/core/rng.h"
#include "runtime/core/tensor.h"

#include <cstdint>

namespace shardtrain::nn_test {

inline void fill_uniform(const Tensor& t, uint64_t seed, float lo, float hi) {
  Rng r(seed);
  for (float& v : t.f32_span()) v = r.uniform(lo, hi);
}

// [batch, T] i32 token ids in [0, vocab).
inline Tensor random_tokens(int64_t batch, int64_t T, int64_t vocab, uint64_t seed) {
  Tensor x = Tensor::empty({batch, T}, DType::i32);
  Rng r(seed);
  for (int64_t i = 0; i < x.numel(); ++i) x.i32()[i] = int32_t(r.below(uint64_t(vocab)));
  return x;
}

}  // namespace shardtrain::nn_test
