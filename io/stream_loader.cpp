#include "io/stream_loader.h"

#include "io/memory_limit.h"

#include "io/manifest.h"
#include "io/mpio.h"
#include "io/normalize.h"
#include "io/page_cache.h"
#include "io/peer_cache.h"
#include "io/peer_metadata.h"
#include "io/positional_read.h"
#include "io/read_pool.h"
#include "io/shard_format.h"
#include "io/shard_reader.h"
#include "io/shard_set.h"
#include "runtime/comm/agree_or_throw.h"
#include "runtime/comm/transport/mpi_transport.h"
#include "runtime/core/clock.h"
#include "runtime/core/error.h"

#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>

namespace shardtrain::io {
namespace {

// The I/O threads agree before each batch on a vector, reduced with MAX: its
// first element says whether to go on (kGo), or that some rank stops or
// failed; then, per shard, the largest number of runs any rank reads there
// (a collective read takes that many calls on every rank).
constexpr int64_t kGo = 0, kStop = 1, kFailed = 2;

// Whether the split's files hold more bytes than the page cache can keep
// for this process (the node's memory, or its cgroup's limit), so that it
// cannot keep them from one epoch to the next. The files this node has: a
// sparse split's other shards are in other nodes' page caches.
bool larger_than_memory(const DatasetInfo& info) {
  double bytes = 0;
  for (const std::string& f : info.shard_files) {
    std::error_code absent;
    const auto size = std::filesystem::file_size(f, absent);
    if (!absent) bytes += double(size);
  }
  const int64_t memory = memory_for_page_cache();
  return memory > 0 && bytes > double(memory);
}

}  // namespace

struct StreamLoader::Impl {
  std::string split_dir;
  LoaderOptions options;
  DatasetInfo info;                  // a copy of the loader's, for the thread
  std::unique_ptr<Sampler> sampler;  // drawn from by the I/O thread only
  ShardLocator locator;
  MPI_Comm comm = MPI_COMM_NULL;
  h5::PropList fapl, dxpl;
  std::vector<std::string> source_files, open_paths;
  // Per shard its HDF5 handle while HDF5 reads it; a shard the read pool
  // reads is closed once its header and extents are known: an open HDF5
  // file costs about 0.5 MB (its metadata cache's structure), which with one
  // sample per file would decide how many ranks fit in memory.
  std::vector<std::unique_ptr<ShardReader>> shards;
  std::vector<int64_t> shard_samples;  // per shard, from its header
  // A plain descriptor per open shard, for the read pool's preads and for
  // dropping its pages in cold-cache mode (by descriptor: a staged copy may
  // be unlinked while it is open).
  std::vector<int> page_fds;
  // The read pool (absent: HDF5 reads everything), and per shard where its
  // samples lie (absent: that shard is read through HDF5).
  std::unique_ptr<ReadPool> pool;
  std::vector<std::optional<SampleExtents>> extents;
  std::vector<int> direct_fds;  // data.direct_io: the pool's O_DIRECT descriptors (-1: none)
  bool direct = false;          // the pool reads with O_DIRECT (data.direct_io, decided once)
  std::string engine_note;      // why a shard is read through HDF5 under read_engine = auto
  std::string engine_in_use() const {
    if (!pool) return options.transfer == Transfer::collective ? "hdf5 (collective transfers)" : "hdf5";
    const std::string line =
        fmt::format("pool, {} in flight, {}", options.reads_in_flight, direct ? "O_DIRECT" : "buffered");
    return engine_note.empty() ? line : fmt::format("{}; {}", line, engine_note);
  }
  // io.peer_cache.dir: this node's copies, and the exchange of the other
  // nodes' shards (absent: off); every rank's sampler, to plan the exchange.
  std::unique_ptr<PeerCache> peers;
  std::vector<Sampler> peer_samplers;
  std::vector<std::vector<int64_t>> peer_batches;
  void use_peer_cache(const std::optional<Manifest>& manifest, int64_t global_batch, uint64_t seed);
  std::vector<std::vector<int32_t>> labels;
  // Per shard, its /crc32 when samples are verified (data.verify_checksums
  // and format version 2), else empty.
  std::vector<std::vector<uint32_t>> checksums;
  std::vector<int64_t> shard_begin;  // first global sample index of each shard
  size_t sample_bytes = 0;

  // The queue: slots of reused buffers; the consumer holds up to kHeldBatches.
  mutable std::mutex mu;
  std::condition_variable cv;
  std::vector<LoadedBatch> slots;
  std::deque<size_t> ready, free_slots;
  std::deque<size_t> held;  // slots the consumer has, oldest first (at most kHeldBatches)
  bool stop = false, finished = false;
  std::exception_ptr error;
  LoaderStats stats;

