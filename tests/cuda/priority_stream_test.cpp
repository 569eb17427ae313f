// Inference on a stream of its own at the device's greatest priority, beside training on the
// same GPU: OwnComputeStream makes that stream the thread's current one (ops, allocations and
// cuBLAS/cuDNN handles follow it; other threads keep the default stream), and the serving
// replica's answers while training steps run on the default stream equal those of the same
// model run alone on the default stream.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include "cuda/cuda_test_util.h"
#include "serve/serve_test_util.h"
#include "tandem/compute_stream.h"
#include "tandem/error.h"
#include "tandem/ops.h"
#include "tandem/serve/inference_replica.h"

namespace tandem {
namespace {

using testing::cuda0;

TEST(CudaNoDevice, OwnStreamNeedsADevice) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  for (auto make : {+[] { OwnComputeStream own(cuda0()); }, +[] { cuda::new_priority_stream(0); },
                    +[] { (void)cuda::greatest_stream_priority(0); }}) {
    try {
      make();
      ADD_FAILURE() << "expected Error(not_available)";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::not_available) << e.what();
    }
  }
}

TEST(CudaPriorityStream, OwnStreamIsCurrentMostUrgentAndCarriesTheOps) {
  TD_REQUIRE_CUDA();
  Runtime& rt = runtime_for(cuda0());
  const Tensor src = testing::random_tensor({4096}, 5);
  {
    OwnComputeStream own(cuda0());
    EXPECT_STREQ(own.describe(), "own stream, high priority");
    EXPECT_EQ(rt.current_stream(0).impl(), own.stream().impl());
    EXPECT_NE(own.stream().impl(), rt.default_stream(0).impl());
    EXPECT_EQ(cuda::stream_priority(own.stream()), cuda::greatest_stream_priority(0));
    EXPECT_EQ(cuda::stream_priority(rt.default_stream(0)), 0);
    EXPECT_LT(cuda::greatest_stream_priority(0), 0) << "CUDA counts priorities down from 0";
    std::thread([&] { EXPECT_EQ(rt.current_stream(0).impl(), rt.default_stream(0).impl()); }).join();
    // Ops, a cuBLAS product and the copy back, synchronised on the own stream alone.
    Tensor x = Tensor::empty({4096}, DType::f32, cuda0());
    ops::zero_(x);
    ops::add_(x, src.to(cuda0(), own.stream()), 2.0f);
    const Tensor w = testing::random_tensor({3, 4096}, 6);
    Tensor y = Tensor::empty({1, 3}, DType::f32, cuda0());
    ops::linear_forward(x.view({1, 4096}), w.to(cuda0(), own.stream()), Tensor(), y);
    const Tensor hx = x.to(Device{}, own.stream()), hy = y.to(Device{}, own.stream());
    own.stream().synchronize();
    for (int64_t i = 0; i < 4096; ++i) ASSERT_EQ(hx.data<float>()[i], 2.0f * src.data<float>()[i]) << i;
    for (int64_t o = 0; o < 3; ++o) {
      double ref = 0;
      for (int64_t i = 0; i < 4096; ++i) ref += 2.0 * src.data<float>()[i] * w.data<float>()[o * 4096 + i];
      EXPECT_NEAR(hy.data<float>()[o], ref, 1e-3) << o;
    }
  }
  EXPECT_EQ(rt.current_stream(0).impl(), rt.default_stream(0).impl());
}

