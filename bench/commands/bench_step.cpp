#include "bench/commands/bench_step.h"

#include "bench/commands/bench_stats.h"

#include "io/sampler.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_replay.h"
#include "kernels/cpu/onednn_conv.h"
#include "runtime/core/clock.h"
#include "runtime/core/rng.h"
#include "runtime/train/session.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <optional>

namespace shardtrain::train {
namespace {

using bench::median;

// Buffers for replaying one recorded oneDNN convolution pass.
struct ConvReplay {
  cpu::ConvCall call;
  std::vector<float> in, weight, bias, out, din, dweight, dbias;
  explicit ConvReplay(const cpu::ConvCall& c) : call(c) {
    const kernels::Conv2dShape& s = c.shape;
    Rng rng(stream_key(11, uint64_t(s.B * s.C), uint64_t(s.OC * 131 + s.H)));
    auto filled = [&](int64_t n) {
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = rng.uniform(-1, 1);
      return v;
    };
    in = filled(s.B * s.C * s.H * s.W);
    weight = filled(s.OC * s.C * s.K * s.K);
    bias = filled(s.OC);
    out = filled(s.B * s.OC * s.OH() * s.OW());  // the output's gradient in a backward pass
    dweight.resize(weight.size());
    dbias.resize(bias.size());
    if (c.backward && c.input_gradient) din.resize(in.size());
  }
  void run() {
    if (!call.backward && call.in_its_layout)
      return cpu::onednn_conv_forward_in_its_layout(in.data(), weight.data(), bias.data(), call.shape);
    if (!call.backward) return cpu::onednn_conv_forward(out.data(), in.data(), weight.data(), bias.data(), call.shape);
    cpu::onednn_conv_backward(din.empty() ? nullptr : din.data(), dweight.data(), dbias.data(), out.data(), in.data(),
                              weight.data(), call.shape, false);
  }
};

}  // namespace

int bench_step(const Config& config, const BenchStepOptions& opt) {
  ST_CHECK(opt.steps > 0 && opt.rounds > 0 && opt.warmup >= 0, "bench step: --steps and --rounds must be positive");
  Config in_memory = config;  // the step is measured with its data in memory
  in_memory.data.loader.mode = io::LoaderMode::memory;
  in_memory.parallel.strategy = "none";  // one process: the step alone
  Session s = make_session(in_memory);
  const std::unique_ptr<parallel::Strategy> none =
      parallel::make_strategy_spec(in_memory.parallel)->start(*s.model, nullptr);
  make_optimizer(s, in_memory, *none);
  io::Sampler sampler(s.train_data.size(), config.train.global_batch_size, 0, 1, uint64_t(config.train.seed));
  StepBuffers buffers = make_step_buffers(s, sampler.local_batch());
  int64_t next = 0;
  auto step = [&] {  // exactly the trainer's step: gather the batch, then train on it
    const int64_t i = next++;
    sampler.batch_indices(i / sampler.batches_per_epoch(), i % sampler.batches_per_epoch(), buffers.indices);
    buffers.next_input();
    gather_batch(s, buffers, sampler.local_batch());
    train_step(*s.model, *s.optimizer, buffers, config.optim.lr, config.clip_grad_norm, config.train.global_batch_size,
               config.train.accumulation_steps, *none);
  };

  for (int i = 0; i < opt.warmup; ++i) step();
  std::optional<cpu::GemmReplay> gemms;
  std::vector<ConvReplay> conv_replays;
  double flops = 0.0;
  {
    cpu::GemmRecorder recorder;
    step();
    gemms.emplace(recorder.calls());
    for (const cpu::ConvCall& c : recorder.convs()) conv_replays.emplace_back(c);
    flops = recorder.flops();
  }
  auto replay = [&] {
    gemms->run();
    for (auto& r : conv_replays) r.run();
  };
  replay();  // warm the replay buffers

  std::vector<double> step_s, gemm_s;
  for (int round = 0; round < opt.rounds; ++round) {
    double t0 = now_seconds();
    for (int i = 0; i < opt.steps; ++i) step();
    step_s.push_back((now_seconds() - t0) / opt.steps);
    t0 = now_seconds();
    for (int i = 0; i < opt.steps; ++i) replay();
    gemm_s.push_back((now_seconds() - t0) / opt.steps);
  }
  const double st = median(step_s), gt = median(gemm_s);
  const double step_gflops = flops / st * 1e-9, gemm_gflops = flops / gt * 1e-9;

  fmt::print("bench step: {} (model {}, global batch {}, {} BLAS thread(s))\n", config.source,
             nn::model_name(config.model), config.train.global_batch_size, cpu::blas_threads());
  fmt::print("  CPU backend: {}\n", cpu::cpu_backend_summary());
  fmt::print("  GEMM calls per step (M x N x K, transposes, calls):\n");
  const std::vector<cpu::GemmCall>& calls = gemms->calls();
  for (size_t i = 0; i < calls.size();) {  // runs of identical shapes (conv: one per sample)
    size_t j = i;
    while (j < calls.size() && calls[j].M == calls[i].M && calls[j].N == calls[i].N && calls[j].K == calls[i].K &&
           calls[j].trans_a == calls[i].trans_a && calls[j].trans_b == calls[i].trans_b &&
           calls[j].batch == calls[i].batch)
      ++j;
    const cpu::GemmCall& c = calls[i];
    fmt::print("    {:>6} x {:>6} x {:>6}  {}{}  x{:<4} {:8.1f} MFLOP{}\n", c.M, c.N, c.K, c.trans_a ? "T" : "N",
               c.trans_b ? "T" : "N", j - i, c.flops() * 1e-6 * double(j - i),
               c.batch != 1 ? fmt::format("  (each call a batch of {})", c.batch) : "");
    i = j;
  }
  if (!conv_replays.empty()) {
    fmt::print("  oneDNN convolution passes per step (batch x channels x H x W -> out channels, kernel):\n");
    for (const ConvReplay& r : conv_replays) {
      const kernels::Conv2dShape& c = r.call.shape;
      fmt::print("    {:>4} x {:>4} x {:>3} x {:>3} -> {:>4}, {}x{}  {:<17} {:8.1f} MFLOP\n", c.B, c.C, c.H, c.W, c.OC,
                 c.K, c.K,
                 !r.call.backward        ? "forward"
                 : r.call.input_gradient ? "backward"
                                         : "backward (weights)",
                 r.call.flops() * 1e-6);
    }
  }
  fmt::print("  GEMMs replayed on {} buffer(s), {:.1f} MB: the step's memory they touched, at the step's offsets\n",
             gemms->buffers(), double(gemms->bytes()) * 1e-6);
  fmt::print("  model FLOPs per step     {:.1f} MFLOP\n", flops * 1e-6);
  fmt::print("  training step            {:8.3f} ms  {:7.1f} GFLOP/s   (median of {} rounds x {} steps)\n", st * 1e3,
             step_gflops, opt.rounds, opt.steps);
  fmt::print("  same products alone      {:8.3f} ms  {:7.1f} GFLOP/s\n", gt * 1e3, gemm_gflops);
  fmt::print("  step / products          {:8.1f} %\n", 100.0 * step_gflops / gemm_gflops);

  if (!opt.json_path.empty()) {
    nlohmann::json j = {{"config", config.source},
                        {"model", nn::model_name(config.model)},
                        {"global_batch_size", config.train.global_batch_size},
                        {"blas_threads", cpu::blas_threads()},
                        {"cpu_backend", cpu::cpu_backend_summary()},
                        {"model_flops_per_step", flops},
                        {"step_time_s", st},
                        {"gemm_time_s", gt},
                        {"step_gflops", step_gflops},
                        {"gemm_gflops", gemm_gflops},
                        {"ratio", step_gflops / gemm_gflops},
                        {"rounds", opt.rounds},
                        {"steps_per_round", opt.steps}};
    std::ofstream(opt.json_path) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace shardtrain::train
