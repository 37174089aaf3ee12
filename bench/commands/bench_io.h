// `shardtrain bench io --data DIR` (under mpirun): what the streaming loader
// gets out of the storage, next to what the storage gives at best, in one
// run:
// - raw: every rank reads its share of the split's files sequentially with
//   O_DIRECT in large aligned requests, several in flight (no page cache: the
//   storage ceiling);
// - random: O_DIRECT reads of one sample's size at random aligned offsets
//   of the files, random_depth in flight per rank, as many as the loader
//   reads: what `fio --rw=randread --direct=1 --bs=<sample> --iodepth=16`
//   measures, the ceiling of a global shuffle;
// - loader: the StreamLoader reading batches as training would (sampler,
//   parallel HDF5, normalization), without training; with --cold it drops
//   the pages it read, so every epoch comes from storage; then without its
//   per-sample checksum checks, alternating with them, for their cost;
// - ingest: the loader again while a concurrent writer (one per node) writes
//   a second data set to the same storage at each block size and rate, and
//   the slowdown against the loader alone.
// Figures are aggregates over the ranks: bytes of all ranks / the slowest
// rank's time.
#pragma once

#include "io/loader_options.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardtrain::io {

struct BenchIoOptions {
  std::string data;                              // a split directory, or an s3:// prefix (bench_object_store.h)
  std::string cache_dir;                         // an s3:// split's node-local copies
  S3Options s3;                                  // the store's client
  std::vector<int64_t> s3_sweep = {1, 2, 4, 8};  // connection counts of the store's rate
  int64_t global_batch = 64;
  int64_t batches = 0;   // per loader trial; 0: one epoch
  LoaderOptions loader;  // transfer, order, prefetch, cold
  int64_t raw_block_bytes = 8 << 20;
  int raw_depth = 4;          // O_DIRECT requests in flight per rank
  int random_depth = 16;      // random O_DIRECT reads in flight per rank
  int rounds = 1;             // random reference and loader trial, alternating (medians reported)
  bool compare_hdf5 = false;  // also time the loader with read_engine = hdf5
  bool ingest = true;
  std::vector<int64_t> ingest_blocks = {128 << 10, 1 << 20, 4 << 20};
  double ingest_rate_mb_s = 0;  // the limited rate; 0: a quarter of the raw read rate
  int64_t ingest_bytes = 0;     // cap per trial's writer; 0: as much as the trial lasts
  std::string ingest_dir;       // where the writer writes; default: next to the data
  std::string json_path;
  uint64_t seed = 1;
};

// Every rank of MPI_COMM_WORLD calls it; rank 0 prints and writes the JSON.
int bench_io(const BenchIoOptions& options);

}  // namespace shardtrain::io
