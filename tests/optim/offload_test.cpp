// The offloaded optimizer against the on-device optimizer and a host reference of its schedule:
//  - bucket plans: reverse registration order, whole parameters, the cap, oversize parameters;
//  - delay 0 on virt (and cpu): after several steps the device parameters and the state are bit
//    for bit those of the on-device optimizer (same kernel, same fp32 inputs), for adam, adamw,
//    sgd with momentum and nesterov, with several buckets, a no-decay parameter, a frozen one;
//  - the grad-ready hook launches the buckets during backward;
//  - delay 1: each step's gradient is computed at the documented (stale by one) parameters,
//    checked against a host replay of the schedule, flush() included;
//  - an exception on the update thread reaches step()/flush(), and destruction never hangs;
//  - state() / load_state() round-trip with the on-device optimizer's state.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest_printers.h"
#include "core/virt_test_util.h"
#include "tandem/nn/sequential.h"
#include "tandem/ops.h"
#include "tandem/optim/kernels.h"
#include "tandem/optim/offload.h"
#include "tandem/rng.h"
#include "tandem/virt.h"

namespace tandem::optim {
namespace {

using tandem::testing::to_host;

constexpr Device kVirt{DeviceKind::virt, 0};

using tandem::testing::on;
using tandem::testing::random_host;

bool bit_equal(const Tensor& a, const Tensor& b) {
  const Tensor ha = to_host(a), hb = to_host(b);
  return ha.nbytes() == hb.nbytes() && std::memcmp(ha.raw_data(), hb.raw_data(), ha.nbytes()) == 0;
}

// The parameter set of the tests: ragged sizes, a 2-D shape, one parameter without weight
// decay, registered in this order.
const std::vector<Shape> kShapes{{1}, {7}, {1023}, {33, 31}, {1025}, {17}};

std::vector<std::unique_ptr<nn::Parameter>> make_params(Device d) {
  std::vector<std::unique_ptr<nn::Parameter>> ps;
  for (size_t i = 0; i < kShapes.size(); ++i) {
    auto p = std::make_unique<nn::Parameter>();
    p->name = "p" + std::to_string(i);
    p->value = on(d, random_host(kShapes[i], 10 + i));
    p->grad = on(d, Tensor::zeros(kShapes[i]));
    p->decay = i != 2;
    ps.push_back(std::move(p));
  }
  return ps;
}

std::vector<nn::Parameter*> ptrs(const std::vector<std::unique_ptr<nn::Parameter>>& ps) {
  std::vector<nn::Parameter*> v;
  for (const auto& p : ps) v.push_back(p.get());
  return v;
}

// Gradients of step k, identical for every copy of the parameters.
void set_grads(const std::vector<std::unique_ptr<nn::Parameter>>& ps, int k) {
  for (size_t i = 0; i < ps.size(); ++i) {
    const Tensor g = on(ps[i]->grad.device(), random_host(ps[i]->value.shape(), 1000 * static_cast<uint64_t>(k) + i));
    ps[i]->grad = g;
  }
}

OptimizerOptions options_for(const std::string& name) {
  OptimizerOptions o;
  o.lr = name == "sgd" ? 0.05 : 0.01;
  o.weight_decay = 0.1;
  o.momentum = 0.9;
  o.nesterov = name == "sgd";
  return o;
}

TEST(OffloadBuckets, ReverseOrderWholeParametersAndOversizeAlone) {
  // 4-byte floats: cap 400 bytes = 100 elements.
  const std::vector<OffloadBucket> b = plan_offload_buckets({15, 60, 30, 200, 50, 50}, 400);
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0].params, (std::vector<size_t>{5, 4}));  // last registered first
  EXPECT_EQ(b[1].params, (std::vector<size_t>{3}));     // larger than the cap: alone
  EXPECT_EQ(b[2].params, (std::vector<size_t>{2, 1}));  // 30 + 60 <= 100
  EXPECT_EQ(b[3].params, (std::vector<size_t>{0}));     // + 15 would pass the cap
  // Ranges follow one another; each parameter starts on 16 elements.
  EXPECT_EQ(b[0].begin, 0);
  EXPECT_EQ(b[0].end, 64 + 64);
  EXPECT_EQ(b[1].begin, b[0].end);
  EXPECT_EQ(b[1].end, b[1].begin + 208);
  EXPECT_EQ(b[2].end, b[1].end + 32 + 64);
  EXPECT_EQ(b[3].end, b[2].end + 16);
  EXPECT_TRUE(plan_offload_buckets({}, 400).empty());
  EXPECT_EQ(plan_offload_buckets({5, 5, 5}, 1u << 20).size(), 1u);
  EXPECT_THROW(plan_offload_buckets({5}, 0), Error);
}

