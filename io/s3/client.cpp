// The S3 client: signed requests through libcurl, retried with backoff, and
// parallel ranged GETs into a temporary file (io/s3/client.h).
#include "io/s3/client.h"

#include "io/s3/credentials.h"
#include "io/s3/sigv4.h"
#include "runtime/core/clock.h"
#include "runtime/core/error.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace fs = std::filesystem;

namespace shardtrain::io {
namespace {

constexpr int64_t kMinPartBytes = int64_t(5) << 20;  // S3's smallest part of a multipart upload (but the last)
constexpr int64_t kMaxParts = 10000;                 // and its most parts

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { ST_CHECK(curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK, "libcurl: init failed"); });
}

// "<Code>NoSuchBucket</Code>" -> "NoSuchBucket" (S3's XML error body).
std::string xml_field(const std::string& body, const std::string& tag) {
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  const size_t b = body.find(open);
  if (b == std::string::npos) return "";
  const size_t e = body.find(close, b);
  return e == std::string::npos ? "" : body.substr(b + open.size(), e - b - open.size());
}

bool valid_bucket_name(const std::string& b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (const char c : b)
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-' ||
          c == '.'))
      return false;
  return true;
}

struct Response {
  CURLcode curl = CURLE_OK;
  std::string curl_error;
  long status = 0;
  std::string body;           // error bodies and get_text's text
  std::string content_range;  // "bytes 0-0/1234"
  std::string etag;           // an uploaded part's ETag, quotes kept
  int64_t received = 0;       // body bytes (sink or body)
};

bool transient(const Response& r) {
  switch (r.curl) {
    case CURLE_OK: break;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM: return true;
    default: return false;
  }
  return r.status == 408 || r.status == 429 || r.status == 500 || r.status == 502 || r.status == 503 || r.status == 504;
}

// What went wrong with one try, for retry lines and errors.
std::string what_happened(const Response& r) {
  if (r.curl != CURLE_OK) return fmt::format("{} ({})", curl_easy_strerror(r.curl), r.curl_error);
  const std::string code = xml_field(r.body, "Code"), message = xml_field(r.body, "Message");
  return fmt::format("HTTP {}{}{}", r.status, code.empty() ? "" : " " + code,
                     message.empty() ? "" : " (" + message + ")");
}

