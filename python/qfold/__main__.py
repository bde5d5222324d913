"""``python -m qfold ...`` and the ``qfold`` console script: the qfold CLI.

Both run the C++ ``qfold`` executable shipped inside the package (``qfold/_bin``)
with the same arguments, so ``python -m qfold convert m.onnx -o m.qfm`` is
``qfold convert m.onnx -o m.qfm``.
"""
import os
import sys
from typing import List, Optional


def cli_path() -> str:
    """Path of the bundled ``qfold`` executable."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "qfold")


def main(argv: Optional[List[str]] = None) -> int:
    """Replaces this process with the CLI (returns only when it cannot be started)."""
    args = sys.argv[1:] if argv is None else list(argv)
    exe = cli_path()
    if not os.access(exe, os.X_OK):
        print(f"qfold: the CLI is missing from this installation ({exe})", file=sys.stderr)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, ["qfold", *args])
    return 1  # not reached: execv raises OSError on failure


if __name__ == "__main__":
    sys.exit(main())
