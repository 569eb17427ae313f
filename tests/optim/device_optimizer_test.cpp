// Optimizers with parameters on the virtual device: each update is the cpu SIMD kernel run
// as a work item on the device's stream, so after several steps values and state are bit
// for bit those of the same optimizer on the cpu (sizes 1, 7, 1023, 1025 and a 2-D shape
// cover the vector tails). zero_grad clears device grads, state lives on the device except
// the host step counters, and load_state restores onto the device.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tandem/optim/optimizer.h"
#include "tandem/rng.h"
#include "tandem/virt.h"
#include "core/virt_test_util.h"

namespace tandem::optim {
namespace {

constexpr Device kVirt{DeviceKind::virt, 0};

using tandem::testing::to_host;

Tensor random_host(const Shape& s, uint64_t seed) {
  Tensor t = Tensor::empty(s);
  Philox rng(seed, 0);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = rng.uniform() * 2.0f - 1.0f;
  return t;
}

// The same parameters on the host and (copied) on virt.
struct Twin {
  std::vector<nn::Parameter> host, dev;
  std::vector<nn::Parameter*> host_ptrs() {
    std::vector<nn::Parameter*> v;
    for (auto& p : host) v.push_back(&p);
    return v;
  }
  std::vector<nn::Parameter*> dev_ptrs() {
    std::vector<nn::Parameter*> v;
    for (auto& p : dev) v.push_back(&p);
    return v;
  }
};

Twin make_twin() {
  const Stream s = virt_current_stream(0);
  Twin t;
  const std::vector<Shape> shapes{{1}, {7}, {1023}, {1025}, {5, 9}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::string name = "p";
    name += std::to_string(i);
    nn::Parameter p{name, random_host(shapes[i], 10 + i), random_host(shapes[i], 100 + i)};
    p.decay = i != 1;
    nn::Parameter d{p.name, p.value.to(kVirt, s), p.grad.to(kVirt, s)};
    d.decay = p.decay;
    t.host.push_back(std::move(p));
    t.dev.push_back(std::move(d));
  }
  s.synchronize();  // the copies read the host values, which the cpu optimizer then updates
  return t;
}

// Fresh gradients for step k, identical on both sides.
void set_grads(Twin& t, int k) {
  const Stream s = virt_current_stream(0);
  for (size_t i = 0; i < t.host.size(); ++i) {
    Tensor g = random_host(t.host[i].value.shape(), 1000 * static_cast<uint64_t>(k) + i);
    t.host[i].grad.copy_from(g);
    t.dev[i].grad = g.to(kVirt, s);
  }
}

void expect_equal(const Tensor& a, const Tensor& b, const std::string& what) {
  const Tensor ha = to_host(a), hb = to_host(b);
  ASSERT_EQ(ha.nbytes(), hb.nbytes()) << what;
  EXPECT_EQ(std::memcmp(ha.raw_data(), hb.raw_data(), ha.nbytes()), 0) << what;
}

class DeviceOptimizer : public ::testing::TestWithParam<std::string> {};

TEST_P(DeviceOptimizer, MatchesCpuBitForBit) {
  const std::string name = GetParam();
  OptimizerOptions o;
  o.lr = 0.01;
  o.momentum = 0.9;
  o.nesterov = name == "sgd";
  o.weight_decay = 0.05;
  Twin t = make_twin();
  auto cpu = make_optimizer(name == "sgd-plain" ? "sgd" : name, t.host_ptrs(), o);
  auto dev = make_optimizer(name == "sgd-plain" ? "sgd" : name, t.dev_ptrs(), o);
  if (name == "sgd-plain") {
    o.momentum = 0;
    o.nesterov = false;
    cpu = make_optimizer("sgd", t.host_ptrs(), o);
    dev = make_optimizer("sgd", t.dev_ptrs(), o);
  }
  for (int k = 0; k < 3; ++k) {
    set_grads(t, k);
    cpu->set_lr(0.01 * (k + 1));
    dev->set_lr(0.01 * (k + 1));
    cpu->step();
    dev->step();
  }
  for (size_t i = 0; i < t.host.size(); ++i) expect_equal(t.host[i].value, t.dev[i].value, t.host[i].name);
  const auto sc = cpu->state(), sd = dev->state();
  ASSERT_EQ(sc.size(), sd.size());
  for (size_t i = 0; i < sc.size(); ++i) {
    EXPECT_EQ(sc[i].name, sd[i].name);
    const bool counter = sd[i].tensor.dtype() == DType::i64;
    EXPECT_EQ(sd[i].tensor.device(), counter ? Device{} : kVirt) << sd[i].name;
    expect_equal(sc[i].tensor, sd[i].tensor, sc[i].name);
  }

  // Restoring the state onto fresh device parameters continues identically.
  Twin r = make_twin();
  for (size_t i = 0; i < r.dev.size(); ++i) {
    r.dev[i].value = to_host(t.dev[i].value).clone().to(kVirt, virt_current_stream(0));
  }
  std::vector<nn::NamedTensor> saved;
  for (const auto& nt : sd) saved.push_back({nt.name, to_host(nt.tensor).clone(), false});
  auto resumed = make_optimizer(name == "sgd-plain" ? "sgd" : name, r.dev_ptrs(), o);
  resumed->load_state(saved, dev->step_count());
  resumed->set_lr(dev->lr());
  set_grads(t, 3);
  for (size_t i = 0; i < r.dev.size(); ++i) r.dev[i].grad = t.dev[i].grad;
  dev->step();
  resumed->step();
  for (size_t i = 0; i < r.dev.size(); ++i) expect_equal(t.dev[i].value, r.dev[i].value, r.dev[i].name + " resumed");

  dev->zero_grad();
  for (const auto& p : t.dev) {
    const Tensor g = to_host(p.grad);
    for (int64_t i = 0; i < g.numel(); ++i) ASSERT_EQ(g.data<float>()[i], 0.0f) << p.name;
  }
  virt_current_stream(0).synchronize();
}

INSTANTIATE_TEST_SUITE_P(Optimizers, DeviceOptimizer, ::testing::Values("sgd", "sgd-plain", "adam", "adamw"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

TEST(DeviceOptimizer, GradOnAnotherDeviceIsRejected) {
  nn::Parameter p{"w", Tensor::zeros({3}).to(kVirt, virt_current_stream(0)), Tensor::zeros({3})};
  auto opt = make_optimizer("adam", {&p});
  try {
    opt->step();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("grad is on cpu"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::optim
