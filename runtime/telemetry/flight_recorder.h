// The flight recorder: when a job fails (an error on this rank, the
// collective watchdog ending the job, or SIGTERM/SIGINT/SIGUSR1, which is how
// mpirun stops the other ranks of a failed job), each rank writes its last spans
// (Recorder::recent) and the state it was in to
// <run dir>/flight/rank-NNNNN.json, so the user can see what every rank was
// doing when it stopped.
#pragma once

#include <functional>
#include <string>

namespace shardtrain::telemetry {

class FlightRecorder {
 public:
  // Arms the recorder for this rank: dumps go to <run_dir>/flight/. SIGTERM
  // and SIGINT get a handler that only writes to a pipe (async-signal-safe,
  // whichever thread the signal lands on, the MPI library's included); a
  // thread reading the pipe dumps, then ends the process with the
  // conventional status (128 + signal). Arming again (a new run in the same
  // process, or a forked child) replaces the settings and the first reason.
  // `context` (may be empty) returns a
  // few lines about the current state (step, epoch) for the dump; it runs on
  // that thread, so it must only read atomics or other thread-safe state.
  static void arm(const std::string& run_dir, int rank, size_t spans_per_thread,
                  std::function<std::string()> context = {});
  // Writes the dump now with `reason` (an error's message, the watchdog's
  // line). Safe to call more than once, from any thread; the first reason is
  // kept, the spans and time are the latest. Never throws: a dump that cannot
  // be written is reported on stderr. Does nothing when not armed.
  static void dump(const std::string& reason) noexcept;
  // The path the dump goes to ("" when not armed).
  static std::string path();

  // Preemption (Slurm sends SIGTERM before it kills a job, or SIGUSR1 ahead
  // of time with --signal): from this call on, SIGTERM, SIGINT and SIGUSR1
  // do not end the process at once. The first is recorded (stop_signal(),
  // for the training loop to act on, and a dump) and starts a clock:
  // a process still running `grace_s` later prints `expired_line` on
  // stderr, dumps, and ends with 128 + signal. A second signal ends the
  // process at once, as without this call. Works armed or not (without
  // arming, nothing is dumped).
  static void defer_signals(double grace_s, const std::string& expired_line);
  // The signal defer_signals() recorded, 0 for none.
  static int stop_signal();
};

}  // namespace shardtrain::telemetry