// One connection (curl handle) per thread: libcurl keeps it alive between
// requests to the same server.
class Connection {
 public:
  Connection() {
    init_curl_once();
    h_ = curl_easy_init();
    ST_CHECK(h_ != nullptr, "libcurl: cannot create a handle");
  }
  ~Connection() { curl_easy_cleanup(h_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  CURL* get() const { return h_; }

 private:
  CURL* h_;
};

struct Request {
  std::string method = "GET";
  S3Location where;
  int64_t range_begin = -1, range_end = -1;  // inclusive; -1: whole object
  std::string payload_sha256 = kEmptyPayloadSha256;
  std::string query;                  // canonical (sorted keys, encoded values), "" for none
  std::string upload_path;            // PUT: the file to send
  const char* upload_data = nullptr;  // PUT: or these upload_bytes from memory
  int64_t upload_bytes = 0;
  std::string post_body;  // POST: the body
  // Where a 2xx response's body goes: into `sink` (at most sink_bytes) or,
  // when sink is null, into Response::body.
  char* sink = nullptr;
  int64_t sink_bytes = 0;
  int64_t max_body = int64_t(64) << 20;
};

struct BodyState {
  Response* r;
  const Request* q;
  CURL* h;
};

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* st = static_cast<BodyState*>(user);
  const size_t bytes = size * n;
  long status = 0;
  curl_easy_getinfo(st->h, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 200 && status < 300 && st->q->sink != nullptr) {
    if (st->r->received + int64_t(bytes) > st->q->sink_bytes) return 0;  // more than asked: fail the transfer
    std::memcpy(st->q->sink + st->r->received, data, bytes);
  } else {
    if (int64_t(st->r->body.size() + bytes) > st->q->max_body) return 0;
    st->r->body.append(data, bytes);
  }
  st->r->received += int64_t(bytes);
  return bytes;
}

// The value of header `name` (lower case, with the colon) in `line`, or
// nothing; trimmed.
bool header_value(const std::string& line, const std::string& name, std::string& value) {
  if (line.size() <= name.size()) return false;
  std::string head = line.substr(0, name.size());
  std::transform(head.begin(), head.end(), head.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (head != name) return false;
  value = line.substr(name.size());
  value.erase(0, value.find_first_not_of(' '));
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n')) value.pop_back();
  return true;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<Response*>(user);
  const std::string line(data, size * n);
  if (!header_value(line, "content-range:", r->content_range)) header_value(line, "etag:", r->etag);
  return size * n;
}

size_t no_upload_body(char*, size_t, size_t, void*) { return 0; }

size_t on_read(char* buffer, size_t size, size_t n, void* user) {
  auto* in = static_cast<std::ifstream*>(user);
  in->read(buffer, std::streamsize(size * n));
  return size_t(in->gcount());
}

struct MemoryUpload {
  const char* data;
  int64_t left;
};

size_t on_read_memory(char* buffer, size_t size, size_t n, void* user) {
  auto* m = static_cast<MemoryUpload*>(user);
  const size_t bytes = std::min<size_t>(size * n, size_t(m->left));
  std::memcpy(buffer, m->data, bytes);
  m->data += bytes;
  m->left -= int64_t(bytes);
  return bytes;
}

std::string sha256_file_hex(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ST_CHECK(in, "{}: cannot open: {}", path, std::strerror(errno));
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ST_CHECK(ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1, "SHA-256: OpenSSL failed");
  std::vector<char> buf(size_t(1) << 20);
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    if (in.gcount() > 0) EVP_DigestUpdate(ctx, buf.data(), size_t(in.gcount()));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, digest, &len);
  EVP_MD_CTX_free(ctx);
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

}  // namespace

bool is_s3_url(const std::string& text) { return text.rfind("s3://", 0) == 0; }

S3Location parse_s3_url(const std::string& url) {
  ST_CHECK(is_s3_url(url), "\"{}\" is not an s3:// URL", url);
  const std::string rest = url.substr(5);
  const size_t slash = rest.find('/');
  S3Location loc{rest.substr(0, slash), slash == std::string::npos ? "" : rest.substr(slash + 1)};
  ST_CHECK(valid_bucket_name(loc.bucket),
           "{}: \"{}\" is not a valid bucket name (3 to 63 lower-case letters, digits, '-' and '.')", url, loc.bucket);
  return loc;
}

std::string s3_child(const std::string& prefix_url, const std::string& name) {
  std::string base = prefix_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + "/" + name;
}

struct S3Client::Impl {
  S3Options options;
  Log log;
  S3Credentials keys;
  std::string endpoint;  // scheme://host[:port], no trailing slash
  bool virtual_hosted = false;
  mutable std::mutex log_mu;

  // io.s3.region, else the environment's or the config file's, else us-east-1.
  std::string region() const {
    if (!options.region.empty()) return options.region;
    return keys.region.empty() ? "us-east-1" : keys.region;
  }

  std::string url_of(const S3Location& w, std::string& host, std::string& path) const {
    const std::string key_path = uri_encode(w.key, /*keep_slash=*/true);
    const size_t scheme_end = endpoint.find("://") + 3;
    const std::string scheme = endpoint.substr(0, scheme_end);
    const std::string authority = endpoint.substr(scheme_end);
    if (virtual_hosted && w.bucket.find('.') == std::string::npos) {
      host = w.bucket + "." + authority;
      path = "/" + key_path;
    } else {
      host = authority;
      path = "/" + w.bucket + (w.key.empty() ? "" : "/" + key_path);
    }
    return scheme + host + path;
  }

