#include "runtime/nn/gradient_check.h"

#include "runtime/core/dtype_names.h"
#include "runtime/core/error.h"
#include "runtime/core/rng.h"
#include "runtime/nn/flat_parameters.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

namespace shardtrain::nn {
namespace {

// What the check needs of a Layer or a Block.
struct Subject {
  std::vector<ParamSpec> specs;
  std::function<void(std::span<const Tensor>, std::span<const Tensor>)> bind;
  std::function<Tensor(const Tensor&)> forward;  // [B, in] -> [B, out]
  std::function<void(const Tensor&, const Tensor&, bool)> backward;
};

void fill(float* x, int64_t n, Rng& rng, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) x[i] = rng.uniform(lo, hi);
}

// Random values of the parameter's scale: U(+-1/sqrt(fan_in)), around 1 for
// a gain.
void randomize(const Tensor& param, const ParamSpec& spec, Rng& rng) {
  const float scale = spec.fan_in > 1 ? 1.0f / std::sqrt(float(spec.fan_in)) : 0.5f;
  fill(param.f32(), param.numel(), rng, -scale, scale);
  if (spec.init == Init::ones)
    for (float& v : param.f32_span()) v += 1.0f;
}

// sum(out * r), in double.
double loss(const Tensor& out, const std::vector<float>& r) {
  double sum = 0.0;
  const float* o = out.f32();
  for (size_t i = 0; i < r.size(); ++i) sum += double(o[i]) * double(r[i]);
  return sum;
}

class Checker {
 public:
  Checker(const Subject& s, const GradientCheckOptions& o, GradientCheckResult& result)
      : s_(s), o_(o), result_(result) {}

  // Compares grad[k] with the central difference of the loss in x[k], for
  // up to max_per_tensor elements k of the tensor spread over it.
  void compare(const std::string& what, const Tensor& x, const Tensor& grad, const Tensor& in,
               const std::vector<float>& r) {
    const int64_t n = x.numel(), count = std::min(n, o_.max_per_tensor);
    for (int64_t j = 0; j < count; ++j) {
      const int64_t k = count == n ? j : j * n / count;
      float& v = x.f32()[k];
      const float saved = v;
      v = saved + o_.step;
      const double up = loss(s_.forward(in), r);
      v = saved - o_.step;
      const double down = loss(s_.forward(in), r);
      v = saved;
      const double numeric = (up - down) / (2.0 * double(o_.step)), analytic = grad.f32()[k];
      const double excess = std::fabs(analytic - numeric) / (o_.abs_tolerance + o_.rel_tolerance * std::fabs(numeric));
      result_.worst_excess = std::max(result_.worst_excess, excess);
      ++result_.checked;
      if (excess > 1.0 || !std::isfinite(analytic))
        fail(fmt::format("{}[{}]: analytic {:.6g}, numeric {:.6g}", what, k, analytic, numeric));
    }
  }

  void fail(const std::string& what) {
    if (result_.failed++ == 0) result_.first_failure = what;
  }

