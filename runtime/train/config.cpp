#include "runtime/train/config.h"

#include "runtime/core/dtype_names.h"
#include "runtime/core/error.h"

#include <fmt/ranges.h>

#include <toml++/toml.h>

#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace shardtrain::train {
namespace {

// ---- one schema entry per key -------------------------------------------------

struct Field {
  std::string key;   // dotted path, e.g. "train.epochs"
  std::string type;  // for messages and docs
  std::string doc;
  std::function<void(Config&, const toml::node&)> set;  // throws "expected ..."
  std::function<std::string(const Config&)> show;       // the value as TOML
};

std::string node_type(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::string: return "a string";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date/time";
  }
}

std::string render(const toml::node& n) {
  std::ostringstream os;
  n.visit([&](auto&& v) { os << v; });
  return os.str();
}

[[noreturn]] void wrong_type(const char* expected, const toml::node& n) {
  throw Error(fmt::format("expected {}, got {} ({})", expected, node_type(n), render(n)));
}

template <typename T>
struct Convert;
// Convert<T>: from a TOML node (type-checked) and to TOML text. Values are
// written with fmt's shortest round-trip formatting (0.05, not 0.0500000007).
template <>
struct Convert<int64_t> {
  static constexpr const char* name = "integer";
  static int64_t from(const toml::node& n) {
    if (auto v = n.value_exact<int64_t>()) return *v;
    wrong_type("an integer", n);
  }
  static std::string show(int64_t v) { return fmt::format("{}", v); }
};
template <>
struct Convert<int> {
  static constexpr const char* name = "integer";
  static int from(const toml::node& n) {
    const int64_t v = Convert<int64_t>::from(n);
    if (v < INT32_MIN || v > INT32_MAX) wrong_type("a 32-bit integer", n);
    return int(v);
  }
  static std::string show(int v) { return fmt::format("{}", v); }
};
template <>
struct Convert<double> {
  static constexpr const char* name = "float";
  static double from(const toml::node& n) {
    // inf and nan are TOML floats; no key of ours means them.
    if (n.is_floating_point() || n.is_integer()) {
      if (const std::optional<double> v = n.value<double>(); v && std::isfinite(*v)) return *v;
    }
    wrong_type("a finite number", n);
  }
  static std::string show(double v) {
    std::string s = fmt::format("{}", v);
    if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // TOML floats need a point
    return s;
  }
};
template <>
struct Convert<float> {
  static constexpr const char* name = "float";
  static float from(const toml::node& n) { return float(Convert<double>::from(n)); }
  static std::string show(float v) {
    std::string s = fmt::format("{}", v);
    if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
    return s;
  }
};
template <>
struct Convert<bool> {
  static constexpr const char* name = "boolean";
  static bool from(const toml::node& n) {
    if (auto v = n.value_exact<bool>()) return *v;
    wrong_type("a boolean (true or false)", n);
  }
  static std::string show(bool v) { return v ? "true" : "false"; }
};
template <>
struct Convert<std::string> {
  static constexpr const char* name = "string";
  static std::string from(const toml::node& n) {
    if (auto v = n.value_exact<std::string>()) return *v;
    wrong_type("a string", n);
  }
  static std::string show(const std::string& v) {
    std::ostringstream os;
    os << toml::value<std::string>(v);  // quoted and escaped as TOML
    return os.str();
  }
};
template <>
struct Convert<std::vector<int64_t>> {
  static constexpr const char* name = "array of integers";
  static std::vector<int64_t> from(const toml::node& n) {
    const toml::array* a = n.as_array();
    if (!a) wrong_type("an array of integers", n);
    std::vector<int64_t> out;
    for (const toml::node& e : *a) {
      auto v = e.value_exact<int64_t>();
      if (!v) wrong_type("an array of integers", n);
      out.push_back(*v);
    }
    return out;
  }
  static std::string show(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }
};

// A table of numbers: a custom model's options (model_registry.h).
template <>
struct Convert<std::map<std::string, double>> {
  static constexpr const char* name = "table of numbers";
  static std::map<std::string, double> from(const toml::node& n) {
    const toml::table* t = n.as_table();
    if (!t) wrong_type("a table of numbers, e.g. { width = 256 }", n);
    std::map<std::string, double> out;
    for (auto&& [k, v] : *t) {
      try {
        out[std::string(k.str())] = Convert<double>::from(v);
      } catch (const Error& e) {
        throw Error(fmt::format("{}: {}", k.str(), e.what()));
      }
    }
    return out;
  }
  static std::string show(const std::map<std::string, double>& v) {
    std::vector<std::string> items;
    items.reserve(v.size());
    for (const auto& [k, x] : v) items.push_back(fmt::format("{} = {}", k, Convert<double>::show(x)));
    return items.empty() ? "{}" : fmt::format("{{ {} }}", fmt::join(items, ", "));
  }
};

// An enum with an enum_names table (runtime/core/enum_names.h): a string
// naming one of its values.
template <typename E>
requires NamedEnum<E>
struct Convert<E> {
  static constexpr const char* name = "string";
  static E from(const toml::node& n) {
    const std::string s = Convert<std::string>::from(n);
    if (const std::optional<E> v = parse_enum<E>(s)) return *v;
    throw Error(fmt::format("\"{}\" is not one of {}", s, enum_choices<E>()));
  }
  static std::string show(E v) { return Convert<std::string>::show(std::string(name_of(v))); }
};

template <typename Ref>
Field field(std::string key, std::string doc, Ref ref) {
  using T = std::remove_cvref_t<decltype(ref(std::declval<Config&>()))>;
  Field f;
  f.key = std::move(key);
  f.type = Convert<T>::name;
  f.doc = std::move(doc);
  f.set = [ref](Config& c, const toml::node& n) { ref(c) = Convert<T>::from(n); };
  f.show = [ref](const Config& c) { return Convert<T>::show(ref(const_cast<Config&>(c))); };
  return f;
}

#define KEY(key, doc, member) \
  field(                      \
      key, doc, [](Config & c) -> auto& { return c.member; })

