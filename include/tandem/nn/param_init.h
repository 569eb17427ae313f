// A parameter's initialisation as data: how reset_parameters fills it (PyTorch's default init
// for the layer), recorded while a model is built without memory (nn::make_model_lazy) so
// that it can be filled later, part by part or element range by element range,
// with exactly the values a model built whole holds (the meta-device init of PyTorch's
// `torch.device("meta")` + `to_empty`, DeepSpeed's `zero.Init`).
// Every draw comes from tandem::Philox(seed, index), `index` being the parameter's number in
// the model's collect_parameters order; element i of a uniform init takes draw i, elements
// 2j and 2j + 1 of a normal init take draws 2j and 2j + 1 (one Box-Muller pair), so any
// element range is computed without the elements before it (Philox::skip).
// Thread-safety: the functions are reentrant; a ValueSource is called from one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>

namespace tandem::nn {

struct Parameter;

/// How a parameter's f32 value is initialised.
struct ParamInit {
  enum class Kind : uint8_t {
    unset,     // written by other means (a factory of its own): a lazy model cannot fill it
    uniform,   // U(-scale, scale): value = scale * (2u - 1), u = Philox(seed, index).uniform()
    normal,    // N(0, scale^2): Box-Muller on pairs of uniforms (u1 = 1 - u, u2), cos then sin
    constant,  // every element `scale`
  };
  Kind kind = Kind::unset;
  double scale = 0;
  uint64_t seed = 0;
  uint64_t index = 0;
};

/// Writes elements [begin, begin + n) of the flattened value `init` describes into dst (f32),
/// bit for bit the elements a whole-tensor init writes. `numel`: the tensor's element count
/// (the normal init's last pair is cut at it). Throws Error(invalid_argument) for Kind::unset,
/// a negative begin or n, or a range past numel.
void write_init(const ParamInit& init, int64_t numel, int64_t begin, int64_t n, float* dst);

/// Where a parameter's initial f32 values come from when the model was built without them:
/// writes elements [begin, begin + n) of p's flattened value into dst. Errors: as the source
/// says (write_init's, a file's Error(io)).
using ValueSource = std::function<void(const Parameter& p, int64_t begin, int64_t n, float* dst)>;

/// The source that writes each parameter's init from `inits` (by the parameter's address, as
/// make_model_lazy records them; write_init). Its calls throw Error(invalid_argument) for a
/// parameter without one.
ValueSource recorded_init_source(std::unordered_map<const Parameter*, ParamInit> inits);

/// Whether p's value holds memory (false for a model built by make_model_lazy or
/// make_model_shapes before its parameters were given homes).
bool has_values(const Parameter& p);

}  // namespace tandem::nn
