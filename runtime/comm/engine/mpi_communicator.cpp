#include "runtime/comm/engine/mpi_communicator.h"

#include "runtime/comm/algorithms/allgather_oneshot.h"
#include "runtime/comm/algorithms/allgather_ring.h"
#include "runtime/comm/algorithms/allgather_shm.h"
#include "runtime/comm/algorithms/allreduce_hierarchical.h"
#include "runtime/comm/algorithms/allreduce_ring.h"
#include "runtime/comm/collective_args.h"
#include "runtime/comm/algorithms/mpi_native.h"
#include "runtime/comm/transport/mpi_world.h"
#include "runtime/comm/algorithms/reduce_scatter_oneshot.h"
#include "runtime/comm/algorithms/reduce_scatter_ring.h"
#include "runtime/comm/algorithms/reduce_scatter_shm.h"
#include "runtime/comm/algorithms/reduction.h"
#include "runtime/comm/algorithms/ring_layout.h"
#include "runtime/core/clock.h"
#include "runtime/core/error.h"
#include "runtime/core/fnv1a.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>
#include <string_view>
#include <utility>
#include <cstring>
#include <vector>

namespace shardtrain::comm {
namespace {

// ---- helpers ----------------------------------------------------------------
int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

void check_cpu(const std::string& comm, const char* what, const Tensor& t) {
  ST_CHECK(t.defined(), "comm '{}': {} of an undefined tensor", comm, what);
  ST_CHECK(t.device().is_cpu(), "comm '{}': {}: the MPI backend takes CPU tensors, not {}", comm, what,
           t.device().str());
}

void check_reducible(const std::string& comm, const char* what, const Tensor& t) {
  check_cpu(comm, what, t);
  ST_CHECK(t.dtype() != DType::i32, "comm '{}': {} reduces f32 or bf16 tensors, not i32", comm, what);
}

const char* const kAlgoNames[] = {"local", "mpi", "ring", "hierarchical", "oneshot", "shm"};

// Whether every rank of `comm` is alone on its node (as the MPI library sees
// nodes: its messages then take a network transport, not shared memory).
// Collective over comm.
bool no_two_ranks_share_a_node(MPI_Comm comm) {
  int local = ranks_on_this_node(comm);
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &local, 1, MPI_INT, MPI_MAX, comm), "MPI_Allreduce");
  return local == 1;
}

}  // namespace

const char* MpiCommunicator::algo_name(Algo algo) { return kAlgoNames[int(algo)]; }

std::optional<MpiCommunicator::Algo> MpiCommunicator::algo_named(std::string_view name) {
  for (size_t i = 0; i < std::size(kAlgoNames); ++i)
    if (name == kAlgoNames[i]) return Algo(i);
  return std::nullopt;
}

// ---- construction -------------------------------------------------------------

std::unique_ptr<MpiCommunicator> MpiCommunicator::make_world(const CommOptions& options) {
  validate(options);
  int initialized = 0, level = 0;
  MPI_Initialized(&initialized);
  ST_CHECK(initialized, "the MPI communicator needs MPI initialized first (comm::MpiEnv)");
  MPI_Query_thread(&level);
  ST_CHECK(level == MPI_THREAD_MULTIPLE,
           "the MPI communicator needs MPI_THREAD_MULTIPLE (its progress threads call MPI), the "
           "MPI library provides thread level {}",
           level);
  MPI_Comm comm;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
  auto watchdog = std::make_shared<Watchdog>(MPI_COMM_WORLD);
  const BackoffPolicy policy = BackoffPolicy::for_node(comm);
  std::unique_ptr<MpiCommunicator> world(new MpiCommunicator(comm, Kind::world, options, policy, std::move(watchdog)));
  MpiCommunicator* w = world.get();
  shutdown_at_mpi_finalize(w, [w] { w->shutdown(); });
  world->make_sub_communicators();
  return world;
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, Kind kind, const CommOptions& options, const BackoffPolicy& policy,
                                 std::shared_ptr<Watchdog> watchdog)
    : kind_(kind),
      name_(comm_kind_name(kind)),
      options_(options),
      policy_(policy),
      comm_(comm),
      watchdog_(std::move(watchdog)) {
  std::vector<int> world_ranks{world_rank()};
  if (comm_ != MPI_COMM_NULL) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    world_ranks = world_ranks_of(comm_);
    transport_ = std::make_unique<MpiTransport>(comm_, policy_);
    // The world's window is set up with its sub-communicators (it needs to
    // know whether it spans several nodes, emulated ones included).
    // Emulated nodes (ranks_per_node) are separate nodes: ranks on several
    // share no memory there, even where the machine would let them (their
    // collectives must cross the emulated links).
    if (kind_ != Kind::world && options_.shared_memory && on_one_emulated_node())
      shm_ = ShmWindow::create(comm_, AllreduceShm::kWindowBytes);
    beside_others_ = kind_ == Kind::cross || kind_ == Kind::cross_group || (kind_ == Kind::group && !shm_);
    ring_chunk_bytes_ = options_.chunk_bytes;
    if (size_ > 1 && no_two_ranks_share_a_node(comm_)) {
      oneshot_fragment_bytes_ = AllreduceOneshot::kFragmentBytesAcrossNodes;
      ring_chunk_bytes_ = std::min(options_.chunk_bytes, kTcpEagerBytes);
    }
    native_ = std::make_unique<MpiNative>(comm_, beside_others_ ? &policy_ : nullptr);
  }
  monitor_ = std::make_shared<CommMonitor>(name_, rank_, size_, world_ranks, options_.timeout_s);
  if (watchdog_) watchdog_->add(monitor_);
  Executor& executor = *this;
  engine_ = std::make_unique<ProgressEngine>(name_, executor, monitor_);
}

