// Where an S3 client's endpoint, region and keys come from, in the order the
// AWS tools use: the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN, AWS_REGION or AWS_DEFAULT_REGION, AWS_ENDPOINT_URL_S3 or
// AWS_ENDPOINT_URL), then the shared files of AWS_PROFILE (default
// "default"): ~/.aws/credentials (AWS_SHARED_CREDENTIALS_FILE) for the keys,
// ~/.aws/config (AWS_CONFIG_FILE, section "[profile NAME]" or "[default]")
// for region and endpoint_url. A key pair is taken whole from one place. The
// secret key is never put in a message: `source` says where the keys came
// from, for the log.
#pragma once

#include <string>

namespace shardtrain::io {

struct S3Credentials {
  std::string access_key, secret_key, session_token;
  std::string region;    // "" if none was given
  std::string endpoint;  // "" if none was given
  std::string source;    // "the environment", "/root/.aws/credentials [default]"
};

// Error when no key pair is found anywhere (saying where it looked), or when
// a file names the profile but lacks one of the two keys.
S3Credentials s3_credentials();

// The value of `key` in section `section` of an INI file's text ("" if
// absent); keys and section names compared as written, values trimmed.
std::string ini_value(const std::string& text, const std::string& section, const std::string& key);

}  // namespace shardtrain::io
