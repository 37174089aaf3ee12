// What the trainer records about its steps, and what it writes at the end:
// one telemetry::StepRecord per step and rank (telemetry/rank-NNNNN.jsonl),
// the span trace (telemetry/trace-rank-NNNNN.json, merged into trace.json),
// and the summary (summary.json, summary.txt, result.json's "timing" and
// "per_rank"), gathered once at the end. With telemetry disabled only the
// in-memory figures for result.json are kept. docs/telemetry.md.
#pragma once

#include "runtime/core/output_file.h"
#include "runtime/comm/communicator.h"
#include "runtime/parallel/comm_stats.h"
#include "runtime/telemetry/step_record.h"
#include "runtime/telemetry/trace.h"
#include "runtime/train/config.h"
#include "runtime/train/session.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace shardtrain::train {

// A resumed run writes its telemetry afresh (the summary describes this
// process's steps); the earlier run's files (this rank's step records and
// trace, and on rank 0 mllog.txt) are renamed to <name>.before-<tag> first,
// out of the report's way but not lost. Returns the new names.
std::vector<std::string> set_aside_earlier_telemetry(const std::string& run_dir, int rank, const std::string& tag);

class RunTelemetry {
 public:
  RunTelemetry(const Config& config, const std::string& run_dir, int rank, int world, comm::Communicator* comm,
               double run_start);
  ~RunTelemetry();
  RunTelemetry(const RunTelemetry&) = delete;
  RunTelemetry& operator=(const RunTelemetry&) = delete;

  // A step: begin, the batch is there, end.
  void begin_step(int64_t step, double epoch);
  void data_ready(int64_t samples);
  // What the streaming loader did for this step's batch (data.loader = "stream").
  void io_done(int64_t bytes, int64_t requests, double read_s, int64_t queued, int64_t stage_bytes);
  void end_step(const StepPhases& phases, const parallel::CommStats& comm, double debug_delay_s);
  // Work after the last step and before the next (its record carries it).
  void add_eval(double seconds);
  void add_checkpoint(double seconds);
  // The rank's GPU, whose memory the records report (runtime.device = "cuda").
  void set_device(Device device) { device_ = device; }
  // The fabric NCCL reported (rank 0): summary.json's "fabric" and a
  // "fabric:" line per finding in the summary text.
  void set_fabric(nlohmann::json report, std::string text) {
    fabric_ = std::move(report);
    fabric_text_ = std::move(text);
  }
  // What the doctor found at start-up (rank 0; runtime/train/node_check.h):
  // summary.json's "doctor" (its verdicts, not every node's facts: those
  // are in doctor.json) and a "doctor:" line in the summary text.
  void set_doctor(const nlohmann::json& report, std::string line) {
    doctor_ = {{"summary", report.value("summary", "")},
               {"worst", report.value("worst", "")},
               {"mpi_transport", report.value("mpi_transport", "")},
               {"across_nodes", report.value("across_nodes", nlohmann::json::array())}};
    doctor_line_ = std::move(line);
  }

  // Seconds in training steps so far (evaluation excluded).
  double step_seconds() const { return step_s_total_; }
  // Seconds this object spent in its own per-step work (clock and rusage
  // reads, building, formatting and writing records and trace), measured by
  // itself: the bulk of telemetry's cost to a step (spans add ~0.1 us each).
  double own_seconds() const { return own_s_; }

  // Writes the records and spans not yet in the files (finish does too).
  void flush();

  // Collective when comm is set: every rank calls it. Writes the files, adds
  // "timing" and "per_rank" to result, returns the text summary to print.
  std::string finish(nlohmann::json& result);

 private:
  void write_record();
  void write_files();
  void take_ops();  // the step's op times (telemetry.op_timing) into its record

  // Records and spans go to the files in batches: formatting 32 of them in a
  // row, with the code and data warm in cache, costs a fraction of doing it
  // after every step, when a step has just evicted both (docs/BENCHMARKS.md).
  // A crash loses at most this many steps' records (the flight recorder still
  // has the latest spans).
  static constexpr size_t kWriteEvery = 32;

  const Config& config_;
  std::string dir_;
  int rank_, world_;
  Device device_ = Device::cpu();
  comm::Communicator* comm_;
  double run_start_;
  bool files_;
  std::vector<telemetry::StepRecord> records_;  // kept for the summary (a few hundred bytes each)
  size_t written_ = 0;                          // records_[0, written_) are in the files
  OptionalFile jsonl_;                          // telemetry: a failed write warns once, training goes on
  std::unique_ptr<telemetry::TraceWriter> trace_;
  telemetry::StepRecord current_;
  double t_step_ = 0, cpu_thread_ = 0, cpu_process_ = 0;
  double step_s_total_ = 0;
  double own_s_ = 0;
  bool pending_ = false;  // current_ ended but not written (eval may still be added)
  nlohmann::json fabric_;
  std::string fabric_text_;
  nlohmann::json doctor_;
  std::string doctor_line_;
};

}  // namespace shardtrain::train
