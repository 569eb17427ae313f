// Sequential's grad-ready hook: called once per child with parameters, last child first, after
// that child's backward wrote its gradients (so a consumer may copy them at once), also when
// backward stops early at the first trainable child (set_needs_input_grad(false)); removed by
// an empty hook.
#include <gtest/gtest.h>

#include <vector>

#include "nn_test_util.h"
#include "tandem/nn/linear.h"
#include "tandem/nn/relu.h"
#include "tandem/nn/residual.h"
#include "tandem/nn/sequential.h"
#include "tandem/nn/conv2d.h"

namespace tandem::nn {
namespace {

TEST(GradReadyHook, SequentialReportsEachChildsParametersInReverseOrder) {
  auto l0 = std::make_shared<Linear>(5, 4);
  auto l2 = std::make_shared<Linear>(4, 3, false);
  Sequential model({l0, std::make_shared<ReLU>(), l2});
  model.set_needs_input_grad(false);
  std::vector<std::vector<Parameter*>> calls;
  std::vector<double> grad_at_call;  // first element of the first reported grad, at call time
  model.set_grad_ready_hook([&](const std::vector<Parameter*>& ps) {
    calls.push_back(ps);
    grad_at_call.push_back(ps.front()->grad.item(0));
  });
  const Tensor x = nn_test::random_tensor({2, 5}, 1);
  model.forward(x);
  EXPECT_FALSE(model.backward(nn_test::random_tensor({2, 3}, 2)).defined());
  ASSERT_EQ(calls.size(), 2u);  // ReLU has no parameters: not reported
  EXPECT_EQ(calls[0], (std::vector<Parameter*>{&l2->weight}));
  EXPECT_EQ(calls[1], (std::vector<Parameter*>{&l0->weight, &l0->bias}));
  // Each call saw its child's final gradient (on the cpu the ops ran before the call).
  EXPECT_EQ(grad_at_call[0], l2->weight.grad.item(0));
  EXPECT_NE(grad_at_call[0], 0.0);
  EXPECT_EQ(grad_at_call[1], l0->weight.grad.item(0));
  EXPECT_NE(grad_at_call[1], 0.0);

  model.set_grad_ready_hook({});
  model.forward(x);
  model.backward(nn_test::random_tensor({2, 3}, 2));
  EXPECT_EQ(calls.size(), 2u);
}

// Containers nested in containers (a model's stages, a residual block's body and shortcut)
// report leaf by leaf, in backward order, each leaf once: the hook reaches every depth.
TEST(GradReadyHook, NestedContainersReportEveryLeaf) {
  auto l0 = std::make_shared<Linear>(5, 4);
  auto l1 = std::make_shared<Linear>(4, 4);
  auto l2 = std::make_shared<Linear>(4, 3);
  auto inner = std::make_shared<Sequential>(std::vector<ModulePtr>{l1, std::make_shared<ReLU>()});
  auto middle = std::make_shared<Sequential>(std::vector<ModulePtr>{inner, l2});
  Sequential model({l0, middle});
  std::vector<std::vector<Parameter*>> calls;
  model.set_grad_ready_hook([&](const std::vector<Parameter*>& ps) { calls.push_back(ps); });
  model.forward(nn_test::random_tensor({2, 5}, 1));
  model.backward(nn_test::random_tensor({2, 3}, 2));
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0], (std::vector<Parameter*>{&l2->weight, &l2->bias}));
  EXPECT_EQ(calls[1], (std::vector<Parameter*>{&l1->weight, &l1->bias}));
  EXPECT_EQ(calls[2], (std::vector<Parameter*>{&l0->weight, &l0->bias}));

  // A residual block: the shortcut's leaves, then the body's, last leaf first.
  auto c1 = std::make_shared<Conv2d>(2, 3, 3, 1, 1);
  auto c2 = std::make_shared<Conv2d>(3, 3, 3, 1, 1, false);
  auto proj = std::make_shared<Conv2d>(2, 3, 1, 1, 0, false);
  Sequential net({std::make_shared<Residual>(
      std::make_shared<Sequential>(std::vector<ModulePtr>{c1, std::make_shared<ReLU>(), c2}),
      std::make_shared<Sequential>(std::vector<ModulePtr>{proj}))});
  calls.clear();
  net.set_grad_ready_hook([&](const std::vector<Parameter*>& ps) { calls.push_back(ps); });
  net.forward(nn_test::random_tensor({2, 2, 4, 4}, 3));
  net.backward(nn_test::random_tensor({2, 3, 4, 4}, 4));
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0], (std::vector<Parameter*>{&proj->weight}));
  EXPECT_EQ(calls[1], (std::vector<Parameter*>{&c2->weight}));
  EXPECT_EQ(calls[2], (std::vector<Parameter*>{&c1->weight, &c1->bias}));
  net.set_grad_ready_hook({});
  net.forward(nn_test::random_tensor({2, 2, 4, 4}, 3));
  net.backward(nn_test::random_tensor({2, 3, 4, 4}, 4));
  EXPECT_EQ(calls.size(), 3u);  // removed at every depth
}

}  // namespace
}  // namespace tandem::nn
