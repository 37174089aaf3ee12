// shardtrain config [CONFIG] [--set k=v]... [--reference]: validate a config
// as `train` would and print it resolved, or print the key reference.
#include "cli/command.h"
#include "runtime/core/error.h"
#include "runtime/train/config.h"

#include <fmt/format.h>

namespace shardtrain::cli {

void add_config_command(CLI::App& app, std::vector<Command>& out) {
  struct Args {
    std::string path;
    std::vector<std::string> overrides;
    bool reference = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("config", "Validate a config and print it resolved, or print the key reference");
  cmd->add_option("config", a->path, "TOML config");
  cmd->add_option("--set", a->overrides, "Override a config key (repeatable)")->allow_extra_args(false);
  cmd->add_flag("--reference", a->reference, "Print the reference of every key as Markdown (docs/config.md)");
  out.push_back({cmd, [a](Process&) {
                   if (a->reference) {
                     fmt::print("{}", train::config_reference_markdown());
                     return 0;
                   }
                   if (a->path.empty()) throw Error("config: give a config file, or --reference");
                   const train::Config config = train::load_config(a->path, a->overrides);
                   for (const std::string& notice : config.notices)
                     fmt::print(stderr, "shardtrain: notice: {}\n", notice);
                   fmt::print("{}", train::to_toml(config));
                   return 0;
                 }});
}

}  // namespace shardtrain::cli
