// The shape rules of reduce_scatter and all-gather (communicator.h), checked
// the same way by every backend before anything is issued: equal dtypes, the
// size() : 1 element ratio, and no overlap between input and output except
// this rank's own chunk (in place).
#pragma once

#include "runtime/core/tensor.h"

#include <string>

namespace shardtrain::comm {

// Whether two tensors share any byte.
bool overlap(const Tensor& a, const Tensor& b);

// Errors name the communicator `comm`.
void check_reduce_scatter_args(const std::string& comm, const Tensor& in, const Tensor& out, int rank, int size);
void check_allgather_args(const std::string& comm, const Tensor& in, const Tensor& out, int rank, int size);

}  // namespace shardtrain::comm
