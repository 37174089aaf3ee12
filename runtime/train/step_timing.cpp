#include "runtime/train/step_timing.h"

#include "runtime/train/session.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace shardtrain::train {

void StepTiming::add(double step, double data, const parallel::CommStats& comm) {
  ++steps;
  step_s += step;
  data_s += data;
  comm_s += comm.comm_s;
  exposed_s += comm.exposed_s;
  comm_bytes += comm.bytes;
}

std::string summarize_timing(const StepTiming& t, int64_t global_batch, comm::Communicator* comm,
                             nlohmann::json& result) {
  const double n = double(std::max<int64_t>(1, t.steps));
  // Per step means of this rank: step, data, compute, comm, exposed, bytes.
  const std::vector<double> mine = {t.step_s / n, t.data_s / n, t.compute_s() / n,
                                    t.comm_s / n, t.exposed_s / n, double(t.comm_bytes) / n};
  const std::vector<std::vector<double>> ranks =
      comm ? gather_from_ranks(*comm, mine) : std::vector<std::vector<double>>{mine};
  const int world = int(ranks.size());

  nlohmann::json per_rank = nlohmann::json::array();
  for (int r = 0; r < world; ++r) {
    const auto& v = ranks[size_t(r)];
    per_rank.push_back({{"rank", r},
                        {"step_s", v[0]},
                        {"data_s", v[1]},
                        {"compute_s", v[2]},
                        {"comm_s", v[3]},
                        {"comm_exposed_s", v[4]},
                        {"comm_exposed_frac", v[3] > 0 ? v[4] / v[3] : 0.0},
                        {"samples_per_s_per_rank", double(global_batch) / world / v[0]}});
  }
  const auto& r0 = ranks[0];
  result["timing"] = {{"steps", t.steps},
                      {"step_s", r0[0]},
                      {"data_s", r0[1]},
                      {"compute_s", r0[2]},
                      {"comm_s", r0[3]},
                      {"comm_exposed_s", r0[4]},
                      {"comm_exposed_frac", r0[3] > 0 ? r0[4] / r0[3] : 0.0},
                      {"comm_bytes_per_step", r0[5]}};
  result["per_rank"] = per_rank;

  std::string text = fmt::format(
      "[summary] per step, mean of {} steps: {:.2f} ms = data {:.2f} + compute {:.2f} + exposed "
      "communication {:.2f} ms",
      t.steps, 1e3 * r0[0], 1e3 * r0[1], 1e3 * r0[2], 1e3 * r0[4]);
  if (r0[3] > 0)
    text += fmt::format("; communication {:.2f} ms per step ({:.1f} MiB), {:.1f}% of it exposed",
                        1e3 * r0[3], r0[5] / (1 << 20), 100 * r0[4] / r0[3]);
  if (world > 1) {
    for (int r = 0; r < world; ++r) {
      const auto& v = ranks[size_t(r)];
      text += fmt::format("\n[summary]   rank {}: step {:.2f} ms, data {:.2f}, compute {:.2f}, "
                          "communication {:.2f} ({:.2f} exposed)",
                          r, 1e3 * v[0], 1e3 * v[1], 1e3 * v[2], 1e3 * v[3], 1e3 * v[4]);
    }
  }
  return text;
}

}  // namespace shardtrain::train
