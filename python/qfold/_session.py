"""The ONNX Runtime-compatible API: InferenceSession, SessionOptions, NodeArg, ...

An application written for ``onnxruntime.InferenceSession`` runs when that class
is replaced by ``qfold.InferenceSession``. An ``.onnx`` model is converted to
``.qfm`` the first time it is used and the result is kept in a cache directory
(``cache_dir()``) under the hash of the model's bytes, the conversion options and
the qfold build, so later sessions load it directly.
"""
import enum
import hashlib
import json
import os
import tempfile
import threading
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _qfold
from ._qfold import InvalidArgument

_CPU_PROVIDER = "CPUExecutionProvider"
_QFM_IDENTIFIER = b"QFM1"  # flatbuffers file_identifier, bytes 4..8 of a .qfm
_INT64_MAX = (1 << 63) - 1

# numpy dtype name -> ONNX element type name, as NodeArg.type spells it.
_ONNX_TYPE = {
    "float32": "float",
    "float64": "double",
    "float16": "float16",
    "int8": "int8",
    "uint8": "uint8",
    "int16": "int16",
    "uint16": "uint16",
    "int32": "int32",
    "uint32": "uint32",
    "int64": "int64",
    "uint64": "uint64",
    "bool": "bool",
}
_NUMPY_TYPE = {v: k for k, v in _ONNX_TYPE.items()}

_warned: set = set()
_warned_lock = threading.Lock()


def _warn_once(key: str, message: str) -> None:
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, UserWarning, stacklevel=3)


def get_available_providers() -> List[str]:
    """Execution providers qfold offers: the CPU, as ONNX Runtime names it."""
    return [_CPU_PROVIDER]


def get_device() -> str:
    """``'CPU'``: qfold runs on the CPU only."""
    return "CPU"


def cache_dir() -> str:
    """Where converted models are cached: ``$QFOLD_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/qfold``, else ``~/.cache/qfold``."""
    override = os.environ.get("QFOLD_CACHE_DIR")
    if override:
        return override
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "qfold")


