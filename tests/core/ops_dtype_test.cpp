// Ops that carry their dtype: the support query per op, dtype and device, the exact error for
// an unsupported combination, the dtype rules of the front end, and every bf16 and f16 op
// against the f32 op on the same rounded inputs, on cpu and on virt.
//
// f16 (cpu: storage, computed through the f32 kernels): the unit roundoff is u = 2^-11, and a
// result below f16's normal range (2^-14) rounds to the subnormal grid of step 2^-24, so the
// bound below gains 2^-25 absolute for f16 outputs.
//
// Tolerance. A bf16 value has an 8-bit significand, so rounding a result to bf16 (nearest
// even) moves it by at most u = 2^-8 of its magnitude. The kernels multiply bf16 values
// exactly in f32 and accumulate in f32, so a K-term reduction differs from the f32 reference
// on the same rounded inputs by at most about K * 2^-24 * S on each side, S = the sum of the
// terms' magnitudes (the same op applied to |inputs|). Hence, per element,
//   |bf16 result - f32 reference| <= u * |ref| + 2 * K * 2^-24 * S     (bf16 outputs)
//   |f32 result  - f32 reference| <=             2 * K * 2^-24 * S     (f32 outputs: dw, db,
//                                                                     statistics, loss, probs)
// Ops that only select, mask or scale elements (relu, max pooling, dropout, scale_) must
// equal the f32 reference rounded to bf16 exactly.
#include <gtest/gtest.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "tandem/backend.h"
#include "tandem/cuda.h"
#include "tandem/ops.h"
#include "tandem/rng.h"
#include "tandem/virt.h"
#include "virt_test_util.h"

using namespace tandem;
using namespace tandem::ops;

namespace {

constexpr Device kCpu{};
constexpr Device kVirt0{DeviceKind::virt, 0};
constexpr double kU = 1.0 / 256;            // 2^-8, bf16 unit roundoff
constexpr double kF32 = 1.0 / 16777216.0;  // 2^-24, f32 unit roundoff

std::vector<Op> all_ops() {
  std::vector<Op> v;
  for (int i = 0; i < kOpCount; ++i) v.push_back(static_cast<Op>(i));
  return v;
}

std::string error_of(const std::function<void()>& f, ErrorCode* code = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (code) *code = e.code();
    return e.what();
  }
  return "no error";
}

// ---- the query --------------------------------------------------------------------------

TEST(OpsDtypeQuery, NamesEveryOp) {
  EXPECT_STREQ(op_name(Op::conv2d_forward), "conv2d_forward");
  EXPECT_STREQ(op_name(Op::softmax_cross_entropy_accumulate), "softmax_cross_entropy_accumulate");
  for (Op op : all_ops()) EXPECT_STRNE(op_name(op), "?") << static_cast<int>(op);
}

TEST(OpsDtypeQuery, F32EverywhereOnCpuAndVirt) {
  for (Op op : all_ops()) {
    EXPECT_TRUE(supports(op, DType::f32, kCpu)) << op_name(op);
    EXPECT_TRUE(supports(op, DType::f32, kVirt0)) << op_name(op);
    EXPECT_NO_THROW(require(op, DType::f32, kCpu));
  }
}

TEST(OpsDtypeQuery, VirtAnswersAsCpu) {
  for (Op op : all_ops())
    for (DType t : {DType::f32, DType::bf16, DType::f16, DType::i32, DType::i64, DType::u8})
      EXPECT_EQ(supports(op, t, kVirt0), supports(op, t, kCpu)) << op_name(op) << " " << dtype_name(t);
}

TEST(OpsDtypeQuery, CpuBf16WhereTheCpuHasIt) {
  const bool avx512_core = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  const bool expected = supports(Op::conv2d_forward, DType::bf16, kCpu);
  if (!avx512_core) {
    EXPECT_FALSE(expected) << "bf16 answered supported on a CPU without avx512_core";
  }
  // oneDNN 2.6 runs bf16 convolutions natively with avx512_bf16 (and AMX): then it must be on.
  if (__builtin_cpu_supports("avx512bf16")) {
    EXPECT_TRUE(expected);
  }
  for (Op op : all_ops()) {
    const bool master_state = op == Op::adam_step || op == Op::sgd_step;  // f32 master weights only
    EXPECT_EQ(supports(op, DType::bf16, kCpu), expected && !master_state) << op_name(op);
  }
}

