// shardtrain report RUN_DIR [--out FILE]: the run's summary and its HTML
// report, by tools/report/shardtrain_report.py (installed next to the
// program; matplotlib from Debian's python3).
#include "cli/command.h"
#include "runtime/core/error.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace shardtrain::cli {

void add_report_command(CLI::App& app, std::vector<Command>& out) {
  struct Args {
    std::string run_dir, out;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("report", "Print a run's summary and write its HTML report (report.html)");
  cmd->add_option("run_dir", a->run_dir, "The run directory")->required();
  cmd->add_option("--out", a->out, "HTML file to write (default RUN_DIR/report.html)");
  out.push_back(
      {cmd, [a](Process&) -> int {
         const std::string script =
             (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "shardtrain_report.py").string();
         ST_CHECK(std::filesystem::exists(script), "{}: the report script is missing (rebuild)", script);
         std::vector<std::string> args = {"/usr/bin/python3", script, a->run_dir};
         if (!a->out.empty()) args.insert(args.end(), {"--out", a->out});
         std::vector<char*> argv;
         argv.reserve(args.size() + 1);
         for (auto& arg : args) argv.push_back(arg.data());
         argv.push_back(nullptr);
         execv(argv[0], argv.data());
         throw Error(
             fmt::format("cannot run /usr/bin/python3 (install python3-matplotlib: scripts/install-deps.sh): {}",
                         std::strerror(errno)));
       }});
}

}  // namespace shardtrain::cli
