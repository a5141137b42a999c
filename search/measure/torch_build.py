"""torch's version strings (torch.__version__, torch.version.cuda) without importing torch.

Importing torch takes seconds of CPU, and the sweep process needs torch
only for these two strings (the fingerprint, whether the build has CUDA):
the trials' forkserver imports torch, on the other core, while the sweep
starts. torch/version.py is a file of plain assignments that torch's build
writes; it is read as such, and torch is imported only when it cannot be.
"""
from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TorchBuild:
    version: str
    cuda: str | None  # torch.version.cuda: None for a CPU-only build


def torch_build() -> TorchBuild | None:
    """The installed torch's version and CUDA version; None when torch is not installed."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    values = _read_version_file(spec)
    if values is not None and isinstance(values.get("__version__"), str):
        cuda = values.get("cuda")
        return TorchBuild(values["__version__"], cuda if isinstance(cuda, str) else None)
    import torch  # an unusual install: ask torch itself

    return TorchBuild(str(torch.__version__), torch.version.cuda)


def _read_version_file(spec: importlib.machinery.ModuleSpec) -> dict[str, object] | None:
    """The literal assignments of torch/version.py (``cuda: Optional[str] = None`` included)."""
    for location in spec.submodule_search_locations or []:
        try:
            tree = ast.parse(Path(location, "version.py").read_text())
        except (OSError, SyntaxError, ValueError):
            continue
        values: dict[str, object] = {}
        for node in tree.body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
                node.target if isinstance(node, ast.AnnAssign) else None
            if isinstance(target, ast.Name) and getattr(node, "value", None) is not None:
                try:
                    values[target.id] = ast.literal_eval(node.value)  # type: ignore[arg-type]
                except ValueError:
                    continue
        return values
    return None