TEST(OpsDtypeQuery, OptimizerUpdatesTakeF32MasterStateOnly) {
  for (Device d : {kCpu, kVirt0})
    for (Op op : {Op::adam_step, Op::sgd_step}) {
      EXPECT_TRUE(supports(op, DType::f32, d)) << op_name(op);
      EXPECT_FALSE(supports(op, DType::bf16, d)) << op_name(op);
      EXPECT_FALSE(supports(op, DType::f16, d)) << op_name(op);
    }
  EXPECT_STREQ(op_name(Op::adam_step), "adam_step");
  EXPECT_STREQ(op_name(Op::sgd_step), "sgd_step");
  EXPECT_EQ(error_of([] { require(Op::adam_step, DType::bf16, kCpu); }), "[adam_step] bf16 is not supported on cpu");
}

TEST(OpsDtypeQuery, F16OnCpuIsStorageThroughF32) {
  // oneDNN 2.6 builds no f16 convolution or matmul on the CPU (next test): the cpu backend
  // offers f16 for every op as storage, computing through the f32 kernels (cpu_f16.h).
  for (Op op : all_ops()) {
    const bool master_state = op == Op::adam_step || op == Op::sgd_step;
    EXPECT_EQ(supports(op, DType::f16, kCpu), !master_state) << op_name(op);
  }
  ErrorCode code{};
  EXPECT_EQ(error_of([] { require(Op::adam_step, DType::f16, kCpu); }, &code),
            "[adam_step] f16 is not supported on cpu");
  EXPECT_EQ(code, ErrorCode::not_available);
  EXPECT_EQ(error_of([] { require(Op::sgd_step, DType::f16, kVirt0); }), "[sgd_step] f16 is not supported on virt:0");
}

// Why cpu has no f16: oneDNN here builds no f16 convolution (nor matmul). Should a newer
// oneDNN build one, this fails and the cpu answer for f16 is to be revisited.
TEST(OpsDtypeQuery, OneDnnBuildsNoF16Convolution) {
  using dnnl::memory;
  const auto f16 = memory::data_type::f16;
  auto any = [&](const memory::dims& d) { return memory::desc(d, f16, memory::format_tag::any); };
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                          any({2, 3, 8, 8}), any({4, 3, 3, 3}), any({2, 4, 6, 6}), {1, 1}, {0, 0},
                                          {0, 0});
  EXPECT_THROW(dnnl::convolution_forward::primitive_desc(d, eng), dnnl::error);
  const dnnl::matmul::desc m(memory::desc({4, 5}, f16, memory::format_tag::ab),
                             memory::desc({5, 6}, f16, memory::format_tag::ab),
                             memory::desc({4, 6}, f16, memory::format_tag::ab));
  EXPECT_THROW(dnnl::matmul::primitive_desc(m, eng), dnnl::error);
}

TEST(OpsDtypeQuery, NonFloatDataDtypesAreNotSupported) {
  for (Op op : all_ops())
    for (DType t : {DType::i32, DType::i64, DType::u8})
      EXPECT_EQ(supports(op, t, kCpu), op == Op::zero_) << op_name(op) << " " << dtype_name(t);
}

TEST(OpsDtypeQuery, CudaAnswers) {
  const Device cuda{DeviceKind::cuda, 0};
  if (cuda::built()) {
    if (cuda::device_count() == 0) GTEST_SKIP() << "CUDA built but no CUDA device: the cuda answers need one";
    for (Op op : all_ops()) {
      EXPECT_TRUE(supports(op, DType::f32, cuda)) << op_name(op);
      EXPECT_EQ(supports(op, DType::bf16, cuda), op == Op::zero_) << op_name(op);
    }
    return;
  }
  // Built without CUDA: no op runs on cuda in any dtype.
  for (Op op : all_ops())
    for (DType t : {DType::f32, DType::bf16, DType::f16}) EXPECT_FALSE(supports(op, t, cuda)) << op_name(op);
  EXPECT_EQ(error_of([&] { require(Op::conv2d_forward, DType::bf16, cuda); }),
            "[conv2d_forward] bf16 is not supported on cuda:0");
}

// ---- the front end ----------------------------------------------------------------------

