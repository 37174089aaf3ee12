#include "runtime/comm/engine/progress_engine.h"

#include "runtime/core/clock.h"
#include "runtime/core/error.h"

#include <algorithm>
#include <chrono>

#ifdef __linux__
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#endif

namespace shardtrain::comm {
namespace {

constexpr int kEngineNice = -10;
std::atomic<bool> g_priority_denied{false};

// The engine sleeps a few microseconds at a time while it waits for a peer
// (Backoff); with Linux's default timer slack of 50 us every such sleep
// lasts several times longer than asked (docs/BENCHMARKS.md, "Where the communicator's defaults come from").
void configure_thread(const std::string& name) {
#ifdef __linux__
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  // When ranks fill every core, the engine competes with its own rank's
  // compute thread; a collective then waits for the scheduler to give the
  // engine a turn (milliseconds) on every rank. A higher priority (nice -10)
  // lets it run as soon as it has work; it sleeps otherwise, so compute loses
  // only the engine's real work. Needs CAP_SYS_NICE (root, or RLIMIT_NICE);
  // without it the engine keeps the normal priority (engine_priority_raised()).
  if (setpriority(PRIO_PROCESS, id_t(gettid()), kEngineNice) != 0) g_priority_denied = true;
  const std::string short_name = ("st-" + name).substr(0, 15);  // the kernel's limit
  pthread_setname_np(pthread_self(), short_name.c_str());
#else
  (void)name;
#endif
}

}  // namespace

bool engine_priority_raised() { return !g_priority_denied.load(); }

ProgressEngine::ProgressEngine(std::string name, Executor& executor, std::shared_ptr<CommMonitor> monitor)
    : name_(std::move(name)), executor_(executor), monitor_(std::move(monitor)), helper_(std::make_shared<Helper>()) {
  helper_->engine = this;
}

ProgressEngine::~ProgressEngine() { stop(); }

void ProgressEngine::submit(Task&& task) {
  std::vector<WorkPtr> retired;  // released after the lock, on this thread
  bool wake = false, polling = false;
  {
    std::lock_guard lock(mu_);
    retired.swap(retired_);
    ST_CHECK(!stopping_, "communicator '{}' is shut down: no more collectives", name_);
    const bool at_once = waited_at_once(task.work->op(), task.record.bytes);  // only kinds up to kDeferBytes
    last_submitted_ = task.work.get();
    queue_.push_back(std::move(task));
    queued_.store(true, std::memory_order_release);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    // Left to a caller that waits at once, where the engine will look again
    // by itself (polling, or a timed sleep): see the top of the header.
    if (at_once && queue_.size() == 1 && !busy_ && (timed_sleep_ || polling_)) {
      deferred_at_ = now_seconds();
      last_submit_at_.store(deferred_at_, std::memory_order_relaxed);
      return;
    }
    deferred_at_ = -1;
    wake = sleeping_;
    // Yield to a polling engine (it may share this core and would otherwise
    // wait for this thread's time slice to end) only when this task comes
    // alone: not in a burst of issues (let the burst queue up, to be
    // coalesced), and not right after a caller ran its collective itself
    // (it is about to do so again).
    const double now = now_seconds();
    polling = polling_ && now - last_activity() > kIdlePoll_s;
    last_submit_at_.store(now, std::memory_order_relaxed);
  }
  if (wake)
    cv_.notify_one();
  else if (polling)
    std::this_thread::yield();  // a polling engine on this core takes it now, not when this thread's slice ends
}

void ProgressEngine::stop() {
  {
    std::lock_guard lock(helper_->mu);  // waits for a helping caller to finish
    helper_->engine = nullptr;
  }
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

bool ProgressEngine::Helper::help(const Work& work) {
  std::lock_guard lock(mu);
  return engine && engine->help(work);
}

// On a caller's thread, in Work::wait().
bool ProgressEngine::help(const Work& work) {
  const double now = now_seconds();
  last_help_at_.store(now, std::memory_order_relaxed);
  {
    std::lock_guard lock(mu_);
    // A small collective waited for within kDefer_s of its issue: the next
    // lone one of its kind is left to this caller.
    const bool small = work.bytes() <= kDeferBytes;
    const bool at_once = &work == last_submitted_ && now - last_submit_at_.load(std::memory_order_relaxed) < kDefer_s;
    if (small) remember(work.op(), work.bytes(), at_once);
    caller_runs_ = small && at_once;
    if (busy_ || stopping_) return false;
    const auto it = std::find_if(queue_.begin(), queue_.end(), [&](const Task& t) { return t.work.get() == &work; });
    if (it == queue_.end()) return false;
    // Everything issued before it runs first, in order, as on the engine.
    help_batch_.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(it + 1));
    queue_.erase(queue_.begin(), it + 1);
    queued_.store(!queue_.empty(), std::memory_order_relaxed);
    deferred_at_ = -1;
    busy_ = true;
  }
  std::vector<WorkPtr> finished;  // released here, on the issuing thread
  run_batch(help_batch_, finished);
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    busy_ = false;
    wake = sleeping_ && !queue_.empty();
  }
  if (wake) cv_.notify_one();
  return true;
}

