#include "runtime/train/gradient_comm.h"

#include "runtime/comm/gpu_backend.h"
#include "runtime/comm/routing_communicator.h"
#include "runtime/telemetry/nccl_log.h"
#include "runtime/train/session.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace shardtrain::train {

std::unique_ptr<comm::Communicator> make_gradient_communicator(comm::Communicator& world,
                                                               const comm::CommOptions& options, Device device,
                                                               RunDir& run, FabricInfo* fabric_out) {
  comm::GpuBackend backend = options.backend;
  if (backend == comm::GpuBackend::automatic) {
    std::string why;
    const bool here = comm::nccl_loadable(&why);
    const double everywhere = sum_over_ranks(world, {here ? 1.0 : 0.0})[0];
    backend = everywhere == double(world.size()) ? comm::GpuBackend::nccl : comm::GpuBackend::mpi;
    if (backend == comm::GpuBackend::mpi)
      run.log(fmt::format("[init] comm: NCCL is not usable on every rank ({} here), gradients go over MPI",
                          here ? "it loads" : why));
  }
  if (backend == comm::GpuBackend::mpi) {
    auto c = comm::make_device_mpi_world_communicator(device.index, options);
    run.log(fmt::format("[init] comm: gradients on {} over MPI, {}", device.str(), comm::device_mpi_mode(*c)));
    return c;
  }
  const std::string log_dir = (std::filesystem::path(run.path()) / "nccl").string();
  std::filesystem::create_directories(log_dir);
  telemetry::set_nccl_debug_environment(log_dir, world.rank());
  auto c =
      std::make_unique<comm::RoutingCommunicator>(world, comm::make_nccl_world_communicator(device.index, options));
  world.barrier()->wait();  // every rank's init lines are in its file
  if (world.rank() == 0) {
    const telemetry::FabricReport fabric = telemetry::read_nccl_logs(log_dir);
    std::istringstream text(telemetry::fabric_summary_text(fabric));
    for (std::string line; std::getline(text, line);)
      if (!line.empty()) run.log("[init] fabric: " + line);
    std::ofstream(std::filesystem::path(log_dir) / "fabric.json") << telemetry::fabric_json(fabric).dump(2) << "\n";
    if (fabric_out) *fabric_out = {telemetry::fabric_json(fabric), telemetry::fabric_summary_text(fabric)};
  }
  return c;
}

}  // namespace shardtrain::train
