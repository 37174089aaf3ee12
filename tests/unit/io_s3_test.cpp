// The S3 client's pure parts: SigV4 against AWS's published example, the
// encoding it signs, s3:// URLs, and where the keys come from (the
// environment before the shared files, profiles, a half-given pair refused,
// the secret never in a message). The client against a real server is
// tests/fault/object_store_test.sh.
#include "io/loader_options.h"
#include "io/s3/client.h"
#include "io/s3/credentials.h"
#include "io/s3/sigv4.h"
#include "runtime/core/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace shardtrain::io {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// AWS S3 API reference, "Signature Calculations for the Authorization
// Header", example "GET Object": examplebucket, test.txt, the first 10 bytes.
TEST(SigV4, MatchesAwsGetObjectExample) {
  SigV4Request r{"GET",
                 "/test.txt",
                 "",
                 {{"Host", "examplebucket.s3.amazonaws.com"},
                  {"Range", "bytes=0-9"},
                  {"x-amz-content-sha256", kEmptyPayloadSha256},
                  {"x-amz-date", "20130524T000000Z"}},
                 kEmptyPayloadSha256};
  SigV4Key key{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "us-east-1", "s3"};
  EXPECT_EQ(sigv4_authorization(r, key, "20130524T000000Z"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4, Sha256OfNothingAndOfText) {
  EXPECT_EQ(sha256_hex("", 0), kEmptyPayloadSha256);
  EXPECT_EQ(sha256_hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(SigV4, EncodesAllButUnreserved) {
  EXPECT_EQ(uri_encode("a b/c~d_e-f.g", true), "a%20b/c~d_e-f.g");
  EXPECT_EQ(uri_encode("a b/c", false), "a%20b%2Fc");
  EXPECT_EQ(uri_encode("é+", true), "%C3%A9%2B");
}

TEST(SigV4, RefusesAMalformedDate) {
  EXPECT_THROW(sigv4_authorization({"GET", "/", "", {}, kEmptyPayloadSha256}, {"a", "b", "r"}, "2013-05-24"), Error);
}

TEST(S3Url, ParsesBucketAndKey) {
  EXPECT_TRUE(is_s3_url("s3://b/x"));
  EXPECT_FALSE(is_s3_url("data/train"));
  const S3Location a = parse_s3_url("s3://my-bucket/fm/train");
  EXPECT_EQ(a.bucket, "my-bucket");
  EXPECT_EQ(a.key, "fm/train");
  EXPECT_EQ(parse_s3_url("s3://my-bucket").key, "");
  EXPECT_EQ(s3_child("s3://b1b/fm/train/", "manifest.json"), "s3://b1b/fm/train/manifest.json");
}

TEST(S3Url, RefusesInvalidBuckets) {
  for (const char* bad : {"s3://", "s3:///key", "s3://ab/x", "s3://Upper/x", "s3://under_score/x", "data/x"})
    EXPECT_THROW(parse_s3_url(bad), Error) << bad;
}

TEST(S3Options, ValidateNamesTheKey) {
  S3Options o;
  o.connections = 0;
  try {
    validate(o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("io.s3.connections"));
  }
  o = {};
  o.endpoint = "127.0.0.1:9000";
  EXPECT_THROW(validate(o), Error);
}

TEST(Ini, ValuesBySection) {
  const std::string text = "[default]\nregion = eu-west-1\n# comment\n[profile other]\n region=us-west-2 \n";
  EXPECT_EQ(ini_value(text, "default", "region"), "eu-west-1");
  EXPECT_EQ(ini_value(text, "profile other", "region"), "us-west-2");
  EXPECT_EQ(ini_value(text, "profile none", "region"), "");
}

// Each test sets the variables it needs and clears the others.
class Credentials : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                          "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"})
      unsetenv(v);
    dir_ = std::filesystem::temp_directory_path() / ("st-aws-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    setenv("AWS_SHARED_CREDENTIALS_FILE", (dir_ / "credentials").c_str(), 1);
    setenv("AWS_CONFIG_FILE", (dir_ / "config").c_str(), 1);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const char* name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  std::filesystem::path dir_;
};

TEST_F(Credentials, EnvironmentFirst) {
  write("credentials", "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = filesecret\n");
  setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
  setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000", 1);
  const S3Credentials c = s3_credentials();
  EXPECT_EQ(c.access_key, "ENVKEY");
  EXPECT_EQ(c.secret_key, "envsecret");
  EXPECT_EQ(c.endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(c.source, "the environment");
}

TEST_F(Credentials, SharedFilesByProfile) {
  write("credentials",
        "[default]\naws_access_key_id = A\naws_secret_access_key = a\n[work]\naws_access_key_id = W\n"
        "aws_secret_access_key = w\naws_session_token = t\n");
  write("config", "[default]\nregion = eu-west-1\n[profile work]\nregion = ap-south-1\nendpoint_url = http://h:1\n");
  S3Credentials c = s3_credentials();
  EXPECT_EQ(c.access_key, "A");
  EXPECT_EQ(c.region, "eu-west-1");
  setenv("AWS_PROFILE", "work", 1);
  c = s3_credentials();
  EXPECT_EQ(c.access_key, "W");
  EXPECT_EQ(c.session_token, "t");
  EXPECT_EQ(c.region, "ap-south-1");
  EXPECT_EQ(c.endpoint, "http://h:1");
  EXPECT_THAT(c.source, HasSubstr("credentials [work]"));
}

TEST_F(Credentials, NoneIsAClearError) {
  try {
    s3_credentials();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"));
  }
}

TEST_F(Credentials, HalfAPairIsRefusedWithoutTheSecret) {
  setenv("AWS_SECRET_ACCESS_KEY", "topsecret-value", 1);
  try {
    s3_credentials();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"));
    EXPECT_THAT(e.what(), Not(HasSubstr("topsecret-value")));
  }
  unsetenv("AWS_SECRET_ACCESS_KEY");
  write("credentials", "[default]\naws_secret_access_key = filesecret-value\n");
  try {
    s3_credentials();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("has only one of"));
    EXPECT_THAT(e.what(), Not(HasSubstr("filesecret-value")));
  }
}

TEST_F(Credentials, ClientDescribesWithoutTheSecret) {
  setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "envsecret-value", 1);
  S3Client aws({});
  EXPECT_THAT(aws.describe(), HasSubstr("https://s3.us-east-1.amazonaws.com"));
  setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9/", 1);
  S3Client local({});
  EXPECT_EQ(local.describe(), "http://127.0.0.1:9 (region us-east-1, keys from the environment)");
}

}  // namespace
}  // namespace shardtrain::io