TEST(OffloadOptimizer, BadOptionsThrowInvalidArgument) {
  auto ps = make_params(Device{});
  for (auto [name, cap, delay] : {std::tuple{"adagrad", 25.0, 0}, std::tuple{"adam", 0.0, 0},
                                  std::tuple{"adam", -1.0, 0}, std::tuple{"adam", 25.0, 2}}) {
    OffloadOptions off;
    off.bucket_cap_mb = cap;
    off.delay = delay;
    try {
      OffloadOptimizer opt(name, ptrs(ps), {}, off);
      ADD_FAILURE() << name << " " << cap << " " << delay << ": no throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("[offload]"), std::string::npos) << e.what();
    }
  }
  OptimizerOptions bad;
  bad.betas = {0.9, 1.0};
  EXPECT_THROW(OffloadOptimizer("adam", ptrs(ps), bad), Error);
}

TEST(OffloadOptimizer, CapsBeyondTheModelAndBelowOneParameter) {
  auto ps = make_params(Device{});
  // A cap past 2^64 bytes (--bucket-cap-mb 1e300) is one bucket of all six parameters.
  OffloadOptions huge;
  huge.bucket_cap_mb = 1e300;
  OffloadOptimizer one("adam", ptrs(ps), {}, huge);
  ASSERT_EQ(one.buckets().size(), 1u);
  EXPECT_EQ(one.buckets()[0].params.size(), kShapes.size());
  // A cap below one byte holds one parameter per bucket.
  OffloadOptions tiny;
  tiny.bucket_cap_mb = 1e-300;
  OffloadOptimizer each("adam", ptrs(ps), {}, tiny);
  EXPECT_EQ(each.buckets().size(), kShapes.size());
}

class OffloadMatchesDevice : public ::testing::TestWithParam<std::tuple<std::string, Device>> {};

// Delay 0: the device parameters after every step equal the on-device optimizer's, bit for
// bit; so does the state after flush().
TEST_P(OffloadMatchesDevice, BitIdenticalParametersAndState) {
  const auto& [name, device] = GetParam();
  auto a = make_params(device), b = make_params(device);
  a[1]->requires_grad = b[1]->requires_grad = false;  // frozen: never touched
  const Tensor frozen = to_host(a[1]->value).clone();
  OffloadOptions off;
  off.bucket_cap_mb = 5000.0 / (1 << 20);  // 5000 bytes: several buckets
  OffloadOptimizer offloaded(name, ptrs(a), options_for(name), off);
  ASSERT_GE(offloaded.buckets().size(), 3u);
  auto reference = make_optimizer(name, ptrs(b), options_for(name));
  for (int k = 1; k <= 4; ++k) {
    set_grads(a, k);
    set_grads(b, k);
    offloaded.set_lr(options_for(name).lr / k);
    reference->set_lr(options_for(name).lr / k);
    offloaded.step();
    reference->step();
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(bit_equal(a[i]->value, b[i]->value)) << name << " step " << k << " " << a[i]->name;
  }
  EXPECT_TRUE(bit_equal(a[1]->value, frozen));
  offloaded.flush();
  const std::vector<nn::NamedTensor> sa = offloaded.state(), sb = reference->state();
  ASSERT_EQ(sa.size(), sb.size());
  for (const nn::NamedTensor& t : sb) {
    bool found = false;
    for (const nn::NamedTensor& u : sa) {
      if (u.name != t.name) continue;
      found = true;
      EXPECT_TRUE(bit_equal(u.tensor, t.tensor)) << t.name;
    }
    EXPECT_TRUE(found) << t.name;
  }
  EXPECT_EQ(offloaded.step_count(), 4);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, OffloadMatchesDevice,
                         ::testing::Combine(::testing::Values("adam", "adamw", "sgd"),
                                            ::testing::Values(kVirt, Device{})),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + device_kind_name(std::get<1>(info.param).kind);
                         });

