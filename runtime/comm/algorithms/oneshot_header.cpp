#include "runtime/comm/algorithms/oneshot_header.h"

#include "runtime/core/error.h"

namespace shardtrain::comm {
namespace {

const char* verb(OneshotOp op) {
  switch (op) {
    case OneshotOp::allreduce: return "all-reduces";
    case OneshotOp::reduce_scatter: return "reduce-scatters";
    case OneshotOp::allgather: return "all-gathers";
  }
  return "runs an unknown one-shot collective of";
}

}  // namespace

OneshotHeader oneshot_header(OneshotOp op, int64_t seq, int64_t bytes, DType dtype, float scale) {
  OneshotHeader h;
  h.seq = seq;
  h.bytes = bytes;
  h.scale = scale;
  h.dtype = uint8_t(dtype);
  h.op = op;
  return h;
}

void check_oneshot_header(const OneshotHeader& mine, const OneshotHeader& theirs, int peer) {
  if (theirs.magic == mine.magic && theirs.seq == mine.seq && theirs.op == mine.op && theirs.bytes == mine.bytes &&
      theirs.dtype == mine.dtype && theirs.scale == mine.scale)
    return;
  const bool known = theirs.magic == mine.magic && uint8_t(theirs.op) <= uint8_t(OneshotOp::allgather);
  throw Error(fmt::format(
      "the ranks issued different collectives as #{}: rank {} {} {} bytes of {} (scale {}), this rank {} {} bytes "
      "of {} (scale {})",
      mine.seq, peer, known ? verb(theirs.op) : "sent something else than", theirs.bytes,
      known ? dtype_name(DType(theirs.dtype)) : "?", theirs.scale, verb(mine.op), mine.bytes,
      dtype_name(DType(mine.dtype)), mine.scale));
}

}  // namespace shardtrain::comm
