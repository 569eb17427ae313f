// The ResNet layers on the cuda backend against the cpu backend: the residual add + ReLU,
// global average pooling (AdaptiveAvgPool2d(1)) forward and backward with sentinel bytes,
// and one BasicBlock and one Bottleneck (forward, backward, parameter gradients) moved to
// cuda:0 with Module::to. Skipped when no CUDA device is present.
#include <gtest/gtest.h>

#include "cuda/cuda_test_util.h"
#include "tandem/nn/models.h"
#include "tandem/ops.h"

namespace tandem {
namespace {

using testing::expect_close;
using testing::Guarded;
using testing::random_tensor;

TEST(CudaResNet, AddReluAndGlobalAvgPool) {
  TD_REQUIRE_CUDA();
  const Shape s{3, 17, 7, 9};
  Tensor a = random_tensor(s, 1), b = random_tensor(s, 2);
  Guarded ga(a), gb(b);
  Tensor y = Tensor::empty(s);
  ops::add_relu_forward(a, b, y);
  Guarded gy(s, DType::f32);
  ops::add_relu_forward(ga.t, gb.t, gy.t);
  expect_close(gy.check(), y, 0, 0, "add_relu_forward");

  const Shape ps{3, 17, 1, 1};
  Tensor p = Tensor::empty(ps);
  ops::global_avg_pool2d_forward(a, p);
  Guarded gp(ps, DType::f32);
  ops::global_avg_pool2d_forward(ga.t, gp.t);
  expect_close(gp.check(), p, 1e-6, 1e-7, "global_avg_pool2d_forward");

  Tensor dy = random_tensor(ps, 3), dx = Tensor::empty(s);
  Guarded gdy(dy), gdx(s, DType::f32);
  ops::global_avg_pool2d_backward(dy, dx);
  ops::global_avg_pool2d_backward(gdy.t, gdx.t);
  expect_close(gdx.check(), dx, 1e-6, 1e-7, "global_avg_pool2d_backward");
}

void compare_block(nn::ModulePtr cpu, nn::ModulePtr gpu, const Shape& xs, const char* what) {
  Tensor x = random_tensor(xs, 10, -2.0f, 2.0f);
  Tensor ycpu = cpu->forward(x).clone();
  Stream s = testing::cuda_stream();
  gpu->to(testing::cuda0());
  Tensor ygpu = gpu->forward(x.to(testing::cuda0(), s)).to(Device{}, s);
  s.synchronize();
  expect_close(ygpu, ycpu, 1e-4, 1e-4, what);
  Tensor dy = random_tensor(ycpu.shape(), 11);
  Tensor dxcpu = cpu->backward(dy).clone();
  Tensor dxgpu = gpu->backward(dy.to(testing::cuda0(), s)).to(Device{}, s);
  s.synchronize();
  expect_close(dxgpu, dxcpu, 1e-4, 1e-4, what);
  const auto pc = cpu->parameters(), pg = gpu->parameters();
  ASSERT_EQ(pc.size(), pg.size());
  for (size_t i = 0; i < pc.size(); ++i) {
    Tensor g = pg[i]->grad.to(Device{}, s);
    s.synchronize();
    expect_close(g, pc[i]->grad, 1e-3, 1e-4, pc[i]->name.c_str());
  }
}

TEST(CudaResNet, BasicBlockAndBottleneckMatchCpu) {
  TD_REQUIRE_CUDA();
  compare_block(nn::resnet_basic_block(8, 16, 2), nn::resnet_basic_block(8, 16, 2), {4, 8, 9, 9}, "BasicBlock");
  compare_block(nn::resnet_bottleneck(16, 4, 1), nn::resnet_bottleneck(16, 4, 1), {4, 16, 6, 7}, "Bottleneck");
}

}  // namespace
}  // namespace tandem
