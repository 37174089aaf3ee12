// Sharded checkpoints over MPI-IO (runtime/checkpoint): what one layout
// writes, another reads, at any shard count; a damaged, foreign or
// incomplete file is the same error on every rank, never a partial load.
#include "runtime/checkpoint/checkpoint.h"

#include "io/hdf5_attributes.h"
#include "runtime/checkpoint/header_io.h"
#include "runtime/checkpoint/integrity.h"
#include "runtime/core/error.h"

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace shardtrain::checkpoint {
namespace {

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

// Three Blocks as FlatParameters lays them out (each range runs to the next
// Block, its alignment padding included), sizes that no shard count divides.
const std::vector<nn::BlockRange> kBlocks = {{0, 48}, {48, 112}, {160, 16}};
constexpr int64_t kFlat = 176;

float param_value(int64_t i) { return 0.5f + float(i) * 0.25f; }
float state_value(int k, int64_t i) { return float(k + 1) * 1000.0f + float(i); }

Identity identity() {
  Identity id;
  id.model = "mlp";
  id.model_signature = "b0.w [37] @0\nb1.w [100] @48\nb2.w [16] @160\n";
  id.flat_numel = kFlat;
  id.optimizer = "adamw";
  id.state_names = {"m", "v"};
  id.seed = 7;
  id.global_batch = 64;
  return id;
}

Header header() {
  Header h;
  h.identity = identity();
  h.progress = {12, 1, 3, 40, 12};
  h.origin = {"fsdp", "full", world(), "[train]\nseed = 7\n"};
  return h;
}

// Buffers of an FSDP rank `r` of `shards` ranks: its shard's values.
Buffers fsdp_buffers(int r, int shards, bool filled) {
  const parallel::ShardLayout layout(kBlocks, shards);
  Buffers b;
  b.write = b.read = fsdp_shard(layout, r);
  b.params = Tensor::zeros({layout.shard_numel()});
  b.state = {{"m", Tensor::zeros({layout.shard_numel()})}, {"v", Tensor::zeros({layout.shard_numel()})}};
  if (filled)
    for (const Piece& p : b.write)
      for (int64_t i = p.flat_begin; i < p.flat_end; ++i) {
        b.params.f32()[p.local_offset + i - p.flat_begin] = param_value(i);
        for (int k = 0; k < 2; ++k)
          b.state[size_t(k)].second.f32()[p.local_offset + i - p.flat_begin] = state_value(k, i);
      }
  return b;
}

Buffers replicated_buffers() {
  Buffers b;
  b.write = parallel::replicated_slice(kFlat, rank(), world());
  b.read = parallel::whole_buffer(kFlat);
  b.params = Tensor::zeros({kFlat});
  b.state = {{"m", Tensor::zeros({kFlat})}, {"v", Tensor::zeros({kFlat})}};
  return b;
}

// Rank 0 seals the file again after an edit, as if it had been written so.
void reseal(const std::string& path) {
  if (rank() == 0) write_seal(path, compute_seal(path, MPI_COMM_SELF));
  MPI_Barrier(MPI_COMM_WORLD);
}

// One directory for all ranks (rank 0 names it), removed at the end.
class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir;
    if (rank() == 0) {
      char tmpl[] = "/tmp/st-ckpt-XXXXXX";
      dir = mkdtemp(tmpl);
    }
    int len = int(dir.size());
    MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
    dir.resize(size_t(len));
    MPI_Bcast(dir.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
    dir_ = dir;
    path_ = dir + "/step-00000012.h5";
  }
  void TearDown() override {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank() == 0) std::filesystem::remove_all(dir_);
  }
  void save_fsdp() { save(path_, MPI_COMM_WORLD, header(), fsdp_buffers(rank(), world(), true)); }
  // Every rank must throw, with a message matching `what`.
  void expect_load_error(const std::string& what, const Identity& expected = identity()) {
    Buffers b = replicated_buffers();
    try {
      load(path_, MPI_COMM_WORLD, expected, b);
      ADD_FAILURE() << "rank " << rank() << ": no error";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr(what));
      EXPECT_THAT(e.what(), ::testing::HasSubstr(path_));
    }
  }
  std::string dir_, path_;
};

