// Rank 0 merges every rank's trace file into trace.json at the end of the
// run. Streaming: nlohmann's parser calls back after each top-level array
// element, which is written out and then discarded, so a large trace never
// sits in memory whole.
#include "runtime/core/error.h"
#include "runtime/core/output_file.h"
#include "runtime/telemetry/trace.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace shardtrain::telemetry {
namespace {

using nlohmann::json;

// Appends the events of one rank's file to `out`; returns how many.
int64_t copy_events(const std::string& file, std::FILE* out, bool& first) {
  std::ifstream in(file, std::ios::binary);
  ST_CHECK(in.good(), "trace: cannot read '{}': {}", file, std::strerror(errno));
  int64_t count = 0;
  bool top_is_array = false;
  std::string line;
  json::parser_callback_t element_done = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 0 && event == json::parse_event_t::array_start) top_is_array = true;
    if (depth != 1 || (event != json::parse_event_t::object_end && event != json::parse_event_t::value)) return true;
    // depth 1: a complete element of the top-level array (or a member of a top-level object).
    if (!top_is_array || !parsed.is_object())
      throw Error(fmt::format("trace: '{}' is not a trace: expected an array of event objects", file));
    line = parsed.dump(-1, ' ', false, json::error_handler_t::replace);
    if (!first) std::fputs(",\n", out);
    first = false;
    std::fwrite(line.data(), 1, line.size(), out);
    ++count;
    return false;  // discard: keeps memory to one event
  };
  json rest;  // an empty array: every element was discarded
  try {
    rest = json::parse(in, element_done);
  } catch (const json::exception& e) {
    throw Error(fmt::format("trace: '{}' is not valid JSON (a rank that did not finish?): {}", file, e.what()));
  }
  ST_CHECK(rest.is_array(), "trace: '{}' is not a trace: expected an array of event objects", file);
  return count;
}

}  // namespace

int64_t merge_traces(const std::vector<std::string>& rank_files, const std::string& out_path) {
  const std::string tmp = out_path + ".tmp";
  std::FILE* out = std::fopen(tmp.c_str(), "w");
  ST_CHECK(out != nullptr, "trace: cannot create '{}': {}", tmp, errno_text(errno));
  int64_t count = 0;
  try {
    std::fputs("{\"traceEvents\": [\n", out);
    bool first = true;
    for (const auto& file : rank_files) count += copy_events(file, out, first);
    std::fputs("\n],\n\"displayTimeUnit\": \"ms\"}\n", out);
    const bool failed = std::ferror(out) != 0;
    const bool close_failed = std::fclose(out) != 0;
    out = nullptr;
    ST_CHECK(!failed && !close_failed, "trace: writing '{}' failed: {}", tmp, errno_text(errno));
    std::error_code ec;
    std::filesystem::rename(tmp, out_path, ec);
    ST_CHECK(!ec, "trace: cannot move '{}' to '{}': {}", tmp, out_path, ec.message());
  } catch (...) {
    if (out != nullptr) std::fclose(out);
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw;
  }
  return count;
}

}  // namespace shardtrain::telemetry
