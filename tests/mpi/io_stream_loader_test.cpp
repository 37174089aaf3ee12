// The streaming loader under mpirun with 1-4 ranks: every batch equals what
// the in-memory data set gives for the same indices (and stays so while the
// next is taken: the step reads it in place), in collective and in
// independent transfer mode, and with the read pool (buffered and O_DIRECT,
// on shards of several chunks) as with HDF5; reads are merged into runs; the cold-cache mode
// leaves the shards out of the page cache; bad input fails on every rank with
// the same message; a shard whose samples no longer match their checksums
// ends the reading on every rank, naming the file and the samples where it
// was read; stopping early (before all batches were read) ends cleanly on
// every rank; and the peer cache tier (io.peer_cache.dir): the same batches,
// every sample once, the shared store copied once, copies kept or renewed;
// a sparse split (each node fetched only its shards from an object store):
// the same batches, the other nodes' shards known from their nodes'
// metadata, a held shard missing an error on every rank; samples larger than
// a reader's block arrive whole and checked.
#include "io/dataset.h"
#include "io/dataset_writer.h"
#include "io/hdf5_handle.h"
#include "io/manifest.h"
#include "io/page_cache.h"
#include "io/peer_cache.h"
#include "io/peer_metadata.h"
#include "io/stream_loader.h"
#include "runtime/core/error.h"
#include "runtime/core/rng.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <stdlib.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

using namespace shardtrain;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

std::vector<float> values(const Tensor& t) { return {t.f32(), t.f32() + t.numel()}; }

constexpr int64_t kShardSizes[] = {37, 50, 13};  // 100 samples, uneven shards
constexpr int64_t kGlobalBatch = 12;             // 8 batches per epoch, 4 dropped
const Shape kSample{3, 5, 5};

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// A split of three shards written by rank 0 into a directory all ranks share.
std::string make_split(const std::string& name, const Shape& sample = kSample,
                       const std::array<int64_t, 3>& sizes = {kShardSizes[0], kShardSizes[1], kShardSizes[2]}) {
  char path[256] = {};
  if (rank() == 0) {
    std::string dir = (fs::temp_directory_path() / ("stream-loader-" + name + "-XXXXXX")).string();
    ST_CHECK(mkdtemp(dir.data()) != nullptr, "mkdtemp");
    Rng r(stream_key(5, 0, 0));
    for (int s = 0; s < 3; ++s) {
      io::shard_format::ShardHeader h;
      h.split = "train";
      h.num_classes = 7;
      h.shard_index = s;
      h.num_shards = 3;
      h.num_samples = sizes[size_t(s)];
      h.sample_shape = sample;
      h.dtype = io::SampleDType::u8;
      h.normalize_mean = 0.25f;
      h.normalize_std = 0.5f;
      std::vector<uint8_t> x(size_t(h.num_samples * sample.numel()));
      std::vector<int32_t> y(size_t(h.num_samples));
      for (auto& v : x) v = uint8_t(r.below(256));
      for (auto& v : y) v = int32_t(r.below(7));
      io::write_shard(dir + "/" + io::shard_format::shard_file_name(s), h, x.data(), y.data());
    }
    std::strncpy(path, dir.c_str(), sizeof path - 1);
  }
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
  return path;
}

void remove_split(const std::string& dir) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0) fs::remove_all(dir);
}

