// Module::to: parameters, grads and buffers move to the virtual device in place (Parameter
// pointers and earlier Tensor handles follow), the model computes there exactly what it
// computes on the cpu, zero_grad works on device grads, num_batches_tracked stays on the
// host and counts, and host_state_dict() brings everything back.
#include <gtest/gtest.h>

#include <cstring>

#include "nn_test_util.h"
#include "tandem/nn/cross_entropy_loss.h"
#include "tandem/nn/models.h"
#include "tandem/virt.h"
#include "core/virt_test_util.h"

namespace tandem::nn {
namespace {

constexpr Device kVirt{DeviceKind::virt, 0};

using tandem::testing::to_host;

void expect_same_bytes(const Tensor& a, const Tensor& b, const std::string& what) {
  const Tensor ha = to_host(a), hb = to_host(b);
  ASSERT_EQ(ha.shape(), hb.shape()) << what;
  EXPECT_EQ(std::memcmp(ha.raw_data(), hb.raw_data(), ha.nbytes()), 0) << what;
}

TEST(ModuleTo, MovesInPlaceAndComputesLikeCpu) {
  ModulePtr cpu = make_model("fmnist-cnn", 3);
  ModulePtr dev = make_model("fmnist-cnn", 3);
  std::vector<Parameter*> params = dev->parameters();
  std::vector<NamedTensor> state = dev->state_dict();
  dev->to(kVirt);
  EXPECT_EQ(dev->device(), kVirt);
  // Identity: the same Parameter objects, and old handles see the new device.
  ASSERT_EQ(dev->parameters(), params);
  for (const NamedTensor& t : state) {
    const bool counter = t.tensor.dim() == 0 && t.tensor.dtype() == DType::i64;
    EXPECT_EQ(t.tensor.device(), counter ? Device{} : kVirt) << t.name;
  }
  for (Parameter* p : params) EXPECT_EQ(p->grad.device(), kVirt) << p->name;

  const Tensor x = nn_test::random_tensor({4, 1, 28, 28}, 11);
  Tensor labels = Tensor::empty({4}, DType::i64);
  for (int64_t i = 0; i < 4; ++i) labels.data<int64_t>()[i] = (i * 3) % 10;
  const Stream s = virt_current_stream(0);
  CrossEntropyLoss loss_cpu, loss_dev;
  for (int step = 0; step < 2; ++step) {
    cpu->zero_grad();
    dev->zero_grad();
    const float lc = loss_cpu.forward(cpu->forward(x), labels).item();
    const float ld = loss_dev.forward(dev->forward(x.to(kVirt, s)), labels.to(kVirt, s)).item();
    EXPECT_EQ(lc, ld);
    cpu->backward(loss_cpu.backward());
    dev->backward(loss_dev.backward());
  }
  const std::vector<Parameter*> pc = cpu->parameters();
  for (size_t i = 0; i < pc.size(); ++i) expect_same_bytes(pc[i]->grad, params[i]->grad, pc[i]->name + ".grad");

  dev->zero_grad();
  for (Parameter* p : params) {
    const Tensor g = to_host(p->grad);
    for (int64_t i = 0; i < g.numel(); ++i) ASSERT_EQ(g.data<float>()[i], 0.0f) << p->name;
  }

  const std::vector<NamedTensor> a = cpu->state_dict(), b = dev->host_state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(b[i].tensor.device().is_host()) << b[i].name;
    expect_same_bytes(a[i].tensor, b[i].tensor, a[i].name);
    if (a[i].name.find("num_batches_tracked") != std::string::npos) {
      EXPECT_EQ(b[i].tensor.item(), 2.0);
    }
  }

  // And back: everything on the host again, values unchanged.
  dev->to(Device{});
  for (const NamedTensor& t : dev->state_dict()) EXPECT_TRUE(t.tensor.device().is_host()) << t.name;
  const std::vector<NamedTensor> c = dev->state_dict();
  for (size_t i = 0; i < a.size(); ++i) expect_same_bytes(a[i].tensor, c[i].tensor, a[i].name + " (back)");
}

TEST(StorageMigrate, AllHandlesFollow) {
  Tensor t = Tensor::from_vector({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor row = t.narrow(0, 1, 1);
  t.storage()->migrate(kVirt, runtime(DeviceKind::virt).default_stream(0));
  EXPECT_EQ(row.device(), kVirt);
  EXPECT_THROW(row.data<float>(), Error);  // device memory is not host-accessible
  const Tensor h = to_host(row);
  EXPECT_EQ(h.to_vector(), (std::vector<float>{4, 5, 6}));
}

}  // namespace
}  // namespace tandem::nn
