// Where a rank's steps went, by class of op (telemetry.op_timing): the mean
// per step of each class's time, next to the step's other parts (data wait,
// input copy, exposed communication, blocked on peers) and the remainder,
// "other": host work outside the ops (framework, launches) and, on a GPU,
// the device's idle gaps. result.json's "op_timing", a table in the summary,
// and `shardtrain report`'s bar.
#pragma once

#include "runtime/telemetry/step_record.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace shardtrain::telemetry {

// Means over the records that carry op times, the first step left out when
// there are others (it pays for one-time set-up: library handles, the
// allocator's first blocks, event creation). {} when no record has op times.
// "rows": [{"name", "part": "op" | "step", "s", "calls", "frac"}], ops by
// time, then the step's parts; "frac" is of the mean step.
nlohmann::json op_breakdown(const std::vector<StepRecord>& records);
// The table for the summary text ("" for an empty breakdown).
std::string op_breakdown_text(const nlohmann::json& breakdown, int rank);

}  // namespace shardtrain::telemetry
