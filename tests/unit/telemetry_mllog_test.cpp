// MLPerf log lines: the prefix, JSON after it, the keys in MLPerf's order,
// the call site relative to the repository, one flushed line per event.
#include "runtime/telemetry/mllog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace shardtrain::telemetry;
using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace {

constexpr std::string_view kPrefix = ":::MLLOG ";

nlohmann::json parse_line(const std::string& line) {
  EXPECT_THAT(line, StartsWith(std::string(kPrefix)));
  return nlohmann::json::parse(line.substr(kPrefix.size()));
}

TEST(MlLog, FormatIsThePrefixAndJsonWithKeysInMlperfOrder) {
  const CallSite where = CallSite::here();
  const std::string line =
      MlLog::format("POINT_IN_TIME", "eval_accuracy", 0.8912, {{"epoch_num", 3}}, 1796000000123.4, where);
  const auto j = parse_line(line);
  EXPECT_EQ(j["namespace"], "");
  EXPECT_EQ(j["time_ms"], 1796000000123);
  EXPECT_TRUE(j["time_ms"].is_number_integer());
  EXPECT_EQ(j["event_type"], "POINT_IN_TIME");
  EXPECT_EQ(j["key"], "eval_accuracy");
  EXPECT_DOUBLE_EQ(j["value"].get<double>(), 0.8912);
  EXPECT_EQ(j["metadata"]["file"], "tests/unit/telemetry_mllog_test.cpp");  // relative to the repo
  EXPECT_EQ(j["metadata"]["lineno"], where.line);
  EXPECT_EQ(j["metadata"]["epoch_num"], 3);

  // Order as the MLPerf logger writes them, with its separators.
  size_t at = 0;
  for (const char* key : {"\"namespace\": ", "\"time_ms\": ", "\"event_type\": ", "\"key\": ", "\"value\": ",
                          "\"metadata\": {\"file\": ", "\"lineno\": ", "\"epoch_num\": "}) {
    const size_t found = line.find(key, at);
    ASSERT_NE(found, std::string::npos) << key << " missing or out of order in " << line;
    at = found;
  }
}

TEST(MlLog, NullValueAndNestedValues) {
  const auto j = parse_line(
      MlLog::format("INTERVAL_START", "run_start", nullptr, nlohmann::json::object(), 1.0, CallSite::here()));
  EXPECT_TRUE(j.contains("value"));
  EXPECT_TRUE(j["value"].is_null());
  const std::string line =
      MlLog::format("POINT_IN_TIME", "x", {{"a", {1, 2}}}, {{"status", "success"}}, 1.0, CallSite::here());
  EXPECT_THAT(line, HasSubstr("\"value\": {\"a\": [1, 2]}"));
  EXPECT_EQ(parse_line(line)["metadata"]["status"], "success");
}

TEST(MlLog, WritesOneFlushedLinePerEvent) {
  const auto path = std::filesystem::temp_directory_path() / ("shardtrain-mllog-" + std::to_string(getpid()) + ".txt");
  {
    MlLog log(path.string());
    log.event("global_batch_size", 128);
    log.start("epoch_start", nullptr, {{"epoch_num", 0}});
    // Read while the log is still open: each line is on disk already.
    std::ifstream in(path);
    std::string a, b;
    std::getline(in, a);
    std::getline(in, b);
    EXPECT_EQ(parse_line(a)["key"], "global_batch_size");
    EXPECT_EQ(parse_line(a)["value"], 128);
    EXPECT_EQ(parse_line(b)["event_type"], "INTERVAL_START");
    EXPECT_EQ(parse_line(b)["metadata"]["epoch_num"], 0);
    log.end("epoch_stop", nullptr, {{"epoch_num", 0}});
  }
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);
  EXPECT_THAT(text, HasSubstr("\"event_type\": \"INTERVAL_END\""));
  std::filesystem::remove(path);

  MlLog silent("");  // ranks other than 0
  silent.event("seed", 1);
}

}  // namespace
