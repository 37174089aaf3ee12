#include "io/text_dataset.h"

#include "io/dataset_writer.h"
#include "io/manifest.h"
#include "io/shard_format.h"
#include "runtime/core/error.h"

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace shardtrain::io {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> run_command(const std::string& command) {
  // NOLINTNEXTLINE(bugprone-command-processor): the user's own command line (prep text --command)
  FILE* pipe = popen(command.c_str(), "r");
  ST_CHECK(pipe != nullptr, "prep text: cannot run `{}`", command);
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.insert(out.end(), buf, buf + n);
  const int status = pclose(pipe);
  ST_CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "prep text: `{}` failed (exit status {}); install bible-kjv (scripts/install-deps.sh) or give "
           "--input FILE",
           command, status == -1 || !WIFEXITED(status) ? -1 : WEXITSTATUS(status));
  return out;
}

// One split of windows [first, first + count) as a single shard + manifest.
void write_text_split(const fs::path& dir, const std::string& split, const uint8_t* windows, int64_t count,
                      int64_t sample_bytes) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  ST_CHECK(!ec, "{}: cannot create directory: {}", dir.string(), ec.message());
  remove_stale_shards(dir.string(), 1);  // replace an earlier run's shards
  shard_format::ShardHeader header;
  header.split = split;
  header.num_classes = kByteVocabulary;
  header.num_samples = count;
  header.sample_shape = Shape{sample_bytes};
  header.dtype = SampleDType::u8;
  std::vector<int32_t> labels(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) labels[size_t(i)] = windows[i * sample_bytes + sample_bytes - 1];
  write_shard((dir / shard_format::shard_file_name(0)).string(), header, windows, labels.data());
  write_split_manifest(dir.string());
}

}  // namespace

std::vector<uint8_t> read_text_corpus(const TextPrepOptions& o) {
  if (o.input.empty()) return run_command(o.command);
  std::ifstream in(o.input, std::ios::binary);
  ST_CHECK(in.good(), "prep text: cannot open {}", o.input);
  std::vector<uint8_t> text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ST_CHECK(!in.bad(), "prep text: cannot read {}", o.input);
  return text;
}

int64_t text_windows(const std::vector<uint8_t>& text, int64_t block_size, std::vector<uint8_t>* windows) {
  ST_CHECK(block_size >= 1, "prep text: block size is {}, it must be >= 1", block_size);
  const int64_t w = block_size + 1, n = int64_t(text.size()) / w;
  windows->assign(text.begin(), text.begin() + n * w);
  return n;
}

TextPrepSummary prep_text(const TextPrepOptions& o, const std::function<void(const std::string&)>& progress) {
  ST_CHECK(!o.out_dir.empty(), "prep text: no output directory (--out)");
  ST_CHECK(o.block_size >= 1, "prep text: block size is {}, it must be >= 1", o.block_size);
  ST_CHECK(o.test_fraction > 0 && o.test_fraction < 1, "prep text: test fraction is {}, it must be in (0, 1)",
           o.test_fraction);
  const std::vector<uint8_t> text = read_text_corpus(o);
  std::vector<uint8_t> windows;
  const int64_t n = text_windows(text, o.block_size, &windows);
  const int64_t n_test = std::max<int64_t>(1, std::llround(double(n) * o.test_fraction));
  ST_CHECK(n - n_test >= 1,
           "prep text: {} bytes of text make {} window(s) of {} bytes: too few for a train and a "
           "test split",
           text.size(), n, o.block_size + 1);
  const int64_t w = o.block_size + 1;
  const fs::path out(o.out_dir);
  write_text_split(out / "train", "train", windows.data(), n - n_test, w);
  if (progress) progress(fmt::format("wrote {} ({} samples of {} bytes)", (out / "train").string(), n - n_test, w));
  write_text_split(out / "test", "test", windows.data() + (n - n_test) * w, n_test, w);
  if (progress) progress(fmt::format("wrote {} ({} samples of {} bytes)", (out / "test").string(), n_test, w));
  return {int64_t(text.size()), n - n_test, n_test};
}

}  // namespace shardtrain::io
