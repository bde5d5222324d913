#include "cli/commands.h"

#include <sys/stat.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/arg_parse.h"
#include "cli/npy.h"
#include "converter/converter.h"
#include "converter/onnx_reader.h"
#include "core/file_io.h"
#include "core/op.h"
#include "core/shape_util.h"
#include "model_impl.h"
#include "qfold/runtime.h"

namespace qfold {
namespace cli {

namespace {

bool HasFlag(const Args& args, const char* flag) {
  for (const std::string& a : args)
    if (a == flag) return true;
  return false;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Output names become file names: keep them readable but safe.
std::string SafeFileName(const std::string& name) {
  std::string out;
  for (char c : name)
    out +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_') ? c : '_';
  if (out.empty() || out[0] == '.') out = "_" + out;
  return out;
}

// "1x3x224x224" (or "1,3,224,224") -> {1,3,224,224}
bool ParseShape(const std::string& s, Shape* out) {
  out->clear();
  size_t pos = 0;
  while (true) {
    size_t x = s.find_first_of("x,", pos);
    std::string tok = s.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    int64_t dim = 0;
    if (!ParseBoundedInt(tok, 0, kMaxCliDim, &dim)) return false;
    out->push_back(dim);
    if (x == std::string::npos) return true;
    pos = x + 1;
  }
}

// {"inputs": {"x": [1,3,224,224]}, "dims": {"batch": 4}}
Status ReadShapesJson(const std::string& path, std::map<std::string, Shape>* shapes,
                      std::map<std::string, int64_t>* dims) {
  std::vector<uint8_t> bytes;
  QF_RETURN_IF_ERROR(io::ReadFileBytes(path, &bytes));
  nlohmann::json j = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
  auto bad = [&](const std::string& m) {
    return Status(StatusCode::kInvalidArgument, path + ": " + m);
  };
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  for (const auto& kv : j.items()) {
    if (kv.key() == "inputs" && kv.value().is_object()) {
      for (const auto& in : kv.value().items()) {
        Shape s;
        if (!in.value().is_array()) return bad("inputs." + in.key() + " must be an array of ints");
        for (const auto& d : in.value()) {
          if (!d.is_number_integer() || d.get<int64_t>() < 0)
            return bad("inputs." + in.key() + " must be an array of non-negative ints");
          s.push_back(d.get<int64_t>());
        }
        (*shapes)[in.key()] = s;
      }
    } else if (kv.key() == "dims" && kv.value().is_object()) {
      for (const auto& d : kv.value().items()) {
        // An unsigned value past INT64_MAX reads back negative: refused here too.
        if (!d.value().is_number_integer() || d.value().get<int64_t>() < 0)
          return bad("dims." + d.key() + " must be a non-negative int");
        (*dims)[d.key()] = d.value().get<int64_t>();
      }
    } else {
      return bad("unknown key '" + kv.key() + "' (expected \"inputs\" and \"dims\")");
    }
  }
  return Status::Ok();
}

std::string DimsToString(const TensorInfo& t) {
  std::string s = "(";
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (i) s += ",";
    if (t.shape[i] >= 0)
      s += std::to_string(t.shape[i]);
    else
      s += t.dim_names[i].empty() ? "?" : t.dim_names[i];
  }
  return s + (t.shape.size() == 1 ? ",)" : ")");
}

const char* kConvertUsage =
    "usage: qfold convert MODEL.onnx -o MODEL.qfm [--input-shape NAME=1x3x224x224 ...]\n"
    "                     [--dim NAME=N ...] [--input-shapes FILE.json] [--input-layout "
    "NAME=NHWC]\n"
    "                     [--const NAME=VALUE ...] [--no-fold] [--no-fuse] [--no-fold-qdq]\n"
    "                     [--channels-first] [--widen-fp16-weights] [--int8-activations]\n"
    "\n"
    "Converts an ONNX model to qfold's .qfm format. Every unsupported operator is\n"
    "listed at once; on any error no output file is written.\n"
    "  -o, --output PATH   output .qfm file (required)\n"
    "  --input-shape NAME=1x3x416x416  fix an input's shape (repeatable); an override that\n"
    "                      contradicts the model or its first Conv is an error naming both\n"
    "  --dim NAME=N        set a symbolic dim (ONNX dim_param, e.g. batch=4) wherever it appears\n"
    "  --input-shapes FILE JSON: {\"inputs\": {\"x\": [1,3,224,224]}, \"dims\": {\"batch\": 1}}\n"
    "  --input-layout NAME=NHWC  the input takes NHWC data (the model stays NCHW inside)\n"
    "  --const NAME=VALUE  bind an input to a constant (\"16000\", or \"1,2,3\" for a small\n"
    "                      tensor; the input's dtype and declared shape); it is no longer an\n"
    "                      input, and each If it decides keeps only the branch taken\n"
    "  --no-fold           keep constant subgraphs as operators\n"
    "  --no-fuse           do not fuse BatchNormalization and activations\n"
    "  --no-fold-qdq       keep QuantizeLinear/DequantizeLinear as separate float ops\n"
    "  --channels-first    keep every operator in the model's own layout (by default quantized\n"
    "                      and 2-D float convolutions and pools run channels-last inside; inputs\n"
    "                      and outputs keep their shapes either way)\n"
    "  --widen-fp16-weights  store an fp16 model's Conv/ConvTranspose/Gemm/MatMul weights as\n"
    "                      float32 (twice the size; the runtime then skips widening them when\n"
    "                      it loads the model); by default they stay float16 in the .qfm\n"
    "  --int8-activations  weight-only 4-bit MatMuls (blocked DequantizeLinear -> MatMul) may\n"
    "                      quantize A to int8 per block (MatMulNBits' accuracy_level 4, which\n"
    "                      ONNX Runtime applies to this form by default): about 3x faster on\n"
    "                      VNNI, off the exact product by up to half a step of 127 per block\n"
    "                      (docs/NUMERICS.md); MatMulNBits nodes keep their own accuracy_level\n";

const char* kRunUsage =
    "usage: qfold run MODEL.qfm [--input NAME=FILE.npy ...] [--inputs FILE.npz]\n"
    "                 [--input-shape NAME=1x3x320x320 ...] [--output-dir DIR] [--threads N]\n"
    "                 [--precision fp32|bf16|fp16] [--bind-state OUT=IN ...] [--steps N]\n"
    "\n"
    "Runs a model. Inputs come from .npy files (one per input) or an .npz whose\n"
    "entries are named like the inputs; their shapes may differ from the model's\n"
    "symbolic dims (the session is re-planned). Outputs are written as\n"
    "DIR/<output name>.npy (unsafe characters replaced by '_'), or summarized\n"
    "on stdout without --output-dir. A sequence input takes NAME=FILE.npz: the\n"
    "archive's arrays, in order, are its elements; a sequence output is written as\n"
    "DIR/<output name>.npz with one array per element, named 0, 1, ...\n"
    "  --threads N   kernel threads, 1..1024; more than the machine's hardware threads\n"
    "                are clamped to that count\n"
    "  --precision P fp32 (default) or bf16: float channels-last convolutions multiply\n"
    "                bfloat16-rounded values on AMX-BF16 or AVX-512 BF16 (vdpbf16ps),\n"
    "                summing in fp32 (faster, about 3 significant digits); no effect\n"
    "                where not faster (no AVX-512 BF16; Intel without AMX-BF16)\n"
    "                fp16: those convolutions and Gemm/MatMul with a constant B in NEON\n"
    "                half arithmetic (Armv8.2 FEAT_FP16); no effect without it\n"
    "  --bind-state OUT=IN  streaming state: after each step output OUT becomes input IN\n"
    "                (zeros at first; data given for IN is the initial state)\n"
    "  --steps N     run N steps (chunks) in one session: an input whose data has an extra\n"
    "                leading axis of N takes one slice per step, others the same data; each\n"
    "                output is written with a leading axis of N\n";

const char* kInspectUsage =
    "usage: qfold inspect MODEL.qfm|MODEL.onnx [--json] [--ops]\n"
    "\n"
    "Shows inputs, outputs, operator counts, constant sizes and quantization. For a\n"
    ".qfm, each operator's precision (int8, int4-weight, quantize, float) and weight\n"
    "granularity; warns when a quantized model runs most operators in float.\n"
    "  --json   machine-readable output (operator_details lists every operator)\n"
    "  --ops    list every operator with its precision\n";

}  // namespace

int Fail(const char* cmd, const Status& st) {
  std::fprintf(stderr, "qfold %s: error: %s\n", cmd, st.message().c_str());
  return st.code() == StatusCode::kInternal ? 1 : 2;
}

int UsageError(const char* cmd, const std::string& msg, const char* usage) {
  std::fprintf(stderr, "qfold %s: %s\n\n%s", cmd, msg.c_str(), usage);
  return 2;
}

int Convert(const Args& args) {
  if (HasFlag(args, "--help") || HasFlag(args, "-h")) return std::fputs(kConvertUsage, stdout), 0;
  std::string in, out;
  conv::ConvertOptions opts;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-o" || a == "--output") {
      if (i + 1 >= args.size()) return UsageError("convert", a + " needs a path", kConvertUsage);
      out = args[++i];
    } else if (a == "--no-fold") {
      opts.fold_constants = false;
    } else if (a == "--input-shape" || a == "--dim" || a == "--input-layout" || a == "--const") {
      if (i + 1 >= args.size())
        return UsageError("convert", a + " needs NAME=VALUE", kConvertUsage);
      const std::string& v = args[++i];
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0)
        return UsageError("convert", a + " takes NAME=VALUE, got '" + v + "'", kConvertUsage);
      std::string name = v.substr(0, eq), value = v.substr(eq + 1);
      if (a == "--input-layout") {
        opts.input_layouts[name] = value;
      } else if (a == "--const") {
        opts.consts[name] = value;
      } else if (a == "--dim") {
        Shape one;
        if (!ParseShape(value, &one) || one.size() != 1)
          return UsageError("convert", "--dim " + v + ": the value must be one number",
                            kConvertUsage);
        opts.dims[name] = one[0];
      } else {
        Shape shape;
        if (!ParseShape(value, &shape))
          return UsageError("convert", "--input-shape " + v + ": expected NAME=1x3x224x224",
                            kConvertUsage);
        opts.input_shapes[name] = shape;
      }
    } else if (a == "--input-shapes") {
      if (i + 1 >= args.size())
        return UsageError("convert", a + " needs a JSON file", kConvertUsage);
      Status st = ReadShapesJson(args[++i], &opts.input_shapes, &opts.dims);
      if (!st.ok()) return Fail("convert", st);
    } else if (a == "--no-fold-qdq") {
      opts.fold_qdq = false;
    } else if (a == "--no-fuse") {
      opts.fuse = false;
    } else if (a == "--channels-first") {
      opts.channels_last = false;
    } else if (a == "--widen-fp16-weights") {
      opts.keep_float16_weights = false;
    } else if (a == "--int8-activations") {
      opts.weight_only_int8_activations = true;
    } else if (!a.empty() && a[0] == '-') {
      return UsageError("convert", "unknown option '" + a + "'", kConvertUsage);
    } else if (in.empty()) {
      in = a;
    } else {
      return UsageError("convert", "more than one input model given", kConvertUsage);
    }
  }
  if (in.empty() || out.empty())
    return UsageError("convert", "needs an input model and -o OUTPUT", kConvertUsage);
  std::vector<std::string> notes;
  Status st = conv::ConvertFile(in, out, opts, &notes);
  if (!st.ok()) return Fail("convert", st);
  for (const std::string& n : notes) std::printf("note: %s\n", n.c_str());
  struct stat s;
  stat(out.c_str(), &s);
  std::printf("wrote %s (%lld bytes)\n", out.c_str(), static_cast<long long>(s.st_size));
  return 0;
}

