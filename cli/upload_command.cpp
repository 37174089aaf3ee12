// shardtrain upload --from SPLIT --to s3://bucket/prefix: put a split (its
// shard files and manifest) into an S3 object store (docs/io.md).
#include "cli/command.h"
#include "runtime/train/upload_command.h"

namespace shardtrain::cli {

void add_upload_command(CLI::App& app, std::vector<Command>& out) {
  struct Args {
    std::string from, to, object;
    bool create_bucket = false;
    io::S3Options s3;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "upload", "Put a split's shard files and manifest into an S3 object store, for data.train = \"s3://...\"");
  CLI::Option* from = cmd->add_option("--from", a->from, "The split directory (with its manifest.json)");
  CLI::Option* object =
      cmd->add_option("--object", a->object, "One file, put as the object --to names (e.g. to replace a shard)");
  from->excludes(object);
  cmd->add_option("--to", a->to, "The s3://bucket/prefix to put the split under (with --object: the object's URL)")
      ->required();
  cmd->add_flag("--create-bucket", a->create_bucket, "Create the bucket first (one you own already is fine)");
  add_s3_options(cmd, a->s3);
  out.push_back({cmd, [a](Process&) {
                   if (!a->object.empty()) return train::upload_object_command(a->object, a->to, a->s3);
                   if (a->from.empty()) throw CLI::RequiredError("--from or --object");
                   return train::upload_command(a->from, a->to, a->create_bucket, a->s3);
                 }});
}

}  // namespace shardtrain::cli
