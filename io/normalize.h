// A sample's bytes as the model sees them: f32, normalized with the data
// set's mean and std (u8 samples are first scaled to [0, 1]). Shared by the
// in-memory data set and the streaming loader, so both feed identical input.
#pragma once

#include "io/dataset.h"

#include <cstdint>

namespace shardtrain::io {

void normalize_sample(const DatasetInfo& info, const uint8_t* raw, float* out);

}  // namespace shardtrain::io
