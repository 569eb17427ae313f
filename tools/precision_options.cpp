// The train command's precision flags (docs/mixed-precision.md): the compute dtype, loss scaling
// and clipping (tools/commands.h).
#include "commands.h"

namespace tandem::tools {

void add_precision_options(CLI::App* c, train::TrainConfig& cfg) {
  c->add_option("--precision", cfg.precision,
                "Compute precision: fp32, bf16 (convolutions, matrix products and activations in bfloat16; "
                "batch-norm statistics, loss and softmax in fp32; fp32 master weights) or fp16 (the same in "
                "float16, with dynamic loss scaling)")
      ->capture_default_str();
  c->add_option("--loss-scale", cfg.loss_scale,
                "Loss scaling: auto (dynamic for fp16, none for fp32 and bf16), dynamic (as PyTorch's GradScaler: "
                "2^16 or --loss-scale-init, x2 after 2000 good steps, x0.5 and the step skipped on inf/NaN) or none")
      ->capture_default_str();
  c->add_option("--loss-scale-init", cfg.loss_scale_init,
                "With dynamic loss scaling: the scale of the first step (GradScaler's init_scale; a scale whose "
                "gradients overflow is halved and its step skipped until they do not)")
      ->capture_default_str();
  c->add_option("--clip-grad-norm", cfg.clip_grad_norm,
                "Clip the global L2 norm of all gradients to this value, as torch.nn.utils.clip_grad_norm_ "
                "(0 = off)")
      ->capture_default_str();
}

}  // namespace tandem::tools