  int shard_of(int64_t index) const {
    return int(std::upper_bound(shard_begin.begin(), shard_begin.end(), index) - shard_begin.begin()) - 1;
  }
  // `access`: MPI-IO's (collective, every rank opens every shard), or
  // HDF5's default for a shard only this node holds (peer_sparse_split).
  void open_shard(int s, const std::string& path, hid_t access) {
    shards[size_t(s)] = std::make_unique<ShardReader>(path, access);
    shard_samples[size_t(s)] = shards[size_t(s)]->header().num_samples;
    open_paths[size_t(s)] = path;
    for (int* fd : {&page_fds[size_t(s)], &direct_fds[size_t(s)]}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
    extents[size_t(s)].reset();
    if (options.cold_cache || pool) {
      // Without it the pages would never be dropped: a warm run reported as cold.
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      ST_CHECK(fd >= 0, "{}: cannot open for reading{}: {}", path,
               options.cold_cache ? " and dropping its pages (data.cold_cache)" : "", std::strerror(errno));
      page_fds[size_t(s)] = fd;
    }
    if (!pool) return;
    std::string why;
    extents[size_t(s)] = shards[size_t(s)]->x_extents(&why);
    if (!extents[size_t(s)]) {
      ST_CHECK(options.read_engine != ReadEngine::pool, "{}: data.read_engine = \"pool\" cannot read it: {}", path,
               why);
      if (engine_note.empty()) engine_note = fmt::format("hdf5 for shards it cannot read ({}: {})", path, why);
      return;
    }
    // A global shuffle reads each sample alone: readahead past it would
    // read bytes nobody asked for, at the cost of the ones asked for.
    if (options.order == SampleOrder::global) ::posix_fadvise(page_fds[size_t(s)], 0, 0, POSIX_FADV_RANDOM);
    if (direct) {
      const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
      // auto: a file system without O_DIRECT (tmpfs) is read through the cache.
      ST_CHECK(fd >= 0 || options.direct_io == DirectIo::automatic,
               "{}: cannot open with O_DIRECT (data.direct_io = \"on\"): {}", path, std::strerror(errno));
      direct_fds[size_t(s)] = fd;
      if (fd < 0 && engine_note.empty()) engine_note = fmt::format("{}: no O_DIRECT there, read buffered", path);
    }
    // Every rank opens and closes the same shards in the same order (the
    // layout is the file's): MPI-IO's collective close stays matched.
    shards[size_t(s)].reset();
  }
  // The split's shard files: those in its directory, or every one a sparse
  // split's manifest lists (this node has only its own).
  void list_source_files(const std::optional<Manifest>& manifest);
  // A sparse split: every shard's header, labels, checksums and extents,
  // read by its node's first rank and shared with all (collective);
  // `layout` gets the nodes.
  std::vector<ShardMetadata> share_sparse_metadata(PeerLayout& layout) const;
  // Each shard's header, checked as a set (and against the manifest); its
  // labels and checksums into `labels` and `checksums`. A sparse split's
  // come from `remote`, moved out.
  std::vector<ShardHeaderOf> read_headers_and_labels(const std::optional<Manifest>& manifest,
                                                     std::vector<ShardMetadata>& remote);
  // Opens every shard (`sparse` null: collectively through MPI-IO); a
  // sparse split's own shards alone, the others known from `remote`.
  void open_shards(const PeerLayout* sparse, const std::vector<ShardMetadata>& remote);
  // A shard another node holds (peer_sparse_split): what its node read of
  // it; the peer cache's exchange brings its samples.
  void know_remote_shard(int s, const ShardMetadata& md, int node) {
    shard_samples[size_t(s)] = md.header.num_samples;
    extents[size_t(s)] = md.extents;
    open_paths[size_t(s)] = fmt::format("{} on node {}", source_files[size_t(s)], node);
  }
  ~Impl() {
    for (int fd : page_fds)
      if (fd >= 0) ::close(fd);
    for (int fd : direct_fds)
      if (fd >= 0) ::close(fd);
  }
  // One batch's reads on this rank: its samples sorted (with their place in
  // the batch) and, per shard, the runs of consecutive samples.
  struct Plan {
    std::vector<std::pair<int64_t, int64_t>> order;   // (sample, position in the batch)
    std::vector<std::vector<ShardReader::Run>> runs;  // per shard
    std::vector<size_t> first;                        // per shard: its first entry in order
  };
  void plan_batch(const std::vector<int64_t>& indices, Plan& plan) const;
  void reopen_cached_shards();
  // Cold cache: drop the pages of the shards read since the last drop, at
  // the end of each epoch and whenever kColdBudget bytes were read, so that
  // every epoch reads from storage and the cache never holds more than about
  // the budget of the data set, as if it were larger than memory; readahead
  // within the budget still works, as it would on a large data set.
  static constexpr int64_t kColdBudget = int64_t(256) << 20;
  std::vector<bool> cold_touched;
  int64_t cold_bytes = 0;
  void drop_cold_pages();
  // A batch being read. start_batch submits the read pool's reads (each
  // reader then checks and converts its own samples, overlapping the other
  // reads) and makes HDF5's; finish_batch collects the pool's, checks what
  // HDF5 read and throws the batch's first error. Between the two, the I/O
  // thread starts the next batch, so that its reads queue behind this one's
  // instead of waiting for its last read.
  struct Piece {
    size_t shard, begin;  // its samples are plan.order[begin, begin + count)
    int64_t offset, first, count;
  };
  struct InFlight {
    size_t slot = 0;
    int64_t k = 0;  // its place in io_main's sequence
    Plan plan;
    std::vector<uint8_t> raw;
    std::vector<Piece> pieces;
    std::vector<std::exception_ptr> piece_error, shard_error;
    std::vector<size_t> by_hdf5;
    ReadPool::Ticket ticket = 0;
    bool submitted = false;
    double t0 = 0;
    std::vector<uint8_t> served, received;  // the peer cache's exchange
    PeerPlan peer_plan;
    PeerTransfer transfer;
    int64_t peer_bytes = 0, served_bytes = 0;
  };
  void start_batch(InFlight& b, const std::vector<int64_t>& calls);
  // The peer cache's part of start_batch: serves the other nodes' ranks from
  // this node's copies and starts the exchange; and of finish_batch: waits
  // for this rank's samples of their shards, checks and places them. Two
  // batches' exchanges may be in flight.
  void start_exchange(InFlight& b);
  void finish_exchange(InFlight& b);
  void finish_batch(InFlight& b);
  // Finishes b and hands it to the training thread; after a failure (this
  // one's sets `failed`) it is dropped instead: the training thread must
  // not get a batch past the one that failed.
  void complete(InFlight& b, int64_t per_epoch, int64_t count, bool& failed);
  // The read pool where options allow it, and whether it reads with O_DIRECT.
  void make_pool(const DatasetInfo& split) {
    if (options.read_engine == ReadEngine::hdf5 || options.transfer != Transfer::independent) return;
    pool = std::make_unique<ReadPool>(int(options.reads_in_flight));
    // auto: only a global shuffle, where readahead is no help.
    direct = options.direct_io == DirectIo::on ||
             (options.direct_io == DirectIo::automatic && options.order == SampleOrder::global &&
              (options.cold_cache || larger_than_memory(split)));
  }
  // The batch slots, allocated once: prefetch_batches ready for training,
  // one being filled and the consumer's kHeldBatches. With options.raw they
  // hold the samples as stored (a language model's token ids, which the
  // trainer checks are integers, or an emulated accelerator's bytes).
  void make_slots(const DatasetInfo& split) {
    slots.resize(size_t(options.prefetch_batches + 1 + kHeldBatches));
    const Shape shape = batched(sampler->local_batch(), split.sample_shape);
    for (LoadedBatch& b : slots) {
      if (options.raw) {
        b.raw.storage = std::make_unique<Storage>(size_t(sampler->local_batch()) * sample_bytes, Device::cpu());
        b.raw.dtype = split.dtype;
      } else {
        b.x = options.pinned_slots ? Tensor::empty_pinned(shape) : Tensor::empty(shape);
      }
      b.y.resize(size_t(sampler->local_batch()));
    }
    for (size_t i = 0; i < slots.size(); ++i) free_slots.push_back(i);
  }
  // A free batch slot into `slot`, waiting for one if `wait`: taken, none
  // free (not waiting), or the loader is stopping.
  enum class Slot { taken, none, stop };
  Slot take_slot(size_t& slot, bool wait) {
    std::unique_lock<std::mutex> lock(mu);
    if (wait) cv.wait(lock, [&] { return stop || !free_slots.empty(); });
    if (stop) return Slot::stop;
    if (free_slots.empty()) return Slot::none;
    slot = free_slots.front();
    free_slots.pop_front();
    return Slot::taken;
  }
  // A piece of the read pool's, read in blocks of at most kBlockBytes that
  // the reader checks and puts in their places while they are in its cache
  // (a large sample read whole would go out to memory and come back for the
  // checksum and again for the conversion), an O_DIRECT block where it
  // landed. Throws the piece's checksum failures.
  static constexpr size_t kBlockBytes = size_t(1) << 20;
  void read_piece(const Piece& p, const Plan& plan, LoadedBatch& out) const;
  // Once the samples plan.order[begin, end) of shard s are in `raw`: checks
  // them, and puts each one in its place in the batch.
  void finish_range(size_t s, size_t begin, size_t end, const Plan& plan, const uint8_t* raw, LoadedBatch& out) const;
};

StreamLoader::StreamLoader(std::string split_dir, const LoaderOptions& options, int64_t global_batch, uint64_t seed,
                           ShardLocator locator)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.split_dir = std::move(split_dir);
  m.options = options;
  m.locator = std::move(locator);
  int thread_level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&thread_level);
  ST_CHECK(thread_level == MPI_THREAD_MULTIPLE,
           "the streaming loader calls MPI from its own thread: MPI must be initialized with MPI_THREAD_MULTIPLE");
  ST_CHECK(options.prefetch_batches >= 1, "data.prefetch_batches must be at least 1, got {}", options.prefetch_batches);
  MPI_Comm_dup(MPI_COMM_WORLD, &m.comm);
  int rank = 0, world = 1;
  MPI_Comm_rank(m.comm, &rank);
  MPI_Comm_size(m.comm, &world);

