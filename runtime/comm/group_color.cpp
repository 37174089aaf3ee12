#include "runtime/comm/communicator.h"

#include "runtime/core/error.h"

namespace shardtrain::comm {

int group_color(int rank, int size, int k, GroupSide side) {
  ST_CHECK(k >= 1 && k <= size && size % k == 0,
           "groups of {} consecutive ranks do not split a communicator of {} ranks (the size must divide it)", k, size);
  return side == GroupSide::within ? rank / k : rank % k;
}

}  // namespace shardtrain::comm