TEST_F(CheckpointTest, FsdpShardsReadBackAsTheWholeBufferAndHeader) {
  save_fsdp();
  EXPECT_TRUE(std::filesystem::exists(path_));
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));
  Buffers b = replicated_buffers();
  const Header h = load(path_, MPI_COMM_WORLD, identity(), b);
  EXPECT_EQ(h.progress.step, 12);
  EXPECT_EQ(h.progress.epoch, 1);
  EXPECT_EQ(h.progress.batch, 3);
  EXPECT_EQ(h.progress.total_steps, 40);
  EXPECT_EQ(h.progress.optimizer_steps, 12);
  EXPECT_EQ(h.origin.world, world());
  EXPECT_EQ(h.origin.config_toml, "[train]\nseed = 7\n");
  EXPECT_EQ(config_hash(""), "fnv1a64:cbf29ce484222325");  // FNV-1a's offset basis: nothing hashed
  EXPECT_NE(config_hash("[train]\nseed = 7\n"), config_hash("[train]\nseed = 8\n"));
  // Elements outside every Block (alignment padding) were written as the
  // shard's zeros; the rest as filled.
  for (const nn::BlockRange& r : kBlocks)
    for (int64_t i = r.offset; i < r.offset + r.numel; ++i) {
      ASSERT_EQ(b.params.f32()[i], param_value(i)) << i;
      ASSERT_EQ(b.state[0].second.f32()[i], state_value(0, i)) << i;
      ASSERT_EQ(b.state[1].second.f32()[i], state_value(1, i)) << i;
    }
}

TEST_F(CheckpointTest, LoadsOntoAnyShardCount) {
  save_fsdp();
  // Each current rank plays rank (rank % shards) of a job of `shards` ranks.
  for (int shards : {1, 2, 3, 4, 5}) {
    const int r = rank() % shards;
    Buffers b = fsdp_buffers(r, shards, false);
    b.params.f32()[0] = -1;  // a stale value in the padding/shard: must be overwritten or zeroed
    load(path_, MPI_COMM_WORLD, identity(), b);
    const Buffers want = fsdp_buffers(r, shards, true);
    for (int64_t i = 0; i < want.params.numel(); ++i) {
      ASSERT_EQ(b.params.f32()[i], want.params.f32()[i]) << "shards " << shards << " element " << i;
      ASSERT_EQ(b.state[1].second.f32()[i], want.state[1].second.f32()[i]) << "shards " << shards << " " << i;
    }
  }
}

TEST_F(CheckpointTest, ReplicatedWritersShareTheFile) {
  Buffers w = replicated_buffers();
  for (int64_t i = 0; i < kFlat; ++i) {
    w.params.f32()[i] = param_value(i);
    w.state[0].second.f32()[i] = state_value(0, i);
    w.state[1].second.f32()[i] = state_value(1, i);
  }
  save(path_, MPI_COMM_WORLD, header(), w);
  const int shards = world() + 1;  // ranks that were not there when it was written
  Buffers b = fsdp_buffers(rank(), shards, false);
  load(path_, MPI_COMM_WORLD, identity(), b);
  const Buffers want = fsdp_buffers(rank(), shards, true);
  for (int64_t i = 0; i < want.params.numel(); ++i) ASSERT_EQ(b.params.f32()[i], want.params.f32()[i]) << i;
}

TEST_F(CheckpointTest, AnotherModelOrOptimizerIsRefusedNamingTheDifference) {
  save_fsdp();
  Identity other = identity();
  other.model_signature = "b0.w [37] @0\nb1.w [99] @48\nb2.w [16] @160\n";
  expect_load_error("parameter 1: checkpoint \"b1.w [100] @48\", this config \"b1.w [99] @48\"", other);
  other = identity();
  other.optimizer = "sgd";
  other.state_names = {"momentum"};
  expect_load_error("optimizer adamw with state [m,v], this config has sgd with state [momentum]", other);
  other = identity();
  other.global_batch = 32;
  expect_load_error("train.global_batch_size = 64, this config has 32", other);
}

