#include "bench/commands/bench_io.h"

#include "bench/commands/bench_object_store.h"
#include "bench/commands/bench_stats.h"

#include "io/cache.h"
#include "io/page_cache.h"
#include "io/shard_format.h"
#include "io/shard_reader.h"
#include "io/stream_loader.h"
#include "runtime/core/clock.h"
#include "runtime/core/error.h"

#include <fcntl.h>
#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <thread>

namespace shardtrain::io {
namespace {

namespace fs = std::filesystem;

struct Aggregate {
  double bytes = 0, seconds = 0;  // sum of bytes, slowest rank's time
  double mb_s() const { return seconds > 0 ? bytes / seconds / 1e6 : 0; }
};

Aggregate aggregate(double bytes, double seconds) {
  Aggregate a;
  MPI_Allreduce(&bytes, &a.bytes, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&seconds, &a.seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return a;
}

struct AlignedBuffer {
  void* p = nullptr;
  explicit AlignedBuffer(size_t bytes) {
    ST_CHECK(posix_memalign(&p, 4096, bytes) == 0, "cannot allocate {} aligned bytes", bytes);
  }
  ~AlignedBuffer() { std::free(p); }
};

// Every file opened with O_DIRECT; an error names the file.
std::vector<int> open_direct(const std::vector<std::string>& files) {
  std::vector<int> fds;
  for (const auto& f : files) {
    fds.push_back(::open(f.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC));
    ST_CHECK(fds.back() >= 0, "{}: cannot open with O_DIRECT: {}", f, std::strerror(errno));
  }
  return fds;
}

// Runs body(t) on `depth` threads at once, after every rank is ready, and
// returns the seconds they took; a body returns its error, or "" for none,
// and the first is thrown once all have ended (after the descriptors are
// closed).
double timed_on_threads(int depth, std::vector<int>& fds, const std::function<std::string(int)>& body) {
  std::vector<std::string> errors(static_cast<size_t>(depth));
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now_seconds();
  std::vector<std::thread> threads;
  threads.reserve(size_t(depth));
  for (int t = 0; t < depth; ++t) threads.emplace_back([&, t] { errors[size_t(t)] = body(t); });
  for (auto& th : threads) th.join();
  const double seconds = now_seconds() - t0;
  for (int fd : fds) ::close(fd);
  fds.clear();
  for (const auto& e : errors) ST_CHECK(e.empty(), "{}", e);
  return seconds;
}

// This rank's contiguous share of the files' bytes, read with O_DIRECT in
// `block` requests (4 KiB aligned), `depth` of them in flight (a thread
// each, taking every depth-th block): the storage's sequential ceiling. One
// request at a time would understate it: the page cache's readahead keeps
// several in flight, and so does any real reader of fast storage.
double raw_read(const std::vector<std::string>& files, int rank, int world, int64_t block, int depth, double* seconds) {
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (const auto& f : files) {
    sizes.push_back(int64_t(fs::file_size(f)));
    total += sizes.back();
  }
  constexpr int64_t kAlign = 4096;
  auto cut = [&](int r) { return (total * r / world) / kAlign * kAlign; };
  const int64_t begin = cut(rank), end = rank + 1 == world ? total : cut(rank + 1);
  // The requests: (file, offset, length counted) in order.
  struct Request {
    size_t file;
    int64_t offset, want, counted;
  };
  std::vector<Request> requests;
  int64_t file_start = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const int64_t fb = std::max(begin, file_start), fe = std::min(end, file_start + sizes[i]);
    for (int64_t off = (fb - file_start) / kAlign * kAlign; fb < fe && off < fe - file_start; off += block) {
      const int64_t stop = fe - file_start;
      const int64_t want = std::min(block, (stop - off + kAlign - 1) / kAlign * kAlign);
      requests.push_back({i, off, want, std::min(want, stop - off)});
    }
    file_start += sizes[i];
  }
  std::vector<int> fds = open_direct(files);
  std::atomic<int64_t> read_bytes{0};
  *seconds = timed_on_threads(depth, fds, [&](int t) -> std::string {
    AlignedBuffer buf(static_cast<size_t>(block));
    for (size_t r = size_t(t); r < requests.size(); r += size_t(depth)) {
      const Request& q = requests[r];
      ssize_t n;
      do n = ::pread(fds[q.file], buf.p, size_t(q.want), q.offset);
      while (n < 0 && errno == EINTR);
      if (n < 0) return fmt::format("{}: O_DIRECT read failed: {}", files[q.file], std::strerror(errno));
      read_bytes += std::min<int64_t>(n, q.counted);
    }
    return "";
  });
  return double(read_bytes.load());
}

// Random O_DIRECT reads of `block` bytes (rounded up to 4 KiB) at random
// 4 KiB-aligned offsets of the files, `count` of them on this rank, `depth`
// in flight (a thread each): the ceiling of reading one sample at a time in
// a global shuffle, as fio's randread with iodepth = depth measures it.
double random_read(const std::vector<std::string>& files, int rank, int64_t block, int64_t count, int depth,
                   double* seconds) {
  constexpr int64_t kAlign = 4096;
  block = (block + kAlign - 1) / kAlign * kAlign;
  std::vector<int64_t> slots;  // per file: how many aligned blocks fit
  int64_t total = 0;
  for (const auto& f : files)
    total += slots.emplace_back(std::max<int64_t>(0, int64_t(fs::file_size(f)) - block) / kAlign);
  ST_CHECK(total > 0, "the files are smaller than one {}-byte read", block);
  std::vector<int> fds = open_direct(files);
  std::atomic<int64_t> next{0}, read_bytes{0};
  *seconds = timed_on_threads(depth, fds, [&](int t) -> std::string {
    AlignedBuffer buf(static_cast<size_t>(block));
    uint64_t x = 0x9e3779b97f4a7c15ull * uint64_t(rank * 1024 + t + 1);
    while (next++ < count) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      int64_t slot = int64_t(x % uint64_t(total));
      size_t f = 0;
      while (slot >= slots[f]) slot -= slots[f++];
      ssize_t n;
      do n = ::pread(fds[f], buf.p, size_t(block), slot * kAlign);
      while (n < 0 && errno == EINTR);
      if (n < 0) return fmt::format("{}: O_DIRECT read failed: {}", files[f], std::strerror(errno));
      read_bytes += n;
    }
    return "";
  });
  return double(read_bytes.load());
}

// The same share read through the page cache after dropping its pages:
// sequential 8 MiB reads, with the kernel's readahead. On a virtual disk
// this can exceed O_DIRECT (docs/BENCHMARKS.md), so both are reported.
double buffered_read(const std::vector<std::string>& files, int rank, int world, double* seconds) {
  for (const auto& f : files) drop_cached_pages(f);
  int64_t total = 0;
  std::vector<int64_t> sizes;
  for (const auto& f : files) total += sizes.emplace_back(int64_t(fs::file_size(f)));
  const int64_t begin = total * rank / world, end = total * (rank + 1) / world;
  std::vector<char> buf(static_cast<size_t>(8 << 20));
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now_seconds();
  int64_t done = 0, file_start = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const int64_t fb = std::max(begin, file_start), fe = std::min(end, file_start + sizes[i]);
    if (fb < fe) {
      const int fd = ::open(files[i].c_str(), O_RDONLY | O_CLOEXEC);
      ST_CHECK(fd >= 0, "{}: cannot open: {}", files[i], std::strerror(errno));
      for (int64_t off = fb - file_start; off < fe - file_start;) {
        const ssize_t n =
            ::pread(fd, buf.data(), size_t(std::min<int64_t>(int64_t(buf.size()), fe - file_start - off)), off);
        if (n < 0 && errno == EINTR) continue;
        ST_CHECK(n > 0, "{}: read failed: {}", files[i], std::strerror(errno));
        off += n;
        done += n;
      }
      ::close(fd);
    }
    file_start += sizes[i];
  }
  *seconds = now_seconds() - t0;
  MPI_Barrier(MPI_COMM_WORLD);  // no rank drops pages another is still reading
  for (const auto& f : files) drop_cached_pages(f);
  return double(done);
}