MPI_Comm split_node(MPI_Comm comm, int ranks_per_node) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm node;
  if (ranks_per_node > 0)
    check_mpi(MPI_Comm_split(comm, rank / ranks_per_node, rank, &node), "MPI_Comm_split");
  else
    check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  return node;
}

// Node groups (split_node); the cross-node groups are the ranks with the
// same node-local index.
void MpiCommunicator::make_sub_communicators() {
  MPI_Comm node = split_node(comm_, options_.ranks_per_node), cross;
  int local_rank = 0, local_size = 1;
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_size(node, &local_size);
  check_mpi(MPI_Comm_split(comm_, local_rank, rank_, &cross), "MPI_Comm_split");

  int extremes[2] = {local_size, -local_size}, nodes = local_rank == 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, extremes, 2, MPI_INT, MPI_MAX, comm_);
  MPI_Allreduce(MPI_IN_PLACE, &nodes, 1, MPI_INT, MPI_SUM, comm_);
  if (local_size == size_ && options_.shared_memory) shm_ = ShmWindow::create(comm_, AllreduceShm::kWindowBytes);
  hierarchical_possible_ = extremes[0] == -extremes[1];
  hierarchical_useful_ = hierarchical_possible_ && nodes >= 2 && local_size >= 2;
  if (hierarchical_possible_) {
    check_mpi(MPI_Comm_dup(node, &hier_node_), "MPI_Comm_dup");
    check_mpi(MPI_Comm_dup(cross, &hier_cross_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(hier_node_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(hier_cross_, MPI_ERRORS_RETURN);
    hier_node_transport_ = std::make_unique<MpiTransport>(hier_node_, policy_);
    hier_cross_transport_ = std::make_unique<MpiTransport>(hier_cross_, policy_);
  }
  polls_native_ = options_.world_beside_groups && nodes >= 2;
  if (polls_native_) native_ = std::make_unique<MpiNative>(comm_, &policy_);
  node_.reset(new MpiCommunicator(node, Kind::node, options_, policy_, watchdog_));
  cross_.reset(new MpiCommunicator(cross, Kind::cross, options_, policy_, watchdog_));
  ST_CHECK(hierarchical_possible_ || options_.allreduce_algorithm != AllreduceAlgorithm::hierarchical,
           "comm.allreduce_algorithm = hierarchical needs the same number of ranks on every node "
           "(here between {} and {} on {} nodes)",
           -extremes[1], extremes[0], nodes);
  load_tuning(nodes, extremes[0], local_rank);
}

namespace {

// Rank 0's `text` on every rank of `comm` (collective).
void broadcast_string(std::string& text, MPI_Comm comm) {
  int64_t n = int64_t(text.size());
  MPI_Bcast(&n, 1, MPI_INT64_T, 0, comm);
  text.resize(size_t(n));
  if (n > 0) MPI_Bcast(text.data(), int(n), MPI_CHAR, 0, comm);
}

// FNV-1a over the node leaders' host names, in rank order, and rank 0's MPI
// library version: the same on every rank (collective over `comm`).
uint32_t hosts_and_library(MPI_Comm comm, bool leader) {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  if (!leader) name[0] = '\0';
  int size = 1;
  MPI_Comm_size(comm, &size);
  std::vector<char> all(size_t(size) * MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm);
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  MPI_Get_library_version(version, &len);
  std::string library(version);
  broadcast_string(library, comm);
  Fnv1a h;
  for (int r = 0; r < size; ++r) h.add_text(all.data() + size_t(r) * MPI_MAX_PROCESSOR_NAME);
  h.add_text(library);
  return h.value();
}

}  // namespace

void MpiCommunicator::load_tuning(int nodes, int largest_node, int local_rank) {
  fingerprint_ = {size_, nodes, largest_node, options_.shared_memory, hosts_and_library(comm_, local_rank == 0)};
  if (options_.tuning == "off") {
    tuning_status_ = "algorithms by size (comm.tuning = \"off\")";
    return;
  }
  // Probing needs the choice open, and something to choose between.
  const bool can_probe = options_.allreduce_algorithm == AllreduceAlgorithm::automatic && size_ > 1;
  if (options_.tuning == "probe") {
    if (can_probe) probe("");
    return;
  }
  // Rank 0 reads, checks and decides; every rank gets its verdict and the
  // file's text, so that all pick the same algorithms (or all raise the
  // same error).
  const bool automatic = options_.tuning == "auto";
  const std::string path = automatic ? cached_tuning_path(fingerprint_) : options_.tuning;
  std::string text, error, status;
  if (rank_ == 0) {
    std::ifstream in(path);
    if (!in.good()) {
      if (automatic)
        status = fmt::format(
            "algorithms by size; no tuning file for this topology ({}): `shardtrain bench comm --tune-algorithms` "
            "measures one",
            fingerprint_.key());
      else
        error = fmt::format(
            "comm.tuning: cannot read {} (`shardtrain bench comm --tune-algorithms --tune-file {}` writes it)", path,
            path);
    } else {
      std::stringstream ss;
      ss << in.rdbuf();
      try {
        const Tuning t = Tuning::parse(ss.str(), path);
        if (t.matches(fingerprint_))
          text = ss.str();
        else
          error = fmt::format(
              "comm.tuning: {} was measured on topology {}, this job runs on {} (run `shardtrain bench comm "
              "--tune-algorithms` on this one)",
              path, t.fingerprint().key(), fingerprint_.key());
      } catch (const Error& e) {
        error = e.what();
      }
      // The cache may hold a file cut short or of another version: by size, and say why.
      if (automatic && !error.empty()) status = fmt::format("algorithms by size ({})", std::exchange(error, ""));
    }
  }
  for (std::string* s : {&text, &error, &status}) broadcast_string(*s, comm_);
  ST_CHECK(error.empty(), "{}", error);
  if (text.empty()) {
    // No file for this topology: across nodes the thresholds (measured on
    // one host) are probed instead.
    if (automatic && nodes >= 2 && can_probe && options_.probe_budget_s > 0)
      probe(path);
    else
      tuning_status_ = status;
    return;
  }
  tuning_ = Tuning::parse(text, path);
  // Only the probes limit where their file applies (bench comm's has no limit).
  tuning_status_ = tuning_->applies_up_to() > 0
                       ? fmt::format("algorithms probed at an earlier job start on this topology, up to {} B, from {}",
                                     tuning_->applies_up_to(), path)
                       : fmt::format("algorithms measured fastest per collective and size, from {}", path);
}

std::optional<MpiCommunicator::Algo> MpiCommunicator::tuned(OpCode op, int64_t bytes) const {
  if (!tuning_ || kind_ != Kind::world) return std::nullopt;
  const std::optional<Algo> a = algo_named(tuning_->choose(op_name(op), bytes));
  // Not measured, or not possible here: the thresholds decide.
  if (!a || *a == Algo::local) return std::nullopt;
  if (*a == Algo::mpi || *a == Algo::ring || *a == Algo::oneshot) return a;
  if (*a == Algo::shm) return shm_ ? a : std::nullopt;
  if (op != OpCode::allreduce) return std::nullopt;
  if (*a == Algo::hierarchical && !hierarchical_possible_) return std::nullopt;
  return a;
}

MpiCommunicator& MpiCommunicator::self_communicator() {
  std::lock_guard lock(self_mu_);
  if (!self_) self_.reset(new MpiCommunicator(MPI_COMM_NULL, Kind::self, options_, policy_, nullptr));
  return *self_;
}

bool MpiCommunicator::on_one_emulated_node() const {
  if (options_.ranks_per_node <= 0) return true;
  const int node = world_rank() / options_.ranks_per_node;
  int extremes[2] = {node, -node};
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, extremes, 2, MPI_INT, MPI_MAX, comm_), "MPI_Allreduce");
  return extremes[0] == -extremes[1];
}

