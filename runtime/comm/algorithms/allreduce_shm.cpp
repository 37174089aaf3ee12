#include "runtime/comm/algorithms/allreduce_shm.h"

#include "runtime/comm/algorithms/reduction.h"
#include "runtime/core/clock.h"
#include "runtime/core/error.h"

#include <algorithm>
#include <cstring>

namespace shardtrain::comm {
namespace {

int64_t bytes_of(const AllreduceShm::Op& op) { return op.numel * int64_t(dtype_size(op.dtype)); }

}  // namespace

AllreduceShm::AllreduceShm(ShmWindow& window, int64_t& step, std::span<Op> ops, const BackoffPolicy& policy)
    : w_(window), step_(step), ops_(ops), policy_(policy), sources_(size_t(window.size())) {}

void AllreduceShm::run(const std::function<void(size_t, size_t)>& step_started) {
  size_t next = 0;     // the first op not done yet
  int64_t offset = 0;  // bytes of it done (a large one goes in chunks)
  while (next < ops_.size()) {
    const int64_t e = ++step_;
    std::byte* half = w_.data(w_.rank()) + size_t(e % 2) * size_t(kHalfBytes);
    // 1. Copy in, once every rank is done reading this half (step e-2).
    plan(next, offset);
    if (step_started) step_started(next, placed_[planned_ - 1].op + 1);
    wait_all(&ShmWindow::Control::done, e - 2, false);
    copy_in(half);
    // 2. Arrive: the step's descriptors, then the arrival.
    ShmWindow::Control& mine = w_.control(w_.rank());
    mine.pieces[e % 2] = int32_t(planned_);
    for (size_t i = 0; i < planned_; ++i) {
      const Placed& p = placed_[i];
      const Op& op = ops_[p.op];
      mine.piece[e % 2][i] = {
          op.seq, bytes_of(op), p.offset, p.length, op.scale, uint8_t(op.dtype), uint8_t(OpCode::allreduce), {}};
    }
    mine.arrived.value.store(e, std::memory_order_release);
    const size_t pieces = agree(e);
    if (step_bytes(pieces) <= kReduceWholeBytes) {
      // 3'. A small step: every rank adds up all of it (one wait instead of two).
      reduce_whole(e, pieces);
    } else {
      // 3. Reduce this rank's slice; 4. gather the others'.
      reduce_slice(e, pieces);
      gather(e, pieces);
    }
    // The next step starts after the pieces every rank did.
    const Placed& last = placed_[pieces - 1];
    offset = last.offset + last.length;
    next = last.op;
    if (offset == bytes_of(ops_[next])) {
      ++next;
      offset = 0;
    }
  }
}

void AllreduceShm::plan(size_t next, int64_t offset) {
  const Op& first = ops_[next];
  w_.announce(ShmWindow::signature(first.seq, OpCode::allreduce, true));
  if (offset > 0 || bytes_of(first) > kHalfBytes) {  // a chunk of a large buffer
    placed_[0] = {next, offset, std::min(kHalfBytes, bytes_of(first) - offset), 0};
    planned_ = 1;
    return;
  }
  // Whole small all-reduces of the same dtype and scale, packed.
  int64_t at = 0;
  planned_ = 0;
  for (size_t i = next; i < ops_.size() && planned_ < placed_.size(); ++i) {
    const Op& op = ops_[i];
    const int64_t bytes = bytes_of(op);
    if (op.dtype != first.dtype || op.scale != first.scale || at + bytes > kHalfBytes) break;
    placed_[planned_++] = {i, 0, bytes, at};
    at += bytes;
  }
}

void AllreduceShm::copy_in(std::byte* half) const {
  for (size_t i = 0; i < planned_; ++i) {
    const Placed& p = placed_[i];
    if (p.length > 0)
      std::memcpy(half + p.at, static_cast<const std::byte*>(ops_[p.op].buf) + p.offset, size_t(p.length));
  }
}

size_t AllreduceShm::agree(int64_t e) {
  wait_all(&ShmWindow::Control::arrived, e, true);
  const double now = now_seconds();
  for (size_t i = 0; i < planned_; ++i)
    if (placed_[i].offset == 0) ops_[placed_[i].op].arrived_at = now;
  // The pieces every rank packed, each the same everywhere.
  const ShmWindow::Control& mine = w_.control(w_.rank());
  size_t pieces = planned_;
  for (int r = 0; r < w_.size(); ++r) pieces = std::min(pieces, size_t(w_.control(r).pieces[e % 2]));
  for (int r = 0; r < w_.size(); ++r) {
    const ShmWindow::Control& theirs = w_.control(r);
    for (size_t i = 0; i < pieces; ++i) {
      const ShmWindow::Piece& a = mine.piece[e % 2][i];
      const ShmWindow::Piece& b = theirs.piece[e % 2][i];
      if (a == b) continue;
      throw Error(fmt::format(
          "the ranks issued different collectives as #{}: rank {} all-reduces {} bytes of {} "
          "(scale {}), this rank {} bytes of {} (scale {})",
          a.seq, r, b.bytes, dtype_name(DType(b.dtype)), b.scale, a.bytes, dtype_name(DType(a.dtype)), a.scale));
    }
  }
  return pieces;
}

std::pair<int64_t, int64_t> AllreduceShm::slice(int rank, int64_t bytes) const {
  // Whole cache lines per slice (64 is a multiple of every element size).
  constexpr int64_t kLine = 64;
  const int64_t lines = (bytes + kLine - 1) / kLine, p = w_.size();
  const int64_t per = lines / p, extra = lines % p;
  const int64_t lo = (rank * per + std::min<int64_t>(rank, extra)) * kLine;
  const int64_t hi = lo + (per + (rank < extra ? 1 : 0)) * kLine;
  return {std::min(lo, bytes), std::min(hi, bytes)};
}

int64_t AllreduceShm::step_bytes(size_t pieces) const {
  const Placed& last = placed_[pieces - 1];
  return last.at + last.length;
}

void AllreduceShm::reduce_whole(int64_t e, size_t pieces) {
  const size_t half = size_t(e % 2) * size_t(kHalfBytes);
  for (size_t i = 0; i < pieces; ++i) {
    const Placed& p = placed_[i];
    const Op& op = ops_[p.op];
    for (int r = 0; r < w_.size(); ++r) sources_[size_t(r)] = w_.data(r) + half + p.at;
    const int64_t elem = int64_t(dtype_size(op.dtype));
    reduce_sum_ordered(op.dtype, static_cast<std::byte*>(op.buf) + p.offset, sources_.data(), w_.size(),
                       p.length / elem, op.scale);
  }
  w_.control(w_.rank()).done.value.store(e, std::memory_order_release);
}

void AllreduceShm::reduce_slice(int64_t e, size_t pieces) {
  const int64_t step_bytes = this->step_bytes(pieces);
  const DType dtype = ops_[placed_[0].op].dtype;
  const int64_t elem = int64_t(dtype_size(dtype));
  const auto [lo, hi] = slice(w_.rank(), step_bytes);
  const size_t at = size_t(e % 2) * size_t(kHalfBytes) + size_t(lo);
  for (int r = 0; r < w_.size(); ++r) sources_[size_t(r)] = w_.data(r) + at;
  std::byte* out = w_.data(w_.rank()) + at;
  reduce_sum_ordered(dtype, out, sources_.data(), w_.size(), (hi - lo) / elem, ops_[placed_[0].op].scale);
  scatter(w_.data(w_.rank()) + size_t(e % 2) * size_t(kHalfBytes), lo, hi, pieces);
  w_.control(w_.rank()).reduced.value.store(e, std::memory_order_release);
}

void AllreduceShm::gather(int64_t e, size_t pieces) {
  wait_all(&ShmWindow::Control::reduced, e, false);
  const int64_t step_bytes = this->step_bytes(pieces);
  for (int s = 0; s < w_.size(); ++s) {
    if (s == w_.rank()) continue;
    const auto [lo, hi] = slice(s, step_bytes);
    scatter(w_.data(s) + size_t(e % 2) * size_t(kHalfBytes), lo, hi, pieces);
  }
  w_.control(w_.rank()).done.value.store(e, std::memory_order_release);
}

void AllreduceShm::scatter(const std::byte* src, int64_t from, int64_t to, size_t pieces) const {
  for (size_t i = 0; i < pieces; ++i) {
    const Placed& p = placed_[i];
    const int64_t a = std::max(from, p.at), b = std::min(to, p.at + p.length);
    if (a >= b) continue;
    std::memcpy(static_cast<std::byte*>(ops_[p.op].buf) + p.offset + (a - p.at), src + a, size_t(b - a));
  }
}

void AllreduceShm::wait_all(ShmWindow::Counter ShmWindow::Control::*counter, int64_t e, bool check) const {
  const int64_t seq = ops_[placed_[0].op].seq;
  w_.wait_all(counter, e, policy_, seq, check ? ShmWindow::signature(seq, OpCode::allreduce, true) : 0);
}

}  // namespace shardtrain::comm
