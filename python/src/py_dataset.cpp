#include "py_dataset.h"

#include <Python.h>

#include <cstring>
#include <string>

#include <fmt/format.h>

#include "tandem/error.h"
#include "tandem/profile/profiler.h"

namespace tandem::py {

namespace {

constexpr const char* kOp = "Loader";

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// A buffer held for the time of one copy (PyBuffer_Release on every path).
struct BufferView {
  Py_buffer view{};
  bool held = false;
  ~BufferView() {
    if (held) PyBuffer_Release(&view);
  }
};

// The dtype of a buffer's struct-module format ("<f", "B", "q" ...), or false when tandem has
// no such field type.
bool buffer_dtype(const Py_buffer& v, DType& out, std::string& found) {
  std::string f = v.format ? v.format : "B";
  found = f;
  if (!f.empty() && (f[0] == '>' || f[0] == '!')) return false;  // big-endian
  if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<')) f = f.substr(1);
  if (f.size() != 1) return false;
  const char c = f[0];
  if (c == 'f' && v.itemsize == 4)
    out = DType::f32;
  else if (c == 'e' && v.itemsize == 2)
    out = DType::f16;
  else if ((c == 'B' || c == 'c') && v.itemsize == 1)
    out = DType::u8;
  else if (std::strchr("bhilq", c) && v.itemsize == 4)
    out = DType::i32;
  else if (std::strchr("bhilq", c) && v.itemsize == 8)
    out = DType::i64;
  else
    return false;
  return true;
}

// Takes a C-contiguous buffer of `x`; throws naming `what` (e.g. "dataset[3]") when it has none.
// A torch tensor has no buffer but a numpy() view (CPU tensors): its buffer is taken then.
void get_buffer(const pybind11::handle& x, BufferView& b, const std::string& what) {
  if (!PyObject_CheckBuffer(x.ptr()) && pybind11::hasattr(x, "numpy")) {
    const pybind11::object a = x.attr("numpy")();  // the buffer holds a reference to it
    get_buffer(a, b, what);
    return;
  }
  if (PyObject_GetBuffer(x.ptr(), &b.view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
    pybind11::error_already_set e;  // clears the Python error
    TD_CHECK_ARG(
        false, kOp, "{}: expected a C-contiguous array or bytes (the buffer protocol), got {}: {}",
        what, std::string(pybind11::str(pybind11::type::handle_of(x).attr("__name__"))), e.what());
  }
  b.held = true;
}

Shape buffer_shape(const Py_buffer& v) {
  if (v.ndim == 0) return {};
  if (!v.shape) return {static_cast<int64_t>(v.len / (v.itemsize ? v.itemsize : 1))};
  return Shape(v.shape, v.shape + v.ndim);
}

int64_t as_label(const pybind11::handle& y, const std::string& what) {
  PyObject* i = PyNumber_Index(y.ptr());
  if (!i) {
    pybind11::error_already_set e;
    TD_CHECK_ARG(false, kOp, "{}: expected an integer label, got {}", what,
                 std::string(pybind11::str(pybind11::type::handle_of(y).attr("__name__"))));
  }
  const long long v = PyLong_AsLongLong(i);
  Py_DECREF(i);
  if (v == -1 && PyErr_Occurred()) {
    pybind11::error_already_set e;
    TD_CHECK_ARG(false, kOp, "{}: expected a label that fits 64 bits: {}", what, e.what());
  }
  TD_CHECK_ARG(v >= 0, kOp, "{}: expected a label >= 0, got {}", what, v);
  return v;
}

// (x, label) or x: the parts of one sample.
void split_item(const pybind11::handle& item, pybind11::handle& x, pybind11::handle& y,
                bool labelled, const std::string& what) {
  const bool pair = PyTuple_Check(item.ptr()) || PyList_Check(item.ptr());
  if (pair) {
    const Py_ssize_t n = PySequence_Size(item.ptr());
    TD_CHECK_ARG(n == 2, kOp, "{}: expected (x, label) or x, got a sequence of {} items", what, n);
  }
  TD_CHECK_ARG(pair == labelled, kOp, "{}: expected {} as dataset[0] gives, got {}", what,
               labelled ? "(x, label)" : "x alone", pair ? "(x, label)" : "x alone");
  if (pair) {
    x = PyTuple_Check(item.ptr()) ? PyTuple_GET_ITEM(item.ptr(), 0)
                                  : PyList_GET_ITEM(item.ptr(), 0);
    y = PyTuple_Check(item.ptr()) ? PyTuple_GET_ITEM(item.ptr(), 1)
                                  : PyList_GET_ITEM(item.ptr(), 1);
  } else {
    x = item;
  }
}

// "TypeError: message": the first line of a Python exception (without its traceback).
std::string python_error(const pybind11::error_already_set& e) {
  std::string s = e.what();
  const size_t nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

}  // namespace

PyDataset::PyDataset(pybind11::object dataset) : dataset_(std::move(dataset)) {
  TD_CHECK_ARG(pybind11::hasattr(dataset_, "__len__") && pybind11::hasattr(dataset_, "__getitem__"),
               kOp, "dataset: expected a path or an object with __len__ and __getitem__, got {}",
               std::string(pybind11::str(pybind11::type::handle_of(dataset_).attr("__name__"))));
  try {
    size_ = static_cast<int64_t>(pybind11::len(dataset_));
  } catch (pybind11::error_already_set& e) {
    TD_CHECK_ARG(false, kOp, "len(dataset) raised {}", python_error(e));
  }
  TD_CHECK_ARG(size_ >= 1, kOp, "dataset: expected at least one sample, len(dataset) is {}", size_);
  pybind11::object item;
  try {
    item = dataset_[pybind11::int_(0)];
  } catch (pybind11::error_already_set& e) {
    TD_CHECK_ARG(false, kOp, "dataset[0] raised {}", python_error(e));
  }
  labelled_ = PyTuple_Check(item.ptr()) || PyList_Check(item.ptr());
  pybind11::handle x, y;
  split_item(item, x, y, labelled_, "dataset[0]");
  BufferView b;
  get_buffer(x, b, "dataset[0]");
  data::Field in{"inputs", DType::u8, buffer_shape(b.view), data::FieldRole::input, 0};
  std::string found;
  TD_CHECK_ARG(buffer_dtype(b.view, in.dtype, found), kOp,
               "dataset[0]: expected an array of float32, float16, int32, int64 or uint8 "
               "(little-endian), got "
               "format '{}' of {} bytes an element",
               found, b.view.itemsize);
  fields_.push_back(in);
  if (labelled_) {
    as_label(y, "dataset[0]");
    int64_t classes = 0;
    if (pybind11::hasattr(dataset_, "num_classes"))
      classes = pybind11::cast<int64_t>(dataset_.attr("num_classes"));
    else if (pybind11::hasattr(dataset_, "classes"))
      classes = static_cast<int64_t>(pybind11::len(dataset_.attr("classes")));
    TD_CHECK_ARG(classes >= 0, kOp, "dataset.num_classes: expected at least 0, got {}", classes);
    fields_.push_back(data::Field{"labels", DType::i64, {}, data::FieldRole::target, classes});
  }
}

PyDataset::~PyDataset() {
  // The last reference may go on any thread (a batch freed by PyTorch, a loader worker).
  if (interpreter_finalizing()) {
    dataset_.release();  // leaked rather than touched after the interpreter is gone
    return;
  }
  pybind11::gil_scoped_acquire gil;
  dataset_ = pybind11::object();
}

void PyDataset::copy_sample(int64_t index, const pybind11::handle& item,
                            std::byte* const* out) const {
  const std::string what = fmt::format("dataset[{}]", index);
  pybind11::handle x, y;
  split_item(item, x, y, labelled_, what);
  BufferView b;
  get_buffer(x, b, what);
  const data::Field& in = fields_[0];
  DType dtype = DType::u8;
  std::string found;
  const bool known = buffer_dtype(b.view, dtype, found);
  TD_CHECK_ARG(known && dtype == in.dtype, kOp,
               "{}: expected {} as dataset[0], got format '{}' of {} bytes an element", what,
               dtype_name(in.dtype), found, b.view.itemsize);
  const Shape shape = buffer_shape(b.view);
  TD_CHECK_ARG(shape == in.shape, kOp, "{}: expected shape {} as dataset[0], got {}", what,
               shape_str(in.shape), shape_str(shape));
  TD_ASSERT(static_cast<size_t>(b.view.len) == in.bytes());
  std::memcpy(out[0], b.view.buf, in.bytes());
  if (labelled_) {
    const int64_t label = as_label(y, what);
    std::memcpy(out[1], &label, sizeof label);
  }
}

void PyDataset::write(int64_t index, const data::SampleKey&, std::byte* const* out,
                      data::SampleScratch&, data::WriteTimes* times) const {
  TD_CHECK_ARG(index >= 0 && index < size_, kOp, "dataset: expected an index in [0, {}), got {}",
               size_, index);
  TD_CHECK(!interpreter_finalizing(), ErrorCode::not_available, kOp,
           "dataset[{}]: the Python interpreter is shutting down", index);
  const int64_t t0 = times ? profile::now_ns() : 0;
  std::string error;
  {
    pybind11::gil_scoped_acquire gil;
    try {
      const pybind11::object item = dataset_[pybind11::int_(index)];
      copy_sample(index, item, out);
    } catch (pybind11::error_already_set& e) {
      error = python_error(e);  // formatted while the GIL is held; the exception dies here too
    }
  }
  TD_CHECK_ARG(error.empty(), kOp, "dataset[{}] raised {}", index, error);
  if (times) times->load_ns += profile::now_ns() - t0;
}

}  // namespace tandem::py
