"""The gpt workload's text: the bytes of Python's own standard library, built once and cached.

A real corpus that ships with every Python, so nothing is downloaded: the
``*.py`` files directly under ``sysconfig.get_paths()["stdlib"]`` (no
sub-packages, no site-packages, no ``test*`` files), in sorted name order,
each taken whole if it still fits within ``max_bytes`` (a file too big for
what is left is skipped, smaller ones after it may still fit). Files, not bytes,
are split between train and validation, spread evenly through the sorted
list (file i goes to validation when ``floor((i+1)*f) > floor(i*f)``), so the
two splits share no source file and validation is not one corner of the
alphabet.

The two splits are written as raw uint8 files under the cache directory
(``$SEARCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/search``, else
``~/.cache/search``), named by the Python version and a hash of the rule, so
every trial after the first only reads them; concurrent trials that build at
once each write a private temporary file and rename it into place.
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

RULE_VERSION = "stdlib-top-level-py-sorted-whole-files-that-fit-v1"


@dataclass
class Corpus:
    train: np.ndarray  # uint8 bytes
    val: np.ndarray
    train_files: list[str]
    val_files: list[str]
    path: Path  # the train split's cache file; the val split sits next to it
    built: bool  # False when both splits were read from the cache


def cache_dir() -> Path:
    if os.environ.get("SEARCH_CACHE_DIR"):
        return Path(os.environ["SEARCH_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "search"


def stdlib_files(max_bytes: int) -> list[Path]:
    """The rule: sorted top-level stdlib ``*.py`` files, not tests, each whole if it still fits."""
    root = Path(sysconfig.get_paths()["stdlib"])
    chosen, total = [], 0
    for path in sorted(root.glob("*.py")):
        if path.name.startswith("test") or not path.is_file():
            continue
        size = path.stat().st_size
        if total + size > max_bytes:
            continue
        chosen.append(path)
        total += size
    return chosen


def split_files(files: list[Path], val_fraction: float) -> tuple[list[Path], list[Path]]:
    val = [f for i, f in enumerate(files) if math.floor((i + 1) * val_fraction) > math.floor(i * val_fraction)]
    train = [f for f in files if f not in set(val)]
    return train, val


def _key(max_bytes: int, val_fraction: float) -> str:
    rule = f"{RULE_VERSION}|{sys.version}|{sysconfig.get_paths()['stdlib']}|{max_bytes}|{val_fraction!r}"
    pyver = f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    return f"corpus-{pyver}-{hashlib.sha256(rule.encode()).hexdigest()[:16]}"


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def build_corpus(max_bytes: int, val_fraction: float, directory: Path | None = None) -> Corpus:
    """The train and validation bytes, read from the cache or built into it."""
    directory = Path(directory) if directory is not None else cache_dir()
    files = stdlib_files(max_bytes)
    train_files, val_files = split_files(files, val_fraction)
    key = _key(max_bytes, val_fraction)
    train_path, val_path = directory / f"{key}.train.bin", directory / f"{key}.val.bin"
    built = not (train_path.exists() and val_path.exists())
    if built:
        directory.mkdir(parents=True, exist_ok=True)
        _write_atomic(train_path, b"".join(f.read_bytes() for f in train_files))
        _write_atomic(val_path, b"".join(f.read_bytes() for f in val_files))
    return Corpus(
        train=np.fromfile(train_path, dtype=np.uint8),
        val=np.fromfile(val_path, dtype=np.uint8),
        train_files=[f.name for f in train_files],
        val_files=[f.name for f in val_files],
        path=train_path,
        built=built,
    )