  // 1. The files against the manifest, before HDF5 parses any of them
  // (libhdf5 can hang or crash on corrupt metadata, docs/reliability.md):
  // what it lists, their sizes, and with verify_checksums their CRC-32s,
  // each rank its share (shard s on rank s % world). Then all agree.
  // A sparse split (an s3:// split under the peer cache) holds this node's
  // shards only; its fetch checked each of them against the manifest's
  // CRC-32, and what the loader needs of the others comes from their nodes.
  const bool sparse = options.peer_sparse_split;
  std::string problem;
  std::optional<Manifest> manifest;
  try {
    h5::silence_errors();
    if (std::filesystem::is_directory(m.split_dir)) manifest = read_manifest(m.split_dir);
    m.list_source_files(manifest);
    // Without a manifest there is nothing to check against: the init line says so.
    info_.checksums_verified = options.verify_checksums && options.verify_files && manifest.has_value();
    info_.files_not_read = options.verify_checksums && !options.verify_files;
    if (info_.checksums_verified && !sparse) {
      for (size_t s = size_t(rank); s < manifest->shards.size(); s += size_t(world))
        verify_shard(m.source_files[s], manifest->shards[s]);
    }
  } catch (const std::exception& e) {
    problem = e.what();
  }
  try {
    comm::agree_or_throw(m.comm, problem);
  } catch (...) {
    MPI_Comm_free(&m.comm);
    throw;
  }
  problem.clear();
  // A sparse split: each shard's header, labels, checksums and extents, read
  // by its node's first rank and shared with all (collective).
  PeerLayout layout;
  std::vector<ShardMetadata> remote;
  if (sparse) {
    try {
      remote = m.share_sparse_metadata(layout);
    } catch (...) {
      MPI_Comm_free(&m.comm);
      throw;
    }
  }
  // 2. Every rank checks the split on its own (POSIX HDF5, no collective):
  // headers against the manifest, the shard set, labels. Then all agree.
  try {
    const std::vector<ShardHeaderOf> headers = m.read_headers_and_labels(manifest, remote);
    int64_t total = 0;
    for (const ShardHeaderOf& h : headers) {
      m.shard_begin.push_back(total);
      shard_sizes_.push_back(h.header.num_samples);
      total += h.header.num_samples;
    }
    ST_CHECK(total > 0, "{}: the split has no samples", m.split_dir);
    const shard_format::ShardHeader& h0 = headers.front().header;
    info_.path = m.split_dir;
    info_.shard_files = m.source_files;
    info_.shard_sizes = shard_sizes_;
    info_.split = h0.split;
    info_.num_samples = total;
    info_.sample_shape = h0.sample_shape;
    info_.dtype = h0.dtype;
    info_.num_classes = h0.num_classes;
    info_.normalize_mean = h0.normalize_mean;
    info_.normalize_std = h0.normalize_std;
    info_.samples_verified = options.verify_checksums && h0.version >= 2;
    m.sample_bytes = info_.sample_bytes();
    m.sampler =
        std::make_unique<Sampler>(total, global_batch, rank, world, seed, sampler_options(options, shard_sizes_));
    m.info = info_;
  } catch (const std::exception& e) {
    problem = e.what();
  }
  try {
    comm::agree_or_throw(m.comm, problem);
    // 3. Collective opens through MPI-IO, from the source or the cache.
    m.fapl = mpio::file_access(m.comm);
    m.dxpl = mpio::transfer(options.transfer);
    m.shards.resize(m.source_files.size());
    m.shard_samples.assign(m.source_files.size(), 0);
    m.cold_touched.assign(m.source_files.size(), false);
    m.open_paths.resize(m.source_files.size());
    m.page_fds.assign(m.source_files.size(), -1);
    m.direct_fds.assign(m.source_files.size(), -1);
    m.extents.resize(m.source_files.size());
    m.make_pool(info_);
    problem.clear();
    try {
      m.open_shards(sparse ? &layout : nullptr, remote);
    } catch (const std::exception& e) {
      problem = e.what();
    }
    comm::agree_or_throw(m.comm, problem);
    // A sparse split's shards were checked as they were fetched: the peer
    // cache keeps them without reading them again.
    if (!options.peer_cache_dir.empty()) m.use_peer_cache(sparse ? std::nullopt : manifest, global_batch, seed);
  } catch (...) {
    m.shards.clear();
    MPI_Comm_free(&m.comm);
    throw;
  }
  m.stats.transfer = std::string(name_of(options.transfer));
  m.stats.read_engine = m.engine_in_use();

