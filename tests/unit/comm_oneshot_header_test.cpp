// The one-shot header check: what a rank that receives another collective's
// message under the same sequence number reports.
#include "runtime/comm/algorithms/oneshot_header.h"

#include "runtime/core/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace shardtrain::comm {
namespace {

using ::testing::HasSubstr;

std::string mismatch(const OneshotHeader& mine, const OneshotHeader& theirs) {
  try {
    check_oneshot_header(mine, theirs, 3);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(OneshotHeader, TheSameCollectivePasses) {
  const OneshotHeader h = oneshot_header(OneshotOp::reduce_scatter, 7, 4096, DType::bf16, 0.25f);
  EXPECT_NO_THROW(check_oneshot_header(h, h, 1));
}

TEST(OneshotHeader, AnotherCollectiveIsNamedBesideThisOne) {
  const OneshotHeader mine = oneshot_header(OneshotOp::reduce_scatter, 7, 4096, DType::f32, 1.0f);
  const std::string what = mismatch(mine, oneshot_header(OneshotOp::allgather, 7, 4096, DType::f32, 1.0f));
  EXPECT_THAT(what, HasSubstr("the ranks issued different collectives as #7"));
  EXPECT_THAT(what, HasSubstr("rank 3 all-gathers 4096 bytes of f32"));
  EXPECT_THAT(what, HasSubstr("this rank reduce-scatters 4096 bytes of f32"));
}

TEST(OneshotHeader, EveryFieldCounts) {
  const OneshotHeader mine = oneshot_header(OneshotOp::allreduce, 7, 4096, DType::f32, 0.5f);
  EXPECT_NE(mismatch(mine, oneshot_header(OneshotOp::allreduce, 8, 4096, DType::f32, 0.5f)), "");
  EXPECT_NE(mismatch(mine, oneshot_header(OneshotOp::allreduce, 7, 2048, DType::f32, 0.5f)), "");
  EXPECT_NE(mismatch(mine, oneshot_header(OneshotOp::allreduce, 7, 4096, DType::bf16, 0.5f)), "");
  EXPECT_NE(mismatch(mine, oneshot_header(OneshotOp::allreduce, 7, 4096, DType::f32, 1.0f)), "");
}

TEST(OneshotHeader, BytesThatAreNoHeaderAreSaidToBeSomethingElse) {
  const OneshotHeader mine = oneshot_header(OneshotOp::allgather, 7, 4096, DType::f32, 1.0f);
  OneshotHeader garbage = mine;
  garbage.magic = 0;
  EXPECT_THAT(mismatch(mine, garbage), HasSubstr("rank 3 sent something else than 4096 bytes of ?"));
}

}  // namespace
}  // namespace shardtrain::comm
