// Extension module `qfold._qfold`: convert() over the converter, Session over the
// runtime, onnx_signature() for what an .onnx file declares. The package around it
// (python/qfold/) adds the ONNX Runtime-compatible InferenceSession in Python.
//
// Arrays cross the boundary through the buffer protocol and plain numpy calls
// (numpy.ascontiguousarray, numpy.empty) rather than pybind11/numpy.h: the
// pybind11 2.10 that Debian ships reads numpy 1.x's descriptor layout, which
// numpy 2 changed.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "converter/converter.h"
#include "converter/onnx_reader.h"
#include "qfold/runtime.h"

namespace py = pybind11;

namespace qfold {
namespace {

// qfold.Error and its subclasses per status code, created at module init.
PyObject* g_error_type = nullptr;
PyObject* g_code_types[6] = {};

const char* CodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid_argument";
    case StatusCode::kInvalidModel:
      return "invalid_model";
    case StatusCode::kUnsupported:
      return "unsupported";
    case StatusCode::kIoError:
      return "io_error";
    case StatusCode::kInternal:
      return "internal";
  }
  return "internal";
}

// Raises qfold.Error(message) with .code set. Needs the GIL.
[[noreturn]] void Raise(StatusCode code, const std::string& message) {
  PyObject* type = g_code_types[static_cast<int>(code)];
  if (!type) type = g_error_type;
  py::object err = py::reinterpret_borrow<py::object>(type)(message);
  err.attr("code") = CodeName(code);
  PyErr_SetObject(type, err.ptr());
  throw py::error_already_set();
}

void ThrowIfError(const Status& st) {
  if (!st.ok()) Raise(st.code(), st.message());
}

// numpy dtype names; nullptr where numpy has no equivalent.
const char* NumpyName(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kFloat64:
      return "float64";
    case DType::kInt8:
      return "int8";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt16:
      return "int16";
    case DType::kUInt16:
      return "uint16";
    case DType::kInt32:
      return "int32";
    case DType::kUInt32:
      return "uint32";
    case DType::kInt64:
      return "int64";
    case DType::kUInt64:
      return "uint64";
    case DType::kBool:
      return "bool";
    default:
      return nullptr;
  }
}

const char* LayoutName(Layout l) {
  switch (l) {
    case Layout::kNCHW:
      return "NCHW";
    case Layout::kNHWC:
      return "NHWC";
    default:
      return "plain";
  }
}

py::list InfoList(const std::vector<TensorInfo>& infos) {
  py::list out;
  for (const TensorInfo& t : infos) {
    py::dict d;
    d["name"] = t.name;
    const char* np = NumpyName(t.dtype);
    d["dtype"] = np ? np : dtype_name(t.dtype);
    d["shape"] = t.shape;
    d["dim_names"] = t.dim_names;
    d["layout"] = LayoutName(t.layout);
    d["sequence"] = t.is_sequence;
    d["optional"] = t.is_optional;
    out.append(d);
  }
  return out;
}

// str or os.PathLike.
std::string FsPath(const py::object& path) {
  return py::str(py::module_::import("os").attr("fspath")(path));
}

py::list Convert(const py::object& onnx_path, const py::object& qfm_path,
                 const std::optional<std::map<std::string, Shape>>& input_shapes,
                 const std::optional<std::map<std::string, int64_t>>& dims,
                 const std::optional<std::map<std::string, std::string>>& input_layouts,
                 bool fold_qdq, const std::optional<py::dict>& consts, bool int8_activations) {
  conv::ConvertOptions opts;
  opts.weight_only_int8_activations = int8_activations;
  if (consts) {
    // A value may be a str ("16000"), a number, a bool or a sequence/array of them.
    py::module_ np = py::module_::import("numpy");
    for (auto item : *consts) {
      std::string text;
      if (py::isinstance<py::str>(item.second)) {
        text = py::str(item.second);
      } else {
        py::list flat = np.attr("asarray")(item.second).attr("ravel")().attr("tolist")();
        for (auto x : flat) {
          std::string one = py::isinstance<py::bool_>(x) ? (x.cast<bool>() ? "1" : "0")
                                                         : std::string(py::str(py::repr(x)));
          text += (text.empty() ? "" : ",") + one;
        }
      }
      opts.consts[py::str(item.first)] = text;
    }
  }
  if (input_shapes) opts.input_shapes = *input_shapes;
  if (dims) opts.dims = *dims;
  if (input_layouts) opts.input_layouts = *input_layouts;
  opts.fold_qdq = fold_qdq;
  std::string src = FsPath(onnx_path), dst = FsPath(qfm_path);
  Status st;
  std::vector<std::string> notes;
  {
    py::gil_scoped_release nogil;
    st = conv::ConvertFile(src, dst, opts, &notes);
  }
  ThrowIfError(st);
  return py::cast(notes);
}