Communicator& MpiCommunicator::node() {
  switch (kind_) {
    case Kind::world: return *node_;
    case Kind::node: return *this;
    case Kind::cross: return self_communicator();
    case Kind::group:
    case Kind::cross_group: throw Error(fmt::format("comm '{}': a group's node() is not made", name_));
    case Kind::self: break;
  }
  return *this;
}

Communicator& MpiCommunicator::cross_node() {
  switch (kind_) {
    case Kind::world: return *cross_;
    case Kind::node: return self_communicator();
    case Kind::cross: return *this;
    case Kind::group:
    case Kind::cross_group: throw Error(fmt::format("comm '{}': a group's cross_node() is not made", name_));
    case Kind::self: break;
  }
  return *this;
}

Communicator& MpiCommunicator::groups(int k, GroupSide side) {
  const int color = group_color(rank_, size_, k, side);
  const bool within = side == GroupSide::within;
  if (kind_ == Kind::self || k == (within ? size_ : 1)) return *this;
  if (k == (within ? 1 : size_)) return self_communicator();
  std::lock_guard lock(self_mu_);
  std::unique_ptr<MpiCommunicator>& sub = groups_[{k, side}];
  if (!sub) {
    MPI_Comm c;
    check_mpi(MPI_Comm_split(comm_, color, rank_, &c), "MPI_Comm_split");
    sub.reset(new MpiCommunicator(c, within ? Kind::group : Kind::cross_group, options_, policy_, watchdog_));
  }
  return *sub;
}

