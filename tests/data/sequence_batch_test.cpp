// Typed batch fields with a batch that is not images: a tiny in-memory sequence data set
// (windows of T + 1 tokens of a token array; input `tokens` = the first T as i32, target
// `targets` = the last T as i64) goes through the loader's slots and the device prefetcher onto
// virt with the right values, the same for any num_workers, from a mid-epoch batch (resume) and
// on the ranks of a distributed sampler; a token outside the vocabulary fails its batch naming
// the sample; the throughput functions count its tokens.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "synthetic_datasets.h"
#include "tandem/data/image_fields.h"
#include "tandem/data/loader.h"
#include "tandem/data/prefetcher.h"
#include "tandem/error.h"
#include "tandem/pinned.h"

namespace tandem::data {
namespace {

constexpr int64_t kT = 6, kVocab = 50;

// Token i of the array: a fixed scramble of i in [0, kVocab).
int32_t token_at(int64_t i) { return static_cast<int32_t>((i * 37 + 11) % kVocab); }

// Windows w = 0 .. n - T - 1 of a token array: tokens[w, w + T) and tokens[w + 1, w + T + 1).
class TokenWindows final : public FieldDataset {
 public:
  explicit TokenWindows(std::vector<int32_t> tokens) : tokens_(std::move(tokens)) {
    fields_ = {Field{"tokens", DType::i32, {kT}, FieldRole::input, kVocab},
               Field{"targets", DType::i64, {kT}, FieldRole::target, kVocab}};
  }
  int64_t size() const override { return static_cast<int64_t>(tokens_.size()) - kT; }
  const std::vector<Field>& fields() const override { return fields_; }
  void write(int64_t index, const SampleKey& key, std::byte* const* out, SampleScratch&, WriteTimes*) const override {
    EXPECT_EQ(key.index, index);
    std::memcpy(out[0], tokens_.data() + index, kT * sizeof(int32_t));
    for (int64_t t = 0; t < kT; ++t) {
      const int64_t next = tokens_[static_cast<size_t>(index + 1 + t)];
      std::memcpy(out[1] + t * 8, &next, 8);
    }
  }

