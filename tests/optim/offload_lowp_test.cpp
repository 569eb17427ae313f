// The offloaded optimizer with low-precision transfers (OffloadOptions::transfer_dtype bf16,
// f16) against a host replay of its documented math:
//  - widen_to_f32 gives every one of the 65536 bf16 and f16 bit patterns exactly (bit for bit
//    as tandem::bf16_to_float / f16_to_float; a NaN stays a NaN) at every SIMD level the CPU runs;
//  - after each step the device's low-precision copies are bit for bit the replay's (gradient
//    rounded to nearest even, widened, the f32 kernel on the f32 master copy writing the
//    rounded copy), parameters without a copy go up in f32, and after flush() the device's f32
//    values are the replay's master weights; adam, adamw and sgd, on virt and cpu;
//  - the bytes moved per step are counted: down exactly half of the f32 transfers', up half
//    for the parameters with a copy and f32 for the others;
//  - a compute copy of another dtype and sharding are refused with a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest_printers.h"
#include "core/virt_test_util.h"
#include "tandem/error.h"
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

bool same_bits(const Tensor& a, const void* b, size_t nbytes) {
  const Tensor h = to_host(a);
  return h.nbytes() == nbytes && std::memcmp(h.raw_data(), b, nbytes) == 0;
}

uint16_t narrow(float x, DType dt) { return dt == DType::bf16 ? float_to_bf16(x) : float_to_f16(x); }
float widen(uint16_t h, DType dt) { return dt == DType::bf16 ? bf16_to_float(h) : f16_to_float(h); }

TEST(WidenToF32, EveryBitPatternExactAtEverySimdLevel) {
  std::vector<uint16_t> src(65536);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i);
  const SimdLevel saved = simd_level();
  for (SimdLevel level : {SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512}) {
    if (!simd_level_supported(level)) continue;
    set_simd_level(level);
    for (DType dt : {DType::bf16, DType::f16}) {
      std::vector<float> dst(src.size() + 1, -7.0f);
      widen_to_f32(src.data() + 1, dt, dst.data(), static_cast<int64_t>(src.size()) - 1);  // odd start and tail
      for (size_t i = 0; i + 1 < src.size(); ++i) {
        const float want = widen(src[i + 1], dt);
        if (std::isnan(want)) {  // F16C quiets a signalling NaN: NaN either way
          ASSERT_TRUE(std::isnan(dst[i])) << simd_level_name(level) << " 0x" << std::hex << src[i + 1];
          continue;
        }
        ASSERT_EQ(std::memcmp(&dst[i], &want, 4), 0) << simd_level_name(level) << " " << dtype_name(dt) << " 0x"
                                                     << std::hex << src[i + 1];
      }
      EXPECT_EQ(dst[src.size() - 1], -7.0f);  // nothing past n written
    }
  }
  set_simd_level(saved);
  float out = 0;
  EXPECT_THROW(widen_to_f32(src.data(), DType::f32, &out, 1), Error);
  EXPECT_THROW(widen_to_f32(src.data(), DType::bf16, &out, -1), Error);
}

// f32 -> bf16/f16 rounding (the storage wrapper's write-back of ops computed in f32), bit for bit
// as float_to_bf16 / float_to_f16 at every SIMD level: every f32 whose upper 16 bits are any
// pattern, with low halves 0 (exact), 0x7fff and 0x8001 (either side of a bf16 tie), 0x8000
// (the tie itself) and a random one; f16 rounding is exercised by the same values (overflow to
// inf, subnormals, ties of f16's own grid among them).
TEST(NarrowFromF32, EveryRoundingCaseMatchesTheScalarFunctionsAtEverySimdLevel) {
  std::vector<float> src;
  Philox rng(9, 0);
  for (uint32_t hi = 0; hi < 65536; ++hi)
    for (uint32_t lo : {0u, 0x7fffu, 0x8000u, 0x8001u, rng.next_u32() & 0xffffu}) {
      const uint32_t u = hi << 16 | lo;
      float f;
      std::memcpy(&f, &u, 4);
      src.push_back(f);
    }
  const SimdLevel saved = simd_level();
  for (SimdLevel level : {SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512}) {
    if (!simd_level_supported(level)) continue;
    set_simd_level(level);
    for (DType dt : {DType::bf16, DType::f16}) {
      std::vector<uint16_t> dst(src.size(), 0x1234);
      narrow_from_f32(src.data() + 1, dt, dst.data(), static_cast<int64_t>(src.size()) - 2);  // odd start and tail
      for (size_t i = 0; i + 2 < src.size(); ++i) {
        const uint16_t want = narrow(src[i + 1], dt);
        if (std::isnan(src[i + 1])) {
          ASSERT_TRUE(std::isnan(widen(dst[i], dt))) << simd_level_name(level) << " " << dtype_name(dt);
          continue;
        }
        ASSERT_EQ(dst[i], want) << simd_level_name(level) << " " << dtype_name(dt) << " " << src[i + 1];
      }
      EXPECT_EQ(dst[src.size() - 2], 0x1234);  // nothing past n written
    }
  }
  set_simd_level(saved);
  uint16_t out = 0;
  EXPECT_THROW(narrow_from_f32(src.data(), DType::f32, &out, 1), Error);
  EXPECT_THROW(narrow_from_f32(src.data(), DType::bf16, &out, -1), Error);
  EXPECT_THROW(narrow_from_f32(nullptr, DType::bf16, &out, 1), Error);
}

