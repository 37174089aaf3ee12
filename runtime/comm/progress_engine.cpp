#include "runtime/comm/progress_engine.h"

#include "runtime/core/clock.h"
#include "runtime/core/error.h"

#include <algorithm>

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
// (Backoff); with Linux's default 50 us timer slack every such sleep lasts
// ~80 us on these VMs, with 1 us ~15 us.
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
    : name_(std::move(name)), executor_(executor), monitor_(std::move(monitor)) {}

ProgressEngine::~ProgressEngine() { stop(); }

void ProgressEngine::submit(Task&& task) {
  std::vector<WorkPtr> retired;  // released after the lock, on this thread
  {
    std::lock_guard lock(mu_);
    retired.swap(retired_);
    ST_CHECK(!stopping_, "communicator '{}' is shut down: no more collectives", name_);
    queue_.push_back(std::move(task));
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  cv_.notify_one();
}

void ProgressEngine::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void ProgressEngine::loop() {
  configure_thread(name_);
  std::vector<Task> batch;
  std::vector<WorkPtr> finished;
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything queued has run
    // Take everything queued at once: a caller issuing many small collectives
    // back to back then rarely meets the engine on the lock.
    batch.swap(queue_);
    lock.unlock();
    size_t prepared = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      for (; prepared < std::min(batch.size(), i + kLookahead); ++prepared)
        if (!executor_.prepare(batch[prepared], prepared > i ? &batch[i] : nullptr)) break;
      run(batch[i]);
      finished.push_back(std::move(batch[i].work));
    }
    batch.clear();
    lock.lock();
    if (retired_.size() < 4096) {
      retired_.insert(retired_.end(), std::make_move_iterator(finished.begin()),
                      std::make_move_iterator(finished.end()));
    }
    finished.clear();
  }
}

void ProgressEngine::run(Task& task) {
  Work& work = *task.work;
  const double t0 = now_seconds();
  work.mark_started(task.record.algorithm, t0);
  if (monitor_) monitor_->started(task.record, t0);
  std::exception_ptr error;
  try {
    executor_.execute(task);
  } catch (...) {
    error = std::current_exception();
  }
  if (monitor_) monitor_->finished(task.record);
  task.a = Tensor();  // release the tensors before the Work completes
  task.b = Tensor();
  work.mark_finished(now_seconds(), error);
}

}  // namespace shardtrain::comm
