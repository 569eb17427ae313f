// cuda backend: the mixed-precision ops of tandem/amp_ops.h (own kernels, cuda_amp.cu) on the
// default stream of the state's device. Each gradient gets its own op scope (ordering after
// its pending write, marking it written), so a step with many parameters needs no list of
// writes. run_if_finite is the one that waits: the host reads state[kFoundInf] back (4 bytes,
// after the step's backward) and then runs fn on the calling thread, where the optimizer
// enqueues its device update (Optimizer::gated_step); the host cannot address device memory,
// so the update cannot run inside the stream as on virt.
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_kernels.h"

namespace tandem::ops {

static_assert(cuda_kernels::kAmpScale == kScale && cuda_kernels::kAmpGrowthTracker == kGrowthTracker &&
              cuda_kernels::kAmpFoundInf == kFoundInf && cuda_kernels::kAmpSkippedSteps == kSkippedSteps);

void CudaBackend::amp_scale(const Tensor& src, const Tensor& state, const Tensor& dst) {
  CudaOpScope s("amp_scale", {&src, &state}, {&dst});
  TD_CUDA(cuda_kernels::amp_scale(elem(dst), in_f32(src), in_f32(state), dst.raw_data(), src.numel(), s.stream));
}

void CudaBackend::amp_unscale_check_(const std::vector<Tensor>& grads, const Tensor& state) {
  constexpr const char* op = "amp_unscale_check_";
  CudaOpScope s(op, {}, {&state});
  TD_CUDA(cuda_kernels::amp_clear_found(out_f32(state), s.stream));
  for (const Tensor& g : grads) {
    if (!g.defined()) continue;
    CudaOpScope gs(op, {}, {&g});
    TD_CUDA(cuda_kernels::amp_unscale_check(out_f32(g), out_f32(state), g.numel(), gs.stream));
  }
}

void CudaBackend::amp_update_scale_(const Tensor& state, const AmpScaleParams& p) {
  CudaOpScope s("amp_update_scale_", {}, {&state});
  TD_CUDA(cuda_kernels::amp_update_scale(out_f32(state), p.growth_factor, p.backoff_factor, p.growth_interval,
                                         p.min_scale, s.stream));
}

void CudaBackend::clip_grad_norm_(const std::vector<Tensor>& grads, double max_norm, const Tensor& total_norm) {
  constexpr const char* op = "clip_grad_norm_";
  CudaOpScope s(op, {}, {&total_norm});
  std::vector<const Tensor*> defined;
  for (const Tensor& g : grads)
    if (g.defined()) defined.push_back(&g);
  const int64_t count = static_cast<int64_t>(defined.size()) * cuda_kernels::kNormBlocks;
  // partials [count] doubles, then the coefficient (one float).
  CudaScratch scratch(s.device, static_cast<size_t>(count + 1) * sizeof(double));
  auto* partials = static_cast<double*>(scratch.get());
  auto* coef = reinterpret_cast<float*>(partials + count);
  for (size_t i = 0; i < defined.size(); ++i) {
    CudaOpScope gs(op, {defined[i]}, {});
    TD_CUDA(cuda_kernels::sum_squares(in_f32(*defined[i]), defined[i]->numel(),
                                      partials + static_cast<int64_t>(i) * cuda_kernels::kNormBlocks, gs.stream));
  }
  TD_CUDA(cuda_kernels::clip_coef(partials, count, max_norm, out_f32(total_norm), coef, s.stream));
  for (const Tensor* g : defined) {
    CudaOpScope gs(op, {}, {g});
    TD_CUDA(cuda_kernels::scale_by(out_f32(*g), coef, g->numel(), gs.stream));
  }
}

void CudaBackend::run_if_finite(const Tensor& state, const std::vector<Tensor>&, std::function<void()> fn) {
  if (state.defined()) {
    float found = 0.0f;
    {
      CudaOpScope s("run_if_finite", {&state}, {});
      TD_CUDA(cudaMemcpyAsync(&found, data_ptr<const float>(state) + kFoundInf, sizeof(float), cudaMemcpyDeviceToHost,
                              s.stream));
      TD_CUDA(cudaStreamSynchronize(s.stream));
    }
    if (found != 0.0f) return;
  }
  fn();
}

}  // namespace tandem::ops
