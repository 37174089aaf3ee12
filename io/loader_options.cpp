#include "io/loader_options.h"

#include "runtime/core/error.h"

namespace shardtrain::io {

void validate(const LoaderOptions& l) {
  ST_CHECK(l.prefetch_batches >= 1, "data.prefetch_batches must be at least 1, got {}", l.prefetch_batches);
  ST_CHECK(l.shuffle_window >= 0, "data.shuffle_window must not be negative, got {}", l.shuffle_window);
  ST_CHECK(!l.cold_cache || l.mode == LoaderMode::stream, "data.cold_cache needs data.loader = \"stream\"");
}

void validate(const StageOptions& st) {
  ST_CHECK(!st.enabled || !st.cache_dir.empty(), "io.stage.enabled needs io.stage.cache_dir");
  ST_CHECK(st.rate_mb_s >= 0, "io.stage.rate_mb_s must not be negative (0 = unlimited), got {}", st.rate_mb_s);
  ST_CHECK(st.block_kib >= 4, "io.stage.block_kib must be at least 4, got {}", st.block_kib);
  ST_CHECK(st.capacity_gb >= 0, "io.stage.capacity_gb must not be negative (0 = no limit), got {}", st.capacity_gb);
}

}  // namespace shardtrain::io