  m.make_slots(info_);
}

StreamLoader::~StreamLoader() {
  int world = 1;
  MPI_Comm_size(impl_->comm, &world);
  if (std::uncaught_exceptions() > 0 && world > 1) {
    // An error on this rank is unwinding towards main, which prints it and
    // ends the job (MPI_Abort). Stopping the thread and closing the files
    // would need the other ranks (collective calls), which are busy
    // elsewhere: that would hang this rank before the error is reported.
    // So the thread is told to stop and left running, with everything it
    // uses (Impl) leaked; the abort ends it.
    {
      std::lock_guard<std::mutex> lock(impl_->mu);
      impl_->stop = true;
    }
    impl_->cv.notify_all();
    if (thread_.joinable()) thread_.detach();
    [[maybe_unused]] Impl* leaked = impl_.release();
    return;
  }
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(impl_->mu);
      impl_->stop = true;
    }
    impl_->cv.notify_all();
    thread_.join();
  }
  impl_->shards.clear();  // collective closes, on every rank in the same order
  MPI_Comm_free(&impl_->comm);
}

void StreamLoader::start(SamplerPosition from, int64_t count) {
  ST_CHECK(!thread_.joinable(), "StreamLoader::start called twice");
  thread_ = std::thread([m = impl_.get(), from, count] { io_main(*m, from, count); });
}

const Sampler& StreamLoader::sampler() const { return *impl_->sampler; }

