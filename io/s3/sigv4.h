// AWS Signature Version 4 for S3 requests: the Authorization header a
// request carries, computed from the request's method, path, query, signed
// headers and payload hash with the secret key (HMAC-SHA256 chain over the
// date, region and service). Pure functions; the S3 client (io/s3/client.h)
// builds the request and sends it. Specification: AWS's "Authenticating
// Requests: Using the Authorization Header (AWS Signature Version 4)".
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace shardtrain::io {

// SHA-256 of `n` bytes, as 64 lowercase hex digits.
std::string sha256_hex(const void* data, size_t n);
inline constexpr const char* kEmptyPayloadSha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// RFC 3986 percent-encoding as SigV4 wants it: unreserved characters stay,
// everything else becomes %XX (upper case); '/' stays when `keep_slash`.
std::string uri_encode(const std::string& text, bool keep_slash);

struct SigV4Request {
  std::string method;                                        // "GET"
  std::string path;                                          // already encoded, e.g. "/bucket/part-00000.h5"
  std::string query;                                         // canonical: sorted, encoded "a=1&b=2" ("" for none)
  std::vector<std::pair<std::string, std::string>> headers;  // signed: host, x-amz-date, x-amz-content-sha256, ...
  std::string payload_sha256;                                // hex, or "UNSIGNED-PAYLOAD"
};

struct SigV4Key {
  std::string access_key, secret_key, region;
  std::string service = "s3";
};

// The Authorization header's value for `request` signed at `amz_date`
// ("YYYYMMDDTHHMMSSZ", also sent as x-amz-date). Header names are compared
// lower-cased and values trimmed, as the specification says.
std::string sigv4_authorization(const SigV4Request& request, const SigV4Key& key, const std::string& amz_date);

}  // namespace shardtrain::io