TEST_F(CheckpointTest, CorruptDataFailsItsChecksumOnEveryRank) {
  save_fsdp();
  if (rank() == 0) {
    // Flip one byte of the parameters where the file holds them.
    hid_t f = H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "params", H5P_DEFAULT);
    const haddr_t offset = H5Dget_offset(d);
    H5Dclose(d);
    H5Fclose(f);
    std::fstream io(path_, std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(std::streamoff(offset + 50 * 4 + 2));
    char c = 0;
    io.read(&c, 1);
    c = char(c ^ 0x40);
    io.seekp(std::streamoff(offset + 50 * 4 + 2));
    io.write(&c, 1);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // Sealed again: the tensor checksums, computed from the ranks' memory,
  // also catch data that changed on its way to the file, before the seal.
  reseal(path_);
  expect_load_error("params as written by rank");
}

TEST_F(CheckpointTest, TruncatedFileIsRefused) {
  save_fsdp();
  if (rank() == 0) std::filesystem::resize_file(path_, std::filesystem::file_size(path_) / 2);
  MPI_Barrier(MPI_COMM_WORLD);
  expect_load_error(path_);
}

TEST_F(CheckpointTest, MissingDatasetIsRefused) {
  save_fsdp();
  if (rank() == 0) {
    hid_t f = H5Fopen(path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(f, "optimizer/v", H5P_DEFAULT);
    H5Fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  reseal(path_);
  expect_load_error("dataset optimizer/v is missing");
}

// Rank 0 rewrites the pieces table (`edit` changes its rows); with
// `update_crc`, the metadata checksum too, as a writer that meant it would.
template <typename Edit>
void edit_pieces(const std::string& path, Edit edit, bool update_crc) {
  if (rank() == 0) {
    const Header h = read_header(path);
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "layout/pieces", H5P_DEFAULT);
    hid_t s = H5Dget_space(d);
    hsize_t dims[2];
    H5Sget_simple_extent_dims(s, dims, nullptr);
    std::vector<int64_t> rows(dims[0] * dims[1]);
    H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data());
    edit(rows);
    H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data());
    if (update_crc) {
      H5Adelete(f, "metadata_crc32");
      io::h5::write_int_attribute(f, "metadata_crc32", int64_t(metadata_crc32(h, rows)));
    }
    H5Sclose(s);
    H5Dclose(d);
    H5Fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  reseal(path);
}

// Drops the last writer's rows from the piece table: its shard is gone.
void drop_last_writer(std::vector<int64_t>& rows) {
  for (size_t i = 0; i < rows.size(); i += 3)
    if (rows[i] == world() - 1 || world() == 1) rows[i + 2] = rows[i + 1];  // an empty piece
}

TEST_F(CheckpointTest, AMissingShardIsAGapNotAPartialLoad) {
  save_fsdp();
  edit_pieces(path_, drop_last_writer, true);
  expect_load_error("were not written (a rank's shard is missing)");
}

TEST_F(CheckpointTest, AnAlteredPiecesTableFailsTheMetadataChecksum) {
  save_fsdp();
  edit_pieces(path_, drop_last_writer, false);
  expect_load_error("the header or /layout/pieces fails its checksum");
}

TEST_F(CheckpointTest, AnAlteredHeaderFailsTheMetadataChecksum) {
  save_fsdp();
  if (rank() == 0) {
    hid_t f = H5Fopen(path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    H5Adelete(f, "sampler_batch");
    io::h5::write_int_attribute(f, "sampler_batch", 4);  // one batch further than saved
    H5Fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  reseal(path_);
  expect_load_error("the header or /layout/pieces fails its checksum");
}

TEST_F(CheckpointTest, AVersion1FileStillLoads) {
  save_fsdp();
  // Version 1 as it was written: no seal (no user block), no metadata_crc32.
  const std::string v1 = dir_ + "/step-00000011.h5";
  if (rank() == 0) {
    Header h = read_header(path_);
    h.format_version = 1;
    hid_t from = H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t to = H5Fcreate(v1.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    write_header(to, h);
    for (const char* object : {"params", "optimizer", "layout", "checksums"})
      H5Ocopy(from, object, to, object, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(to);
    H5Fclose(from);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  Buffers b = replicated_buffers();
  EXPECT_EQ(load(v1, MPI_COMM_WORLD, identity(), b).format_version, 1);
  EXPECT_EQ(b.params.f32()[kFlat - 1], param_value(kFlat - 1));
}

TEST_F(CheckpointTest, AnyChangedByteIsRefusedBeforeHdf5ReadsTheFile) {
  save_fsdp();
  const auto size = std::filesystem::file_size(path_);
  for (const uint64_t offset : {uint64_t(0), uint64_t(kSealBytes), uint64_t(kSealBytes + 100), size / 2, size - 1}) {
    SCOPED_TRACE(offset);
    auto flip = [&] {
      if (rank() == 0) {
        std::fstream io(path_, std::ios::in | std::ios::out | std::ios::binary);
        io.seekg(std::streamoff(offset));
        char c = 0;
        io.read(&c, 1);
        c = char(c ^ 0x10);
        io.seekp(std::streamoff(offset));
        io.write(&c, 1);
      }
      MPI_Barrier(MPI_COMM_WORLD);
    };
    flip();
    expect_load_error(offset == 0 ? "neither a sealed shardtrain checkpoint nor an HDF5 file"
                                  : "its bytes fail their checksum");
    flip();  // back as it was: loads again
    Buffers b = replicated_buffers();
    EXPECT_EQ(load(path_, MPI_COMM_WORLD, identity(), b).progress.step, 12);
  }
}

TEST_F(CheckpointTest, NonFiniteValuesAreNotPublished) {
  Buffers b = fsdp_buffers(rank(), world(), true);
  if (rank() == world() - 1) b.state[1].second.f32()[b.write.front().local_offset] = std::nanf("");
  try {
    save(path_, MPI_COMM_WORLD, header(), b);
    ADD_FAILURE() << "rank " << rank() << ": no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("optimizer/v holds nan"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("the checkpoint is not written"));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_FALSE(std::filesystem::exists(path_));
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));
}

TEST_F(CheckpointTest, NotACheckpointIsRefused) {
  if (rank() == 0) std::ofstream(path_) << "not hdf5";
  MPI_Barrier(MPI_COMM_WORLD);
  expect_load_error("neither a sealed shardtrain checkpoint nor an HDF5 file");
}

}  // namespace
}  // namespace shardtrain::checkpoint