class GraphOptimizationLevel(enum.IntEnum):
    """Accepted for compatibility; qfold always optimizes fully at conversion."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    """Accepted for compatibility; qfold runs operators in sequence."""

    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


# ONNX Runtime settings that have no effect in qfold, with ONNX Runtime's defaults.
# Setting one to another value warns once per setting and process.
_ORT_ONLY_SETTINGS: Dict[str, Any] = {
    "inter_op_num_threads": 0,
    "graph_optimization_level": GraphOptimizationLevel.ORT_ENABLE_ALL,
    "execution_mode": ExecutionMode.ORT_SEQUENTIAL,
    "execution_order": 0,
    "log_severity_level": -1,
    "log_verbosity_level": 0,
    "logid": "",
    "enable_cpu_mem_arena": True,
    "enable_mem_pattern": True,
    "enable_mem_reuse": True,
    "enable_profiling": False,
    "optimized_model_filepath": "",
    "profile_file_prefix": "onnxruntime_profile_",
    "use_deterministic_compute": False,
    "use_per_session_threads": True,
}


class SessionOptions:
    """Options of an InferenceSession, as ``onnxruntime.SessionOptions``.

    qfold honours ``intra_op_num_threads`` (0: one thread per available core),
    ``add_free_dimension_override_by_name`` (fixes a symbolic dim at conversion) and
    its own ``precision``: ``"fp32"`` (default) or ``"bf16"`` (float channels-last
    convolutions multiply bfloat16-rounded values on AMX-BF16 or AVX-512 BF16
    (vdpbf16ps), summing in fp32; no effect where not faster: CPUs without AVX-512
    BF16, Intel CPUs without AMX-BF16) or
    ``"fp16"`` (convolutions and Gemm/MatMul with a constant B in NEON half
    arithmetic on Armv8.2 FEAT_FP16; no effect without it).
    The other ONNX Runtime settings are accepted and ignored, with a warning the
    first time each is changed.
    """

    def __init__(self) -> None:
        object.__setattr__(self, "intra_op_num_threads", 0)
        object.__setattr__(self, "precision", "fp32")
        for name, default in _ORT_ONLY_SETTINGS.items():
            object.__setattr__(self, name, default)
        object.__setattr__(self, "_config", {})
        object.__setattr__(self, "_free_dims", {})

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "intra_op_num_threads":
            if not isinstance(value, int) or value < 0:
                raise InvalidArgument(f"intra_op_num_threads must be an int >= 0, got {value!r}")
        elif name == "precision":
            if value not in ("fp32", "bf16", "fp16"):  # checked here, not at the next session
                raise InvalidArgument(
                    f"precision must be 'fp32', 'bf16' or 'fp16', got {value!r}")
        elif name in _ORT_ONLY_SETTINGS:
            if value != _ORT_ONLY_SETTINGS[name]:
                _warn_once("SessionOptions." + name,
                           f"qfold ignores SessionOptions.{name} (an ONNX Runtime setting)")
        else:
            raise AttributeError(f"'SessionOptions' object has no attribute '{name}'")
        object.__setattr__(self, name, value)

    def add_session_config_entry(self, key: str, value: str) -> None:
        """Stored and returned by get_session_config_entry; qfold reads none of them."""
        _warn_once("config:" + key, f"qfold ignores the session config entry '{key}'")
        self._config[key] = value

    def get_session_config_entry(self, key: str) -> str:
        if key not in self._config:
            raise InvalidArgument(f"SessionOptions does not have configuration with key: {key}")
        return self._config[key]

    def add_free_dimension_override_by_name(self, dim_name: str, dim_value: int) -> None:
        """Fixes the symbolic dim ``dim_name`` to ``dim_value`` when the model is converted."""
        self._free_dims[dim_name] = int(dim_value)

    def threads(self) -> int:
        """The number of threads a session with these options runs on."""
        return _threads(self.intra_op_num_threads)


def _threads(intra_op_num_threads: int) -> int:
    if intra_op_num_threads > 0:
        return intra_op_num_threads
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class RunOptions:
    """Accepted by InferenceSession.run for compatibility; qfold reads none of it."""

    def __init__(self) -> None:
        self.log_severity_level = -1
        self.log_verbosity_level = 0
        self.logid = ""
        self.only_execute_path_to_fetches = False
        self.terminate = False

    def add_run_config_entry(self, key: str, value: str) -> None:
        pass


class NodeArg:
    """A model input or output: ``name``, ``shape`` (ints, dim names as str, None for
    unnamed unknown dims) and ``type`` (``'tensor(float)'``, ...)."""

    __slots__ = ("name", "shape", "type")

    def __init__(self, name: str, shape: Optional[List[Union[int, str, None]]], type: str) -> None:
        self.name = name
        self.shape = shape
        self.type = type

    def __repr__(self) -> str:
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


class ModelMetadata:
    """What ``get_modelmeta()`` returns: the source .onnx file's model metadata."""

    __slots__ = ("producer_name", "graph_name", "domain", "description", "graph_description",
                 "version", "custom_metadata_map")

    def __init__(self, producer_name: str = "", graph_name: str = "", domain: str = "",
                 description: str = "", graph_description: str = "", version: int = _INT64_MAX,
                 custom_metadata_map: Optional[Dict[str, str]] = None) -> None:
        self.producer_name = producer_name
        self.graph_name = graph_name
        self.domain = domain
        self.description = description
        self.graph_description = graph_description
        self.version = version
        self.custom_metadata_map = dict(custom_metadata_map or {})


def _is_qfm(head: bytes) -> bool:
    return len(head) >= 8 and head[4:8] == _QFM_IDENTIFIER


def _extension_stamp() -> str:
    # Size and mtime of the extension module: a rebuilt qfold (same version number,
    # possibly another converter) gets fresh cache entries.
    try:
        st = os.stat(_qfold.__file__)
        return f"{st.st_size}:{st.st_mtime_ns}"
    except (AttributeError, OSError):
        return ""


