// Language-model batches (model.kind = "gpt"): a text sample is a window of
// T+1 token ids (docs/formats.md, "Text (language-model) data"), stored as
// uint8 (bytes: prep text), uint16 or int32 (a vocabulary beyond 256: prep
// tokens). The model reads the first T tokens and predicts the next one at
// every position.
#pragma once

#include "io/dataset.h"

#include <cstdint>

namespace shardtrain::train {

// windows: n samples of T+1 ids of windows.dtype (an integer dtype),
// row-major. Writes the inputs x[n, T] (tokens 0..T-1 of each window, as
// int32 ids) and the n*T next-token labels (tokens 1..T of each window):
// labels[i*T + t] = windows[i*(T+1) + t + 1]. No normalization: the values
// are ids, the same int32s whatever width they were stored at (range checks
// come later, against the vocabulary: ops::check_labels, the embedding).
void lm_batch_from_windows(io::RawSamples windows, int64_t n, int64_t T, int32_t* x, int32_t* labels);

}  // namespace shardtrain::train
