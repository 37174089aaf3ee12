#include "runtime/train/run_telemetry.h"

#include "runtime/core/allocator.h"
#include "runtime/core/clock.h"
#include "runtime/core/error.h"
#include "runtime/core/op_timing.h"
#include "runtime/telemetry/op_breakdown.h"
#include "runtime/telemetry/recorder.h"
#include "runtime/telemetry/summary.h"

#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <filesystem>

namespace shardtrain::train {
namespace fs = std::filesystem;

namespace {

double cpu_seconds(int who) {
  rusage u{};
  getrusage(who, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

std::string rank_file(const std::string& dir, const char* stem, int rank, const char* ext) {
  return (fs::path(dir) / "telemetry" / fmt::format("{}-{:05}.{}", stem, rank, ext)).string();
}

}  // namespace

std::vector<std::string> set_aside_earlier_telemetry(const std::string& run_dir, int rank, const std::string& tag) {
  std::vector<std::string> paths = {rank_file(run_dir, "rank", rank, "jsonl"),
                                    rank_file(run_dir, "trace-rank", rank, "json")};
  if (rank == 0) paths.push_back((fs::path(run_dir) / "mllog.txt").string());
  std::vector<std::string> moved;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!fs::exists(p, ec)) continue;
    const std::string to = fmt::format("{}.before-{}", p, tag);
    fs::rename(p, to, ec);
    ST_CHECK(!ec, "{}: cannot set the earlier run's file aside as {}: {}", p, to, ec.message());
    moved.push_back(to);
  }
  return moved;
}

RunTelemetry::RunTelemetry(const Config& config, const std::string& run_dir, int rank, int world,
                           comm::Communicator* comm, double run_start)
    : config_(config),
      dir_(run_dir),
      rank_(rank),
      world_(world),
      comm_(comm),
      run_start_(run_start),
      files_(config.telemetry.enabled) {
  set_op_timing(config.telemetry.op_timing);
  if (!files_) return;
  std::error_code ec;
  fs::create_directories(fs::path(dir_) / "telemetry", ec);
  ST_CHECK(!ec, "{}/telemetry: cannot create: {}", dir_, ec.message());
  const std::string path = rank_file(dir_, "rank", rank, "jsonl");
  jsonl_ = OptionalFile(path, "w");
  if (config.telemetry.trace)
    trace_ = std::make_unique<telemetry::TraceWriter>(rank_file(dir_, "trace-rank", rank, "json"), rank, run_start);
}

RunTelemetry::~RunTelemetry() = default;

void RunTelemetry::begin_step(int64_t step, double epoch) {
  const double t0 = now_seconds();
  if (pending_) write_record();
  if (config_.telemetry.op_timing) take_op_times();  // not this step's: evaluation's, set-up's
  current_ = {};
  current_.rank = rank_;
  current_.step = step;
  current_.epoch = epoch;
  t_step_ = now_seconds();
  current_.t_start_s = t_step_ - run_start_;
  cpu_thread_ = cpu_seconds(RUSAGE_THREAD);
  cpu_process_ = cpu_seconds(RUSAGE_SELF);
  reset_peak_memory(Device::cpu());
  if (!device_.is_cpu()) reset_peak_memory(device_);  // the step's own GPU peak, as for the host
  own_s_ += now_seconds() - t0;
}

void RunTelemetry::data_ready(int64_t samples) {
  current_.data_wait_s = now_seconds() - t_step_;
  current_.samples = samples;
}

void RunTelemetry::io_done(int64_t bytes, int64_t requests, double read_s, int64_t queued, int64_t stage_bytes) {
  current_.io_bytes = bytes;
  current_.io_requests = requests;
  current_.io_read_s = read_s;
  current_.io_queued = queued;
  current_.stage_bytes = stage_bytes;
}

void RunTelemetry::end_step(const StepPhases& phases, const parallel::CommStats& comm, double debug_delay_s) {
  // Before the step's end is taken: on a GPU this waits for the step's last
  // kernels, so the step's time holds all of its device work.
  if (config_.telemetry.op_timing) take_ops();
  const double t0 = now_seconds();
  current_.step_s = t0 - t_step_;
  step_s_total_ += current_.step_s;
  current_.forward_s = phases.forward_s;
  current_.backward_s = phases.backward_s;
  current_.optimizer_s = phases.optimizer_s;
  current_.h2d_s = phases.h2d_s;
  current_.comm_s = comm.comm_s;
  current_.comm_exposed_s = comm.exposed_s;
  current_.blocked_on_peers_s = comm.blocked_peers_s;
  current_.comm_bytes = comm.bytes;
  current_.comm_wire_bytes = comm.wire_bytes;
  current_.collectives = comm.records;
  current_.debug_delay_s = debug_delay_s;
  const MemoryStats mem = memory_stats(Device::cpu());
  current_.mem_cpu_current_bytes = mem.current_bytes;
  current_.mem_cpu_peak_bytes = mem.peak_bytes;
  if (!device_.is_cpu()) {
    const MemoryStats gpu = memory_stats(device_);
    current_.mem_gpu_current_bytes = gpu.current_bytes;
    current_.mem_gpu_peak_bytes = gpu.peak_bytes;
  }
  current_.cpu_train_thread_s = cpu_seconds(RUSAGE_THREAD) - cpu_thread_;
  current_.cpu_process_s = cpu_seconds(RUSAGE_SELF) - cpu_process_;
  pending_ = true;
  own_s_ += now_seconds() - t0;
}

void RunTelemetry::take_ops() {
  const OpTimes t = take_op_times();
  for (size_t i = 0; i < kOpClasses; ++i)
    if (t.calls[i] > 0) current_.ops.push_back({op_class_name(OpClass(i)), t.seconds[i], t.calls[i]});
}

void RunTelemetry::add_eval(double seconds) { current_.eval_s += seconds; }

void RunTelemetry::add_checkpoint(double seconds) { current_.checkpoint_s += seconds; }

void RunTelemetry::write_record() {
  pending_ = false;
  records_.push_back(std::move(current_));
  if (records_.size() - written_ >= kWriteEvery) write_files();
}

void RunTelemetry::write_files() {
  if (files_) {
    std::string lines;
    for (size_t i = written_; i < records_.size(); ++i) lines += telemetry::to_json(records_[i]).dump() + "\n";
    jsonl_.write(lines);
    if (trace_) trace_->write(telemetry::Recorder::instance().drain());
  }
  // Kept for the summary: the figures, not the list of collectives.
  for (size_t i = written_; i < records_.size(); ++i) records_[i].collectives = {};
  written_ = records_.size();
}

void RunTelemetry::flush() {
  const double t0 = now_seconds();
  if (pending_) write_record();
  write_files();
  own_s_ += now_seconds() - t0;
}

std::string RunTelemetry::finish(nlohmann::json& result) {
  flush();
  const telemetry::RankStats mine = telemetry::rank_stats(rank_, records_);

  // Means per step of this rank (result.json's "timing").
  const double n = double(std::max<size_t>(1, records_.size()));
  double data = 0, compute = 0, comm = 0, exposed = 0, peers = 0, bytes = 0, wire = 0;
  for (const auto& r : records_) {
    data += r.data_wait_s;
    compute += r.compute_s();
    comm += r.comm_s;
    exposed += r.comm_exposed_s;
    peers += r.blocked_on_peers_s;
    bytes += double(r.comm_bytes);
    wire += double(r.comm_wire_bytes);
  }
  result["timing"] = {{"steps", int64_t(records_.size())},
                      {"step_s", step_s_total_ / n},
                      {"data_s", data / n},
                      {"compute_s", compute / n},
                      {"comm_s", comm / n},
                      {"comm_exposed_s", exposed / n},
                      // Of the communication, not of the step (summary.json's
                      // comm_exposed_frac is of the step): named apart.
                      {"comm_exposed_of_comm", comm > 0 ? exposed / comm : 0.0},
                      {"blocked_on_peers_s", peers / n},
                      {"comm_bytes", bytes / n},
                      {"comm_wire_bytes", wire / n}};

  // Every rank's stats to every rank (one gather), the summary on rank 0.
  std::vector<telemetry::RankStats> all;
  if (comm_) {
    for (const auto& v : gather_from_ranks(*comm_, mine.pack())) all.push_back(telemetry::RankStats::unpack(v));
  } else {
    all.push_back(mine);
  }
  telemetry::SummaryOptions options;
  options.straggler_threshold = config_.telemetry.straggler_threshold;
  options.global_batch = config_.train.global_batch_size;
  nlohmann::json summary = telemetry::summarize(all, options);
  result["per_rank"] = summary["per_rank"];
  std::string text = telemetry::summary_text(summary);
  if (config_.telemetry.op_timing) {
    result["op_timing"] = telemetry::op_breakdown(records_);
    result["op_timing"]["rank"] = rank_;
    const std::string table = telemetry::op_breakdown_text(result["op_timing"], rank_);
    if (!table.empty()) text += "\n" + table;
  }
  if (!fabric_.is_null()) {
    summary["fabric"] = fabric_;
    result["fabric"] = fabric_;
    std::istringstream lines(fabric_text_);
    for (std::string line; std::getline(lines, line);)
      if (!line.empty()) text += "\nfabric: " + line;
  }
  if (!doctor_.is_null()) {
    summary["doctor"] = doctor_;
    text += "\ndoctor: " + doctor_line_;
  }

  if (files_) {
    if (trace_) {
      trace_->write(telemetry::Recorder::instance().drain());
      trace_->close(telemetry::Recorder::instance().threads());
      trace_.reset();
    }
    if (comm_) comm_->barrier()->wait();  // every rank's trace file is complete
    if (rank_ == 0) {
      write_optional_file((fs::path(dir_) / "summary.json").string(), summary.dump(2) + "\n");
      write_optional_file((fs::path(dir_) / "summary.txt").string(), text + "\n");
      if (config_.telemetry.trace) {
        std::vector<std::string> files;
        files.reserve(size_t(world_));
        for (int r = 0; r < world_; ++r) files.push_back(rank_file(dir_, "trace-rank", r, "json"));
        // Telemetry: a trace that cannot be merged (a disk full, a rank's
        // file cut short by it) is a warning; result.json comes next.
        try {
          telemetry::merge_traces(files, (fs::path(dir_) / "trace.json").string());
        } catch (const std::exception& e) {
          std::fprintf(stderr, "shardtrain: warning: trace.json not written: %s\n", e.what());
        }
      }
    }
  }
  return text;
}

}  // namespace shardtrain::train
