// Ops that carry their dtype: the op list (one value and name per op; every backend answers
// every op explicitly; an op without an entry runs in no dtype and the front end refuses it,
// f32 included), the support query per op, dtype and device, the exact error for
// an unsupported combination, the dtype rules of the front end, and every bf16 and f16 op
// against the f32 op on the same rounded inputs, on cpu and on virt.
//
// The tolerances of the bf16/f16 comparisons are stated in low_precision_ops.h.
#include <gtest/gtest.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/cuda_support.h"
#include "forwarding_backend.h"
#include "tandem/amp_ops.h"
#include "tandem/backend.h"
#include "tandem/cpu_isa.h"
#include "tandem/op_support.h"
#include "tandem/cuda.h"
#include "tandem/ops.h"
#include "tandem/rng.h"
#include "tandem/virt.h"
#include "low_precision_ops.h"
#include "virt_test_util.h"

using namespace tandem;
using namespace tandem::ops;
using namespace tandem::testing::low_precision;

namespace {

constexpr Device kCpu{};
constexpr Device kVirt0{DeviceKind::virt, 0};

std::vector<Op> all_ops() {
  std::vector<Op> v;
  for (int i = 0; i < kOpCount; ++i) v.push_back(static_cast<Op>(i));
  return v;
}

// The ops that work on f32 master weights, gradients or the loss scaler's state only.
bool f32_only(Op op) {
  return op == Op::adam_step || op == Op::sgd_step || op == Op::amp_unscale_check_ || op == Op::amp_update_scale_ ||
         op == Op::clip_grad_norm_ || op == Op::run_if_finite;
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

// bf16 runs on every CPU at the floor: natively where oneDNN has bf16 kernels at the level in
// use (avx512 and above), stored and computed in f32 below (compute_note says which).
TEST(OpsDtypeQuery, CpuBf16OnEveryCpu) {
  for (Op op : all_ops()) {
    EXPECT_EQ(supports(op, DType::bf16, kCpu), !f32_only(op)) << op_name(op);
  }
  const std::string note = compute_note(DType::bf16, kCpu);
  if (cpu_isa() < CpuIsa::avx512) {
    EXPECT_NE(note.find("bf16 stored, computed in f32"), std::string::npos) << note;
    EXPECT_NE(note.find(cpu_isa_name(cpu_isa())), std::string::npos) << note;
  }
  // oneDNN 2.6 runs bf16 convolutions natively with avx512_bf16 (and AMX): then no note.
  if (cpu_isa() >= CpuIsa::avx512_bf16) {
    EXPECT_EQ(note, "");
  }
  EXPECT_EQ(compute_note(DType::bf16, kVirt0), note);
  EXPECT_EQ(compute_note(DType::f32, kCpu), "");
}

TEST(OpsDtypeQuery, MasterStateOpsTakeF32Only) {
  for (Device d : {kCpu, kVirt0})
    for (Op op : {Op::adam_step, Op::sgd_step, Op::amp_unscale_check_, Op::amp_update_scale_, Op::clip_grad_norm_,
                  Op::run_if_finite}) {
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
    EXPECT_EQ(supports(op, DType::f16, kCpu), !f32_only(op)) << op_name(op);
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
      EXPECT_EQ(supports(op, DType::bf16, cuda), !f32_only(op)) << op_name(op);
      EXPECT_EQ(supports(op, DType::f16, cuda), !f32_only(op)) << op_name(op);
    }
    return;
  }
  // Built without CUDA: no op runs on cuda in any dtype.
  for (Op op : all_ops())
    for (DType t : {DType::f32, DType::bf16, DType::f16}) EXPECT_FALSE(supports(op, t, cuda)) << op_name(op);
  EXPECT_EQ(error_of([&] { require(Op::conv2d_forward, DType::bf16, cuda); }),
            "[conv2d_forward] bf16 is not supported on cuda:0");
}

// ---- the op list and opt-in support ----------------------------------------------------

TEST(OpTable, EveryOpHasOneValueAndOneName) {
#define TANDEM_TEST_NAME_(name, ret) #name,
  const std::vector<std::string> listed{TANDEM_OPS(TANDEM_TEST_NAME_)};
#undef TANDEM_TEST_NAME_
  ASSERT_EQ(static_cast<int>(listed.size()), ops::kOpCount);
  std::set<std::string> names;
  for (Op op : all_ops()) {
    EXPECT_EQ(op_name(op), listed[static_cast<size_t>(op)]);
    names.insert(op_name(op));
  }
  EXPECT_EQ(static_cast<int>(names.size()), ops::kOpCount);  // no name twice
  EXPECT_STREQ(op_name(static_cast<Op>(ops::kOpCount)), "?");
  // The mixed-precision and clipping ops are ops like the others.
  EXPECT_STREQ(op_name(Op::amp_scale), "amp_scale");
  EXPECT_STREQ(op_name(Op::amp_unscale_check_), "amp_unscale_check_");
  EXPECT_STREQ(op_name(Op::amp_update_scale_), "amp_update_scale_");
  EXPECT_STREQ(op_name(Op::clip_grad_norm_), "clip_grad_norm_");
  EXPECT_STREQ(op_name(Op::run_if_finite), "run_if_finite");
}

// A new op needs an entry in every backend's table, a "none" one where there is no kernel yet.
TEST(OpTable, EveryBackendAnswersEveryOpExplicitly) {
  (void)runtime_for(kVirt0);  // registers the virt backend
  const ops::Backend* virt = ops::find_backend(DeviceKind::virt);
  ASSERT_NE(virt, nullptr);
  for (Op op : all_ops()) {
    EXPECT_TRUE(ops::cpu_backend().op_support().listed(op)) << "cpu has no entry for " << op_name(op);
    EXPECT_TRUE(virt->op_support().listed(op)) << "virt has no entry for " << op_name(op);
    EXPECT_TRUE(ops::kCudaSupport.listed(op)) << "cuda has no entry for " << op_name(op);
    EXPECT_TRUE(ops::supports(op, DType::f32, Device{})) << op_name(op);  // every op has an f32 kernel on cpu
  }
}

TEST(OpTable, AnOpWithoutAnEntryRunsInNoDtype) {
  constexpr OpSupport t{{Op::relu_forward, ops::kFloatDTypes}, {Op::zero_, ops::DTypes::all()}};
  static_assert(t.supports(Op::relu_forward, DType::bf16) && !t.supports(Op::relu_forward, DType::i64));
  EXPECT_TRUE(t.listed(Op::relu_forward));
  EXPECT_FALSE(t.listed(Op::relu_backward));
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8}) {
    EXPECT_FALSE(t.supports(Op::relu_backward, d)) << dtype_name(d);
    EXPECT_EQ(t.supports(Op::zero_, d), true) << dtype_name(d);
  }
  // An explicit "none" is listed and answers no; without() drops the entry.
  const OpSupport none = t.with(Op::relu_forward, ops::DTypes{});
  EXPECT_TRUE(none.listed(Op::relu_forward));
  EXPECT_FALSE(none.supports(Op::relu_forward, DType::f32));
  const OpSupport dropped = t.without(Op::relu_forward);
  EXPECT_FALSE(dropped.listed(Op::relu_forward));
  EXPECT_FALSE(dropped.supports(Op::relu_forward, DType::f32));
  EXPECT_FALSE(t.listed(static_cast<Op>(ops::kOpCount)));  // outside the enum
}

