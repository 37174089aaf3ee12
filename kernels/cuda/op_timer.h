// The GPU side of telemetry.op_timing (runtime/core/op_timing.h): each timed
// op's kernels between two events on the compute stream. init_device
// registers it.
#pragma once

#include "runtime/core/op_timing.h"

namespace shardtrain::cuda {

DeviceOpTimer& device_op_timer();

}  // namespace shardtrain::cuda
