#include "runtime/comm/watchdog/watchdog.h"

#include "runtime/telemetry/flight_recorder.h"

#include "runtime/comm/transport/mpi_transport.h"
#include "runtime/comm/watchdog/watchdog_report.h"
#include "runtime/core/clock.h"
#include "runtime/core/error.h"

#include <chrono>
#include <cstdio>
#include <cstring>

namespace shardtrain::comm {
namespace {

constexpr int kTagQuery = 1, kTagReply = 2;
constexpr auto kTick = std::chrono::milliseconds(10);
constexpr int kMaxMonitors = 8;  // world, node, cross-node and their "self"s
constexpr int kAbortCode = 3;

// How long before the timeout the peers are asked.
double ask_lead_s(double timeout_s) { return std::min(Watchdog::kAnswerWait_s, timeout_s / 2); }

// Ends the process through MPI_Abort, which asks the launcher to end the
// whole job; if that has not happened within kAbortBound_s, exits anyway.
[[noreturn]] void abort_job() {
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::duration<double>(Watchdog::kAbortBound_s));
    std::_Exit(kAbortCode);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, kAbortCode);
  std::_Exit(kAbortCode);
}

}  // namespace

struct Watchdog::Reply {
  int32_t count = 0;
  MonitorSnapshot monitors[kMaxMonitors];
};

struct Watchdog::PendingReply {
  Reply reply;
  MPI_Request request = MPI_REQUEST_NULL;
};

Watchdog::Watchdog(MPI_Comm world) {
  check_mpi(MPI_Comm_dup(world, &comm_), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  if (size_ > 1) thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    stop();
  else if (thread_.joinable())
    thread_.detach();  // cannot happen: stop() runs before MPI_Finalize
}

void Watchdog::add(std::shared_ptr<CommMonitor> monitor) {
  std::lock_guard lock(mu_);
  ST_ASSERT(int(monitors_.size()) < kMaxMonitors);
  monitors_.push_back(std::move(monitor));
}

void Watchdog::stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& p : pending_replies_)
    if (p->request != MPI_REQUEST_NULL) MPI_Request_free(&p->request);
  pending_replies_.clear();
  MPI_Comm_free(&comm_);
}

void Watchdog::fail(const CommMonitor& monitor, const OpRecord& op, const std::string& what) {
  {
    std::lock_guard lock(mu_);
    if (thread_.joinable() && !stop_) {
      if (!failure_) failure_ = Failure{&monitor, op, what};
    } else {
      // No thread (a world of one rank): nobody else to ask.
      StuckCollective stuck{monitor.name(), monitor.rank(), monitor.size(), {}, op, what};
      const std::string line = describe(stuck, {});
      std::fprintf(stderr, "%s\n", line.c_str());
      std::fflush(stderr);
      telemetry::FlightRecorder::dump(line);  // what this rank did last, before the job ends
      abort_job();
    }
  }
  cv_.notify_all();
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // the watchdog ends the job
}

void Watchdog::loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (failure_) {
      const Failure f = *failure_;
      lock.unlock();
      diagnose_and_abort(*f.monitor, f.op, f.what);
    }
    lock.unlock();
    serve_queries();
    check_timeouts();
    lock.lock();
    cv_.wait_for(lock, kTick, [&] { return stop_ || failure_.has_value(); });
  }
}

void Watchdog::fill(Reply& reply) {
  std::lock_guard lock(mu_);
  const double now = now_seconds();
  reply.count = int32_t(monitors_.size());
  for (size_t i = 0; i < monitors_.size(); ++i) reply.monitors[i] = monitors_[i]->snapshot(now);
}

