// A sample's bytes as the model sees them: f32, normalized with the data
// set's mean and std (u8 samples are first scaled to [0, 1]). Shared by the
// in-memory data set and the streaming loader, so both feed identical input.
#pragma once

#include "io/dataset.h"

#include <cstdint>

namespace shardtrain::io {

void normalize_sample(const DatasetInfo& info, const uint8_t* raw, float* out);
// `numel` consecutive values of a sample (from any value's first byte on):
// a sample read in pieces.
void normalize_values(const DatasetInfo& info, const uint8_t* raw, int64_t numel, float* out);

}  // namespace shardtrain::io