// Ragged sizes; parameters 2, 3, 4 have a low-precision copy (as convolution and linear
// weights), the others (as biases) do not; parameter 2 without weight decay.
const std::vector<Shape> kShapes{{1}, {7}, {1023}, {33, 31}, {1025}, {17}};
bool has_copy(size_t i) { return i >= 2 && i <= 4; }

struct Model {
  std::vector<std::unique_ptr<nn::Parameter>> ps;
  std::vector<nn::Parameter*> ptrs() const {
    std::vector<nn::Parameter*> v;
    for (const auto& p : ps) v.push_back(p.get());
    return v;
  }
};

Model make_model(Device d, DType dt) {
  Model m;
  for (size_t i = 0; i < kShapes.size(); ++i) {
    auto p = std::make_unique<nn::Parameter>();
    p->name = "p" + std::to_string(i);
    const Tensor v = random_host(kShapes[i], 10 + i);
    p->value = on(d, v);
    p->grad = on(d, Tensor::zeros(kShapes[i]));
    if (has_copy(i) && dt != DType::f32) p->compute = on(d, v.to(dt));
    p->decay = i != 2;
    m.ps.push_back(std::move(p));
  }
  return m;
}

// Gradients of step k: scaled so that f16 keeps them normal and bf16/f16 rounding shows.
Tensor grad_of(size_t i, int k) {
  Tensor g = random_host(kShapes[i], 1000 * static_cast<uint64_t>(k) + i);
  for (int64_t j = 0; j < g.numel(); ++j) g.data<float>()[j] *= 0.37f;
  return g;
}

OptimizerOptions options_for(const std::string& name) {
  OptimizerOptions o;
  o.lr = name == "sgd" ? 0.05 : 0.01;
  o.weight_decay = 0.1;
  o.momentum = 0.9;
  o.nesterov = name == "sgd";
  return o;
}

// The host replay of one parameter: f32 master, moments, the rounded copy.
struct Replay {
  std::vector<float> master, m, v;
  std::vector<uint16_t> copy;
};

class OffloadLowPrecision : public ::testing::TestWithParam<std::tuple<std::string, Device, DType>> {};