// The concurrent ingest: writes generated data into `dir` in `block` writes
// through a rate limiter until stopped, syncing every 64 MiB so that the
// writes reach the storage while the loader reads (as a real ingest's would).
class IngestWriter {
 public:
  IngestWriter(std::string dir, int64_t block, double rate_bytes_s, int64_t cap)
      : dir_(std::move(dir)), block_(block), limiter_(rate_bytes_s), cap_(cap) {
    fs::create_directories(dir_);
    thread_ = std::thread([this] { run(); });
  }
  ~IngestWriter() {
    try {
      finish();
    } catch (...) {  // ignored: already reported, or unwinding from another error
    }
  }
  // Stops the writer; returns the bytes it wrote (over seconds()).
  double finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    std::error_code ec;
    fs::remove_all(dir_, ec);
    if (auto e = std::exchange(error_, nullptr)) std::rethrow_exception(e);
    return double(written_);
  }
  double seconds() const { return seconds_; }  // from its first write to its stop

 private:
  void run() {
    try {
      std::vector<char> data(static_cast<size_t>(block_));
      uint64_t x = 0x9e3779b97f4a7c15ull;
      for (char& c : data) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        c = char(x);
      }
      const double t0 = now_seconds();
      constexpr int64_t kFileBytes = int64_t(256) << 20, kSyncBytes = int64_t(64) << 20;
      for (int file = 0; !stop_ && (cap_ == 0 || written_ < cap_); ++file) {
        const std::string path = fmt::format("{}/ingest-{:04d}.bin", dir_, file);
        const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ST_CHECK(fd >= 0, "{}: cannot create: {}", path, std::strerror(errno));
        int64_t in_file = 0, since_sync = 0;
        while (!stop_ && in_file < kFileBytes && (cap_ == 0 || written_ < cap_)) {
          limiter_.acquire(block_);
          const ssize_t n = ::write(fd, data.data(), size_t(block_));
          if (n < 0 && errno == EINTR) continue;
          ST_CHECK(n > 0, "{}: write failed: {}", path, std::strerror(errno));
          in_file += n;
          since_sync += n;
          written_ += n;
          if (since_sync >= kSyncBytes) {
            ::fdatasync(fd);
            since_sync = 0;
          }
        }
        ::fdatasync(fd);
        ::close(fd);
      }
      seconds_ = now_seconds() - t0;
    } catch (...) {
      error_ = std::current_exception();
    }
  }

  std::string dir_;
  int64_t block_;
  RateLimiter limiter_;
  int64_t cap_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> written_{0};
  double seconds_ = 0;
  std::exception_ptr error_;
  std::thread thread_;
};