// bf16 moments (OptimizerOptions::moments_dtype): the offloaded update is the optimizer's own,
// so its moments are stored in bf16 with the same per-parameter rounding noise as the
// on-device optimizer's, and parameters and state are bit for bit the same; the moments take
// half the host bytes.
TEST(OffloadOptimizer, Bf16MomentsGiveTheDeviceOptimizersBits) {
  for (const char* name : {"adam", "adamw"}) {
    for (Device device : {kVirt, Device{}}) {
      auto a = make_params(device), b = make_params(device);
      OptimizerOptions o = options_for(name);
      o.moments_dtype = DType::bf16;
      OffloadOptions off;
      off.bucket_cap_mb = 5000.0 / (1 << 20);
      OffloadOptimizer offloaded(name, ptrs(a), o, off);
      OffloadOptimizer f32_moments(name, ptrs(make_params(device)), options_for(name), off);
      EXPECT_EQ(f32_moments.host_bytes() - offloaded.host_bytes(), offloaded.master_params().nbytes());
      auto reference = make_optimizer(name, ptrs(b), o);
      for (int k = 1; k <= 4; ++k) {
        set_grads(a, k);
        set_grads(b, k);
        offloaded.step();
        reference->step();
      }
      offloaded.flush();
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_TRUE(bit_equal(a[i]->value, b[i]->value)) << name << " " << a[i]->name;
      const std::vector<nn::NamedTensor> sa = offloaded.state(), sb = reference->state();
      ASSERT_EQ(sa.size(), sb.size());
      int moments = 0;
      for (const nn::NamedTensor& t : sb)
        for (const nn::NamedTensor& u : sa) {
          if (u.name != t.name) continue;
          EXPECT_EQ(u.tensor.dtype(), t.tensor.dtype()) << t.name;
          EXPECT_TRUE(bit_equal(u.tensor, t.tensor)) << t.name;
          moments += u.tensor.dtype() == DType::bf16;
        }
      EXPECT_EQ(moments, 2 * static_cast<int>(a.size())) << name;
    }
  }
}

// A parameter-holding module whose backward sets grad = coef * value on the device (so the
// gradient shows at which parameters it was computed), or adds it to the gradient when
// `accumulate` (as Linear does); forward and backward pass x through.
class Quadratic final : public nn::Module {
 public:
  Quadratic(const Shape& shape, uint64_t seed, float coef, bool accumulate = false)
      : coef_(coef), accumulate_(accumulate) {
    p_.value = random_host(shape, seed);
    p_.grad = Tensor::zeros(shape);
  }
  Tensor forward(const Tensor& x) override { return x; }
  Tensor backward(const Tensor& dy) override {
    if (!accumulate_) ops::zero_(p_.grad);
    ops::add_(p_.grad, p_.value, coef_);
    return dy;
  }
  void collect_parameters(const std::string& prefix, std::vector<nn::Parameter*>& out) override {
    p_.name = prefix + "w";
    out.push_back(&p_);
  }
  std::string describe() const override { return "Quadratic"; }

