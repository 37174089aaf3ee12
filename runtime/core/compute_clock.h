// Emulated compute: waits that stand for what a kernel would take on the
// accelerator being emulated (runtime.emulate), burning no CPU, so that many
// ranks sharing a few cores wait as if each had its own accelerator, and only
// their communication competes for the cores.
#pragma once

namespace shardtrain {

// Sleeps until now_seconds() reads `deadline_s` (an absolute time, so a
// signal that interrupts the sleep does not lengthen it).
void sleep_until(double deadline_s);

// A rank's compute stream, emulated: each run() is the next kernel. A
// wake-up comes late by the kernel's timer slack or more; that lateness is
// taken off the next waits, so hundreds of short waits add up to their sum,
// even waits shorter than a wake-up's lateness.
// Nothing else is: time the rank spent between two waits (host work, a
// collective it waited for) delays the next kernel, as it would delay the
// launch on an accelerator.
class ComputeClock {
 public:
  // Waits `seconds` of emulated compute; returns the seconds it slept.
  double run(double seconds);

 private:
  double late_ = 0;  // lateness of wake-ups not yet taken off a wait
};

// The process's clock: one rank, one compute stream.
ComputeClock& compute_clock();

}  // namespace shardtrain
