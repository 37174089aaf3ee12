// S3 credentials from the environment and the AWS shared files
// (io/s3/credentials.h).
#include "io/s3/credentials.h"

#include "runtime/core/error.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace shardtrain::io {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

std::string trim_ini(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// The file's text, or "" when it does not exist.
std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string home_file(const char* override_var, const char* name) {
  std::string given = env_or_empty(override_var);
  if (!given.empty()) return given;
  const std::string home = env_or_empty("HOME");
  return home.empty() ? std::string() : home + "/.aws/" + name;
}

}  // namespace

std::string ini_value(const std::string& text, const std::string& section, const std::string& key) {
  std::istringstream in(text);
  std::string line, current;
  while (std::getline(in, line)) {
    line = trim_ini(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      current = trim_ini(line.substr(1, line.size() - 2));
      continue;
    }
    if (current != section) continue;
    const size_t eq = line.find('=');
    if (eq != std::string::npos && trim_ini(line.substr(0, eq)) == key) return trim_ini(line.substr(eq + 1));
  }
  return "";
}

S3Credentials s3_credentials() {
  S3Credentials c;
  const std::string profile = env_or_empty("AWS_PROFILE").empty() ? "default" : env_or_empty("AWS_PROFILE");
  const std::string config_file = home_file("AWS_CONFIG_FILE", "config");
  const std::string config_text = config_file.empty() ? "" : read_text(config_file);
  const std::string config_section = profile == "default" ? "default" : "profile " + profile;

  c.region = env_or_empty("AWS_REGION");
  if (c.region.empty()) c.region = env_or_empty("AWS_DEFAULT_REGION");
  if (c.region.empty()) c.region = ini_value(config_text, config_section, "region");
  c.endpoint = env_or_empty("AWS_ENDPOINT_URL_S3");
  if (c.endpoint.empty()) c.endpoint = env_or_empty("AWS_ENDPOINT_URL");
  if (c.endpoint.empty()) c.endpoint = ini_value(config_text, config_section, "endpoint_url");

  if (!env_or_empty("AWS_ACCESS_KEY_ID").empty() || !env_or_empty("AWS_SECRET_ACCESS_KEY").empty()) {
    c.access_key = env_or_empty("AWS_ACCESS_KEY_ID");
    c.secret_key = env_or_empty("AWS_SECRET_ACCESS_KEY");
    c.session_token = env_or_empty("AWS_SESSION_TOKEN");
    ST_CHECK(!c.access_key.empty() && !c.secret_key.empty(),
             "S3 credentials: the environment sets only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
    c.source = "the environment";
    return c;
  }
  const std::string credentials_file = home_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
  const std::string text = credentials_file.empty() ? "" : read_text(credentials_file);
  c.access_key = ini_value(text, profile, "aws_access_key_id");
  c.secret_key = ini_value(text, profile, "aws_secret_access_key");
  c.session_token = ini_value(text, profile, "aws_session_token");
  if (c.access_key.empty() && c.secret_key.empty()) {  // the config file may hold them too
    c.access_key = ini_value(config_text, config_section, "aws_access_key_id");
    c.secret_key = ini_value(config_text, config_section, "aws_secret_access_key");
    c.session_token = ini_value(config_text, config_section, "aws_session_token");
    c.source = config_file + " [" + config_section + "]";
  } else {
    c.source = credentials_file + " [" + profile + "]";
  }
  ST_CHECK(!c.access_key.empty() || !c.secret_key.empty(),
           "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give profile \"{}\" "
           "aws_access_key_id and aws_secret_access_key in {} (AWS_PROFILE picks the profile)",
           profile, credentials_file.empty() ? std::string("~/.aws/credentials") : credentials_file);
  ST_CHECK(!c.access_key.empty() && !c.secret_key.empty(),
           "S3 credentials: {} has only one of aws_access_key_id and "
           "aws_secret_access_key",
           c.source);
  return c;
}

}  // namespace shardtrain::io