void StreamLoader::io_main(Impl& m, SamplerPosition from, int64_t count) {
  h5::silence_errors();
  // SCHED_BATCH: when the training thread hands back a buffer and wakes this
  // thread, the scheduler must not let it preempt the training thread at
  // once (as it favours a thread that slept): on a node whose cores are all
  // busy, that preemption showed up as 3-5 ms "data wait" with 16 batches
  // ready (docs/BENCHMARKS.md). It still gets its fair share of the CPU.
  const sched_param batch_param{};
  sched_setscheduler(0, SCHED_BATCH, &batch_param);  // on failure it works the same, less politely
  const int64_t per_epoch = m.sampler->batches_per_epoch();
  const size_t n = 1 + m.shards.size();
  std::vector<int64_t> local(n), agreed(n);
  std::vector<int64_t> indices;
  const bool collective = m.options.transfer == Transfer::collective;
  bool failed = false;
  // Two batches at most: the one being started and the one still read.
  std::array<Impl::InFlight, 2> flights;
  Impl::InFlight* pending = nullptr;
  // Collects the pending batch and hands it to the training thread; after a
  // failure it is dropped (the training thread must not get a batch past
  // the one that failed).
  auto complete_pending = [&] {
    if (!pending) return;
    Impl::InFlight& b = *pending;
    pending = nullptr;
    m.complete(b, per_epoch, count, failed);
  };
  int64_t epoch = from.epoch, batch = from.batch;
  for (int64_t k = 0; k < count; ++k) {
    Impl::InFlight& next = flights[size_t(k % 2)];
    // A free slot (or a stop). While a batch is still being read, only one
    // free now: that batch's slot reaches the training thread only once it
    // is complete. At an epoch's start the previous epoch is completed
    // first (its pages dropped, staged shards reopened on no pending read).
    if (pending && batch == 0) complete_pending();
    size_t slot = 0;
    Impl::Slot got = pending ? m.take_slot(slot, false) : Impl::Slot::none;
    if (got == Impl::Slot::none) {
      complete_pending();
      got = m.take_slot(slot, true);
    }
    const bool stopping = got == Impl::Slot::stop;
    std::fill(local.begin(), local.end(), 0);
    local[0] = failed ? kFailed : stopping ? kStop : kGo;
    if (local[0] == kGo) {
      try {
        m.sampler->batch_indices(epoch, batch, indices);
        m.plan_batch(indices, next.plan);
        for (size_t s = 0; s < m.shards.size(); ++s) local[1 + s] = int64_t(next.plan.runs[s].size());
      } catch (...) {
        failed = true;
        local[0] = kFailed;
        std::lock_guard<std::mutex> lock(m.mu);
        m.error = std::current_exception();
      }
    }
    // Independent reads need no agreement, except where collective calls may
    // follow: the collective reads themselves, and reopening staged shards
    // at an epoch's start. Skipping it elsewhere matters on busy cores: a
    // rank waiting in the all-reduce for another's I/O thread spins.
    // With staging, every batch: a rank that stops mid-epoch must not leave
    // another alone in the reopening's collectives at the next epoch; with
    // the peer cache, every batch's exchange is collective.
    // The wait backs off: a blocking all-reduce would spin.
    if (collective || m.locator.cached || m.peers) {
      MPI_Request request = MPI_REQUEST_NULL;
      MPI_Iallreduce(local.data(), agreed.data(), int(n), MPI_INT64_T, MPI_MAX, m.comm, &request);
      comm::wait_backing_off(request);
    } else
      agreed = local;
    if (agreed[0] != kGo) {
      if (!failed && !stopping) {
        std::lock_guard<std::mutex> lock(m.mu);
        m.error = std::make_exception_ptr(Error(agreed[0] == kFailed
                                                    ? "the data loader stopped: another rank's loader failed"
                                                    : "the data loader stopped: another rank stopped reading"));
      }
      break;
    }
    try {
      if (batch == 0 && m.locator.cached) m.reopen_cached_shards();
      LoadedBatch& out = m.slots[slot];
      out.epoch = epoch;
      out.batch = batch;
      next.slot = slot;
      next.k = k;
      m.start_batch(next, agreed);
    } catch (...) {
      // start_batch records read errors for finish_batch: this is reopening
      // (or memory). No read of this batch may outlive it, nor the pending one.
      if (next.submitted) m.pool->wait(next.ticket);
      next.submitted = false;
      PeerCache::finish_move(next.transfer);
      {
        std::lock_guard<std::mutex> lock(m.mu);
        m.error = std::current_exception();
        m.free_slots.push_back(slot);
      }
      failed = true;
      complete_pending();
      m.cv.notify_all();
      continue;
    }
    complete_pending();  // the previous batch, while this one's reads run
    pending = &next;
    if (!m.pool) complete_pending();  // nothing in flight: HDF5 read it all
    if (++batch == per_epoch) {
      batch = 0;
      ++epoch;
    }
  }
  complete_pending();
  std::lock_guard<std::mutex> lock(m.mu);
  m.finished = true;
  m.cv.notify_all();
}

void StreamLoader::Impl::reopen_cached_shards() {
  // A shard is read from the cache only once every rank (every node) has it,
  // so that all ranks open the same content through the same collective call.
  // Two rounds: which shards every node's stager has, then whether the file
  // is really there on every rank (a stager may have evicted it meanwhile);
  // only then the collective close and open.
  const size_t n = shards.size();
  std::vector<int> have(n), all(n);
  for (size_t s = 0; s < n; ++s) have[s] = open_paths[s] == source_files[s] && locator.cached(int(s)) ? 1 : 0;
  MPI_Allreduce(have.data(), all.data(), int(n), MPI_INT, MPI_MIN, comm);
  std::vector<std::string> want(n);
  const std::vector<int> candidates = all;
  for (size_t s = 0; s < n; ++s) {
    if (all[s]) {
      want[s] = locator.path_for(int(s));
      // Pinned before the check: from here on the stager leaves it alone.
      if (locator.pin) locator.pin(int(s), true);
    }
    have[s] = all[s] && ::access(want[s].c_str(), R_OK) == 0 ? 1 : 0;
  }
  MPI_Allreduce(have.data(), all.data(), int(n), MPI_INT, MPI_MIN, comm);
  for (size_t s = 0; s < n; ++s) {
    if (!all[s]) {
      if (candidates[s] && locator.pin) locator.pin(int(s), false);
      continue;
    }
    shards[s].reset();  // collective close
    open_shard(int(s), want[s], fapl.get());
  }
}

void StreamLoader::Impl::drop_cold_pages() {
  for (size_t s = 0; s < shards.size(); ++s)
    if (cold_touched[s] && page_fds[s] >= 0) drop_cached_pages(page_fds[s], open_paths[s]);
  cold_touched.assign(shards.size(), false);
  cold_bytes = 0;
}

void StreamLoader::Impl::plan_batch(const std::vector<int64_t>& indices, Plan& plan) const {
  plan.order.resize(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) plan.order[i] = {indices[i], int64_t(i)};
  std::sort(plan.order.begin(), plan.order.end());
  plan.runs.assign(shards.size(), {});
  plan.first.assign(shards.size() + 1, plan.order.size());
  size_t at = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    plan.first[s] = at;
    const int64_t begin = shard_begin[s], end = begin + shard_samples[s];
    for (; at < plan.order.size() && plan.order[at].first < end; ++at) {
      const int64_t local = plan.order[at].first - begin;
      auto& runs = plan.runs[s];
      if (!runs.empty() && runs.back().first + runs.back().count == local)
        ++runs.back().count;
      else
        runs.push_back({local, 1});
    }
  }
  ST_ASSERT(at == plan.order.size());
}