py::dict ArgDict(const conv::OnnxArg& arg) {
  py::dict d;
  d["name"] = arg.name;
  d["type"] = arg.elem_type.empty() ? py::object(py::none()) : py::str(arg.elem_type);
  d["sequence"] = arg.is_sequence;
  d["optional"] = arg.is_optional;
  if (arg.has_shape) {
    py::list shape;
    for (const conv::OnnxDim& dim : arg.dims) {
      if (dim.value >= 0)
        shape.append(dim.value);
      else if (!dim.param.empty())
        shape.append(dim.param);
      else
        shape.append(py::none());
    }
    d["shape"] = shape;
  } else {
    d["shape"] = py::none();
  }
  return d;
}

py::dict OnnxSignature(const py::object& onnx_path) {
  std::string path = FsPath(onnx_path);
  conv::OnnxSignature sig;
  Status st;
  {
    py::gil_scoped_release nogil;
    st = conv::ReadOnnxSignature(path, &sig);
  }
  ThrowIfError(st);
  py::list inputs, outputs;
  for (const conv::OnnxArg& a : sig.inputs) inputs.append(ArgDict(a));
  for (const conv::OnnxArg& a : sig.outputs) outputs.append(ArgDict(a));
  py::dict props;
  for (const auto& kv : sig.metadata_props) props[py::str(kv.first)] = kv.second;
  py::dict d;
  d["inputs"] = inputs;
  d["outputs"] = outputs;
  d["producer_name"] = sig.producer_name;
  d["domain"] = sig.domain;
  d["description"] = sig.description;
  d["graph_name"] = sig.graph_name;
  d["graph_description"] = sig.graph_description;
  d["version"] = sig.model_version;
  d["custom_metadata_map"] = props;
  return d;
}

struct AlignedFree {
  void operator()(uint8_t* p) const { ::operator delete(p, std::align_val_t(64)); }
};

// One input of a run, prepared with the GIL held; `view` keeps the array's memory alive.
// Whether numpy's buffer format (the struct module's code; byte-swapped
// arrays have a prefix) is dtype t's, natively.
bool FormatIs(DType t, const py::buffer_info& v) {
  if (v.itemsize != py::ssize_t(dtype_size(t))) return false;
  const std::string& f = v.format;
  switch (t) {
    case DType::kFloat32:
      return f == "f";
    case DType::kFloat16:
      return f == "e";
    case DType::kFloat64:
      return f == "d";
    case DType::kInt8:
      return f == "b";
    case DType::kUInt8:
      return f == "B";
    case DType::kInt16:
      return f == "h";
    case DType::kUInt16:
      return f == "H";
    case DType::kInt32:
      return f == "i";
    case DType::kUInt32:
      return f == "I";
    case DType::kInt64:
      return f == "l" || f == "q";
    case DType::kUInt64:
      return f == "L" || f == "Q";
    case DType::kBool:
      return f == "?";
    default:
      return false;
  }
}

bool IsCContiguous(const py::buffer_info& v) {
  py::ssize_t step = v.itemsize;
  for (py::ssize_t i = v.ndim - 1; i >= 0; --i) {
    if (v.shape[size_t(i)] > 1 && v.strides[size_t(i)] != step) return false;
    step *= v.shape[size_t(i)];
  }
  return true;
}

struct Feed {
  std::string name;
  DType dtype;
  Shape shape;
  py::buffer_info view;
  // A sequence input: its elements (a list of arrays), `view` unused.
  bool is_sequence = false;
  std::vector<py::buffer_info> elements;
  std::vector<py::object> keep;  // the arrays `elements` view
  // An optional input fed None.
  bool is_none = false;
};

