// tandem._tandem: the Loader (py_loader.h), load_weights, and the DLPack export of their
// tensors (dlpack_abi.h). The Python package python/tandem wraps it (docs/python.md).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "dlpack_abi.h"
#include "py_dataset.h"
#include "py_loader.h"
#include "tandem/error.h"
#include "tandem/safetensors.h"

namespace py = pybind11;

namespace tandem::py {

namespace {

DLDataType dl_dtype(DType t) {
  switch (t) {
    case DType::f32:
      return {kDLFloat, 32, 1};
    case DType::f16:
      return {kDLFloat, 16, 1};
    case DType::bf16:
      return {kDLBfloat, 16, 1};
    case DType::i32:
      return {kDLInt, 32, 1};
    case DType::i64:
      return {kDLInt, 64, 1};
    case DType::u8:
      return {kDLUInt, 8, 1};
  }
  return {kDLFloat, 32, 1};
}

// What a capsule's DLManagedTensor owns: the field (and through it the batch) plus the
// shape and strides arrays DLTensor points to.
struct Exported {
  DLManagedTensor managed{};
  FieldRef field;
  std::vector<int64_t> shape, strides;
};

void delete_exported(DLManagedTensor* m) {
  delete static_cast<Exported*>(m->manager_ctx);
}

// A capsule never consumed still owns its tensor; a consumed one is renamed by the consumer.
void capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (m && m->deleter) m->deleter(m);
}

pybind11::object to_capsule(const FieldRef& field) {
  TD_CHECK_ARG(field.tensor.device().is_host(), "__dlpack__", "expected a host tensor");
  auto* e = new Exported;
  e->field = field;
  const Tensor& t = e->field.tensor;
  e->shape.assign(t.shape().begin(), t.shape().end());
  e->strides.assign(t.strides().begin(), t.strides().end());
  e->managed.dl_tensor.data = t.raw_data();
  e->managed.dl_tensor.device = {kDLCPU, 0};
  e->managed.dl_tensor.ndim = static_cast<int32_t>(e->shape.size());
  e->managed.dl_tensor.dtype = dl_dtype(t.dtype());
  e->managed.dl_tensor.shape = e->shape.data();
  e->managed.dl_tensor.strides = e->strides.data();
  e->managed.dl_tensor.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = delete_exported;
  PyObject* c = PyCapsule_New(&e->managed, "dltensor", capsule_destructor);
  if (!c) {
    delete e;
    throw pybind11::error_already_set();
  }
  return pybind11::reinterpret_steal<pybind11::object>(c);
}

// A field as an object with __dlpack__, for torch.from_dlpack / numpy.from_dlpack.
struct PyField {
  FieldRef field;
};

std::vector<PyField> wrap(std::vector<FieldRef> fields) {
  std::vector<PyField> out;
  for (FieldRef& f : fields) out.push_back({std::move(f)});
  return out;
}

// load_weights: name -> field (the tensor owns its memory).
std::vector<std::pair<std::string, PyField>> load_weights(const std::string& path) {
  std::vector<std::pair<std::string, PyField>> out;
  for (auto& [name, t] : load_safetensors(path)) out.push_back({name, PyField{{nullptr, t}}});
  return out;
}

// Deletes a Loader with the GIL released: its destructor joins workers that may be waiting
// for the GIL to call a Python data set.
struct DeleteWithoutGil {
  void operator()(PyLoader* l) const {
    pybind11::gil_scoped_release nogil;
    delete l;
  }
};

// {"name", "dtype", "shape" (per sample), "role"} for each field of the loader's batches.
pybind11::list describe_fields(const PyLoader& l) {
  pybind11::list out;
  for (const data::Field& f : l.fields()) {
    pybind11::dict d;
    d["name"] = f.name;
    d["dtype"] = std::string(dtype_name(f.dtype));
    d["shape"] = f.shape;
    d["role"] = f.role == data::FieldRole::input ? "input" : "target";
    out.append(d);
  }
  return out;
}

}  // namespace

}  // namespace tandem::py

PYBIND11_MODULE(_tandem, m) {
  using namespace tandem::py;
  m.doc() = "tandem's loader and weights for Python (docs/python.md)";
  py::register_exception<tandem::Error>(m, "Error", PyExc_ValueError);

  py::class_<PyField>(m, "Field")
      .def(
          "__dlpack__", [](const PyField& f, py::object /*stream*/) { return to_capsule(f.field); },
          py::arg("stream") = py::none())
      .def("__dlpack_device__",
           [](const PyField&) { return py::make_tuple(static_cast<int>(kDLCPU), 0); })
      .def("tobytes",
           [](const PyField& f) {
             const tandem::Tensor c = f.field.tensor.clone();
             return py::bytes(static_cast<const char*>(c.raw_data()), c.nbytes());
           })
      .def_property_readonly("shape", [](const PyField& f) { return f.field.tensor.shape(); })
      .def_property_readonly("dtype", [](const PyField& f) {
        return std::string(tandem::dtype_name(f.field.tensor.dtype()));
      });

  py::class_<LoaderArgs>(m, "LoaderArgs")
      .def(py::init<>())
      .def_readwrite("path", &LoaderArgs::path)
      .def_readwrite("dataset", &LoaderArgs::dataset)
      .def_readwrite("split", &LoaderArgs::split)
      .def_readwrite("batch_size", &LoaderArgs::batch_size)
      .def_readwrite("num_workers", &LoaderArgs::num_workers)
      .def_readwrite("prefetch_factor", &LoaderArgs::prefetch_factor)
      .def_readwrite("shuffle", &LoaderArgs::shuffle)
      .def_readwrite("seed", &LoaderArgs::seed)
      .def_readwrite("image_size", &LoaderArgs::image_size)
      .def_readwrite("resize_size", &LoaderArgs::resize_size)
      .def_readwrite("augment", &LoaderArgs::augment)
      .def_readwrite("mean", &LoaderArgs::mean)
      .def_readwrite("std", &LoaderArgs::std)
      .def_readwrite("precision", &LoaderArgs::precision)
      .def_readwrite("drop_last", &LoaderArgs::drop_last)
      .def_readwrite("pin_memory", &LoaderArgs::pin_memory)
      .def_readwrite("max_held_batches", &LoaderArgs::max_held_batches)
      .def_readwrite("block_size", &LoaderArgs::block_size)
      .def("set_dataset", [](LoaderArgs& a, py::object dataset) {
        a.field_dataset = std::make_shared<PyDataset>(std::move(dataset));
      });

  py::class_<PyLoader, std::shared_ptr<PyLoader>>(m, "Loader")
      .def(py::init([](LoaderArgs a) {
        return std::shared_ptr<PyLoader>(new PyLoader(std::move(a)), DeleteWithoutGil{});
      }))
      .def("begin", &PyLoader::begin, py::call_guard<py::gil_scoped_release>())
      .def("next",
           [](PyLoader& l) {
             std::vector<FieldRef> f;
             {
               py::gil_scoped_release nogil;
               f = l.next();
             }
             return wrap(std::move(f));
           })
      .def("set_state", &PyLoader::set_state)
      .def("close", &PyLoader::close, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("epoch", &PyLoader::epoch)
      .def_property_readonly("batch", &PyLoader::batch)
      .def_property_readonly("num_batches", &PyLoader::num_batches)
      .def_property_readonly("num_slots", &PyLoader::num_slots)
      .def_property_readonly("fields", &describe_fields)
      .def_property_readonly("held_slots", &PyLoader::held_slots)
      .def_property_readonly("held_copied_bytes", &PyLoader::held_copied_bytes);

  m.def("load_weights", &load_weights, py::arg("path"));
}