void StreamLoader::Impl::finish_range(size_t s, size_t begin, size_t end, const Plan& plan, const uint8_t* raw,
                                      LoadedBatch& out) const {
  if (!checksums[s].empty())
    shard_format::verify_samples(
        open_paths[s], raw + begin * sample_bytes, sample_bytes, int64_t(end - begin),
        [&](int64_t k) { return plan.order[begin + size_t(k)].first - shard_begin[s]; }, labels[s], checksums[s]);
  for (size_t i = begin; i < end; ++i) {
    const int64_t pos = plan.order[i].second;
    if (options.raw)
      std::memcpy(out.raw.data() + size_t(pos) * sample_bytes, raw + i * sample_bytes, sample_bytes);
    else
      normalize_sample(info, raw + i * sample_bytes, out.x.f32() + pos * info.sample_numel());
    out.y[size_t(pos)] = labels[s][size_t(plan.order[i].first - shard_begin[s])];
  }
}

void StreamLoader::Impl::read_piece(const Piece& p, const Plan& plan, LoadedBatch& out) const {
  thread_local std::vector<uint8_t> block;  // a buffered read's (O_DIRECT's land in read_direct_view's)
  const size_t s = p.shard, total = size_t(p.count) * sample_bytes;
  const size_t value_bytes = shard_format::dtype_size(info.dtype);  // blocks and samples end on whole values
  const bool check = !checksums[s].empty();
  const std::string what =
      fmt::format("{}: {}: samples [{}, {})", open_paths[s], shard_format::kX, p.first, p.first + p.count);
  shard_format::ChecksumMismatch bad;
  bad.checked = p.count;
  uint32_t crc = 0;
  for (size_t at = 0; at < total;) {
    const size_t n = std::min(kBlockBytes, total - at);
    const uint8_t* data = nullptr;
    if (direct_fds[s] >= 0) {
      data = read_direct_view(direct_fds[s], n, p.offset + int64_t(at), what);
    } else {
      block.resize(kBlockBytes);
      read_at(page_fds[s], block.data(), n, p.offset + int64_t(at), what);
      data = block.data();
    }
    // The block's part of each sample it holds.
    for (size_t done = 0; done < n;) {
      const size_t k = (at + done) / sample_bytes, within = (at + done) % sample_bytes;
      const size_t len = std::min(n - done, sample_bytes - within);
      const auto [sample, pos] = plan.order[p.begin + k];
      if (check) crc = shard_format::sample_crc32_update(within == 0 ? 0 : crc, data + done, len);
      if (options.raw)
        std::memcpy(out.raw.data() + size_t(pos) * sample_bytes + within, data + done, len);
      else
        normalize_values(info, data + done, int64_t(len / value_bytes),
                         out.x.f32() + pos * info.sample_numel() + int64_t(within / value_bytes));
      if (within + len == sample_bytes) {
        const auto i = size_t(sample - shard_begin[s]);
        out.y[size_t(pos)] = labels[s][i];
        if (check) bad.note(int64_t(i), checksums[s][i], shard_format::sample_crc32_finish(crc, labels[s][i]));
      }
      done += len;
    }
    at += n;
  }
  if (bad.failed > 0) shard_format::throw_checksum_mismatch(open_paths[s], bad);
}

void StreamLoader::Impl::complete(InFlight& b, int64_t per_epoch, int64_t count, bool& failed) {
  LoadedBatch& out = slots[b.slot];
  try {
    finish_batch(b);
    if (options.cold_cache && (out.batch + 1 == per_epoch || b.k + 1 == count || cold_bytes >= kColdBudget))
      drop_cold_pages();
    std::lock_guard<std::mutex> lock(mu);
    if (failed) {
      free_slots.push_back(b.slot);
    } else {
      ready.push_back(b.slot);
      stats.batches += 1;
      stats.bytes += out.bytes;
      stats.requests += out.requests;
      stats.read_s += out.read_s;
      stats.peer_bytes += b.peer_bytes;
      stats.served_bytes += b.served_bytes;
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu);
    if (!failed) error = std::current_exception();
    failed = true;  // the next agreement tells the other ranks
    free_slots.push_back(b.slot);
  }
  cv.notify_all();
}

void StreamLoader::Impl::start_batch(InFlight& b, const std::vector<int64_t>& calls) {
  LoadedBatch& out = slots[b.slot];
  out.bytes = out.requests = out.read_calls = 0;
  out.read_s = 0;
  const Plan& plan = b.plan;
  // The batch's raw bytes, where HDF5 reads and the peer cache's exchange
  // lands (the pool's readers convert from their own blocks).
  const bool hdf5_reads =
      !pool || std::any_of(extents.begin(), extents.end(), [](const auto& e) { return !e.has_value(); });
  if (hdf5_reads || peers) b.raw.resize(std::max<size_t>(1, plan.order.size() * sample_bytes));
  b.shard_error.assign(shards.size(), nullptr);
  b.by_hdf5.clear();
  b.pieces.clear();
  b.submitted = false;
  b.t0 = now_seconds();
  b.peer_bytes = b.served_bytes = 0;
  // 1. The pool's reads: every run of every shard it can read, cut at chunks.
  if (pool) {
    for (size_t s = 0; s < shards.size(); ++s) {
      const std::optional<SampleExtents>& known = extents[s];
      if (!known || (peers && !peers->held_here(int(s)))) continue;  // another node's: exchanged below
      const SampleExtents& where = *known;
      size_t begin = plan.first[s];
      for (const ShardReader::Run& r : plan.runs[s])
        where.for_each_piece(r.first, r.count, [&](int64_t offset, int64_t first, int64_t count) {
          b.pieces.push_back({s, begin, offset, first, count});
          begin += size_t(count);
        });
    }
    b.piece_error.assign(b.pieces.size(), nullptr);
    out.requests = out.read_calls = int64_t(b.pieces.size());
    b.ticket = pool->submit(int64_t(b.pieces.size()), [this, &b, &out](int64_t i) {
      const Piece& p = b.pieces[size_t(i)];
      try {
        read_piece(p, b.plan, out);
      } catch (...) {
        b.piece_error[size_t(i)] = std::current_exception();
      }
    });
    b.submitted = true;
  }
  if (peers) start_exchange(b);
  // 2. HDF5's reads, one shard at a time, meanwhile.
  const bool collective = options.transfer == Transfer::collective;
  for (size_t s = 0; s < shards.size(); ++s) {
    if (pool && extents[s]) continue;
    const auto& runs = plan.runs[s];
    // Collective: as many calls as the rank with the most runs here.
    const int64_t n_calls = collective ? calls[1 + s] : int64_t(runs.size());
    if (n_calls == 0) continue;
    try {
      // Go on with the other shards' calls after a failure (the other ranks
      // make them too); the batch fails once they are done.
      shards[s]->read_x_runs(runs, b.raw.data() + plan.first[s] * sample_bytes, dxpl.get(), n_calls);
    } catch (...) {
      b.shard_error[s] = std::current_exception();
      continue;
    }
    if (!runs.empty()) b.by_hdf5.push_back(s);
    out.read_calls += n_calls;
    out.requests += int64_t(runs.size());
    if (collective && !runs.empty()) {  // what HDF5 did with this rank's last real read
      std::lock_guard<std::mutex> lock(mu);
      stats.actual_io_mode = mpio::actual_io_mode(dxpl.get());
      stats.no_collective_cause = mpio::no_collective_cause(dxpl.get());
    }
  }
}