struct LoaderTrial {
  Aggregate agg;
  double samples_per_s = 0;
};

// Reads `batches` batches through the streaming loader, as training would.
LoaderTrial loader_trial(const BenchIoOptions& o, int64_t batches, int64_t* samples_per_batch) {
  StreamLoader loader(o.data, o.loader, o.global_batch, o.seed);
  if (o.loader.cold_cache)
    for (const auto& f : loader.info().shard_files) drop_cached_pages(f);
  const int64_t n = batches > 0 ? batches : loader.sampler().batches_per_epoch();
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now_seconds();
  loader.start({0, 0}, n);
  int64_t bytes = 0;
  for (int64_t i = 0; i < n; ++i) bytes += loader.next().bytes;
  const double seconds = now_seconds() - t0;
  *samples_per_batch = loader.sampler().global_batch();
  LoaderTrial t;
  t.agg = aggregate(double(bytes), seconds);
  t.samples_per_s = t.agg.seconds > 0 ? double(n * loader.sampler().global_batch()) / t.agg.seconds : 0;
  return t;
}

// What the random-read reference reads: one sample's size, as many reads
// as a loader trial makes (this rank's share). Read from the shards' headers
// once, not every round.
struct RandomShape {
  int64_t sample_bytes = 0, reads_per_rank = 0;
};
RandomShape random_shape(const BenchIoOptions& o, const std::vector<std::string>& files, int world) {
  const shard_format::ShardHeader head = ShardReader(files.front()).header();
  int64_t samples = 0;
  for (const auto& f : files) samples += ShardReader(f).header().num_samples;
  const int64_t per_rank = (o.batches > 0 ? std::min(samples, o.batches * o.global_batch) : samples) / world;
  return {head.sample_shape.numel() * int64_t(shard_format::dtype_size(head.dtype)), std::max<int64_t>(1, per_rank)};
}