def _write_atomically(path: str, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _convert_cached(onnx_path: Optional[str], onnx_bytes: bytes,
                    convert_kwargs: Dict[str, Any]) -> Tuple[str, Dict[str, Any]]:
    """Returns (cached .qfm path, {'signature', 'notes'}), converting on a cache miss."""
    key = hashlib.sha256()
    key.update(f"qfold {_qfold.__version__} {_extension_stamp()}\n".encode())
    key.update(json.dumps(convert_kwargs, sort_keys=True).encode() + b"\n")
    key.update(onnx_bytes)
    digest = key.hexdigest()
    directory = cache_dir()
    os.makedirs(directory, exist_ok=True)
    qfm_path = os.path.join(directory, digest + ".qfm")
    info_path = os.path.join(directory, digest + ".json")
    if os.path.exists(qfm_path) and os.path.exists(info_path):
        try:
            with open(info_path, "r", encoding="utf-8") as f:
                return qfm_path, json.load(f)
        except (OSError, ValueError):
            pass  # unreadable entry: convert again
    tmp_onnx = None
    try:
        if onnx_path is None:
            fd, tmp_onnx = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".onnx")
            with os.fdopen(fd, "wb") as f:
                f.write(onnx_bytes)
            onnx_path = tmp_onnx
        signature = _qfold.onnx_signature(onnx_path)
        notes = _qfold.convert(onnx_path, qfm_path, **convert_kwargs)
    finally:
        if tmp_onnx:
            os.unlink(tmp_onnx)
    info = {"signature": signature, "notes": list(notes)}
    _write_atomically(info_path, json.dumps(info).encode())
    return qfm_path, info


def _provider_names(providers: Optional[Sequence[Any]]) -> List[str]:
    if providers is None:
        return []
    names = []
    for p in providers:
        if isinstance(p, str):
            names.append(p)
        elif isinstance(p, (tuple, list)) and p and isinstance(p[0], str):
            names.append(p[0])
        else:
            raise InvalidArgument(f"a provider must be a name or a (name, options) pair, got {p!r}")
    return names


