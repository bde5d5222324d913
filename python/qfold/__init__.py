"""qfold: convert ONNX models (float and quantized) to .qfm and run them on the CPU.

Two APIs over the same runtime:

* ``qfold.InferenceSession`` - the ``onnxruntime.InferenceSession`` interface
  (``get_inputs``, ``get_outputs``, ``run``, ``get_modelmeta``, ...). Give it an
  ``.onnx`` file or bytes (converted on first use and cached by content hash) or a
  ``.qfm`` model. docs/MIGRATING_FROM_ORT.md lists what differs.
* ``qfold.convert`` and ``qfold.Session`` - qfold's own calls: convert to a ``.qfm``
  file, run it with ``{name: array}`` feeds.

Errors are ``qfold.Error`` (a ``RuntimeError``) with a ``.code`` string, raised as
one of its subclasses: ``InvalidArgument`` (also a ``ValueError``), ``InvalidModel``,
``Unsupported``, ``IoError``, ``InternalError``.
"""
from ._qfold import (
    Error,
    InternalError,
    InvalidArgument,
    InvalidModel,
    IoError,
    Session,
    Unsupported,
    __version__,
    convert,
    onnx_signature,
)
from ._session import (
    ExecutionMode,
    GraphOptimizationLevel,
    InferenceSession,
    ModelMetadata,
    NodeArg,
    RunOptions,
    SessionOptions,
    cache_dir,
    get_available_providers,
    get_device,
)

__all__ = [
    "Error",
    "ExecutionMode",
    "GraphOptimizationLevel",
    "InferenceSession",
    "InternalError",
    "InvalidArgument",
    "InvalidModel",
    "IoError",
    "ModelMetadata",
    "NodeArg",
    "RunOptions",
    "Session",
    "SessionOptions",
    "Unsupported",
    "__version__",
    "cache_dir",
    "convert",
    "get_available_providers",
    "get_device",
    "onnx_signature",
]
