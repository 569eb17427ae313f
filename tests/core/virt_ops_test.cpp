// Every op on every available backend: each case runs on cpu and on virt from the same inputs,
// with sentinel bytes around every output (out-of-bounds writes), and the results must match
// the cpu ones bit for bit (virt runs the same kernels on its stream thread), the transformer
// ops (tandem/transformer_ops.h) included. Adding an op's test means adding one OpCase.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tandem/ops.h"
#include "tandem/transformer_ops.h"
#include "tandem/rng.h"
#include "tandem/virt.h"
#include "virt_test_util.h"

using namespace tandem;
using tandem::testing::Gate;

namespace {

constexpr Device kCpu{};
constexpr Device kVirt0{DeviceKind::virt, 0};
constexpr int64_t kGuard = 16;  // sentinel elements on each side of an output
constexpr uint8_t kSentinel = 0xA5;

enum class Fill { uniform, positive, labels, zeros };

struct Spec {
  Shape shape;
  DType dtype = DType::f32;
  Fill fill = Fill::uniform;
  int64_t classes = 0;  // for Fill::labels
};

using Args = std::vector<Tensor>;

struct OpCase {
  std::string name;
  std::vector<Spec> in;
  std::vector<Spec> out;  // initial contents matter for accumulating ops
  std::function<double(const Args& in, const Args& out)> run;  // returns a scalar result or 0
  // Non-empty: the case is skipped with this reason (a bug outside the virt backend).
  std::string known_issue = {};
};

Tensor make_host(const Spec& s, uint64_t seed) {
  Tensor t = Tensor::empty(s.shape, s.dtype);
  Philox rng(seed, 0);
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    switch (s.fill) {
      case Fill::uniform:
        if (s.dtype == DType::f32)
          t.data<float>()[i] = rng.uniform() * 4.0f - 2.0f;
        else if (s.dtype == DType::u8)
          t.data<uint8_t>()[i] = static_cast<uint8_t>(rng.randint(2));
        break;
      case Fill::positive:
        t.data<float>()[i] = rng.uniform() + 0.5f;
        break;
      case Fill::labels:
        t.data<int64_t>()[i] = static_cast<int64_t>(rng.randint(static_cast<uint32_t>(s.classes)));
        break;
      case Fill::zeros:
        std::memset(t.raw_data(), 0, t.nbytes());
        break;
    }
  }
  return t;
}

// An output view in the middle of a sentinel-filled buffer, on `dev`.
struct Guarded {
  Tensor buffer;  // [kGuard + numel + kGuard] elements
  Tensor view;
};

Guarded make_output(const Spec& s, uint64_t seed, Device dev) {
  const int64_t n = shape_numel(s.shape);
  Tensor host = Tensor::empty({n + 2 * kGuard}, s.dtype);
  std::memset(host.raw_data(), kSentinel, host.nbytes());
  Tensor init = make_host(s, seed);
  std::memcpy(static_cast<char*>(host.raw_data()) + kGuard * host.element_size(), init.raw_data(),
              init.nbytes());
  Tensor buf = dev.is_host() ? host : host.to(dev, runtime(dev.kind).default_stream(dev.index));
  return {buf, buf.narrow(0, kGuard, n).view(s.shape)};
}

Tensor to_host(const Tensor& t) {
  if (t.device().is_host()) return t;
  Tensor h = t.to(kCpu, virt_current_stream(t.device().index));
  h.storage()->pending_write().synchronize();
  return h;
}

struct Result {
  double scalar = 0;
  std::vector<Tensor> buffers;  // host copies of the guarded output buffers
};

Result run_case(const OpCase& c, Device dev) {
  Args in, out;
  std::vector<Guarded> guarded;
  for (size_t i = 0; i < c.in.size(); ++i) {
    Tensor h = make_host(c.in[i], 1000 + i);
    in.push_back(dev.is_host() ? h : h.to(dev, virt_current_stream(dev.index)));
  }
  for (size_t i = 0; i < c.out.size(); ++i) {
    guarded.push_back(make_output(c.out[i], 2000 + i, dev));
    out.push_back(guarded.back().view);
  }
  Result r;
  r.scalar = c.run(in, out);
  for (const Guarded& g : guarded) r.buffers.push_back(to_host(g.buffer));
  if (!dev.is_host()) virt_current_stream(dev.index).synchronize();
  return r;
}

