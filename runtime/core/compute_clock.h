// Emulated compute: waits that stand for what a kernel would take on the
// accelerator being emulated (runtime.emulate), burning no CPU, so that many
// ranks sharing a few cores wait as if each had its own accelerator, and only
// their communication competes for the cores.
#pragma once

namespace shardtrain {

// Sleeps until now_seconds() reads `deadline_s` (an absolute time, so a
// signal that interrupts the sleep does not lengthen it).
void sleep_until(double deadline_s);

// A rank's compute stream, emulated: each run() is the next kernel, queued
// behind the one before. Back-to-back waits run to deadlines that follow
// each other, so a late wake-up is taken off the next wait instead of adding
// up over a step of hundreds of short ones; after a pause of more than
// kBackToBack (the rank waited for a collective, for data) the next wait
// starts from now.
class ComputeClock {
 public:
  static constexpr double kBackToBack = 1e-3;  // seconds

  // Waits `seconds` of emulated compute; returns the seconds it slept.
  double run(double seconds);

 private:
  double deadline_ = 0;
};

// The process's clock: one rank, one compute stream.
ComputeClock& compute_clock();

}  // namespace shardtrain
