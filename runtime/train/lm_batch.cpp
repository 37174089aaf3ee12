#include "runtime/train/lm_batch.h"

namespace shardtrain::train {

void lm_batch_from_windows(const uint8_t* windows, int64_t n, int64_t T, int32_t* x, int32_t* labels) {
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* w = windows + i * (T + 1);
    for (int64_t t = 0; t < T; ++t) {
      x[i * T + t] = int32_t(w[t]);
      labels[i * T + t] = int32_t(w[t + 1]);
    }
  }
}

}  // namespace shardtrain::train
