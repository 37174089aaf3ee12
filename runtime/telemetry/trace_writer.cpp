// One rank's trace file, streamed: each drained batch of spans is appended as
// it comes, so the file stays small in memory and a run that stops early
// still leaves its events. Events are formatted by hand into a buffer handed
// to stdio every 64 KiB, rather than through nlohmann::json: this runs on the
// training thread between steps, and a json object per span would cost
// microseconds.
#include "runtime/telemetry/trace.h"

#include "runtime/core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

namespace shardtrain::telemetry {
namespace {

void append_int(fmt::memory_buffer& out, int64_t v) {
  const fmt::format_int f(v);
  out.append(f.data(), f.data() + f.size());
}

// A JSON string literal. Span names are literals from our own code, but a
// quote or a control character must still not break the file.
void append_string(fmt::memory_buffer& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      fmt::format_to(fmt::appender(out), "\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
}

// Microseconds with three decimals from a time in seconds, by integer
// arithmetic on nanoseconds (the steady clock's resolution): exact, and
// several times faster than formatting a double with a precision.
void append_us(fmt::memory_buffer& out, double seconds) {
  int64_t ns = std::llround(seconds * 1e9);
  if (ns < 0) {
    out.push_back('-');
    ns = -ns;
  }
  append_int(out, ns / 1000);
  const int frac = static_cast<int>(ns % 1000);
  const char digits[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                          static_cast<char>('0' + frac % 10)};
  out.append(digits, digits + 4);
}

void append_metadata(fmt::memory_buffer& out, const char* what, int pid, int tid, const char* arg,
                     std::string_view value) {
  fmt::format_to(fmt::appender(out), R"({{"name":"{}","ph":"M","pid":{},"tid":{},"args":{{"{}":)", what, pid, tid, arg);
  append_string(out, value);
  out.append(std::string_view("}}"));
}

}  // namespace

TraceWriter::TraceWriter(std::string path, int rank, double t0_s) : path_(std::move(path)), rank_(rank), t0_(t0_s) {
  file_ = OptionalFile(path_, "w");
  fmt::memory_buffer out;
  out.append(std::string_view("[\n"));
  append_metadata(out, "process_name", rank_, 0, "name", fmt::format("rank {}", rank_));
  out.append(std::string_view(",\n"));
  // Perfetto orders processes by this index: rank 0 on top, then 1, 2, ...
  fmt::format_to(fmt::appender(out),
                 R"({{"name":"process_sort_index","ph":"M","pid":{},"tid":0,"args":{{"sort_index":{}}}}})", rank_,
                 rank_);
  file_.write(std::string_view(out.data(), out.size()));
  first_ = false;
}

TraceWriter::~TraceWriter() {
  try {
    close({});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardtrain: %s\n", e.what());
  }
}

void TraceWriter::write(const std::vector<SpanEvent>& spans) {
  if (!file_.ok() || spans.empty()) return;
  constexpr size_t kFlushBytes = 64 << 10;
  fmt::memory_buffer out;
  out.reserve(std::min(spans.size() * 192, kFlushBytes + 1024));  // a span is ~150 bytes
  for (const SpanEvent& e : spans) {
    if (!first_) out.append(std::string_view(",\n"));
    first_ = false;
    out.append(std::string_view(R"({"name":)"));
    append_string(out, e.name != nullptr ? e.name : "");
    out.append(std::string_view(R"(,"cat":)"));
    append_string(out, e.category != nullptr ? e.category : "");
    out.append(std::string_view(R"(,"ph":"X","ts":)"));
    append_us(out, e.start_s - t0_);
    out.append(std::string_view(R"(,"dur":)"));
    append_us(out, e.end_s - e.start_s);
    out.append(std::string_view(R"(,"pid":)"));
    append_int(out, rank_);
    out.append(std::string_view(R"(,"tid":)"));
    append_int(out, e.tid);
    if (e.bytes >= 0 || e.seq >= 0 || e.detail != nullptr) {
      out.append(std::string_view(R"(,"args":{)"));
      bool first_arg = true;
      auto sep = [&] {
        if (!first_arg) out.push_back(',');
        first_arg = false;
      };
      if (e.bytes >= 0) {
        sep();
        out.append(std::string_view(R"("bytes":)"));
        append_int(out, e.bytes);
      }
      if (e.seq >= 0) {
        sep();
        out.append(std::string_view(R"("seq":)"));
        append_int(out, e.seq);
      }
      if (e.detail != nullptr) {
        sep();
        // docs/telemetry.md names a collective's detail "algorithm".
        const bool comm = e.category != nullptr && std::strcmp(e.category, "comm") == 0;
        out.append(std::string_view(comm ? R"("algorithm":)" : R"("detail":)"));
        append_string(out, e.detail);
      }
      out.push_back('}');
    }
    out.push_back('}');
    if (out.size() >= kFlushBytes) {
      if (!file_.write(std::string_view(out.data(), out.size()))) return;
      out.clear();
    }
  }
  // To the kernel now (OptionalFile::write flushes): a job that fails ends
  // in MPI_Abort or _exit, and would leave a file cut inside an event. Ended
  // after a whole event, it is a valid trace (the Trace Event Format allows
  // the closing bracket to be missing).
  file_.write(std::string_view(out.data(), out.size()));
}

void TraceWriter::close(const std::vector<std::pair<int, std::string>>& threads) {
  if (!file_.ok()) return;
  fmt::memory_buffer out;
  for (const auto& [tid, name] : threads) {
    out.append(std::string_view(",\n"));
    append_metadata(out, "thread_name", rank_, tid, "name", name);
  }
  out.append(std::string_view("\n]\n"));
  file_.write(std::string_view(out.data(), out.size()));
  file_.close();
}

}  // namespace shardtrain::telemetry