int Run(const Args& args) {
  if (HasFlag(args, "--help") || HasFlag(args, "-h")) return std::fputs(kRunUsage, stdout), 0;
  std::string model_path, out_dir;
  std::vector<io::NpzEntry> feeds;
  std::map<std::string, std::vector<io::NpzEntry>> sequence_feeds;  // NAME=FILE.npz
  std::vector<std::string> input_files;  // never overwritten by an output
  std::map<std::string, Shape> resize;
  SessionOptions opts;
  int steps = 1;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto next = [&](std::string* v) {
      if (i + 1 >= args.size()) return false;
      *v = args[++i];
      return true;
    };
    std::string v;
    if (a == "--input" || a == "-i") {
      if (!next(&v)) return UsageError("run", a + " needs NAME=FILE.npy", kRunUsage);
      size_t eq = v.find('=');
      if (eq == std::string::npos) {
        if (!EndsWith(v, ".npz"))
          return UsageError("run", "--input takes NAME=FILE.npy or FILE.npz", kRunUsage);
        Status st = io::ReadNpz(v, &feeds);
        if (!st.ok()) return Fail("run", st);
        input_files.push_back(v);
        continue;
      }
      io::NpzEntry e;
      e.name = v.substr(0, eq);
      if (EndsWith(v, ".npz")) {  // a sequence's elements
        Status st = io::ReadNpz(v.substr(eq + 1), &sequence_feeds[e.name]);
        if (!st.ok()) return Fail("run", st);
        input_files.push_back(v.substr(eq + 1));
        continue;
      }
      Status st = io::ReadNpy(v.substr(eq + 1), &e.array);
      if (!st.ok()) return Fail("run", st);
      input_files.push_back(v.substr(eq + 1));
      feeds.push_back(std::move(e));
    } else if (a == "--input-shape") {
      size_t eq;
      Shape shape;
      if (!next(&v) || (eq = v.find('=')) == std::string::npos || eq == 0 ||
          !ParseShape(v.substr(eq + 1), &shape))
        return UsageError("run", "--input-shape takes NAME=1x3x224x224", kRunUsage);
      resize[v.substr(0, eq)] = shape;
    } else if (a == "--inputs") {
      if (!next(&v)) return UsageError("run", "--inputs needs FILE.npz", kRunUsage);
      Status st = io::ReadNpz(v, &feeds);
      if (!st.ok()) return Fail("run", st);
      input_files.push_back(v);
    } else if (a == "--output-dir" || a == "-o") {
      if (!next(&out_dir)) return UsageError("run", a + " needs a directory", kRunUsage);
    } else if (a == "--bind-state") {
      size_t eq;
      if (!next(&v) || (eq = v.find('=')) == std::string::npos || eq == 0 || eq + 1 == v.size())
        return UsageError("run", "--bind-state takes OUTPUT=INPUT", kRunUsage);
      opts.state_bindings.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (a == "--steps") {
      if (!next(&v) || !ParseBoundedInt(v, 1, 1000000, &steps))
        return UsageError("run", "--steps needs a number from 1 to 1000000", kRunUsage);
    } else if (a == "--threads") {
      if (!next(&v) || !ParseBoundedInt(v, 1, kMaxCliThreads, &opts.num_threads))
        return UsageError("run",
                          "--threads needs a number from 1 to " + std::to_string(kMaxCliThreads),
                          kRunUsage);
    } else if (a == "--precision") {
      if (!next(&v) || !ParsePrecision(v, &opts.precision))
        return UsageError("run", BadPrecisionMessage(v), kRunUsage);
    } else if (!a.empty() && a[0] == '-') {
      return UsageError("run", "unknown option '" + a + "'", kRunUsage);
    } else if (model_path.empty()) {
      model_path = a;
    } else {
      return UsageError("run", "more than one model given", kRunUsage);
    }
  }
  if (model_path.empty()) return UsageError("run", "needs a model", kRunUsage);
  input_files.push_back(model_path);
  std::shared_ptr<Model> model;
  Status st = Model::LoadFile(model_path, &model);
  if (!st.ok()) return Fail("run", st);
  auto output_path = [&](const TensorInfo& o) {
    return out_dir + "/" + SafeFileName(o.name) + (o.is_sequence ? ".npz" : ".npy");
  };
  bool has_sequence_output = false;
  for (const TensorInfo& o : model->outputs()) has_sequence_output |= o.is_sequence;
  if (has_sequence_output && steps > 1)
    return UsageError("run", "--steps needs tensor outputs; this model returns a sequence",
                      kRunUsage);
  for (const auto& kv : sequence_feeds) {
    const TensorInfo* in = nullptr;
    for (const TensorInfo& t : model->inputs())
      if (t.name == kv.first) in = &t;
    if (!in || !in->is_sequence)
      return Fail("run", Status(StatusCode::kInvalidArgument,
                                in ? "input '" + kv.first + "' is a tensor: pass --input " +
                                         kv.first + "=FILE.npy"
                                   : "the model has no input named '" + kv.first + "'"));
  }
  // Refused before running: an output file that would replace an input, a
  // symlink, a device node or a read-only file.
  if (!out_dir.empty()) {
    for (const TensorInfo& o : model->outputs()) {
      st = fileio::CheckOutputPath(output_path(o), input_files);
      if (!st.ok()) return Fail("run", st);
    }
  }
  std::unique_ptr<Session> session;
  st = Session::Create(model, opts, &session);
  if (!st.ok()) return Fail("run", st);
  // Explicit sizes first: the data must then match them exactly.
  for (const auto& kv : resize) {
    st = session->ResizeInput(kv.first, kv.second);
    if (!st.ok()) return Fail("run", st);
  }
  for (const io::NpzEntry& e : feeds) {
    bool known = false;
    for (const TensorInfo& in : model->inputs()) known = known || in.name == e.name;
    if (!known)
      return Fail("run", Status(StatusCode::kInvalidArgument,
                                "the model has no input named '" + e.name + "'"));
  }
  auto bound = [&](const std::string& name) {
    for (const auto& b : opts.state_bindings)
      if (b.second == name) return true;
    return false;
  };
  // Per input: its data, and whether each step takes one slice of it.
  struct StepFeed {
    const TensorInfo* info;
    const io::NpzEntry* feed;
    bool sliced;
    Shape shape;  // of one step
  };
  std::vector<StepFeed> step_feeds;
  for (const TensorInfo& in : model->inputs()) {
    if (in.is_sequence) {
      auto it = sequence_feeds.find(in.name);
      if (it == sequence_feeds.end() && in.is_optional) continue;  // none
      if (it == sequence_feeds.end())
        return Fail("run",
                    Status(StatusCode::kInvalidArgument,
                           "no data for input '" + in.name + "', a sequence of " +
                               dtype_name(in.dtype) + " " + DimsToString(in) + ": pass --input " +
                               in.name + "=FILE.npz (its arrays, in order, are the elements)"));
      std::vector<TensorView> elements;
      for (const io::NpzEntry& e : it->second)
        elements.push_back(
            TensorView{e.array.dtype, e.array.shape, e.array.data.data(), e.array.data.size()});
      st = session->SetInputSequence(in.name, elements);
      if (!st.ok()) return Fail("run", st);
      continue;
    }
    const io::NpzEntry* feed = nullptr;
    for (const io::NpzEntry& e : feeds)
      if (e.name == in.name) feed = &e;
    if (!feed && bound(in.name)) continue;  // carried state, zeros at first
    if (!feed && in.is_optional) continue;  // an optional without data is none
    if (!feed)
      return Fail("run",
                  Status(StatusCode::kInvalidArgument,
                         "no data for input '" + in.name + "' " + DimsToString(in) + " " +
                             dtype_name(in.dtype) + ": pass --input " + in.name + "=FILE.npy"));
    StepFeed f{&in, feed, false, feed->array.shape};
    if (steps > 1 && !bound(in.name) && dtype_size(feed->array.dtype) > 0 &&
        feed->array.shape.size() == in.shape.size() + 1 && feed->array.shape[0] == steps) {
      f.sliced = true;
      f.shape.erase(f.shape.begin());
    }
    auto rs = resize.find(in.name);
    if (rs != resize.end() && rs->second != f.shape)
      return Fail("run",
                  Status(StatusCode::kInvalidArgument,
                         "input '" + in.name + "': data has shape " + ShapeToString(f.shape) +
                             ", --input-shape gives " + ShapeToString(rs->second)));
    step_feeds.push_back(f);
  }
  std::vector<io::NpyArray> results(model->outputs().size());
  for (int step = 0; step < steps; ++step) {
    for (const StepFeed& f : step_feeds) {
      if (step > 0 && (bound(f.info->name) || !f.sliced)) continue;  // already set
      const std::vector<uint8_t>& all = f.feed->array.data;
      const size_t bytes = f.sliced ? all.size() / size_t(steps) : all.size();
      st = session->SetInput(f.info->name, f.feed->array.dtype, f.shape,
                             all.data() + (f.sliced ? size_t(step) * bytes : 0), bytes);
      if (!st.ok()) return Fail("run", st);
    }
    st = session->Run();
    if (!st.ok()) return Fail("run", st);
    for (size_t o = 0; o < results.size(); ++o) {
      if (model->outputs()[o].is_sequence) continue;  // written from the session below
      bool none = false;
      st = session->OutputIsNone(model->outputs()[o].name, &none);
      if (!st.ok()) return Fail("run", st);
      if (none) continue;  // reported below, no file
      io::NpyArray& arr = results[o];
      const void* data = nullptr;
      Shape shape;
      st = session->GetOutput(model->outputs()[o].name, &arr.dtype, &shape, &data);
      if (!st.ok()) return Fail("run", st);
      if (step > 0 && Shape(arr.shape.begin() + 1, arr.shape.end()) != shape)
        return Fail("run",
                    Status(StatusCode::kInvalidArgument,
                           "output '" + model->outputs()[o].name + "' changes shape from " +
                               ShapeToString(Shape(arr.shape.begin() + 1, arr.shape.end())) +
                               " to " + ShapeToString(shape) + " at step " + std::to_string(step)));
      arr.shape = shape;
      arr.shape.insert(arr.shape.begin(), step + 1);
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      const uint8_t* p = static_cast<const uint8_t*>(data);
      arr.data.insert(arr.data.end(), p, p + dtype_storage_bytes(arr.dtype, n));
    }
  }
  if (!out_dir.empty()) mkdir(out_dir.c_str(), 0755);
  for (size_t o = 0; o < results.size(); ++o) {
    const TensorInfo& info = model->outputs()[o];
    bool none = false;
    st = session->OutputIsNone(info.name, &none);
    if (!st.ok()) return Fail("run", st);
    if (none) {  // an optional without a value (at the last step)
      std::printf("%s: none\n", info.name.c_str());
      continue;
    }
    if (info.is_sequence) {
      std::vector<TensorView> elements;
      st = session->GetOutputSequence(info.name, &elements);
      if (!st.ok()) return Fail("run", st);
      std::string shapes;
      std::vector<io::NpzEntry> entries;
      for (size_t k = 0; k < elements.size(); ++k) {
        const TensorView& e = elements[k];
        shapes += " " + ShapeToString(e.shape);
        io::NpzEntry entry;
        entry.name = std::to_string(k);
        entry.array.dtype = e.dtype;
        entry.array.shape = e.shape;
        const uint8_t* p = static_cast<const uint8_t*>(e.data);
        entry.array.data.assign(p, p + e.bytes);
        entries.push_back(std::move(entry));
      }
      const std::string what = "sequence of " + std::to_string(elements.size()) + " " +
                               dtype_name(info.dtype) + " tensors" + (shapes.empty() ? "" : ":") +
                               shapes;
      if (out_dir.empty()) {
        std::printf("%s: %s\n", info.name.c_str(), what.c_str());
        continue;
      }
      const std::string path = output_path(info);
      st = io::WriteNpz(path, entries, input_files);
      if (!st.ok()) return Fail("run", st);
      std::printf("%s -> %s %s\n", info.name.c_str(), path.c_str(), what.c_str());
      continue;
    }
    io::NpyArray& arr = results[o];
    if (steps == 1) arr.shape.erase(arr.shape.begin());  // no step axis
    if (out_dir.empty()) {
      std::printf("%s: %s %s\n", info.name.c_str(), dtype_name(arr.dtype),
                  ShapeToString(arr.shape).c_str());
      continue;
    }
    const std::string path = output_path(info);
    st = io::WriteNpy(path, arr, input_files);
    if (!st.ok()) return Fail("run", st);
    std::printf("%s -> %s %s %s\n", info.name.c_str(), path.c_str(), dtype_name(arr.dtype),
                ShapeToString(arr.shape).c_str());
  }
  std::printf("arena: %zu bytes\n", session->arena_bytes());
  return 0;
}

