#include "runtime/comm/communicator.h"

#include "runtime/core/error.h"

namespace shardtrain::comm {

const char* comm_kind_name(CommKind kind) {
  switch (kind) {
    case CommKind::world: return "world";
    case CommKind::node: return "node";
    case CommKind::cross: return "cross-node";
    case CommKind::group: return "group";
    case CommKind::cross_group: return "cross-group";
    case CommKind::self: break;
  }
  return "self";
}

int group_color(int rank, int size, int k, GroupSide side) {
  ST_CHECK(k >= 1 && k <= size && size % k == 0,
           "groups of {} consecutive ranks do not split a communicator of {} ranks (the size must divide it)", k, size);
  return side == GroupSide::within ? rank / k : rank % k;
}

}  // namespace shardtrain::comm