// precision="fp32"|"bf16"|"fp16", as the CLI's --precision.
SessionOptions::Precision ParsePrecision(const std::string& name) {
  if (name == "fp32") return SessionOptions::Precision::kFloat32;
  if (name == "bf16") return SessionOptions::Precision::kBfloat16;
  if (name == "fp16") return SessionOptions::Precision::kFloat16;
  Raise(StatusCode::kInvalidArgument,
        "precision must be 'fp32', 'bf16' or 'fp16', got '" + name + "'");
}

class PySession {
 public:
  PySession(const py::object& source, int num_threads,
            const std::optional<std::map<std::string, std::string>>& state_bindings,
            const std::string& precision) {
    SessionOptions opts;
    opts.num_threads = num_threads;
    opts.precision = ParsePrecision(precision);  // checked before the model is loaded
    Status st;
    if (py::isinstance<py::bytes>(source) || py::isinstance<py::bytearray>(source) ||
        py::isinstance<py::memoryview>(source)) {
      // A strided or reversed memoryview would be read past its bytes as if
      // contiguous: tobytes() copies it in logical order first.
      py::object contiguous = source;
      if (py::isinstance<py::memoryview>(source) && !source.attr("c_contiguous").cast<bool>())
        contiguous = source.attr("tobytes")();
      py::buffer_info bytes = py::buffer(contiguous).request();
      // The model uses constants in place, so it gets an aligned copy that it outlives.
      size_ = static_cast<size_t>(bytes.size * bytes.itemsize);
      buffer_.reset(static_cast<uint8_t*>(::operator new(size_ ? size_ : 1, std::align_val_t(64))));
      if (size_) std::memcpy(buffer_.get(), bytes.ptr, size_);
      py::gil_scoped_release nogil;
      st = Model::LoadMemory(buffer_.get(), size_, &model_);
    } else {
      std::string path = FsPath(source);
      py::gil_scoped_release nogil;
      st = Model::LoadFile(path, &model_);
    }
    ThrowIfError(st);
    py::module_ np = py::module_::import("numpy");
    np_ndarray_ = np.attr("ndarray");
    np_asarray_ = np.attr("asarray");
    np_empty_ = np.attr("empty");
    if (state_bindings)
      for (const auto& kv : *state_bindings) {
        opts.state_bindings.emplace_back(kv.first, kv.second);
        bound_inputs_.push_back(kv.second);
      }
    {
      py::gil_scoped_release nogil;
      st = Session::Create(model_, opts, &session_);
    }
    ThrowIfError(st);
  }

  ~PySession() {
    // The session and model refer to buffer_; drop them first.
    session_.reset();
    model_.reset();
  }

  py::list inputs() const { return InfoList(model_->inputs()); }
  py::list outputs() const { return InfoList(model_->outputs()); }

