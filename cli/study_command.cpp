// shardtrain study run|table|report ...: scaling studies of the strategies
// across emulated nodes and link rates, by tools/study/shardtrain_study.py,
// which parses its own arguments (`shardtrain study --help`).
#include "cli/command.h"
#include "cli/python_tool.h"

namespace shardtrain::cli {

void add_study_command(CLI::App& app, std::vector<Command>& out) {
  CLI::App* cmd = app.add_subcommand(
      "study", "Compare strategies across nodes and link rates: run, table, report (docs/scaling.md)");
  cmd->prefix_command();  // every argument goes to the tool, --help included
  cmd->set_help_flag();
  out.push_back({cmd, [cmd](Process&) -> int {
                   std::vector<std::string> args = cmd->remaining();
                   exec_python_tool("shardtrain_study.py", args);
                 }});
}

}  // namespace shardtrain::cli
