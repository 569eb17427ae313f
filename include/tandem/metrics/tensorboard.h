// TensorBoardWriter: scalar summaries in TensorBoard's event-file format, so that a run opens
// next to PyTorch's and TensorFlow's runs (`tensorboard --logdir DIR`).
//
// File: DIR/events.out.tfevents.<seconds>.<host>.<pid>.tandem, a sequence of records, each
//   uint64 length (little-endian) | uint32 masked CRC32C of the 8 length bytes | data |
//   uint32 masked CRC32C of data,
// masked CRC = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (TensorFlow's record format,
// tensorflow/core/lib/io/record_writer.cc). Each record's data is an Event protocol buffer
// (TensorBoard's event.proto field numbers); the first has file_version "brain.Event:2", each
// later one a Summary with one simple_value per tag at a step.
// Errors: Error(io, "[tensorboard] <path>: ...") when the folder cannot be made or a write
// fails. Every add_scalars() call is flushed to the file (a run that stops keeps what it wrote).
// Thread-safety: one thread at a time per writer.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace tandem::metrics {

/// CRC32C (Castagnoli, as iSCSI) of `size` bytes; crc32c("123456789") = 0xe3069283.
uint32_t crc32c(const void* data, size_t size);
/// TensorFlow's masked CRC32C of a record part (see above).
uint32_t masked_crc32c(const void* data, size_t size);

class TensorBoardWriter {
 public:
  /// Creates DIR (and its parents) when missing and a new event file in it.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  /// One Event at `step` holding each (tag, value) as a simple_value; wall time now.
  void add_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars);
  void add_scalar(int64_t step, const std::string& tag, double value) { add_scalars(step, {{tag, value}}); }
  /// The event file's path.
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace tandem::metrics
