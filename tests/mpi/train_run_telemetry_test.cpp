// RunTelemetry under mpirun with 1-4 ranks, driven by hand-made steps whose
// durations are known: every rank writes one record per step, rank 0 merges a
// trace that holds every rank and writes a summary that lists every rank, and
// a rank made slower in its compute is named a straggler with cause compute.
#include "runtime/comm/communicator.h"
#include "tests/mpi/comm_test_util.h"
#include "runtime/core/clock.h"
#include "runtime/telemetry/recorder.h"
#include "runtime/train/run_telemetry.h"
#include "runtime/train/session.h"

#include <gtest/gtest.h>
#include <mpi.h>
#include <nlohmann/json.hpp>

#include <stdlib.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <thread>

using namespace shardtrain;
namespace fs = std::filesystem;

namespace {

constexpr int kSteps = 40;
constexpr int kSlowRank = 1;

// The default configuration, a hang failing the test within a minute.
comm::Communicator& world() { return comm::testing::world("auto"); }

// One directory for all ranks: rank 0 creates it, everyone learns its name.
std::string shared_temp_dir() {
  char name[256] = {};
  if (world().rank() == 0) {
    std::string tmpl = (fs::temp_directory_path() / "run-telemetry-XXXXXX").string();
    ST_CHECK(mkdtemp(tmpl.data()) != nullptr, "mkdtemp failed");
    std::strncpy(name, tmpl.c_str(), sizeof name - 1);
  }
  MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
  return name;
}

nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(std::ifstream(p)); }

int count_lines(const fs::path& p) {
  std::ifstream in(p);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    EXPECT_TRUE(nlohmann::json::accept(line)) << line;
    ++n;
  }
  return n;
}

void sleep_ms(double ms) { std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms)); }

// A step of known shape: 1 ms waiting for data, 3 ms of compute (12 ms on
// the slow rank), then a barrier standing in for the gradient all-reduce:
// the time in it is waiting for the slower ranks.
void run_step(train::RunTelemetry& tel, int64_t step, int rank) {
  tel.begin_step(step, double(step) / kSteps);
  {
    telemetry::Span span("data_wait", "data", step);
    sleep_ms(1);
  }
  tel.data_ready(8);
  train::StepPhases phases;
  const double t0 = now_seconds();
  {
    telemetry::Span span("forward", "compute", step);
    sleep_ms(rank == kSlowRank ? 12 : 3);
  }
  phases.forward_s = now_seconds() - t0;
  parallel::CommStats comm;
  const double t1 = now_seconds();
  world().barrier()->wait();
  comm.blocked_peers_s = now_seconds() - t1;
  tel.end_step(phases, comm, 0.0);
}

TEST(RunTelemetry, RecordsTraceAndSummaryOfEveryRankNameTheSlowOne) {
  const int rank = world().rank(), n = world().size();
  const std::string dir = shared_temp_dir();
  telemetry::Recorder::instance().enable(256, true);
  train::Config config;
  config.telemetry.enabled = true;
  config.telemetry.trace = true;
  // Four ranks share two cores here, so a healthy rank's busy time strays
  // 10-30% from the median; the slow rank is 2-3x it. The default 5% would
  // name the noise too.
  config.telemetry.straggler_threshold = 0.5;
  config.train.global_batch_size = 8 * n;
  nlohmann::json result;
  std::string text;
  {
    train::RunTelemetry tel(config, dir, rank, n, &world(), now_seconds());
    // What NCCL reported (the trainer passes gradient_comm's FabricInfo on rank 0).
    if (rank == 0) tel.set_fabric({{"transport", "IB"}, {"gdr", true}}, "transport IB/RoCE, GPUDirect RDMA in use\n");
    for (int64_t s = 0; s < kSteps; ++s) run_step(tel, s, rank);
    text = tel.finish(result);
  }
  telemetry::Recorder::instance().disable();

  // Every rank: its own records, one per step, and the summary's figures.
  EXPECT_EQ(count_lines(fs::path(dir) / "telemetry" / fmt::format("rank-{:05d}.jsonl", rank)), kSteps);
  EXPECT_EQ(result["timing"]["steps"], kSteps);
  ASSERT_EQ(result["per_rank"].size(), size_t(n));
  EXPECT_GT(result["timing"]["blocked_on_peers_s"].get<double>(), 0.0);

  if (rank == 0) {
    const nlohmann::json summary = read_json(fs::path(dir) / "summary.json");
    ASSERT_EQ(summary["per_rank"].size(), size_t(n));
    EXPECT_EQ(summary["fabric"]["transport"], "IB");
    EXPECT_EQ(result["fabric"]["gdr"], true);
    EXPECT_NE(text.find("\nfabric: transport IB/RoCE, GPUDirect RDMA in use"), std::string::npos) << text;
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(summary["per_rank"][r]["rank"], r);
      EXPECT_EQ(summary["per_rank"][r]["steps"], kSteps);
    }
    const nlohmann::json& stragglers = summary["stragglers"];
    if (n == 1) {
      EXPECT_TRUE(stragglers.empty()) << summary.dump(2);
    } else {
      ASSERT_EQ(stragglers.size(), 1u) << summary.dump(2);
      EXPECT_EQ(stragglers[0]["rank"], kSlowRank);
      EXPECT_EQ(stragglers[0]["cause"], "compute");
      EXPECT_NE(text.find("straggler: rank 1"), std::string::npos) << text;
    }
    // The merged trace is valid JSON and holds every rank's spans.
    const nlohmann::json trace = read_json(fs::path(dir) / "trace.json");
    std::set<int> pids_with_steps;
    for (const auto& e : trace["traceEvents"])
      if (e.value("ph", "") == "X" && e.value("name", "") == "forward") pids_with_steps.insert(e["pid"].get<int>());
    EXPECT_EQ(pids_with_steps.size(), size_t(n));
  }
  world().barrier()->wait();
  if (rank == 0) fs::remove_all(dir);
}

// The figures the summary and the losses gather from every rank come back
// bit for bit: doubles that f32 would round (a third, a byte count past
// 2^24, the smallest normal), and the sums are the rank-ordered sums.
TEST(GatherFromRanks, DoublesArriveExactly) {
  const int r = world().rank(), n = world().size();
  const std::vector<double> mine = {1.0 / 3.0 + r, double((int64_t(1) << 40) + 1 + r),
                                    std::numeric_limits<double>::min() * (r + 1), -0.0};
  const auto all = train::gather_from_ranks(world(), mine);
  ASSERT_EQ(int(all.size()), n);
  for (int k = 0; k < n; ++k) {
    const std::vector<double> want = {1.0 / 3.0 + k, double((int64_t(1) << 40) + 1 + k),
                                      std::numeric_limits<double>::min() * (k + 1), -0.0};
    ASSERT_EQ(all[size_t(k)].size(), want.size());
    EXPECT_EQ(std::memcmp(all[size_t(k)].data(), want.data(), want.size() * sizeof(double)), 0) << "rank " << k;
  }
  const std::vector<double> sums = train::sum_over_ranks(world(), mine);
  double want0 = 0;
  for (int k = 0; k < n; ++k) want0 += 1.0 / 3.0 + k;
  EXPECT_EQ(sums[0], want0);
  EXPECT_TRUE(train::gather_from_ranks(world(), {})[0].empty());
}

}  // namespace