// The loader reading through HDF5, one request at a time, beside the
// engine asked for (whose rate is `engine_mb_s`).
template <class Say>
double hdf5_engine_mb_s(const BenchIoOptions& o, double engine_mb_s, Say&& say) {
  BenchIoOptions h = o;
  h.loader.read_engine = ReadEngine::hdf5;
  int64_t per_batch = 0;
  const double mb_s = loader_trial(h, o.batches, &per_batch).agg.mb_s();
  say(fmt::format("  loader with read engine hdf5 (one H5Dread at a time): {:8.1f} MB/s; the {} engine: {:.2f}x", mb_s,
                  o.loader.read_engine, mb_s > 0 ? engine_mb_s / mb_s : 0));
  return mb_s;
}

// The per-sample checksums (data.verify_checksums), measured side by side:
// the loader without them, alternating with it (`*checked_mb_s` holds the
// first trial with them and becomes the mean of two). The manifest check
// happens when a loader is built, so it is outside every trial's time.
template <class Say>
void checksum_cost(const BenchIoOptions& o, Say&& say, double* checked_mb_s, double* unchecked_mb_s) {
  BenchIoOptions off = o;
  off.loader.verify_checksums = false;
  int64_t per_batch = 0;
  *unchecked_mb_s = loader_trial(off, o.batches, &per_batch).agg.mb_s();
  *checked_mb_s += loader_trial(o, o.batches, &per_batch).agg.mb_s();
  *unchecked_mb_s += loader_trial(off, o.batches, &per_batch).agg.mb_s();
  *checked_mb_s /= 2;
  *unchecked_mb_s /= 2;
  say(
      fmt::format("  sample checksums: loader {:.1f} MB/s with, {:.1f} MB/s without (2 trials each, alternating): "
                  "{:.3f}x",
                  *checked_mb_s, *unchecked_mb_s, *unchecked_mb_s > 0 ? *checked_mb_s / *unchecked_mb_s : 0));
}

std::string size_name(int64_t b) {
  return b >= (1 << 20) ? fmt::format("{} MiB", b >> 20) : fmt::format("{} KiB", b >> 10);
}

// The loader against the references, alternating `o.rounds` times: this
// VM's disk moved by tens of percent between runs a minute apart, so one
// pair gives a noisy ratio; the medians are reported. The first round
// takes the sequential reference already read (`sequential_mb_s`).
struct Rounds {
  int64_t sample_bytes = 0;
  double random_mb_s = 0, loader_mb_s = 0, samples_s = 0, ratio_sequential = 0, ratio_random = 0;
  std::vector<double> random_runs, loader_runs;
};

template <class Say>
Rounds alternate(const BenchIoOptions& o, const std::vector<std::string>& files, int rank, int world,
                 double sequential_mb_s, Say&& say) {
  Rounds out;
  const RandomShape shape = random_shape(o, files, world);
  out.sample_bytes = shape.sample_bytes;
  std::vector<double> samples_runs, ratio_runs, sequential_ratio_runs;
  int64_t per_batch = 0;
  for (int r = 0; r < o.rounds; ++r) {
    double sequential = sequential_mb_s;
    if (r > 0) {
      double seconds = 0;
      const double bytes = raw_read(files, rank, world, o.raw_block_bytes, o.raw_depth, &seconds);
      sequential = aggregate(bytes, seconds).mb_s();
    }
    double seconds = 0;
    const double bytes = random_read(files, rank, shape.sample_bytes, shape.reads_per_rank, o.random_depth, &seconds);
    out.random_runs.push_back(aggregate(bytes, seconds).mb_s());
    const LoaderTrial t = loader_trial(o, o.batches, &per_batch);
    out.loader_runs.push_back(t.agg.mb_s());
    samples_runs.push_back(t.samples_per_s);
    ratio_runs.push_back(out.random_runs.back() > 0 ? out.loader_runs.back() / out.random_runs.back() : 0);
    sequential_ratio_runs.push_back(sequential > 0 ? out.loader_runs.back() / sequential : 0);
    if (o.rounds > 1)
      say(
          fmt::format("  round {}: sequential O_DIRECT {:8.1f} MB/s, random O_DIRECT {:8.1f} MB/s, loader {:8.1f} "
                      "MB/s: {:.1f}% and {:.1f}%",
                      r + 1, sequential, out.random_runs.back(), out.loader_runs.back(),
                      100 * sequential_ratio_runs.back(), 100 * ratio_runs.back()));
  }
  out.random_mb_s = bench::median(out.random_runs);
  out.loader_mb_s = bench::median(out.loader_runs);
  out.samples_s = bench::median(samples_runs);
  out.ratio_sequential = bench::median(sequential_ratio_runs);
  out.ratio_random = bench::median(ratio_runs);
  say(fmt::format("  random O_DIRECT reads of a sample ({}, {} in flight per rank): {:8.1f} MB/s{}",
                  size_name(out.sample_bytes), o.random_depth, out.random_mb_s, o.rounds > 1 ? " (median)" : ""));
  return out;
}

}  // namespace