  // One try of `q` on connection `c`.
  Response perform(Connection& c, const Request& q) const {
    CURL* h = c.get();
    curl_easy_reset(h);
    Response r;
    std::string host, path;
    const std::string url = url_of(q.where, host, path);
    const std::string date = utc_now("%Y%m%dT%H%M%SZ");  // SigV4's x-amz-date
    SigV4Request sig{q.method,
                     path,
                     q.query,
                     {{"host", host}, {"x-amz-date", date}, {"x-amz-content-sha256", q.payload_sha256}},
                     q.payload_sha256};
    std::string range;
    if (q.range_begin >= 0) {
      range = fmt::format("bytes={}-{}", q.range_begin, q.range_end);
      sig.headers.emplace_back("range", range);
    }
    if (!keys.session_token.empty()) sig.headers.emplace_back("x-amz-security-token", keys.session_token);
    const std::string auth = sigv4_authorization(sig, {keys.access_key, keys.secret_key, region(), "s3"}, date);

    std::ifstream upload;  // opened before the header list, which an error here would leak
    if (!q.upload_path.empty()) {
      upload.open(q.upload_path, std::ios::binary);
      ST_CHECK(upload, "{}: cannot open: {}", q.upload_path, std::strerror(errno));
    }
    curl_slist* headers = nullptr;
    for (const auto& [name, value] : sig.headers)
      if (name != "host") headers = curl_slist_append(headers, fmt::format("{}: {}", name, value).c_str());
    headers = curl_slist_append(headers, ("Authorization: " + auth).c_str());
    headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip on PUT

    char error[CURL_ERROR_SIZE] = {0};
    BodyState st{&r, &q, h};
    const std::string full_url = q.query.empty() ? url : url + "?" + q.query;
    curl_easy_setopt(h, CURLOPT_URL, full_url.c_str());
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    // A transfer that stalls (under 1 KB/s for 30 s) is cut and retried.
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 30L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &st);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &r);
    MemoryUpload memory{q.upload_data, q.upload_bytes};  // from the start at every try
    if (q.method == "POST") {
      curl_easy_setopt(h, CURLOPT_POST, 1L);
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, q.post_body.c_str());
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(q.post_body.size()));
    } else if (q.method == "DELETE") {
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    if (q.method == "PUT") {
      curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, curl_off_t(q.upload_bytes));
      if (upload.is_open()) {
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, &upload);
      } else if (q.upload_data != nullptr) {
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read_memory);
        curl_easy_setopt(h, CURLOPT_READDATA, &memory);
      } else {
        curl_easy_setopt(h, CURLOPT_READFUNCTION, no_upload_body);
      }
    }
    r.curl = curl_easy_perform(h);
    r.curl_error = error;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(headers);
    return r;
  }

  // `q` until it succeeds or fails for good; `check` (may be empty) may
  // call a 2xx answer a transient failure (a short body). Returns the
  // answer; throws on a lasting failure.
  Response run(Connection& c, const Request& q, const std::function<std::string(const Response&)>& check,
               const std::atomic<bool>* stop, S3Transfer* counts) const {
    const std::string what =
        fmt::format("s3://{}/{}{}", q.where.bucket, q.where.key,
                    q.range_begin >= 0 ? fmt::format(" bytes {}-{}", q.range_begin, q.range_end) : std::string());
    std::mt19937_64 rng(std::hash<std::string>()(what) ^ uint64_t(now_seconds() * 1e9));
    for (int64_t attempt = 0;; ++attempt) {
      Response r = perform(c, q);
      if (counts) ++counts->requests;
      std::string problem;
      bool again = false;
      if (r.curl != CURLE_OK || r.status < 200 || r.status >= 300) {
        problem = what_happened(r);
        again = transient(r);
      } else if (check) {
        problem = check(r);
        again = !problem.empty();
      }
      if (problem.empty()) return r;
      if (!again) fail(q, r, what);
      if (attempt >= options.retries)
        throw Error(fmt::format("{}: gave up after {} tries at {}: {}", what, attempt + 1, endpoint, problem));
      // Full jitter on an exponential base (0.1 s doubling, at most 5 s):
      // ranks retrying together spread out instead of returning in step.
      const double cap = std::min(5.0, 0.1 * double(int64_t(1) << std::min<int64_t>(attempt, 6)));
      const double wait = std::uniform_real_distribution<double>(cap / 2, cap)(rng);
      if (log) {
        std::lock_guard<std::mutex> lock(log_mu);
        log(fmt::format("{}: {}; retry {} of {} in {:.2f} s", what, problem, attempt + 1, options.retries, wait));
      }
      if (counts) ++counts->retries;
      const double until = now_seconds() + wait;
      while (now_seconds() < until) {
        if (stop != nullptr && stop->load()) return r;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }

  // One part of an object (`begin`, `len` bytes; the whole object when it is
  // empty) into `fd` at its offset. False when stopped.
  bool fetch_part(Connection& c, const std::string& url, int64_t expected_bytes, int64_t begin, int64_t len, int fd,
                  const std::string& tmp, RateLimiter* limiter, const std::atomic<bool>* stop, std::vector<char>& buf,
                  S3Transfer& counts) const {
    Request q;
    q.where = parse_s3_url(url);
    buf.resize(size_t(len));
    q.sink = buf.data();
    q.sink_bytes = len;
    if (expected_bytes > 0) {  // an empty object has no satisfiable range: asked for whole
      q.range_begin = begin;
      q.range_end = begin + len - 1;
      if (limiter) limiter->acquire(len, stop);
    }
    const auto check = [&](const Response& r) -> std::string {
      // The object's length (from Content-Range) must be the manifest's: a
      // different object under the name is not retried, it is an error.
      const size_t slash = r.content_range.rfind('/');
      if (expected_bytes > 0 && slash != std::string::npos &&
          std::stoll(r.content_range.substr(slash + 1)) != expected_bytes)
        throw Error(
            fmt::format("{}: the object is {} bytes, the manifest says {}: the store holds another version of "
                        "it (rewrite it, or the manifest)",
                        url, r.content_range.substr(slash + 1), expected_bytes));
      if (expected_bytes == 0 && r.received != 0)
        throw Error(fmt::format("{}: the object is not empty, the manifest says 0 bytes", url));
      return r.received == len ? "" : fmt::format("truncated: {} of {} bytes arrived", r.received, len);
    };
    const Response r = run(c, q, check, stop, &counts);
    if (stop != nullptr && stop->load()) return false;
    for (int64_t put = 0; put < r.received;) {
      const ssize_t w = ::pwrite(fd, buf.data() + put, size_t(r.received - put), off_t(begin + put));
      ST_CHECK(w > 0 || errno == EINTR, "{}: write failed: {}", tmp, std::strerror(errno));
      if (w > 0) put += w;
    }
    counts.bytes += r.received;
    return true;
  }

  S3Transfer single_put(const std::string& path, const S3Location& where, int64_t bytes) const {
    Connection c;
    Request q;
    q.method = "PUT";
    q.where = where;
    q.upload_path = path;
    q.upload_bytes = bytes;
    q.payload_sha256 = sha256_file_hex(path);
    S3Transfer t;
    run(c, q, {}, nullptr, &t);
    return t;
  }

  // S3's multipart upload: one upload started, its parts PUT by
  // io.s3.connections threads (each part read, hashed and sent from memory,
  // retried alone), then completed with the parts' ETags in order; on a
  // failure the upload is aborted, so the store keeps no parts.
  S3Transfer multipart_upload(const std::string& path, const S3Location& where, int64_t bytes, int64_t part) const {
    Connection c;
    Request start;
    start.method = "POST";
    start.where = where;
    start.query = "uploads=";
    S3Transfer total;
    const std::string id = xml_field(run(c, start, {}, nullptr, &total).body, "UploadId");
    ST_CHECK(!id.empty(), "s3://{}/{}: the store started no multipart upload (no UploadId)", where.bucket, where.key);
    const std::string upload_id = "uploadId=" + uri_encode(id, /*keep_slash=*/false);
    const int64_t parts = (bytes + part - 1) / part;
    std::vector<std::string> etags(static_cast<size_t>(parts));
    std::atomic<int64_t> next{0};
    std::atomic<bool> failed{false};
    std::mutex mu;
    std::string first_error;
    auto worker = [&] {
      try {
        Connection mine;
        std::ifstream in(path, std::ios::binary);
        ST_CHECK(in, "{}: cannot open: {}", path, std::strerror(errno));
        std::vector<char> buf;
        for (int64_t p = next++; p < parts && !failed.load(); p = next++) {
          const int64_t len = std::min(part, bytes - p * part);
          buf.resize(size_t(len));
          in.clear();
          in.seekg(p * part);
          in.read(buf.data(), std::streamsize(len));
          ST_CHECK(in.gcount() == len, "{}: short read at byte {}", path, p * part);
          Request q;
          q.method = "PUT";
          q.where = where;
          q.query = fmt::format("partNumber={}&{}", p + 1, upload_id);
          q.upload_data = buf.data();
          q.upload_bytes = len;
          q.payload_sha256 = sha256_hex(buf.data(), buf.size());
          S3Transfer counts;
          const Response r = run(mine, q, {}, nullptr, &counts);
          ST_CHECK(!r.etag.empty(), "s3://{}/{}: part {} was stored without an ETag", where.bucket, where.key, p + 1);
          std::lock_guard<std::mutex> lock(mu);
          etags[size_t(p)] = r.etag;
          total.requests += counts.requests;
          total.retries += counts.retries;
        }
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failed.exchange(true)) first_error = e.what();
      }
    };
    std::vector<std::thread> threads;
    for (int64_t i = 1; i < std::min<int64_t>(options.connections, parts); ++i) threads.emplace_back(worker);
    worker();
    for (std::thread& th : threads) th.join();

    Request finish;
    finish.where = where;
    finish.query = upload_id;
    if (failed.load()) {
      abort_upload(c, finish);
      throw Error(first_error);
    }
    finish.method = "POST";
    finish.post_body = "<CompleteMultipartUpload>";
    for (int64_t p = 0; p < parts; ++p)
      finish.post_body +=
          fmt::format("<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>", p + 1, etags[size_t(p)]);
    finish.post_body += "</CompleteMultipartUpload>";
    finish.payload_sha256 = sha256_hex(finish.post_body.data(), finish.post_body.size());
    // S3 may answer 200 and put the error in the body.
    const auto check = [&](const Response& r) -> std::string {
      const std::string code = xml_field(r.body, "Code");
      if (code.empty()) return "";
      if (code == "InternalError" || code == "SlowDown") return "completion failed: " + code;
      throw Error(fmt::format("s3://{}/{}: completing the upload of {} parts failed: {} ({})", where.bucket, where.key,
                              parts, code, xml_field(r.body, "Message")));
    };
    try {
      run(c, finish, check, nullptr, &total);
    } catch (const std::exception&) {
      abort_upload(c, finish);
      throw;
    }
    total.parts = parts;
    return total;
  }

  // Aborts the multipart upload `finish` names: the parts stored so far go.
  // One try: the error that led here is the one to report.
  void abort_upload(Connection& c, Request finish) const {
    finish.method = "DELETE";
    finish.post_body.clear();
    finish.payload_sha256 = kEmptyPayloadSha256;
    perform(c, finish);
  }

  // A lasting failure: what S3 said, and what the user should check.
  [[noreturn]] void fail(const Request& q, const Response& r, const std::string& what) const {
    const std::string code = xml_field(r.body, "Code");
    const std::string said = what_happened(r);
    if (code == "InvalidAccessKeyId")
      throw Error(
          fmt::format("{}: {} rejected the access key from {} ({}): check AWS_ACCESS_KEY_ID or the "
                      "credentials file's aws_access_key_id",
                      what, endpoint, keys.source, said));
    if (code == "SignatureDoesNotMatch")
      throw Error(
          fmt::format("{}: {} rejected the request's signature ({}): the secret key from {} does not "
                      "belong to its access key, or io.s3.region is not the bucket's region",
                      what, endpoint, said, keys.source));
    if (code == "AccessDenied" || r.status == 403)
      throw Error(fmt::format("{}: access denied by {} ({}): the keys from {} may not read it", what, endpoint, said,
                              keys.source));
    if (code == "NoSuchBucket")
      throw Error(fmt::format("s3://{}: no such bucket at {} ({})", q.where.bucket, endpoint, said));
    if (code == "NoSuchKey" || r.status == 404)
      throw Error(fmt::format("{}: no such object at {} ({})", what, endpoint, said));
    throw Error(fmt::format("{}: {} answered {}", what, endpoint, said));
  }
};

