// `shardtrain upload`: puts a split into an S3 object store, shard files
// first and the manifest last, so that a reader never finds a manifest whose
// objects are not all there. The files are checked against the manifest
// (names and sizes) before anything is sent.
#pragma once

#include "io/loader_options.h"

#include <string>

namespace shardtrain::train {

// 0 on success; errors are thrown.
int upload_command(const std::string& split_dir, const std::string& url, bool create_bucket, const io::S3Options& s3);
// One file as one object at `url` (a shard replaced by hand; no manifest).
int upload_object_command(const std::string& path, const std::string& url, const io::S3Options& s3);

}  // namespace shardtrain::train
