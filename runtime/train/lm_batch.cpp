#include "runtime/train/lm_batch.h"

#include "runtime/core/error.h"

#include <cstring>

namespace shardtrain::train {
namespace {

// Token k of the buffer: memcpy, not an Id* cast of the byte buffer (no
// aliasing or alignment questions; it compiles to a plain load).
template <typename Id>
int32_t id_at(const uint8_t* bytes, int64_t k) {
  Id v;
  std::memcpy(&v, bytes + size_t(k) * sizeof(Id), sizeof(Id));
  return int32_t(v);
}

template <typename Id>
void split_windows(const uint8_t* bytes, int64_t n, int64_t T, int32_t* x, int32_t* labels) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t w = i * (T + 1);
    for (int64_t t = 0; t < T; ++t) {
      x[i * T + t] = id_at<Id>(bytes, w + t);
      labels[i * T + t] = id_at<Id>(bytes, w + t + 1);
    }
  }
}

}  // namespace

void lm_batch_from_windows(io::RawSamples windows, int64_t n, int64_t T, int32_t* x, int32_t* labels) {
  switch (windows.dtype) {
    case io::SampleDType::u8: return split_windows<uint8_t>(windows.bytes, n, T, x, labels);
    case io::SampleDType::u16: return split_windows<uint16_t>(windows.bytes, n, T, x, labels);
    case io::SampleDType::i32: return split_windows<int32_t>(windows.bytes, n, T, x, labels);
    case io::SampleDType::f32: break;
  }
  throw Error("language-model windows must hold integer token ids (uint8, uint16 or int32), not float32");
}

}  // namespace shardtrain::train