// ---- shutdown -----------------------------------------------------------------

void MpiCommunicator::shutdown() {
  {
    std::lock_guard lock(issue_mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  engine_->stop();  // runs what is queued first
  if (node_) node_->shutdown();
  if (cross_) cross_->shutdown();
  {
    std::lock_guard lock(self_mu_);
    if (self_) self_->shutdown();
    for (auto& [key, sub] : groups_) sub->shutdown();
  }
  shm_.reset();  // collective, like every rank's shutdown
  scratch_.release();
  transport_.reset();
  native_.reset();
  hier_node_transport_.reset();
  hier_cross_transport_.reset();
  for (MPI_Comm* c : {&hier_node_, &hier_cross_, &comm_})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  if (kind_ == Kind::world) watchdog_->stop();
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) shutdown();
  if (kind_ == Kind::world) cancel_shutdown_at_mpi_finalize(this);
}

// ---- issuing ------------------------------------------------------------------

MpiCommunicator::Algo MpiCommunicator::pick(OpCode op, int64_t bytes) const {
  if (size_ == 1) return Algo::local;
  if (op == OpCode::broadcast || op == OpCode::barrier) return Algo::mpi;
  using A = AllreduceAlgorithm;
  const A forced = options_.allreduce_algorithm;
  const bool hierarchical = op == OpCode::allreduce && kind_ == Kind::world;
  if (probing_) return *probing_;
  if (forced == A::automatic) {
    if (const std::optional<Algo> a = tuned(op, bytes)) return *a;
  } else {
    if (forced == A::shm && shm_) return Algo::shm;
    if (forced == A::oneshot) return Algo::oneshot;
    if (forced == A::mpi) return Algo::mpi;
    if (forced == A::ring) return Algo::ring;
    if (forced == A::hierarchical) return hierarchical ? Algo::hierarchical : Algo::ring;
  }
  // By size (CommOptions says where each threshold comes from).
  if (shm_) return Algo::shm;
  const int64_t small = op == OpCode::allreduce        ? options_.small_message_bytes
                        : op == OpCode::reduce_scatter ? options_.reduce_scatter_small_bytes
                                                       : options_.allgather_small_bytes;
  if (op == OpCode::allreduce && bytes * (size_ - 1) <= options_.oneshot_bytes) return Algo::oneshot;
  if (bytes <= small && !beside_others_) return Algo::mpi;
  return hierarchical && hierarchical_useful_ ? Algo::hierarchical : Algo::ring;
}

WorkPtr MpiCommunicator::issue(OpCode op, Algo algo, Task&& task) {
  task.record.op = op;
  task.record.dtype = task.a.defined() ? task.a.dtype() : DType::f32;
  task.record.root = task.root;
  task.algorithm = int(algo);
  std::strncpy(task.record.algorithm, algo_name(algo), sizeof(task.record.algorithm) - 1);
  std::lock_guard lock(issue_mu_);
  ST_CHECK(!shut_down_, "comm '{}': {} after the communicator was shut down", name_, op_name(op));
  task.record.seq = next_seq_++;
  task.work = std::make_shared<Work>(op_name(op), task.record.seq, task.record.bytes, engine_->helper());
  WorkPtr work = task.work;
  monitor_->issued(task.record);
  engine_->submit(std::move(task));
  return work;
}

bool MpiCommunicator::checks_arrival(const Task& task) const {
  return Algo(task.algorithm) == Algo::mpi && (options_.check_arrival || task.record.op == OpCode::barrier);
}

bool MpiCommunicator::prepare(const Task& task, const Task* running) {
  if (options_.debug_delay_s > 0) {
    if (running) return false;  // delay each collective when it is next, not ahead
    std::this_thread::sleep_for(std::chrono::duration<double>(options_.debug_delay_s));
  }
  if (!checks_arrival(task)) return true;
  if (running && running->record.bytes > kLookaheadBytes) return false;
  try {
    arrivals_.emplace_back(*transport_, task.record);
    arrivals_.back().progress();
  } catch (const std::exception& e) {
    if (watchdog_) watchdog_->fail(*monitor_, task.record, fmt::format("failed: {}", e.what()));
    throw;
  }
  return true;
}

// One-shot (or shared-memory) all-reduces queued right behind each other on
// disjoint buffers run as one group: all their messages in flight at once
// (one-shot), packed into common steps (shared memory).
size_t MpiCommunicator::group(std::span<const Task> queued) {
  const int algorithm = queued.front().algorithm;
  if (queued.front().record.op != OpCode::allreduce) return 1;
  if (Algo(algorithm) != Algo::oneshot && Algo(algorithm) != Algo::shm) return 1;
  int64_t bytes = queued.front().record.bytes;
  size_t n = 1;
  for (; n < std::min(queued.size(), kCoalesceOps) && bytes <= kCoalesceBytes; ++n) {
    const Task& next = queued[n];
    if (next.algorithm != algorithm || next.record.op != OpCode::allreduce ||
        bytes + next.record.bytes > kCoalesceBytes)
      break;
    // The same buffer again is a dependency (its input is the earlier result).
    const bool disjoint = std::none_of(queued.begin(), queued.begin() + std::ptrdiff_t(n),
                                       [&](const Task& earlier) { return overlap(earlier.a, next.a); });
    if (!disjoint) break;
    bytes += next.record.bytes;
  }
  return n;
}

void MpiCommunicator::execute(std::span<Task> tasks) {
  const Task* current = &tasks.front();
  const auto algo = Algo(tasks.front().algorithm);
  try {
    if (shm_) shm_->announce(ShmWindow::signature(current->record.seq, current->record.op, algo == Algo::shm));
    if (algo == Algo::oneshot && current->record.op == OpCode::allreduce)
      run_oneshot(tasks, current);
    else if (algo == Algo::shm && current->record.op == OpCode::allreduce)
      run_shm(tasks, current);
    else
      run(tasks.front());
  } catch (const std::exception& e) {
    // The other ranks are inside the same collective: there is no way to go
    // on consistently. The watchdog reports and ends the job.
    if (watchdog_) watchdog_->fail(*monitor_, current->record, fmt::format("failed: {}", e.what()));
    throw;
  }
}

void MpiCommunicator::fill_inplace_ops(std::span<Task> tasks) {
  inplace_ops_.clear();
  for (const Task& t : tasks) inplace_ops_.push_back({t.record.seq, t.a.dtype(), t.a.raw(), t.a.numel(), t.scale, 0.0});
}

// A group of one-shot all-reduces, completed in issue order; `current` follows the one being completed (what the
// watchdog names).
void MpiCommunicator::run_oneshot(std::span<Task> tasks, const Task*& current) {
  fill_inplace_ops(tasks);
  AllreduceOneshot algorithm(*transport_, inplace_ops_, scratch_, oneshot_workspace_, oneshot_fragment_bytes_);
  algorithm.post();
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (i > 0) move_on(tasks, i, i, i + 1, current);
    algorithm.finish(i);
    tasks[i].work->mark_arrived(inplace_ops_[i].arrived_at);
  }
}

