// An S3 client on libcurl, for a split kept in an object store: objects are
// read in parallel ranged GETs (io.s3.connections at a time, io.s3.part_mib
// each) into a temporary file, which is synced and renamed into place only
// when every byte arrived. Each request is signed with SigV4
// (io/s3/sigv4.h). Transient failures (no connection, a stalled or cut
// transfer, a body shorter than asked for, HTTP 408, 429, 500, 502, 503,
// 504) are retried with exponential backoff and jitter; the others end in an
// Error that says what S3 answered and what to check (the keys, the bucket,
// the object), never the secret key. Addressing: path-style on a given
// endpoint (radosgw, MinIO and the like), virtual-hosted on AWS's own.
#pragma once

#include "io/loader_options.h"
#include "io/rate_limiter.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace shardtrain::io {

// "s3://bucket/key": the bucket and the key (which may be empty or a prefix).
struct S3Location {
  std::string bucket, key;
};
bool is_s3_url(const std::string& text);
// Error for a malformed URL (no bucket, an invalid bucket name).
S3Location parse_s3_url(const std::string& url);
// "s3://b/train" + "part-0.h5" -> "s3://b/train/part-0.h5".
std::string s3_child(const std::string& prefix_url, const std::string& name);

struct S3Transfer {
  int64_t bytes = 0;      // bytes received (download) or sent (upload)
  double seconds = 0;     // wall time, first request to rename
  int64_t requests = 0;   // HTTP requests made, retries included
  int64_t retries = 0;    // of those, repeats after a transient failure
  int64_t parts = 0;      // upload: the parts of a multipart upload (0: one PUT)
  bool complete = false;  // false: stopped early, nothing left behind
};

class S3Client {
 public:
  using Log = std::function<void(const std::string&)>;
  // Resolves the endpoint, region and keys (io/s3/credentials.h). `log`
  // (may be empty) gets one line per retry, from any thread.
  explicit S3Client(S3Options options, Log log = {});
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  // "http://127.0.0.1:8000 (region us-east-1, keys from the environment)".
  std::string describe() const;

  // A small object's whole text (a manifest), at most `max_bytes`.
  std::string get_text(const std::string& url, int64_t max_bytes = 64 << 20);
  // The object's size in bytes.
  int64_t size_of(const std::string& url);
  // Downloads the object into `dst` (written as dst + ".tmp", fsync'ed,
  // renamed; dst's directory is created). `expected_bytes`: the object must
  // be exactly this long (the manifest's size), else an Error that says
  // both. Every part passes `limiter` (may be null) first. `stop` (may be
  // null) ends it early, leaving nothing behind.
  S3Transfer download(const std::string& url, int64_t expected_bytes, const std::string& dst,
                      RateLimiter* limiter = nullptr, const std::atomic<bool>* stop = nullptr);
  // Uploads a local file as one object: in one PUT where it fits one part
  // (io.s3.part_mib, at least 5 MiB), else as S3's multipart upload, its
  // parts io.s3.connections at a time (objects of any size S3 takes).
  S3Transfer upload(const std::string& path, const std::string& url);
  // Creates the bucket; one that this account owns already is fine.
  void create_bucket(const std::string& bucket);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardtrain::io
