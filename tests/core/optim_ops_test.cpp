// The optimizer ops (tandem/optim_ops.h) on tensors: on virt each update is one work item
// on the device's current stream running the cpu kernels, so results are bit for bit those
// of the cpu op (sizes cover the SIMD tails and, above 65536 elements, the OpenMP tiles);
// the cpu op equals the host kernel on raw pointers; tensors on a wrong device, of a wrong
// dtype or size are refused before anything is enqueued, with the tensor named.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tandem/error.h"
#include "tandem/optim_ops.h"
#include "tandem/rng.h"
#include "tandem/virt.h"
#include "virt_test_util.h"

namespace tandem::ops {
namespace {

constexpr Device kVirt{DeviceKind::virt, 0};
const std::vector<int64_t> kSizes = {1, 7, 1023, 1025, 70001};

using tandem::testing::to_host;

Tensor random_host(int64_t n, uint64_t seed, float lo, float hi) {
  Tensor t = Tensor::empty({n});
  Philox rng(seed, 0);
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = lo + (hi - lo) * rng.uniform();
  return t;
}

// A virt copy of `host`; waits for the copy, which reads `host` later on the stream.
Tensor to_virt(const Tensor& host) {
  Tensor t = host.to(kVirt, virt_current_stream(0));
  virt_current_stream(0).synchronize();
  return t;
}
Tensor virt_zeros(int64_t n, DType dtype = DType::f32) {
  return to_virt(Tensor::zeros({n}, dtype));
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// The message of the Error `fn` throws (empty when it throws none).
template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

AdamParams adam_params(bool decoupled) {
  AdamParams p;
  p.lr = 3e-3;
  p.weight_decay = 0.02;
  p.decoupled = decoupled;
  p.step = 4;
  return p;
}

TEST(OptimOps, VirtAdamMatchesCpuBitForBit) {
  for (int64_t n : kSizes) {
    for (bool decoupled : {false, true}) {
      const AdamParams ap = adam_params(decoupled);
      Tensor p = random_host(n, 1, -1, 1), g = random_host(n, 2, -1, 1);
      Tensor m = random_host(n, 3, -0.1f, 0.1f), v = random_host(n, 4, 0, 0.01f);
      Tensor dp = to_virt(p), dg = to_virt(g), dm = to_virt(m), dv = to_virt(v);
      Tensor out = Tensor::empty({n}, DType::bf16), dout = Tensor::empty({n}, DType::bf16, kVirt);
      // Two steps, the second reading the first's moments: the op is ordered after its producers.
      for (int step = 0; step < 2; ++step) {
        adam_step(p, g, m, v, ap, out);
        adam_step(dp, dg, dm, dv, ap, dout);
      }
      const std::string at = "n=" + std::to_string(n) + (decoupled ? " adamw" : " adam");
      EXPECT_TRUE(same_bytes(to_host(dp), p)) << "param, " << at;
      EXPECT_TRUE(same_bytes(to_host(dm), m)) << "exp_avg, " << at;
      EXPECT_TRUE(same_bytes(to_host(dv), v)) << "exp_avg_sq, " << at;
      EXPECT_TRUE(same_bytes(to_host(dout), out)) << "bf16 copy, " << at;
      EXPECT_NE(p.item(0), random_host(n, 1, -1, 1).item(0))
          << "the update changed nothing, " << at;
    }
  }
}

TEST(OptimOps, CpuAdamOpEqualsHostKernel) {
  const int64_t n = 1025;
  const AdamParams ap = adam_params(true);
  Tensor p = random_host(n, 5, -1, 1), g = random_host(n, 6, -1, 1);
  Tensor m = random_host(n, 7, -0.1f, 0.1f), v = random_host(n, 8, 0, 0.01f);
  Tensor p2 = p.clone(), m2 = m.clone(), v2 = v.clone();
  adam_step(p, g, m, v, ap);
  adam_step(p2.data<float>(), g.data<float>(), m2.data<float>(), v2.data<float>(), n, ap);
  EXPECT_TRUE(same_bytes(p, p2));
  EXPECT_TRUE(same_bytes(m, m2));
  EXPECT_TRUE(same_bytes(v, v2));
  // One element against the formula in double (tandem/optim_ops.h): a real update happened.
  const double g0 = g.item(0), m0 = random_host(n, 7, -0.1f, 0.1f).item(0);
  const double v0 = random_host(n, 8, 0, 0.01f).item(0), p0 = random_host(n, 5, -1, 1).item(0);
  const double mm = 0.9 * m0 + 0.1 * g0, vv = 0.999 * v0 + 0.001 * g0 * g0;
  const double bc1 = 1 - std::pow(0.9, 4), bc2 = 1 - std::pow(0.999, 4);
  const double expect =
      p0 - 3e-3 * 0.02 * p0 - 3e-3 / bc1 * mm / (std::sqrt(vv) / std::sqrt(bc2) + 1e-8);
  EXPECT_NEAR(p.item(0), expect, 1e-6);
}

TEST(OptimOps, VirtSgdMatchesCpuBitForBit) {
  for (int64_t n : kSizes) {
    for (double momentum : {0.0, 0.9}) {
      SgdParams sp;
      sp.lr = 0.05;
      sp.momentum = momentum;
      sp.weight_decay = 5e-4;
      sp.nesterov = momentum > 0;
      Tensor p = random_host(n, 11, -1, 1), g = random_host(n, 12, -1, 1);
      Tensor buf = momentum > 0 ? random_host(n, 13, -1, 1) : Tensor();
      Tensor dp = to_virt(p), dg = to_virt(g), dbuf = buf.defined() ? to_virt(buf) : Tensor();
      Tensor out = Tensor::empty({n}, DType::f16), dout = Tensor::empty({n}, DType::f16, kVirt);
      for (int step = 0; step < 2; ++step) {
        sp.init_buffer = step == 0;
        sgd_step(p, g, buf, sp, out);
        sgd_step(dp, dg, dbuf, sp, dout);
      }
      const std::string at = "n=" + std::to_string(n) + " momentum=" + std::to_string(momentum);
      EXPECT_TRUE(same_bytes(to_host(dp), p)) << "param, " << at;
      if (buf.defined()) {
        EXPECT_TRUE(same_bytes(to_host(dbuf), buf)) << "momentum_buffer, " << at;
      }
      EXPECT_TRUE(same_bytes(to_host(dout), out)) << "f16 copy, " << at;
      EXPECT_NE(p.item(0), random_host(n, 11, -1, 1).item(0))
          << "the update changed nothing, " << at;
    }
  }
}

TEST(OptimOps, WrongDeviceDtypeOrSizeIsRefusedNamingTheTensor) {
  const int64_t n = 16;
  const Tensor p = to_virt(random_host(n, 21, -1, 1)), g = to_virt(random_host(n, 22, -1, 1));
  const Tensor m = virt_zeros(n, DType::f32), v = virt_zeros(n, DType::f32);
  const Tensor before = to_host(p).clone();
  const AdamParams ap;
  const std::string on_cpu = error_of([&] { adam_step(p, random_host(n, 22, -1, 1), m, v, ap); });
  EXPECT_NE(on_cpu.find("[adam_step] grad is on cpu, expected param's device virt:0"),
            std::string::npos)
      << on_cpu;
  const std::string bf16 = error_of([&] { adam_step(p, g, virt_zeros(n, DType::bf16), v, ap); });
  EXPECT_NE(bf16.find("[adam_step] exp_avg and exp_avg_sq must both be f32 or both bf16, found bf16 and f32"),
            std::string::npos)
      << bf16;
  const std::string f16 = error_of([&] { adam_step(p, g, virt_zeros(n, DType::f16), virt_zeros(n, DType::f16), ap); });
  EXPECT_NE(f16.find("[adam_step] exp_avg and exp_avg_sq must both be f32 or both bf16, found f16 and f16"),
            std::string::npos)
      << f16;
  const std::string size = error_of([&] { adam_step(p, g, m, virt_zeros(n + 1, DType::f32), ap); });
  EXPECT_NE(size.find("[adam_step] exp_avg_sq has 17 elements, expected 16 (param's)"),
            std::string::npos)
      << size;
  const std::string out = error_of([&] { adam_step(p, g, m, v, ap, virt_zeros(n, DType::i64)); });
  EXPECT_NE(out.find("[adam_step] output copy dtype must be f32, bf16 or f16, got i64"),
            std::string::npos)
      << out;
  const std::string param = error_of([&] { adam_step(virt_zeros(n, DType::bf16), g, m, v, ap); });
  EXPECT_NE(param.find("[adam_step] param must be f32, found bf16"), std::string::npos) << param;

  SgdParams sp;
  sp.momentum = 0.9;
  const std::string no_buf = error_of([&] { sgd_step(p, g, Tensor(), sp); });
  EXPECT_NE(no_buf.find("[sgd_step] momentum_buffer is undefined"), std::string::npos) << no_buf;
  sp.lr = -1;
  const std::string lr = error_of([&] { sgd_step(p, g, m, sp); });
  EXPECT_NE(lr.find("[sgd_step] lr must be >= 0, got -1"), std::string::npos) << lr;
  EXPECT_TRUE(same_bytes(to_host(p), before)) << "a refused update changed the parameter";
}

}  // namespace
}  // namespace tandem::ops
