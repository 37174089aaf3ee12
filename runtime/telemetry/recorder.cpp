// The recorder: a registry of per-thread buffers (a ring for the flight
// recorder, a queue for the trace), and Span.
//
// Threads register once, under the registry lock, on their first span; after
// that recording touches only the thread's own buffer. A thread that exits
// hands its buffer (and tid) to the next thread that registers, so a process
// that starts many short-lived threads does not grow without bound. Buffers
// are never freed: a reader may hold a pointer to one at any time, and
// threads may still record during process exit.
#include "runtime/telemetry/recorder.h"

#include "runtime/core/clock.h"
#include "runtime/telemetry/span_queue.h"
#include "runtime/telemetry/span_ring.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>

namespace shardtrain::telemetry {
namespace {

// Undrained trace spans a thread may hold (64 MiB) before new ones are dropped.
constexpr uint64_t kMaxPendingPerThread = uint64_t{1} << 20;

struct ThreadBuffer {
  int tid = 0;
  bool in_use = true;  // owned by a live thread (guarded by the registry lock)
  std::unique_ptr<detail::SpanRing> ring;
  detail::SpanQueue queue{kMaxPendingPerThread};
};

// Read on every span: constant-initialized globals, so no guard on the hot path.
constinit std::atomic<bool> g_enabled{false};
constinit std::atomic<bool> g_trace{true};

struct Registry {
  std::mutex mu;
  size_t ring_capacity = 4096;
  std::vector<std::unique_ptr<ThreadBuffer>> buffers;
  int next_tid = 0;
  std::map<int, std::string> names;  // tid -> name, threads and lanes
  std::map<std::string, int, std::less<>> lanes;
  std::mutex drain_mu;  // drain() has one consumer at a time
};

// Leaked on purpose: threads may record (and exit) after static destruction began.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

constinit thread_local ThreadBuffer* t_buffer = nullptr;

// Returns the thread's buffer to the pool when the thread exits. A separate
// thread_local (with a destructor) touched only at registration, so that
// t_buffer stays trivial and free of TLS guards.
struct Retirer {
  ThreadBuffer* buffer = nullptr;
  ~Retirer() {
    if (buffer == nullptr) return;
    std::lock_guard<std::mutex> lock(registry().mu);
    buffer->in_use = false;
    t_buffer = nullptr;
  }
};
thread_local Retirer t_retirer;

ThreadBuffer* register_thread() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  ThreadBuffer* b = nullptr;
  for (auto& candidate : r.buffers) {
    if (!candidate->in_use) {
      b = candidate.get();
      break;
    }
  }
  if (b != nullptr) {
    // A reused buffer keeps its tid (and its name until renamed), as the OS
    // reuses thread ids; the ring is resized if enable() changed the capacity.
    b->in_use = true;
    if (b->ring->capacity() != r.ring_capacity) b->ring = std::make_unique<detail::SpanRing>(r.ring_capacity);
  } else {
    r.buffers.push_back(std::make_unique<ThreadBuffer>());
    b = r.buffers.back().get();
    b->tid = r.next_tid++;
    b->ring = std::make_unique<detail::SpanRing>(r.ring_capacity);
    r.names[b->tid] = fmt::format("thread {}", b->tid);
  }
  t_buffer = b;
  t_retirer.buffer = b;
  return b;
}

ThreadBuffer* this_thread_buffer() {
  ThreadBuffer* b = t_buffer;
  return b != nullptr ? b : register_thread();
}

}  // namespace

Recorder& Recorder::instance() {
  static Recorder recorder;
  return recorder;
}

void Recorder::enable(size_t ring_capacity, bool trace) {
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.ring_capacity = ring_capacity;
  }
  g_trace.store(trace, std::memory_order_relaxed);
  g_enabled.store(true, std::memory_order_release);
}

void Recorder::disable() { g_enabled.store(false, std::memory_order_relaxed); }

bool Recorder::enabled() const { return g_enabled.load(std::memory_order_relaxed); }

void Recorder::record(const SpanEvent& e) {
  if (!g_enabled.load(std::memory_order_relaxed)) return;
  ThreadBuffer* b = this_thread_buffer();
  SpanEvent ev = e;
  if (ev.tid < kFirstLaneTid) ev.tid = b->tid;
  b->ring->push(ev);
  if (g_trace.load(std::memory_order_relaxed)) b->queue.push(ev);
}

int Recorder::lane(const char* name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.lanes.find(name);
  if (it != r.lanes.end()) return it->second;
  const int tid = kFirstLaneTid + static_cast<int>(r.lanes.size());
  r.lanes.emplace(name, tid);
  r.names[tid] = name;
  return tid;
}

std::vector<SpanEvent> Recorder::drain() {
  Registry& r = registry();
  std::lock_guard<std::mutex> drain_lock(r.drain_mu);
  std::vector<ThreadBuffer*> buffers;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    for (auto& b : r.buffers) buffers.push_back(b.get());
  }
  std::vector<SpanEvent> out;
  for (ThreadBuffer* b : buffers) b->queue.drain(out);
  return out;
}

std::vector<SpanEvent> Recorder::recent(size_t n) const {
  Registry& r = registry();
  std::vector<SpanEvent> out;
  {
    // Held while copying: a ring is only replaced under this lock.
    std::lock_guard<std::mutex> lock(r.mu);
    for (auto& b : r.buffers) b->ring->read_recent(n, out);
  }
  std::stable_sort(out.begin(), out.end(), [](const SpanEvent& a, const SpanEvent& b) { return a.end_s < b.end_s; });
  return out;
}

std::vector<std::pair<int, std::string>> Recorder::threads() const {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return {r.names.begin(), r.names.end()};
}

void Recorder::name_thread(const std::string& name) {
  ThreadBuffer* b = this_thread_buffer();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.names[b->tid] = name;
}

uint64_t Recorder::dropped() const {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  uint64_t total = 0;
  for (auto& b : r.buffers) total += b->queue.dropped();
  return total;
}

const char* Recorder::intern(std::string_view s) {
  static std::mutex* mu = new std::mutex;
  static auto* names = new std::set<std::string, std::less<>>;  // nodes never move
  std::lock_guard<std::mutex> lock(*mu);
  auto it = names->find(s);
  if (it == names->end()) it = names->emplace(s).first;
  return it->c_str();
}

Span::Span(const char* name, const char* category, int64_t seq) : on_(g_enabled.load(std::memory_order_relaxed)) {
  if (!on_) return;
  e_.name = name;
  e_.category = category;
  e_.seq = seq;
  e_.start_s = now_seconds();
}

Span::~Span() {
  if (!on_) return;
  e_.end_s = now_seconds();
  Recorder::instance().record(e_);
}

}  // namespace shardtrain::telemetry