namespace {

const char* LayoutName(Layout l) {
  return l == Layout::kNCHW ? "NCHW" : l == Layout::kNHWC ? "NHWC" : "";
}

nlohmann::json TensorJson(const TensorInfo& t) {
  nlohmann::json j;
  j["name"] = t.name;
  j["dtype"] = dtype_name(t.dtype);
  if (t.is_sequence) j["sequence"] = true;
  if (t.is_optional) j["optional"] = true;
  nlohmann::json dims = nlohmann::json::array();
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (t.shape[i] >= 0)
      dims.push_back(t.shape[i]);
    else
      dims.push_back(t.dim_names[i].empty() ? "?" : t.dim_names[i]);
  }
  j["shape"] = dims;
  if (t.layout != Layout::kPlain) j["layout"] = LayoutName(t.layout);
  if (t.batch_axis >= 0) j["batch_axis"] = t.batch_axis;
  if (t.channel_axis >= 0) j["channel_axis"] = t.channel_axis;
  return j;
}

// How an operator of a .qfm computes: "int8" (integer kernel), "int4-weight",
// "quantize" (a Q/DQ/requantize boundary) or "float"; plus the granularity of
// its weight quantization where it has one.
struct OpPrecision {
  std::string precision;
  std::string granularity;
};

OpPrecision ClassifyOp(const Model::Impl& m, const OpEntry& op) {
  OpPrecision p;
  auto numel = [&](int id) {
    int64_t n = 1;
    for (int64_t d : m.tensors[id].info.shape) n *= d;
    return n;
  };
  if (HasTraits(op.type, kTraitIntegerKernel)) p.precision = "int8";
  if (op.type == "QuantizeLinear" || op.type == "DequantizeLinear" || op.type == "QfRequantize")
    p.precision = "quantize";
  if (op.type == "QfMatMulWeightQ") p.precision = "int4-weight";
  // The weight's scale, in the slot its OpDef names (block_size: QfMatMulWeightQ's blocks).
  const int slot = op.def ? op.def->weight_scale_input : -1;
  const int ws = slot >= 0 && size_t(slot) < op.inputs.size() ? op.inputs[size_t(slot)] : -1;
  if (ws >= 0)
    p.granularity = op.attrs.GetInt("block_size", 0) > 0 ? "blocked"
                    : numel(ws) == 1                     ? "per-tensor"
                                                         : "per-channel";
  if (p.precision.empty()) {
    int in0 = op.inputs.empty() ? -1 : op.inputs[0];
    DType t = in0 >= 0 ? m.tensors[in0].info.dtype : DType::kUndefined;
    if (t == DType::kInt8 || t == DType::kUInt8)
      p.precision = "int8";
    else
      p.precision = dtype_is_float(t) ? "float" : "other";
  }
  return p;
}

