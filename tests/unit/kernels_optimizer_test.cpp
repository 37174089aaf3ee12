#include "kernels/cpu/optimizer_update.h"

#include "tests/unit/kernels_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace shardtrain::cpu {
namespace {

using testing::uniform_vector;

// One parameter p0 = 1 with gradients 0.5, -0.25, 1.0 and lr = 0.1; the
// expected values are worked out by hand from torch.optim's update rules.
const std::vector<float> kGrads = {0.5f, -0.25f, 1.0f};

std::vector<float> run_sgd(const SgdParams& hp) {
  float p = 1.0f, buf = std::numeric_limits<float>::quiet_NaN();  // buf unset before step 1
  std::vector<float> trace;
  for (size_t t = 0; t < kGrads.size(); ++t) {
    sgd_update(&p, &kGrads[t], &buf, 1, hp, t == 0);
    trace.push_back(p);
  }
  return trace;
}

void expect_trace(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t t = 0; t < got.size(); ++t) EXPECT_NEAR(got[t], want[t], 1e-6) << "step " << t + 1;
}

TEST(SgdUpdate, Plain) {
  // p -= 0.1 g: 1 - 0.05 = 0.95; 0.95 + 0.025 = 0.975; 0.975 - 0.1 = 0.875
  expect_trace(run_sgd({.lr = 0.1f}), {0.95, 0.975, 0.875});
}

TEST(SgdUpdate, Momentum) {
  // buf = 0.5 (step 1 copies g); 0.9*0.5 - 0.25 = 0.2; 0.9*0.2 + 1 = 1.18
  expect_trace(run_sgd({.lr = 0.1f, .momentum = 0.9f}), {0.95, 0.93, 0.812});
}

TEST(SgdUpdate, Nesterov) {
  // step = g + 0.9 buf: 0.5 + 0.45 = 0.95; -0.25 + 0.18 = -0.07; 1 + 1.062 = 2.062
  expect_trace(run_sgd({.lr = 0.1f, .momentum = 0.9f, .nesterov = true}), {0.905, 0.912, 0.7058});
}

TEST(SgdUpdate, WeightDecay) {
  // g' = g + 0.1 p: 0.6 -> 0.94; -0.25 + 0.094 = -0.156 -> 0.9556;
  // 1 + 0.09556 = 1.09556 -> 0.846044
  expect_trace(run_sgd({.lr = 0.1f, .weight_decay = 0.1f}), {0.94, 0.9556, 0.846044});
}

TEST(SgdUpdate, Dampening) {
  // The first step copies g undamped (torch); then buf = 0.9 buf + 0.5 g':
  // 0.45 - 0.125 = 0.325; 0.2925 + 0.5 = 0.7925
  expect_trace(run_sgd({.lr = 0.1f, .momentum = 0.9f, .dampening = 0.5f}), {0.95, 0.9175, 0.83825});
}

TEST(SgdUpdate, NesterovWithWeightDecay) {
  // g' = 0.6, buf = 0.6, step 1.14 -> 0.886; g' = -0.1614, buf = 0.3786,
  // step 0.17934 -> 0.868066; g' = 1.0868066, buf = 1.4275466,
  // step 2.37159854 -> 0.630906146
  expect_trace(run_sgd({.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.1f, .nesterov = true}),
               {0.886, 0.868066, 0.630906146});
}

// The same rules, in double, for many elements at once.
TEST(SgdUpdate, VectorsMatchDoubleReference) {
  const int64_t n = 1000;  // not a multiple of any vector width
  for (bool nesterov : {false, true})
    for (float momentum : {0.0f, 0.9f}) {
      const SgdParams hp{
          .lr = 0.05f, .momentum = momentum, .dampening = 0.1f, .weight_decay = 0.01f, .nesterov = nesterov};
      auto p = uniform_vector(n, 1);
      std::vector<float> buf(n, std::numeric_limits<float>::quiet_NaN());
      std::vector<double> p_ref(p.begin(), p.end()), buf_ref(n);
      for (int step = 0; step < 3; ++step) {
        const auto g = uniform_vector(n, 10 + step);
        sgd_update(p.data(), g.data(), momentum != 0 ? buf.data() : nullptr, n, hp, step == 0);
        for (int64_t i = 0; i < n; ++i) {
          double d = g[i] + 0.01 * p_ref[i];
          if (momentum != 0) {
            buf_ref[i] = step == 0 ? d : 0.9 * buf_ref[i] + 0.9 * d;
            d = nesterov ? d + 0.9 * buf_ref[i] : buf_ref[i];
          }
          p_ref[i] -= 0.05 * d;
        }
      }
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(p[i], p_ref[i], 1e-6) << i << " nesterov " << nesterov << " mu " << momentum;
    }
}

