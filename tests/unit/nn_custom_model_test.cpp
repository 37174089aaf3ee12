// Models registered from outside the library (model_registry.h) and the
// gradient check offered for their layers (gradient_check.h).
#include "kernels/ops.h"
#include "runtime/core/error.h"
#include "runtime/nn/activation.h"
#include "runtime/nn/gradient_check.h"
#include "runtime/nn/linear.h"
#include "runtime/nn/model_registry.h"
#include "runtime/nn/models.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace shardtrain;
using namespace shardtrain::nn;

namespace {

// y = x * w elementwise: a layer of one's own. `mistake` breaks its
// backward in one of the ways the check must catch.
enum class Mistake { none, wrong_weight_gradient, wrong_input_gradient, ignores_accumulate };

class Scale final : public Layer {
 public:
  Scale(int64_t n, Mistake mistake) : n_(n), mistake_(mistake) {}
  std::string kind() const override { return "scale"; }
  std::vector<ParamSpec> param_specs() const override { return {{"weight", Shape{n_}, Init::ones}}; }
  void bind(std::span<const Tensor> params, std::span<const Tensor> grads) override {
    w_ = params[0];
    dw_ = grads[0];
  }
  Shape output_shape(const Shape& in) const override {
    ST_CHECK(in.numel() == n_, "scale of {} got {}", n_, in.str());
    return in;
  }
  void forward(const Tensor& in, const Tensor& out) override {
    in_ = in;
    for (int64_t b = 0; b < in.dim(0); ++b)
      for (int64_t i = 0; i < n_; ++i) out.f32()[b * n_ + i] = in.f32()[b * n_ + i] * w_.f32()[i];
  }
  void backward(const Tensor& dout, const Tensor& din, bool accumulate) override {
    const bool add = accumulate && mistake_ != Mistake::ignores_accumulate;
    for (int64_t i = 0; i < n_; ++i) {
      double g = 0;
      for (int64_t b = 0; b < dout.dim(0); ++b) g += double(dout.f32()[b * n_ + i]) * in_.f32()[b * n_ + i];
      if (mistake_ == Mistake::wrong_weight_gradient && i == 1) g *= 0.5;
      dw_.f32()[i] = float(g) + (add ? dw_.f32()[i] : 0.0f);
    }
    if (!din.defined()) return;
    for (int64_t k = 0; k < din.numel(); ++k)
      din.f32()[k] = dout.f32()[k] * w_.f32()[k % n_] * (mistake_ == Mistake::wrong_input_gradient ? -1.0f : 1.0f);
  }