void expect_same(const OpCase& c, const Result& cpu, const Result& other, Device dev) {
  EXPECT_EQ(std::memcmp(&cpu.scalar, &other.scalar, sizeof(double)), 0)
      << c.name << " on " << dev.str() << ": scalar " << other.scalar << " vs cpu " << cpu.scalar;
  for (size_t i = 0; i < cpu.buffers.size(); ++i) {
    for (const Result* r : {&cpu, &other}) {
      const Tensor& b = r->buffers[i];
      const auto* bytes = static_cast<const uint8_t*>(b.raw_data());
      const size_t guard = static_cast<size_t>(kGuard) * b.element_size();
      for (size_t k = 0; k < guard; ++k) {
        ASSERT_EQ(bytes[k], kSentinel) << c.name << " output " << i << " wrote before its start on "
                                       << (r == &cpu ? "cpu" : dev.str());
        ASSERT_EQ(bytes[b.nbytes() - 1 - k], kSentinel)
            << c.name << " output " << i << " wrote past its end on "
            << (r == &cpu ? "cpu" : dev.str());
      }
    }
    EXPECT_EQ(std::memcmp(cpu.buffers[i].raw_data(), other.buffers[i].raw_data(),
                          cpu.buffers[i].nbytes()),
              0)
        << c.name << " output " << i << " differs between cpu and " << dev.str();
  }
}

