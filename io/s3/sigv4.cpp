// SigV4 signing with OpenSSL's SHA-256 and HMAC (io/s3/sigv4.h).
#include "io/s3/sigv4.h"

#include "runtime/core/error.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cctype>

namespace shardtrain::io {
namespace {

std::string hex_bytes(const unsigned char* bytes, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
  return out;
}

std::string hmac_sha256(const std::string& key, const std::string& message) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  const unsigned char* done = HMAC(EVP_sha256(), key.data(), int(key.size()),
                                   reinterpret_cast<const unsigned char*>(message.data()), message.size(), out, &n);
  ST_CHECK(done != nullptr, "HMAC-SHA256 failed (OpenSSL)");
  return std::string(reinterpret_cast<const char*>(out), n);
}

std::string lower_case(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

std::string trim_header_value(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

}  // namespace

std::string sha256_hex(const void* data, size_t n) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(static_cast<const unsigned char*>(data), n, digest);
  return hex_bytes(digest, sizeof digest);
}

std::string uri_encode(const std::string& text, bool keep_slash) {
  static const char* digits = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += char(c);
    } else {
      out += '%';
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  return out;
}

std::string sigv4_authorization(const SigV4Request& request, const SigV4Key& key, const std::string& amz_date) {
  ST_CHECK(amz_date.size() == 16 && amz_date[8] == 'T' && amz_date[15] == 'Z',
           "SigV4: \"{}\" is not a YYYYMMDDTHHMMSSZ time", amz_date);
  std::vector<std::pair<std::string, std::string>> headers;
  headers.reserve(request.headers.size());
  for (const auto& [name, value] : request.headers) headers.emplace_back(lower_case(name), trim_header_value(value));
  std::sort(headers.begin(), headers.end());
  std::string canonical_headers, signed_headers;
  for (const auto& [name, value] : headers) {
    canonical_headers.append(name).append(":").append(value).append("\n");
    signed_headers.append(signed_headers.empty() ? "" : ";").append(name);
  }
  const std::string canonical_request = request.method + "\n" + request.path + "\n" + request.query + "\n" +
                                        canonical_headers + "\n" + signed_headers + "\n" + request.payload_sha256;
  const std::string date = amz_date.substr(0, 8);
  const std::string scope = date + "/" + key.region + "/" + key.service + "/aws4_request";
  const std::string string_to_sign = "AWS4-HMAC-SHA256\n" + amz_date + "\n" + scope + "\n" +
                                     sha256_hex(canonical_request.data(), canonical_request.size());
  const std::string k_date = hmac_sha256("AWS4" + key.secret_key, date);
  const std::string k_region = hmac_sha256(k_date, key.region);
  const std::string k_service = hmac_sha256(k_region, key.service);
  const std::string k_signing = hmac_sha256(k_service, "aws4_request");
  const std::string signature = hmac_sha256(k_signing, string_to_sign);
  return "AWS4-HMAC-SHA256 Credential=" + key.access_key + "/" + scope + ",SignedHeaders=" + signed_headers +
         ",Signature=" + hex_bytes(reinterpret_cast<const unsigned char*>(signature.data()), signature.size());
}

}  // namespace shardtrain::io
