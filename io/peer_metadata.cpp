#include "io/peer_metadata.h"

#include "runtime/comm/agree_or_throw.h"
#include "runtime/core/error.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <type_traits>

namespace shardtrain::io {
namespace {

// Plain values in native byte order: every rank of a job runs on the same
// kind of host (MPI moves the bytes untouched).
class Packer {
 public:
  template <typename T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out_.insert(out_.end(), p, p + sizeof v);
  }
  template <typename T>
  void put_all(const std::vector<T>& v) {
    put(uint64_t(v.size()));
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    out_.insert(out_.end(), p, p + v.size() * sizeof(T));
  }
  void put_text(const std::string& s) { put_all(std::vector<char>(s.begin(), s.end())); }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
};

class Unpacker {
 public:
  Unpacker(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  bool done() const { return p_ == end_; }
  template <typename T>
  T get() {
    T v;
    need(sizeof v);
    std::memcpy(&v, p_, sizeof v);
    p_ += sizeof v;
    return v;
  }
  template <typename T>
  std::vector<T> get_all() {
    const auto n = get<uint64_t>();
    ST_CHECK(n <= uint64_t(end_ - p_) / sizeof(T), "shard metadata: a list of {} items runs past the end", n);
    std::vector<T> v(static_cast<size_t>(n));
    if (n > 0) std::memcpy(v.data(), p_, size_t(n) * sizeof(T));  // an empty vector's data() may be null
    p_ += size_t(n) * sizeof(T);
    return v;
  }
  std::string get_text() {
    const std::vector<char> c = get_all<char>();
    return {c.begin(), c.end()};
  }

 private:
  void need(size_t n) const { ST_CHECK(n <= size_t(end_ - p_), "shard metadata: truncated"); }
  const uint8_t* p_;
  const uint8_t* end_;
};

void pack_one(Packer& p, int shard, const ShardMetadata& m) {
  const shard_format::ShardHeader& h = m.header;
  p.put(int32_t(shard));
  p.put(h.version);
  p.put_text(h.split);
  p.put(h.num_classes);
  p.put(h.shard_index);
  p.put(h.num_shards);
  p.put(h.num_samples);
  std::vector<int64_t> dims(static_cast<size_t>(h.sample_shape.ndim()));
  for (int d = 0; d < h.sample_shape.ndim(); ++d) dims[size_t(d)] = h.sample_shape[d];
  p.put_all(dims);
  p.put(int32_t(h.dtype));
  p.put(h.normalize_mean);
  p.put(h.normalize_std);
  p.put_all(m.labels);
  p.put_all(m.checksums);
  p.put(uint8_t(m.extents.has_value()));
  if (m.extents) {
    p.put(m.extents->num_samples);
    p.put(m.extents->chunk_rows);
    p.put(uint64_t(m.extents->sample_bytes));
    p.put_all(m.extents->chunk_offset);
  }
}

std::pair<int, ShardMetadata> unpack_one(Unpacker& u) {
  std::pair<int, ShardMetadata> out;
  out.first = u.get<int32_t>();
  shard_format::ShardHeader& h = out.second.header;
  h.version = u.get<int64_t>();
  h.split = u.get_text();
  h.num_classes = u.get<int32_t>();
  h.shard_index = u.get<int32_t>();
  h.num_shards = u.get<int32_t>();
  h.num_samples = u.get<int64_t>();
  for (int64_t d : u.get_all<int64_t>()) h.sample_shape.push_back(d);
  const auto dtype = u.get<int32_t>();
  ST_CHECK(dtype >= 0 && dtype <= int32_t(SampleDType::f32), "shard metadata: dtype {} is not one", dtype);
  h.dtype = SampleDType(dtype);
  h.normalize_mean = u.get<float>();
  h.normalize_std = u.get<float>();
  out.second.labels = u.get_all<int32_t>();
  out.second.checksums = u.get_all<uint32_t>();
  if (u.get<uint8_t>()) {
    SampleExtents& e = out.second.extents.emplace();
    e.num_samples = u.get<int64_t>();
    e.chunk_rows = u.get<int64_t>();
    e.sample_bytes = size_t(u.get<uint64_t>());
    e.chunk_offset = u.get_all<int64_t>();
  }
  return out;
}

}  // namespace

std::vector<uint8_t> pack_shard_metadata(const std::vector<std::pair<int, ShardMetadata>>& shards) {
  Packer p;
  for (const auto& [shard, m] : shards) pack_one(p, shard, m);
  return p.take();
}

std::vector<std::pair<int, ShardMetadata>> unpack_shard_metadata(const uint8_t* data, size_t size) {
  Unpacker u(data, size);
  std::vector<std::pair<int, ShardMetadata>> out;
  while (!u.done()) out.push_back(unpack_one(u));
  return out;
}

std::vector<ShardMetadata> share_shard_metadata(MPI_Comm comm, const std::vector<int>& reader_of,
                                                const std::function<ShardMetadata(int)>& read) {
  int rank = 0, world = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world);
  std::vector<uint8_t> mine;
  std::string problem;
  try {
    std::vector<std::pair<int, ShardMetadata>> read_here;
    for (size_t s = 0; s < reader_of.size(); ++s)
      if (reader_of[s] == rank) read_here.emplace_back(int(s), read(int(s)));
    mine = pack_shard_metadata(read_here);
    ST_CHECK(mine.size() <= size_t(INT_MAX), "shard metadata: {} bytes on one rank, more than MPI's count holds",
             mine.size());
  } catch (const std::exception& e) {
    problem = e.what();
  }
  comm::agree_or_throw(comm, problem);
  const int count = int(mine.size());
  std::vector<int> counts(static_cast<size_t>(world)), at(static_cast<size_t>(world));
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, comm);
  int64_t total = 0;
  for (int r = 0; r < world; ++r) {
    ST_CHECK(total <= INT_MAX, "shard metadata: more than MPI's count holds");
    at[size_t(r)] = int(total);
    total += counts[size_t(r)];
  }
  ST_CHECK(total <= INT_MAX, "shard metadata: {} bytes, more than MPI's count holds", total);
  std::vector<uint8_t> all(size_t(std::max<int64_t>(total, 1)));
  MPI_Allgatherv(mine.data(), count, MPI_BYTE, all.data(), counts.data(), at.data(), MPI_BYTE, comm);
  std::vector<ShardMetadata> out(reader_of.size());
  std::vector<bool> seen(reader_of.size(), false);
  for (auto& [shard, m] : unpack_shard_metadata(all.data(), size_t(total))) {
    ST_CHECK(shard >= 0 && size_t(shard) < out.size() && !seen[size_t(shard)],
             "shard metadata: shard {} is not one of the {} asked for, or came twice", shard, out.size());
    seen[size_t(shard)] = true;
    out[size_t(shard)] = std::move(m);
  }
  for (size_t s = 0; s < out.size(); ++s) ST_CHECK(seen[s], "shard metadata: shard {} never came", s);
  return out;
}

}  // namespace shardtrain::io