// All-reduces through shared memory, small ones queued together packed into
// common steps.
void MpiCommunicator::run_shm(std::span<Task> tasks, const Task*& current) {
  fill_inplace_ops(tasks);
  size_t in = 0, reached = 0;  // the task the rank waits in; tasks [0, reached) started
  AllreduceShm(*shm_, shm_step_, inplace_ops_, policy_).run([&](size_t first, size_t end) {
    if (first > in || end > reached) move_on(tasks, first > in ? first : 0, std::max(first, reached), end, current);
    in = std::max(in, first);
    reached = std::max(reached, end);
  });
  for (size_t i = 0; i < tasks.size(); ++i) tasks[i].work->mark_arrived(inplace_ops_[i].arrived_at);
}

// Within a group: the rank now waits in #waits_in (those before it are
// complete; 0: no change) and starts collectives [begin, end) (their first
// step; the group's first ones were marked by the progress engine). The
// watchdog names #waits_in and times it from now, not from the group's
// start, which would count the earlier ones against its timeout; and each
// one's wait for its peers (started -> arrived,
// Work::blocked_waiting_for_peers) leaves out this rank's own transfers of
// the earlier ones.
void MpiCommunicator::move_on(std::span<Task> tasks, size_t waits_in, size_t begin, size_t end, const Task*& current) {
  const double now = now_seconds();
  if (begin > 0)
    for (size_t k = begin; k < end; ++k) tasks[k].work->mark_started(tasks[k].work->algorithm(), now);
  if (waits_in == 0) return;
  current = &tasks[waits_in];
  if (!monitor_) return;
  monitor_->finished(tasks[waits_in - 1].record);
  monitor_->started(tasks[waits_in].record, now);
}

