// Model weights as safetensors files: writing a model's state (Trainer::save_weights) and
// checking that a file holds the weights of the model being evaluated.
// Thread-safety: reentrant; a module is used by one thread at a time.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tandem/nn/models.h"
#include "tandem/nn/module.h"
#include "tandem/nn/param_init.h"

namespace tandem::train {

/// Writes `model`'s state_dict (parameters and buffers, copied to the host) to `path` as
/// safetensors, atomically, with metadata {"format": "pt", "model": model_name,
/// "sample_shape": "CxHxW", "num_classes": "K"} (what the model was built for, `spec`).
/// The parameters are the f32 master weights; `dtype` bf16 rounds the f32 tensors (parameters
/// and running statistics) to bf16 on the way out (torch's load_state_dict converts them back).
/// Sequence models (spec.block_size > 0) record no sample shape or classes but the model's
/// Module::config_metadata() (GPT-2: GPT2Config's sizes), and every Module::tied_state() alias
/// is written as a copy of its source (lm_head.weight), so GPT2LMHeadModel loads the file
/// with strict=True. `extra_metadata` is added to the metadata (e.g. "tokenizer": the path of
/// a GPT's tokenizer.model).
void save_model_weights(const std::string& path, nn::Module& model, const std::string& model_name,
                        const nn::ModelSpec& spec, DType dtype = DType::f32,
                        const std::map<std::string, std::string>& extra_metadata = {});

/// Throws Error(invalid_argument) naming both when the file's metadata records a sample shape
/// or class count other than `spec`'s (the dataset to evaluate on, `data_dir`): weights of
/// the same tensor shapes may come from images of another size (fmnist-cnn's pooling floors
/// 8x8 and 11x11 alike). A file without the records passes.
void check_saved_spec(const std::map<std::string, std::string>& metadata, const std::string& path,
                      const nn::ModelSpec& spec, const std::string& data_dir);

/// Throws when the file's metadata records a model other than `model` (--model):
/// Error(invalid_argument) naming both for another known model, Error(format) for a name
/// tandem does not know. A file without the record passes (load_state checks its tensors).
void check_saved_model(const std::map<std::string, std::string>& metadata, const std::string& path,
                       const std::string& model);

/// --init: copies the tensors of safetensors file `path` into `model`'s state (parameters and
/// buffers) by state-dict name, except names starting with one of `exclude` (both in the model
/// and in the file). Every other model tensor must be in the file with the same shape (f32
/// tensors may come as f32 only; num_batches_tracked as i64), and the file may hold no other
/// tensor. Throws Error(format, "[train] --init FILE: tensor 'fc.weight' has shape [1000, 512]
/// in the file, expected [10, 512] (...)"), naming a missing or unexpected tensor likewise;
/// the file's own errors (Error(io)/Error(format)) for an unreadable or corrupt file. On error
/// the model may be partly loaded (the run stops). A Module::tied_state() alias
/// (lm_head.weight) may be in the file; it must then be a byte copy of its source, else
/// Error(format) naming both. Error(invalid_argument) for an `exclude` prefix that no tensor of
/// the model or the file starts with (a typo would exclude nothing).
void load_init_weights(nn::Module& model, const std::string& path, const std::vector<std::string>& exclude);
/// load_init_weights for a model built without memory (nn::make_model_lazy): the same checks,
/// made now against the file's header (a tied alias's bytes compared), and nothing loaded. The
/// returned source writes any element range of a parameter from the file (pread, f32), or, for
/// a parameter the file does not give (--init-exclude), from `fallback` (the model's init). Its
/// reads throw Error(io) naming the file. The file stays open while the source lives.
/// `fingerprint` (optional) receives a hash of the file's size, header and 64 sampled blocks of
/// its data (CRC-32), which ranks that each read their own copy compare (check_same_file).
nn::ValueSource init_file_source(nn::Module& model, const std::string& path, const std::vector<std::string>& exclude,
                                 nn::ValueSource fallback, uint64_t* fingerprint = nullptr);

}  // namespace tandem::train