void StreamLoader::Impl::finish_batch(InFlight& b) {
  LoadedBatch& out = slots[b.slot];
  if (b.submitted) {
    b.submitted = false;
    pool->wait(b.ticket);  // the tasks record their errors: it never throws
    for (size_t i = 0; i < b.pieces.size(); ++i)
      if (b.piece_error[i] && !b.shard_error[b.pieces[i].shard]) b.shard_error[b.pieces[i].shard] = b.piece_error[i];
  }
  if (peers) finish_exchange(b);
  // From the batch's start to its last read: with the pool it includes the
  // checks and conversions its readers did between reads, and the overlap
  // with the previous batch's last reads.
  out.read_s = now_seconds() - b.t0;
  // The samples HDF5 read: checked and put in their places.
  for (size_t s : b.by_hdf5) {
    try {
      finish_range(s, b.plan.first[s], b.plan.first[s + 1], b.plan, b.raw.data(), out);
    } catch (...) {
      b.shard_error[s] = std::current_exception();
    }
  }
  for (size_t s = 0; s < shards.size(); ++s) {
    if (b.shard_error[s]) std::rethrow_exception(b.shard_error[s]);
    const auto bytes = int64_t((b.plan.first[s + 1] - b.plan.first[s]) * sample_bytes);
    out.bytes += bytes;
    if (options.cold_cache && bytes > 0) {
      cold_touched[s] = true;
      cold_bytes += bytes;
    }
  }
}

void StreamLoader::Impl::list_source_files(const std::optional<Manifest>& manifest) {
  if (!options.peer_sparse_split) {
    source_files = shard_format::list_shard_files(split_dir);
    if (manifest) check_manifest_lists_files(split_dir, *manifest);
    return;
  }
  ST_CHECK(manifest.has_value() && !options.peer_cache_dir.empty(),
           "{}: a split that holds one node's shards needs its manifest and io.peer_cache.dir", split_dir);
  source_files.reserve(manifest->shards.size());
  for (const ManifestShard& shard : manifest->shards)
    source_files.push_back((std::filesystem::path(split_dir) / shard.file).string());
}

std::vector<ShardMetadata> StreamLoader::Impl::share_sparse_metadata(PeerLayout& layout) const {
  layout = peer_layout(comm, int(options.peer_ranks_per_node));
  std::vector<int> reader_of(source_files.size());
  for (size_t s = 0; s < source_files.size(); ++s)
    reader_of[s] = layout.ranks_of_node[size_t(peer_owner(int(s), layout.nodes))].front();
  return share_shard_metadata(comm, reader_of, [&](int s) {
    const ShardReader r(source_files[size_t(s)]);
    ShardMetadata md{r.header(), r.read_labels(),
                     options.verify_checksums ? r.read_checksums() : std::vector<uint32_t>(), std::nullopt};
    std::string why;
    md.extents = r.x_extents(&why);
    return md;
  });
}

std::vector<ShardHeaderOf> StreamLoader::Impl::read_headers_and_labels(const std::optional<Manifest>& manifest,
                                                                       std::vector<ShardMetadata>& remote) {
  std::vector<ShardHeaderOf> headers;
  if (options.peer_sparse_split) {
    for (size_t s = 0; s < remote.size(); ++s) {
      const int64_t listed = manifest ? manifest->shards[s].num_samples : remote[s].header.num_samples;
      ST_CHECK(remote[s].header.num_samples == listed, "{}: {} samples, but {} says {}", source_files[s],
               remote[s].header.num_samples, manifest_path(split_dir), listed);
      headers.push_back({source_files[s], remote[s].header});
      labels.push_back(std::move(remote[s].labels));
      checksums.push_back(std::move(remote[s].checksums));
    }
    check_shard_set(split_dir, headers);
    return headers;
  }
  if (manifest) check_manifest_against_files(split_dir, *manifest);
  headers = read_shard_headers(source_files);
  check_shard_set(split_dir, headers);
  for (const ShardHeaderOf& h : headers) {
    const ShardReader r(h.path);
    labels.push_back(r.read_labels());
    checksums.push_back(options.verify_checksums ? r.read_checksums() : std::vector<uint32_t>());
  }
  return headers;
}

void StreamLoader::Impl::open_shards(const PeerLayout* sparse, const std::vector<ShardMetadata>& remote) {
  for (size_t s = 0; s < source_files.size(); ++s) {
    if (sparse == nullptr)
      open_shard(int(s), source_files[s], fapl.get());
    else if (const int node = peer_owner(int(s), sparse->nodes); node == sparse->node)
      open_shard(int(s), source_files[s], H5P_DEFAULT);
    else
      know_remote_shard(int(s), remote[s], node);
  }
}

