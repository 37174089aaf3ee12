// DDP's options ([parallel.ddp]): gradient buckets and the dtype gradients
// travel in. ZeRO-1 reduces its gradients with the same buckets.
#pragma once

#include "runtime/core/dtype.h"

#include <cstdint>

namespace shardtrain::parallel {

struct DdpOptions {
  double bucket_mb = 25.0;
  double first_bucket_mb = 1.0;
  DType grad_dtype = DType::f32;  // f32 | bf16: the dtype gradients travel in
  int64_t bucket_batch = 1;       // consecutive buckets issued as one group (1: each at once)
};

// An Error naming the parallel.ddp key that is out of range.
void validate(const DdpOptions& options);

}  // namespace shardtrain::parallel
