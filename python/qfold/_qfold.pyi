"""Type stubs of the extension module qfold._qfold (python/qfold_py.cc)."""
import os
from typing import Dict, List, Literal, Mapping, Optional, Sequence, TypedDict, Union

import numpy as np

__version__: str

class Error(RuntimeError):
    """A qfold failure; raised as one of the subclasses below."""

    code: str  # 'invalid_argument', 'invalid_model', 'unsupported', 'io_error', 'internal'

class InvalidArgument(Error, ValueError):
    """Bad input to a call: unknown or missing tensor names, wrong dtype or shape."""

class InvalidModel(Error):
    """The model file is malformed or inconsistent."""

class Unsupported(Error):
    """The model uses an operator, attribute or type qfold does not implement."""

class IoError(Error):
    """A file could not be read or written."""

class InternalError(Error):
    """A bug in qfold."""

_Path = Union[str, "os.PathLike[str]"]

def convert(
    onnx_path: _Path,
    qfm_path: _Path,
    input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
    dims: Optional[Mapping[str, int]] = None,
    input_layouts: Optional[Mapping[str, str]] = None,
    fold_qdq: bool = True,
    consts: Optional[Mapping[str, Union[str, int, float, bool, Sequence[Union[int, float]],
                                        np.ndarray]]] = None,
) -> List[str]:
    """Converts an ONNX file to .qfm and returns the conversion's notes; raises qfold.Error
    (and writes no output file) on failure. consts binds graph inputs to constants
    ({'sr': 16000}, as qfold convert --const): Ifs they decide keep only the branch taken."""

class OnnxArgInfo(TypedDict):
    name: str
    type: Optional[str]  # ONNX element type, lower case ('float', 'uint8'); None: not a tensor
    shape: Optional[List[Union[int, str, None]]]  # None: rank unknown

class OnnxSignatureInfo(TypedDict):
    inputs: List[OnnxArgInfo]
    outputs: List[OnnxArgInfo]
    producer_name: str
    domain: str
    description: str
    graph_name: str
    graph_description: str
    version: int
    custom_metadata_map: Dict[str, str]

def onnx_signature(onnx_path: _Path) -> OnnxSignatureInfo:
    """The inputs, outputs and metadata an .onnx file declares (initializers listed as
    inputs left out)."""

class TensorInfo(TypedDict):
    name: str
    dtype: str  # numpy dtype name ('float32'), or qfold's name where numpy has none
    shape: List[int]  # -1 where symbolic
    dim_names: List[str]  # the symbolic names, '' for fixed dims
    layout: str  # 'NCHW', 'NHWC' or 'plain'

class Session:
    """A loaded .qfm model ready to run (qfold's native API). Thread-safe: runs from several
    threads are serialized."""

    def __init__(self, path_or_bytes: Union[_Path, bytes, bytearray, memoryview],
                 num_threads: int = 1,
                 state_bindings: Optional[Mapping[str, str]] = None,
                 precision: Literal["fp32", "bf16", "fp16"] = "fp32") -> None:
        """state_bindings {output: input}: after each run the output's value becomes the
        input's (streaming state); a bound input starts at zeros and may be left out of run()'s
        feeds (given, it overrides the carried state). precision 'bf16' (opt-in): float
        channels-last convolutions multiply bfloat16-rounded values on AMX-BF16 or AVX-512
        BF16, summing in fp32; no effect on CPUs without AVX-512 BF16. 'fp16' (opt-in): convolutions and Gemm/MatMul
        with a constant B in NEON half arithmetic on Armv8.2 FEAT_FP16, none elsewhere. Other values raise InvalidArgument."""
    def reset_state(self) -> None:
        """Zeros the inputs bound by state_bindings (a new stream)."""
    @property
    def inputs(self) -> List[TensorInfo]: ...
    @property
    def outputs(self) -> List[TensorInfo]: ...
    @property
    def arena_bytes(self) -> int: ...
    def resize_input(self, name: str, shape: Sequence[int]) -> None:
        """Re-plans for a new input shape (run() also does this by itself)."""
    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """Runs with {name: array}; returns {name: array} (copies)."""