// Reads two epochs and checks every batch against the in-memory data set.
void expect_batches_match_memory(const std::string& dir, const std::string& transfer,
                                 io::ReadEngine engine = io::ReadEngine::automatic, bool direct = false,
                                 const Shape& sample = kSample, int64_t global_batch = kGlobalBatch) {
  io::LoaderOptions o;
  o.mode = io::LoaderMode::stream;
  o.transfer = parse_enum<io::Transfer>(transfer).value();
  o.prefetch_batches = 2;
  o.read_engine = engine;
  o.direct_io = direct ? io::DirectIo::on : io::DirectIo::off;
  o.reads_in_flight = 3;
  io::StreamLoader loader(dir, o, global_batch, 9);
  const bool pool = engine != io::ReadEngine::hdf5 && transfer == "independent";
  EXPECT_THAT(loader.stats().read_engine, HasSubstr(!pool    ? "hdf5"
                                                    : direct ? "pool, 3 in flight, O_DIRECT"
                                                             : "pool, 3 in flight, buffered"));
  const io::InMemoryDataset memory = io::InMemoryDataset::load(dir);
  ASSERT_EQ(loader.size(), memory.size());
  io::Sampler sampler(loader.size(), global_batch, rank(), world(), 9);  // the loader's, for reference indices
  const int64_t per_epoch = sampler.batches_per_epoch();
  loader.start({0, 0}, 2 * per_epoch);
  std::vector<int64_t> idx;
  std::vector<float> x(size_t(sampler.local_batch() * sample.numel()));
  std::vector<int32_t> y(size_t(sampler.local_batch()));
  int64_t requests = 0, samples = 0;
  const io::LoadedBatch* before = nullptr;  // the batch before, still held: unchanged
  std::vector<float> x_before;
  for (int64_t e = 0; e < 2; ++e)
    for (int64_t b = 0; b < per_epoch; ++b) {
      const io::LoadedBatch& got = loader.next();
      ASSERT_EQ(got.epoch, e);
      ASSERT_EQ(got.batch, b);
      if (before != nullptr) {
        ASSERT_EQ(values(before->x), x_before) << "the batch before " << e << "." << b;
      }
      sampler.batch_indices(e, b, idx);
      memory.gather(idx.data(), int64_t(idx.size()), x.data(), y.data());
      ASSERT_EQ(values(got.x), x) << transfer << " epoch " << e << " batch " << b;
      before = &got;
      x_before = x;
      ASSERT_EQ(got.y, y);
      EXPECT_EQ(got.bytes, int64_t(idx.size()) * sample.numel());
      requests += got.requests;
      samples += int64_t(idx.size());
    }
  if (!pool) {
    EXPECT_LE(requests, samples);  // runs: never more requests than samples (the pool cuts at chunks)
  }
  const io::LoaderStats s = loader.stats();
  EXPECT_EQ(s.batches, 2 * per_epoch);
  if (transfer == "collective") {
    EXPECT_FALSE(s.actual_io_mode.empty());
  }
}

TEST(StreamLoader, CollectiveBatchesEqualTheInMemoryOnes) {
  const std::string dir = make_split("coll");
  expect_batches_match_memory(dir, "collective");
  remove_split(dir);
}

TEST(StreamLoader, IndependentBatchesEqualTheInMemoryOnes) {
  const std::string dir = make_split("indep");
  expect_batches_match_memory(dir, "independent");
  remove_split(dir);
}

// Samples of 3x128x128 bytes: 21 to a 1 MiB chunk, so runs cross chunks.
TEST(StreamLoader, ReadPoolBatchesEqualHdf5sAcrossChunks) {
  const Shape big{3, 128, 128};
  const std::string dir = make_split("pool", big);
  expect_batches_match_memory(dir, "independent", io::ReadEngine::hdf5, false, big);
  expect_batches_match_memory(dir, "independent", io::ReadEngine::pool, false, big);
  expect_batches_match_memory(dir, "independent", io::ReadEngine::pool, true, big);
  expect_batches_match_memory(dir, "collective", io::ReadEngine::automatic, false, big);
  remove_split(dir);
}