void StreamLoader::Impl::use_peer_cache(const std::optional<Manifest>& manifest, int64_t global_batch, uint64_t seed) {
  ST_CHECK(pool != nullptr, "io.peer_cache.dir needs the read pool (data.read_engine \"auto\" or \"pool\")");
  for (size_t s = 0; s < shards.size(); ++s)
    ST_CHECK(extents[s].has_value(), "io.peer_cache.dir: {} cannot be read by the read pool ({})", source_files[s],
             engine_note);
  peers = std::make_unique<PeerCache>(comm, options.peer_cache_dir, int(options.peer_ranks_per_node), source_files,
                                      manifest ? &*manifest : nullptr);
  // This node's shards are read from its copies (the same bytes at the same offsets).
  for (size_t s = 0; s < shards.size(); ++s) {
    if (!peers->held_here(int(s))) continue;
    const std::string& path = peers->local_path(int(s));
    for (int* fd : {&page_fds[s], &direct_fds[s]}) {
      const bool was_direct = fd == &direct_fds[s];
      if (*fd < 0) continue;
      ::close(*fd);
      *fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (was_direct ? O_DIRECT : 0));
      ST_CHECK(*fd >= 0, "{}: cannot open this node's copy: {}", path, std::strerror(errno));
    }
    open_paths[s] = path;
  }
  int world = 1;
  MPI_Comm_size(comm, &world);
  for (int r = 0; r < world; ++r)
    peer_samplers.emplace_back(info.num_samples, global_batch, r, world, seed,
                               sampler_options(options, info.shard_sizes));
  stats.peer_cache = peers->describe();
  stats.staged_bytes = peers->staged_bytes();
  stats.fetched_bytes = options.peer_fetched_bytes;
}

void StreamLoader::Impl::start_exchange(InFlight& b) {
  LoadedBatch& out = slots[b.slot];
  peer_batches.resize(peer_samplers.size());
  for (size_t r = 0; r < peer_samplers.size(); ++r)
    peer_samplers[r].batch_indices(out.epoch, out.batch, peer_batches[r]);
  b.peer_plan = peers->plan(peer_batches, [this](int64_t i) { return shard_of(i); });
  const PeerPlan& plan = b.peer_plan;
  std::vector<int64_t> serve;
  for (const std::vector<int64_t>& to : plan.send) serve.insert(serve.end(), to.begin(), to.end());
  b.served.resize(serve.size() * sample_bytes);
  std::vector<std::exception_ptr> serve_error(serve.size());
  pool->run(int64_t(serve.size()), [&](int64_t k) {
    try {
      const size_t s = size_t(shard_of(serve[size_t(k)]));
      const int64_t local = serve[size_t(k)] - shard_begin[s];
      const std::string what = fmt::format("{}: {}: sample {}", open_paths[s], shard_format::kX, local);
      uint8_t* dst = b.served.data() + size_t(k) * sample_bytes;
      const int64_t offset = extents[s]->offset_of(local);
      if (direct_fds[s] >= 0)
        read_direct(direct_fds[s], dst, sample_bytes, offset, what);
      else
        read_at(page_fds[s], dst, sample_bytes, offset, what);
    } catch (...) {
      serve_error[size_t(k)] = std::current_exception();
    }
  });
  // Every rank moves its bytes, also after a failed read: the receivers'
  // checksums catch what it could not read, and its own batch fails below.
  peers->start_move(plan, b.served, b.received, sample_bytes, b.transfer);
  b.served_bytes = int64_t(b.served.size());
  for (size_t k = 0; k < serve.size(); ++k)
    if (serve_error[k] && !b.shard_error[size_t(shard_of(serve[k]))])
      b.shard_error[size_t(shard_of(serve[k]))] = serve_error[k];
}

void StreamLoader::Impl::finish_exchange(InFlight& b) {
  if (!b.transfer.active()) return;
  PeerCache::finish_move(b.transfer);
  LoadedBatch& out = slots[b.slot];
  const PeerPlan& plan = b.peer_plan;
  b.peer_bytes = int64_t(b.received.size());
  // Received: each sender's samples in ascending order, put in their places
  // in the plan (also ascending), then checked and converted shard by shard.
  size_t k = 0;
  for (const std::vector<int64_t>& from : plan.recv)
    for (const int64_t i : from) {
      const auto at = std::lower_bound(b.plan.order.begin(), b.plan.order.end(), std::pair<int64_t, int64_t>(i, -1));
      std::memcpy(b.raw.data() + size_t(at - b.plan.order.begin()) * sample_bytes,
                  b.received.data() + k++ * sample_bytes, sample_bytes);
    }
  for (size_t s = 0; s < shards.size(); ++s) {
    if (peers->held_here(int(s)) || b.plan.first[s] == b.plan.first[s + 1] || b.shard_error[s]) continue;
    try {
      finish_range(s, b.plan.first[s], b.plan.first[s + 1], b.plan, b.raw.data(), out);
    } catch (...) {
      b.shard_error[s] = std::current_exception();
    }
  }
}

const LoadedBatch& StreamLoader::next() {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mu);
  if (m.held.size() == size_t(kHeldBatches)) {
    m.free_slots.push_back(m.held.front());
    m.held.pop_front();
    m.cv.notify_all();
  }
  m.cv.wait(lock, [&] { return !m.ready.empty() || m.error || m.finished; });
  if (m.ready.empty()) {
    if (m.error) std::rethrow_exception(m.error);
    throw Error("the data loader has no more batches (start() was given fewer than were asked for)");
  }
  m.held.push_back(m.ready.front());
  m.ready.pop_front();
  return m.slots[m.held.back()];
}

int64_t StreamLoader::queued() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return int64_t(impl_->ready.size());
}

LoaderStats StreamLoader::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

}  // namespace shardtrain::io
