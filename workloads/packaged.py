"""YAML files shipped inside the package (catalog, presets), parsed once and cached like .pyc.

Parsing the catalog is most of what `python -m workloads plan` does after its imports (about
35 ms of 0.4 s here), and PyYAML's constructor runs in Python even with the C parser. The parsed
data is pickled into the file's own `__pycache__`, keyed by a hash of its bytes, so an edited
file is parsed again. Like bytecode, it is written on first use unless PYTHONDONTWRITEBYTECODE is
set (this machine sets it), and `make setup` writes it either way (`warm`, as compileall does); where
the folder is not writable the file is simply parsed every time. The cache sits beside Python's own bytecode and is trusted as
much as that is. Files a user passes in are parsed by the caller, never cached.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import pickle
import sys
from pathlib import Path
from typing import Any

_PACKAGE = Path(__file__).parent


def _cache_path(path: Path, raw: bytes) -> Path:
    digest = hashlib.blake2b(raw, digest_size=12).hexdigest()
    return path.parent / "__pycache__" / f"{path.name}.{digest}.pickle"


def read_packaged_yaml(path: Path, *, write: bool | None = None) -> Any:
    """The parsed file; `write` the cache (default: as Python writes bytecode)."""
    raw = path.read_bytes()
    cached = _cache_path(path, raw)
    try:
        return pickle.loads(cached.read_bytes())
    except Exception:  # absent, damaged or from elsewhere: parse instead
        pass
    import yaml  # only on a cache miss: skipping the import is part of the saving

    data = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    if write is None:
        write = not sys.dont_write_bytecode
    if write:
        _write(path, cached, data)
    return data


def _write(path: Path, cached: Path, data: Any) -> None:
    write_atomically(cached, pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL),
                     stale=f"{glob.escape(path.name)}.*.pickle")


def write_atomically(path: Path, data: bytes, *, stale: str) -> None:
    """Write a cache file atomically (a reader never sees half a file) and remove the folder's other files matching
    `stale` (older versions). A failure is ignored: it only costs computing the answer again later."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, path)
        for old in path.parent.glob(stale):
            if old != path:
                old.unlink(missing_ok=True)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def warm() -> list[Path]:
    """Fill every packaged YAML file's cache, as compileall does for bytecode (`make setup`)."""
    files = sorted(_PACKAGE.rglob("*.yaml"))
    for path in files:
        read_packaged_yaml(path, write=True)
    return files


if __name__ == "__main__":
    print(f"packaged YAML cached: {len(warm())} files")
