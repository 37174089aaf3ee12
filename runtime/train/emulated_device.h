// An emulated accelerator (runtime.device = "emulated"), as MLPerf Storage's
// DLIO emulates one: the real input pipeline runs (the loader, its reads,
// checksums and conversion, the sampler, the batch sizes), and the model's
// compute is replaced by a wait of the time a given accelerator takes for the
// rank's share of each batch. Its AU, data wait and read rate are then what
// that storage would give that accelerator (docs/io.md, "Storage study").
#pragma once

#include "runtime/core/enum_names.h"

#include <cstdint>
#include <string>

namespace shardtrain::train {

// runtime.emulate.compute: "real" trains; "profile" makes each Block's
// forward and backward, the optimizer and the loss waits of a per-Block
// profile's times (compute_profile.h) while the strategy communicates for
// real (runtime.device = "cpu").
enum class EmulatedCompute { real, profile };
inline std::span<const EnumName<EmulatedCompute>> enum_names(EmulatedCompute) {
  static constexpr std::array<EnumName<EmulatedCompute>, 2> n = {
      {{EmulatedCompute::real, "real"}, {EmulatedCompute::profile, "profile"}}};
  return n;
}

// runtime.emulate.input (runtime.device = "emulated", a streamed split):
// what the loader hands the accelerator. "floats": each sample checked and
// converted to normalized floats on the host, as shardtrain feeds a CPU or
// GPU step; "bytes": checked and handed as stored, as a pipeline that
// converts on the accelerator would (and as DLIO reads): a quarter of the
// host memory and no conversion on the host's cores.
enum class EmulatedInput { floats, bytes };
inline std::span<const EnumName<EmulatedInput>> enum_names(EmulatedInput) {
  static constexpr std::array<EnumName<EmulatedInput>, 2> n = {
      {{EmulatedInput::floats, "floats"}, {EmulatedInput::bytes, "bytes"}}};
  return n;
}

struct EmulateOptions {
  EmulatedCompute compute = EmulatedCompute::real;
  EmulatedInput input = EmulatedInput::floats;
  double sample_ms = 0;  // compute per sample, ms (0: from `profile`)
  std::string profile;   // a run directory: its measured compute per sample; compute = profile: a profile file
  double scale = 1.0;    // multiplies the profile's time (0.5: an accelerator twice as fast)
};

// The limits of the options (the config calls it).
void validate(const EmulateOptions& o);

class EmulatedDevice {
 public:
  // From the options: the given time, or the profile's (reads the run
  // directory's step records; an Error naming the directory when it has none).
  explicit EmulatedDevice(const EmulateOptions& o);

  // Waits the compute time of `samples` samples, to an absolute deadline (a
  // late wake-up is not added to the next step); returns the seconds waited.
  double compute(int64_t samples) const;

  double sample_seconds() const { return sample_s_; }
  const std::string& source() const { return source_; }  // where the time came from, for the logs

 private:
  double sample_s_ = 0;
  std::string source_;
};

// The median over a run's steps of compute_s / samples, from its
// telemetry/rank-*.jsonl (each rank's first two steps, warm-up, left out);
// `steps` receives how many records it used.
double profile_sample_seconds(const std::string& run_dir, int64_t* steps = nullptr);

}  // namespace shardtrain::train
