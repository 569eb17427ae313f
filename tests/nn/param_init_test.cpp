// A model built without memory (make_model_lazy) writes, for any element range of any
// parameter, the bits make_model's init writes; Philox::skip continues a stream exactly.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tandem/nn/models.h"
#include "tandem/nn/param_init.h"
#include "tandem/rng.h"

namespace tandem::nn {
namespace {

TEST(PhiloxSkip, ContinuesTheStreamAsIfDrawn) {
  for (uint64_t used = 0; used < 6; ++used)
    for (uint64_t n = 0; n < 23; ++n) {
      Philox a(7, 3), b(7, 3);
      for (uint64_t i = 0; i < used; ++i) a.next_u32(), b.next_u32();
      for (uint64_t i = 0; i < n; ++i) a.next_u32();
      b.skip(n);
      for (int k = 0; k < 9; ++k) ASSERT_EQ(a.next_u32(), b.next_u32()) << "used " << used << " skip " << n;
    }
}

// Each parameter's ranges: whole, the first and second elements (a normal pair's halves), an
// odd start and end, the last element, the second half.
void expect_ranges_equal(const std::string& name, const ModelSpec& spec) {
  const ModulePtr whole = make_model(name, spec, 1234);
  ValueSource source;
  const ModulePtr lazy = make_model_lazy(name, spec, 1234, &source);
  const std::vector<Parameter*> a = whole->parameters(), b = lazy->parameters();
  ASSERT_EQ(a.size(), b.size());
  ASSERT_TRUE(source);
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i]->name, b[i]->name);
    EXPECT_FALSE(has_values(*b[i])) << b[i]->name;
    const int64_t n = a[i]->value.numel();
    const float* want = a[i]->value.data<float>();
    const std::vector<std::pair<int64_t, int64_t>> ranges = {
        {0, n}, {0, 1}, {1, 2}, {n / 3 | 1, (2 * n / 3) | 1}, {n - 1, n}, {n / 2, n}};
    for (auto [lo, hi] : ranges) {
      hi = std::min(hi, n);
      if (lo >= hi) continue;
      std::vector<float> got(static_cast<size_t>(hi - lo), -7.0f);
      source(*b[i], lo, hi - lo, got.data());
      ASSERT_EQ(std::memcmp(got.data(), want + lo, got.size() * sizeof(float)), 0)
          << name << " " << a[i]->name << " [" << lo << ", " << hi << ")";
    }
  }
}

TEST(LazyModel, GptRangesMatchTheWholeInit) {
  ModelSpec spec;
  spec.channels = spec.height = spec.width = 0;
  spec.num_classes = 97;  // vocabulary: odd, so the embedding's element count is odd
  spec.block_size = 16;
  spec.n_layer = 2, spec.n_head = 2, spec.n_embd = 24;
  expect_ranges_equal("gpt-mini", spec);
}

TEST(LazyModel, ResNetRangesMatchTheWholeInit) {  // kaiming normal, constants, uniform
  ModelSpec spec;
  spec.channels = 3, spec.height = spec.width = 16, spec.num_classes = 5;
  spec.zero_init_residual = true;
  expect_ranges_equal("resnet18-cifar", spec);
}

TEST(LazyModel, ShapeOnlyComputeCopiesAndErrors) {
  ModelSpec spec;
  spec.channels = spec.height = spec.width = 0;
  spec.num_classes = 50, spec.block_size = 8, spec.n_layer = 1, spec.n_head = 2, spec.n_embd = 16;
  ValueSource source;
  const ModulePtr lazy = make_model_lazy("gpt-mini", spec, 1, &source);
  lazy->set_compute_dtype(DType::bf16);
  int copies = 0;
  for (Parameter* p : lazy->parameters())
    if (p->compute.defined()) {
      ++copies;
      EXPECT_EQ(p->compute.dtype(), DType::bf16);
      EXPECT_EQ(p->compute.shape(), p->value.shape());
      EXPECT_EQ(p->compute.raw_data(), nullptr);
    }
  EXPECT_GT(copies, 0);
  Parameter stranger;
  stranger.name = "stranger";
  float x = 0;
  EXPECT_THROW(source(stranger, 0, 1, &x), Error);
  ParamInit unset;
  EXPECT_THROW(write_init(unset, 4, 0, 1, &x), Error);
  ParamInit c{ParamInit::Kind::constant, 2.5, 0, 0};
  EXPECT_THROW(write_init(c, 4, 3, 2, &x), Error);  // past the end
  write_init(c, 4, 3, 1, &x);
  EXPECT_EQ(x, 2.5f);
}

}  // namespace
}  // namespace tandem::nn