std::vector<OpCase> all_cases() {
  using namespace ops;
  const Conv2dParams cp{2, 1, 1, 0};
  const Shape x4{2, 3, 7, 6}, w4{4, 3, 3, 3};
  const Shape y4 = conv2d_output_shape(x4, w4, cp);
  const Pool2dParams pp{3, 2, 2, 2, 1, 0};
  const Shape px{2, 3, 7, 8};
  const Shape py = max_pool2d_output_shape(px, pp);
  const Shape bx{4, 3, 5, 5}, c3{3};
  const Spec pos3{c3, DType::f32, Fill::positive};
  return {
      {"conv2d_forward",
       {{x4}, {w4}, {{4}}},
       {{y4}},
       [=](const Args& i, const Args& o) {
         conv2d_forward(i[0], i[1], i[2], cp, o[0]);
         return 0.0;
       }},
      {"conv2d_forward_no_bias",
       {{x4}, {w4}},
       {{y4}},
       [=](const Args& i, const Args& o) {
         conv2d_forward(i[0], i[1], Tensor(), cp, o[0]);
         return 0.0;
       }},
      {"conv2d_backward_data",
       {{y4}, {w4}},
       {{x4}},
       [=](const Args& i, const Args& o) {
         conv2d_backward_data(i[0], i[1], cp, o[0]);
         return 0.0;
       }},
      {"conv2d_backward_weights_accumulate",
       {{x4}, {y4}},
       {{w4}, {{4}}},
       [=](const Args& i, const Args& o) {
         conv2d_backward_weights(i[0], i[1], cp, o[0], o[1], true);
         return 0.0;
       }},
      {"linear_forward",
       {{{5, 7}}, {{3, 7}}, {{3}}},
       {{{5, 3}}},
       [](const Args& i, const Args& o) {
         linear_forward(i[0], i[1], i[2], o[0]);
         return 0.0;
       }},
      {"linear_backward_data",
       {{{5, 3}}, {{3, 7}}},
       {{{5, 7}}},
       [](const Args& i, const Args& o) {
         linear_backward_data(i[0], i[1], o[0]);
         return 0.0;
       }},
      {"linear_backward_weights",
       {{{5, 7}}, {{5, 3}}},
       {{{3, 7}}, {{3}}},
       [](const Args& i, const Args& o) {
         linear_backward_weights(i[0], i[1], o[0], o[1], false);
         return 0.0;
       }},
      {"linear_backward_weights_accumulate_no_bias",
       {{{5, 7}}, {{5, 3}}},
       {{{3, 7}}},
       [](const Args& i, const Args& o) {
         linear_backward_weights(i[0], i[1], o[0], Tensor(), true);
         return 0.0;
       }},
      {"batch_norm_training_relu_and_backward",
       {{bx}, pos3, {c3}, {bx}},
       {{bx}, {c3}, {c3}, {c3}, pos3, {bx}, {c3}, {c3}},
       [](const Args& i, const Args& o) {
         batch_norm_forward_training(i[0], i[1], i[2], 1e-5, 0.1, o[0], o[1], o[2], o[3], o[4],
                                     true);
         batch_norm_backward(i[3], i[0], i[1], o[1], o[2], 1e-5, o[5], o[6], o[7], true, true,
                             o[0]);
         return 0.0;
       }},
      {"batch_norm_inference",
       {{bx}, pos3, {c3}, {c3}, pos3},
       {{bx}},
       [](const Args& i, const Args& o) {
         batch_norm_forward_inference(i[0], i[1], i[2], i[3], i[4], 1e-5, o[0], false);
         return 0.0;
       }},
      {"max_pool2d_forward_and_backward",
       {{px}, {py}},
       {{py}, {py, DType::i32, Fill::zeros}, {px}},
       [=](const Args& i, const Args& o) {
         max_pool2d_forward(i[0], pp, o[0], o[1]);
         max_pool2d_backward(i[1], o[1], pp, o[2]);
         return 0.0;
       }},
      {"relu_forward_backward_in_place",
       {{{3, 50}}, {{3, 50}}},
       {{{3, 50}}, {{3, 50}}},
       [](const Args& i, const Args& o) {
         relu_forward(i[0], o[0]);
         relu_backward(i[1], o[0], o[1]);
         relu_forward(o[1], o[1]);
         return 0.0;
       }},
      {"add_relu_and_global_avg_pool",
       {{{2, 3, 5, 4}}, {{2, 3, 5, 4}}, {{2, 3, 1, 1}}},
       {{{2, 3, 5, 4}}, {{2, 3, 1, 1}}, {{2, 3, 5, 4}}},
       [](const Args& i, const Args& o) {
         add_relu_forward(i[0], i[1], o[0]);
         global_avg_pool2d_forward(o[0], o[1]);
         global_avg_pool2d_backward(i[2], o[2]);
         return 0.0;
       }},
      {"dropout_forward_backward",
       {{{4, 33}}, {{4, 33}}},
       {{{4, 33}}, {{4, 33}, DType::u8, Fill::zeros}, {{4, 33}}},
       [](const Args& i, const Args& o) {
         dropout_forward(i[0], 0.3f, 1234, 7, o[0], o[1]);
         dropout_backward(i[1], o[1], 0.3f, o[2]);
         return 0.0;
       }},
      {"add_and_scale",
       {{{1025}}},
       {{{1025}}},
       [](const Args& i, const Args& o) {
         add_(o[0], i[0], -0.75f);
         scale_(o[0], 3.0f);
         return 0.0;
       }},
      {"zero_",
       {},
       {{{1025}}, {{3, 7}, DType::u8}, {{5}, DType::i64, Fill::labels, 9}},
       [](const Args&, const Args& o) {
         for (const Tensor& t : o) zero_(t);
         return 0.0;
       }},
      {"softmax_cross_entropy",
       {{{6, 5}}, {{6}, DType::i64, Fill::labels, 5}},
       {{{6, 5}}, {{6, 5}}},
       [](const Args& i, const Args& o) {
         const float loss = softmax_cross_entropy_forward(i[0], i[1], 0.1f, o[0]);
         softmax_cross_entropy_backward(o[0], i[1], 0.1f, 0.5f, o[1]);
         return static_cast<double>(loss);
       }},
      {"count_correct",
       {{{9, 4}}, {{9}, DType::i64, Fill::labels, 4}},
       {},
       [](const Args& i, const Args&) { return static_cast<double>(count_correct(i[0], i[1])); }},
      {"softmax_cross_entropy_accumulate_twice",
       {{{9, 4}}, {{9}, DType::i64, Fill::labels, 4}},
       {{{9, 4}}, {{4}, DType::f32, Fill::zeros}},
       [](const Args& i, const Args& o) {
         softmax_cross_entropy_accumulate(i[0], i[1], 0.1f, o[0], o[1]);
         softmax_cross_entropy_accumulate(i[0], i[1], 0.0f, o[0], o[1]);
         return 0.0;
       }},
      {"embedding_forward_backward_accumulate",
       {{{2, 5}, DType::i64, Fill::labels, 11}, {{11, 8}}, {{6, 8}}, {{2, 5, 8}}},
       {{{2, 5, 8}}, {{11, 8}}, {{6, 8}}},
       [](const Args& i, const Args& o) {
         embedding_forward(i[0], i[1], i[2], o[0]);
         embedding_backward(i[3], i[0], o[1], o[2], true);
         return 0.0;
       }},
      {"layer_norm_forward_backward",
       {{{6, 10}}, {{10}, DType::f32, Fill::positive}, {{10}}, {{6, 10}}},
       {{{6, 10}}, {{6}}, {{6}}, {{6, 10}}, {{10}}, {{10}}},
       [](const Args& i, const Args& o) {
         layer_norm_forward(i[0], i[1], i[2], 1e-5f, o[0], o[1], o[2]);
         layer_norm_backward(i[3], i[0], i[1], o[1], o[2], o[3], o[4], o[5], false);
         return 0.0;
       }},
      {"gelu_forward_backward_and_add",
       {{{3, 50}}, {{3, 50}}},
       {{{3, 50}}, {{3, 50}}, {{3, 50}}},
       [](const Args& i, const Args& o) {
         gelu_forward(i[0], o[0]);
         gelu_backward(i[1], i[0], o[1]);
         add_forward(o[0], o[1], o[2]);
         return 0.0;
       }},
      {"attention_forward_backward",
       {{{2, 9, 24}}, {{2, 9, 8}}},
       {{{2, 9, 8}}, {{2, 2, 9}}, {{2, 9, 24}}},
       [](const Args& i, const Args& o) {
         attention_forward(i[0], 2, o[0], o[1]);
         attention_backward(i[1], i[0], o[0], o[1], 2, o[2]);
         return 0.0;
       }},
      {"linear_in_out_forward_and_backward",
       {{{5, 7}}, {{7, 3}}, {{3}}, {{5, 3}}},
       {{{5, 3}}, {{5, 7}}, {{7, 3}}, {{3}}},
       [](const Args& i, const Args& o) {
         linear_in_out_forward(i[0], i[1], i[2], o[0]);
         linear_in_out_backward_data(i[3], i[1], o[1]);
         linear_in_out_backward_weights(i[0], i[3], o[2], o[3], true);
         return 0.0;
       }},
      {"classifier_cross_entropy_accumulate",
       {{{7, 8}}, {{13, 8}}, {{7}, DType::i64, Fill::labels, 13}},
       {{{7, 8}}, {{13, 8}}, {{4}, DType::f32, Fill::zeros}},
       [](const Args& i, const Args& o) {
         classifier_cross_entropy(i[0], i[1], i[2], -1, 0.5f, o[0], o[1], true, o[2]);
         return 0.0;
       }},
  };
}

