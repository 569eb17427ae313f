// Internal: the cuda backend's dtype table (tandem/op_support.h): f32, bf16 and f16 for every
// op (cuDNN and cuBLAS on tensor cores with f32 accumulation, own kernels for the rest) but
// those that work on f32 master weights, gradients and the scaler's state; zero_ in every
// dtype. Plain constexpr data without CUDA headers, so the tests read it in every build.
#pragma once

#include "tandem/op_support.h"

namespace tandem::ops {

inline constexpr OpSupport kCudaSupport{
    {Op::conv2d_forward, kFloatDTypes},
    {Op::conv2d_backward_data, kFloatDTypes},
    {Op::conv2d_backward_weights, kFloatDTypes},
    {Op::linear_forward, kFloatDTypes},
    {Op::linear_backward_data, kFloatDTypes},
    {Op::linear_backward_weights, kFloatDTypes},
    {Op::batch_norm_forward_training, kFloatDTypes},
    {Op::batch_norm_forward_inference, kFloatDTypes},
    {Op::batch_norm_backward, kFloatDTypes},
    {Op::max_pool2d_forward, kFloatDTypes},
    {Op::max_pool2d_backward, kFloatDTypes},
    {Op::global_avg_pool2d_forward, kFloatDTypes},
    {Op::global_avg_pool2d_backward, kFloatDTypes},
    {Op::relu_forward, kFloatDTypes},
    {Op::relu_backward, kFloatDTypes},
    {Op::add_relu_forward, kFloatDTypes},
    {Op::dropout_forward, kFloatDTypes},
    {Op::dropout_backward, kFloatDTypes},
    {Op::add_, kFloatDTypes},
    {Op::scale_, kFloatDTypes},
    {Op::zero_, DTypes::all()},
    {Op::softmax_cross_entropy_forward, kFloatDTypes},
    {Op::softmax_cross_entropy_backward, kFloatDTypes},
    {Op::count_correct, kFloatDTypes},
    {Op::softmax_cross_entropy_accumulate, kFloatDTypes},
    {Op::adam_step, DTypes{DType::f32}},  // f32 master state; the out copy in any float dtype
    {Op::sgd_step, DTypes{DType::f32}},
    {Op::amp_scale, kFloatDTypes},
    {Op::amp_unscale_check_, DTypes{DType::f32}},
    {Op::amp_update_scale_, DTypes{DType::f32}},
    {Op::clip_grad_norm_, DTypes{DType::f32}},
    {Op::run_if_finite, DTypes{DType::f32}},
    // The transformer ops: own kernels in f32, bf16 and f16 (cuBLAS for the classifier's products).
    {Op::embedding_forward, kFloatDTypes},
    {Op::embedding_backward, kFloatDTypes},
    {Op::layer_norm_forward, kFloatDTypes},
    {Op::layer_norm_backward, kFloatDTypes},
    {Op::gelu_forward, kFloatDTypes},
    {Op::gelu_backward, kFloatDTypes},
    {Op::add_forward, kFloatDTypes},
    {Op::attention_forward, kFloatDTypes},
    {Op::attention_backward, kFloatDTypes},
    {Op::classifier_cross_entropy, kFloatDTypes},
    {Op::linear_in_out_forward, kFloatDTypes},
    {Op::linear_in_out_backward_data, kFloatDTypes},
    {Op::linear_in_out_backward_weights, kFloatDTypes},
};

}  // namespace tandem::ops
