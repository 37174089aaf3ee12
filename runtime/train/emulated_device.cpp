#include "runtime/train/emulated_device.h"

#include "runtime/core/clock.h"
#include "runtime/core/compute_clock.h"
#include "runtime/core/error.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

namespace shardtrain::train {
namespace {

namespace fs = std::filesystem;

// Warm-up: the first steps allocate and fill caches; they are not the accelerator's pace.
constexpr int64_t kWarmupSteps = 2;

void rank_profile(const fs::path& file, std::vector<double>& per_sample) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json r = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (r.is_discarded() || !r.contains("step") || !r.contains("compute_s") || !r.contains("samples"))
      continue;  // a record cut short by the end of its job
    const auto samples = r["samples"].get<int64_t>();
    if (r["step"].get<int64_t>() < kWarmupSteps || samples <= 0) continue;
    per_sample.push_back(r["compute_s"].get<double>() / double(samples));
  }
}

}  // namespace

void validate(const EmulateOptions& o) {
  ST_CHECK(o.sample_ms >= 0, "runtime.emulate.sample_ms must not be negative, got {}", o.sample_ms);
  ST_CHECK(o.scale > 0, "runtime.emulate.scale must be positive, got {}", o.scale);
  ST_CHECK(!(o.sample_ms > 0 && !o.profile.empty()),
           "runtime.emulate: give either sample_ms or profile, not both (sample_ms = {}, profile = \"{}\")",
           o.sample_ms, o.profile);
}

double profile_sample_seconds(const std::string& run_dir, int64_t* steps) {
  const fs::path dir = fs::path(run_dir) / "telemetry";
  std::vector<double> per_sample;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("rank-") && name.ends_with(".jsonl")) rank_profile(e.path(), per_sample);
  }
  ST_CHECK(!ec, "runtime.emulate.profile: cannot read {}: {}", dir.string(), ec.message());
  ST_CHECK(!per_sample.empty(),
           "runtime.emulate.profile: {} holds no step record after the first {} steps (a run directory of "
           "`shardtrain train` with telemetry.enabled, run for more steps)",
           dir.string(), kWarmupSteps);
  const auto mid = per_sample.begin() + std::ptrdiff_t(per_sample.size() / 2);
  std::nth_element(per_sample.begin(), mid, per_sample.end());
  if (steps) *steps = int64_t(per_sample.size());
  return *mid;
}

EmulatedDevice::EmulatedDevice(const EmulateOptions& o) {
  validate(o);
  if (o.sample_ms > 0) {
    sample_s_ = o.sample_ms * 1e-3;
    source_ = fmt::format("{:.4g} ms per sample (runtime.emulate.sample_ms)", o.sample_ms);
    return;
  }
  ST_CHECK(!o.profile.empty(),
           "runtime.device = \"emulated\" needs the accelerator's time: runtime.emulate.sample_ms, or "
           "runtime.emulate.profile (a run directory whose measured compute it takes)");
  int64_t steps = 0;
  const double measured = profile_sample_seconds(o.profile, &steps);
  sample_s_ = measured * o.scale;
  source_ = fmt::format("{:.4g} ms per sample: the median compute of {} steps in {}{}", sample_s_ * 1e3, steps,
                        o.profile, o.scale == 1.0 ? std::string() : fmt::format(" x {:g}", o.scale));
}

double EmulatedDevice::compute(int64_t samples) const {
  const double start = now_seconds();
  sleep_until(start + sample_s_ * double(samples));
  return now_seconds() - start;
}

}  // namespace shardtrain::train
