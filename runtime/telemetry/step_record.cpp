// Step records to and from JSON (the keys of docs/telemetry.md), and the
// nccl-tests bus-bandwidth factors.
#include "runtime/telemetry/step_record.h"

#include "runtime/core/error.h"

#include <nlohmann/json.hpp>

namespace shardtrain::telemetry {
namespace {

using nlohmann::json;

// j[key] as T, or `fallback` when the key is absent (records written by an
// older version); a value of the wrong type is an error naming the key.
template <typename T>
T get(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception& e) {
    throw Error(fmt::format("step record: key '{}': {}", key, e.what()));
  }
}

json collective_json(const CollectiveRecord& c) {
  return {{"op", c.op},
          {"algorithm", c.algorithm},
          {"seq", c.seq},
          {"bytes", c.bytes},
          {"duration_s", c.duration_s},
          {"peer_wait_s", c.peer_wait_s},
          {"busbw_gbs", c.busbw_gbs}};
}

CollectiveRecord collective_from_json(const json& j) {
  CollectiveRecord c;
  c.op = get<std::string>(j, "op", "");
  c.algorithm = get<std::string>(j, "algorithm", "");
  c.seq = get<int64_t>(j, "seq", 0);
  c.bytes = get<int64_t>(j, "bytes", 0);
  c.duration_s = get<double>(j, "duration_s", 0);
  c.peer_wait_s = get<double>(j, "peer_wait_s", 0);
  c.busbw_gbs = get<double>(j, "busbw_gbs", 0);
  return c;
}

}  // namespace

json to_json(const StepRecord& r) {
  json collectives = json::array();
  for (const auto& c : r.collectives) collectives.push_back(collective_json(c));
  // compute_s is derived, written so that readers (report, jq) need not know the rule.
  json j = {{"rank", r.rank},
            {"step", r.step},
            {"epoch", r.epoch},
            {"t_start_s", r.t_start_s},
            {"step_s", r.step_s},
            {"data_wait_s", r.data_wait_s},
            {"h2d_s", r.h2d_s},
            {"comm_exposed_s", r.comm_exposed_s},
            {"blocked_on_peers_s", r.blocked_on_peers_s},
            {"compute_s", r.compute_s()},
            {"debug_delay_s", r.debug_delay_s},
            {"forward_s", r.forward_s},
            {"backward_s", r.backward_s},
            {"optimizer_s", r.optimizer_s},
            {"comm_s", r.comm_s},
            {"comm_bytes", r.comm_bytes},
            {"comm_wire_bytes", r.comm_wire_bytes},
            {"collectives", std::move(collectives)},
            {"eval_s", r.eval_s},
            {"checkpoint_s", r.checkpoint_s},
            {"io_bytes", r.io_bytes},
            {"io_requests", r.io_requests},
            {"io_read_s", r.io_read_s},
            {"io_queued", r.io_queued},
            {"stage_bytes", r.stage_bytes},
            {"mem_cpu_current_bytes", r.mem_cpu_current_bytes},
            {"mem_cpu_peak_bytes", r.mem_cpu_peak_bytes},
            {"mem_gpu_current_bytes", r.mem_gpu_current_bytes},
            {"mem_gpu_peak_bytes", r.mem_gpu_peak_bytes},
            {"cpu_train_thread_s", r.cpu_train_thread_s},
            {"cpu_process_s", r.cpu_process_s},
            {"samples", r.samples}};
  if (!r.ops.empty()) {
    json ops = json::object();
    for (const OpTime& o : r.ops) ops[o.op] = {{"s", o.s}, {"calls", o.calls}};
    j["ops"] = std::move(ops);
  }
  return j;
}

StepRecord step_record_from_json(const json& j) {
  ST_CHECK(j.is_object(), "step record: expected a JSON object, got {}", j.type_name());
  StepRecord r;
  r.rank = get<int>(j, "rank", 0);
  r.step = get<int64_t>(j, "step", 0);
  r.epoch = get<double>(j, "epoch", 0);
  r.t_start_s = get<double>(j, "t_start_s", 0);
  r.step_s = get<double>(j, "step_s", 0);
  r.data_wait_s = get<double>(j, "data_wait_s", 0);
  r.h2d_s = get<double>(j, "h2d_s", 0);
  r.comm_exposed_s = get<double>(j, "comm_exposed_s", 0);
  r.blocked_on_peers_s = get<double>(j, "blocked_on_peers_s", 0);
  r.debug_delay_s = get<double>(j, "debug_delay_s", 0);
  r.forward_s = get<double>(j, "forward_s", 0);
  r.backward_s = get<double>(j, "backward_s", 0);
  r.optimizer_s = get<double>(j, "optimizer_s", 0);
  r.comm_s = get<double>(j, "comm_s", 0);
  r.comm_bytes = get<int64_t>(j, "comm_bytes", 0);
  r.comm_wire_bytes = get<int64_t>(j, "comm_wire_bytes", 0);
  if (auto it = j.find("collectives"); it != j.end() && !it->is_null()) {
    ST_CHECK(it->is_array(), "step record: key 'collectives': expected an array");
    for (const auto& c : *it) r.collectives.push_back(collective_from_json(c));
  }
  r.eval_s = get<double>(j, "eval_s", 0);
  r.checkpoint_s = get<double>(j, "checkpoint_s", 0);
  r.io_bytes = get<int64_t>(j, "io_bytes", 0);
  r.io_requests = get<int64_t>(j, "io_requests", 0);
  r.io_read_s = get<double>(j, "io_read_s", 0);
  r.io_queued = get<int64_t>(j, "io_queued", -1);
  r.stage_bytes = get<int64_t>(j, "stage_bytes", 0);
  r.mem_cpu_current_bytes = get<int64_t>(j, "mem_cpu_current_bytes", 0);
  r.mem_cpu_peak_bytes = get<int64_t>(j, "mem_cpu_peak_bytes", 0);
  r.mem_gpu_current_bytes = get<int64_t>(j, "mem_gpu_current_bytes", 0);
  r.mem_gpu_peak_bytes = get<int64_t>(j, "mem_gpu_peak_bytes", 0);
  r.cpu_train_thread_s = get<double>(j, "cpu_train_thread_s", 0);
  r.cpu_process_s = get<double>(j, "cpu_process_s", 0);
  r.samples = get<int64_t>(j, "samples", 0);
  if (auto it = j.find("ops"); it != j.end() && !it->is_null()) {
    ST_CHECK(it->is_object(), "step record: key 'ops': expected an object");
    for (const auto& [op, t] : it->items()) r.ops.push_back({op, get<double>(t, "s", 0), get<int64_t>(t, "calls", 0)});
  }
  return r;  // compute_s is derived from the components, not read
}

// As nccl-tests define bus bandwidth: the factor that turns algorithm
// bandwidth (bytes / time) into the bandwidth each link must sustain, so
// figures compare across operations and rank counts.
double busbw_factor(const std::string& op, int ranks) {
  ST_CHECK(ranks >= 1, "busbw_factor: {} ranks", ranks);
  const double n = ranks;
  if (op == "allreduce") return 2 * (n - 1) / n;
  if (op == "reduce_scatter" || op == "allgather" || op == "alltoall") return (n - 1) / n;
  if (op == "broadcast" || op == "reduce" || op == "sendrecv") return 1;
  if (op == "barrier") return 0;
  throw Error(fmt::format("busbw_factor: unknown collective '{}'", op));
}

}  // namespace shardtrain::telemetry