TEST(OpsDtypeFrontEnd, UnsupportedDtypeThrowsTheQueryError) {
  // No cuda device here: its backend is missing, and the query names the device.
  ErrorCode code{};
  EXPECT_EQ(error_of([] { require(Op::conv2d_forward, DType::f16, Device{DeviceKind::cuda, 0}); }, &code),
            "[conv2d_forward] f16 is not supported on cuda:0");
  EXPECT_EQ(code, ErrorCode::not_available);
  const Tensor a = Tensor::zeros({8}, DType::f16);
  EXPECT_NO_THROW(relu_forward(a, a));  // f16 through f32 on the cpu
  EXPECT_NO_THROW(zero_(a));  // zero_ clears bytes of any dtype
}

TEST(OpsDtypeFrontEnd, DataTensorsShareOneDtype) {
  const Tensor x = Tensor::zeros({1, 2, 4, 4}, DType::bf16), wf = Tensor::zeros({3, 2, 3, 3});
  const Tensor wb = Tensor::zeros({3, 2, 3, 3}, DType::bf16), y = Tensor::zeros({1, 3, 2, 2}, DType::bf16);
  ErrorCode code{};
  EXPECT_EQ(error_of([&] { conv2d_forward(x, wf, Tensor(), {}, y); }, &code),
            "[conv2d_forward] w must be bf16, found f32");
  EXPECT_EQ(code, ErrorCode::invalid_argument);
  // The bias stays f32 with bf16 data.
  EXPECT_EQ(error_of([&] { conv2d_forward(x, wb, Tensor::zeros({3}, DType::bf16), {}, y); }),
            "[conv2d_forward] b must be f32, found bf16");
  EXPECT_EQ(error_of([&] { relu_forward(Tensor::zeros({4}, DType::i32), Tensor::zeros({4}, DType::i32)); }),
            "[relu_forward] x must be f32, bf16 or f16, found i32");
  // Batch-norm statistics stay f32.
  const Tensor c16 = Tensor::zeros({2}, DType::bf16), c32 = Tensor::zeros({2});
  EXPECT_EQ(error_of([&] { batch_norm_forward_inference(x, c16, c32, c32, c32, 1e-5, x); }),
            "[batch_norm_forward_inference] gamma must be f32, found bf16");
}

// ---- bf16 and f16 results against f32 -----------------------------------------------------------

Tensor rand_host(const Shape& s, uint64_t seed, float lo = -2.0f, float hi = 2.0f) {
  Tensor t = Tensor::empty(s);
  Philox rng(seed, 7);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = lo + (hi - lo) * rng.uniform();
  return t;
}

// The low-precision dtype of the test running now (LowPrecisionOps sets it).
DType g_low = DType::bf16;
DType low() { return g_low; }
double unit() { return g_low == DType::f16 ? 1.0 / 2048 : kU; }
double subnormal_step() { return g_low == DType::f16 ? std::ldexp(1.0, -25) : 0.0; }

Tensor rounded(const Tensor& f) { return f.to(low()).to(DType::f32); }
Tensor abs_of(const Tensor& f) {
  Tensor a = f.clone();
  for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = std::fabs(a.data<float>()[i]);
  return a;
}

class LowPrecisionOps : public ::testing::TestWithParam<std::tuple<Device, DType>> {
 protected:
  void SetUp() override {
    g_low = std::get<1>(GetParam());
    if (!supports(Op::conv2d_forward, low(), dev()))
      GTEST_SKIP() << dtype_name(low()) << " is not supported on " << dev().str() << " (this CPU or oneDNN lacks it)";
  }
  Device dev() const { return std::get<0>(GetParam()); }
  // A host tensor on the device under test.
  Tensor on(const Tensor& h) const {
    return dev().is_host() ? h.clone() : h.to(dev(), virt_current_stream(dev().index));
  }
  // Rounded to bf16 and stored as bf16 on the device.
  Tensor bf(const Tensor& h) const { return on(h.to(low())); }
  // Back on the host as f32.
  static Tensor back(const Tensor& t) {
    Tensor h = tandem::testing::to_host(t);
    return h.dtype() == DType::f32 ? h : h.to(DType::f32);
  }
};