// How a job is watched, checkpointed, made to fail and where it runs: the
// table's second half, apart so that neither function outgrows the size
// limit. Its order is the order of docs/config.md.
std::vector<Field> run_fields() {
  // clang-format off
  return {
      KEY("telemetry.enabled", "Per-step records of every rank, trace, summary, MLPerf log, flight recorder (docs/telemetry.md).", telemetry.enabled),
      KEY("telemetry.trace", "Also write the span trace (trace.json, Chrome trace format).", telemetry.trace),
      KEY("telemetry.mlperf_org", "The MLPerf log's submission_org: your organization.", telemetry.mlperf_org),
      KEY("telemetry.mlperf_platform", "The MLPerf log's submission_platform. Empty: the ranks, the device and the host's CPU, e.g. \"2x cpu (Intel(R) Xeon(R) Processor)\".", telemetry.mlperf_platform),
      KEY("telemetry.mlperf_division", "The MLPerf log's submission_division: `\"open\"` or `\"closed\"` (the reference models are no MLPerf benchmark: open).", telemetry.mlperf_division),
      KEY("telemetry.mlperf_status", "The MLPerf log's submission_status: `\"available\"`, `\"preview\"` or `\"research\"`.", telemetry.mlperf_status),
      KEY("telemetry.straggler_threshold", "A rank is a straggler when its median busy step time exceeds the median over ranks by more than this fraction.", telemetry.straggler_threshold),
      KEY("telemetry.op_timing", "Time every op by class (linear, attention, norm, ..., copy; on a GPU by events around its kernels): each step record's `ops`, result.json's `op_timing` and a table in the summary (docs/telemetry.md). It waits for the GPU at each step's end, so steps take a little longer than without it.", telemetry.op_timing),
      KEY("telemetry.flight_spans", "Spans per thread kept in memory for the flight recorder.", telemetry.flight_spans),

      KEY("checkpoint.every_steps", "Write a sharded checkpoint every this many steps and at the end of training (0 = never). Every rank writes its shard into one HDF5 file over MPI-IO (docs/formats.md); `shardtrain train --resume auto` continues from the newest.", checkpoint.every_steps),
      KEY("checkpoint.keep", "Keep the newest this many checkpoints; older ones are deleted once a newer one is complete.", checkpoint.keep),
      KEY("checkpoint.dir", "Where checkpoints go (\"\": <run dir>/checkpoints).", checkpoint.dir),
      KEY("checkpoint.on_signal", "On SIGTERM, SIGINT or SIGUSR1 (preemption: Slurm sends SIGTERM before it kills a job), write a checkpoint of the step where every rank stops, also when `every_steps` is 0. With `every_steps` > 0 that checkpoint is written anyway. The job then ends with status 75 and result.json says \"preempted\"; `--resume auto` continues from it.", checkpoint.on_signal),
      KEY("checkpoint.signal_grace_s", "After such a signal, the seconds the job has to finish its step and write that checkpoint; past them it ends without it and says so (keep it below the scheduler's grace: Slurm's KillWait, 30 s by default).", checkpoint.signal_grace_s),

      KEY("debug.slow_rank", "Fault injection for checking a diagnosis: the rank to slow down (-1: none).", debug.slow_rank),
      KEY("debug.slow_compute_ms", "Extra compute time per step on debug.slow_rank.", debug.slow_compute_ms),
      KEY("debug.slow_data_ms", "Extra wait for each batch on debug.slow_rank (a storage stall).", debug.slow_data_ms),
      KEY("debug.slow_comm_ms", "Extra time in debug.slow_rank's gradient collectives per step.", debug.slow_comm_ms),
      KEY("debug.fail_step", "Fault injection: debug.slow_rank fails with an error at this step (-1: never), to check that a job with one failing rank ends at once, with that rank's message and the flight records, instead of hanging.", debug.fail_step),
      KEY("debug.kill_step", "Fault injection: debug.slow_rank kills itself (SIGKILL) when it has done this many steps (-1: never): a preempted or crashed job, for testing --resume.", debug.kill_step),
      KEY("debug.kill_in_checkpoint", "Fault injection: debug.slow_rank kills itself (SIGKILL) in the middle of writing the checkpoint of this step (-1: never): the previous checkpoint must stay loadable.", debug.kill_in_checkpoint),

      KEY("runtime.blas_threads", "OpenBLAS threads per rank (one rank per core is the default layout).", runtime.blas_threads),
      KEY("runtime.cpu_backend", "What computes convolutions and matrix products on the CPU: `\"auto\"` (convolutions through oneDNN's direct kernels; bf16 matrix products through oneDNN where the CPU has its bf16 kernels, AVX512-BF16 or AMX, f32 ones where it has its AVX-512 kernels (but for a convolution oneDNN has no direct kernel for, whose im2col products stay on OpenBLAS), else OpenBLAS), `\"onednn\"` (convolutions and f32 products through oneDNN, bf16 products too where the CPU has its bf16 kernels) or `\"openblas\"` (every product through OpenBLAS, convolutions as im2col + GEMM: the reference). Under `runtime.precision = \"bf16\"` convolutions go to oneDNN in bf16 where it has bf16 kernels for the CPU (AVX512-BF16 or AMX; the results in f32), else they run as im2col + GEMM on rounded operands, as does a convolution oneDNN has no direct kernel for. The run log's `[init] cpu:` line and `shardtrain info` say what computes what; oneDNN runs with `runtime.blas_threads` threads.", runtime.cpu_backend),
      KEY("runtime.device", "`\"cpu\"`; `\"cuda\"`: each rank trains on the GPU of its node-local rank (modulo the GPUs it sees), needs a build with the CUDA backend, and gradients travel over NCCL (comm.backend); `\"emulated\"`: an emulated accelerator for storage studies, as MLPerf Storage's: the input pipeline runs as in training and the compute is a wait of runtime.emulate's time per sample; nothing is trained or evaluated (docs/io.md).", runtime.device),
      KEY("runtime.emulate.compute", "`\"real\"`; `\"profile\"`: emulated compute for scaling studies on few cores (docs/scaling.md): with runtime.device = \"cpu\", each Block's forward and backward, the optimizer and the loss become waits of the per-Block profile runtime.emulate.profile names (times runtime.emulate.scale, in proportion to the rank's batch) while the strategy's collectives move the real bytes; the waits burn no CPU, so many ranks on a few cores communicate as ranks with their own accelerators would. Nothing is trained or evaluated.", runtime.emulate.compute),
      KEY("runtime.emulate.input", "emulated, data.loader = \"stream\": what the loader hands the accelerator. `\"floats\"`: each sample checked and converted to normalized floats on the host, as training does; `\"bytes\"`: checked and handed as stored, as a pipeline that converts on the accelerator would (and as MLPerf Storage's DLIO reads them): a quarter of the host memory for uint8 samples and no conversion on the host's cores (docs/io.md).", runtime.emulate.input),
      KEY("runtime.emulate.sample_ms", "emulated: the accelerator's compute per sample, ms (a step waits this times the rank's share of the batch).", runtime.emulate.sample_ms),
      KEY("runtime.emulate.profile", "emulated: a run directory whose measured compute per sample (the median over its steps' records) is the accelerator's time, instead of sample_ms; with runtime.emulate.compute = \"profile\": a per-Block compute profile (JSON: forward and backward seconds per Block, optimizer_s, other_s, batch; what `shardtrain study` writes as calibration/compute-*.json).", runtime.emulate.profile),
      KEY("runtime.emulate.scale", "emulated: multiplies the profile's time (0.5: an accelerator twice as fast as the profiled one).", runtime.emulate.scale),
      KEY("runtime.gpu_linear", "How linear layers run on the GPU: `\"cublaslt\"` (cuBLASLt GEMMs with the bias added, and the bias gradient computed, in their epilogues) or `\"cublas\"` (cuBLAS GEMMs and separate bias kernels: the reference).", runtime.gpu_linear),
      KEY("runtime.gpu_attention", "How attention runs on the GPU: `\"cudnn\"` (with `runtime.gpu_gemm` = `\"bf16\"`, cuDNN's fused flash attention: bf16 Q, K, V, f32 softmax statistics, grouped-query heads, no T x T probabilities in memory; cuDNN 9 is loaded at run time, and where it is missing or declines the shape a warning says so; at f32 and tf32, and where cuDNN declines, the tiled kernel runs), `\"tiled\"` (shardtrain's flash attention kernel at every precision, f32 math: a log-sum-exp per row kept, nothing of T x T) or `\"materialized\"` (the f32 probabilities kept for the backward: the reference, for multi-head attention; grouped-query attention runs tiled).", runtime.gpu_attention),
      KEY("runtime.cuda_graphs", "On a GPU, replay each micro-batch's forward, loss and backward as a CUDA graph: captured at the second step, replayed from the third (one launch instead of hundreds); with parallel.strategy = \"none\" the last micro-batch's graph holds the gradient clipping and the optimizer's update too (the learning rate and step count read from device memory written before each replay). Applies with parallel.strategy = \"none\", to DDP's and ZeRO-1's no_sync micro-batches (all but the last of train.accumulation_steps; the last communicates during its backward, as FSDP's always do, and runs eagerly), and without telemetry.op_timing; memory that moves (an evaluation with a larger batch) makes new graphs, and a capture that fails turns graphs off with a warning. Off: every kernel launched each step, the reference.", runtime.cuda_graphs),
      KEY("runtime.gpu_gemm", "GEMM precision on the GPU at runtime.precision = `\"f32\"`: `\"f32\"`, `\"tf32\"` (tensor cores, 10-bit mantissa products) or `\"bf16\"` (bf16 operands, f32 accumulation).", runtime.gpu_gemm),
      KEY("runtime.precision", "`\"f32\"`: f32 activations, GEMMs as runtime.gpu_gemm says on a GPU and f32 on the CPU. `\"bf16\"`: mixed precision, as PyTorch's bf16 autocast: every GEMM takes bf16 operands (f32 accumulation) on either device, and a GPT's transformer blocks keep their activations in bf16 (the LayerNorm outputs, qkv, the attention output, the MLP's GELU input and output, and the gradients of qkv and of the GELU's input), as do a Llama's (the RMSNorm outputs, qkv, the attention output, gate_up and the SwiGLU output, and the gradients of qkv, gate_up and the SwiGLU output; the log-sum-exp of the attention stays f32; final test_loss within 2% of f32's, tests/integration/llama_checkpointing_test.sh), and so are the logits of a head made of a LayerNorm and linear layers (the GPT's, the MLP's), whose gradient the loss writes over them in bf16; parameters, their gradients, the optimizer's state, the residual stream, normalization statistics, the loss and every reduction stay f32. The other layers (the embedding, convolutions, ReLU blocks) run bf16 GEMMs on f32 activations. On the CPU each op widens bf16 values around its f32 kernel (`shardtrain plan` counts those copies), and the products run on oneDNN's bf16 kernels where the CPU has them (AMX, AVX512-BF16; `shardtrain info` says which): there a step can be faster than f32's, elsewhere it is slower. docs/BENCHMARKS.md compares the steps and the loss curve with f32's.", runtime.precision),
  };
  // clang-format on
}