namespace {

// Where this rank runs: its rank, the job's size, its rank on its node.
struct Place {
  int rank = 0, world = 1, local_rank = 0;
};

Place place() {
  Place at;
  MPI_Comm_rank(MPI_COMM_WORLD, &at.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &at.world);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, at.rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &at.local_rank);
  MPI_Comm_free(&node);
  return at;
}

using SayLine = std::function<void(const std::string&)>;

// Every figure but the object store's, on the split in o.data (a directory).
int bench_io_on_files(const BenchIoOptions& o, const nlohmann::json& object_store, const Place& at,
                      const SayLine& say) {
  const int rank = at.rank, world = at.world, local_rank = at.local_rank;

  const std::vector<std::string> files = shard_format::list_shard_files(o.data);
  double data_bytes = 0;
  for (const auto& f : files) data_bytes += double(fs::file_size(f));
  say(
      fmt::format("bench io: {} ({} shard(s), {:.2f} GB) on {} rank(s); loader: {} transfer, {} order, global "
                  "batch {}, {} prefetched, {}",
                  o.data, files.size(), data_bytes / 1e9, world, o.loader.transfer, o.loader.order, o.global_batch,
                  o.loader.prefetch_batches, o.loader.cold_cache ? "cold (pages dropped after reading)" : "warm"));

  // Raw O_DIRECT first (it needs no cache state), then the loader.
  double raw_s = 0;
  const double raw_bytes = raw_read(files, rank, world, o.raw_block_bytes, o.raw_depth, &raw_s);
  const Aggregate raw = aggregate(raw_bytes, raw_s);
  say(fmt::format("  raw O_DIRECT sequential read ({} requests, {} in flight per rank): {:8.1f} MB/s",
                  size_name(o.raw_block_bytes), o.raw_depth, raw.mb_s()));
  double buf_s = 0;
  const double buf_bytes = buffered_read(files, rank, world, &buf_s);
  const Aggregate buffered = aggregate(buf_bytes, buf_s);
  say(fmt::format("  buffered sequential read after dropping the pages (readahead): {:8.1f} MB/s", buffered.mb_s()));
  int64_t per_batch = 0;
  if (!o.loader.cold_cache) loader_trial(o, o.batches, &per_batch);  // warm: fill the page cache first
  const Rounds rounds = alternate(o, files, rank, world, raw.mb_s(), say);
  const double loader_mb_s = rounds.loader_mb_s, random_mb_s = rounds.random_mb_s;
  const double ratio = rounds.ratio_sequential, ratio_random = rounds.ratio_random;
  const std::vector<double>& random_runs = rounds.random_runs;
  const std::vector<double>& loader_runs = rounds.loader_runs;
  const double ratio_buffered = buffered.mb_s() > 0 ? loader_mb_s / buffered.mb_s() : 0;
  say(fmt::format(
      "  loader{} (read engine {}, {} in flight, direct_io {}): {:8.1f} MB/s, {:.0f} samples/s = {:.1f}% of the "
      "sequential "
      "O_DIRECT read, {:.1f}% of the random one{}, {:.1f}% of the buffered read",
      o.loader.cold_cache ? "" : " (warm: from the page cache, not comparable to the reads above)",
      o.loader.read_engine, o.loader.reads_in_flight, o.loader.direct_io, loader_mb_s, rounds.samples_s, 100 * ratio,
      100 * ratio_random, o.rounds > 1 ? " (medians of the rounds' ratios)" : "", 100 * ratio_buffered));
  const double hdf5_mb_s = o.compare_hdf5 ? hdf5_engine_mb_s(o, loader_mb_s, say) : 0;

  double checked_mb_s = loader_mb_s, unchecked_mb_s = 0;
  if (o.loader.verify_checksums) checksum_cost(o, say, &checked_mb_s, &unchecked_mb_s);

  nlohmann::json ingest = nlohmann::json::array();
  if (o.ingest) {
    const double limited = o.ingest_rate_mb_s > 0 ? o.ingest_rate_mb_s : raw.mb_s() / 4;
    const std::string dir = !o.ingest_dir.empty()
                                ? o.ingest_dir
                                : (fs::path(o.data).parent_path() / fmt::format(".ingest-{}", getpid())).string();
    say(fmt::format("  ingest: a writer per node into {} while the loader reads (limited rate: {:.0f} MB/s)", dir,
                    limited));
    say(fmt::format("  {:>8} {:>12} {:>14} {:>14} {:>10}", "block", "rate MB/s", "written MB/s", "loader MB/s",
                    "slowdown"));
    for (const int64_t block : o.ingest_blocks)
      for (const double rate : {0.0, limited}) {
        std::unique_ptr<IngestWriter> writer;
        if (local_rank == 0)
          writer = std::make_unique<IngestWriter>(fmt::format("{}-{}", dir, rank), block, rate * 1e6, o.ingest_bytes);
        const LoaderTrial t = loader_trial(o, o.batches, &per_batch);
        double written = 0, wsec = 0;
        if (writer) {
          written = writer->finish();
          wsec = writer->seconds();
        }
        const Aggregate w = aggregate(written, wsec);
        const double slowdown = t.agg.mb_s() > 0 ? loader_mb_s / t.agg.mb_s() : 0;
        say(fmt::format("  {:>8} {:>12} {:>14.1f} {:>14.1f} {:>9.2f}x", size_name(block),
                        rate > 0 ? fmt::format("{:.0f}", rate) : std::string("unlimited"), w.mb_s(), t.agg.mb_s(),
                        slowdown));
        ingest.push_back({{"block_bytes", block},
                          {"rate_mb_s", rate},
                          {"written_mb_s", w.mb_s()},
                          {"loader_mb_s", t.agg.mb_s()},
                          {"slowdown", slowdown}});
      }
  }

  if (rank == 0 && !o.json_path.empty()) {
    const nlohmann::json j = {{"data", o.data},
                              {"ranks", world},
                              {"cold", o.loader.cold_cache},
                              {"transfer", o.loader.transfer},
                              {"order", o.loader.order},
                              {"global_batch", o.global_batch},
                              {"data_bytes", data_bytes},
                              {"raw_mb_s", raw.mb_s()},
                              {"raw_block_bytes", o.raw_block_bytes},
                              {"raw_depth", o.raw_depth},
                              {"loader_mb_s", loader_mb_s},
                              {"loader_samples_s", rounds.samples_s},
                              {"checked_mb_s", checked_mb_s},
                              {"unchecked_mb_s", unchecked_mb_s},
                              {"ratio", ratio},
                              {"buffered_mb_s", buffered.mb_s()},
                              {"ratio_buffered", ratio_buffered},
                              {"random_mb_s", random_mb_s},
                              {"rounds", o.rounds},
                              {"random_mb_s_rounds", random_runs},
                              {"loader_mb_s_rounds", loader_runs},
                              {"random_depth", o.random_depth},
                              {"sample_bytes", rounds.sample_bytes},
                              {"ratio_random", ratio_random},
                              {"read_engine", std::string(name_of(o.loader.read_engine))},
                              {"reads_in_flight", o.loader.reads_in_flight},
                              {"hdf5_mb_s", hdf5_mb_s},
                              {"ingest", ingest},
                              {"object_store", object_store}};
    std::ofstream(o.json_path) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace

int bench_io(const BenchIoOptions& o) {
  const Place at = place();
  const SayLine say = [rank = at.rank](const std::string& line) {
    if (rank == 0) fmt::print("{}\n", line), std::fflush(stdout);
  };
  if (!is_s3_url(o.data)) return bench_io_on_files(o, nullptr, at, say);
  // An s3:// split: the store's tier first, then the other figures on the copies.
  const ObjectStoreTier tier = bench_object_store(o, at.local_rank, say);
  BenchIoOptions on_copies = o;
  on_copies.data = tier.local_dir;
  return bench_io_on_files(on_copies, tier.figures, at, say);
}

}  // namespace shardtrain::io