// Samples of 1.07 MiB, larger than a reader's block (1 MiB): each sample
// is checked and converted in two or three blocks, and a run of them
// crosses blocks inside samples. A flipped byte in a sample's last block
// fails its checksum.
TEST(StreamLoader, SamplesLargerThanAReadBlockArriveWholeAndChecked) {
  const Shape huge{1, 1024, 1100};
  const std::string dir = make_split("huge", huge, {4, 5, 3});  // 12: every sample in a batch on 1-4 ranks
  for (const bool direct : {false, true})
    expect_batches_match_memory(dir, "independent", io::ReadEngine::pool, direct, huge, 2 * world());
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0) {  // one byte of shard 1's sample 2, past its first MiB
    const std::string f = dir + "/" + io::shard_format::shard_file_name(1);
    io::h5::File file(H5Fopen(f.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    io::h5::Dataset x(H5Dopen2(file.get(), "/x", H5P_DEFAULT));
    std::vector<uint8_t> all(size_t(5 * huge.numel()));
    ASSERT_GE(H5Dread(x.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, all.data()), 0);
    all[size_t(2 * huge.numel() + 1100000)] ^= 0x40;
    ASSERT_GE(H5Dwrite(x.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, all.data()), 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  io::LoaderOptions o;
  o.mode = io::LoaderMode::stream;
  o.read_engine = io::ReadEngine::pool;
  o.direct_io = io::DirectIo::on;
  io::StreamLoader loader(dir, o, world(), 9);  // one sample per rank and batch: every sample read
  loader.start({0, 0}, 12 / world());
  std::string message;
  try {
    for (int64_t b = 0; b < 12 / world(); ++b) loader.next();
  } catch (const Error& e) {
    message = e.what();
  }
  int named = message.find("part-00001.h5: sample 2 (of the ") != std::string::npos;
  MPI_Allreduce(MPI_IN_PLACE, &named, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(named, 1) << message;
  remove_split(dir);
}

// An open HDF5 file costs a rank about 0.5 MB: the shards the read pool
// reads are closed once their headers and extents are known (HDF5 reads
// keep theirs open), so a split of one sample per file does not grow every
// rank by half a megabyte a file.
TEST(StreamLoader, ShardsThePoolReadsAreNotKeptOpen) {
  const std::string dir = make_split("open-files");
  for (const io::ReadEngine engine : {io::ReadEngine::pool, io::ReadEngine::hdf5}) {
    io::LoaderOptions o;
    o.mode = io::LoaderMode::stream;
    o.read_engine = engine;
    io::StreamLoader loader(dir, o, 2 * world(), 3);
    const ssize_t open_files = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_FILE);
    EXPECT_EQ(open_files, engine == io::ReadEngine::pool ? 0 : 3) << name_of(engine);
    loader.start({0, 0}, 2);
    for (int b = 0; b < 2; ++b) loader.next();
    EXPECT_EQ(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_FILE), open_files) << name_of(engine);
  }
  remove_split(dir);
}

TEST(StreamLoader, StoppingBeforeTheLastBatchEndsOnEveryRank) {
  const std::string dir = make_split("stop");
  {
    io::LoaderOptions o;
    o.prefetch_batches = 1;
    io::StreamLoader loader(dir, o, kGlobalBatch, 3);
    loader.start({0, 0}, 100);
    for (int i = 0; i < 3; ++i) loader.next();
  }  // the destructor agrees with the other ranks to stop: no hang
  remove_split(dir);
}

TEST(StreamLoader, ColdCacheDropsTheShardsPages) {
  const std::string dir = make_split("cold");
  io::LoaderOptions o;
  o.cold_cache = true;
  {
    io::StreamLoader loader(dir, o, kGlobalBatch, 3);
    loader.start({0, 0}, loader.sampler().batches_per_epoch());
    for (int64_t b = 0; b < loader.sampler().batches_per_epoch(); ++b) loader.next();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (const auto& f : io::shard_format::list_shard_files(dir)) EXPECT_LT(io::resident_fraction(f), 0.05) << f;
  MPI_Barrier(MPI_COMM_WORLD);  // every rank has looked before rank 0 reads one back
  // Control: reading the files puts them in the page cache.
  if (rank() == 0) {
    const auto files = io::shard_format::list_shard_files(dir);
    std::ifstream in(files[1], std::ios::binary);
    std::vector<char> all((std::istreambuf_iterator<char>(in)), {});
    EXPECT_GT(io::resident_fraction(files[1]), 0.9);
  }
  remove_split(dir);
}

// Staging: once every rank's locator says a shard is cached, the loader reads
// it from the cached copy. The source files are truncated after the loader
// opened them, so a batch read from the source could not match.
TEST(StreamLoader, ReadsStagedShardsFromTheCache) {
  const std::string dir = make_split("staged");
  const std::string cache = dir + "-cache";
  if (rank() == 0) fs::copy(dir, cache, fs::copy_options::recursive);
  MPI_Barrier(MPI_COMM_WORLD);
  const io::InMemoryDataset memory = io::InMemoryDataset::load(dir);
  io::ShardLocator locator{
      [](int) { return true; }, [&](int s) { return cache + "/" + io::shard_format::shard_file_name(s); }, {}};
  {
    io::StreamLoader loader(dir, {}, kGlobalBatch, 4, locator);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank() == 0)
      for (const auto& f : io::shard_format::list_shard_files(dir)) fs::resize_file(f, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    io::Sampler sampler(loader.size(), kGlobalBatch, rank(), world(), 4);
    loader.start({0, 0}, sampler.batches_per_epoch());
    std::vector<int64_t> idx;
    std::vector<float> x(size_t(sampler.local_batch() * kSample.numel()));
    std::vector<int32_t> y(size_t(sampler.local_batch()));
    for (int64_t b = 0; b < sampler.batches_per_epoch(); ++b) {
      const io::LoadedBatch& got = loader.next();
      sampler.batch_indices(0, b, idx);
      memory.gather(idx.data(), int64_t(idx.size()), x.data(), y.data());
      ASSERT_EQ(values(got.x), x) << "batch " << b;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0) fs::remove_all(cache);
  remove_split(dir);
}

TEST(StreamLoader, BadInputFailsOnEveryRankWithTheSameMessage) {
  const std::string dir = make_split("bad");
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0) {  // truncate the middle shard: not an HDF5 file any more
    const std::string f = dir + "/" + io::shard_format::shard_file_name(1);
    fs::resize_file(f, 100);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  try {
    io::StreamLoader loader(dir, {}, kGlobalBatch, 3);
    ADD_FAILURE() << "a truncated shard was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("part-00001.h5"));
  }
  remove_split(dir);
}

TEST(StreamLoader, CorruptSamplesFailNamingTheFileAndSamples) {
  const std::string dir = make_split("crc");
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0) {  // every sample of the middle shard gets other bytes, /crc32 stays
    const std::string f = dir + "/" + io::shard_format::shard_file_name(1);
    io::h5::File file(H5Fopen(f.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    io::h5::Dataset x(H5Dopen2(file.get(), "/x", H5P_DEFAULT));
    const std::vector<uint8_t> junk(size_t(kShardSizes[1] * kSample.numel()), 0xee);
    ASSERT_GE(H5Dwrite(x.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, junk.data()), 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  io::LoaderOptions o;
  o.mode = io::LoaderMode::stream;
  o.transfer = io::Transfer::collective;
  io::StreamLoader loader(dir, o, kGlobalBatch, 9);
  EXPECT_TRUE(loader.info().samples_verified);
  const int64_t per_epoch = io::Sampler(loader.size(), kGlobalBatch, rank(), world(), 9).batches_per_epoch();
  loader.start({0, 0}, 2 * per_epoch);
  std::string message;
  try {
    for (int64_t b = 0; b < 2 * per_epoch; ++b) loader.next();
  } catch (const Error& e) {
    message = e.what();
  }
  // The rank(s) that read the shard name it; the others stop with them.
  int named = message.find("part-00001.h5: ") != std::string::npos && message.find("(of the ") != std::string::npos &&
              message.find("/x, /y and /crc32 disagree") != std::string::npos;
  int failed = message.empty() ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &named, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  EXPECT_GE(named, 1);
  EXPECT_EQ(failed, 1) << "a rank read on: '" << message << "'";
  remove_split(dir);
}

// io.peer_cache.dir. Nodes: every rank its own (ranks_per_node 1), or, run
// on emulated nodes with PEER_CACHE_NODES set, MPI's view (each node's
// PEER_CACHE_DIR its own disk, tests/integration/peer_cache_test.sh).
struct PeerSetup {
  int ranks_per_node = 1, nodes = 0;
  std::string cache;
};
PeerSetup peer_setup(const std::string& split) {
  PeerSetup p;
  const char* nodes = std::getenv("PEER_CACHE_NODES");
  const char* dir = std::getenv("PEER_CACHE_DIR");
  if (nodes != nullptr && dir != nullptr) {
    p.ranks_per_node = 0;
    p.nodes = std::atoi(nodes);
    p.cache = std::string(dir) + "/" + fs::path(split).filename().string();
  } else {
    p.nodes = world();
    p.cache = split + "-peers/node%n";
  }
  return p;
}

io::LoaderOptions peer_options(const PeerSetup& p) {
  io::LoaderOptions o;
  o.mode = io::LoaderMode::stream;
  o.prefetch_batches = 2;
  o.reads_in_flight = 3;
  o.peer_cache_dir = p.cache;
  o.peer_ranks_per_node = p.ranks_per_node;
  return o;
}

int64_t sum_over_ranks(int64_t v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  return v;
}

// Reads two epochs, each batch checked against the in-memory data set:
// `epochs` gets this rank's sample indices of each, `from_peers` the bytes
// of those in shards another node of `layout` holds (what the peer cache's
// exchange must have brought).
void read_two_epochs(io::StreamLoader& loader, const io::InMemoryDataset& memory, const io::PeerLayout& layout,
                     int64_t& from_peers, std::array<std::vector<int64_t>, 2>& epochs) {
  io::Sampler sampler(loader.size(), kGlobalBatch, rank(), world(), 9);
  const int64_t per_epoch = sampler.batches_per_epoch();
  loader.start({0, 0}, 2 * per_epoch);
  std::vector<int64_t> idx;
  std::vector<float> x(size_t(sampler.local_batch() * kSample.numel()));
  std::vector<int32_t> y(size_t(sampler.local_batch()));
  for (int64_t e = 0; e < 2; ++e) {
    for (int64_t b = 0; b < per_epoch; ++b) {
      const io::LoadedBatch& got = loader.next();
      sampler.batch_indices(e, b, idx);
      memory.gather(idx.data(), int64_t(idx.size()), x.data(), y.data());
      ASSERT_EQ(values(got.x), x) << "epoch " << e << " batch " << b;
      ASSERT_EQ(got.y, y);
      epochs[size_t(e)].insert(epochs[size_t(e)].end(), idx.begin(), idx.end());
      for (const int64_t i : idx) {
        const int shard = i < kShardSizes[0] ? 0 : i < kShardSizes[0] + kShardSizes[1] ? 1 : 2;
        if (io::peer_owner(shard, layout.nodes) != layout.node) from_peers += kSample.numel();
      }
    }
  }
}

// Every batch as the in-memory data set gives it, every sample of an epoch
// delivered to exactly one rank once; the shared store's shards emptied
// once the loader is up (so no sample can come from them), copied once in
// all; each rank received over MPI exactly its samples of the shards other
// nodes hold.
void expect_peer_batches(int ranks_per_node) {
  const std::string dir = make_split("peers");
  PeerSetup setup = peer_setup(dir);
  if (setup.ranks_per_node > 0) {
    setup.ranks_per_node = ranks_per_node;
    setup.nodes = world() / ranks_per_node;
  }
  const io::InMemoryDataset memory = io::InMemoryDataset::load(dir);
  int64_t store_bytes = 0;
  for (const auto& f : io::shard_format::list_shard_files(dir)) store_bytes += int64_t(fs::file_size(f));
  {
    io::StreamLoader loader(dir, peer_options(setup), kGlobalBatch, 9);
    const io::PeerLayout layout = io::peer_layout(MPI_COMM_WORLD, setup.ranks_per_node);
    ASSERT_EQ(layout.nodes, setup.nodes);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank() == 0)
      for (const auto& f : io::shard_format::list_shard_files(dir)) fs::resize_file(f, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    int64_t from_peers = 0;
    std::array<std::vector<int64_t>, 2> epochs;
    read_two_epochs(loader, memory, layout, from_peers, epochs);
    if (::testing::Test::HasFatalFailure()) return;
    const int64_t per_epoch = io::Sampler(loader.size(), kGlobalBatch, rank(), world(), 9).batches_per_epoch();
    for (size_t e = 0; e < epochs.size(); ++e) {
      const std::vector<int64_t>& epoch_idx = epochs[e];
      std::vector<int64_t> all(epoch_idx.size() * size_t(world()));
      MPI_Allgather(epoch_idx.data(), int(epoch_idx.size()), MPI_INT64_T, all.data(), int(epoch_idx.size()),
                    MPI_INT64_T, MPI_COMM_WORLD);
      std::sort(all.begin(), all.end());
      EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "a sample delivered twice in epoch " << e;
      EXPECT_EQ(int64_t(all.size()), per_epoch * kGlobalBatch);
    }
    const io::LoaderStats s = loader.stats();
    EXPECT_EQ(s.peer_bytes, from_peers);
    EXPECT_EQ(sum_over_ranks(s.served_bytes), sum_over_ranks(s.peer_bytes));
    EXPECT_EQ(sum_over_ranks(s.staged_bytes), store_bytes) << "the shared store is copied once per job";
    EXPECT_THAT(s.peer_cache, HasSubstr(fmt::format("of {} holds the shards s with s % {} = {}", layout.nodes,
                                                    layout.nodes, layout.node)));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0 && setup.ranks_per_node > 0) fs::remove_all(dir + "-peers");
  remove_split(dir);
}

TEST(PeerCache, EverySampleOnceTheSameBatchesTheStoreCopiedOnce) {
  expect_peer_batches(1);
  // Two ranks per node: a node's shards are served by both of its ranks.
  if (world() % 2 == 0 && world() > 2) expect_peer_batches(2);
}

// A second job keeps the verified copies; a torn copy is copied again.
TEST(PeerCache, KeepsVerifiedCopiesAndCopiesATornOneAgain) {
  const std::string dir = make_split("peerskeep");
  const PeerSetup setup = peer_setup(dir);
  auto staged = [&] {
    return sum_over_ranks(io::StreamLoader(dir, peer_options(setup), kGlobalBatch, 9).stats().staged_bytes);
  };
  EXPECT_GT(staged(), 0);
  EXPECT_EQ(staged(), 0);
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string copy = io::expand_node_dir(setup.cache, 0) + "/" + io::shard_format::shard_file_name(0);
  if (rank() == 0) fs::resize_file(copy, fs::file_size(copy) / 2);  // node 0 holds shard 0
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(staged(), int64_t(fs::file_size(dir + "/" + io::shard_format::shard_file_name(0))));
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0 && setup.ranks_per_node > 0) fs::remove_all(dir + "-peers");
  remove_split(dir);
}

// A padded last batch (64 of 100 samples per step: the second batch takes
// 28 from the start of the epoch) comes through the exchange as it should.
TEST(PeerCache, APaddedLastBatchMatchesMemory) {
  const std::string dir = make_split("peerspad");
  const PeerSetup setup = peer_setup(dir);
  io::LoaderOptions o = peer_options(setup);
  o.last_batch = io::LastBatch::pad;
  constexpr int64_t kBatch = 64;
  const io::InMemoryDataset memory = io::InMemoryDataset::load(dir);
  {
    io::StreamLoader loader(dir, o, kBatch, 9);
    io::Sampler sampler(loader.size(), kBatch, rank(), world(), 9,
                        io::sampler_options(o, {kShardSizes[0], kShardSizes[1], kShardSizes[2]}));
    ASSERT_EQ(sampler.batches_per_epoch(), 2);
    loader.start({0, 0}, 4);
    std::vector<int64_t> idx;
    std::vector<float> x(size_t(sampler.local_batch() * kSample.numel()));
    std::vector<int32_t> y(size_t(sampler.local_batch()));
    for (int64_t k = 0; k < 4; ++k) {
      const io::LoadedBatch& got = loader.next();
      sampler.batch_indices(k / 2, k % 2, idx);
      memory.gather(idx.data(), int64_t(idx.size()), x.data(), y.data());
      ASSERT_EQ(values(got.x), x) << "epoch " << k / 2 << " batch " << k % 2;
      ASSERT_EQ(got.y, y);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0 && setup.ranks_per_node > 0) fs::remove_all(dir + "-peers");
  remove_split(dir);
}

TEST(PeerCache, NeedsTheReadPool) {
  const std::string dir = make_split("peershdf5");
  io::LoaderOptions o = peer_options(peer_setup(dir));
  o.read_engine = io::ReadEngine::hdf5;
  try {
    io::StreamLoader loader(dir, o, kGlobalBatch, 9);
    ADD_FAILURE() << "the peer cache was accepted without the read pool";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("io.peer_cache.dir needs the read pool"));
  }
  remove_split(dir);
}

// The metadata of the shards a node does not hold, as it travels: packed and
// unpacked unchanged, and bytes that end inside a record refused.
TEST(PeerMetadata, PacksAndUnpacksUnchanged) {
  io::ShardMetadata a;
  a.header.split = "train";
  a.header.num_classes = 7;
  a.header.shard_index = 2;
  a.header.num_shards = 3;
  a.header.num_samples = 5;
  a.header.sample_shape = Shape{3, 4};
  a.header.dtype = io::SampleDType::u16;
  a.header.normalize_mean = 0.25f;
  a.header.normalize_std = 0.5f;
  a.labels = {1, 2, 3, 4, 5};
  a.checksums = {9, 8, 7, 6, 5};
  a.extents = io::SampleExtents{5, 2, 24, {4096, 8192, 12288}};
  io::ShardMetadata b;  // no checksums, no extents
  b.header.num_samples = 1;
  b.labels = {0};
  const std::vector<uint8_t> bytes = io::pack_shard_metadata({{2, a}, {0, b}});
  const auto back = io::unpack_shard_metadata(bytes.data(), bytes.size());
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].first, 2);
  const io::ShardMetadata& c = back[0].second;
  EXPECT_EQ(c.header.split, "train");
  EXPECT_EQ(c.header.num_classes, 7);
  EXPECT_EQ(c.header.shard_index, 2);
  EXPECT_EQ(c.header.num_shards, 3);
  EXPECT_EQ(c.header.num_samples, 5);
  EXPECT_EQ(c.header.sample_shape, (Shape{3, 4}));
  EXPECT_EQ(c.header.dtype, io::SampleDType::u16);
  EXPECT_EQ(c.header.normalize_mean, 0.25f);
  EXPECT_EQ(c.header.normalize_std, 0.5f);
  EXPECT_EQ(c.labels, a.labels);
  EXPECT_EQ(c.checksums, a.checksums);
  ASSERT_TRUE(c.extents.has_value());
  EXPECT_EQ(c.extents->chunk_rows, 2);
  EXPECT_EQ(c.extents->sample_bytes, 24u);
  EXPECT_EQ(c.extents->chunk_offset, a.extents->chunk_offset);
  EXPECT_EQ(back[1].first, 0);
  EXPECT_FALSE(back[1].second.extents.has_value());
  EXPECT_TRUE(back[1].second.checksums.empty());
  for (size_t cut : {size_t(1), bytes.size() / 2, bytes.size() - 1}) {
    try {
      io::unpack_shard_metadata(bytes.data(), cut);
      ADD_FAILURE() << "bytes cut at " << cut << " of " << bytes.size() << " were unpacked";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("shard metadata"));
    }
  }
}

// Every rank gets every shard's metadata from the rank that read it; a read
// that fails on one rank fails on all, before anything moves.
TEST(PeerMetadata, EveryRankGetsEveryShardFromItsReader) {
  const int n = 2 * world() + 1;
  std::vector<int> reader_of;
  for (int s = 0; s < n; ++s) reader_of.push_back((s * 7) % world());
  const auto all = io::share_shard_metadata(MPI_COMM_WORLD, reader_of, [&](int s) {
    EXPECT_EQ(reader_of[size_t(s)], rank()) << "shard " << s << " read on another rank than its reader";
    io::ShardMetadata m;
    m.header.num_samples = s + 1;
    m.labels.assign(size_t(s + 1), int32_t(rank()));
    return m;
  });
  ASSERT_EQ(int(all.size()), n);
  for (int s = 0; s < n; ++s) {
    EXPECT_EQ(all[size_t(s)].header.num_samples, s + 1);
    EXPECT_EQ(all[size_t(s)].labels, std::vector<int32_t>(size_t(s + 1), int32_t(reader_of[size_t(s)])));
  }
  try {
    io::share_shard_metadata(MPI_COMM_WORLD, reader_of, [&](int s) -> io::ShardMetadata {
      if (s == n - 1) throw Error("part-00009.h5: cannot open");
      return {};
    });
    ADD_FAILURE() << "a failed read was not thrown";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("part-00009.h5: cannot open"));
  }
}

// A sparse split: the shards of a split spread over the nodes (each rank a
// node here), each node's directory holding the manifest and only the shards
// it holds, as an s3:// split's fetch leaves them under the peer cache.
// Every batch is the in-memory data set's, nothing is copied, and each rank
// received over MPI exactly its samples of the other nodes' shards.
TEST(PeerSparseSplit, TheSameBatchesFromEachNodesShare) {
  const std::string dir = make_split("sparse");
  const std::string pattern = dir + "-nodes/node%n/train";
  if (rank() == 0) {
    io::write_split_manifest(dir);
    const std::vector<std::string> files = io::shard_format::list_shard_files(dir);
    for (int node = 0; node < world(); ++node) {
      const std::string mine = io::expand_node_dir(pattern, node);
      fs::create_directories(mine);
      fs::copy_file(io::manifest_path(dir), io::manifest_path(mine));
      for (size_t s = 0; s < files.size(); ++s)
        if (io::peer_owner(int(s), world()) == node)
          fs::copy_file(files[s], mine + "/" + fs::path(files[s]).filename().string());
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  io::LoaderOptions o;
  o.mode = io::LoaderMode::stream;
  o.prefetch_batches = 2;
  o.reads_in_flight = 3;
  o.peer_cache_dir = pattern;
  o.peer_ranks_per_node = 1;
  o.peer_sparse_split = true;
  const std::string mine = io::expand_node_dir(pattern, rank());
  const io::InMemoryDataset memory = io::InMemoryDataset::load(dir);
  {
    io::StreamLoader loader(mine, o, kGlobalBatch, 9);
    EXPECT_EQ(loader.size(), memory.size());
    int64_t from_peers = 0;
    std::array<std::vector<int64_t>, 2> epochs;
    read_two_epochs(loader, memory, io::peer_layout(MPI_COMM_WORLD, 1), from_peers, epochs);
    if (::testing::Test::HasFatalFailure()) return;
    const io::LoaderStats s = loader.stats();
    EXPECT_EQ(s.peer_bytes, from_peers);
    EXPECT_EQ(sum_over_ranks(s.staged_bytes), 0) << "a sparse split's shards are in place: nothing is copied";
  }
  // A shard its node should hold is missing: every rank fails, naming it.
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string gone = io::expand_node_dir(pattern, 0) + "/" + io::shard_format::shard_file_name(0);
  if (rank() == 0) fs::remove(gone);
  MPI_Barrier(MPI_COMM_WORLD);
  try {
    io::StreamLoader loader(mine, o, kGlobalBatch, 9);
    ADD_FAILURE() << "a sparse split without its node's shard was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(io::shard_format::shard_file_name(0)));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0) fs::remove_all(dir + "-nodes");
  remove_split(dir);
}

}  // namespace
