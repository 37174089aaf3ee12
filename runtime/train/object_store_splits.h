// data.train or data.test given as an s3:// prefix: before the job reads
// anything, each node's first rank fetches the split from the object store
// into the node-local cache (io.stage.cache_dir), every object checked
// against the split's manifest (io/cache.h, io/s3/client.h); copies found
// there already and matching are kept. The job then reads the local copies,
// with every loader mode. With the peer cache (io.peer_cache.dir) each node
// fetches only the shards of data.train it holds, into that directory, and
// serves them to the other nodes: the store is read once per job (the test
// split, read whole by every rank, is fetched whole on each node). A shard
// that cannot be fetched whole and correct ends the job on every rank before
// training: nothing trains from a bad object.
#pragma once

#include "runtime/comm/transport/mpi_env.h"
#include "runtime/train/config.h"
#include "runtime/train/run_dir.h"

namespace shardtrain::train {

// Collective. The config with s3:// splits replaced by their local copies
// (unchanged when there are none). Logs what it fetched and writes it to the
// run directory's object_store.json (rank 0: its node's fetch).
Config fetch_object_store_splits(const Config& config, const comm::MpiEnv& mpi, RunDir& run);

}  // namespace shardtrain::train