// On the thread running tasks (the engine, or a waiting caller).
void MpiCommunicator::run(const Task& task) {
  const auto algo = Algo(task.algorithm);
  const int64_t seq = task.record.seq;
  const Tensor& a = task.a;
  const Tensor& b = task.b;
  if (checks_arrival(task)) {
    ST_ASSERT(!arrivals_.empty() && arrivals_.front().seq() == seq);
    arrivals_.front().wait();
    arrivals_.pop_front();
    task.work->mark_arrived(now_seconds());
  }
  switch (task.record.op) {
    case OpCode::allreduce:
      if (algo == Algo::local)
        scale_inplace(a.dtype(), a.raw(), a.numel(), task.scale);
      else if (algo == Algo::mpi)
        native_->allreduce(a.raw(), a.numel(), a.dtype(), task.scale);
      else if (algo == Algo::ring)
        AllreduceRing(*transport_, seq, a.dtype(), a.raw(), a.numel(), task.scale, ring_chunk_bytes_, scratch_).run();
      else
        AllreduceHierarchical(*hier_node_transport_, *hier_cross_transport_, seq, a.dtype(), a.raw(), a.numel(),
                              task.scale, options_, scratch_, polls_native_)
            .run();
      return;
    case OpCode::reduce_scatter:  // a: input, b: output
      if (algo == Algo::mpi) {
        native_->reduce_scatter(a.raw(), b.raw(), b.numel(), a.dtype(), task.scale, scratch_);
      } else if (algo == Algo::shm) {
        task.work->mark_arrived(
            reduce_scatter_shm(*shm_, shm_step_, seq, a.dtype(), a.raw(), b.raw(), b.numel(), task.scale, policy_));
      } else if (algo == Algo::oneshot) {
        task.work->mark_arrived(reduce_scatter_oneshot(*transport_, seq, a.dtype(), a.raw(), b.raw(), b.numel(),
                                                       task.scale, scratch_, oneshot_workspace_.requests));
      } else if (algo == Algo::local) {
        if (b.raw() != a.raw() && b.nbytes() > 0) std::memcpy(b.raw(), a.raw(), b.nbytes());
        scale_inplace(b.dtype(), b.raw(), b.numel(), task.scale);
      } else {
        const RingLayout layout(a.numel(), size_, ring_chunk_bytes_ / int64_t(dtype_size(a.dtype())));
        ReduceScatterRing(*transport_, layout, a.dtype(), transport_->tag(seq, kTagReduceScatter), a.raw(), b.raw(),
                          task.scale, /*in_place=*/false, scratch_)
            .run();
      }
      return;
    case OpCode::allgather: {  // a: input, b: output
      if (algo == Algo::mpi) {
        native_->allgather(a.raw(), b.raw(), a.numel(), a.dtype());
        return;
      }
      if (algo == Algo::local) {
        if (b.raw() != a.raw() && a.nbytes() > 0) std::memcpy(b.raw(), a.raw(), a.nbytes());
        return;
      }
      if (algo == Algo::shm) {
        task.work->mark_arrived(allgather_shm(*shm_, shm_step_, seq, a.dtype(), a.raw(), b.raw(), a.numel(), policy_));
        return;
      }
      if (algo == Algo::oneshot) {
        task.work->mark_arrived(allgather_oneshot(*transport_, seq, a.dtype(), a.raw(), b.raw(), a.numel(), scratch_,
                                                  oneshot_workspace_.requests));
        return;
      }
      const size_t elem = dtype_size(a.dtype());
      const RingLayout layout(b.numel(), size_, ring_chunk_bytes_ / int64_t(elem));
      AllgatherRing(*transport_, layout, elem, transport_->tag(seq, kTagAllgather), b.raw(), a.raw()).run();
      return;
    }
    case OpCode::broadcast:
      if (algo == Algo::mpi) native_->broadcast(a.raw(), int64_t(a.nbytes()), task.root);
      return;
    case OpCode::barrier:  // the arrival barrier above was it
      return;
  }
}