S3Client::S3Client(S3Options options, Log log) : impl_(std::make_unique<Impl>()) {
  validate(options);
  impl_->options = std::move(options);
  impl_->log = std::move(log);
  impl_->keys = s3_credentials();
  std::string ep = impl_->options.endpoint.empty() ? impl_->keys.endpoint : impl_->options.endpoint;
  if (ep.empty()) {
    ep = "https://s3." + impl_->region() + ".amazonaws.com";
    impl_->virtual_hosted = true;
  }
  ST_CHECK(ep.rfind("http://", 0) == 0 || ep.rfind("https://", 0) == 0,
           "S3 endpoint \"{}\" must start with http:// or https://", ep);
  while (!ep.empty() && ep.back() == '/') ep.pop_back();
  impl_->endpoint = ep;
}

S3Client::~S3Client() = default;

std::string S3Client::describe() const {
  return fmt::format("{} (region {}, keys from {})", impl_->endpoint, impl_->region(), impl_->keys.source);
}

std::string S3Client::get_text(const std::string& url, int64_t max_bytes) {
  Connection c;
  Request q;
  q.where = parse_s3_url(url);
  q.max_body = max_bytes;
  return impl_->run(c, q, {}, nullptr, nullptr).body;
}

int64_t S3Client::size_of(const std::string& url) {
  Connection c;
  Request q;
  q.where = parse_s3_url(url);
  q.range_begin = 0;
  q.range_end = 0;
  const Response r = impl_->run(c, q, {}, nullptr, nullptr);
  const size_t slash = r.content_range.rfind('/');
  ST_CHECK(slash != std::string::npos, "{}: the answer to a ranged GET has no Content-Range", url);
  return std::stoll(r.content_range.substr(slash + 1));
}

