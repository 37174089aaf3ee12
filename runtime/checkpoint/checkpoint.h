// Sharded checkpoints: one HDF5 file per checkpoint, written collectively
// over MPI-IO by every rank (parallel HDF5), read back at any world size and
// strategy. docs/formats.md describes the file.
//
// Every tensor (parameters, each optimizer state buffer) is one f32 dataset
// in the model's flat coordinates; each rank writes its pieces (runtime/parallel/pieces.h) and
// a CRC-32 of what it wrote. Loading first verifies every saved rank's
// checksums (the check spread over the current ranks), then each rank reads
// the pieces its current layout needs. A file that cannot be opened, holds
// another model or optimizer, misses a dataset, leaves part of a tensor
// unwritten or fails a checksum is an Error on every rank naming the file and
// what is wrong: never a partial load.
//
// save() writes "<path>.tmp", closes it, fsyncs it, renames it to <path> and
// fsyncs the directory: a process killed while writing leaves the temporary
// file behind and every earlier checkpoint intact.
#pragma once

#include "runtime/core/error.h"
#include "runtime/core/tensor.h"
#include "runtime/parallel/pieces.h"

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace shardtrain::checkpoint {

using parallel::Piece;
using parallel::Pieces;

// Version 2 adds the metadata_crc32 attribute; version 1 files still load.
inline constexpr int kFormatVersion = 2;

// What must be the same for the saved tensors to mean the same thing here.
struct Identity {
  std::string model;                     // model.kind
  std::string model_signature;           // one line per parameter: "<name> <shape> @<flat offset>"
  int64_t flat_numel = 0;                // elements of the flat buffer (alignment padding included)
  std::string optimizer;                 // "sgd" | "adamw"
  std::vector<std::string> state_names;  // the optimizer's state buffers, in order
  int64_t seed = 0;                      // the data order and the initialization
  int64_t global_batch = 0;              // the sampler position counts global batches
};

// Where training was when the checkpoint was taken.
struct Progress {
  int64_t step = 0;              // optimizer steps done
  int64_t epoch = 0, batch = 0;  // the sampler position: the next global batch
  int64_t total_steps = 0;       // the learning-rate schedule's horizon
  int64_t optimizer_steps = 0;   // the optimizer's own count (bias correction, first momentum step)
  // The milliseconds of training after which the run reached its target
  // (-1: not reached; also for files without it), so that a resumed run
  // does not train past a target it had reached.
  int64_t target_reached_ms = -1;
};

// Who wrote it (informational: loading does not need them to match).
struct Origin {
  std::string strategy;  // "none" | "ddp" | "fsdp"
  std::string sharding;  // FSDP: "full" | "grad_op"; else ""
  int world = 1;
  std::string config_toml;  // the resolved config (run.dir left out)
};

struct Header {
  int format_version = kFormatVersion;
  Identity identity;
  Progress progress;
  Origin origin;
};

// This rank's buffers (host or device memory) and how they map onto the flat
// coordinates: `write` the pieces it saves, `read` the pieces it loads.
struct Buffers {
  Tensor params;
  std::vector<std::pair<std::string, Tensor>> state;  // names as Identity::state_names
  Pieces write, read;
};

// Collective over `comm`. `after_params` (a fault-injection hook for tests)
// runs on every rank once the parameters are written and before the rest.
void save(const std::string& path, MPI_Comm comm, const Header& header, const Buffers& buffers,
          const std::function<void()>& after_params = {});

// What load() throws, on every rank alike, when the file's bytes fail their
// seal (truncated, appended to, changed since it was written): the file is
// damaged, not merely another model's, so an older checkpoint may still do.
class DamagedCheckpoint : public Error {
 public:
  using Error::Error;
};

// Collective over `comm`: checks the file against `expected`, verifies the
// checksums, fills `buffers` (its `read` pieces; the rest of each buffer,
// e.g. an FSDP shard's padding, is zeroed) and returns the file's header.
Header load(const std::string& path, MPI_Comm comm, const Identity& expected, Buffers& buffers);

// The header alone, read by this process with POSIX I/O (no MPI), e.g. to
// inspect a checkpoint without a job (the tests use it).
Header read_header(const std::string& path);

// A short fingerprint of a resolved config's TOML ("fnv1a64:<16 hex>"),
// stored as the `config_hash` attribute: equal hashes, equal configs.
std::string config_hash(const std::string& config_toml);

// "" when `saved` matches `expected`, else what differs, as a user reads it.
std::string identity_mismatch(const Identity& saved, const Identity& expected);

}  // namespace shardtrain::checkpoint
