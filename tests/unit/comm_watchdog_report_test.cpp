// The watchdog's one-line report, from snapshots (no MPI needed): who never
// arrived and what they do instead.
#include "runtime/comm/watchdog/watchdog_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

using namespace shardtrain;
using namespace shardtrain::comm;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

OpRecord op(int64_t seq, OpCode code, int64_t bytes, DType dtype = DType::f32, int root = -1) {
  OpRecord r;
  r.seq = seq;
  r.op = code;
  r.bytes = bytes;
  r.dtype = dtype;
  r.root = root;
  std::strncpy(r.algorithm, "ring", sizeof(r.algorithm) - 1);
  return r;
}

// A rank that issued #0 .. #issued-1, completed #0 .. #completed-1, running
// #running (or -1); every issued op an allreduce of 4096 bytes unless changed.
MonitorSnapshot snapshot(int64_t issued, int64_t completed, int64_t running) {
  MonitorSnapshot s;
  std::strncpy(s.name, "world", sizeof(s.name) - 1);
  s.issued = issued;
  s.completed = completed;
  s.running = running;
  s.running_s = running >= 0 ? 12.5 : 0;
  for (int64_t q = std::max<int64_t>(0, issued - MonitorSnapshot::kHistory); q < issued; ++q)
    s.history[q % MonitorSnapshot::kHistory] = op(q, OpCode::allreduce, 4096);
  if (running >= 0) s.current = s.history[running % MonitorSnapshot::kHistory];
  return s;
}

StuckCollective stuck_at(int64_t seq, int size) {
  return StuckCollective{"world", 0, size, {}, op(seq, OpCode::allreduce, 4096), "not complete after 300.0 s"};
}

TEST(WatchdogReport, NamesTheCollectiveAndEveryMissingRank) {
  std::vector<std::optional<MonitorSnapshot>> peers(5);
  peers[1] = snapshot(58, 57, 57);  // in #57 too: arrived
  peers[2] = snapshot(58, 57, -1);  // set up below: a broadcast as #57
  peers[2]->history[57 % MonitorSnapshot::kHistory] = op(57, OpCode::broadcast, 4096, DType::f32, 0);
  peers[2]->running = 57;
  peers[2]->current = peers[2]->history[57 % MonitorSnapshot::kHistory];
  peers[3] = snapshot(56, 56, -1);  // idle after #55
  // peers[4]: no answer
  const std::string line = describe(stuck_at(57, 5), peers);
  EXPECT_THAT(line, HasSubstr("shardtrain: watchdog: allreduce #57 (4096 bytes, f32, ring) on communicator "
                              "'world' (rank 0 of 5) not complete after 300.0 s"));
  EXPECT_THAT(line, HasSubstr("ranks that never arrived: 2 (issued broadcast #57 (4096 bytes, f32, root 0) "
                              "instead), 3 (last completed #55, nothing in flight), 4 (no answer"));
  EXPECT_THAT(line, HasSubstr("; arrived: 1;"));
  EXPECT_EQ(line.find('\n'), std::string::npos) << "one line";
}

TEST(WatchdogReport, ARankStillBusyWithAnEarlierCollective) {
  std::vector<std::optional<MonitorSnapshot>> peers(2);
  peers[1] = snapshot(58, 55, 55);  // issued #57, but still in #55
  const std::string line = describe(stuck_at(57, 2), peers);
  EXPECT_THAT(line, HasSubstr("never arrived: 1 (in allreduce #55 (4096 bytes, f32) for 12.5 s; #57 queued "
                              "behind it)"));
  peers[1] = snapshot(55, 55, -1);
  EXPECT_THAT(describe(stuck_at(57, 2), peers), HasSubstr("1 (last completed #54, nothing in flight)"));
  peers[1] = snapshot(0, 0, -1);
  EXPECT_THAT(describe(stuck_at(0, 2), peers), HasSubstr("1 (no collective issued yet)"));
  peers[1] = snapshot(56, 55, 55);  // has not issued #57, busy in #55
  EXPECT_THAT(describe(stuck_at(57, 2), peers), HasSubstr("1 (in allreduce #55"));
}

TEST(WatchdogReport, EveryRankArrivedPointsAtTheTransport) {
  std::vector<std::optional<MonitorSnapshot>> peers(3);
  peers[1] = snapshot(10, 9, 9);
  peers[2] = snapshot(11, 10, 10);  // finished #9 already
  const std::string line = describe(stuck_at(9, 3), peers);
  EXPECT_THAT(line, HasSubstr("every rank arrived"));
  EXPECT_THAT(line, HasSubstr("arrived: 1, 2"));
  EXPECT_THAT(line, Not(HasSubstr("never arrived")));
}

TEST(WatchdogReport, SubCommunicatorsShowWorldRanks) {
  StuckCollective s = stuck_at(3, 2);
  s.comm = "cross-node";
  s.world_ranks = {1, 3};
  std::vector<std::optional<MonitorSnapshot>> peers(2);
  const std::string line = describe(s, peers);
  EXPECT_THAT(line, HasSubstr("communicator 'cross-node' (rank 0 (world rank 1) of 2)"));
  EXPECT_THAT(line, HasSubstr("never arrived: 1 (world rank 3) (no answer"));
}

}  // namespace