TensorInfo InfoFromValue(const conv::Value& v) {
  TensorInfo t;
  t.name = v.name;
  t.dtype = v.dtype;
  t.shape = v.shape;
  t.dim_names = v.dim_names;
  t.dim_names.resize(t.shape.size());
  return t;
}

}  // namespace

int Inspect(const Args& args) {
  if (HasFlag(args, "--help") || HasFlag(args, "-h")) return std::fputs(kInspectUsage, stdout), 0;
  bool as_json = HasFlag(args, "--json");
  std::string path;
  for (const std::string& a : args) {
    if (a == "--json" || a == "--ops") continue;
    if (!a.empty() && a[0] == '-')
      return UsageError("inspect", "unknown option '" + a + "'", kInspectUsage);
    if (!path.empty()) return UsageError("inspect", "more than one model given", kInspectUsage);
    path = a;
  }
  if (path.empty()) return UsageError("inspect", "needs a model", kInspectUsage);

  nlohmann::json j;
  j["file"] = path;
  std::map<std::string, int> op_counts, precision_counts, granularity_counts;
  size_t const_bytes = 0, const_count = 0, quantized_tensors = 0, qdq_ops = 0;
  std::map<std::string, size_t> const_bytes_by_dtype;  // bytes in the file, per stored dtype
  // Conv/ConvTranspose/MatMul/Gemm that stay float, and the converter's reasons.
  int heavy_float = 0, heavy_total = 0;
  std::map<std::string, int> heavy_reasons;
  std::vector<TensorInfo> inputs, outputs;
  if (EndsWith(path, ".onnx")) {
    conv::Graph g;
    Status st = conv::ReadOnnxModel(path, &g);
    if (!st.ok()) return Fail("inspect", st);
    j["format"] = "onnx";
    j["opset"] = g.opset;
    j["producer"] = g.producer;
    for (const std::string& n : g.inputs) inputs.push_back(InfoFromValue(g.values[n]));
    for (const std::string& n : g.outputs) {
      const conv::Value* v = g.Find(n);
      conv::Value unknown;
      unknown.name = n;
      outputs.push_back(InfoFromValue(v ? *v : unknown));
    }
    for (const conv::Node& n : g.nodes) {
      op_counts[n.domain.empty() ? n.op_type : n.domain + "." + n.op_type]++;
      if (n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear") qdq_ops++;
    }
    for (const auto& kv : g.values)
      if (kv.second.is_constant()) {
        const_bytes += kv.second.data->size();
        const_bytes_by_dtype[dtype_name(kv.second.dtype)] += kv.second.data->size();
        const_count++;
      }
  } else {
    std::shared_ptr<Model> model;
    Status st = Model::LoadFile(path, &model);
    if (!st.ok()) return Fail("inspect", st);
    const Model::Impl* m = model->impl();
    j["format"] = "qfm";
    if (m->fb->metadata()) {
      const auto* md = m->fb->metadata();
      j["producer"] = md->producer() ? md->producer()->str() : "";
      j["opset"] = md->source_opset();
      j["source_sha256"] = md->source_model_sha256() ? md->source_model_sha256()->str() : "";
      if (md->notes())
        for (const auto* n : *md->notes()) j["notes"].push_back(n->str());
    }
    j["format_version"] = m->fb->format_version();
    j["min_reader_version"] = m->fb->min_reader_version();
    inputs = model->inputs();
    outputs = model->outputs();
    nlohmann::json details = nlohmann::json::array();
    for (size_t k = 0; k < m->ops.size(); ++k) {
      const OpEntry& op = m->ops[k];
      op_counts[op.type]++;
      OpPrecision p = ClassifyOp(*m, op);
      precision_counts[p.precision]++;
      if (p.precision == "quantize") qdq_ops++;
      nlohmann::json d = {{"name", op.name}, {"type", op.type}, {"precision", p.precision}};
      const auto* reason = m->fb->operators()->Get(uint32_t(k))->float_reason();
      if (reason && p.precision == "float") d["reason"] = reason->str();
      const bool heavy =
          HasTraits(op.type, kTraitMatrixProduct) && !HasTraits(op.type, kTraitIntegerKernel);
      if (heavy || p.precision == "int8") {
        // The integer forms of the heavy ops count toward the same share.
        const bool int_heavy = HasTraits(op.type, kTraitMatrixProduct | kTraitIntegerKernel);
        if (heavy || int_heavy) heavy_total++;
        if (heavy && p.precision == "float") {
          heavy_float++;
          heavy_reasons[reason ? reason->str() : "no quantized neighbours"]++;
        }
      }
      if (!p.granularity.empty())
        d["granularity"] = p.granularity, granularity_counts[p.granularity]++;
      // The layout the converter planned for the op's result (NHWC: channels-last inside).
      const int out0 = op.outputs.empty() ? -1 : op.outputs[0];
      if (out0 >= 0 && m->tensors[size_t(out0)].info.layout != Layout::kPlain)
        d["layout"] = LayoutName(m->tensors[size_t(out0)].info.layout);
      details.push_back(d);
    }
    j["operator_details"] = details;
    // If branches and Loop/Scan bodies (format 3), each with its operators.
    for (size_t gi = 0; gi < m->subgraphs.size(); ++gi) {
      const GraphEntry& ge = m->subgraphs[gi];
      std::map<std::string, int> counts;
      for (const OpEntry& op : ge.ops) counts[op.type]++;
      std::string used_by;
      auto find_user = [&](const std::vector<OpEntry>& ops) {
        for (const OpEntry& op : ops)
          for (const char* attr : {"then_branch", "else_branch", "body"})
            if (op.def && op.def->has_subgraphs && op.attrs.Find(attr) &&
                op.attrs.GetInt(attr, -1) == int64_t(gi))
              used_by = op.type + " '" + op.name + "' " + attr;
      };
      find_user(m->ops);
      for (const GraphEntry& other : m->subgraphs) find_user(other.ops);
      j["subgraphs"].push_back({{"index", gi},
                                {"used_by", used_by},
                                {"inputs", ge.input_ids.size()},
                                {"outputs", ge.output_ids.size()},
                                {"operators", counts}});
    }
    for (size_t i = 0; i < m->tensors.size(); ++i) {
      const TensorEntry& t = m->tensors[i];
      if (t.const_data) {
        int64_t n = 1;
        for (int64_t d : t.info.shape) n *= d;
        // As stored in the file: float16 weights are widened when the model loads.
        const DType stored = DType(int(m->fb->tensors()->Get(uint32_t(i))->dtype()));
        const size_t bytes = dtype_storage_bytes(stored, n);
        const_bytes += bytes;
        const_bytes_by_dtype[dtype_name(stored)] += bytes;
        const_count++;
      }
      if (m->fb->tensors()->Get(uint32_t(i))->quant()) quantized_tensors++;
    }
  }
  int total_ops = 0;
  for (const auto& kv : op_counts) total_ops += kv.second;
  // Compute ops only: Q/DQ boundaries and integer data movement are not what a
  // user means by "runs int8".
  const int int8_ops = precision_counts["int8"] + precision_counts["int4-weight"];
  const int float_ops = precision_counts["float"];
  const bool quantized_model = quantized_tensors > 0 || qdq_ops > 0 || int8_ops > 0;
  std::vector<std::string> warnings;
  if (quantized_model && float_ops > int8_ops)
    warnings.push_back(std::to_string(float_ops) + " of " + std::to_string(float_ops + int8_ops) +
                       " operators run in float: the model is quantized but most of it is not "
                       "folded into integer kernels");
  if (quantized_model && heavy_float * 2 > heavy_total) {
    // The most frequent reason names the pattern to fix first.
    auto top = heavy_reasons.begin();
    for (auto it = heavy_reasons.begin(); it != heavy_reasons.end(); ++it)
      if (it->second > top->second) top = it;
    warnings.push_back(std::to_string(heavy_float) + " of " + std::to_string(heavy_total) +
                       " Conv/ConvTranspose/MatMul/Gemm run in float (most often: " + top->first +
                       "; qfold inspect --ops lists each)");
  }
  if (!precision_counts.empty()) {
    j["precision"] = precision_counts;
    j["granularity"] = granularity_counts;
  }
  if (!warnings.empty()) j["warnings"] = warnings;
  if (as_json) {
    j["inputs"] = nlohmann::json::array();
    for (const TensorInfo& t : inputs) j["inputs"].push_back(TensorJson(t));
    j["outputs"] = nlohmann::json::array();
    for (const TensorInfo& t : outputs) j["outputs"].push_back(TensorJson(t));
    j["operators"] = op_counts;
    j["operator_count"] = total_ops;
    j["constants"] = {
        {"count", const_count}, {"bytes", const_bytes}, {"bytes_by_dtype", const_bytes_by_dtype}};
    j["quantization"] = {{"quantized_tensors_or_qdq_nodes", quantized_tensors + qdq_ops},
                         {"quantized_tensors", quantized_tensors},
                         {"qdq_ops", qdq_ops}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("%s (%s)\n", path.c_str(), j["format"].get<std::string>().c_str());
  if (j.contains("producer"))
    std::printf("  producer: %s\n", j["producer"].get<std::string>().c_str());
  if (j.contains("opset")) std::printf("  source opset: %d\n", j["opset"].get<int>());
  std::printf("inputs:\n");
  // A sequence shows its elements' dtype and the dims every element has.
  auto type_text = [](const TensorInfo& t) {
    const std::string held = t.is_sequence ? "seq(" + std::string(dtype_name(t.dtype)) + ")"
                                           : std::string(dtype_name(t.dtype));
    return t.is_optional ? "optional(" + held + ")" : held;
  };
  for (const TensorInfo& t : inputs)
    std::printf("  %-24s %-8s %-20s %s\n", t.name.c_str(), type_text(t).c_str(),
                DimsToString(t).c_str(), LayoutName(t.layout));
  std::printf("outputs:\n");
  for (const TensorInfo& t : outputs)
    std::printf("  %-24s %-8s %-20s %s\n", t.name.c_str(), type_text(t).c_str(),
                DimsToString(t).c_str(), LayoutName(t.layout));
  std::printf("operators: %d\n", total_ops);
  for (const auto& kv : op_counts) std::printf("  %-24s %d\n", kv.first.c_str(), kv.second);
  if (j.contains("subgraphs")) {
    std::printf("subgraphs: %zu\n", j["subgraphs"].size());
    for (const auto& sg : j["subgraphs"]) {
      std::string ops;
      for (const auto& kv : sg["operators"].items())
        ops += (ops.empty() ? "" : ", ") + kv.key() + " " + std::to_string(kv.value().get<int>());
      std::printf("  #%d %s: %d in, %d out; %s\n", sg["index"].get<int>(),
                  sg["used_by"].get<std::string>().c_str(), sg["inputs"].get<int>(),
                  sg["outputs"].get<int>(), ops.c_str());
    }
  }
  std::printf("constants: %zu tensors, %zu bytes", const_count, const_bytes);
  if (!const_bytes_by_dtype.empty()) {  // float16 weights show as such
    const char* sep = " (";
    for (const auto& kv : const_bytes_by_dtype) {
      std::printf("%s%s %zu", sep, kv.first.c_str(), kv.second);
      sep = ", ";
    }
    std::printf(")");
  }
  std::printf("\n");
  if (!precision_counts.empty()) {
    std::printf("precision:");
    for (const auto& kv : precision_counts) std::printf(" %s %d", kv.first.c_str(), kv.second);
    for (const auto& kv : granularity_counts) std::printf(", %s %d", kv.first.c_str(), kv.second);
    std::printf("\n");
    if (HasFlag(args, "--ops"))
      for (const auto& d : j["operator_details"])
        std::printf("  %-40s %-26s %-8s %-4s %s%s%s\n", d["name"].get<std::string>().c_str(),
                    d["type"].get<std::string>().c_str(), d["precision"].get<std::string>().c_str(),
                    d.contains("layout") ? d["layout"].get<std::string>().c_str() : "",
                    d.contains("granularity") ? d["granularity"].get<std::string>().c_str() : "",
                    d.contains("reason") ? "  why float: " : "",
                    d.contains("reason") ? d["reason"].get<std::string>().c_str() : "");
  }
  for (const std::string& w : warnings) std::printf("warning: %s\n", w.c_str());
  if (j.contains("notes"))
    for (const auto& n : j["notes"]) std::printf("note: %s\n", n.get<std::string>().c_str());
  if (j.contains("operator_details")) {
    // Transposes left after conversion are layout changes the model pays for.
    std::string names;
    int count = 0;
    for (const auto& d : j["operator_details"])
      if (d["type"] == "Transpose") {
        if (count++ < 8)
          names += (names.empty() ? "'" : ", '") + d["name"].get<std::string>() + "'";
      }
    if (count)
      std::printf("transposes: %d (%s%s)\n", count, names.c_str(), count > 8 ? ", ..." : "");
  }
  // A model with Q/DQ is quantized even when nothing folded (16-bit, unmatched patterns).
  std::string quant_text = "none (float model)";
  if (quantized_tensors && qdq_ops)
    quant_text = std::to_string(quantized_tensors) + " quantized tensors, " +
                 std::to_string(qdq_ops) + " QuantizeLinear/DequantizeLinear ops";
  else if (quantized_tensors)
    quant_text = std::to_string(quantized_tensors) + " quantized tensors";
  else if (qdq_ops)
    quant_text =
        std::to_string(qdq_ops) + " QuantizeLinear/DequantizeLinear ops" +
        (j["format"] == "qfm" ? " (no integer kernel folded: quantization runs emulated in "
                                "float)"
                              : "");
  // Dynamic quantization (quantize_dynamic) leaves no quantized tensors: its
  // integer operators quantize their float inputs at run time.
  int dynamic_ops = 0;
  for (const char* t : {"DynamicQuantizeLinear", "DynamicQuantizeMatMul", "DynamicQuantizeLSTM",
                        "MatMulIntegerToFloat"}) {
    auto it = op_counts.find(t);
    if (it != op_counts.end()) dynamic_ops += it->second;
  }
  if (!quantized_tensors && !qdq_ops && dynamic_ops)
    quant_text = "dynamic (" + std::to_string(int8_ops) +
                 " integer operators, activations quantized at run time)";
  std::printf("quantization: %s\n", quant_text.c_str());
  return 0;
}

}  // namespace cli
}  // namespace qfold
