// node(), cross_node() and groups(): sizes and membership from the MPI library's
// shared-memory split (one machine here: one node) and from emulated nodes
// (CommOptions::ranks_per_node); collectives of i32 on them; a routing
// communicator's sub-communicators.
#include "tests/mpi/comm_test_util.h"

#include "runtime/comm/routing_communicator.h"

#include <algorithm>
#include <thread>

namespace shardtrain::comm::testing {
namespace {

// The world ranks of `c`'s ranks, by an i32 allgather on `c` itself.
std::vector<int32_t> members(Communicator& c) {
  Tensor in = Tensor::empty({1}, DType::i32);
  in.i32()[0] = world_rank();
  Tensor out = Tensor::empty({c.size()}, DType::i32);
  c.allgather(in, out)->wait();
  return std::vector<int32_t>(out.i32(), out.i32() + c.size());
}

// Every rank's host name, by plain MPI.
std::vector<std::string> host_names() {
  char mine[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(mine, &len);
  std::vector<char> all(static_cast<size_t>(world_size()) * MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> names;
  for (int r = 0; r < world_size(); ++r) names.emplace_back(&all[size_t(r) * MPI_MAX_PROCESSOR_NAME]);
  return names;
}

// A node is the ranks sharing a host (one machine under ctest; several with
// launch/emunodes); cross-node groups are the ranks with the same index
// within their node.
TEST(CommTopology, NodesAreTheRanksOfAHost) {
  Communicator& w = world("auto");
  EXPECT_EQ(w.name(), "world");
  EXPECT_EQ(w.size(), world_size());
  EXPECT_EQ(w.rank(), world_rank());
  const std::vector<std::string> hosts = host_names();
  auto local_index = [&](int r) { return int(std::count(hosts.begin(), hosts.begin() + r, hosts[size_t(r)])); };
  std::vector<int32_t> node_members, cross_members;
  for (int r = 0; r < world_size(); ++r) {
    if (hosts[size_t(r)] == hosts[size_t(world_rank())]) node_members.push_back(r);
    if (local_index(r) == local_index(world_rank())) cross_members.push_back(r);
  }
  Communicator& node = w.node();
  Communicator& cross = w.cross_node();
  EXPECT_EQ(node.name(), "node");
  EXPECT_EQ(cross.name(), "cross-node");
  EXPECT_EQ(node.rank(), local_index(world_rank()));
  EXPECT_EQ(members(node), node_members);
  EXPECT_EQ(members(cross), cross_members);
  // The levels below: a node's node is itself, its cross-node a single rank.
  EXPECT_EQ(&node.node(), &node);
  EXPECT_EQ(node.cross_node().size(), 1);
  EXPECT_EQ(&cross.cross_node(), &cross);
  EXPECT_EQ(cross.node().size(), 1);
  EXPECT_EQ(members(node.cross_node()), std::vector<int32_t>{world_rank()});
}

TEST(CommTopology, EmulatedNodesOfTwoRanks) {
  Communicator& w = world("hierarchical");  // ranks_per_node 2 for even worlds, else 1
  const int k = world_size() % 2 == 0 ? 2 : 1;
  const int r = world_rank();
  Communicator& node = w.node();
  Communicator& cross = w.cross_node();
  EXPECT_EQ(node.size(), k);
  EXPECT_EQ(node.rank(), r % k);
  EXPECT_EQ(cross.size(), world_size() / k);
  EXPECT_EQ(cross.rank(), r / k);
  std::vector<int32_t> node_members, cross_members;
  for (int i = 0; i < k; ++i) node_members.push_back(r / k * k + i);
  for (int i = r % k; i < world_size(); i += k) cross_members.push_back(i);
  EXPECT_EQ(members(node), node_members);
  EXPECT_EQ(members(cross), cross_members);
}

TEST(CommTopology, I32BroadcastAndAllgatherOnSubCommunicators) {
  Communicator& w = world("hierarchical");
  for (Communicator* c : {&w, &w.node(), &w.cross_node()}) {
    SCOPED_TRACE(c->name());
    const int64_t n = 1001;
    Tensor t = Tensor::empty({n}, DType::i32);
    for (int64_t i = 0; i < n; ++i) t.i32()[i] = c->rank() == c->size() - 1 ? int32_t(i * 3 - 7) : -1;
    c->broadcast(t, c->size() - 1)->wait();
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(t.i32()[i], int32_t(i * 3 - 7));

    Tensor in = Tensor::empty({n}, DType::i32);
    for (int64_t i = 0; i < n; ++i) in.i32()[i] = int32_t(c->rank() * 100000 + i);
    Tensor out = Tensor::empty({n * c->size()}, DType::i32);
    c->allgather(in, out)->wait();
    for (int k = 0; k < c->size(); ++k)
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out.i32()[k * n + i], int32_t(k * 100000 + i));
  }
}

// The groups across nodes run beside other groups' collectives (HYBRID), so
// they never give a size to the MPI library's blocking all-reduce,
// reduce-scatter or all-gather (docs/comm.md); the world keeps them.
TEST(CommTopology, GroupsAcrossNodesKeepOffTheMpiLibrarysCollectives) {
  Communicator& w = world("emulated-nodes");
  Communicator& cross = w.cross_node();
  if (cross.size() < 2) GTEST_SKIP() << "one node";
  const int64_t n = 61440;  // 240 KiB of f32 (divides among 2-6 ranks): the MPI library's size on the world
  const std::vector<float> ones(size_t(n), 1.0f);
  Tensor a = to_tensor(ones, DType::f32);
  WorkPtr on_world = w.allreduce(a, ReduceOp::sum);
  on_world->wait();
  EXPECT_EQ(on_world->algorithm(), "mpi");
  Tensor b = to_tensor(ones, DType::f32);
  WorkPtr across = cross.allreduce(b, ReduceOp::sum);
  across->wait();
  EXPECT_EQ(across->algorithm(), "ring");
  EXPECT_EQ(b.f32()[n - 1], float(cross.size()));
  Tensor shard = Tensor::empty({n / cross.size()});
  WorkPtr scattered = cross.reduce_scatter(b, shard, ReduceOp::sum);
  scattered->wait();
  EXPECT_EQ(scattered->algorithm(), "ring");
  WorkPtr gathered = cross.allgather(shard, b);
  gathered->wait();
  EXPECT_EQ(gathered->algorithm(), "ring");
  EXPECT_EQ(b.f32()[0], float(cross.size() * cross.size()));
}

// HYBRID's world runs its own collectives (the stop flag's all-reduce) while
// the groups run theirs on other threads; the world's MPI-library
// collectives across nodes are then the non-blocking calls, polled. Every
// rank polls the same ones (a blocking call does not match a non-blocking
// one), and the sums come out right beside the groups' rings.
TEST(CommTopology, WorldBesideGroupsPollsTheMpiLibrarysCollectives) {
  Communicator& w = world("beside-groups");
  Communicator& cross = w.cross_node();
  if (cross.size() < 2) GTEST_SKIP() << "one node";
  const int rounds = 20;
  std::thread groups([&] {
    const std::vector<float> ones(4096, 1.0f);
    for (int i = 0; i < rounds; ++i) {
      Tensor b = to_tensor(ones, DType::f32);
      cross.allreduce(b, ReduceOp::sum)->wait();
      EXPECT_EQ(b.f32()[4095], float(cross.size()));
    }
  });
  for (int i = 0; i < rounds; ++i) {
    // 64 B: the MPI library's all-reduce; 6 KiB and 64 KiB: hierarchical
    // (on nodes of 2), its segments across nodes of 3 KiB by the MPI
    // library's, of 32 KiB by the ring.
    for (const auto& [n, algorithm] :
         {std::pair<int64_t, std::string>{16, "mpi"}, {1536, "hierarchical"}, {16384, "hierarchical"}}) {
      Tensor a = to_tensor(std::vector<float>(size_t(n), float(w.rank() + 1)), DType::f32);
      WorkPtr work = w.allreduce(a, ReduceOp::sum);
      work->wait();
      const std::string by_size = n * 4 <= 4096 ? "mpi" : "ring";  // nodes of one rank (odd worlds)
      EXPECT_EQ(work->algorithm(), w.node().size() == 2 ? algorithm : by_size);
      const float sum = float(w.size() * (w.size() + 1) / 2);
      EXPECT_EQ(a.f32()[0], sum);
      EXPECT_EQ(a.f32()[n - 1], sum);
    }
    Tensor flag = Tensor::empty({1}, DType::i32);
    flag.i32()[0] = w.rank() == 0 ? 7 : 0;
    w.broadcast(flag, 0)->wait();
    EXPECT_EQ(flag.i32()[0], 7);
  }
  groups.join();
}

// A routing communicator's node() and cross_node() route too: host tensors
// on them go to the host backend's groups (FSDP HYBRID sums its gradient
// norm's host tensor over node(); over NCCL the raw node communicator
// refuses host tensors). Here both backends are MPI worlds of the same shape.
TEST(CommTopology, RoutingSubCommunicatorsRouteHostTensors) {
  Communicator& host = world("hierarchical");
  RoutingCommunicator routing(host, make_mpi_world_communicator(options_for("hierarchical")));
  for (Communicator* sub : {&routing.node(), &routing.cross_node()}) {
    SCOPED_TRACE(sub->name());
    EXPECT_NE(dynamic_cast<RoutingCommunicator*>(sub), nullptr);
    Communicator& host_sub = sub == &routing.node() ? host.node() : host.cross_node();
    EXPECT_EQ(sub->size(), host_sub.size());
    EXPECT_EQ(sub->rank(), host_sub.rank());
    Tensor t = Tensor::empty({1});
    t.f32()[0] = float(world_rank() + 1);
    sub->allreduce(t, ReduceOp::sum)->wait();
    float want = 0;
    for (int32_t r : members(host_sub)) want += float(r + 1);
    EXPECT_EQ(t.f32()[0], want);
  }
  EXPECT_EQ(&routing.node(), &routing.node());  // made once
}

// groups(k): for every k that divides the world, this rank's group is the k
// consecutive ranks around it and the cross-group the ranks with its index
// in every group, on the plain world and on emulated nodes (where a group
// spanning nodes must not use shared memory, so its sums cross the links);
// k = size and k = 1 need no new communicator; a k that does not divide the
// world is an error on every rank, before any MPI call.
TEST(CommTopology, GroupsOfConsecutiveRanks) {
  for (const char* config : {"auto", "hierarchical"}) {
    Communicator& w = world(config);
    for (int k = 1; k <= w.size(); ++k) {
      if (w.size() % k != 0) {
        EXPECT_THROW(w.groups(k, GroupSide::within), Error) << k;
        continue;
      }
      SCOPED_TRACE(fmt::format("{}, groups of {}", config, k));
      Communicator& within = w.groups(k, GroupSide::within);
      Communicator& across = w.groups(k, GroupSide::across);
      EXPECT_EQ(&within, &w.groups(k, GroupSide::within));  // made once
      std::vector<int32_t> want_within, want_across;
      for (int r = 0; r < w.size(); ++r) {
        if (r / k == world_rank() / k) want_within.push_back(r);
        if (r % k == world_rank() % k) want_across.push_back(r);
      }
      EXPECT_EQ(members(within), want_within);
      EXPECT_EQ(members(across), want_across);
      EXPECT_EQ(within.rank(), world_rank() % k);
      EXPECT_EQ(across.rank(), world_rank() / k);
      if (k == w.size()) {
        EXPECT_EQ(&within, &w);
      }
      if (k == 1) {
        EXPECT_EQ(&across, &w);
      }
      if (k > 1 && k < w.size()) {
        EXPECT_EQ(within.name(), "group");
        EXPECT_EQ(across.name(), "cross-group");
        EXPECT_THROW(within.node(), Error);
      }
      for (Communicator* c : {&within, &across}) {  // a sum large enough for every algorithm
        Tensor t = Tensor::empty({5000});
        std::fill(t.f32(), t.f32() + 5000, float(world_rank() + 1));
        c->allreduce(t, ReduceOp::sum)->wait();
        float want = 0;
        for (int32_t r : members(*c)) want += float(r + 1);
        EXPECT_EQ(t.f32()[0], want);
        EXPECT_EQ(t.f32()[4999], want);
      }
    }
  }
}

// A routing communicator's groups route too, and k = size is the routing
// communicator itself.
TEST(CommTopology, RoutingGroupsRouteHostTensors) {
  Communicator& host = world("hierarchical");
  RoutingCommunicator routing(host, make_mpi_world_communicator(options_for("hierarchical")));
  EXPECT_EQ(&routing.groups(routing.size(), GroupSide::within), &routing);
  if (world_size() < 2) return;
  Communicator& across = routing.groups(world_size() / 2 * 2 == world_size() ? 2 : 1, GroupSide::across);
  EXPECT_NE(dynamic_cast<RoutingCommunicator*>(&across), nullptr);
  Tensor t = Tensor::empty({1});
  t.f32()[0] = float(world_rank() + 1);
  across.allreduce(t, ReduceOp::sum)->wait();
  float want = 0;
  for (int32_t r : members(across)) want += float(r + 1);
  EXPECT_EQ(t.f32()[0], want);
}

}  // namespace
}  // namespace shardtrain::comm::testing
