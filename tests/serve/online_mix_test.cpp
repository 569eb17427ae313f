// The online buffer changes what training sees: a run whose training set holds only classes
// 0..4 learns classes 5..9 from samples in the buffer (--online-mix), and does not without
// them; on cpu and on the virtual device (where the mixed samples reach the device batch by
// an asynchronous copy on the compute stream).
#include <gtest/gtest.h>

#include "serve/serve_test_util.h"
#include "tandem/rng.h"
#include "tandem/serve/online_buffer.h"

namespace tandem::testing {
namespace {

// n samples of the classes in [first, last]: noise in [0, 40) with a bright bar at row 2c + 4;
// 10 classes in all.
class Bars final : public data::Dataset {
 public:
  Bars(int64_t n, int first, int last, uint64_t seed) : pixels_(static_cast<size_t>(n * 784)), labels_(static_cast<size_t>(n)) {
    Philox rng(seed, 1);
    for (int64_t i = 0; i < n; ++i) {
      const int c = first + static_cast<int>(rng.randint(static_cast<uint32_t>(last - first + 1)));
      labels_[static_cast<size_t>(i)] = c;
      uint8_t* p = pixels_.data() + i * 784;
      for (int k = 0; k < 784; ++k) p[k] = static_cast<uint8_t>(rng.randint(40));
      for (int x = 0; x < 28; ++x) p[(2 * c + 4) * 28 + x] = 255;
    }
  }
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  data::ImageDims dims() const override { return {1, 28, 28}; }
  int64_t num_classes() const override { return 10; }
  data::Sample get(int64_t i, std::vector<uint8_t>&) const override {
    return {pixels_.data() + i * 784, labels_[static_cast<size_t>(i)]};
  }