 private:
  const Subject& s_;
  const GradientCheckOptions& o_;
  GradientCheckResult& result_;
};

GradientCheckResult run_check(const Subject& s, const Shape& in_sample, const GradientCheckOptions& o) {
  ST_CHECK(o.batch >= 1 && o.step > 0 && o.max_per_tensor >= 1,
           "gradient check: batch, step and max_per_tensor "
           "must be positive");
  FlatParameters flat({"checked"}, {s.specs});
  const std::vector<Tensor> params = flat.param_views(0), grads = flat.grad_views(0);
  Rng rng(o.seed);
  for (size_t i = 0; i < params.size(); ++i) randomize(params[i], s.specs[i], rng);
  s.bind(params, grads);

  Tensor in = Tensor::empty(batched(o.batch, in_sample));
  fill(in.f32(), in.numel(), rng, -1.0f, 1.0f);
  const Tensor out = s.forward(in);
  ST_CHECK(out.dtype() == DType::f32 && out.dim(0) == o.batch,
           "gradient check: the forward returned {} {}, not f32 "
           "with the batch first",
           out.shape().str(), name_of(out.dtype()));
  std::vector<float> r(size_t(out.numel()));
  for (float& v : r) v = rng.uniform(-1.0f, 1.0f);
  Tensor dout = Tensor::empty(out.shape());
  std::copy(r.begin(), r.end(), dout.f32());
  Tensor din = Tensor::empty(in.shape());

  GradientCheckResult result;
  Checker checker(s, o, result);
  // Garbage first: backward must overwrite the gradients, not add to them.
  fill(flat.grads().f32(), flat.numel(), rng, -7.0f, 7.0f);
  fill(din.f32(), din.numel(), rng, -7.0f, 7.0f);
  s.backward(dout, din, /*accumulate=*/false);
  const std::vector<float> once(flat.grads().f32(), flat.grads().f32() + flat.numel());
  const std::vector<float> din_once(din.f32(), din.f32() + din.numel());

  for (size_t i = 0; i < params.size(); ++i)
    checker.compare(fmt::format("param {}", s.specs[i].name), params[i], grads[i], in, r);
  checker.compare("input", in, din, in, r);

  // accumulate = true adds this backward's gradients to the ones there.
  s.forward(in);
  s.backward(dout, din, /*accumulate=*/true);
  for (size_t i = 0; i < params.size(); ++i) {
    const int64_t base = grads[i].f32() - flat.grads().f32();
    for (int64_t k = 0; k < grads[i].numel(); ++k) {
      const float want = 2.0f * once[size_t(base + k)], got = grads[i].f32()[k];
      if (std::fabs(got - want) > 1e-5f * (1.0f + std::fabs(want))) {
        checker.fail(
            fmt::format("param {}[{}]: backward with accumulate = true gave {:.6g}, not twice {:.6g} (it "
                        "must add to the gradient)",
                        s.specs[i].name, k, got, once[size_t(base + k)]));
        break;
      }
    }
  }
  for (int64_t k = 0; k < din.numel(); ++k) {
    if (std::fabs(din.f32()[k] - din_once[size_t(k)]) > 1e-5f * (1.0f + std::fabs(din_once[size_t(k)]))) {
      checker.fail(
          fmt::format("input[{}]: the input gradient changed under accumulate = true ({:.6g}, was {:.6g}); "
                      "it is always overwritten",
                      k, din.f32()[k], din_once[size_t(k)]));
      break;
    }
  }
  return result;
}

}  // namespace

std::string GradientCheckResult::summary() const {
  if (passed())
    return fmt::format("gradient check passed: {} elements, worst at {:.2f} of the tolerance", checked, worst_excess);
  if (checked == 0) return "gradient check failed: nothing was checked";
  return fmt::format("gradient check failed: {} of {} checks, first {}", failed, checked, first_failure);
}

GradientCheckResult check_gradients(Layer& layer, const Shape& in_sample, const GradientCheckOptions& options) {
  const Shape out_sample = layer.output_shape(in_sample);
  Tensor out;
  Subject s;
  s.specs = layer.param_specs();
  s.bind = [&](std::span<const Tensor> p, std::span<const Tensor> g) { layer.bind(p, g); };
  s.forward = [&](const Tensor& in) {
    if (!out.defined()) out = Tensor::empty(batched(in.dim(0), out_sample));
    layer.forward(in, out);
    return out;
  };
  s.backward = [&](const Tensor& dout, const Tensor& din, bool accumulate) { layer.backward(dout, din, accumulate); };
  return run_check(s, in_sample, options);
}

GradientCheckResult check_gradients(Block& block, const Shape& in_sample, const GradientCheckOptions& options) {
  Subject s;
  s.specs = block.param_specs();
  s.bind = [&](std::span<const Tensor> p, std::span<const Tensor> g) { block.bind(p, g); };
  s.forward = [&](const Tensor& in) { return block.forward(in); };
  s.backward = [&](const Tensor& dout, const Tensor& din, bool accumulate) { block.backward(dout, din, accumulate); };
  return run_check(s, in_sample, options);
}

}  // namespace shardtrain::nn