 private:
  nn::Parameter p_;
  float coef_;
  bool accumulate_;
};

// The coefficients are powers of 2: coef * value is exact, so two accumulated backward passes
// at the same parameters sum to exactly twice one, and halving that gives one back.
std::shared_ptr<nn::Sequential> quadratic_model(bool accumulate = false) {
  return std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{
      std::make_shared<Quadratic>(Shape{1025}, 1, 0.5f, accumulate),
      std::make_shared<Quadratic>(Shape{7, 9}, 2, -0.25f, accumulate),
      std::make_shared<Quadratic>(Shape{300}, 3, 2.0f, accumulate)});
}

// Host replay of one training step of quadratic_model(): g = coef * params (the same host op).
std::vector<Tensor> replay_grads(const std::vector<Tensor>& params) {
  const float coef[] = {0.5f, -0.25f, 2.0f};
  std::vector<Tensor> g;
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor t = Tensor::zeros(params[i].shape());
    ops::add_(t, params[i], coef[i]);
    g.push_back(t);
  }
  return g;
}

struct HostAdam {
  std::vector<Tensor> master, m, v;
  void step(const std::vector<Tensor>& g, int64_t step, double lr) {
    for (size_t i = 0; i < master.size(); ++i) {
      AdamParams ap;
      ap.lr = lr;
      ap.step = step;
      adam_step(master[i].data<float>(), g[i].data<float>(), m[i].data<float>(), v[i].data<float>(),
                master[i].numel(), ap);
    }
  }
};

// (delay, delay_warmup_steps)
class OffloadDelay : public ::testing::TestWithParam<std::tuple<int, int>> {};

// Each step's gradient is computed at the parameters the header documents: M_s (delay 0), or
// M_s up to the warm-up and M_{s-1} after it (delay 1), where a flush() makes the next step see
// the latest ones again.
// The device parameters after each step are compared, bit for bit, with the host replay.
// `micro` > 1: each step accumulates that many backward passes (set_micro_batch; micro 2 of
// the powers-of-2 model sums to exactly twice the gradient, halved back before it comes down),
// so the replay is the same: the hook launches nothing before the last micro-batch, and with
// delay 1 every micro-batch of a step computes at the same stale parameters (the delayed upload
// waits for the last one's backward).
void expect_documented_parameters(int delay, int warmup, int micro) {
  auto model = quadratic_model(micro > 1);
  model->to(kVirt);
  const std::vector<nn::Parameter*> ps = model->parameters();
  HostAdam host;
  for (nn::Parameter* p : ps) {
    host.master.push_back(to_host(p->value).clone());
    host.m.push_back(Tensor::zeros(p->value.shape()));
    host.v.push_back(Tensor::zeros(p->value.shape()));
  }
  std::vector<Tensor> device_view;  // D_s: the parameters step s computes its gradient at
  for (const Tensor& t : host.master) device_view.push_back(t.clone());

  OffloadOptions off;
  off.delay = delay;
  off.delay_warmup_steps = warmup;
  off.bucket_cap_mb = 1000.0 / (1 << 20);  // one bucket per parameter
  OptimizerOptions o;
  o.lr = 0.05;
  o.weight_decay = 0.0;
  OffloadOptimizer opt("adam", ps, o, off);
  ASSERT_EQ(opt.buckets().size(), 3u);
  opt.attach(*model);
  const Tensor x = on(kVirt, Tensor::zeros({1}));
  for (int s = 0; s < 7; ++s) {
    const bool flush_after = s == 3;
    opt.zero_grad();
    for (int k = 0; k < micro; ++k) {
      if (micro > 1) opt.set_micro_batch(k, micro);
      model->backward(model->forward(x));
      EXPECT_EQ(opt.launched_buckets(), k == micro - 1 ? 3 : 0)
          << "the hook launches every bucket during the last backward only";
    }
    opt.step();
    if (flush_after) opt.flush();

    std::vector<Tensor> before;  // M_s
    for (const Tensor& t : host.master) before.push_back(t.clone());
    host.step(replay_grads(device_view), s + 1, o.lr);  // M_{s+1}, from the gradient at D_s
    device_view.clear();
    for (size_t i = 0; i < ps.size(); ++i)
      device_view.push_back(delay == 0 || flush_after || s + 1 <= warmup ? host.master[i].clone() : before[i]);
    for (size_t i = 0; i < ps.size(); ++i)
      EXPECT_TRUE(bit_equal(ps[i]->value, device_view[i])) << "after step " << s << ", param " << i;
  }
  opt.flush();
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_TRUE(bit_equal(ps[i]->value, host.master[i])) << "after flush " << i;
  EXPECT_TRUE(bit_equal(opt.master_params().narrow(0, opt.buckets()[0].begin, 300), host.master[2].view({300})));
}