// Per element |got - ref| <= (bf16_out ? u |ref| : 0) + 2 K 2^-24 S (S = |ref| when undefined).
void expect_close(const Tensor& got, const Tensor& ref, bool bf16_out, double k, const Tensor& s,
                  const std::string& what) {
  ASSERT_EQ(got.numel(), ref.numel()) << what;
  int bad = 0;
  for (int64_t i = 0; i < ref.numel() && bad < 5; ++i) {
    const double r = ref.data<float>()[i], g = got.data<float>()[i];
    const double si = s.defined() ? s.data<float>()[i] : std::fabs(r);
    const double tol = (bf16_out ? unit() * std::fabs(r) + subnormal_step() : 0.0) + 2.0 * k * kF32 * si + 1e-30;
    if (!(std::fabs(g - r) <= tol)) {
      ++bad;
      ADD_FAILURE() << what << "[" << i << "]: got " << g << ", f32 reference " << r << ", tolerance " << tol;
    }
  }
}

// got must equal the f32 reference rounded to bf16, element for element.
void expect_rounded_equal(const Tensor& got, const Tensor& ref, const std::string& what) {
  ASSERT_EQ(got.numel(), ref.numel()) << what;
  const Tensor r = rounded(ref);
  int bad = 0;
  for (int64_t i = 0; i < ref.numel() && bad < 5; ++i) {
    const float g = got.data<float>()[i], e = r.data<float>()[i];
    if (g != e && !(std::isnan(g) && std::isnan(e))) {
      ++bad;
      ADD_FAILURE() << what << "[" << i << "]: got " << g << ", expected " << e;
    }
  }
}

TEST_P(LowPrecisionOps, Conv2d) {
  const Conv2dParams p{1, 2, 1, 0};
  const Shape xs{2, 5, 9, 8}, ws{6, 5, 3, 3};
  const Shape ys = conv2d_output_shape(xs, ws, p);
  const Tensor x = rounded(rand_host(xs, 1)), w = rounded(rand_host(ws, 2)), b = rand_host({6}, 3);
  const Tensor dy = rounded(rand_host(ys, 4));
  // Forward: K = C R S products (+ the bias).
  Tensor ref = Tensor::zeros(ys), s = Tensor::zeros(ys);
  conv2d_forward(x, w, b, p, ref);
  conv2d_forward(abs_of(x), abs_of(w), abs_of(b), p, s);
  Tensor y = on(Tensor::zeros(ys, low()));
  conv2d_forward(bf(x), bf(w), on(b), p, y);
  expect_close(back(y), ref, true, 5 * 3 * 3 + 1, s, "conv2d_forward y");
  // Backward data: K = K_out R S.
  Tensor dref = Tensor::zeros(xs), ds = Tensor::zeros(xs);
  conv2d_backward_data(dy, w, p, dref);
  conv2d_backward_data(abs_of(dy), abs_of(w), p, ds);
  Tensor dx = on(Tensor::zeros(xs, low()));
  conv2d_backward_data(bf(dy), bf(w), p, dx);
  expect_close(back(dx), dref, true, 6 * 3 * 3, ds, "conv2d_backward_data dx");
  // Backward weights into f32 dw/db, overwritten and accumulated: K = N P Q.
  for (bool acc : {false, true}) {
    const Tensor dw0 = rand_host(ws, 5), db0 = rand_host({6}, 6);
    Tensor wref = dw0.clone(), bref = db0.clone(), wsum = abs_of(dw0), bsum = abs_of(db0);
    conv2d_backward_weights(x, dy, p, wref, bref, acc);
    conv2d_backward_weights(abs_of(x), abs_of(dy), p, wsum, bsum, acc);
    Tensor dw = on(dw0), db = on(db0);
    conv2d_backward_weights(bf(x), bf(dy), p, dw, db, acc);
    const double k = static_cast<double>(ys[0] * ys[2] * ys[3]) + 1;
    expect_close(back(dw), wref, false, k, wsum, acc ? "conv2d dw (accumulate)" : "conv2d dw");
    expect_close(back(db), bref, false, k, bsum, acc ? "conv2d db (accumulate)" : "conv2d db");
  }
}

