// Internal: the body of the transformer kernel units, included after their target pragma with
// TANDEM_TRANSFORMER_KERNELS naming the table function the unit defines
// (cpu_transformer_kernels.h). The kernels have internal linkage, so each unit keeps its own.
#include "backend/cpu/cpu_attention_impl.h"
#include "backend/cpu/cpu_classifier_loss_impl.h"
#include "backend/cpu/cpu_gelu_impl.h"
#include "backend/cpu/cpu_layer_norm_impl.h"

namespace tandem::ops::cpu {

const TransformerKernels& TANDEM_TRANSFORMER_KERNELS() {
  static const TransformerKernels k{layer_norm_forward_k, layer_norm_backward_k, gelu_forward_k, gelu_backward_k,
                                    add_k,                attention_forward_k,   attention_backward_k, xent_rows_k};
  return k;
}

}  // namespace tandem::ops::cpu