const std::vector<Field>& schema() {
  // One row per key, kept on one line each so that the table reads as one.
  // clang-format off
  static const std::vector<Field> fields = [] {
    std::vector<Field> table = {
      KEY("run.dir", "Run directory (created). Empty: `runs/<config name>-<YYYYmmdd-HHMMSS>`.", run.dir),

      KEY("train.seed", "Seed of initialization and shuffling. Same seed and world size, same result bit for bit.", train.seed),
      KEY("train.epochs", "Passes over the training split.", train.epochs),
      KEY("train.max_steps", "Stop after this many optimizer steps (0 = no limit); the final evaluation still runs.", train.max_steps),
      KEY("train.global_batch_size", "Samples per optimizer step across all ranks (fixed whatever the world size). The last partial batch of an epoch is dropped or padded (data.last_batch).", train.global_batch_size),
      KEY("train.accumulation_steps", "Micro-batches per optimizer step: each rank splits its slice of the global batch into this many forward/backward passes and reduces gradients once (DDP's no_sync).", train.accumulation_steps),
      KEY("train.eval_batch_size", "Samples per forward pass during evaluation.", train.eval_batch_size),
      KEY("train.progress_every_s", "Seconds between progress lines on the terminal (0 = every step).", train.progress_every_s),

      KEY("data.train", "Training split: a directory of `part-NNNNN.h5` shards or one `.h5` file (docs/formats.md).", data.train),
      KEY("data.test", "Test split, evaluated every epoch.", data.test),
      KEY("data.train_limit", "Use only the first N training samples (0 = all).", data.train_limit),
      KEY("data.test_limit", "Use only the first N test samples (0 = all).", data.test_limit),
      KEY("data.loader", "`\"memory\"`: read the training split into memory first. `\"stream\"`: read it from the shard files during training, with parallel HDF5 and prefetching (for data larger than memory; docs/io.md).", data.loader.mode),
      KEY("data.prefetch_batches", "stream: batches read ahead of training (the queue's depth).", data.loader.prefetch_batches),
      KEY("data.transfer", "stream: HDF5 MPI-IO transfer mode, `\"independent\"` (cheapest for small samples in shuffled order) or `\"collective\"` (merges the ranks' interleaved reads into large ones: order = \"shard\", large samples); the mode HDF5 actually used is reported.", data.loader.transfer),
      KEY("data.read_engine", "stream: `\"auto\"` (the read pool where transfers are independent, else HDF5), `\"pool\"` (`reads_in_flight` readers with pread on the sample offsets HDF5 reports, for random reads at the storage's rate) or `\"hdf5\"` (one H5Dread per run of samples at a time, through MPI-IO; docs/io.md).", data.loader.read_engine),
      KEY("data.reads_in_flight", "stream, read pool: sample reads in flight per rank (its reader threads).", data.loader.reads_in_flight),
      KEY("data.direct_io", "stream, read pool: read the samples with O_DIRECT, past the page cache: `\"on\"`, `\"off\"` or `\"auto\"` (on in a global shuffle with cold_cache or of a split larger than the node's memory, where the cache only costs; docs/io.md).", data.loader.direct_io),
      KEY("data.cold_cache", "stream: drop the shard files' pages from the page cache after reading, so every epoch reads from storage (a small data set behaves like one larger than memory).", data.loader.cold_cache),
      KEY("data.verify_checksums", "Check every shard against its CRC-32 in manifest.json, train and test, before HDF5 opens any of them (the memory loader every shard, the stream loader each rank its share; the files are read once more), then every sample as it is read against its checksum in /crc32 (format version 2). A mismatch is an error naming the shard (and the samples); a split without a manifest, or of format version 1, is not checked so, and the [init] data line says so.", data.loader.verify_checksums),
      KEY("data.verify_files", "stream, with verify_checksums: read every shard whole at start to check its CRC-32 (before HDF5 parses it). False skips that pass, which reads a data set larger than memory once more at every job start; the samples are still checked as they are read (format version 2), the metadata HDF5 parses is not.", data.loader.verify_files),
      KEY("data.order", "Sampling order: `\"global\"` (a shuffle of all samples per epoch) or `\"shard\"` (shards in shuffled order, samples shuffled within a window: mostly sequential reads).", data.loader.order),
      KEY("data.shuffle_window", "order = \"shard\": samples shuffled together (0: one shard's worth).", data.loader.shuffle_window),
      KEY("data.last_batch", "The last partial global batch of an epoch: `\"drop\"` it, or `\"pad\"` it with samples from the start of the epoch's order.", data.loader.last_batch),

      KEY("model.kind", "`\"mlp\"`, `\"cnn\"`, `\"gpt\"` or `\"llama\"` (language models on windows of token ids: bytes of text from `shardtrain prep text`, or any vocabulary from `shardtrain prep tokens`, docs/formats.md; its test_loss and test_accuracy are per token: next-token cross-entropy and accuracy), or `\"custom\"`: a classifier a program of your own registered under model.name before it loaded the config (docs/custom-models.md; the shardtrain program registers none).", model.kind),
      KEY("model.name", "custom: the name the program registered the model under.", model.name),
      KEY("model.options", "custom: the numbers the registered model takes, as a table (`options = { width = 256, blocks = 3 }`, or `--set model.options.width=256`); a key it does not declare is an error, one left out takes its default.", model.options),
      KEY("model.hidden", "mlp: widths of the hidden layers (one Block each).", model.hidden),
      KEY("model.channels", "cnn: output channels of each conv-maxpool-relu stage (one Block each; pooling before the ReLU computes exactly what ReLU before pooling does, on a quarter of the elements).", model.channels),
      KEY("model.kernel_size", "cnn: square convolution kernel (odd; padded to keep height and width).", model.kernel_size),
      KEY("model.fc_hidden", "cnn: widths of hidden layers in the classifier head.", model.fc_hidden),
      KEY("model.n_layer", "gpt, llama: transformer Blocks.", model.n_layer),
      KEY("model.n_head", "gpt, llama: attention (query) heads (must divide n_embd).", model.n_head),
      KEY("model.n_embd", "gpt, llama: embedding channels.", model.n_embd),
      KEY("model.vocab_size", "gpt, llama: vocabulary (0: the data's num_classes, 256 for byte-level text). With block_size, enough for `shardtrain plan` to plan without data (when data.test is not at hand).", model.vocab_size),
      KEY("model.block_size", "gpt: positions of the position embedding (0: the data's T, a sample's length less one). llama: the longest sequence (0: the data's T). With vocab_size, `shardtrain plan` plans sequences of block_size tokens when data.test is not at hand.", model.block_size),
      KEY("model.n_kv_head", "llama: key/value heads, each shared by n_head / n_kv_head query heads (grouped-query attention; must divide n_head). 0: n_head (multi-head attention).", model.n_kv_head),
      KEY("model.ffn_hidden", "llama: SwiGLU's inner width. 0: 2/3 of 4 n_embd rounded up to a multiple of 256 (11008 for n_embd = 4096).", model.ffn_hidden),
      KEY("model.rope_theta", "llama: base of the rotary position embedding's frequencies.", model.rope_theta),
      KEY("model.norm_eps", "llama: RMSNorm's epsilon.", model.norm_eps),
      KEY("model.tie_embeddings", "llama: the head's weight is the token embedding (one [vocab, n_embd] parameter, held by the embedding Block; its gradient sums both uses). Not with parallel.strategy = \"fsdp\", which shards the two Blocks separately.", model.tie_embeddings),

      KEY("optim.kind", "`\"sgd\"` or `\"adamw\"`.", optim.kind),
      KEY("optim.lr", "Peak learning rate.", optim.lr),
      KEY("optim.weight_decay", "Weight decay on weight matrices and kernels (not on biases): L2 for sgd, decoupled for adamw.", optim.weight_decay),
      KEY("optim.momentum", "sgd: momentum (0 = none).", optim.momentum),
      KEY("optim.dampening", "sgd: dampening of the momentum.", optim.dampening),
      KEY("optim.nesterov", "sgd: Nesterov momentum.", optim.nesterov),
      KEY("optim.beta1", "adamw: first-moment decay.", optim.beta1),
      KEY("optim.beta2", "adamw: second-moment decay.", optim.beta2),
      KEY("optim.eps", "adamw: denominator epsilon.", optim.eps),
      KEY("optim.clip_grad_norm", "Clip the global gradient L2 norm to this value (0 = off).", clip_grad_norm),

      KEY("schedule.kind", "Learning-rate schedule after warmup: `\"constant\"`, `\"cosine\"` (to min_lr over the run) or `\"step\"`.", schedule.kind),
      KEY("schedule.warmup_steps", "Linear warmup steps from lr/warmup_steps to lr.", schedule.warmup_steps),
      KEY("schedule.min_lr", "cosine: final learning rate.", schedule.min_lr),
      KEY("schedule.step_size", "step: multiply the learning rate by gamma every this many steps after warmup.", schedule.step_size),
      KEY("schedule.gamma", "step: decay factor.", schedule.gamma),

      KEY("target.metric", "`\"test_accuracy\"` (reached when >= value) or `\"test_loss\"` (reached when <= value).", target.metric),
      KEY("target.value", "Stop as soon as an evaluation reaches it (0 = no target). Accuracy is a fraction: 0.88 means 88%.", target.value),

      KEY("parallel.strategy", "`\"none\"` (one rank), `\"ddp\"` (data parallel over all ranks), `\"zero1\"` (as ddp, with the optimizer state sharded over the ranks and the updated parameters all-gathered: ZeRO stage 1) or `\"fsdp\"` (parameters, gradients and optimizer state sharded over all ranks per Block, ZeRO-3).", parallel.strategy),
      KEY("parallel.fsdp.sharding", "FSDP: `\"full\"` (FULL_SHARD: gather a Block for forward, free it, gather again for backward) `\"grad_op\"` (SHARD_GRAD_OP: keep gathered Blocks from forward to backward) or `\"hybrid\"` (FULL_SHARD within each node, or each group of parallel.fsdp.shard_group_size ranks, replicated across them: gathers stay in the group, gradient shards are all-reduced across groups; nodes as comm.ranks_per_node says).", parallel.fsdp.mode),
      KEY("parallel.fsdp.param_dtype", "FSDP mixed precision: `\"bf16\"` gathers parameters in bf16 (half the bytes) and computes with them (GEMMs on bf16 operands, f32 accumulation: OpenBLAS's sbgemm where the library has it, else bf16-rounded operands through sgemm); the optimizer keeps f32 master weights in the shard. `\"f32\"`: everything in f32.", parallel.fsdp.param_dtype),
      KEY("parallel.fsdp.reduce_dtype", "FSDP: dtype gradients are reduce-scattered in, `\"f32\"` or `\"bf16\"` (half the bytes; summed in f32 per hop).", parallel.fsdp.reduce_dtype),
      KEY("parallel.fsdp.shard_group_size", "FSDP HYBRID: the ranks that share the shards, as groups of this many consecutive ranks (it must divide the job's ranks); their gradient shards are all-reduced across the groups. 0: the ranks of each node. Larger than a node: smaller shards, gathers that cross nodes; smaller: the other way.", parallel.fsdp.shard_group_size),
      KEY("parallel.fsdp.prefetch", "FSDP: all-gathers in flight ahead of the Block being computed (bounds the gathered Blocks held).", parallel.fsdp.prefetch),
      KEY("parallel.activation_checkpointing", "`\"none\"`, `\"selective\"` (keep the matrix products' outputs; recompute the norms, the attention core and the elementwise ops inside the backward, as Megatron-LM's selective recomputation) or `\"full\"` (keep each Block's input; run its forward again inside its backward). Llama Blocks; with every strategy (FSDP's gathered Block is there for the recompute), and gradient accumulation (on a GPU with runtime.cuda_graphs the recompute is captured as part of the Block's backward: not yet run on a GPU); results bit-identical to `\"none\"`. `shardtrain plan` counts it. Measured cost and savings, and the plans of Llama-2 7B, 13B and 70B: docs/BENCHMARKS.md, \"Llama Blocks, flash attention and activation checkpointing\".", parallel.activation_checkpointing),
      KEY("parallel.checkpoint_every", "Activation checkpointing of every k-th Llama Block (h0, hk, h2k, ...); the others keep everything.", parallel.checkpoint_every),
      KEY("parallel.ddp.bucket_mb", "DDP: gradient bucket size in MiB (whole Blocks, in reverse order).", parallel.ddp.bucket_mb),
      KEY("parallel.ddp.first_bucket_mb", "DDP: size of the first bucket (the last Blocks), small so that communication starts early.", parallel.ddp.first_bucket_mb),
      KEY("parallel.ddp.bucket_batch", "DDP: consecutive buckets issued together as one group (NCCL: one fused launch for the batch, which starts when its last bucket is ready; MPI already batches what is queued). 1 = each bucket as soon as it is complete.", parallel.ddp.bucket_batch),
      KEY("parallel.ddp.grad_dtype", "DDP: dtype gradients travel in, `\"f32\"` or `\"bf16\"` (half the bytes; accumulated in f32 per hop).", parallel.ddp.grad_dtype),

      KEY("comm.small_message_bytes", "Collectives up to this size use the MPI library's own algorithm; larger ones shardtrain's pipelined ring.", comm.small_message_bytes),
      KEY("comm.chunk_bytes", "Chunk size of the ring's pipeline; where no two ranks of a communicator share a node, at most 65,472 bytes (one message that Open MPI's TCP transport sends at once, docs/comm.md).", comm.chunk_bytes),
      KEY("comm.allreduce_algorithm", "`\"auto\"` (by size and topology), or force `\"shm\"`, `\"oneshot\"`, `\"mpi\"`, `\"ring\"` or `\"hierarchical\"` (docs/comm.md).", comm.allreduce_algorithm),
      KEY("comm.shared_memory", "All-reduce through a shared-memory window when all ranks of a communicator share a node (the fastest path at every size here); false falls back to point-to-point algorithms.", comm.shared_memory),
      KEY("comm.oneshot_bytes", "Without shared memory: all-reduces with (ranks - 1) x bytes up to this use the one-shot exchange.", comm.oneshot_bytes),
      KEY("comm.ranks_per_node", "0: nodes are the ranks sharing memory (the MPI library's view). k > 0: treat every k consecutive ranks as a node, to try hierarchical algorithms on one machine.", comm.ranks_per_node),
      KEY("comm.backend", "Gradient collectives with runtime.device = \"cuda\": `\"auto\"` (NCCL when libnccl.so.2 loads, else MPI with device buffers), `\"nccl\"` or `\"mpi\"` (CUDA-aware when the MPI library is, else staged through pinned host memory). CPU training always uses MPI.", comm.backend),
      KEY("comm.tuning", "How the MPI backend picks each collective's algorithm on the world communicator: `\"auto\"` (the tuning file cached for this topology, $XDG_CACHE_HOME or ~/.cache/shardtrain/comm-tuning-KEY.json, if there is one: `shardtrain bench comm --tune-algorithms` measures one; without one, a job over several nodes probes the algorithms at start, within comm.probe_budget_s, and caches what it measured; on one node the thresholds above), `\"probe\"` (probe at start whatever the cache holds; nothing written), `\"off\"` (by size: the thresholds above), or a tuning file's path (which must have been measured on this job's topology). A forced comm.allreduce_algorithm wins over each.", comm.tuning),
      KEY("comm.probe_budget_s", "The most the job-start probes of comm.tuning may take, in seconds: they time 4 KiB and every 4x up to 16 MiB, and stop before a size whose estimate would pass this. 0: no probes.", comm.probe_budget_s),
      KEY("comm.timeout_s", "A collective not complete after this many seconds ends the job, at that moment, with a message naming the operation and the ranks that never arrived. Set it above the longest collective the job can take on its slowest link: the watchdog measures time, not progress.", comm.timeout_s),

      KEY("io.stage.enabled", "Copy the training shards to io.stage.cache_dir in the background while training; read each shard from the cache once it is there and verified (docs/io.md).", io.stage.enabled),
      KEY("io.stage.cache_dir", "Local cache directory (e.g. on NVMe).", io.stage.cache_dir),
      KEY("io.stage.rate_mb_s", "Copy rate limit in MB/s (0 = unlimited).", io.stage.rate_mb_s),
      KEY("io.stage.block_kib", "Block size of the copy's writes, KiB.", io.stage.block_kib),
      KEY("io.stage.capacity_gb", "Evict least recently used shards when the cache holds more than this (0 = no limit).", io.stage.capacity_gb),
      KEY("io.stage.verify", "Check every copied shard against the manifest's checksum.", io.stage.verify),
      KEY("io.s3.endpoint", "The S3 endpoint for s3:// splits (data.train or data.test = \"s3://bucket/prefix\", fetched into io.stage.cache_dir before training). Empty: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the AWS config file's endpoint_url, else AWS's own. Keys come from the environment or the AWS files (docs/io.md).", io.stage.s3.endpoint),
      KEY("io.s3.region", "The region requests are signed for. Empty: AWS_REGION, AWS_DEFAULT_REGION, the AWS config file, else us-east-1.", io.stage.s3.region),
      KEY("io.s3.connections", "Ranged GETs in flight per object.", io.stage.s3.connections),
      KEY("io.s3.part_mib", "Bytes per ranged GET, MiB; and per part of a multipart upload (`shardtrain upload`: at least 5 MiB, S3's smallest part).", io.stage.s3.part_mib),
      KEY("io.s3.retries", "Retries of a request after a transient failure (no connection, a cut transfer, HTTP 408, 429, 500, 502, 503, 504), with exponential backoff.", io.stage.s3.retries),
      KEY("io.stage.direct_io", "Copy with O_DIRECT, past the page cache: the copy neither evicts training's pages nor leaves dirty ones to write back (io.stage.block_kib in whole 4 KiB blocks).", io.stage.direct_io),

      KEY("io.peer_cache.dir", "A cache tier shared by the job's nodes: each of N nodes holds every N-th shard of data.train in this node-local directory (`%h`: the host name, `%n`: the node's index), copied once from data.train at start (verified copies found there are kept; an s3:// data.train: each node fetches its share from the store); a rank reads the other nodes' shards from them over MPI, so the shared store is read once per job. Empty: off. Needs the read pool (docs/io.md).", data.loader.peer_cache_dir),
      KEY("io.peer_cache.ranks_per_node", "0: the ranks sharing memory are a node (MPI's view). k > 0: every k consecutive ranks are a node (to try the tier on one machine).", data.loader.peer_ranks_per_node),
  };
  for (Field& f : run_fields()) table.push_back(std::move(f));
  return table;
  }();
  // clang-format on
  return fields;
}

