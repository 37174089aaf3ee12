#include "io/loader_options.h"

#include "runtime/core/error.h"

namespace shardtrain::io {

void validate(const LoaderOptions& l) {
  ST_CHECK(l.prefetch_batches >= 1, "data.prefetch_batches must be at least 1, got {}", l.prefetch_batches);
  ST_CHECK(l.shuffle_window >= 0, "data.shuffle_window must not be negative, got {}", l.shuffle_window);
  ST_CHECK(!l.cold_cache || l.mode == LoaderMode::stream, "data.cold_cache needs data.loader = \"stream\"");
  ST_CHECK(l.reads_in_flight >= 1 && l.reads_in_flight <= 1024, "data.reads_in_flight must be in [1, 1024], got {}",
           l.reads_in_flight);
  ST_CHECK(l.read_engine != ReadEngine::pool || l.transfer == Transfer::independent,
           "data.read_engine = \"pool\" reads without MPI-IO, so it needs data.transfer = \"independent\" "
           "(or read_engine = \"auto\", which reads collective transfers through HDF5)");
  ST_CHECK(l.direct_io != DirectIo::on || (l.mode == LoaderMode::stream && l.read_engine != ReadEngine::hdf5 &&
                                           l.transfer == Transfer::independent),
           "data.direct_io = \"on\" is a setting of the read pool: it needs data.loader = \"stream\", "
           "data.transfer = \"independent\" and data.read_engine \"auto\" or \"pool\"");
  ST_CHECK(l.peer_cache_dir.empty() || (l.mode == LoaderMode::stream && l.read_engine != ReadEngine::hdf5 &&
                                        l.transfer == Transfer::independent),
           "io.peer_cache.dir is read by the read pool: it needs data.loader = \"stream\", data.transfer = "
           "\"independent\" and data.read_engine \"auto\" or \"pool\"");
  ST_CHECK(l.peer_ranks_per_node >= 0, "io.peer_cache.ranks_per_node must not be negative, got {}",
           l.peer_ranks_per_node);
}

void validate(const StageOptions& st) {
  ST_CHECK(!st.enabled || !st.cache_dir.empty(), "io.stage.enabled needs io.stage.cache_dir");
  ST_CHECK(st.rate_mb_s >= 0, "io.stage.rate_mb_s must not be negative (0 = unlimited), got {}", st.rate_mb_s);
  ST_CHECK(st.block_kib >= 4, "io.stage.block_kib must be at least 4, got {}", st.block_kib);
  ST_CHECK(st.capacity_gb >= 0, "io.stage.capacity_gb must not be negative (0 = no limit), got {}", st.capacity_gb);
  ST_CHECK(!st.direct_io || st.block_kib % 4 == 0,
           "io.stage.direct_io needs io.stage.block_kib in whole 4 KiB blocks (O_DIRECT), got {}", st.block_kib);
  validate(st.s3);
}

void validate(const S3Options& s3) {
  ST_CHECK(s3.connections >= 1 && s3.connections <= 64, "io.s3.connections must be 1 to 64, got {}", s3.connections);
  ST_CHECK(s3.part_mib >= 1 && s3.part_mib <= 1024, "io.s3.part_mib must be 1 to 1024, got {}", s3.part_mib);
  ST_CHECK(s3.retries >= 0 && s3.retries <= 20, "io.s3.retries must be 0 to 20, got {}", s3.retries);
  ST_CHECK(s3.endpoint.empty() || s3.endpoint.rfind("http://", 0) == 0 || s3.endpoint.rfind("https://", 0) == 0,
           "io.s3.endpoint must start with http:// or https://, got \"{}\"", s3.endpoint);
}

}  // namespace shardtrain::io
