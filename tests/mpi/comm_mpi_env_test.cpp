// What MpiEnv sets up for the whole process, on every rank.
#include "runtime/comm/transport/mpi_env.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

namespace shardtrain::comm {
namespace {

// A peer that dies must not take this rank with it: Open MPI's TCP
// transport writes without MSG_NOSIGNAL, so with SIGPIPE at its default a
// send to a killed rank on another node ends the sender by signal 13 and
// mpirun may name it instead of the rank that died. The write below is
// what that transport's write to a closed connection does; without the
// disposition MpiEnv sets, SIGPIPE would end this test process here.
TEST(MpiEnv, AWriteToAClosedConnectionFailsInsteadOfEndingTheRank) {
  struct sigaction current {};
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &current), 0);
  EXPECT_EQ(current.sa_handler, SIG_IGN);
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  close(fds[1]);
  const char byte = 1;
  errno = 0;
  EXPECT_EQ(write(fds[0], &byte, 1), -1);
  EXPECT_EQ(errno, EPIPE);
  close(fds[0]);
}

}  // namespace
}  // namespace shardtrain::comm