TEST_P(OffloadDelay, GradientsAreComputedAtTheDocumentedParameters) {
  expect_documented_parameters(std::get<0>(GetParam()), std::get<1>(GetParam()), 1);
}

TEST_P(OffloadDelay, AccumulatedMicroBatchesComputeAtTheSameParameters) {
  expect_documented_parameters(std::get<0>(GetParam()), std::get<1>(GetParam()), 2);
}

INSTANTIATE_TEST_SUITE_P(Delays, OffloadDelay,
                         ::testing::Values(std::tuple{0, 0}, std::tuple{1, 0}, std::tuple{1, 2}),
                         [](const auto& info) {
                           return fmt::format("delay{}_warmup{}", std::get<0>(info.param), std::get<1>(info.param));
                         });

// A parameter that backward never reports (not in the model, or unused) leaves its bucket
// incomplete during backward; step() launches it, so the step neither hangs nor skips it.
TEST(OffloadOptimizer, BucketsNeverReportedLaunchAtStep) {
  auto model = quadratic_model();
  model->to(kVirt);
  std::vector<nn::Parameter*> ps = model->parameters();
  nn::Parameter extra{"extra", on(kVirt, random_host({40}, 9)), on(kVirt, random_host({40}, 10))};
  const Tensor extra0 = to_host(extra.value).clone(), extra_grad = to_host(extra.grad).clone();
  ps.insert(ps.begin(), &extra);  // registered first: alone in the last bucket
  OffloadOptions off;
  off.bucket_cap_mb = 1000.0 / (1 << 20);
  OffloadOptimizer opt("adam", ps, OptimizerOptions{}, off);
  ASSERT_EQ(opt.buckets().size(), 4u);
  opt.attach(*model);
  model->backward(model->forward(on(kVirt, Tensor::zeros({1}))));
  EXPECT_EQ(opt.launched_buckets(), 3);
  opt.step();
  EXPECT_EQ(opt.launched_buckets(), 0);
  opt.flush();
  Tensor p = extra0.clone(), m = Tensor::zeros({40}), v = Tensor::zeros({40});
  AdamParams ap;
  adam_step(p.data<float>(), extra_grad.data<float>(), m.data<float>(), v.data<float>(), 40, ap);
  EXPECT_TRUE(bit_equal(extra.value, p));
}