WorkPtr MpiCommunicator::allreduce(const Tensor& t, ReduceOp op) {
  check_reducible(name_, "allreduce", t);
  Task task;
  task.a = t;
  task.scale = op == ReduceOp::avg ? float(1.0 / size_) : 1.0f;
  task.record.bytes = int64_t(t.nbytes());
  return issue(OpCode::allreduce, pick(OpCode::allreduce, int64_t(t.nbytes())), std::move(task));
}

WorkPtr MpiCommunicator::reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) {
  check_reducible(name_, "reduce_scatter", in);
  check_reducible(name_, "reduce_scatter", out);
  check_reduce_scatter_args(name_, in, out, rank_, size_);
  Task task;
  task.a = in;
  task.b = out;
  task.scale = op == ReduceOp::avg ? float(1.0 / size_) : 1.0f;
  task.record.bytes = int64_t(in.nbytes());
  return issue(OpCode::reduce_scatter, pick(OpCode::reduce_scatter, int64_t(in.nbytes())), std::move(task));
}

WorkPtr MpiCommunicator::allgather(const Tensor& in, const Tensor& out) {
  check_cpu(name_, "allgather", in);
  check_cpu(name_, "allgather", out);
  check_allgather_args(name_, in, out, rank_, size_);
  Task task;
  task.a = in;
  task.b = out;
  task.record.bytes = int64_t(in.nbytes());
  return issue(OpCode::allgather, pick(OpCode::allgather, int64_t(out.nbytes())), std::move(task));
}

WorkPtr MpiCommunicator::broadcast(const Tensor& t, int root) {
  check_cpu(name_, "broadcast", t);
  ST_CHECK(root >= 0 && root < size_, "comm '{}': broadcast from rank {} of {}", name_, root, size_);
  Task task;
  task.a = t;
  task.root = root;
  task.record.bytes = int64_t(t.nbytes());
  return issue(OpCode::broadcast, pick(OpCode::broadcast, int64_t(t.nbytes())), std::move(task));
}

WorkPtr MpiCommunicator::barrier() { return issue(OpCode::barrier, pick(OpCode::barrier, 0), Task{}); }

std::unique_ptr<Communicator> make_mpi_world_communicator(const CommOptions& options) {
  return MpiCommunicator::make_world(options);
}

}  // namespace shardtrain::comm