class OpsOnDevices : public ::testing::TestWithParam<size_t> {};

}  // namespace

TEST_P(OpsOnDevices, VirtMatchesCpuExactlyWithIntactSentinels) {
  const OpCase c = all_cases()[GetParam()];
  SCOPED_TRACE(c.name);
  if (!c.known_issue.empty()) GTEST_SKIP() << c.known_issue;
  const Result cpu = run_case(c, kCpu);
  const Result virt = run_case(c, kVirt0);
  expect_same(c, cpu, virt, kVirt0);
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpsOnDevices, ::testing::Range<size_t>(0, all_cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return all_cases()[info.param].name;
                         });

TEST(VirtOps, OpsRunLaterOnTheCurrentStream) {
  Stream s = runtime(DeviceKind::virt).new_stream(0);
  VirtStreamGuard guard(s);
  EXPECT_EQ(virt_current_stream(0).impl(), s.impl());
  Tensor x = Tensor::from_vector({4}, {-1, 2, -3, 4}).to(kVirt0, s);
  Tensor y = Tensor::empty({4}, DType::f32, kVirt0);
  Gate gate;
  gate.hold(s);
  ops::relu_forward(x, y);
  EXPECT_FALSE(y.storage()->pending_write().query()) << "the op should be queued, not run inline";
  Tensor h = y.to(kCpu, s);
  EXPECT_THROW(h.data<float>(), Error);
  gate.open();
  h.storage()->pending_write().synchronize();
  EXPECT_EQ(h.to_vector(), (std::vector<float>{0, 2, 0, 4}));
}

TEST(VirtOps, WorkOnAnotherStreamIsOrderedAfterThePendingWrite) {
  Stream producer = runtime(DeviceKind::virt).new_stream(0);
  Stream consumer = runtime(DeviceKind::virt).new_stream(0);
  Tensor x = Tensor::from_vector({3}, {1, 2, 3}).to(kVirt0, producer);
  Tensor y = Tensor::empty({3}, DType::f32, kVirt0);
  Tensor h;
  {
    Gate gate;
    {
      VirtStreamGuard g(producer);
      gate.hold(producer);
      ops::scale_(x, 10.0f);  // queued behind the gate
    }
    {
      VirtStreamGuard g(consumer);
      ops::relu_forward(x, y);  // must wait for the scale on the other stream
    }
    h = y.to(kCpu, consumer);
    EXPECT_FALSE(h.storage()->pending_write().query());
  }
  h.storage()->pending_write().synchronize();
  EXPECT_EQ(h.to_vector(), (std::vector<float>{10, 20, 30}));
}

TEST(VirtOps, KernelErrorsSurfaceAtTheCall) {
  Stream s = runtime(DeviceKind::virt).default_stream(0);
  Tensor logits = Tensor::from_vector({2, 3}, {0, 1, 2, 3, 4, 5}).to(kVirt0, s);
  Tensor bad = Tensor::empty({2}, DType::i64);
  bad.data<int64_t>()[0] = 1;
  bad.data<int64_t>()[1] = 7;
  Tensor labels = bad.to(kVirt0, s);
  Tensor probs = Tensor::empty({2, 3}, DType::f32, kVirt0);
  try {
    ops::softmax_cross_entropy_forward(logits, labels, 0.0f, probs);
    FAIL() << "a label outside [0, 3) must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("label 7"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(s.synchronize());
}
