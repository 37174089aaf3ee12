// shardtrain stage --from SPLIT --to CACHE: copy a split's shards to a local
// cache, verified, at a limited rate (docs/io.md).
#include "cli/command.h"
#include "io/loader_options.h"
#include "runtime/train/stage_command.h"

namespace shardtrain::cli {

void add_s3_options(CLI::App* cmd, io::S3Options& s3) {
  cmd->add_option("--s3-endpoint", s3.endpoint, "S3 endpoint (as io.s3.endpoint; default: AWS_ENDPOINT_URL or AWS's)");
  cmd->add_option("--s3-connections", s3.connections, "Ranged GETs in flight per object (io.s3.connections)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--s3-part-mib", s3.part_mib,
                  "Bytes per ranged GET, and per part of a multipart upload (at least 5 MiB), MiB (io.s3.part_mib)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--s3-retries", s3.retries, "Retries after a transient failure (io.s3.retries)")
      ->check(CLI::Range(0, 20))
      ->capture_default_str();
}

void add_stage_command(CLI::App& app, std::vector<Command>& out) {
  struct Args {
    std::string from;
    io::StageOptions options;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "stage", "Copy a split's shards into a local cache directory, verified, at a limited rate (docs/io.md)");
  cmd->add_option("--from", a->from,
                  "The split to stage (with its manifest.json): a directory, or an s3:// prefix (keys from the "
                  "environment or the AWS files)")
      ->required();
  cmd->add_option("--to", a->options.cache_dir, "The cache directory (the shards land in TO/<split dir name>/)")
      ->required();
  cmd->add_option("--rate-mb-s", a->options.rate_mb_s, "Copy rate limit, MB/s (0: unlimited)")
      ->check(CLI::Range(0.0, 1e12))
      ->capture_default_str();
  cmd->add_option("--block-kib", a->options.block_kib, "Read/write block, KiB (4 at least, as io.stage.block_kib)")
      ->check(CLI::Range(4, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--capacity-gb", a->options.capacity_gb, "Evict least recently used shards past this (0: no limit)")
      ->check(CLI::Range(0.0, 1e12))
      ->capture_default_str();
  cmd->add_flag("!--no-verify", a->options.verify, "Do not check the copies against the manifest's checksums");
  cmd->add_flag("--direct-io", a->options.direct_io,
                "Copy with O_DIRECT, past the page cache (as io.stage.direct_io; --block-kib in whole 4 KiB blocks)");
  add_s3_options(cmd, a->options.s3);
  out.push_back({cmd, [a](Process&) { return train::stage_command(a->from, a->options); }});
}

}  // namespace shardtrain::cli