#undef KEY

// ---- validation --------------------------------------------------------------

std::string join(const std::set<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// Walks the parsed table; every leaf must be a schema key. The valid names at
// a level are the next components of the schema keys under that prefix.
void check_known_keys(const toml::table& table, const std::string& prefix) {
  std::set<std::string> valid;
  for (const Field& f : schema()) {
    if (f.key.compare(0, prefix.size(), prefix) != 0) continue;
    std::string rest = f.key.substr(prefix.size());
    valid.insert(rest.substr(0, rest.find('.')));
  }
  for (auto&& [k, node] : table) {
    const std::string name(k.str());
    const std::string path = prefix + name;
    if (!valid.count(name)) {
      if (prefix.empty()) throw Error(fmt::format("unknown section [{}]; valid sections: {}", name, join(valid)));
      throw Error(fmt::format("unknown config key {}; valid keys in [{}]: {}", path,
                              prefix.substr(0, prefix.size() - 1), join(valid)));
    }
    bool is_leaf = false;
    for (const Field& f : schema()) is_leaf |= (f.key == path);
    if (!is_leaf) {
      const toml::table* sub = node.as_table();
      if (!sub) throw Error(fmt::format("config key {} must be a table [{}]", path, path));
      check_known_keys(*sub, path + ".");
    }
  }
}

void require(bool ok, const std::string& message) {
  if (!ok) throw Error(message);
}

void validate(const Config& c, bool for_plan) {
  require(c.train.seed >= 0, fmt::format("train.seed must not be negative, got {}", c.train.seed));
  require(c.train.epochs >= 1, fmt::format("train.epochs must be at least 1, got {}", c.train.epochs));
  require(c.train.max_steps >= 0, fmt::format("train.max_steps must not be negative, got {}", c.train.max_steps));
  require(c.train.global_batch_size >= 1,
          fmt::format("train.global_batch_size must be at least 1, got {}", c.train.global_batch_size));
  require(c.train.eval_batch_size >= 1,
          fmt::format("train.eval_batch_size must be at least 1, got {}", c.train.eval_batch_size));
  require(c.train.progress_every_s >= 0, "train.progress_every_s must not be negative");
  require(!c.telemetry.mlperf_org.empty(), "telemetry.mlperf_org must not be empty (the MLPerf log needs one)");
  require(
      c.telemetry.mlperf_division == "open" || c.telemetry.mlperf_division == "closed",
      fmt::format("telemetry.mlperf_division must be \"open\" or \"closed\", got \"{}\"", c.telemetry.mlperf_division));
  require(c.telemetry.mlperf_status == "available" || c.telemetry.mlperf_status == "preview" ||
              c.telemetry.mlperf_status == "research",
          fmt::format("telemetry.mlperf_status must be \"available\", \"preview\" or \"research\", got \"{}\"",
                      c.telemetry.mlperf_status));
  require(!c.data.train.empty(), "data.train is empty: give the training split's directory or file");
  require(!c.data.test.empty(), "data.test is empty: give the test split's directory or file");
  require(c.data.train_limit >= 0 && c.data.test_limit >= 0,
          "data.train_limit and data.test_limit must not be negative");
  // Each layer's options through its own check: a limit lives in one place.
  io::validate(c.data.loader);
  io::validate(c.io.stage);
  require(!c.io.stage.enabled || c.data.loader.mode == io::LoaderMode::stream,
          "io.stage.enabled needs data.loader = \"stream\"");
  require(!c.io.stage.enabled || c.data.loader.peer_cache_dir.empty(),
          "io.stage.enabled and io.peer_cache.dir are two cache tiers: choose one (io.stage: every node holds "
          "every shard; io.peer_cache: each node holds its share and serves the others)");
  require(c.data.train_limit == 0 || c.data.loader.mode == io::LoaderMode::memory,
          "data.train_limit works with data.loader = \"memory\" only (stream the whole split, or write a "
          "smaller one)");
  nn::validate(c.model);
  optim::validate(c.optim);
  optim::validate(c.schedule, c.optim.lr);
  comm::validate(c.comm);
  parallel::validate(c.parallel.ddp);
  parallel::validate(c.parallel.fsdp);
  require(!c.model.tie_embeddings || (c.model.kind == nn::ModelKind::llama && c.parallel.strategy != "fsdp"),
          fmt::format("model.tie_embeddings = true needs model.kind = \"llama\" and a strategy other than fsdp (got "
                      "model.kind \"{}\", parallel.strategy \"{}\"): FSDP shards the embedding and the head, which "
                      "would share the weight, as separate Blocks",
                      c.model.kind, c.parallel.strategy));
  require(c.parallel.checkpoint_every >= 1,
          fmt::format("parallel.checkpoint_every must be at least 1, got {}", c.parallel.checkpoint_every));
  require(c.parallel.activation_checkpointing == nn::Recompute::none || c.model.kind == nn::ModelKind::llama,
          fmt::format("parallel.activation_checkpointing = \"{}\" needs model.kind = \"llama\" (the Blocks that "
                      "recompute); model.kind is \"{}\"",
                      c.parallel.activation_checkpointing, c.model.kind));
  parallel::make_strategy_spec(c.parallel);  // an Error naming the valid strategies
  require(c.clip_grad_norm >= 0, "optim.clip_grad_norm must not be negative");
  require(c.target.value >= 0, fmt::format("target.value must not be negative, got {}", c.target.value));
  require(c.target.metric != TargetMetric::test_accuracy || c.target.value <= 1.0,
          fmt::format("target.value {} is above 1: accuracy is a fraction (0.88 means 88%)", c.target.value));
  require(c.train.accumulation_steps >= 1,
          fmt::format("train.accumulation_steps must be at least 1, got {}", c.train.accumulation_steps));
  require(c.telemetry.straggler_threshold > 0,
          fmt::format("telemetry.straggler_threshold must be positive, got {}", c.telemetry.straggler_threshold));
  require(c.telemetry.flight_spans >= 1, "telemetry.flight_spans must be at least 1");
  require(c.debug.slow_rank >= -1, "debug.slow_rank must be a rank, or -1 for none");
  require(c.debug.fail_step >= -1, "debug.fail_step must be a step, or -1 for never");
  require(c.debug.kill_step >= -1 && c.debug.kill_in_checkpoint >= -1,
          "debug.kill_step and debug.kill_in_checkpoint must be steps, or -1 for never");
  require(c.checkpoint.every_steps >= 0, "checkpoint.every_steps must not be negative (0 = no checkpoints)");
  require(c.checkpoint.keep >= 1, "checkpoint.keep must be at least 1");
  require(c.checkpoint.signal_grace_s > 0,
          fmt::format("checkpoint.signal_grace_s must be positive, got {}", c.checkpoint.signal_grace_s));
  require(c.debug.slow_compute_ms >= 0 && c.debug.slow_data_ms >= 0 && c.debug.slow_comm_ms >= 0,
          "debug.slow_compute_ms, slow_data_ms and slow_comm_ms must not be negative");
  require(for_plan || !(c.runtime.device == DeviceKind::cuda && c.parallel.strategy == "fsdp") ||
              unverified_gpu_fsdp_allowed(),
          "parallel.strategy = \"fsdp\" runs on the CPU only in this version (runtime.device = \"cuda\" "
          "supports \"none\" and \"ddp\"): FSDP's device path has not been checked on a GPU yet "
          "(tests/mpi/train_fsdp_device_mpi_test.cpp). To run it anyway, as scripts/gpu-check.sh does to "
          "check it, set SHARDTRAIN_UNVERIFIED_GPU_FSDP=1");
  validate(c.runtime.emulate);
  if (c.runtime.device == DeviceKind::emulated) {
    require(c.runtime.emulate.sample_ms > 0 || !c.runtime.emulate.profile.empty(),
            "runtime.device = \"emulated\" needs the accelerator's time: runtime.emulate.sample_ms, or "
            "runtime.emulate.profile (a run directory whose measured compute it takes)");
    require(!c.target.enabled() && c.checkpoint.every_steps == 0,
            "runtime.device = \"emulated\" trains nothing: unset target.value and checkpoint.every_steps");
  }
  require(c.runtime.emulate.input == EmulatedInput::floats ||
              (c.runtime.input_unread() && c.data.loader.mode == io::LoaderMode::stream),
          "runtime.emulate.input = \"bytes\" is an emulated accelerator's streamed input: it needs "
          "runtime.device = \"emulated\" and data.loader = \"stream\"");
  if (c.runtime.emulate.compute == EmulatedCompute::profile) {
    require(c.runtime.device == DeviceKind::cpu,
            fmt::format("runtime.emulate.compute = \"profile\" runs on runtime.device = \"cpu\", got \"{}\"",
                        name_of(c.runtime.device)));
    require(!c.runtime.emulate.profile.empty() && c.runtime.emulate.sample_ms == 0,
            "runtime.emulate.compute = \"profile\" needs runtime.emulate.profile (a per-Block compute profile) "
            "and no runtime.emulate.sample_ms");
    require(!c.target.enabled() && c.checkpoint.every_steps == 0,
            "runtime.emulate.compute = \"profile\" trains nothing: unset target.value and checkpoint.every_steps");
  }
  require(c.runtime.blas_threads >= 1,
          fmt::format("runtime.blas_threads must be at least 1, got {}", c.runtime.blas_threads));
}

// ---- overrides -----------------------------------------------------------------

// A config key of the schema, or a section holding some ("parallel.ddp").
bool known_key_or_section(const std::string& key) {
  for (const Field& f : schema())
    if (f.key == key || f.key.rfind(key + ".", 0) == 0) return true;
  return false;
}

// "~a.b.c": removes that key or table from the file's. A known one that is
// not there is no error (one command line removes a section from configs
// with and without it); an unknown one is (a misspelt removal would
// otherwise do nothing).
void apply_removal(toml::table& root, const std::string& arg) {
  const std::string key = arg.substr(1);
  toml::table* t = &root;
  size_t start = 0;
  for (size_t dot; t && (dot = key.find('.', start)) != std::string::npos; start = dot + 1) {
    toml::node* child = t->get(key.substr(start, dot - start));
    t = child ? child->as_table() : nullptr;
  }
  if ((!t || !t->erase(key.substr(start))) && !known_key_or_section(key))
    throw Error(fmt::format("--set {}: {} is no config key or section, so there is nothing to remove", arg, key));
}

// "a.b.c=value" into table; the value is TOML if it parses, else a string.
void apply_override(toml::table& root, const std::string& arg) {
  if (!arg.empty() && arg[0] == '~') return apply_removal(root, arg);
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error(fmt::format("--set {}: expected key=value, e.g. --set train.epochs=3", arg));
  const std::string key = arg.substr(0, eq), text = arg.substr(eq + 1);
  toml::table holder;  // holds the parsed value under "v"
  try {
    holder = toml::parse("v = " + text);
  } catch (const toml::parse_error&) {
    holder.insert_or_assign("v", text);
  }
  toml::table* t = &root;
  size_t start = 0;
  for (size_t dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1) {
    const std::string part = key.substr(start, dot - start);
    toml::node* child = t->get(part);
    if (!child) {
      t->insert(part, toml::table{});
      child = t->get(part);
    }
    t = child->as_table();
    if (!t) throw Error(fmt::format("--set {}: {} is not a table", arg, key.substr(0, dot)));
  }
  t->insert_or_assign(key.substr(start), std::move(*holder.get("v")));
}

void apply_leaves(Config& config, const toml::table& table, const std::string& prefix,
                  const std::set<std::string>& from_set, const std::string& file) {
  for (auto&& [k, node] : table) {
    const std::string path = prefix + std::string(k.str());
    const Field* field = nullptr;
    for (const Field& f : schema())
      if (f.key == path) field = &f;
    if (!field) {
      apply_leaves(config, *node.as_table(), path + ".", from_set, file);  // checked to be a table
      continue;
    }
    const std::string where = from_set.count(path) ? "--set " + path : file;
    const toml::node& value = node;  // clang 14 (clang-tidy) cannot capture a structured binding
    with_context(fmt::format("{}: config key {}", where, path), [&] { field->set(config, value); });
  }
}

// The strategies that read [parallel.`section`], as "\"ddp\" or \"zero1\"".
std::string strategies_reading(const std::string& section) {
  std::vector<std::string> names;
  parallel::ParallelOptions o;
  for (const std::string& name : parallel::strategy_names()) {
    o.strategy = name;
    if (parallel::make_strategy_spec(o)->options_section() == section) names.push_back("\"" + name + "\"");
  }
  return names.empty() ? "no strategy" : fmt::format("{}", fmt::join(names, " or "));
}

// Keys under [parallel.X] for a strategy that is not selected would be
// ignored without a word (a user who sets parallel.fsdp.prefetch and runs
// ddp believes FSDP was tuned): an error naming the key and where it was set.
// Another strategy's options: from --set an error (they would do nothing),
// from the file a notice (the file may serve several strategies).
void check_strategy_sections(Config& config, const toml::table& root, const std::set<std::string>& from_set,
                             const std::string& file) {
  const toml::table* parallel = root["parallel"].as_table();
  if (!parallel) return;
  const std::string used = parallel::make_strategy_spec(config.parallel)->options_section();
  for (auto&& [section, node] : *parallel) {
    const toml::table* options = node.as_table();
    if (!options || options->empty() || section.str() == used) continue;
    for (auto&& [key, value] : *options) {
      const std::string path = fmt::format("parallel.{}.{}", section.str(), key.str());
      if (from_set.count(path) == 0) continue;
      throw Error(fmt::format(
          "--set {}: config key {} applies to parallel.strategy {}, but the strategy is \"{}\": remove it, or "
          "select that strategy",
          path, path, strategies_reading(std::string(section.str())), config.parallel.strategy));
    }
    config.notices.push_back(fmt::format("{}: [parallel.{}] applies to parallel.strategy {}, not to \"{}\": not used",
                                         file, section.str(), strategies_reading(std::string(section.str())),
                                         config.parallel.strategy));
  }
}

}  // namespace

