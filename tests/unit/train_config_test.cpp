#include "runtime/nn/model_registry.h"
#include "runtime/train/config.h"

#include <gtest/gtest.h>
#include <gmock/gmock.h>
#include <fmt/format.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace shardtrain;
using namespace shardtrain::train;
using ::testing::HasSubstr;

namespace {

// One directory per process (ctest runs the tests of this file in parallel),
// removed when the process ends.
struct ScratchDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / fmt::format("shardtrain-config-test-{}", ::getpid());
  ScratchDir() { std::filesystem::create_directories(path); }
  ~ScratchDir() { std::filesystem::remove_all(path); }
};

std::string write_config(const std::string& text) {
  static ScratchDir dir;
  static int counter = 0;
  const auto path = dir.path / fmt::format("c{}.toml", counter++);
  std::ofstream(path) << text;
  return path.string();
}

std::string error_of(const std::string& text, const std::vector<std::string>& sets = {}) {
  try {
    load_config(write_config(text), sets);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(Config, ReadsValuesAndKeepsDefaults) {
  Config c = load_config(write_config(R"(
[train]
epochs = 3
global_batch_size = 32
[model]
kind = "cnn"
channels = [8, 16]
[optim]
lr = 1     # an integer where a float is expected is fine
)"));
  EXPECT_EQ(c.train.epochs, 3);
  EXPECT_EQ(c.train.global_batch_size, 32);
  EXPECT_EQ(c.model.kind, nn::ModelKind::cnn);
  EXPECT_EQ(c.model.channels, (std::vector<int64_t>{8, 16}));
  EXPECT_FLOAT_EQ(c.optim.lr, 1.0f);
  EXPECT_EQ(c.train.seed, 1);  // default
  EXPECT_EQ(c.parallel.strategy, "none");
}

TEST(Config, UnknownKeyIsNamedWithTheValidKeys) {
  const std::string e = error_of("[train]\nepoch = 3\n");
  EXPECT_THAT(e, HasSubstr("unknown config key train.epoch"));
  EXPECT_THAT(e, HasSubstr("valid keys in [train]:"));
  EXPECT_THAT(e, HasSubstr("epochs"));
  EXPECT_THAT(e, HasSubstr(".toml"));
  EXPECT_THAT(error_of("[trian]\nepochs = 3\n"), HasSubstr("unknown section [trian]"));
  EXPECT_THAT(error_of("train = 3\n"), HasSubstr("train must be a table"));
}

TEST(Config, WrongTypeNamesTheKeyPath) {
  EXPECT_THAT(error_of("[train]\nepochs = \"three\"\n"),
              HasSubstr("config key train.epochs: expected an integer, got a string"));
  EXPECT_THAT(error_of("[optim]\nnesterov = 1\n"), HasSubstr("optim.nesterov: expected a boolean"));
  EXPECT_THAT(error_of("[model]\nhidden = [1, \"a\"]\n"), HasSubstr("model.hidden: expected an array of integers"));
  EXPECT_THAT(error_of("[train]\nepochs = 2.5\n"), HasSubstr("train.epochs: expected an integer, got a float"));
}

TEST(Config, SyntaxErrorsNameFileLineAndColumn) {
  const std::string e = error_of("[train]\nepochs = = 3\n");
  EXPECT_THAT(e, HasSubstr(".toml:2:"));
}

TEST(Config, MissingFileIsNamed) {
  try {
    load_config("/nonexistent/dir/run.toml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/dir/run.toml: cannot open"));
  }
}

TEST(Config, SetParsesTomlAndFallsBackToString) {
  const std::string path = write_config("[train]\nepochs = 3\n");
  Config c = load_config(path, {"train.epochs=7", "parallel.strategy=ddp", "model.hidden=[64,32]",
                                "optim.nesterov=true", "run.dir=runs/x y", "optim.lr=0.5"});
  EXPECT_EQ(c.train.epochs, 7);
  EXPECT_EQ(c.parallel.strategy, "ddp");
  EXPECT_EQ(c.model.hidden, (std::vector<int64_t>{64, 32}));
  EXPECT_TRUE(c.optim.nesterov);
  EXPECT_EQ(c.run.dir, "runs/x y");
  EXPECT_FLOAT_EQ(c.optim.lr, 0.5f);
}

TEST(Config, SetErrorsNameTheArgument) {
  const std::string path = write_config("");
  auto err = [&](const std::string& set) {
    try {
      load_config(path, {set});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_THAT(err("train.epochz=3"), HasSubstr("unknown config key train.epochz"));
  EXPECT_THAT(err("train.epochs=abc"), HasSubstr("--set train.epochs: config key train.epochs: expected an integer"));
  EXPECT_THAT(err("train.epochs"), HasSubstr("expected key=value"));
  EXPECT_THAT(err("train.epochs.x=1"), HasSubstr("train.epochs: expected an integer, got a table"));
}

TEST(Config, TildeRemovesAKeyOrATableAndAnUnknownOneIsAnError) {
  const std::string path = write_config("[parallel]\nstrategy = \"ddp\"\n[parallel.ddp]\nbucket_mb = 4.0\n");
  EXPECT_DOUBLE_EQ(load_config(path, {"~parallel.ddp.bucket_mb"}).parallel.ddp.bucket_mb, 25.0);
  EXPECT_DOUBLE_EQ(load_config(path, {"~parallel.ddp"}).parallel.ddp.bucket_mb, 25.0);
  EXPECT_EQ(load_config(path, {"~parallel"}).parallel.strategy, "none");
  // A known key or section the file does not set: nothing to do, no error
  // (one command line for configs with and without it).
  EXPECT_EQ(error_of("", {"~parallel.ddp"}), "(no error)");
  EXPECT_EQ(error_of("[parallel]\n", {"~parallel.fsdp.prefetch"}), "(no error)");
  // A misspelt one would do nothing without a word.
  EXPECT_THAT(
      error_of("", {"~parallel.dpp"}),
      HasSubstr("--set ~parallel.dpp: parallel.dpp is no config key or section, so there is nothing to remove"));
}

// Another strategy's section in the file is set aside with a notice, so one
// command line switches strategies across configs; the same keys given with
// --set would do nothing, and are an error.
TEST(Config, KeysOfAStrategyNotSelectedAreANoticeFromTheFileAndAnErrorFromSet) {
  const std::string ddp_file = "[parallel]\nstrategy = \"ddp\"\n[parallel.ddp]\nbucket_mb = 4.0\n";
  const Config fsdp = load_config(write_config(ddp_file), {"parallel.strategy=fsdp"});
  EXPECT_EQ(fsdp.parallel.strategy, "fsdp");
  ASSERT_EQ(fsdp.notices.size(), 1u);
  EXPECT_THAT(fsdp.notices[0], HasSubstr("[parallel.ddp] applies to parallel.strategy \"ddp\" or \"zero1\", not to "
                                         "\"fsdp\": not used"));
  EXPECT_EQ(load_config(write_config(ddp_file), {"parallel.strategy=none"}).notices.size(), 1u);
  EXPECT_TRUE(load_config(write_config(ddp_file)).notices.empty());
  EXPECT_THAT(error_of(ddp_file, {"parallel.fsdp.prefetch=1"}),
              HasSubstr("--set parallel.fsdp.prefetch: config key parallel.fsdp.prefetch applies to "
                        "parallel.strategy \"fsdp\", but the strategy is \"ddp\""));
  EXPECT_THAT(error_of(ddp_file, {"parallel.strategy=fsdp", "parallel.ddp.bucket_mb=8"}),
              HasSubstr("--set parallel.ddp.bucket_mb: config key parallel.ddp.bucket_mb applies to"));
  // zero1 reads DDP's buckets; removing the section makes FSDP quiet.
  EXPECT_DOUBLE_EQ(load_config(write_config(ddp_file), {"parallel.strategy=zero1"}).parallel.ddp.bucket_mb, 4.0);
  const Config quiet = load_config(write_config(ddp_file), {"parallel.strategy=fsdp", "~parallel.ddp"});
  EXPECT_EQ(quiet.parallel.strategy, "fsdp");
  EXPECT_TRUE(quiet.notices.empty());
}

TEST(Config, ValuesOutOfRangeNameTheKey) {
  EXPECT_THAT(error_of("[train]\nepochs = 0\n"), HasSubstr("train.epochs must be at least 1"));
  EXPECT_THAT(
      error_of("[model]\nkind = \"rnn\"\n"),
      HasSubstr("config key model.kind: \"rnn\" is not one of \"mlp\", \"cnn\", \"gpt\", \"llama\" or \"custom\""));
  EXPECT_THAT(error_of("[target]\nvalue = 88\n"), HasSubstr("accuracy is a fraction"));
  EXPECT_THAT(error_of("[parallel]\nstrategy = \"zero\"\n"), HasSubstr("parallel.strategy \"zero\""));
  EXPECT_THAT(error_of("[optim]\nlr = -1.0\n"), HasSubstr("optim.lr must be positive"));
  EXPECT_THAT(error_of("[runtime]\nblas_threads = 0\n"), HasSubstr("runtime.blas_threads"));
}

// What `train` would refuse, `config` (and `plan`, through load_config)
// refuses too: each layer's own check runs on the config.
TEST(Config, RefusesWhatTheLayersRefuse) {
  EXPECT_THAT(error_of("[comm]\nchunk_bytes = 2147483648\n"), HasSubstr("comm.chunk_bytes must be within"));
  EXPECT_THAT(error_of("[data]\nloader = \"stream\"\ntrain_limit = 100\n"), HasSubstr("data.train_limit works with"));
  EXPECT_THAT(error_of("[schedule]\nkind = \"step\"\n"), HasSubstr("schedule.step_size > 0"));
  EXPECT_THAT(error_of("[optim]\nlr = 0.1\n[schedule]\nmin_lr = 0.5\n"), HasSubstr("schedule.min_lr must be in"));
  EXPECT_THAT(error_of("[model]\nkernel_size = 4\n"), HasSubstr("model.kernel_size must be odd"));
  EXPECT_THAT(error_of("[data]\norder = \"random\"\n"), HasSubstr("config key data.order: \"random\" is not one of"));
  EXPECT_THAT(error_of("[optim]\nbeta2 = 1.0\n"), HasSubstr("optim.beta1 and optim.beta2"));
  // No key means infinity or NaN.
  EXPECT_THAT(error_of("[optim]\nlr = inf\n"), HasSubstr("config key optim.lr: expected a finite number"));
  EXPECT_THAT(error_of("[comm]\ntimeout_s = nan\n"), HasSubstr("expected a finite number"));
}

TEST(Config, ResolvedTomlRoundTrips) {
  Config c = load_config(write_config("[train]\nepochs = 4\n[model]\nhidden = [10]\n"),
                         {"optim.kind=adamw", "target.value=0.5"});
  Config again = load_config(write_config(to_toml(c)));
  EXPECT_EQ(to_toml(again), to_toml(c));
  EXPECT_EQ(again.train.epochs, 4);
  EXPECT_EQ(again.optim.kind, optim::OptimizerKind::adamw);
  // With each strategy: only its own options are written.
  for (const char* strategy : {"none", "ddp", "zero1", "fsdp"}) {
    const Config s = load_config(write_config(""), {fmt::format("parallel.strategy={}", strategy)});
    const std::string text = to_toml(s);
    EXPECT_EQ(to_toml(load_config(write_config(text))), text) << strategy;
    EXPECT_EQ(text.find("fsdp.prefetch") != std::string::npos, std::string(strategy) == "fsdp") << text;
  }
}

TEST(Config, FsdpOnAGpuOnlyWhenTheUnverifiedPathIsAskedFor) {
  const std::vector<std::string> sets = {"parallel.strategy=fsdp", "runtime.device=cuda"};
  ::unsetenv("SHARDTRAIN_UNVERIFIED_GPU_FSDP");
  const std::string e = error_of("", sets);
  EXPECT_THAT(e, HasSubstr("has not been checked on a GPU yet"));
  EXPECT_THAT(e, HasSubstr("SHARDTRAIN_UNVERIFIED_GPU_FSDP=1"));
  ::setenv("SHARDTRAIN_UNVERIFIED_GPU_FSDP", "1", 1);
  EXPECT_EQ(error_of("", sets), "(no error)");
  ::setenv("SHARDTRAIN_UNVERIFIED_GPU_FSDP", "yes", 1);  // only "1"
  EXPECT_THAT(error_of("", sets), HasSubstr("SHARDTRAIN_UNVERIFIED_GPU_FSDP=1"));
  ::unsetenv("SHARDTRAIN_UNVERIFIED_GPU_FSDP");
}

TEST(Config, ExamplesAreValid) {
  for (const char* name : {"fmnist_mlp.toml", "fmnist_cnn.toml"}) {
    Config c = load_config(std::string(SHARDTRAIN_SOURCE_DIR) + "/examples/" + name);
    EXPECT_TRUE(c.target.enabled()) << name;
  }
}

TEST(Config, Gpt2SmallExampleIsGpt2Sized) {
  // Meant for GPUs and synthetic data (it has no target): GPT-2 small's shape.
  const Config c = load_config(std::string(SHARDTRAIN_SOURCE_DIR) + "/examples/gpt2_small.toml");
  EXPECT_EQ(c.model.kind, nn::ModelKind::gpt);
  EXPECT_EQ(c.model.n_layer, 12);
  EXPECT_EQ(c.model.n_head, 12);
  EXPECT_EQ(c.model.n_embd, 768);
  EXPECT_EQ(c.model.block_size, 1024);
  EXPECT_EQ(c.model.vocab_size, 50257);
  EXPECT_EQ(c.runtime.device, train::DeviceKind::cuda);
  EXPECT_FALSE(c.target.enabled());
}

TEST(Config, DocsConfigMdIsCurrent) {
  std::ifstream in(std::string(SHARDTRAIN_SOURCE_DIR) + "/docs/config.md");
  std::stringstream doc;
  doc << in.rdbuf();
  EXPECT_EQ(doc.str(), config_reference_markdown())
      << "docs/config.md is stale: run `build/bin/shardtrain config --reference > docs/config.md`";
}

TEST(Config, CustomModelsTakeTheirOptionsFromATable) {
  nn::ModelDefinition d;
  d.options = {{"width", 8, "hidden width"}, {"blocks", 2, "units"}};
  d.build = [](const nn::ModelContext&) { return nn::BlockList{}; };
  if (!nn::find_model("config_test_model")) nn::register_model("config_test_model", d);
  const std::string text = "[model]\nkind = \"custom\"\nname = \"config_test_model\"\noptions = { width = 16 }\n";
  const Config c = load_config(write_config(text), {"model.options.blocks=3"});
  EXPECT_EQ(c.model.options, (std::map<std::string, double>{{"blocks", 3.0}, {"width", 16.0}}));
  EXPECT_EQ(to_toml(load_config(write_config(to_toml(c)))), to_toml(c));
  EXPECT_THAT(error_of(text, {"model.options.widht=3"}), HasSubstr("model.options.widht: model \"config_test_model\" "
                                                                   "takes width, blocks"));
  EXPECT_THAT(error_of(text, {"model.options.width=\"wide\""}), HasSubstr("width: expected a finite number"));
  EXPECT_THAT(error_of(text, {"model.name=other"}), HasSubstr("no model named \"other\" is registered"));
  EXPECT_THAT(error_of("[model]\nkind = \"mlp\"\noptions = { width = 16 }\n"),
              HasSubstr("model.name and model.options are for model.kind = \"custom\""));
}
