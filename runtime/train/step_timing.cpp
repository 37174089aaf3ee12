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
  peer_wait_s += comm.peer_wait_s;
  exposed_s += comm.exposed_s;
  peer_blocked_s += comm.blocked_peers_s;
  comm_bytes += comm.bytes;
}

std::string summarize_timing(const StepTiming& t, int64_t global_batch, comm::Communicator* comm,
                             nlohmann::json& result) {
  const double n = double(std::max<int64_t>(1, t.steps));
  // Per step means of this rank, in this order:
  enum { kStep, kData, kCompute, kComm, kExposed, kPeerWait, kPeerBlocked, kBytes, kFields };
  const std::vector<double> mine = {t.step_s / n,      t.data_s / n,          t.compute_s() / n,
                                    t.comm_s / n,      t.exposed_s / n,       t.peer_wait_s / n,
                                    t.peer_blocked_s / n, double(t.comm_bytes) / n};
  const std::vector<std::vector<double>> ranks =
      comm ? gather_from_ranks(*comm, mine) : std::vector<std::vector<double>>{mine};
  const int world = int(ranks.size());

  auto record = [&](const std::vector<double>& v) {
    return nlohmann::json{{"step_s", v[kStep]},
                          {"data_s", v[kData]},
                          {"compute_s", v[kCompute]},
                          {"comm_s", v[kComm]},
                          {"comm_exposed_s", v[kExposed]},
                          {"comm_exposed_frac", v[kComm] > 0 ? v[kExposed] / v[kComm] : 0.0},
                          {"peer_wait_s", v[kPeerWait]},
                          {"blocked_on_peers_s", v[kPeerBlocked]},
                          {"comm_bytes", v[kBytes]},
                          {"samples_per_s_per_rank", double(global_batch) / world / v[kStep]}};
  };
  nlohmann::json per_rank = nlohmann::json::array();
  for (int r = 0; r < world; ++r) {
    nlohmann::json j = record(ranks[size_t(r)]);
    j["rank"] = r;
    per_rank.push_back(j);
  }
  result["timing"] = record(ranks[0]);
  result["timing"]["steps"] = t.steps;
  result["per_rank"] = per_rank;

  const auto& r0 = ranks[0];
  std::string text = fmt::format(
      "[summary] per step, mean of {} steps: {:.2f} ms = data {:.2f} + compute {:.2f} + exposed "
      "communication {:.2f} + waiting for other ranks {:.2f} ms",
      t.steps, 1e3 * r0[kStep], 1e3 * r0[kData], 1e3 * r0[kCompute], 1e3 * r0[kExposed],
      1e3 * r0[kPeerBlocked]);
  if (r0[kComm] > 0)
    text += fmt::format("; communication {:.2f} ms per step ({:.2f} MiB), {:.1f}% of it exposed",
                        1e3 * r0[kComm], r0[kBytes] / (1 << 20), 100 * r0[kExposed] / r0[kComm]);
  if (world > 1) {
    for (int r = 0; r < world; ++r) {
      const auto& v = ranks[size_t(r)];
      text += fmt::format(
          "\n[summary]   rank {}: step {:.2f} ms, data {:.2f}, compute {:.2f}, communication "
          "{:.2f} ({:.2f} exposed), blocked on other ranks {:.2f}",
          r, 1e3 * v[kStep], 1e3 * v[kData], 1e3 * v[kCompute], 1e3 * v[kComm], 1e3 * v[kExposed],
          1e3 * v[kPeerBlocked]);
    }
  }
  return text;
}

}  // namespace shardtrain::train