TEST_P(LowPrecisionOps, Linear) {
  const int64_t n = 7, in = 19, out = 5;
  const Tensor x = rounded(rand_host({n, in}, 11)), w = rounded(rand_host({out, in}, 12));
  const Tensor b = rand_host({out}, 13), dy = rounded(rand_host({n, out}, 14));
  Tensor ref = Tensor::zeros({n, out}), s = Tensor::zeros({n, out});
  linear_forward(x, w, b, ref);
  linear_forward(abs_of(x), abs_of(w), abs_of(b), s);
  Tensor y = on(Tensor::zeros({n, out}, low()));
  linear_forward(bf(x), bf(w), on(b), y);
  expect_close(back(y), ref, true, in + 1, s, "linear_forward y");
  Tensor y_nb = on(Tensor::zeros({n, out}, low())), ref_nb = Tensor::zeros({n, out});
  linear_forward(x, w, Tensor(), ref_nb);
  linear_forward(bf(x), bf(w), Tensor(), y_nb);
  expect_close(back(y_nb), ref_nb, true, in, s, "linear_forward y (no bias)");

  Tensor dref = Tensor::zeros({n, in}), ds = Tensor::zeros({n, in});
  linear_backward_data(dy, w, dref);
  linear_backward_data(abs_of(dy), abs_of(w), ds);
  Tensor dx = on(Tensor::zeros({n, in}, low()));
  linear_backward_data(bf(dy), bf(w), dx);
  expect_close(back(dx), dref, true, out, ds, "linear_backward_data dx");

  for (bool acc : {false, true}) {
    const Tensor dw0 = rand_host({out, in}, 15), db0 = rand_host({out}, 16);
    Tensor wref = dw0.clone(), bref = db0.clone(), wsum = abs_of(dw0), bsum = abs_of(db0);
    linear_backward_weights(x, dy, wref, bref, acc);
    linear_backward_weights(abs_of(x), abs_of(dy), wsum, bsum, acc);
    Tensor dw = on(dw0), db = on(db0);
    linear_backward_weights(bf(x), bf(dy), dw, db, acc);
    expect_close(back(dw), wref, false, n + 1, wsum, acc ? "linear dw (accumulate)" : "linear dw");
    expect_close(back(db), bref, false, n + 1, bsum, acc ? "linear db (accumulate)" : "linear db");
  }
}

TEST_P(LowPrecisionOps, LinearEmptyDimensions) {
  // in = 0: y = b rounded to bf16; n = 0: the overwritten dw and db become 0.
  const Tensor b = rand_host({4}, 17);
  Tensor y = on(Tensor::full({3, 4}, 5.0f).to(low()));
  linear_forward(bf(Tensor::zeros({3, 0})), bf(Tensor::zeros({4, 0})), on(b), y);
  const Tensor yh = back(y), br = rounded(b);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) ASSERT_EQ(yh.data<float>()[i * 4 + j], br.data<float>()[j]) << i << "," << j;
  Tensor dw = on(Tensor::full({4, 2}, 3.0f)), db = on(Tensor::full({4}, 3.0f));
  linear_backward_weights(bf(Tensor::zeros({0, 2})), bf(Tensor::zeros({0, 4})), dw, db, false);
  const Tensor dwh = back(dw), dbh = back(db);
  for (int64_t i = 0; i < 8; ++i) ASSERT_EQ(dwh.data<float>()[i], 0.0f) << i;
  for (int64_t i = 0; i < 4; ++i) ASSERT_EQ(dbh.data<float>()[i], 0.0f) << i;
}