Config load_config(const std::string& path, const std::vector<std::string>& overrides, bool for_plan) {
  toml::table root;
  // toml++ reads a directory (or /dev/null) as an empty document: every key
  // at its default, silently.
  std::error_code ec;
  ST_CHECK(!std::filesystem::exists(path, ec) || std::filesystem::is_regular_file(path, ec),
           "{}: not a config file (a directory or a device); give a .toml file", path);
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    if (e.description().find("File could not be opened") != std::string_view::npos)
      throw Error(fmt::format("{}: cannot open the config file", path));
    throw Error(fmt::format("{}:{}:{}: {}", path, b.line, b.column, e.description()));
  }
  std::set<std::string> from_set;
  for (const std::string& arg : overrides) {
    apply_override(root, arg);
    from_set.insert(arg.substr(0, arg.find('=')));
  }
  Config config;
  config.source = path;
  with_context(path, [&] { check_known_keys(root, ""); });
  apply_leaves(config, root, "", from_set, path);
  with_context(path, [&] { validate(config, for_plan); });
  check_strategy_sections(config, root, from_set, path);
  return config;
}

bool unverified_gpu_fsdp_allowed() {
  const char* v = std::getenv("SHARDTRAIN_UNVERIFIED_GPU_FSDP");
  return v != nullptr && std::string(v) == "1";
}