namespace {

// The temporary file synced and renamed into place, or removed (an error,
// a stop). Throws `error` when not empty.
void finish_download(int fd, const std::string& tmp, const std::string& dst, bool keep, const std::string& error) {
  std::error_code ec;
  if (!keep || ::fsync(fd) != 0) {
    const std::string sync_error = keep ? std::strerror(errno) : "";
    ::close(fd);
    fs::remove(tmp, ec);
    if (!error.empty()) throw Error(error);
    ST_CHECK(!keep, "{}: fsync failed: {}", tmp, sync_error);
    return;
  }
  ST_CHECK(::close(fd) == 0, "{}: close failed: {}", tmp, std::strerror(errno));
  fs::rename(tmp, dst, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error(fmt::format("{}: cannot rename into place: {}", dst, ec.message()));
  }
}

}  // namespace

S3Transfer S3Client::download(const std::string& url, int64_t expected_bytes, const std::string& dst,
                              RateLimiter* limiter, const std::atomic<bool>* stop) {
  const double t0 = now_seconds();
  parse_s3_url(url);
  const std::string tmp = dst + ".tmp";
  std::error_code ec;
  fs::create_directories(fs::path(dst).parent_path(), ec);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ST_CHECK(fd >= 0, "{}: cannot create: {}", tmp, std::strerror(errno));

  // Parts handed out in order to `connections` threads, each with its own
  // connection; the first failure stops the others.
  const int64_t part = impl_->options.part_mib << 20;
  const int64_t parts = expected_bytes == 0 ? 1 : (expected_bytes + part - 1) / part;
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::string first_error;
  S3Transfer total;
  auto worker = [&] {
    Connection c;
    std::vector<char> buf;
    S3Transfer mine;
    try {
      for (int64_t p = next++; p < parts && !failed.load(); p = next++) {
        const int64_t begin = p * part;
        if (!impl_->fetch_part(c, url, expected_bytes, begin, std::min(part, expected_bytes - begin), fd, tmp, limiter,
                               stop, buf, mine))
          break;
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu);
      if (!failed.exchange(true)) first_error = e.what();
    }
    std::lock_guard<std::mutex> lock(mu);
    total.bytes += mine.bytes;
    total.requests += mine.requests;
    total.retries += mine.retries;
  };
  std::vector<std::thread> threads;
  for (int64_t i = 1; i < std::min<int64_t>(impl_->options.connections, parts); ++i) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();

  total.complete = !failed.load() && !(stop != nullptr && stop->load());
  finish_download(fd, tmp, dst, total.complete, first_error);
  total.seconds = now_seconds() - t0;
  return total;
}