TEST_P(LowPrecisionOps, BatchNorm) {
  const Shape xs{3, 4, 5, 6};
  const int64_t k = 3 * 5 * 6;  // values per channel: the statistics' reduction length
  const Tensor x = rounded(rand_host(xs, 21, -1.0f, 3.0f)), dy = rounded(rand_host(xs, 22));
  const Tensor gamma = rand_host({4}, 23, 0.5f, 1.5f), beta = rand_host({4}, 24);
  const Tensor rm0 = rand_host({4}, 25), rv0 = rand_host({4}, 26, 0.5f, 2.0f);
  for (bool relu : {false, true}) {
    const std::string tag = relu ? " (fused relu)" : "";
    Tensor yr = Tensor::zeros(xs), mr = Tensor::zeros({4}), vr = Tensor::zeros({4});
    Tensor rmr = rm0.clone(), rvr = rv0.clone();
    batch_norm_forward_training(x, gamma, beta, 1e-5, 0.1, yr, mr, vr, rmr, rvr, relu);
    Tensor y = on(Tensor::zeros(xs, low())), m = on(Tensor::zeros({4})), v = on(Tensor::zeros({4}));
    Tensor rm = on(rm0), rv = on(rv0);
    batch_norm_forward_training(bf(x), on(gamma), on(beta), 1e-5, 0.1, y, m, v, rm, rv, relu);
    // y is normalised (|y| ~ 1-3): each element's S is taken as the output scale, 4.
    const Tensor scale = Tensor::full(xs, 4.0f);
    expect_close(back(y), yr, true, k, scale, "batch_norm y" + tag);
    expect_close(back(m), mr, false, k, abs_of(mr), "batch_norm save_mean" + tag);
    expect_close(back(v), vr, false, k, abs_of(vr), "batch_norm save_var" + tag);
    expect_close(back(rm), rmr, false, k, abs_of(rmr), "batch_norm running_mean" + tag);
    expect_close(back(rv), rvr, false, k, abs_of(rvr), "batch_norm running_var" + tag);

    Tensor dxr = Tensor::zeros(xs), dgr = Tensor::zeros({4}), dbr = Tensor::zeros({4});
    batch_norm_backward(dy, x, gamma, mr, vr, 1e-5, dxr, dgr, dbr, false, relu, rounded(yr));
    Tensor dx = on(Tensor::zeros(xs, low())), dg = on(Tensor::zeros({4})), db = on(Tensor::zeros({4}));
    batch_norm_backward(bf(dy), bf(x), on(gamma), on(mr), on(vr), 1e-5, dx, dg, db, false, relu,
                        relu ? y : Tensor());
    expect_close(back(dx), dxr, true, k, Tensor::full(xs, 8.0f), "batch_norm dx" + tag);
    expect_close(back(dg), dgr, false, k, Tensor::full({4}, 4.0f * k), "batch_norm dgamma" + tag);
    expect_close(back(db), dbr, false, k, Tensor::full({4}, 2.0f * k), "batch_norm dbeta" + tag);
  }
  Tensor yr = Tensor::zeros(xs), y = on(Tensor::zeros(xs, low()));
  batch_norm_forward_inference(x, gamma, beta, rm0, rv0, 1e-5, yr, false);
  batch_norm_forward_inference(bf(x), on(gamma), on(beta), on(rm0), on(rv0), 1e-5, y, false);
  expect_close(back(y), yr, true, 1, Tensor::full(xs, 8.0f), "batch_norm_forward_inference y");
}

TEST_P(LowPrecisionOps, MaxPoolAndRelu) {
  const Shape xs{2, 3, 6, 7};
  const Tensor x = rounded(rand_host(xs, 31));
  for (const Pool2dParams p : {Pool2dParams{}, Pool2dParams{3, 3, 2, 2, 1, 1}}) {
    const Shape ys = max_pool2d_output_shape(xs, p);
    Tensor yr = Tensor::zeros(ys), ir = Tensor::zeros(ys, DType::i32);
    max_pool2d_forward(x, p, yr, ir);
    Tensor y = on(Tensor::zeros(ys, low())), idx = on(Tensor::zeros(ys, DType::i32));
    max_pool2d_forward(bf(x), p, y, idx);
    expect_rounded_equal(back(y), yr, "max_pool2d_forward y");
    const Tensor ih = tandem::testing::to_host(idx);
    for (int64_t i = 0; i < ir.numel(); ++i) ASSERT_EQ(ih.data<int32_t>()[i], ir.data<int32_t>()[i]) << i;
    const Tensor dy = rounded(rand_host(ys, 32));
    Tensor dxr = Tensor::zeros(xs), dx = on(Tensor::zeros(xs, low()));
    max_pool2d_backward(dy, ir, p, dxr);
    max_pool2d_backward(bf(dy), idx, p, dx);
    // Overlapping windows (kernel 3, stride 2) add up to 4 gradients into one input.
    expect_close(back(dx), dxr, true, 4, abs_of(dxr), "max_pool2d_backward dx");
  }
  Tensor r = Tensor::zeros(xs), rb = on(Tensor::zeros(xs, low()));
  relu_forward(x, r);
  relu_forward(bf(x), rb);
  expect_rounded_equal(back(rb), r, "relu_forward y");
  const Tensor g = rounded(rand_host(xs, 33));
  Tensor dr = Tensor::zeros(xs), db = on(Tensor::zeros(xs, low()));
  relu_backward(g, r, dr);
  relu_backward(bf(g), rb, db);
  expect_rounded_equal(back(db), dr, "relu_backward dx");
}

