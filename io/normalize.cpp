#include "io/normalize.h"

#include "kernels/cpu/elementwise.h"

#include <cstring>

namespace shardtrain::io {

namespace {

// (x - mean) / std over values of type T as stored: token ids (uint16,
// int32) and float32 are not rescaled, only uint8 pixels are.
template <typename T>
void standardize(const uint8_t* raw, int64_t numel, float mean, float std, float* out) {
  const float inv_std = 1.0f / std;
  for (int64_t j = 0; j < numel; ++j) {
    T v;
    // memcpy, not a T* cast of the byte buffer: no aliasing or alignment questions.
    std::memcpy(&v, raw + size_t(j) * sizeof(T), sizeof(T));
    out[j] = (float(v) - mean) * inv_std;
  }
}

}  // namespace

void normalize_sample(const DatasetInfo& info, const uint8_t* raw, float* out) {
  normalize_values(info, raw, info.sample_numel(), out);
}

void normalize_values(const DatasetInfo& info, const uint8_t* raw, int64_t numel, float* out) {
  const float mean = info.normalize_mean, std = info.normalize_std;
  switch (info.dtype) {
    case SampleDType::u8: cpu::u8_to_f32_normalized(out, raw, numel, mean, std); return;
    case SampleDType::u16: standardize<uint16_t>(raw, numel, mean, std, out); return;
    case SampleDType::i32: standardize<int32_t>(raw, numel, mean, std, out); return;
    case SampleDType::f32: standardize<float>(raw, numel, mean, std, out); return;
  }
}

}  // namespace shardtrain::io