  void ResetState() {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mu_);
    session_->ResetState();
  }

  size_t arena_bytes() {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mu_);
    return session_->arena_bytes();
  }

  void ResizeInput(const std::string& name, const Shape& shape) {
    Status st;
    {
      // Lock order: GIL released before taking mu_, never the other way round.
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mu_);
      st = session_->ResizeInput(name, shape);
    }
    ThrowIfError(st);
  }

  py::dict Run(const py::dict& feeds) {
    std::vector<Feed> prepared = Prepare(feeds);
    py::dict result;
    Status st;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mu_);
      // Every shape first: the session plans once all inputs have one.
      for (const Feed& f : prepared) {
        if (!f.is_sequence && !f.is_none) st = session_->ResizeInput(f.name, f.shape);
        if (!st.ok()) break;
      }
      for (const Feed& f : prepared) {
        if (!st.ok()) break;
        if (f.is_none) {
          st = session_->SetInputNone(f.name);
        } else if (f.is_sequence) {
          std::vector<TensorView> views;
          for (const py::buffer_info& e : f.elements)
            views.push_back(TensorView{f.dtype, Shape(e.shape.begin(), e.shape.end()), e.ptr,
                                       static_cast<size_t>(e.size * e.itemsize)});
          st = session_->SetInputSequence(f.name, views);
        } else {
          // Read in place for this call (the feeds keep the arrays alive):
          // no copy of a large input per run.
          st = session_->BindInput(f.name, f.dtype, f.shape, f.view.ptr,
                                   static_cast<size_t>(f.view.size * f.view.itemsize));
        }
        if (!st.ok()) break;
      }
      if (st.ok()) st = session_->Run();
      if (st.ok()) {
        // Outputs stay valid only until the next run, so copy them out under the lock.
        py::gil_scoped_acquire gil;
        try {
          result = CollectOutputs();
        } catch (...) {
          session_->ReleaseInputs();
          throw;
        }
      }
      session_->ReleaseInputs();
    }
    ThrowIfError(st);
    return result;
  }

 private:
  std::vector<Feed> Prepare(const py::dict& feeds) {
    const std::vector<TensorInfo>& infos = model_->inputs();
    std::vector<Feed> prepared;
    for (auto item : feeds) {
      std::string name = py::str(item.first);
      const TensorInfo* info = nullptr;
      for (const TensorInfo& t : infos)
        if (t.name == name) info = &t;
      if (!info) {
        std::string names;
        for (const TensorInfo& t : infos) names += (names.empty() ? "'" : ", '") + t.name + "'";
        Raise(StatusCode::kInvalidArgument,
              "no input named '" + name + "'; the model's inputs are " + names);
      }
      if (info->is_optional && item.second.is_none()) {
        Feed f{name, info->dtype, {}, {}, info->is_sequence, {}, {}};
        f.is_none = true;
        prepared.push_back(std::move(f));
        continue;
      }
      if (info->is_sequence) {
        prepared.push_back(PrepareSequence(name, *info, item.second));
        continue;
      }
      // A C-contiguous numpy array of the input's dtype is read in place,
      // without the Python calls below (a streaming step's few microseconds).
      if (Py_TYPE(item.second.ptr()) == reinterpret_cast<PyTypeObject*>(np_ndarray_.ptr())) {
        py::buffer_info view = py::reinterpret_borrow<py::buffer>(item.second).request();
        if (FormatIs(info->dtype, view) && IsCContiguous(view)) {
          Feed f{name, info->dtype, {}, std::move(view), false, {}, {}};
          f.shape.assign(f.view.shape.begin(), f.view.shape.end());
          prepared.push_back(std::move(f));
          continue;
        }
      }
      // A no-op for C-contiguous arrays; copies anything else (views, lists).
      // (Not ascontiguousarray: it turns a 0-d array, a scalar input, into 1-d.)
      py::object arr = np_asarray_(item.second, py::arg("order") = "C");
      py::object dt = arr.attr("dtype");
      std::string given = py::str(dt.attr("name"));
      const char* want = NumpyName(info->dtype);
      if (!want)
        Raise(StatusCode::kUnsupported, "input '" + name + "' is " + dtype_name(info->dtype) +
                                            ", which has no numpy equivalent");
      // Byte-swapped arrays share the name ("float32") but not the memory layout.
      if (!dt.attr("isnative").cast<bool>()) given = py::str(dt.attr("str"));
      if (given != want)
        Raise(StatusCode::kInvalidArgument,
              "input '" + name + "' expects dtype " + want + ", given " + given);
      Feed f{name, info->dtype, {}, py::buffer(arr).request(), false, {}, {}};
      f.shape.assign(f.view.shape.begin(), f.view.shape.end());
      prepared.push_back(std::move(f));
    }
    for (const TensorInfo& t : infos) {
      bool given = false;
      for (const Feed& f : prepared) given = given || f.name == t.name;
      // A state input carries the previous run's state unless given.
      for (const std::string& b : bound_inputs_) given = given || b == t.name;
      if (!given) Raise(StatusCode::kInvalidArgument, "input '" + t.name + "' is not given");
    }
    return prepared;
  }

  // A sequence input is a list or tuple of arrays of its dtype.
  Feed PrepareSequence(const std::string& name, const TensorInfo& info, py::handle value) {
    if (!py::isinstance<py::list>(value) && !py::isinstance<py::tuple>(value))
      Raise(StatusCode::kInvalidArgument,
            "input '" + name + "' is a sequence: give a list of arrays");
    const char* want = NumpyName(info.dtype);
    if (!want)
      Raise(StatusCode::kUnsupported, "input '" + name + "' holds " + dtype_name(info.dtype) +
                                          ", which has no numpy equivalent");
    Feed f{name, info.dtype, {}, {}, true, {}, {}};
    for (py::handle item : value) {
      py::object arr = np_asarray_(item, py::arg("order") = "C");
      py::object dt = arr.attr("dtype");
      std::string given = py::str(dt.attr("name"));
      if (!dt.attr("isnative").cast<bool>()) given = py::str(dt.attr("str"));
      if (given != want)
        Raise(StatusCode::kInvalidArgument, "input '" + name + "' element " +
                                                std::to_string(f.elements.size()) + " has dtype " +
                                                given + ", expected " + want);
      f.elements.push_back(py::buffer(arr).request());
      f.keep.push_back(arr);
    }
    return f;
  }

  py::object ToArray(DType dtype, const Shape& shape, const void* data, const std::string& name) {
    const char* np_name = NumpyName(dtype);
    if (!np_name)
      Raise(StatusCode::kUnsupported,
            "output '" + name + "' is " + dtype_name(dtype) + ", which has no numpy equivalent");
    py::object arr = np_empty_(py::tuple(py::cast(shape)), np_name);
    py::buffer_info out = py::buffer(arr).request(true);
    size_t bytes = static_cast<size_t>(out.size * out.itemsize);
    if (bytes) std::memcpy(out.ptr, data, bytes);
    return arr;
  }

  py::dict CollectOutputs() {
    py::dict result;
    for (const TensorInfo& info : model_->outputs()) {
      bool none = false;
      ThrowIfError(session_->OutputIsNone(info.name, &none));
      if (none) {  // an optional output without a value
        result[py::str(info.name)] = py::none();
        continue;
      }
      if (info.is_sequence) {
        std::vector<TensorView> elements;
        ThrowIfError(session_->GetOutputSequence(info.name, &elements));
        py::list items;
        for (const TensorView& e : elements)
          items.append(ToArray(e.dtype, e.shape, e.data, info.name));
        result[py::str(info.name)] = items;
        continue;
      }
      DType dtype;
      Shape shape;
      const void* data = nullptr;
      ThrowIfError(session_->GetOutput(info.name, &dtype, &shape, &data));
      result[py::str(info.name)] = ToArray(dtype, shape, data, info.name);
    }
    return result;
  }

  std::unique_ptr<uint8_t, AlignedFree> buffer_;  // model bytes, when loaded from memory
  size_t size_ = 0;
  std::shared_ptr<Model> model_;
  std::unique_ptr<Session> session_;
  std::vector<std::string> bound_inputs_;          // inputs bound by state_bindings
  py::object np_ndarray_, np_asarray_, np_empty_;  // looked up once
  std::mutex mu_;  // Session is not thread-safe and run() drops the GIL
};

}  // namespace
}  // namespace qfold