// Answers every query that has arrived: this rank's snapshots, sent
// asynchronously (the buffer lives until the send completes).
void Watchdog::serve_queries() {
  for (;;) {
    int flag = 0;
    MPI_Message message;
    MPI_Status status;
    if (MPI_Improbe(MPI_ANY_SOURCE, kTagQuery, comm_, &flag, &message, &status) != MPI_SUCCESS || !flag) break;
    int asker = -1;
    MPI_Mrecv(&asker, 1, MPI_INT, &message, MPI_STATUS_IGNORE);
    if (asker < rank_) lower_rank_diagnosing_ = true;
    auto p = std::make_unique<PendingReply>();
    fill(p->reply);
    MPI_Isend(&p->reply, int(sizeof(Reply)), MPI_BYTE, status.MPI_SOURCE, kTagReply, comm_, &p->request);
    pending_replies_.push_back(std::move(p));
  }
  std::erase_if(pending_replies_, [](const std::unique_ptr<PendingReply>& p) {
    int done = 0;
    if (MPI_Test(&p->request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    return done != 0;
  });
}

void Watchdog::check_timeouts() {
  std::vector<std::shared_ptr<CommMonitor>> monitors;
  {
    std::lock_guard lock(mu_);
    monitors = monitors_;
  }
  const double now = now_seconds();
  for (const auto& m : monitors) {
    const MonitorSnapshot s = m->snapshot(now);
    if (s.running < 0 || s.running_s <= m->timeout_s() - ask_lead_s(m->timeout_s())) continue;
    diagnose_timeout(*m, s);
  }
}

void Watchdog::diagnose_timeout(const CommMonitor& monitor, const MonitorSnapshot& stuck) {
  const double asked_at = now_seconds();
  const double deadline = asked_at + (monitor.timeout_s() - stuck.running_s);
  const auto peers = ask_everyone(monitor, deadline);
  // Until the timeout passes the collective may still complete: then it was
  // slow, not stuck, and the answers are dropped.
  for (;;) {
    if (monitor.snapshot(now_seconds()).completed > stuck.current.seq) return;
    if (now_seconds() >= deadline) break;
    serve_queries();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double running_s = stuck.running_s + (now_seconds() - asked_at);
  diagnose_and_abort(monitor, stuck.current, fmt::format("not complete after {:.1f} s", running_s), &peers);
}

// Asks every rank of the world for its snapshots; waits for the answers
// until `deadline`. Returns the snapshots of `monitor`'s communicator by its
// ranks.
std::vector<std::optional<MonitorSnapshot>> Watchdog::ask_everyone(const CommMonitor& monitor, double deadline) {
  auto owned = std::make_unique<std::vector<Reply>>(static_cast<size_t>(size_));
  std::vector<Reply>& replies = *owned;
  std::vector<MPI_Request> queries(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  std::vector<MPI_Request> answers(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  std::vector<bool> answered(static_cast<size_t>(size_), false);
  for (int w = 0; w < size_; ++w) {
    if (w == rank_) continue;
    MPI_Isend(&rank_, 1, MPI_INT, w, kTagQuery, comm_, &queries[size_t(w)]);
    MPI_Irecv(&replies[size_t(w)], int(sizeof(Reply)), MPI_BYTE, w, kTagReply, comm_, &answers[size_t(w)]);
  }
  int missing = size_ - 1;
  while (missing > 0 && now_seconds() < deadline) {
    for (int w = 0; w < size_; ++w) {
      if (w == rank_ || answered[size_t(w)]) continue;
      int done = 0;
      if (MPI_Test(&answers[size_t(w)], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) {
        answered[size_t(w)] = true;
        --missing;
      }
    }
    serve_queries();  // another stuck rank may be asking us at the same time
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  std::vector<std::optional<MonitorSnapshot>> peers(static_cast<size_t>(monitor.size()));
  for (int r = 0; r < monitor.size(); ++r) {
    const int w = monitor.world_rank(r);
    if (w == rank_ || !answered[size_t(w)]) continue;
    const Reply& reply = replies[size_t(w)];
    for (int i = 0; i < std::min<int>(reply.count, kMaxMonitors); ++i)
      if (std::strncmp(reply.monitors[i].name, monitor.name().c_str(), sizeof(reply.monitors[i].name)) == 0)
        peers[size_t(r)] = reply.monitors[i];
  }
  // The job may go on (the collective completed in time): no request may
  // write into `replies` once they are freed. An unanswered receive is
  // cancelled; one that an answer had already matched gets a moment to
  // complete, and if a peer died half-way the buffers are kept for good
  // rather than waited for (this path may be on its way to an abort). A
  // query is a send of the member rank_, left to finish.
  bool settled = true;
  for (int w = 0; w < size_; ++w) {
    if (w == rank_) continue;
    if (!answered[size_t(w)]) MPI_Cancel(&answers[size_t(w)]);
    if (queries[size_t(w)] != MPI_REQUEST_NULL) MPI_Request_free(&queries[size_t(w)]);
  }
  const double until = now_seconds() + 0.5;
  for (int w = 0; w < size_; ++w) {
    if (w == rank_ || answered[size_t(w)]) continue;
    int done = 0;
    while (MPI_Test(&answers[size_t(w)], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done && now_seconds() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    settled = settled && done;
  }
  if (!settled) abandoned_replies_.push_back(std::move(owned));
  return peers;
}

void Watchdog::diagnose_and_abort(const CommMonitor& monitor, const OpRecord& op, const std::string& what,
                                  const std::vector<std::optional<MonitorSnapshot>>* peers) {
  StuckCollective stuck{monitor.name(), monitor.rank(), monitor.size(), {}, op, what};
  for (int r = 0; r < monitor.size(); ++r) stuck.world_ranks.push_back(monitor.world_rank(r));
  const std::string line = describe(stuck, peers ? *peers : ask_everyone(monitor, now_seconds() + kAnswerWait_s));
  // Several ranks usually time out together; the lowest one reports, the
  // others give it a moment to end the job before they report themselves.
  if (lower_rank_diagnosing_) {
    const double until = now_seconds() + kAnswerWait_s;
    while (now_seconds() < until) {
      serve_queries();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  telemetry::FlightRecorder::dump(line);  // what this rank did last, before the job ends
  abort_job();
}

}  // namespace shardtrain::comm