TEST(AdamWUpdate, HandComputedSteps) {
  // lr 0.1, betas (0.9, 0.999), eps 1e-8, wd 0.1, p0 = 1:
  // step 1: p = 0.99; m = 0.05, v = 2.5e-4; m^ = 0.5, v^ = 0.25;
  //         p = 0.99 - 0.1 * 0.5 / (0.5 + 1e-8) = 0.890000002
  // step 2: p = 0.88110000198; m = 0.02, v = 3.1225e-4; m^ = 0.02/0.19,
  //         v^ = 3.1225e-4/0.001999; p = 0.8544662987
  // step 3: p = 0.8459216357; m = 0.118, v = 1.31194e-3 (approx);
  //         m^ = 0.118/0.271, v^ = v/0.002997001; p = 0.7801104767
  const AdamWParams hp{.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f};
  float p = 1.0f, m = 0.0f, v = 0.0f;
  std::vector<float> trace;
  for (int t = 0; t < 3; ++t) {
    adamw_update(&p, &kGrads[t], &m, &v, 1, hp, t + 1);
    trace.push_back(p);
  }
  expect_trace(trace, {0.890000002, 0.8544662986878463, 0.7801104766702113});
}

TEST(AdamWUpdate, VectorsMatchDoubleReference) {
  const int64_t n = 1003;  // spans several internal blocks, with a ragged tail
  const AdamWParams hp{.lr = 0.01f, .beta1 = 0.8f, .beta2 = 0.99f, .eps = 1e-3f, .weight_decay = 0.05f};
  auto p = uniform_vector(n, 2);
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  std::vector<double> p_ref(p.begin(), p.end()), m_ref(n, 0.0), v_ref(n, 0.0);
  for (int step = 1; step <= 3; ++step) {
    const auto g = uniform_vector(n, 20 + step);
    adamw_update(p.data(), g.data(), m.data(), v.data(), n, hp, step);
    for (int64_t i = 0; i < n; ++i) {
      p_ref[i] *= 1.0 - 0.01 * 0.05;
      m_ref[i] = 0.8 * m_ref[i] + 0.2 * g[i];
      v_ref[i] = 0.99 * v_ref[i] + 0.01 * double(g[i]) * g[i];
      const double mh = m_ref[i] / (1.0 - std::pow(0.8, step));
      const double vh = v_ref[i] / (1.0 - std::pow(0.99, step));
      p_ref[i] -= 0.01 * mh / (std::sqrt(vh) + 1e-3);
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(p[i], p_ref[i], 1e-6) << i;
    ASSERT_NEAR(m[i], m_ref[i], 1e-6) << i;
    ASSERT_NEAR(v[i], v_ref[i], 1e-7) << i;
  }
}

TEST(AdamWUpdate, BiasCorrectionUsesTheGivenStep) {
  // Resuming at step 1000 with saved moments: bias correction is ~1.
  const AdamWParams hp{.lr = 1e-3f, .weight_decay = 0.0f};
  float p = 2.0f, m = 0.1f, v = 0.04f;
  const float g = 0.3f;
  adamw_update(&p, &g, &m, &v, 1, hp, 1000);
  const double m1 = 0.9 * 0.1 + 0.1 * 0.3, v1 = 0.999 * 0.04 + 0.001 * 0.09;
  const double mh = m1 / (1 - std::pow(0.9, 1000)), vh = v1 / (1 - std::pow(0.999, 1000));
  EXPECT_NEAR(p, 2.0 - 1e-3 * mh / (std::sqrt(vh) + 1e-8), 1e-6);
}

}  // namespace
}  // namespace shardtrain::cpu
