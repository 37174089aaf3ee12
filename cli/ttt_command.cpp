// shardtrain ttt CONFIG --seeds N: MLPerf's time to train over N seeds, by
// tools/ttt/shardtrain_ttt.py.
#include "cli/command.h"
#include "cli/python_tool.h"

#include <memory>

namespace shardtrain::cli {

void add_ttt_command(CLI::App& app, std::vector<Command>& out) {
  struct Args {
    std::string config, out;
    int seeds = 5, ranks = 1;
    double timeout = 3600;
    std::vector<std::string> sets;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "ttt", "Time to train as MLPerf scores it: N seeds to the config's target, the fastest and slowest dropped");
  cmd->add_option("config", a->config, "The config (with a [target])")->required();
  cmd->add_option("--seeds", a->seeds, "Runs, with train.seed = 1..N")
      ->check(CLI::Range(3, 1000))
      ->capture_default_str();
  cmd->add_option("--ranks", a->ranks, "Ranks per run (through shardrun)")
      ->check(CLI::Range(1, kMaxCount))
      ->capture_default_str();
  cmd->add_option("--out", a->out, "Where the runs go (default runs/ttt-<config name>; a rerun keeps complete runs)");
  cmd->add_option("--set", a->sets, "A config override for every run, as train's (repeat)");
  cmd->add_option("--timeout", a->timeout, "Seconds one run may take")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  out.push_back({cmd, [a](Process&) -> int {
                   std::vector<std::string> args = {a->config,
                                                    "--seeds",
                                                    std::to_string(a->seeds),
                                                    "--ranks",
                                                    std::to_string(a->ranks),
                                                    "--timeout",
                                                    std::to_string(a->timeout)};
                   if (!a->out.empty()) args.insert(args.end(), {"--out", a->out});
                   for (const std::string& s : a->sets) args.insert(args.end(), {"--set", s});
                   exec_python_tool("shardtrain_ttt.py", args);
                 }});
}

}  // namespace shardtrain::cli
