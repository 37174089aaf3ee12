// The flight recorder. A signal handler may run on any thread, in the middle
// of anything (a malloc, a lock held by the MPI library), so it only writes
// the signal number to a pipe; a thread of ours blocked on that pipe does the
// real work (collect spans, format JSON, write the file) in ordinary context,
// then ends the process with 128 + signal, as a shell reports a killed child.
#include "runtime/telemetry/flight_recorder.h"

#include "runtime/core/clock.h"
#include "runtime/core/error.h"
#include "runtime/telemetry/recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

namespace shardtrain::telemetry {
namespace {

struct Settings {
  std::string dir, path;
  int rank = 0;
  size_t spans = 0;
  std::function<std::string()> context;
  std::string first_reason;
  bool armed = false;
  std::string grace_expired_line;  // defer_signals()
};

struct State {
  std::mutex mu;  // guards settings
  Settings settings;
  // Serializes dumps (the watchdog and a signal at once). Taken with a
  // deadline (try_lock_within), so that a stuck dump cannot keep the signal
  // path from ending the process.
  std::mutex dump_mu;
};

// A timed lock by polling: dumps are rare, and std::timed_mutex's timed wait
// (pthread_mutex_clocklock) is invisible to GCC 12's ThreadSanitizer.
bool try_lock_within(std::mutex& m, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!m.try_lock()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

State& state() {
  static State* s = new State;  // leaked: dumps may run during exit
  return *s;
}

// Read by the signal handler: plain atomics, nothing else.
constinit std::atomic<int> g_pipe_write{-1};
constinit std::atomic<pid_t> g_owner{0};  // the process whose thread reads the pipe
// defer_signals(): the grace in seconds (< 0: a signal ends the process at
// once) and the first signal received since.
constinit std::atomic<double> g_grace_s{-1.0};
constinit std::atomic<int> g_stop_signal{0};

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "signal";
  }
}

extern "C" void on_signal(int sig) {
  const int saved_errno = errno;
  if (getpid() != g_owner.load(std::memory_order_relaxed)) {
    // A forked child that did not arm: the reading thread is its parent's.
    // Behave as if we were never here.
    signal(sig, SIG_DFL);
    raise(sig);
  } else {
    const unsigned char byte = static_cast<unsigned char>(sig);
    const int fd = g_pipe_write.load(std::memory_order_relaxed);
    if (fd >= 0 && write(fd, &byte, 1) < 0) {
      // Nothing a handler can do; the process then simply carries on.
    }
  }
  errno = saved_errno;
}

// The first signal after defer_signals(): recorded, and the process given
// the grace to act on it before this thread ends it.
void start_grace(int sig, double grace_s) {
  std::string line;
  {
    std::lock_guard<std::mutex> lock(state().mu);
    line = state().settings.grace_expired_line;
  }
  std::thread([sig, grace_s, line] {
    std::this_thread::sleep_for(std::chrono::duration<double>(grace_s));
    std::fprintf(stderr, "shardtrain: %s: %s\n", signal_name(sig), line.c_str());
    FlightRecorder::dump(fmt::format("signal {}, grace of {} s expired", signal_name(sig), grace_s));
    _exit(128 + sig);
  }).detach();
}

void read_signals(int fd) {
  for (;;) {
    unsigned char byte = 0;
    const ssize_t n = read(fd, &byte, 1);
    if (n == 1) {
      const int sig = byte;
      const double grace_s = g_grace_s.load();
      int none = 0;
      if (grace_s >= 0 && g_stop_signal.compare_exchange_strong(none, sig)) {
        // Recorded now: the signal may be mpirun ending a failed job, which
        // kills this rank before it stops.
        FlightRecorder::dump(fmt::format("signal {}: stopping after the next step", signal_name(sig)));
        start_grace(sig, grace_s);
        continue;
      }
      FlightRecorder::dump(fmt::format("signal {}", signal_name(sig)));
      _exit(128 + sig);
    }
    if (n < 0 && errno == EINTR) continue;
    return;  // the pipe is gone
  }
}

// Once per process (again in a forked child): the pipe, its reader, the handlers.
void install_signal_path() {
  if (g_owner.load() == getpid()) return;
  const int old_write = g_pipe_write.exchange(-1);
  if (old_write >= 0) close(old_write);  // the parent's (its reader did not fork with us)
  int fds[2];
  ST_CHECK(pipe2(fds, O_CLOEXEC) == 0, "flight recorder: pipe: {}", std::strerror(errno));
  // The handler must never block, even if the pipe were full.
  fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK);
  g_pipe_write.store(fds[1]);
  g_owner.store(getpid());
  std::thread(read_signals, fds[0]).detach();

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGINT, SIGUSR1})
    ST_CHECK(sigaction(sig, &sa, nullptr) == 0, "flight recorder: sigaction: {}", std::strerror(errno));
}

nlohmann::ordered_json span_json(const SpanEvent& e) {
  nlohmann::ordered_json j = {{"name", e.name != nullptr ? e.name : ""},
                              {"cat", e.category != nullptr ? e.category : ""},
                              {"start_s", e.start_s},
                              {"end_s", e.end_s},
                              {"tid", e.tid}};
  if (e.bytes >= 0) j["bytes"] = e.bytes;
  if (e.seq >= 0) j["seq"] = e.seq;
  if (e.detail != nullptr) j["detail"] = e.detail;
  return j;
}