// An exception on the update thread is rethrown at the next step() and at every later call;
// the destructor then returns (no hang) even with copies and jobs left behind.
TEST(OffloadOptimizer, UpdateThreadErrorsReachTheTrainingThread) {
  for (int delay : {0, 1}) {
    auto ps = make_params(kVirt);
    OffloadOptions off;
    off.delay = delay;
    off.bucket_cap_mb = 5000.0 / (1 << 20);
    off.before_update = [](int bucket, int64_t step) {
      if (step == 2 && bucket == 1) throw_error(ErrorCode::io, "test", "injected failure");
    };
    auto opt = std::make_unique<OffloadOptimizer>("adamw", ptrs(ps), OptimizerOptions{}, off);
    int thrown_at = 0;
    for (int k = 1; k <= 4 && !thrown_at; ++k) {
      set_grads(ps, k);
      try {
        opt->step();
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::io);
        EXPECT_NE(std::string(e.what()).find("injected failure"), std::string::npos) << e.what();
        thrown_at = k;
      }
    }
    // Delay 0 waits for update 2 within step 2; delay 1 sees it at step 3 at the latest (step 2
    // when the update thread failed before step 2 stopped waiting for its uploads).
    if (delay == 0) {
      EXPECT_EQ(thrown_at, 2);
    } else {
      EXPECT_TRUE(thrown_at == 2 || thrown_at == 3) << thrown_at;
    }
    EXPECT_THROW(opt->step(), Error);
    EXPECT_THROW(opt->flush(), Error);
    opt.reset();
  }
}

// Destroying the optimizer right after a step, with a slow device (copies and a delayed
// update in flight), returns and leaves the device parameters intact.
TEST(OffloadOptimizer, DestructionWithWorkInFlightReturns) {
  configure_virt(DeviceSpec::parse("virt:3?bw=0.05&latency_us=200"));
  const Device slow{DeviceKind::virt, 3};
  auto ps = make_params(slow);
  for (int delay : {0, 1}) {
    OffloadOptions off;
    off.delay = delay;
    off.bucket_cap_mb = 5000.0 / (1 << 20);
    auto opt = std::make_unique<OffloadOptimizer>("adam", ptrs(ps), OptimizerOptions{}, off);
    for (int k = 1; k <= 2; ++k) {
      set_grads(ps, k);
      opt->step();
    }
    opt.reset();
  }
  for (const auto& p : ps) EXPECT_EQ(to_host(p->value).numel(), p->value.numel());
  set_virt_throttle(3, VirtThrottle{});
}

// state() after training continues identically in a new optimizer through load_state(), and
// the on-device optimizer's state loads too.
TEST(OffloadOptimizer, LoadStateContinuesTheRun) {
  auto a = make_params(kVirt), b = make_params(kVirt);
  OffloadOptions off;
  off.bucket_cap_mb = 5000.0 / (1 << 20);
  auto reference = make_optimizer("adamw", ptrs(b), options_for("adamw"));
  {
    OffloadOptimizer first("adamw", ptrs(a), options_for("adamw"), off);
    for (int k = 1; k <= 3; ++k) {
      set_grads(a, k);
      set_grads(b, k);
      first.step();
      reference->step();
    }
    first.flush();
    std::vector<nn::NamedTensor> saved;
    for (const nn::NamedTensor& t : first.state()) saved.push_back({t.name, t.tensor.clone(), false});
    OffloadOptimizer second("adamw", ptrs(a), options_for("adamw"), off);
    second.load_state(saved, first.step_count());
    EXPECT_EQ(second.step_count(), 3);
    set_grads(a, 4);
    set_grads(b, 4);
    second.step();
    reference->step();
    second.flush();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bit_equal(a[i]->value, b[i]->value)) << a[i]->name;
  }
  // From the on-device optimizer's state (device tensors copied to the host).
  std::vector<nn::NamedTensor> device_state;
  for (const nn::NamedTensor& t : reference->state()) device_state.push_back({t.name, to_host(t.tensor).clone(), false});
  OffloadOptimizer third("adamw", ptrs(a), options_for("adamw"), off);
  third.load_state(device_state, reference->step_count());
  set_grads(a, 5);
  set_grads(b, 5);
  third.step();
  reference->step();
  third.flush();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bit_equal(a[i]->value, b[i]->value)) << a[i]->name;
  // A mismatching step and an unknown name are refused.
  device_state.push_back({"nope.exp_avg", Tensor::zeros({1}), false});
  EXPECT_THROW(third.load_state(device_state, reference->step_count()), Error);
}

}  // namespace
}  // namespace tandem::optim