std::string to_toml(const Config& config) {
  std::ostringstream os;
  std::string section;
  // Only the selected strategy's options: the others would be refused.
  const std::string used = "parallel." + parallel::make_strategy_spec(config.parallel)->options_section() + ".";
  for (const Field& f : schema()) {
    const bool strategy_option = f.key.rfind("parallel.", 0) == 0 && f.key != "parallel.strategy";
    if (strategy_option && f.key.rfind(used, 0) != 0) continue;
    const size_t dot = f.key.find('.');
    if (f.key.substr(0, dot) != section) {
      section = f.key.substr(0, dot);
      os << (os.tellp() > 0 ? "\n" : "") << "[" << section << "]\n";
    }
    os << f.key.substr(dot + 1) << " = " << f.show(config) << "\n";
  }
  return os.str();
}

std::string config_reference_markdown() {
  const Config defaults;
  std::ostringstream os;
  os << "# Configuration reference\n\n"
     << "<!-- Generated by `shardtrain config --reference`; a test checks that it is current. -->\n\n"
     << "A run is configured by a TOML file (see `examples/`), overridden on the command line "
        "with `--set key=value` (the value is parsed as TOML, and taken as a string where that "
        "fails: `--set train.epochs=3`, `--set optim.kind=adamw`, `--set model.hidden=[512,256]`). "
        "`--set '~key'` removes a key or a whole table of the file (`--set '~parallel.ddp'`; a "
        "known one the file does not set is no error). "
        "Every key is optional; unknown keys and values of the wrong type are errors that name "
        "the key. A section of options of a strategy that does not run (`[parallel.ddp]` with "
        "`--set parallel.strategy=fsdp`) is set aside with one notice line, so one command line "
        "switches strategies across the examples; such a key given with `--set` is an error "
        "(it would do nothing). The run directory receives the fully resolved file "
        "as `config.toml`.\n";
  std::string section;
  for (const Field& f : schema()) {
    const std::string s = f.key.substr(0, f.key.find('.'));
    if (s != section) {
      section = s;
      os << "\n## [" << s << "]\n\n| key | type | default | meaning |\n| --- | --- | --- | --- |\n";
    }
    os << "| `" << f.key << "` | " << f.type << " | `" << f.show(defaults) << "` | " << f.doc << " |\n";
  }
  return os.str();
}

}  // namespace shardtrain::train
