#include "runtime/comm/algorithms/shm_step.h"

#include "runtime/core/clock.h"
#include "runtime/core/dtype.h"
#include "runtime/core/error.h"

#include <fmt/format.h>

namespace shardtrain::comm {

ShmStep::ShmStep(ShmWindow& window, int64_t& step, int64_t seq, OpCode op, const BackoffPolicy& policy)
    : w_(window), e_(++step), seq_(seq), op_(op), policy_(policy) {
  w_.announce(ShmWindow::signature(seq_, op_, true));
}

std::byte* ShmStep::half(int rank) const { return w_.data(rank) + size_t(e_ % 2) * size_t(kHalfBytes); }

void ShmStep::wait_free() const { w_.wait_all(&ShmWindow::Control::done, e_ - 2, policy_); }

double ShmStep::arrive(const ShmWindow::Piece& piece) {
  ShmWindow::Control& mine = w_.control(w_.rank());
  mine.pieces[e_ % 2] = 1;
  mine.piece[e_ % 2][0] = piece;
  mine.arrived.value.store(e_, std::memory_order_release);
  w_.wait_all(&ShmWindow::Control::arrived, e_, policy_, seq_, ShmWindow::signature(seq_, op_, true));
  const double now = now_seconds();
  auto describe = [](const ShmWindow::Piece& p) {
    return fmt::format("{} of {} bytes of {} (scale {})", op_name(OpCode(p.op)), p.bytes, dtype_name(DType(p.dtype)),
                       p.scale);
  };
  for (int r = 0; r < w_.size(); ++r) {
    const ShmWindow::Control& theirs = w_.control(r);
    if (theirs.pieces[e_ % 2] == 1 && theirs.piece[e_ % 2][0] == piece) continue;
    const ShmWindow::Piece& other = theirs.piece[e_ % 2][0];
    throw Error(fmt::format("the ranks issued different collectives as #{}: rank {} runs {}, this rank {}", seq_, r,
                            theirs.pieces[e_ % 2] == 1 ? describe(other) : "an all-reduce of several buffers",
                            describe(piece)));
  }
  return now;
}

void ShmStep::done() { w_.control(w_.rank()).done.value.store(e_, std::memory_order_release); }

}  // namespace shardtrain::comm