TEST_P(OffloadLowPrecision, DeviceCopiesAndMasterFollowTheHostReplay) {
  const auto& [name, device, dt] = GetParam();
  Model model = make_model(device, dt);
  OffloadOptions off;
  off.bucket_cap_mb = 5000.0 / (1 << 20);  // several buckets
  off.transfer_dtype = dt;
  const OptimizerOptions oo = options_for(name);
  OffloadOptimizer opt(name, model.ptrs(), oo, off);
  ASSERT_GE(opt.buckets().size(), 3u);
  EXPECT_EQ(opt.transfer_dtype(), dt);

  std::vector<Replay> rep(kShapes.size());
  uint64_t down = 0, up = 0, down_f32 = 0;
  for (size_t i = 0; i < kShapes.size(); ++i) {
    const Tensor v = random_host(kShapes[i], 10 + i);
    rep[i].master.assign(v.data<float>(), v.data<float>() + v.numel());
    rep[i].m.assign(rep[i].master.size(), 0.0f);
    rep[i].v.assign(rep[i].master.size(), 0.0f);
    rep[i].copy.assign(rep[i].master.size(), 0);
    down += 2 * v.numel();
    down_f32 += 4 * v.numel();
    up += (has_copy(i) ? 2 : 4) * v.numel();
  }
  EXPECT_EQ(opt.bytes_per_step().to_host, down);
  EXPECT_EQ(opt.bytes_per_step().to_host * 2, down_f32);  // half the f32 transfers' bytes
  EXPECT_EQ(opt.bytes_per_step().to_device, up);

  const int steps = 4;
  for (int k = 1; k <= steps; ++k) {
    const double lr = oo.lr / k;
    opt.set_lr(lr);
    for (size_t i = 0; i < kShapes.size(); ++i) {
      const Tensor g = grad_of(i, k);
      model.ps[i]->grad = on(device, g);
      Replay& r = rep[i];
      const int64_t n = g.numel();
      std::vector<float> gw(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) gw[static_cast<size_t>(j)] = widen(narrow(g.data<float>()[j], dt), dt);
      const double wd = i != 2 ? 0.1 : 0.0;
      if (name == "sgd") {
        SgdParams sp;
        sp.lr = lr;
        sp.momentum = oo.momentum;
        sp.nesterov = true;
        sp.weight_decay = wd;
        sp.init_buffer = k == 1;
        sgd_step(r.master.data(), gw.data(), r.m.data(), n, sp, r.copy.data(), dt);
      } else {
        AdamParams ap;
        ap.lr = lr;
        ap.weight_decay = wd;
        ap.decoupled = name == "adamw";
        ap.step = k;
        adam_step(r.master.data(), gw.data(), r.m.data(), r.v.data(), n, ap, r.copy.data(), dt);
      }
    }
    opt.step();
    for (size_t i = 0; i < kShapes.size(); ++i) {
      const nn::Parameter& p = *model.ps[i];
      const size_t n = rep[i].master.size();
      if (has_copy(i)) {
        EXPECT_TRUE(same_bits(p.compute, rep[i].copy.data(), 2 * n)) << "step " << k << " " << p.name;
      } else {
        EXPECT_TRUE(same_bits(p.value, rep[i].master.data(), 4 * n)) << "step " << k << " " << p.name;
      }
    }
  }
  EXPECT_EQ(opt.bytes_moved().to_host, steps * down);
  EXPECT_EQ(opt.bytes_moved().to_device, steps * up);
  opt.flush();  // the master weights into the f32 values
  for (size_t i = 0; i < kShapes.size(); ++i)
    EXPECT_TRUE(same_bits(model.ps[i]->value, rep[i].master.data(), 4 * rep[i].master.size())) << model.ps[i]->name;
  EXPECT_EQ(opt.bytes_moved().to_device, steps * up);  // flush's value writes are not per-step traffic
  if (name != "sgd") {
    for (const nn::NamedTensor& t : opt.state()) {
      if (t.name != "p3.exp_avg_sq") continue;
      EXPECT_TRUE(same_bits(t.tensor, rep[3].v.data(), 4 * rep[3].v.size()));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, OffloadLowPrecision,
                         ::testing::Combine(::testing::Values("adam", "adamw", "sgd"),
                                            ::testing::Values(kVirt, Device{}),
                                            ::testing::Values(DType::bf16, DType::f16)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + device_kind_name(std::get<1>(info.param).kind) +
                                  "_" + dtype_name(std::get<2>(info.param));
                         });

// The f32 transfers move 4 bytes a gradient and a parameter: twice the bf16 ones.
TEST(OffloadLowPrecisionBytes, Fp32MovesTwiceTheGradientBytes) {
  Model f32 = make_model(kVirt, DType::f32), bf16 = make_model(kVirt, DType::bf16);
  OffloadOptions off;
  OffloadOptimizer a("adamw", f32.ptrs(), {}, off);
  off.transfer_dtype = DType::bf16;
  OffloadOptimizer b("adamw", bf16.ptrs(), {}, off);
  for (size_t i = 0; i < kShapes.size(); ++i) {
    f32.ps[i]->grad = on(kVirt, grad_of(i, 1));
    bf16.ps[i]->grad = on(kVirt, grad_of(i, 1));
  }
  a.step();
  b.step();
  a.flush();
  b.flush();
  EXPECT_EQ(a.bytes_moved().to_host, 2 * b.bytes_moved().to_host);
  EXPECT_GT(a.bytes_moved().to_device, b.bytes_moved().to_device);
  EXPECT_EQ(a.bytes_moved().to_host, a.bytes_per_step().to_host);
}

TEST(OffloadLowPrecisionErrors, MismatchedCopiesAndShardingAreRefused) {
  Model bf16 = make_model(Device{}, DType::bf16);
  OffloadOptions off;  // f32 transfers would leave the bf16 copies stale
  try {
    OffloadOptimizer o("adam", bf16.ptrs(), {}, off);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("parameter 'p2' has a bf16 compute copy"), std::string::npos) << e.what();
  }
  off.transfer_dtype = DType::i64;
  EXPECT_THROW(OffloadOptimizer("adam", bf16.ptrs(), {}, off), Error);
  off.transfer_dtype = DType::bf16;
  off.shard_world_size = 2;
  off.reduce_scatter_grads = [](int, const Tensor&, const Tensor&) {};
  off.all_gather_params = [](int, const Tensor&, const Tensor&) {};
  EXPECT_THROW(OffloadOptimizer("adam", bf16.ptrs(), {}, off), Error);
}

}  // namespace
}  // namespace tandem::optim
