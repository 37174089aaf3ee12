#include "io/shard_set.h"

#include "runtime/core/error.h"

#include <filesystem>

namespace shardtrain::io {

namespace {

// A field every shard must agree on: compared with the first shard's.
template <typename T, typename Show>
void check_same(const ShardHeaderOf& first, const ShardHeaderOf& other, const char* what, const T& a, const T& b,
                Show show) {
  ST_CHECK(a == b, "{}: {} {} differs from {} in {}", other.path, what, show(b), show(a), first.path);
}

}  // namespace

std::vector<ShardHeaderOf> read_shard_headers(const std::vector<std::string>& files) {
  std::vector<ShardHeaderOf> headers;
  headers.reserve(files.size());
  for (const std::string& f : files) headers.push_back({f, ShardReader(f).header()});
  return headers;
}

void check_shard_set(const std::string& path, const std::vector<ShardHeaderOf>& shards) {
  ST_ASSERT(!shards.empty());
  const ShardHeaderOf& first = shards.front();
  const shard_format::ShardHeader& h0 = first.header;
  auto quoted = [](const std::string& s) { return "'" + s + "'"; };
  auto plain = [](const auto& v) { return fmt::format("{}", v); };
  auto shape = [](const Shape& s) { return s.str(); };
  auto dtype = [](SampleDType d) { return std::string(shard_format::dtype_name(d)); };

  for (const ShardHeaderOf& shard : shards) {
    const shard_format::ShardHeader& h = shard.header;
    check_same(first, shard, "format_version", h0.version, h.version, plain);
    check_same(first, shard, "split", h0.split, h.split, quoted);
    check_same(first, shard, "num_classes", h0.num_classes, h.num_classes, plain);
    check_same(first, shard, "num_shards", h0.num_shards, h.num_shards, plain);
    check_same(first, shard, "sample shape", h0.sample_shape, h.sample_shape, shape);
    check_same(first, shard, "dtype", h0.dtype, h.dtype, dtype);
    check_same(first, shard, "normalize_mean", h0.normalize_mean, h.normalize_mean, plain);
    check_same(first, shard, "normalize_std", h0.normalize_std, h.normalize_std, plain);
  }

  const int num_shards = h0.num_shards;
  if (shards.size() == 1 && !std::filesystem::is_directory(path)) {
    ST_CHECK(num_shards == 1,
             "{}: shard_index {} of num_shards {}: a single file must be a one-shard split "
             "(give the directory to read all shards)",
             path, h0.shard_index, num_shards);
  }

  // Each index at most once, then every index present, then in name order.
  std::vector<const ShardHeaderOf*> by_index(size_t(num_shards), nullptr);
  for (const ShardHeaderOf& shard : shards) {
    const ShardHeaderOf*& slot = by_index[size_t(shard.header.shard_index)];
    ST_CHECK(slot == nullptr, "{}: {} and {} both have shard_index {}", path, slot ? slot->path : "", shard.path,
             shard.header.shard_index);
    slot = &shard;
  }
  for (int i = 0; i < num_shards; ++i) {
    ST_CHECK(by_index[size_t(i)] != nullptr,
             "{}: shard {} of {} is missing (num_shards is {} but {} shard file(s) were found)", path, i, num_shards,
             num_shards, shards.size());
  }
  for (size_t i = 0; i < shards.size(); ++i) {
    ST_CHECK(shards[i].header.shard_index == int32_t(i),
             "{}: has shard_index {} but is file {} in name order (shards are read in name order)", shards[i].path,
             shards[i].header.shard_index, i);
  }
}

}  // namespace shardtrain::io
