// A communicator that sends each collective where its tensors live: GPU
// tensors to a device backend (NCCL), host tensors to the MPI backend. DDP's
// and FSDP's own host collectives (the model check before training, small
// sums) then work unchanged over NCCL. Both backends keep their own issue
// order; a host collective issued while device collectives are in flight
// does not wait for them (callers wait for their host collectives at once).
#pragma once

#include "runtime/comm/communicator.h"

#include <map>
#include <memory>

namespace shardtrain::comm {

class RoutingCommunicator final : public Communicator {
 public:
  // `host` is borrowed (the job's MPI world communicator), `device` owned.
  RoutingCommunicator(Communicator& host, std::unique_ptr<Communicator> device)
      : host_(host), owned_(std::move(device)), device_(owned_.get()) {}
  // Both borrowed: the pair of a node or cross-node communicator.
  RoutingCommunicator(Communicator& host, Communicator& device) : host_(host), device_(&device) {}

  int rank() const override { return device_->rank(); }
  int size() const override { return device_->size(); }
  const std::string& name() const override { return device_->name(); }

  WorkPtr allreduce(const Tensor& t, ReduceOp op) override { return pick(t).allreduce(t, op); }
  WorkPtr reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) override {
    return pick(in).reduce_scatter(in, out, op);
  }
  WorkPtr allgather(const Tensor& in, const Tensor& out) override { return pick(in).allgather(in, out); }
  WorkPtr broadcast(const Tensor& t, int root) override { return pick(t).broadcast(t, root); }
  WorkPtr barrier() override { return device_->barrier(); }
  // Groups are the device backend's (batches of gradient collectives); a
  // host collective inside one goes to MPI as usual.
  std::string algorithm_choice() const override { return host_.algorithm_choice(); }
  void begin_group() override { device_->begin_group(); }
  void end_group() override { device_->end_group(); }
  // Routing too, so that host tensors on a node, cross-node or other group (FSDP
  // HYBRID's small sums) go to MPI there as well. The first call is
  // collective on both backends, as theirs are.
  Communicator& node() override {
    if (!node_) node_ = std::make_unique<RoutingCommunicator>(host_.node(), device_->node());
    return *node_;
  }
  Communicator& cross_node() override {
    if (!cross_node_) cross_node_ = std::make_unique<RoutingCommunicator>(host_.cross_node(), device_->cross_node());
    return *cross_node_;
  }
  Communicator& groups(int k, GroupSide side) override {
    Communicator &host = host_.groups(k, side), &device = device_->groups(k, side);
    if (&host == &host_ && &device == device_) return *this;
    std::unique_ptr<RoutingCommunicator>& sub = groups_[{k, side}];
    if (!sub) sub = std::make_unique<RoutingCommunicator>(host, device);
    return *sub;
  }

  Communicator& device_backend() { return *device_; }

 private:
  Communicator& pick(const Tensor& t) { return t.device().is_cpu() ? host_ : *device_; }

  Communicator& host_;
  std::unique_ptr<Communicator> owned_;
  Communicator* device_;
  std::unique_ptr<RoutingCommunicator> node_, cross_node_;
  std::map<std::pair<int, GroupSide>, std::unique_ptr<RoutingCommunicator>> groups_;
};

}  // namespace shardtrain::comm
