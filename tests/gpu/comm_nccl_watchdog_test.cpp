// The NCCL communicator's failure path on this machine's GPU: a collective
// that never completes is aborted (ncclCommAbort) and the job ends with the
// MPI backend's one-line watchdog report; [debug] slow_comm_ms delays NCCL
// collectives on the GPU. One GPU cannot host a real peer that never
// arrives (NCCL refuses two ranks on one device), so the stuck collective is
// a sleep kernel queued before it on the comm stream (CommOptions::
// debug_delay_s, kernels/cuda/stream_sleep.h) far beyond comm.timeout_s.
//
// Each case runs this program again as a child (a fresh MPI singleton, so
// the job it ends is its own): ST_NCCL_PROBE=stall or slow selects what the
// child does instead of the tests. The parent checks how the child ended.
//   GPUCHECK kernel=nccl_watchdog_abort ... relerr=<seconds until the child ended> limit=30
//   GPUCHECK kernel=nccl_debug_delay ... relerr=<(took - delay) / delay> limit=4
#include "tests/gpu/gpu_test_util.h"

#include "runtime/comm/gpu_backend.h"

#if defined(SHARDTRAIN_HAVE_COMM_GPU)
#include "runtime/comm/gpu/nccl_communicator.h"
#include "runtime/comm/gpu/nccl_library.h"
#endif

#include <gtest/gtest.h>
#include <mpi.h>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

using namespace shardtrain;
using namespace shardtrain::gpu_test;

namespace {

constexpr double kTimeout_s = 2.0;     // comm.timeout_s of the stalled child
constexpr double kStall_s = 60.0;      // its sleep kernel: far past the timeout
constexpr double kSlowDelay_s = 0.25;  // the slow child's delay per collective

#if defined(SHARDTRAIN_HAVE_COMM_GPU)

// The child: one all-reduce of 1024 floats on cuda:0 through a world of one
// rank. "stall" never returns (the watchdog ends the process); "slow" prints
// the collective's duration and exits 0.
int run_probe(const std::string& mode) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  use_cuda_device(0);
  comm::CommOptions options;
  options.timeout_s = mode == "stall" ? kTimeout_s : 60.0;
  options.debug_delay_s = mode == "stall" ? kStall_s : kSlowDelay_s;
  auto world = comm::NcclCommunicator::make_world(MPI_COMM_WORLD, 0, options);
  Tensor t = to_device(random_host({1024}, 5), gpu());
  comm::WorkPtr w = world->allreduce(t, comm::ReduceOp::sum);
  w->wait();
  std::printf("probe %s: allreduce took %.3f s\n", mode.c_str(), w->finished_at() - w->started_at());
  std::fflush(stdout);
  world.reset();
  MPI_Finalize();
  return 0;
}

struct ChildResult {
  int status = 0;       // waitpid's
  bool killed = false;  // still running after the limit
  double seconds = 0;
  std::string output;  // stdout and stderr
};

// This program again with ST_NCCL_PROBE=mode, without the launcher's
// variables (the child is an MPI singleton of its own), output to a file.
ChildResult run_child(const std::string& mode, double limit_s) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string v = *e;
    if (v.rfind("OMPI_", 0) == 0 || v.rfind("PMIX_", 0) == 0 || v.rfind("ST_NCCL_PROBE=", 0) == 0) continue;
    env_strings.push_back(v);
  }
  env_strings.push_back("ST_NCCL_PROBE=" + mode);
  std::vector<char*> envp;
  for (std::string& v : env_strings) envp.push_back(v.data());
  envp.push_back(nullptr);

  char out_path[] = "/tmp/st-nccl-probe-XXXXXX";
  const int fd = mkstemp(out_path);
  EXPECT_GE(fd, 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd, 1);
  posix_spawn_file_actions_adddup2(&actions, fd, 2);
  char self[] = "/proc/self/exe";
  char* argv[] = {self, nullptr};
  pid_t pid = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fd);
  ChildResult r;
  EXPECT_EQ(rc, 0) << "posix_spawn: " << std::strerror(rc);
  if (rc != 0) return r;
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  for (;;) {
    const pid_t done = waitpid(pid, &r.status, WNOHANG);
    if (done == pid) break;
    if (elapsed() > limit_s) {
      r.killed = true;
      kill(pid, SIGKILL);
      waitpid(pid, &r.status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  r.seconds = elapsed();
  std::ifstream in(out_path);
  std::stringstream ss;
  ss << in.rdbuf();
  r.output = ss.str();
  std::remove(out_path);
  return r;
}

// Skips without a GPU or NCCL. Unlike ST_REQUIRE_GPU, it creates no CUDA
// context in this process: on a GPU in exclusive-process mode the child
// could not create its own.
#define ST_REQUIRE_NCCL()                                                                              \
  do {                                                                                                 \
    std::string st_why_;                                                                               \
    if (cuda_devices(&st_why_).empty()) GTEST_SKIP() << "skipped: no CUDA device (" << st_why_ << ")"; \
    if (!comm::nccl_available(&st_why_)) GTEST_SKIP() << st_why_;                                      \
  } while (0)

TEST(NcclWatchdog, StuckCollectiveIsAbortedWithTheWatchdogLine) {
  ST_REQUIRE_NCCL();
  const ChildResult r = run_child("stall", 40.0);
  // Within the timeout, ncclCommAbort's bounded wait (5 s) and start-up.
  const bool exited_failing = !r.killed && !(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
  report("nccl_watchdog_abort", "f32", r.seconds, 30.0);
  EXPECT_TRUE(exited_failing) << "the stalled child was not ended by the watchdog (killed after " << r.seconds
                              << " s: " << r.killed << ")\n"
                              << r.output;
  EXPECT_LT(r.seconds, 30.0);
  const std::regex line(
      "shardtrain: watchdog: allreduce #0 \\(4096 bytes, f32, nccl\\) on communicator 'world' "
      "\\(rank 0 of 1\\) not complete after 2\\.[0-9] s");
  EXPECT_TRUE(std::regex_search(r.output, line)) << r.output;
  EXPECT_EQ(r.output.find("probe stall: allreduce took"), std::string::npos) << r.output;
}

TEST(NcclWatchdog, DebugDelayHoldsEachCollective) {
  ST_REQUIRE_NCCL();
  const ChildResult r = run_child("slow", 60.0);
  ASSERT_FALSE(r.killed) << r.output;
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.output;
  std::smatch m;
  const std::regex took("probe slow: allreduce took ([0-9.]+) s");
  ASSERT_TRUE(std::regex_search(r.output, m, took)) << r.output;
  const double s = std::stod(m[1].str());
  // The row's "relerr": the collective's time beyond the delay, relative to it.
  const double excess = s >= kSlowDelay_s * 0.95 ? std::fabs(s - kSlowDelay_s) / kSlowDelay_s : INFINITY;
  report("nccl_debug_delay", "f32", excess, 4.0);
  EXPECT_GE(s, kSlowDelay_s * 0.95);
}

#else

TEST(NcclWatchdog, NotBuilt) { GTEST_SKIP() << "skipped: no CUDA device (built without the NCCL backend)"; }

#endif

}  // namespace

int main(int argc, char** argv) {
#if defined(SHARDTRAIN_HAVE_COMM_GPU)
  if (const char* mode = std::getenv("ST_NCCL_PROBE")) return run_probe(mode);
#endif
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