class InferenceSession:
    """Runs a model with the interface of ``onnxruntime.InferenceSession``.

    ``path_or_bytes``: an ``.onnx`` file or its bytes (converted on first use, then
    cached, see ``cache_dir()``) or a ``.qfm`` file or bytes (loaded directly).
    ``providers`` are accepted and ignored (qfold runs on the CPU); so are
    ``provider_options``. qfold-specific keywords, part of the cache key:
    ``sess_options`` may be a ``qfold.SessionOptions`` or an
    ``onnxruntime.SessionOptions`` (its ``intra_op_num_threads`` is used).
    ``dims={"batch": 1}`` and ``input_shapes={"x": [1, 3, 224, 224]}`` fix input
    shapes at conversion, ``fold_qdq=False`` keeps quantized models float.
    """

    def __init__(self, path_or_bytes: Union[str, bytes, "os.PathLike[str]"],
                 sess_options: Optional[SessionOptions] = None,
                 providers: Optional[Sequence[Any]] = None,
                 provider_options: Optional[Sequence[Dict[str, Any]]] = None,
                 **kwargs: Any) -> None:
        self._options = sess_options if sess_options is not None else SessionOptions()
        self._requested_providers = _provider_names(providers)
        convert_kwargs: Dict[str, Any] = {}
        for name in ("dims", "input_shapes", "input_layouts"):
            value = kwargs.pop(name, None)
            if value is not None:
                convert_kwargs[name] = {k: (list(v) if name == "input_shapes" else v)
                                        for k, v in dict(value).items()}
        if "fold_qdq" in kwargs:
            convert_kwargs["fold_qdq"] = bool(kwargs.pop("fold_qdq"))
        free_dims = getattr(self._options, "_free_dims", {})
        if free_dims:
            convert_kwargs["dims"] = {**free_dims, **convert_kwargs.get("dims", {})}
        for name in kwargs:
            _warn_once("kwarg:" + name, f"qfold.InferenceSession ignores the keyword '{name}'")

        self._notes: List[str] = []
        self._signature: Optional[Dict[str, Any]] = None
        self._model_path: Optional[str] = None
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            data = bytes(path_or_bytes)
            if _is_qfm(data):
                source: Any = data
            else:
                source, info = _convert_cached(None, data, convert_kwargs)
                self._signature, self._notes = info["signature"], info["notes"]
        else:
            path = os.fspath(path_or_bytes)
            if not isinstance(path, str):
                path = os.fsdecode(path)
            self._model_path = path
            try:
                with open(path, "rb") as f:
                    head = f.read(8)
            except OSError as e:
                raise _qfold.IoError(f"{path}: cannot open the model ({e.strerror})") from None
            if _is_qfm(head):
                source = path
            else:
                with open(path, "rb") as f:
                    data = f.read()
                source, info = _convert_cached(path, data, convert_kwargs)
                self._signature, self._notes = info["signature"], info["notes"]
        # An application that swaps only the session class passes onnxruntime's own
        # SessionOptions: read the thread count from any options object.
        threads = _threads(int(getattr(self._options, "intra_op_num_threads", 0) or 0))
        # onnxruntime.SessionOptions has no precision: fp32.
        precision = getattr(self._options, "precision", "fp32")
        self._session = _qfold.Session(source, num_threads=threads, precision=precision)
        if self._signature is not None:
            self._inputs = [self._arg_from_signature(a) for a in self._signature["inputs"]]
            self._outputs = [self._arg_from_signature(a) for a in self._signature["outputs"]]
        else:
            self._inputs = [self._arg_from_qfm(t) for t in self._session.inputs]
            self._outputs = [self._arg_from_qfm(t) for t in self._session.outputs]
        self._input_dtypes = {t["name"]: t["dtype"] for t in self._session.inputs}
        self._sequence_inputs = {t["name"] for t in self._session.inputs if t.get("sequence")}
        self._optional_inputs = {t["name"] for t in self._session.inputs if t.get("optional")}

    @staticmethod
    def _arg_from_signature(arg: Dict[str, Any]) -> NodeArg:
        elem = arg["type"]
        if not elem:
            return NodeArg(arg["name"], arg["shape"], "unknown")
        kind = f"seq(tensor({elem}))" if arg.get("sequence") else f"tensor({elem})"
        if arg.get("optional"):
            kind = f"optional({kind})"
        return NodeArg(arg["name"], arg["shape"], kind)

    @staticmethod
    def _arg_from_qfm(info: Dict[str, Any]) -> NodeArg:
        shape: List[Union[int, str, None]] = []
        for dim, name in zip(info["shape"], info["dim_names"] or [""] * len(info["shape"])):
            shape.append(int(dim) if dim >= 0 else (name or None))
        elem = _ONNX_TYPE.get(info["dtype"], info["dtype"])
        kind = f"seq(tensor({elem}))" if info.get("sequence") else f"tensor({elem})"
        if info.get("optional"):
            kind = f"optional({kind})"
        return NodeArg(info["name"], shape, kind)

    # -- the ONNX Runtime interface -------------------------------------------------

    def get_inputs(self) -> List[NodeArg]:
        """The model's inputs, as the source model declares them."""
        return list(self._inputs)

    def get_outputs(self) -> List[NodeArg]:
        """The model's outputs, as the source model declares them."""
        return list(self._outputs)

    def get_overridable_initializers(self) -> List[NodeArg]:
        """Always empty: a converted model's constants are fixed."""
        return []

    def get_modelmeta(self) -> ModelMetadata:
        """The source .onnx model's metadata (producer, graph name, metadata_props as
        ``custom_metadata_map``); empty fields for a model given as .qfm."""
        sig = self._signature or {}
        return ModelMetadata(
            producer_name=sig.get("producer_name", ""),
            graph_name=sig.get("graph_name", ""),
            domain=sig.get("domain", ""),
            description=sig.get("description", ""),
            graph_description=sig.get("graph_description", ""),
            version=sig.get("version", _INT64_MAX),
            custom_metadata_map=sig.get("custom_metadata_map", {}),
        )

    def get_providers(self) -> List[str]:
        """``['CPUExecutionProvider']``, whatever was requested."""
        return [_CPU_PROVIDER]

    def get_provider_options(self) -> Dict[str, Dict[str, str]]:
        return {_CPU_PROVIDER: {}}

    def set_providers(self, providers: Optional[Sequence[Any]] = None,
                      provider_options: Optional[Sequence[Dict[str, Any]]] = None) -> None:
        """Accepted and ignored, as the constructor's providers."""
        self._requested_providers = _provider_names(providers)

    def get_session_options(self) -> SessionOptions:
        return self._options

    def disable_fallback(self) -> None:
        pass

    def enable_fallback(self) -> None:
        pass

    def end_profiling(self) -> str:
        """qfold writes no ONNX Runtime profile; returns ''. (``qfold bench --profile``
        times each operator.)"""
        return ""

    def run(self, output_names: Optional[Sequence[str]], input_feed: Dict[str, Any],
            run_options: Optional[RunOptions] = None) -> List[np.ndarray]:
        """Runs the model on ``input_feed`` ({input name: array}); returns the outputs
        named in ``output_names`` (all when None or empty) as numpy arrays, in that
        order. A new input shape re-plans the session. Raises qfold.InvalidArgument
        for unknown names, missing inputs and inputs of another dtype or shape."""
        all_outputs = [o.name for o in self._outputs]
        names = list(output_names) if output_names else all_outputs
        for name in names:
            if name not in all_outputs:
                raise InvalidArgument(f"Invalid output name:{name}")
        feeds = self._check_feed(input_feed)
        results = self._session.run(feeds)
        return [results[name] for name in names]

    # -- qfold additions ------------------------------------------------------------

    @property
    def conversion_notes(self) -> List[str]:
        """What the conversion of the .onnx source did that a user should know
        (empty for .qfm sources and clean conversions)."""
        return list(self._notes)

    @property
    def model_path(self) -> Optional[str]:
        """The path the session was created from (None for bytes)."""
        return self._model_path

    def _check_feed(self, input_feed: Dict[str, Any]) -> Dict[str, Any]:
        expected = {a.name: a for a in self._inputs}
        missing = [name for name in expected if name not in input_feed]
        if missing:
            raise InvalidArgument(f"Required inputs ({missing}) are missing from input feed "
                                  f"({list(input_feed)}).")
        feeds = {}
        for name, value in input_feed.items():
            arg = expected.get(name)
            if arg is None:
                raise InvalidArgument(f"Invalid input name: {name}")
            want = self._input_dtypes.get(name)
            if value is None and name in self._optional_inputs:
                feeds[name] = None  # an optional without a value
                continue
            if name in self._sequence_inputs:
                # A list of arrays, each of the elements' dtype (checked by the session).
                if not isinstance(value, (list, tuple)):
                    raise InvalidArgument(f"Input {name} is a sequence: give a list of arrays, "
                                          f"expected: ({arg.type})")
                feeds[name] = list(value)
                continue
            if not isinstance(value, np.ndarray):
                # Lists and scalars take the input's dtype, as in ONNX Runtime.
                value = np.asarray(value, dtype=want if want in _ONNX_TYPE else None)
            given = _ONNX_TYPE.get(value.dtype.name, value.dtype.name)
            if not value.dtype.isnative:
                given = value.dtype.str
            if value.dtype.name != want or not value.dtype.isnative:
                raise InvalidArgument(f"Unexpected input data type. Actual: (tensor({given})) , "
                                      f"expected: ({arg.type})")
            shape = arg.shape
            if shape is not None:
                if value.ndim != len(shape):
                    raise InvalidArgument(f"Invalid rank for input: {name} Got: {value.ndim} "
                                          f"Expected: {len(shape)} Please fix either the "
                                          f"inputs/outputs or the model.")
                wrong = [(i, got, dim) for i, (got, dim) in enumerate(zip(value.shape, shape))
                         if isinstance(dim, int) and got != dim]
                if wrong:
                    lines = "".join(f" index: {i} Got: {got} Expected: {dim}\n"
                                    for i, got, dim in wrong)
                    raise InvalidArgument(f"Got invalid dimensions for input: {name} for the "
                                          f"following indices\n{lines} Please fix either the "
                                          f"inputs/outputs or the model.")
            feeds[name] = value
        return feeds