 private:
  std::vector<int32_t> tokens_;
  std::vector<Field> fields_;
};

std::shared_ptr<TokenWindows> windows(int64_t n_tokens) {
  std::vector<int32_t> t(static_cast<size_t>(n_tokens));
  for (int64_t i = 0; i < n_tokens; ++i) t[static_cast<size_t>(i)] = token_at(i);
  return std::make_shared<TokenWindows>(std::move(t));
}

// One batch read back to the host: per row, the window's tokens and targets.
struct Rows {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<int64_t>> targets;
  friend bool operator==(const Rows&, const Rows&) = default;
};

Rows rows_of(const Tensor& tokens, const Tensor& targets) {
  EXPECT_EQ(tokens.dtype(), DType::i32);
  EXPECT_EQ(targets.dtype(), DType::i64);
  EXPECT_EQ(tokens.shape(), (Shape{tokens.size(0), kT}));
  EXPECT_EQ(targets.shape(), (Shape{tokens.size(0), kT}));
  Rows r;
  for (int64_t b = 0; b < tokens.size(0); ++b) {
    const int32_t* x = tokens.data<int32_t>() + b * kT;
    const int64_t* y = targets.data<int64_t>() + b * kT;
    r.tokens.emplace_back(x, x + kT);
    r.targets.emplace_back(y, y + kT);
  }
  return r;
}

// What batch `b` of an epoch in `order` must hold: window order[b * batch + r] in row r.
Rows expected(const std::vector<int64_t>& order, int64_t b, int64_t batch) {
  Rows r;
  for (int64_t k = b * batch; k < std::min<int64_t>((b + 1) * batch, static_cast<int64_t>(order.size())); ++k) {
    const int64_t w = order[static_cast<size_t>(k)];
    std::vector<int32_t> x;
    std::vector<int64_t> y;
    for (int64_t t = 0; t < kT; ++t) {
      x.push_back(token_at(w + t));
      y.push_back(token_at(w + t + 1));
    }
    r.tokens.push_back(x);
    r.targets.push_back(y);
  }
  return r;
}

LoaderOptions options(int workers, int64_t batch = 5) {
  LoaderOptions o;
  o.batch_size = batch;
  o.num_workers = workers;
  o.shuffle = true;
  o.seed = 7;
  return o;
}

std::vector<Rows> epoch_rows(Loader& loader, uint64_t epoch, int64_t first_batch = 0) {
  loader.begin_epoch(epoch, first_batch);
  std::vector<Rows> out;
  Batch b;
  while (loader.next(b)) out.push_back(rows_of(b.input(), b.target()));
  return out;
}

TEST(SequenceBatch, FieldsFlowThroughTheSlotsWithTheRightValuesForAnyWorkerCount) {
  auto set = windows(40);  // 34 windows: 6 batches of 5 and one of 4
  ASSERT_EQ(set->size(), 34);
  std::vector<int64_t> order;
  RandomSampler(set->size(), 7).indices(2, order);
  std::vector<Rows> first;
  for (int workers : {0, 1, 3}) {
    Loader loader(set, options(workers));
    EXPECT_EQ(loader.fields(), set->fields());
    EXPECT_EQ(loader.input_field(), 0);
    EXPECT_EQ(loader.target_field(), 1);
    const std::vector<Rows> got = epoch_rows(loader, 2);
    ASSERT_EQ(got.size(), 7u) << workers << " workers";
    for (size_t b = 0; b < got.size(); ++b)
      EXPECT_EQ(got[b], expected(order, static_cast<int64_t>(b), 5)) << "batch " << b << ", " << workers << " workers";
    if (first.empty()) first = got;
    EXPECT_EQ(got, first) << workers << " workers";
  }
}

TEST(SequenceBatch, ThePrefetcherBringsEveryFieldOntoVirt) {
  const Device virt{DeviceKind::virt, 0};
  auto set = windows(40);
  std::vector<int64_t> order;
  RandomSampler(set->size(), 7).indices(0, order);
  for (int workers : {0, 2}) {
    LoaderOptions o = options(workers);
    o.allocator = &pinned_allocator();
    Loader loader(set, o);
    DevicePrefetcher pf(loader, virt);
    pf.reserve();
    pf.begin_epoch(0);
    DeviceBatch d;
    int64_t b = 0;
    while (pf.next(d)) {
      ASSERT_EQ(d.fields.size(), 2u);
      EXPECT_EQ(d.input().device(), virt);
      EXPECT_EQ(d.target().device(), virt);
      EXPECT_EQ(d.size(), b < 6 ? 5 : 4);
      const Tensor x = d.input().to(Device{}, pf.compute_stream()), y = d.target().to(Device{}, pf.compute_stream());
      pf.compute_stream().synchronize();
      EXPECT_EQ(rows_of(x, y), expected(order, b, 5)) << "batch " << b << ", " << workers << " workers";
      ++b;
    }
    EXPECT_EQ(b, 7);
  }
}

TEST(SequenceBatch, AResumedEpochAndTheRanksOfADistributedSamplerSeeTheirWindows) {
  auto set = windows(40);
  Loader whole(set, options(2, 4));
  const std::vector<Rows> all = epoch_rows(whole, 1);
  const std::vector<Rows> resumed = epoch_rows(whole, 1, 3);  // a run that stopped after batch 3
  ASSERT_EQ(resumed.size(), all.size() - 3);
  for (size_t b = 0; b < resumed.size(); ++b) EXPECT_EQ(resumed[b], all[b + 3]) << "batch " << b + 3;

  for (int rank : {0, 1}) {
    auto sampler = std::make_shared<DistributedSampler>(set->size(), 2, rank, true, 7);
    LoaderOptions o = options(1, 4);
    o.shuffle = false;
    o.sampler = sampler;
    Loader loader(set, o);
    std::vector<int64_t> order;
    sampler->indices(1, order);
    ASSERT_EQ(order.size(), 17u);  // 34 windows, half each
    const std::vector<Rows> got = epoch_rows(loader, 1);
    ASSERT_EQ(got.size(), 5u);
    for (size_t b = 0; b < got.size(); ++b)
      EXPECT_EQ(got[b], expected(order, static_cast<int64_t>(b), 4)) << "rank " << rank << " batch " << b;
  }
}

TEST(SequenceBatch, ATokenOutsideTheVocabularyFailsItsBatchNamingTheSample) {
  std::vector<int32_t> t(30, 3);
  t[20] = static_cast<int32_t>(kVocab);  // in the inputs of windows 15..20
  Loader loader(std::make_shared<TokenWindows>(t), [] {
    LoaderOptions o;
    o.batch_size = 4;
    return o;
  }());
  loader.begin_epoch(0);
  Batch b;
  try {
    while (loader.next(b)) {
    }
    FAIL() << "no error for a token outside the vocabulary";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::format);
    const std::string msg = e.what();
    // Window 14 holds it only as its last target; window 15 as an input token.
    EXPECT_NE(msg.find("sample 14 (batch 3 of epoch 0)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("target 50 is outside the dataset's 50 classes: expected [0, 50)"), std::string::npos) << msg;
  }
}

TEST(SequenceBatch, TokensAreCountedForThroughputAndImagesAreNot) {
  auto set = windows(40);
  EXPECT_EQ(tokens_per_sample(set->fields()), kT);
  EXPECT_FALSE(image_input(set->fields()));
  EXPECT_EQ(sample_bytes(set->fields()), static_cast<size_t>(kT * 4 + kT * 8));
  EXPECT_EQ(describe_fields(set->fields()),
            "tokens i32 [6] input (50 classes), targets i64 [6] target (50 classes)");
  const ImageFields images(std::make_shared<testing::IndexedDataset>(10, ImageDims{1, 4, 4}), nullptr);
  EXPECT_EQ(tokens_per_sample(images.fields()), 0);
  EXPECT_TRUE(image_input(images.fields()));
  EXPECT_EQ(find_field(images.fields(), "labels"), 1);
  EXPECT_EQ(find_field(images.fields(), FieldRole::target), 1);
  EXPECT_EQ(find_field(images.fields(), "tokens"), -1);
}

TEST(SequenceBatch, BadFieldSetsAreRefusedNamingWhatWasExpected) {
  LoaderOptions o = options(0);
  o.images_dtype = DType::bf16;
  try {
    Loader l(windows(40), o);
    FAIL() << "no error for images_dtype bf16";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("images_dtype bf16 with a FieldDataset"), std::string::npos) << e.what();
  }
  // A released batch has no fields to give.
  Batch b;
  EXPECT_EQ(b.size(), 0);
  EXPECT_THROW(b.input(), Error);
}

}  // namespace
}  // namespace tandem::data
