// PyDataset: a Python object with __len__ and __getitem__ as a data::FieldDataset, so that
// tandem's loader workers make batches of it (docs/python.md, "A Python data set").
//
// dataset[i] returns either (x, label) or x alone, where x is any object with the buffer
// protocol (a numpy array, bytes, bytearray, memoryview) or a CPU torch tensor (through its
// numpy() view), C-contiguous, of dtype float32,
// float16, int32, int64 or uint8, and label an integer (int, numpy integer). dataset[0], read at
// construction, fixes the fields: `inputs` [...x.shape] of x's dtype (bytes: uint8 [len]) as
// the input, and `labels` i64 [] as the target when there is a label. Every sample must match
// them. The classes of the labels, checked by the loader, are `dataset.num_classes` or
// `len(dataset.classes)` (torchvision's data sets have `classes`) when the object has either;
// otherwise labels are only checked to be >= 0.
//
// Cost: each write() takes the GIL for the __getitem__ call and the copy of its result into the
// batch slot, so the Python part of every sample runs one at a time however many workers there
// are; tandem's own work (collation, checks, the loader's queue) runs outside the GIL.
// Randomness inside __getitem__ is the object's own: batches are the same for any num_workers
// only when dataset[i] is a function of i.
//
// Errors: the constructor throws Error(invalid_argument, "[Loader] dataset...") for an object
// without __len__/__getitem__, an empty one, or a dataset[0] of another form; write() throws
// Error(invalid_argument, "[Loader] dataset[i]: ...") naming the index for an exception raised
// by __getitem__ (its type and message) or a sample whose form, dtype or shape differs from
// dataset[0]'s, and Error(not_available) once the interpreter is shutting down.
// Thread-safety: as FieldDataset: write() from any thread (it takes the GIL itself). The
// constructor needs the GIL; the destructor takes it.
#pragma once

#include <pybind11/pybind11.h>

#include <vector>

#include "tandem/data/field_dataset.h"

namespace tandem::py {

class PyDataset final : public data::FieldDataset {
 public:
  /// Reads len(dataset) and dataset[0]. Call with the GIL held.
  explicit PyDataset(pybind11::object dataset);
  ~PyDataset() override;
  int64_t size() const override { return size_; }
  const std::vector<data::Field>& fields() const override { return fields_; }
  void write(int64_t index, const data::SampleKey& key, std::byte* const* out,
             data::SampleScratch& scratch, data::WriteTimes* times) const override;

 private:
  // Copies sample `index` (the result of dataset[index]) into out; GIL held.
  void copy_sample(int64_t index, const pybind11::handle& item, std::byte* const* out) const;
  pybind11::object dataset_;
  int64_t size_ = 0;
  bool labelled_ = false;
  std::vector<data::Field> fields_;
};

}  // namespace tandem::py
