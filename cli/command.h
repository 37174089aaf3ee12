// The command-line front end: one file per subcommand, each adding itself to
// the CLI11 app with add_*_command and returning what runs it once the
// arguments are parsed. main.cpp parses, runs the one given and turns an
// error into one line (runtime/train/fatal_error.h).
#pragma once

#include "runtime/comm/transport/mpi_env.h"
#include "io/loader_options.h"
#include "runtime/core/enum_names.h"

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace shardtrain::cli {

// The upper bound of a count flag's range check (steps, rounds, ranks).
constexpr int kMaxCount = 1 << 30;

// What a running command may need from the process: MPI, started on demand
// (commands that run under mpirun), so the error handler knows the rank.
class Process {
 public:
  Process(int& argc, char**& argv) : argc_(argc), argv_(argv) {}
  comm::MpiEnv& mpi() {
    if (!mpi_) mpi_.emplace(&argc_, &argv_);
    return *mpi_;
  }
  int rank() const { return mpi_ ? mpi_->rank() : 0; }
  int world_size() const { return mpi_ ? mpi_->world_size() : 1; }

 private:
  int& argc_;
  char**& argv_;
  std::optional<comm::MpiEnv> mpi_;
};

// A (sub)command added to the app and how to run it; the options it parses
// into live in the closure.
struct Command {
  CLI::App* app = nullptr;
  std::function<int(Process&)> run;
};

void add_train_command(CLI::App& app, std::vector<Command>& out);
void add_prep_commands(CLI::App& app, std::vector<Command>& out);
void add_bench_commands(CLI::App& app, std::vector<Command>& out);
void add_stage_command(CLI::App& app, std::vector<Command>& out);
void add_upload_command(CLI::App& app, std::vector<Command>& out);
void add_ttt_command(CLI::App& app, std::vector<Command>& out);
// The --s3-* flags of the commands that read or write an object store.
void add_s3_options(CLI::App* cmd, io::S3Options& s3);
void add_config_command(CLI::App& app, std::vector<Command>& out);
void add_plan_command(CLI::App& app, std::vector<Command>& out);
void add_report_command(CLI::App& app, std::vector<Command>& out);
void add_study_command(CLI::App& app, std::vector<Command>& out);
void add_info_command(CLI::App& app, std::vector<Command>& out);
void add_doctor_command(CLI::App& app, std::vector<Command>& out);

// A flag taking one of an enum's names (runtime/core/enum_names.h).
template <typename E>
CLI::Option* add_enum_option(CLI::App* cmd, const std::string& flag, E& value, const std::string& help) {
  std::vector<std::string> names;
  for (const auto& n : enum_names(E{})) names.emplace_back(n.name);
  return cmd
      ->add_option_function<std::string>(
          flag, [&value](const std::string& name) { value = *parse_enum<E>(name); }, help)
      ->check(CLI::IsMember(names))
      ->default_str(std::string(name_of(value)));
}

}  // namespace shardtrain::cli