 private:
  int64_t n_;
  Mistake mistake_;
  Tensor w_, dw_, in_;
};

ModelDefinition scaled_mlp() {
  ModelDefinition d;
  d.description = "linear, relu, scale, linear";
  d.options = {{"width", 8, "hidden width"}, {"depth", 1, "hidden layers"}};
  d.build = [](const ModelContext& m) {
    BlockList blocks;
    Shape shape = m.input_sample();
    int64_t in = shape.numel();
    for (int64_t i = 0; i < m.int_option("depth"); ++i) {
      std::vector<std::unique_ptr<Layer>> layers;
      layers.push_back(std::make_unique<Linear>(in, m.int_option("width")));
      layers.push_back(std::make_unique<ReLU>());
      layers.push_back(std::make_unique<Scale>(m.int_option("width"), Mistake::none));
      shape = add_sequential_block(blocks, fmt::format("hidden{}", i), std::move(layers), shape);
      in = m.int_option("width");
    }
    std::vector<std::unique_ptr<Layer>> head;
    head.push_back(std::make_unique<Linear>(in, m.num_classes()));
    add_sequential_block(blocks, "head", std::move(head), shape);
    return blocks;
  };
  return d;
}

// Registered once for the whole test program.
const bool registered = [] {
  register_model("scaled_mlp", scaled_mlp());
  ModelDefinition wrong_output = scaled_mlp();
  wrong_output.build = [](const ModelContext& m) {
    BlockList blocks;
    std::vector<std::unique_ptr<Layer>> layers;
    layers.push_back(std::make_unique<Linear>(m.input_sample().numel(), m.num_classes() + 1));
    add_sequential_block(blocks, "head", std::move(layers), m.input_sample());
    return blocks;
  };
  register_model("one_logit_too_many", wrong_output);
  ModelDefinition twins = scaled_mlp();
  twins.build = [](const ModelContext& m) {
    BlockList blocks;
    for (int i = 0; i < 2; ++i) {
      std::vector<std::unique_ptr<Layer>> layers;
      layers.push_back(std::make_unique<Scale>(m.input_sample().numel(), Mistake::none));
      add_sequential_block(blocks, "same", std::move(layers), m.input_sample());
    }
    return blocks;
  };
  register_model("twins", twins);
  return true;
}();

ModelSpec custom(const std::string& name, std::map<std::string, double> options = {}) {
  ModelSpec spec;
  spec.kind = ModelKind::custom;
  spec.name = name;
  spec.options = std::move(options);
  return spec;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(CustomModel, BuildsFromItsOptionsAndTrainsLikeTheOthers) {
  ASSERT_TRUE(registered);
  auto model = build_model(custom("scaled_mlp", {{"width", 6}, {"depth", 2}}), Shape{1, 2, 2}, 3);
  ASSERT_EQ(model->num_blocks(), 3);
  EXPECT_EQ(model->block(1).name(), "hidden1");
  // Linear 4->6, scale 6, linear 6->6, scale 6, linear 6->3; depth's default is 1.
  EXPECT_EQ(model->flat().parameter_count(), (4 * 6 + 6 + 6) + (6 * 6 + 6 + 6) + (6 * 3 + 3));
  EXPECT_EQ(build_model(custom("scaled_mlp"), Shape{4}, 3)->num_blocks(), 2);
  EXPECT_EQ(model_name(custom("scaled_mlp")), "scaled_mlp");
  model->initialize(1);
  Tensor x = Tensor::empty({5, 1, 2, 2});
  for (float& v : x.f32_span()) v = 0.25f;
  EXPECT_EQ(model->forward(x).shape(), (Shape{5, 3}));
}

TEST(CustomModel, MistakesInTheConfigOrTheBuilderAreErrors) {
  ASSERT_TRUE(registered);
  const std::string unknown = error_of([] { validate(custom("resnet9000")); });
  EXPECT_NE(unknown.find("no model named \"resnet9000\""), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("one_logit_too_many, scaled_mlp, twins"), std::string::npos) << unknown;
  const std::string option = error_of([] { validate(custom("scaled_mlp", {{"widht", 3}})); });
  EXPECT_NE(option.find("model.options.widht"), std::string::npos) << option;
  EXPECT_NE(option.find("width, depth"), std::string::npos) << option;
  EXPECT_NE(error_of([] {
              build_model(custom("scaled_mlp", {{"width", 2.5}}), Shape{4}, 3);
            }).find("whole number"),
            std::string::npos);
  EXPECT_NE(error_of([] { validate(custom("")); }).find("needs model.name"), std::string::npos);
  ModelSpec mlp;
  mlp.name = "scaled_mlp";
  EXPECT_NE(error_of([&] { validate(mlp); }).find("for model.kind = \"custom\""), std::string::npos);
  EXPECT_NE(error_of([] { build_model(custom("one_logit_too_many"), Shape{4}, 3); }).find("[3]"), std::string::npos);
  EXPECT_NE(error_of([] { build_model(custom("twins"), Shape{4}, 3); }).find("two Blocks are named \"same\""),
            std::string::npos);
  EXPECT_NE(error_of([] { register_model("scaled_mlp", scaled_mlp()); }).find("registered already"), std::string::npos);
  EXPECT_THROW(register_model("no_builder", ModelDefinition{}), Error);
  EXPECT_EQ(find_model("no_builder"), nullptr);
}

TEST(GradientCheck, PassesTheLibrarysLayersAndBlocks) {
  Linear linear(5, 4);
  const GradientCheckResult r = check_gradients(linear, Shape{5});
  EXPECT_TRUE(r.passed()) << r.summary();
  EXPECT_EQ(r.checked, 5 * 4 + 4 + 3 * 5);
  Scale scale(6, Mistake::none);
  EXPECT_TRUE(check_gradients(scale, Shape{2, 3}).passed());
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Linear>(6, 7));
  layers.push_back(std::make_unique<ReLU>());
  layers.push_back(std::make_unique<Scale>(7, Mistake::none));
  SequentialBlock block("b", std::move(layers), Shape{6});
  const GradientCheckResult b = check_gradients(block, Shape{6});
  EXPECT_TRUE(b.passed()) << b.summary();
}

TEST(GradientCheck, CatchesWrongGradientsAndBrokenConventions) {
  for (auto [mistake, what] : {std::pair{Mistake::wrong_weight_gradient, "param weight[1]"},
                               std::pair{Mistake::wrong_input_gradient, "input["},
                               std::pair{Mistake::ignores_accumulate, "accumulate = true"}}) {
    Scale scale(4, mistake);
    const GradientCheckResult r = check_gradients(scale, Shape{4});
    EXPECT_FALSE(r.passed()) << what;
    EXPECT_NE(r.summary().find(what), std::string::npos) << r.summary();
  }
}