bool ProgressEngine::waited_at_once(const std::string& op, int64_t bytes) const {
  return std::any_of(at_once_.begin(), at_once_.end(), [&](const Kind& k) { return k.bytes == bytes && k.op == op; });
}

void ProgressEngine::remember(const std::string& op, int64_t bytes, bool at_once) {
  constexpr size_t kKinds = 16;
  const auto it =
      std::find_if(at_once_.begin(), at_once_.end(), [&](const Kind& k) { return k.bytes == bytes && k.op == op; });
  if (it != at_once_.end()) {
    if (!at_once) at_once_.erase(it);
  } else if (at_once) {
    if (at_once_.size() == kKinds) at_once_.erase(at_once_.begin());
    at_once_.push_back({op, bytes});
  }
}

void ProgressEngine::loop() {
  configure_thread(name_);
  std::vector<Task> batch;
  std::vector<WorkPtr> finished;
  std::unique_lock lock(mu_);
  // A deferred task is the caller's until kDefer_s have passed.
  const auto left_to_caller = [&] { return deferred_at_ >= 0 && now_seconds() - deferred_at_ < kDefer_s; };
  const auto ready = [&] { return !busy_ && (stopping_ || (!queue_.empty() && !left_to_caller())); };
  for (;;) {
    if (!ready()) {
      // Idle. Right after a task was issued or a caller ran its own (help),
      // poll for the next one (yielding the core) before sleeping: a caller
      // issuing back to back, or one at a time waiting for each, issues the
      // next within microseconds, and waking a sleeping engine for each costs
      // several thread switches. Otherwise sleep at once: while the caller
      // computes, a polling engine that shares its core is not preempted in
      // when work arrives and waits for the compute thread's time slice to
      // end (always polling made DDP training much slower; the figures:
      // docs/BENCHMARKS.md, "Where the communicator's defaults come from").
      polling_ = true;
      lock.unlock();
      while (!queued_.load(std::memory_order_acquire) && now_seconds() - last_activity() < kIdlePoll_s)
        std::this_thread::yield();  // the issuing thread may need this core
      lock.lock();
      polling_ = false;
      if (!ready()) {
        // Woken, it polls again if a caller helped meanwhile (then it ran
        // the task this wake-up was for). While callers run their own
        // collectives, it sleeps kDefer_s at a time, so that a collective
        // left to one (submit) starts in time if the caller does not come.
        sleeping_ = true;
        const double now = now_seconds();
        timed_sleep_ = deferred_at_ >= 0 || (caller_runs_ && now - last_activity() < kCallerRunsIdle_s);
        if (timed_sleep_) {
          const double until = deferred_at_ >= 0 ? deferred_at_ + kDefer_s : now + kDefer_s;
          cv_.wait_for(lock, std::chrono::duration<double>(std::max(until - now, 1e-6)));
        } else {
          cv_.wait(lock);
        }
        sleeping_ = timed_sleep_ = false;
        continue;
      }
    }
    if (queue_.empty()) return;  // stopping, and everything queued has run
    // A task left to its caller that the caller did not come for: the
    // caller does not wait for its kind at once (any more).
    if (deferred_at_ >= 0) {
      caller_runs_ = false;
      remember(queue_.front().work->op(), queue_.front().record.bytes, false);
    }
    deferred_at_ = -1;
    queued_.store(false, std::memory_order_relaxed);
    // Take everything queued at once: a caller issuing many small collectives
    // back to back then rarely meets the engine on the lock.
    batch.swap(queue_);
    busy_ = true;
    lock.unlock();
    run_batch(batch, finished);
    lock.lock();
    busy_ = false;
    if (retired_.size() < 4096) {
      retired_.insert(retired_.end(), std::make_move_iterator(finished.begin()),
                      std::make_move_iterator(finished.end()));
    }
    finished.clear();
  }
}

void ProgressEngine::run_batch(std::vector<Task>& batch, std::vector<WorkPtr>& finished) {
  size_t prepared = 0;
  for (size_t i = 0; i < batch.size();) {
    for (; prepared < std::min(batch.size(), i + kLookahead); ++prepared)
      if (!executor_.prepare(batch[prepared], prepared > i ? &batch[i] : nullptr)) break;
    const std::span<const Task> queued(batch.data() + i, batch.size() - i);
    const size_t n = std::clamp<size_t>(executor_.group(queued), 1, queued.size());
    for (; prepared < i + n; ++prepared) executor_.prepare(batch[prepared], nullptr);  // a group runs as one
    run(std::span<Task>(batch.data() + i, n));
    for (size_t k = i; k < i + n; ++k) finished.push_back(std::move(batch[k].work));
    i += n;
  }
  batch.clear();
}

void ProgressEngine::run(std::span<Task> tasks) {
  const double t0 = now_seconds();
  for (Task& task : tasks) task.work->mark_started(task.record.algorithm, t0);
  if (monitor_) monitor_->started(tasks.front().record, t0);
  std::exception_ptr error;
  try {
    executor_.execute(tasks);
  } catch (...) {
    error = std::current_exception();
  }
  if (monitor_) monitor_->finished(tasks.back().record);
  const double t1 = now_seconds();
  for (Task& task : tasks) {
    task.a = Tensor();  // release the tensors before the Work completes
    task.b = Tensor();
    task.work->mark_finished(t1, error);
  }
}

}  // namespace shardtrain::comm
