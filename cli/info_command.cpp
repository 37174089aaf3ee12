// shardtrain info: the build and what this machine offers it.
#include "cli/command.h"
#include "runtime/train/info.h"

#include <fmt/format.h>

namespace shardtrain::cli {

void add_info_command(CLI::App& app, std::vector<Command>& out) {
  CLI::App* cmd = app.add_subcommand("info", "Show the build and what this machine offers it");
  out.push_back({cmd, [](Process& p) {
                   p.mpi();
                   fmt::print("{}", train::build_info());
                   return 0;
                 }});
}

}  // namespace shardtrain::cli
