// safetensors files (https://huggingface.co/docs/safetensors): an 8-byte little-endian header
// length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {...}}, then the
// raw little-endian tensor bytes. tandem writes model weights in this format with PyTorch's
// state_dict names so they load into the equivalent torch.nn module, and reads it for
// weights and golden test values.
// Thread-safety: functions are reentrant; concurrent writes to one path are the caller's to avoid.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tandem/tensor.h"

namespace tandem {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// One tensor of a safetensors file: its bytes are [offset, offset + nbytes) of the file.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
};

/// The tensors a safetensors file holds, without their bytes, sorted by offset; the checks and
/// errors of load_safetensors (a file truncated before a tensor's last byte included), so that
/// a reader may then take any tensor or element range with pread.
std::vector<SafetensorsEntry> read_safetensors_header(const std::string& path,
                                                      std::map<std::string, std::string>* metadata = nullptr);
/// The same for a file already open (`fd`, read with pread; `path` names it in errors), so that a
/// reader takes the header and the bytes from one file even if the path is replaced meanwhile.
std::vector<SafetensorsEntry> read_safetensors_header(int fd, const std::string& path,
                                                      std::map<std::string, std::string>* metadata = nullptr);

/// Reads every tensor of a safetensors file into contiguous host tensors, in file order.
/// Throws Error(io) when the file cannot be opened or read, Error(format) when the header
/// length, JSON, a dtype, a shape or data offsets are invalid or the file is truncated; the
/// message names the file and the entry.
NamedTensors load_safetensors(const std::string& path, std::map<std::string, std::string>* metadata = nullptr);

/// Writes host tensors (made contiguous) atomically: to "<path>.tmp-<pid>", flushed and
/// fsync'ed, then renamed over `path`; on any failure the temporary file is removed and the
/// old `path` (if any) is untouched. Throws Error(io) on write errors, Error(invalid_argument)
/// for duplicate or empty names or non-host tensors.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Looks a tensor up by name; throws Error(format, "[safetensors] <what>: missing tensor 'name'").
const Tensor& find_tensor(const NamedTensors& tensors, const std::string& name, const std::string& what);

}  // namespace tandem