 private:
  std::vector<uint8_t> pixels_;
  std::vector<int64_t> labels_;
};

// Accuracy of the trained model on `set` (classes 5..9 only).
double accuracy_on(train::Trainer& t, const train::ModelCard& card, const Bars& set) {
  nn::ModulePtr m = nn::make_model(card.model, card.spec, 0);
  NamedTensors state;
  for (const nn::NamedTensor& n : t.model().host_state_dict()) state.emplace_back(n.name, n.tensor);
  train::load_state(*m, state, "test");
  m->eval();
  Tensor x = Tensor::empty({set.size(), 1, 28, 28});
  std::vector<uint8_t> scratch;
  for (int64_t i = 0; i < set.size(); ++i)
    card.eval_transform->apply(set.get(i, scratch).pixels, card.sample_dims, x.data<float>() + i * 784, {});
  const Tensor logits = m->forward(x);
  int64_t correct = 0;
  for (int64_t i = 0; i < set.size(); ++i) {
    const float* l = logits.data<float>() + i * 10;
    correct += std::max_element(l, l + 10) - l == set.get(i, scratch).label;
  }
  return static_cast<double>(correct) / static_cast<double>(set.size());
}

// An online buffer holding `samples`, transformed as the server transforms posted images.
std::shared_ptr<serve::OnlineBuffer> buffered(const train::ModelCard& card, const Bars& samples) {
  auto buffer = std::make_shared<serve::OnlineBuffer>(256, 784, 10, 0);
  Tensor x = Tensor::empty({samples.size(), 1, 28, 28});
  std::vector<int64_t> labels;
  std::vector<uint8_t> scratch;
  for (int64_t i = 0; i < samples.size(); ++i) {
    const data::Sample s = samples.get(i, scratch);
    card.eval_transform->apply(s.pixels, card.sample_dims, x.data<float>() + i * 784, {});
    labels.push_back(s.label);
  }
  buffer->add(x, labels);
  return buffer;
}

TEST(OnlineMix, BufferedSamplesOfUnseenClassesAreLearned) {
  auto train_set = std::make_shared<Bars>(384, 0, 4, 1);
  auto test_set = std::make_shared<Bars>(64, 0, 9, 2);
  const Bars online_samples(64, 5, 9, 3), held_out(100, 5, 9, 4);
  for (const char* device : {"cpu", "virt"}) {
    for (const double mix : {0.0, 0.5}) {
      SCOPED_TRACE(std::string(device) + " mix " + std::to_string(mix));
      train::TrainConfig cfg;  // mlp, 3 epochs of 12 steps, one thread, no augmentation
      cfg.model = "mlp", cfg.device = device, cfg.epochs = 3, cfg.batch_size = 32, cfg.online_mix = mix;
      cfg.num_workers = 0, cfg.threads = 1, cfg.progress = 0, cfg.augment = false;
      train::Trainer trainer(cfg, train_set, test_set);
      const train::ModelCard card = trainer.model_card();
      auto buffer = buffered(card, online_samples);
      if (mix > 0) trainer.set_online_source(buffer);
      trainer.fit();
      const double acc = accuracy_on(trainer, card, held_out);
      if (mix > 0) {
        EXPECT_GT(acc, 0.8) << "classes 5..9 learned from the buffer";
        EXPECT_EQ(buffer->drawn(), 3 * (384 / 32) * 16) << "16 of 32 samples per step";
      } else {
        EXPECT_LT(acc, 0.1) << "classes 5..9 never seen";
        EXPECT_EQ(buffer->drawn(), 0);
      }
    }
  }
}

// Every micro-batch of --grad-accum-steps takes its share, bf16 image fields get the drawn f32
// samples converted (not their bytes), and a batch split between devices is mixed on the host
// before its parts are cut: the unseen classes are learned each way.
TEST(OnlineMix, EveryMicroBatchBf16FieldsAndSplitBatchesAreMixed) {
  auto train_set = std::make_shared<Bars>(384, 0, 4, 1);
  auto test_set = std::make_shared<Bars>(64, 0, 9, 2);
  const Bars online_samples(64, 5, 9, 3), held_out(100, 5, 9, 4);
  for (const std::string mode : {"accumulate", "bf16", "split"}) {
    SCOPED_TRACE(mode);
    const bool bf16 = mode == "bf16";
    train::TrainConfig cfg;
    cfg.model = "mlp", cfg.device = "cpu", cfg.epochs = 3, cfg.online_mix = 0.5;
    cfg.batch_size = mode == "accumulate" ? 16 : 32, cfg.grad_accum_steps = mode == "accumulate" ? 2 : 1;
    if (bf16) cfg.precision = "bf16";
    if (mode == "split") cfg.devices = "virt:0,virt:1";
    cfg.num_workers = 0, cfg.threads = 1, cfg.progress = 0, cfg.augment = false;
    train::Trainer trainer(cfg, train_set, test_set);
    const train::ModelCard card = trainer.model_card();
    auto buffer = buffered(card, online_samples);
    trainer.set_online_source(buffer);
    trainer.fit();
    EXPECT_EQ(buffer->drawn(), 3 * (384 / 32) * 16) << "half of every 32 samples of a step";
    EXPECT_GT(accuracy_on(trainer, card, held_out), 0.8) << "classes 5..9 learned from the buffer";
  }
}

TEST(OnlineMix, DrawIsKeyedByStepAndBufferKeepsTheNewest) {
  serve::OnlineBuffer b(3, 2, 10, 5);
  std::vector<float> img(8);
  std::vector<int64_t> lab(4);
  EXPECT_EQ(b.draw(4, 2, img.data(), lab.data(), 0), 0) << "empty: nothing drawn";
  Tensor x = Tensor::from_vector({4, 2}, {0, 0, 1, 1, 2, 2, 3, 3});
  EXPECT_EQ(b.add(x, {0, 1, 2, 3}), 3);
  EXPECT_THROW(b.add(Tensor::from_vector({1, 2}, {9, 9}), {10}), Error);
  EXPECT_EQ(b.size(), 3);
  ASSERT_EQ(b.draw(4, 2, img.data(), lab.data(), 7), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_NE(lab[static_cast<size_t>(i)], 0) << "sample 0 was replaced by sample 3";
    EXPECT_EQ(img[static_cast<size_t>(2 * i)], static_cast<float>(lab[static_cast<size_t>(i)]));
  }
  std::vector<int64_t> again(4);
  b.draw(4, 2, img.data(), again.data(), 7);
  EXPECT_EQ(lab, again);
  EXPECT_THROW(b.draw(1, 3, img.data(), lab.data(), 0), Error);
}

}  // namespace
}  // namespace tandem::testing