// Softmax in double of the model with the snapshot's weights, run on the default stream alone.
Tensor single_stream_probs(const train::ModelCard& card, const serve::ServedWeights& w, const Tensor& x) {
  nn::ModulePtr m = nn::make_model(card.model, card.spec, 99);
  train::load_state(*m, w.weights->tensors(), "test");
  m->eval();
  m->to(cuda0());
  Stream s = testing::cuda_stream();
  const Tensor logits = m->forward(x.to(cuda0(), s)).to(Device{}, s);
  s.synchronize();
  const int64_t n = logits.shape()[0], k = logits.shape()[1];
  Tensor p = Tensor::empty({n, k});
  for (int64_t i = 0; i < n; ++i) {
    const float* l = logits.data<float>() + i * k;
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < k; ++j) mx = std::max(mx, static_cast<double>(l[j]));
    for (int64_t j = 0; j < k; ++j) sum += std::exp(static_cast<double>(l[j]) - mx);
    for (int64_t j = 0; j < k; ++j) p.data<float>()[i * k + j] = static_cast<float>(std::exp(l[j] - mx) / sum);
  }
  return p;
}

// Training steps of another copy of the model on the default stream (SGD on synthetic data)
// until `stop`, at least `min_steps`; returns the number of steps, each loss checked finite.
int train_until(const train::ModelCard& card, const std::atomic<bool>& stop, std::atomic<int>& steps, int min_steps) {
  nn::ModulePtr m = nn::make_model(card.model, card.spec, 3);
  m->to(cuda0());
  m->train();
  Stream s = testing::cuda_stream();
  constexpr int64_t kBatch = 64;
  const Tensor x = testing::random_tensor({kBatch, 1, 28, 28}, 12).to(cuda0(), s);
  Tensor labels_host = Tensor::empty({kBatch}, DType::i64);
  for (int64_t i = 0; i < kBatch; ++i) labels_host.data<int64_t>()[i] = i % card.spec.num_classes;
  const Tensor labels = labels_host.to(cuda0(), s);
  while (!stop || steps < min_steps) {
    m->zero_grad();
    const Tensor logits = m->forward(x);
    Tensor probs = Tensor::empty(logits.shape(), DType::f32, cuda0());
    Tensor dlogits = Tensor::empty(logits.shape(), DType::f32, cuda0());
    const float loss = ops::softmax_cross_entropy_forward(logits, labels, 0.0f, probs);
    EXPECT_TRUE(std::isfinite(loss)) << "step " << steps;
    ops::softmax_cross_entropy_backward(probs, labels, 0.0f, 1.0f, dlogits);
    m->backward(dlogits);
    for (nn::Parameter* p : m->parameters()) ops::add_(p->value, p->grad, -0.01f);
    ++steps;
  }
  s.synchronize();
  return steps;
}

TEST(CudaPriorityStream, InferenceBesideTrainingAnswersAsOnOneStreamAlone) {
  TD_REQUIRE_CUDA();
  const train::ModelCard card = testing::synthetic_card("fmnist-cnn");  // cuDNN convolutions, cuBLAS linear
  const auto w = testing::seeded_weights(card, 5, 1);
  const Tensor x = testing::random_tensor({16, 1, 28, 28}, 11, -2.0f, 2.0f);
  const Tensor ref = single_stream_probs(card, *w, x);

  std::atomic<bool> stop{false};
  std::atomic<int> steps{0};
  std::vector<Tensor> answers;
  std::thread trainer([&] {
    try {
      train_until(card, stop, steps, 3);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "training: " << e.what();
      stop = true;
    }
  });
  std::thread server([&] {
    try {
      serve::InferenceReplica replica(card, cuda0(), 1);
      EXPECT_STREQ(replica.stream_text(), "own stream, high priority");
      while (steps < 1 && !stop) std::this_thread::yield();  // training runs from here on
      for (int i = 0; i < 20; ++i) answers.push_back(replica.run(x, *w));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "inference: " << e.what();
    }
    stop = true;
  });
  server.join();
  trainer.join();
  EXPECT_GE(steps, 3);
  ASSERT_EQ(answers.size(), 20u);
  for (size_t a = 0; a < answers.size(); ++a) {
    ASSERT_EQ(answers[a].shape(), ref.shape());
    for (int64_t i = 0; i < ref.numel(); ++i)
      ASSERT_NEAR(answers[a].data<float>()[i], ref.data<float>()[i], 1e-6) << "answer " << a << ", element " << i;
  }
}

}  // namespace
}  // namespace tandem
