// resume(): where a run starts (train_loop.h).
#include "runtime/core/clock.h"
#include "runtime/core/error.h"
#include "runtime/train/run_lines.h"
#include "runtime/train/train_loop.h"

#include <fmt/ranges.h>

#include <optional>
#include <string>
#include <vector>

namespace shardtrain::train {

LoopState resume(Job& job, const std::string& resume) {
  LoopState state;
  Checkpointing& checkpoints = *job.checkpoints;
  RunDir& run = job.ctx.run;
  if (!resume.empty()) {
    // Rank 0 lists the files, so that every rank loads the same one. With
    // "auto", a damaged checkpoint (its seal fails) is skipped for the one
    // before it; the skipped file, newer than where the run starts, is then
    // set aside below.
    const std::vector<std::string> candidates =
        job.mpi.rank() == 0 ? checkpoints.candidates(resume) : std::vector<std::string>{};
    std::vector<std::string> damaged;
    std::optional<checkpoint::Header> loaded;
    std::string path;
    double t0 = 0;
    for (size_t k = 0; !loaded; ++k) {
      path = job.mpi.broadcast_string(k < candidates.size() ? candidates[k] : "", 0);
      if (path.empty()) break;
      t0 = now_seconds();
      try {
        loaded = checkpoints.load(path);
      } catch (const checkpoint::DamagedCheckpoint& e) {
        if (resume != "auto") throw;
        run.log(fmt::format("[resume] skipped: {}; trying the checkpoint before it", e.what()));
        damaged.push_back(path);
      }
    }
    ST_CHECK(loaded || damaged.empty(),
             "--resume auto: every checkpoint in {} is damaged ({}): nothing to resume from (train without "
             "--resume to start again from step 0)",
             checkpoints.dir(), fmt::join(damaged, ", "));
    if (!loaded) {
      run.log(fmt::format("[resume] no complete checkpoint in {}: starting from step 0", checkpoints.dir()));
    } else {
      const checkpoint::Header& h = *loaded;
      state.step = h.progress.step;
      state.epoch = h.progress.epoch;
      state.next_batch = h.progress.batch;
      state.resumed_from = path;
      state.last_checkpoint = state.step;  // nothing to write again at this step
      if (h.progress.target_reached_ms >= 0) state.time_to_target = double(h.progress.target_reached_ms) / 1000.0;
      run.log(resume_line(path, h, job.mpi.world_size(), job.spec->name(), now_seconds() - t0));
      if (h.progress.total_steps != job.total_steps)
        run.log(
            fmt::format("[resume] note: the checkpoint's run had {} steps in all, this one has {}: the "
                        "learning-rate schedule differs from here on",
                        h.progress.total_steps, job.total_steps));
      for (const std::string& change : checkpoints.config_changes(h))
        run.log("[resume] config changed since the checkpoint: " + change);
      if (state.time_to_target)
        run.log(
            fmt::format("[resume] the checkpoint's run reached its target after {:.1f} s of training: nothing "
                        "left to train (the final evaluation runs again)",
                        *state.time_to_target));
    }
  }
  state.next_epoch = state.epoch;
  state.start_step = state.step;
  if (checkpoints.enabled()) {
    for (const std::string& moved : checkpoints.set_aside_newer_than(state.step))
      run.log(
          fmt::format("[checkpoint] {} is newer than step {}, where this run starts: an earlier run's, set "
                      "aside (no longer listed, loaded or pruned)",
                      moved, state.step));
    run.log(checkpoints_line(job.config.checkpoint.every_steps, checkpoints.dir(), job.config.checkpoint.keep));
  }
  return state;
}

}  // namespace shardtrain::train