S3Transfer S3Client::upload(const std::string& path, const std::string& url) {
  const double t0 = now_seconds();
  std::error_code ec;
  const int64_t bytes = int64_t(fs::file_size(path, ec));
  ST_CHECK(!ec, "{}: {}", path, ec.message());
  // Parts of io.s3.part_mib, at least S3's smallest (5 MiB) and few enough
  // for its 10000; an object that fits one part goes in one PUT.
  const int64_t part = std::max({impl_->options.part_mib << 20, kMinPartBytes, (bytes + kMaxParts - 1) / kMaxParts});
  S3Transfer t = bytes > part ? impl_->multipart_upload(path, parse_s3_url(url), bytes, part)
                              : impl_->single_put(path, parse_s3_url(url), bytes);
  t.bytes = bytes;
  t.complete = true;
  t.seconds = now_seconds() - t0;
  return t;
}

void S3Client::create_bucket(const std::string& bucket) {
  ST_CHECK(valid_bucket_name(bucket), "\"{}\" is not a valid bucket name", bucket);
  Connection c;
  Request q;
  q.method = "PUT";
  q.where = {bucket, ""};
  Response r = impl_->perform(c, q);
  if (r.curl == CURLE_OK && ((r.status >= 200 && r.status < 300) ||
                             (r.status == 409 && xml_field(r.body, "Code") == "BucketAlreadyOwnedByYou")))
    return;
  impl_->fail(q, r, "s3://" + bucket);
}

}  // namespace shardtrain::io