TEST_P(LowPrecisionOps, DropoutAndElementwise) {
  const Shape s{5, 37};
  const Tensor x = rounded(rand_host(s, 41)), src = rounded(rand_host(s, 42));
  Tensor yr = Tensor::zeros(s), mr = Tensor::zeros(s, DType::u8);
  dropout_forward(x, 0.3f, 9, 4, yr, mr);
  Tensor y = on(Tensor::zeros(s, low())), m = on(Tensor::zeros(s, DType::u8));
  dropout_forward(bf(x), 0.3f, 9, 4, y, m);
  expect_rounded_equal(back(y), yr, "dropout_forward y");
  Tensor dr = Tensor::zeros(s), d = on(Tensor::zeros(s, low()));
  dropout_backward(src, mr, 0.3f, dr);
  dropout_backward(bf(src), m, 0.3f, d);
  expect_rounded_equal(back(d), dr, "dropout_backward dx");

  Tensor ar = x.clone(), a = bf(x);
  add_(ar, src, -0.75f);
  add_(a, bf(src), -0.75f);
  Tensor as = abs_of(x);
  add_(as, abs_of(src), 0.75f);
  expect_close(back(a), ar, true, 1, as, "add_ dst");
  Tensor sr = x.clone(), sc = bf(x);
  scale_(sr, 0.3f);
  scale_(sc, 0.3f);
  expect_rounded_equal(back(sc), sr, "scale_ dst");
  zero_(sc);
  const Tensor z = back(sc);
  for (int64_t i = 0; i < z.numel(); ++i) ASSERT_EQ(z.data<float>()[i], 0.0f) << i;
}

TEST_P(LowPrecisionOps, CrossEntropy) {
  const int64_t n = 9, c = 11;
  const Tensor z = rounded(rand_host({n, c}, 51, -4.0f, 4.0f));
  Tensor labels = Tensor::empty({n}, DType::i64);
  for (int64_t i = 0; i < n; ++i) labels.data<int64_t>()[i] = (i * 5) % c;
  const Tensor lab = on(labels);
  // The loss: K = N C terms of magnitude <= ~|loss| + 8 (the logits' range).
  Tensor pr = Tensor::zeros({n, c}), p = on(Tensor::zeros({n, c}));
  const float lr = softmax_cross_entropy_forward(z, labels, 0.1f, pr);
  const float l = softmax_cross_entropy_forward(bf(z), lab, 0.1f, p);
  EXPECT_NEAR(l, lr, 2.0 * n * c * kF32 * (std::fabs(lr) + 8.0)) << "loss";
  expect_close(back(p), pr, false, c, Tensor::full({n, c}, 1.0f), "softmax probs");
  Tensor dr = Tensor::zeros({n, c}), d = on(Tensor::zeros({n, c}, low()));
  softmax_cross_entropy_backward(pr, labels, 0.1f, 2.0f, dr);
  softmax_cross_entropy_backward(p, lab, 0.1f, 2.0f, d);
  expect_close(back(d), dr, true, 2, abs_of(dr), "dlogits");
  EXPECT_EQ(count_correct(bf(z), lab), count_correct(z, labels));
  Tensor mr = Tensor::zeros({4}), m = on(Tensor::zeros({4}));
  softmax_cross_entropy_accumulate(z, labels, 0.1f, pr, mr);
  softmax_cross_entropy_accumulate(bf(z), lab, 0.1f, p, m);
  const Tensor mh = back(m);
  EXPECT_NEAR(mh.data<float>()[0], mr.data<float>()[0], 2.0 * n * c * kF32 * (mr.data<float>()[0] + 8.0 * n));
  for (int i = 1; i < 4; ++i) EXPECT_EQ(mh.data<float>()[i], mr.data<float>()[i]) << "metrics[" << i << "]";
}

INSTANTIATE_TEST_SUITE_P(DevicesAndDtypes, LowPrecisionOps,
                         ::testing::Combine(::testing::Values(kCpu, kVirt0), ::testing::Values(DType::bf16, DType::f16)),
                         [](const ::testing::TestParamInfo<std::tuple<Device, DType>>& info) {
                           return std::string(std::get<0>(info.param).is_host() ? "cpu_" : "virt_") +
                                  dtype_name(std::get<1>(info.param));
                         });

}  // namespace
