#include "io/normalize.h"

#include "kernels/cpu/elementwise.h"

#include <cstring>

namespace shardtrain::io {

void normalize_sample(const DatasetInfo& info, const uint8_t* raw, float* out) {
  const int64_t numel = info.sample_numel();
  if (info.dtype == SampleDType::u8) {
    cpu::u8_to_f32_normalized(out, raw, numel, info.normalize_mean, info.normalize_std);
    return;
  }
  // memcpy, not a float* cast of the byte buffer: no aliasing questions.
  std::memcpy(out, raw, size_t(numel) * sizeof(float));
  const float mean = info.normalize_mean, inv_std = 1.0f / info.normalize_std;
  for (int64_t j = 0; j < numel; ++j) out[j] = (out[j] - mean) * inv_std;
}

}  // namespace shardtrain::io