void write_atomically(const std::string& dir, const std::string& path, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ST_CHECK(!ec, "cannot create '{}': {}", dir, ec.message());
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  ST_CHECK(f != nullptr, "cannot create '{}': {}", tmp, std::strerror(errno));
  std::fwrite(text.data(), 1, text.size(), f);
  const bool failed = std::ferror(f) != 0;
  const bool close_failed = std::fclose(f) != 0;
  ST_CHECK(!failed && !close_failed, "writing '{}' failed: {}", tmp, std::strerror(errno));
  ST_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename '{}': {}", tmp, std::strerror(errno));
}

// When the file cannot be written (a full disk is one of the failures that
// stop a job), the dump's gist goes to stderr instead, so that what each
// rank was doing is not lost with it: the reason, the context, and each
// thread's newest span with how long ago it ended (a thread stuck in
// something that records no span shows as one whose newest span ended long
// before now).
std::string gist(const std::string& reason, const std::string& context, double now_s,
                 const std::vector<SpanEvent>& spans) {
  std::vector<const SpanEvent*> newest;
  for (const SpanEvent& e : spans) {
    auto it = std::find_if(newest.begin(), newest.end(), [&](const SpanEvent* n) { return n->tid == e.tid; });
    if (it == newest.end())
      newest.push_back(&e);
    else if (e.end_s >= (*it)->end_s)
      *it = &e;
  }
  std::sort(newest.begin(), newest.end(), [](const SpanEvent* a, const SpanEvent* b) { return a->end_s < b->end_s; });
  std::string text = fmt::format("reason: {}; state: {}", reason, context.empty() ? "(none)" : context);
  if (newest.empty()) return text + "; no spans recorded";
  text += "; each thread's newest span:";
  for (const SpanEvent* e : newest) {
    text += fmt::format(" [thread {}: {} ({}", e->tid, e->name != nullptr ? e->name : "",
                        e->category != nullptr ? e->category : "");
    if (e->seq >= 0) text += fmt::format(" #{}", e->seq);
    if (e->detail != nullptr) text += fmt::format(" {}", e->detail);
    text += fmt::format(") ended {:.1f} s ago]", now_s - e->end_s);
  }
  return text;
}

}  // namespace

void FlightRecorder::arm(const std::string& run_dir, int rank, size_t spans_per_thread,
                         std::function<std::string()> context) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.settings.dir = (std::filesystem::path(run_dir) / "flight").string();
    s.settings.path = (std::filesystem::path(s.settings.dir) / fmt::format("rank-{:05d}.json", rank)).string();
    s.settings.rank = rank;
    s.settings.spans = spans_per_thread;
    s.settings.context = std::move(context);
    s.settings.first_reason.clear();
    s.settings.armed = true;
  }
  install_signal_path();
}

void FlightRecorder::dump(const std::string& reason) noexcept {
  std::string path = "(flight recorder)";
  try {
    State& s = state();
    if (!try_lock_within(s.dump_mu, std::chrono::seconds(2))) {
      std::fprintf(stderr, "shardtrain: flight recorder: another dump is stuck; not writing '%s'\n", reason.c_str());
      return;
    }
    std::lock_guard<std::mutex> dumping(s.dump_mu, std::adopt_lock);
    Settings settings;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (!s.settings.armed) return;
      if (s.settings.first_reason.empty()) s.settings.first_reason = reason;
      settings = s.settings;
    }
    path = settings.path;
    std::string context;
    if (settings.context) {
      try {
        context = settings.context();
      } catch (const std::exception& e) {
        context = fmt::format("(context unavailable: {})", e.what());
      }
    }
    // now_s is on the spans' clock (steady, seconds): now_s - end_s is how long ago a span ended.
    const nlohmann::ordered_json head = {{"rank", settings.rank},
                                         {"reason", settings.first_reason},
                                         {"time", utc_now("%Y-%m-%dT%H:%M:%SZ")},
                                         {"now_s", now_seconds()},
                                         {"context", context}};
    // One span per line: readable, and grep finds a span with its attributes.
    std::string text = head.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    text.pop_back();  // the closing brace
    text += ",\n \"spans\": [";
    const char* sep = "\n  ";
    const std::vector<SpanEvent> spans = Recorder::instance().recent(settings.spans);
    for (const SpanEvent& e : spans) {
      text += sep;
      text += span_json(e).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
      sep = ",\n  ";
    }
    text += "\n]}\n";
    try {
      write_atomically(settings.dir, settings.path, text);
    } catch (const std::exception& e) {
      std::remove((settings.path + ".tmp").c_str());  // a part-written dump helps nobody and keeps the disk full
      const std::string line =
          fmt::format("shardtrain: flight recorder: cannot write {}: {}; rank {}'s dump, in short: {}", path, e.what(),
                      settings.rank, gist(settings.first_reason, context, head["now_s"].get<double>(), spans));
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardtrain: flight recorder: cannot write %s: %s\n", path.c_str(), e.what());
  } catch (...) {
    std::fprintf(stderr, "shardtrain: flight recorder: cannot write %s\n", path.c_str());
  }
}

void FlightRecorder::defer_signals(double grace_s, const std::string& expired_line) {
  {
    std::lock_guard<std::mutex> lock(state().mu);
    state().settings.grace_expired_line = expired_line;
  }
  g_grace_s.store(std::max(0.0, grace_s));
  install_signal_path();  // also when not armed (telemetry off): the signal must not end the process
}

int FlightRecorder::stop_signal() { return g_stop_signal.load(); }

std::string FlightRecorder::path() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.settings.armed ? s.settings.path : std::string();
}

}  // namespace shardtrain::telemetry
