// What telemetry costs per span, in ns (the time column is per span unless a
// counter says otherwise). The budget: under 1% of a training step, i.e.
// 450 us for a ~45 ms CNN step and 70 us for a ~7 ms MLP step, with ~20 spans
// per step plus draining them and writing them to the rank's trace file.
#include "runtime/telemetry/recorder.h"
#include "runtime/telemetry/trace.h"

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>

namespace shardtrain::telemetry {
namespace {

constexpr int kBatch = 1024;  // spans between drains in the trace benchmarks

// Time per span over `spans` spans, as the counter "per_span" (seconds with
// an SI prefix: "55.2n" is 55.2 ns).
void per_span(benchmark::State& state, int64_t spans) {
  state.counters["per_span"] =
      benchmark::Counter(static_cast<double>(spans), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

SpanEvent sample_event() {
  SpanEvent e;
  e.name = "allreduce";
  e.category = "comm";
  e.start_s = 1.0;
  e.end_s = 1.001;
  e.bytes = 4 << 20;
  e.seq = 57;
  e.detail = "ring";
  return e;
}

// Telemetry off: one relaxed load and a branch, in and out.
void BM_SpanDisabled(benchmark::State& state) {
  Recorder::instance().disable();
  for (auto _ : state) {
    Span s("forward", "compute");
    benchmark::ClobberMemory();
  }
  per_span(state, state.iterations());
}
BENCHMARK(BM_SpanDisabled);

// Telemetry on, flight-recorder ring only (trace off): two clock reads and
// the ring write.
void BM_SpanRingOnly(benchmark::State& state) {
  Recorder::instance().enable(4096, false);
  for (auto _ : state) {
    Span s("forward", "compute");
    benchmark::ClobberMemory();
  }
  per_span(state, state.iterations());
}
BENCHMARK(BM_SpanRingOnly)->Threads(1)->Threads(2);

// Telemetry on with the trace (the default), drain included every kBatch
// spans: the full cost of a span on the recording thread.
void BM_SpanWithTrace(benchmark::State& state) {
  Recorder& rec = Recorder::instance();
  rec.enable(4096, true);
  (void)rec.drain();
  int n = 0;
  for (auto _ : state) {
    { Span s("forward", "compute"); }
    if (++n == kBatch) {
      benchmark::DoNotOptimize(rec.drain());
      n = 0;
    }
  }
  (void)rec.drain();
  per_span(state, state.iterations());
}
BENCHMARK(BM_SpanWithTrace);

// record() of a finished event (the comm lane, I/O): no clock reads; trace
// queue drained outside the timing.
void BM_Record(benchmark::State& state) {
  Recorder& rec = Recorder::instance();
  rec.enable(4096, true);
  const SpanEvent e = sample_event();
  int n = 0;
  for (auto _ : state) {
    rec.record(e);
    if (++n == kBatch) {
      state.PauseTiming();
      benchmark::DoNotOptimize(rec.drain());
      state.ResumeTiming();
      n = 0;
    }
  }
  (void)rec.drain();
  per_span(state, state.iterations());
}
BENCHMARK(BM_Record);

// drain() per span: kBatch spans recorded (not timed), then drained.
void BM_DrainPerSpan(benchmark::State& state) {
  Recorder& rec = Recorder::instance();
  rec.enable(4096, true);
  (void)rec.drain();
  const SpanEvent e = sample_event();
  for (auto _ : state) {
    state.PauseTiming();
    for (int i = 0; i < kBatch; ++i) rec.record(e);
    state.ResumeTiming();
    benchmark::DoNotOptimize(rec.drain());
  }
  per_span(state, state.iterations() * kBatch);
}
BENCHMARK(BM_DrainPerSpan);

// Drained spans formatted into the rank's trace file, per span: what the
// training thread pays between steps on top of recording.
void BM_TraceWritePerSpan(benchmark::State& state) {
  const auto path = std::filesystem::temp_directory_path() / ("telemetry-bench-" + std::to_string(getpid()) + ".json");
  {
    TraceWriter writer(path.string(), 0, 0.0);
    const std::vector<SpanEvent> spans(kBatch, sample_event());
    for (auto _ : state) writer.write(spans);
    per_span(state, state.iterations() * kBatch);
  }
  std::filesystem::remove(path);
}
BENCHMARK(BM_TraceWritePerSpan);

// The flight recorder's read: recent(n) over this process's rings.
void BM_Recent(benchmark::State& state) {
  Recorder& rec = Recorder::instance();
  rec.enable(4096, true);
  const SpanEvent e = sample_event();
  for (int i = 0; i < 4096; ++i) rec.record(e);
  (void)rec.drain();
  for (auto _ : state) benchmark::DoNotOptimize(rec.recent(static_cast<size_t>(state.range(0))));
}
BENCHMARK(BM_Recent)->Arg(64)->Arg(4096);

}  // namespace
}  // namespace shardtrain::telemetry

BENCHMARK_MAIN();
