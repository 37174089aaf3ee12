// Language-model batches (model.kind = "gpt"): a text sample is a window of
// T+1 byte token ids (docs/formats.md, "Text (language-model) data"). The
// model reads the first T tokens and predicts the next one at every position.
#pragma once

#include <cstdint>

namespace shardtrain::train {

// windows: n samples of T+1 bytes, row-major. Writes the inputs x[n, T]
// (tokens 0..T-1 of each window, as int32 ids) and the n*T next-token labels
// (tokens 1..T of each window): labels[i*T + t] = windows[i*(T+1) + t + 1].
// No normalization: the bytes are ids.
void lm_batch_from_windows(const uint8_t* windows, int64_t n, int64_t T, int32_t* x, int32_t* labels);

}  // namespace shardtrain::train
