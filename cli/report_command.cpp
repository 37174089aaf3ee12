// shardtrain report RUN_DIR [--out FILE]: the run's summary and its HTML
// report, by tools/report/shardtrain_report.py.
#include "cli/command.h"
#include "cli/python_tool.h"

#include <memory>

namespace shardtrain::cli {

void add_report_command(CLI::App& app, std::vector<Command>& out) {
  struct Args {
    std::string run_dir, out;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("report", "Print a run's summary and write its HTML report (report.html)");
  cmd->add_option("run_dir", a->run_dir, "The run directory")->required();
  cmd->add_option("--out", a->out, "HTML file to write (default RUN_DIR/report.html)");
  out.push_back({cmd, [a](Process&) -> int {
                   std::vector<std::string> args = {a->run_dir};
                   if (!a->out.empty()) args.insert(args.end(), {"--out", a->out});
                   exec_python_tool("shardtrain_report.py", args);
                 }});
}

}  // namespace shardtrain::cli