// The front end asks before every call, f32 included: an op the backend has no kernel for
// never reaches it.
TEST(OpTable, FrontEndRefusesAnOpWithoutAKernelInF32Too) {
  tandem::testing::BackendSwap swap(kVirt0);
  swap->support = swap->support.without(Op::relu_forward).without(Op::clip_grad_norm_);
  const Tensor x = Tensor::empty({2, 3}, DType::f32, kVirt0), y = Tensor::empty({2, 3}, DType::f32, kVirt0);
  ops::zero_(x);
  EXPECT_EQ(error_of([&] { ops::relu_forward(x, y); }), "[relu_forward] f32 is not supported on virt:0");
  EXPECT_FALSE(swap->called(Op::relu_forward));
  EXPECT_EQ(error_of([&] { ops::relu_backward(x, x, y); }), "no error");
  EXPECT_TRUE(swap->called(Op::relu_backward));
  const Tensor norm = Tensor::empty({1}, DType::f32, kVirt0);
  EXPECT_EQ(error_of([&] { ops::clip_grad_norm_({x}, 1.0, norm); }), "[clip_grad_norm_] f32 is not supported on virt:0");
  EXPECT_FALSE(swap->called(Op::clip_grad_norm_));
  EXPECT_FALSE(ops::supports(Op::relu_forward, DType::f32, kVirt0));
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

INSTANTIATE_TEST_SUITE_P(DevicesAndDtypes, LowPrecisionOps,
                         ::testing::Combine(::testing::Values(kCpu, kVirt0), ::testing::Values(DType::bf16, DType::f16)),
                         [](const ::testing::TestParamInfo<std::tuple<Device, DType>>& info) {
                           return std::string(std::get<0>(info.param).is_host() ? "cpu_" : "virt_") +
                                  dtype_name(std::get<1>(info.param));
                         });

}  // namespace