PYBIND11_MODULE(_qfold, m) {
  using qfold::PySession;
  using qfold::StatusCode;
  m.doc() = "qfold's extension module: convert ONNX models to .qfm and run them on the CPU";
  m.attr("__version__") = QFOLD_VERSION_STRING;

  qfold::g_error_type = PyErr_NewExceptionWithDoc(
      "qfold.Error", "A qfold failure; .code is e.g. 'invalid_model', 'unsupported'.",
      PyExc_RuntimeError, nullptr);
  if (!qfold::g_error_type) throw py::error_already_set();
  m.attr("Error") = py::handle(qfold::g_error_type);
  // One subclass per status code; InvalidArgument is also a ValueError, as the checks
  // ONNX Runtime's Python layer makes (missing inputs) raise ValueError.
  struct Sub {
    StatusCode code;
    const char* name;
    const char* doc;
    PyObject* extra_base;
  };
  const Sub subs[] = {
      {StatusCode::kInvalidArgument, "InvalidArgument",
       "Bad input to a call: unknown or missing tensor names, wrong dtype or shape.",
       PyExc_ValueError},
      {StatusCode::kInvalidModel, "InvalidModel", "The model file is malformed or inconsistent.",
       nullptr},
      {StatusCode::kUnsupported, "Unsupported",
       "The model uses an operator, attribute or type qfold does not implement.", nullptr},
      {StatusCode::kIoError, "IoError", "A file could not be read or written.", nullptr},
      {StatusCode::kInternal, "InternalError", "A bug in qfold.", nullptr},
  };
  for (const Sub& sub : subs) {
    py::tuple bases(sub.extra_base ? 2 : 1);
    bases[0] = py::handle(qfold::g_error_type);
    if (sub.extra_base) bases[1] = py::handle(sub.extra_base);
    std::string qualified = std::string("qfold.") + sub.name;
    PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), sub.doc, bases.ptr(), nullptr);
    if (!type) throw py::error_already_set();
    // Errors raised from Python (qfold.InferenceSession's checks) get .code from the class.
    py::handle(type).attr("code") = qfold::CodeName(sub.code);
    qfold::g_code_types[static_cast<int>(sub.code)] = type;
    m.attr(sub.name) = py::handle(type);
  }

  m.def("convert", &qfold::Convert, py::arg("onnx_path"), py::arg("qfm_path"),
        py::arg("input_shapes") = py::none(), py::arg("dims") = py::none(),
        py::arg("input_layouts") = py::none(), py::arg("fold_qdq") = true,
        py::arg("consts") = py::none(), py::arg("int8_activations") = false,
        "Converts an ONNX file to .qfm and returns the conversion's notes (list of str);\n"
        "raises qfold.Error (and writes no output file) on failure. consts binds inputs to\n"
        "constants ({'sr': 16000}), as qfold convert --const. int8_activations: weight-only\n"
        "4-bit MatMuls from DequantizeLinear -> MatMul quantize A to int8 per block, as\n"
        "qfold convert --int8-activations.");
  m.def("onnx_signature", &qfold::OnnxSignature, py::arg("onnx_path"),
        "The inputs, outputs (name, type, shape with ints, dim names or None) and metadata an\n"
        ".onnx file declares, as a dict; initializers listed as inputs are left out.");

  py::class_<PySession>(m, "Session", "A loaded .qfm model ready to run (qfold's native API).")
      .def(py::init<const py::object&, int,
                    const std::optional<std::map<std::string, std::string>>&, const std::string&>(),
           py::arg("path_or_bytes"), py::arg("num_threads") = 1,
           py::arg("state_bindings") = py::none(), py::arg("precision") = "fp32",
           "Loads a .qfm file (str or os.PathLike) or .qfm bytes and plans a session.\n"
           "state_bindings {output: input}: after each run the output's value becomes the\n"
           "input's (streaming state); a bound input starts at zeros and may be left out of\n"
           "run()'s feeds (given, it overrides the carried state).\n"
           "precision 'fp32' (default) or 'bf16': float channels-last convolutions multiply\n"
           "bfloat16-rounded values on AMX-BF16 or AVX-512 BF16 (vdpbf16ps), summing in fp32\n"
           "(no effect where not faster: without AVX-512 BF16, or Intel without AMX-BF16);\n"
           "'fp16': convolutions and Gemm/MatMul\n"
           "with a constant B in NEON half arithmetic on Armv8.2 FEAT_FP16 (no effect without\n"
           "it); anything else raises qfold.InvalidArgument (a ValueError).")
      .def("reset_state", &PySession::ResetState,
           "Zeros the inputs bound by state_bindings (a new stream).")
      .def_property_readonly("inputs", &PySession::inputs,
                             "[{name, dtype, shape, dim_names, layout}] of the inputs")
      .def_property_readonly("outputs", &PySession::outputs,
                             "[{name, dtype, shape, dim_names, layout}] of the outputs")
      .def_property_readonly("arena_bytes", &PySession::arena_bytes,
                             "Bytes of the activation arena at the current shapes.")
      .def("resize_input", &PySession::ResizeInput, py::arg("name"), py::arg("shape"),
           "Re-plans for a new input shape (run() also does this by itself).")
      .def("run", &PySession::Run, py::arg("feeds"),
           "Runs with {name: array}; returns {name: array} (copies). A sequence is a list of "
           "arrays; an optional input fed None (or never fed) is none, and a none output is None.");
}
