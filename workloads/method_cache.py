"""The code Python generates for dataclasses, compiled once and cached like .pyc.

Python 3.11's `dataclasses` writes each class's `__init__`, `__repr__`, `__eq__`, `__hash__` and frozen
`__setattr__`/`__delattr__` as source text and compiles it with `exec` at every start: about 540 functions and
43 ms of `python -m workloads plan`'s 0.2 s here (ours and pydantic's 105 classes; measured with the
compile timed apart, docs/performance.md). Bytecode caching does not cover it, because the text is made at run time.

`install()` gives the `dataclasses` module an `exec` of its own, which looks the text up in a cache of compiled code
before compiling. The key is the whole text, so a changed class is a different key and nothing can go stale; the
value is what `exec` would compile from it (same file name, no inherited `__future__` flags), so the classes are the
same with or without the cache (tests/test_method_cache.py). The cache is one marshal file in the package's
`__pycache__`, for this exact Python (`sys.version`), written at exit when something new was compiled, unless
PYTHONDONTWRITEBYTECODE is set (this machine sets it; `make setup` writes it either way, as it does bytecode). Where
it cannot be read or written, classes are compiled as before. It is trusted as much as the bytecode beside it.
"""

from __future__ import annotations

import atexit
import builtins
import dataclasses
import glob
import marshal
import sys
from pathlib import Path
from types import CodeType

from .packaged import write_atomically

CACHE = Path(__file__).parent / "__pycache__" / f"dataclass-methods.{sys.implementation.cache_tag}.marshal"
_FORMAT = 1
_MAX_ENTRIES = 4000  # beyond this (old classes' texts piling up over many edits) start again from this run's

_compiled: dict[str, CodeType] = {}
_used: set[str] = set()
_new = 0


def _exec(source, globals=None, locals=None, /):  # noqa: A002  (exec's own parameter names)
    """`exec` for the dataclasses module: compiled text from the cache, anything else as the builtin does it."""
    global _new
    if isinstance(source, str):
        code = _compiled.get(source)
        if code is None:
            # dont_inherit: compile as dataclasses.py's own exec would, without this module's __future__ annotations
            code = _compiled[source] = compile(source, "<string>", "exec", dont_inherit=True)
            _new += 1
        _used.add(source)
        source = code
    return builtins.exec(source, globals, locals)


def _load(path: Path) -> dict[str, CodeType]:
    try:
        form, version, compiled = marshal.loads(path.read_bytes())
    except Exception:  # absent, damaged or another format: compile instead
        return {}
    return compiled if (form, version) == (_FORMAT, sys.version) and isinstance(compiled, dict) else {}


def save(path: Path = CACHE) -> None:
    """Write what this process compiled, with what the file held (or, past the cap, with only what this run used)."""
    if not _new:
        return
    kept = _compiled if len(_compiled) <= _MAX_ENTRIES else {text: _compiled[text] for text in _used}
    write_atomically(path, marshal.dumps((_FORMAT, sys.version, kept)), stale=glob.escape(path.name))  # no other file to remove


def install(*, write: bool | None = None) -> None:
    """Use the cache for every dataclass defined from now on; `write` it at exit (default: as Python writes bytecode).
    Idempotent."""
    if getattr(dataclasses, "exec", None) is _exec:
        return
    _compiled.update(_load(CACHE))
    dataclasses.exec = _exec  # a module global shadows the builtin for dataclasses' own code only
    if write is None:
        write = not sys.dont_write_bytecode
    if write:
        atexit.register(save)


def warm(*packages: str) -> int:
    """Compile the dataclasses of every module in `packages` (and of the libraries they import) into the cache, as
    compileall does for bytecode (`make setup` names the project's three). The number of functions cached."""
    import importlib
    import pkgutil

    install(write=False)
    for name in packages:
        package = importlib.import_module(name)
        for module in pkgutil.walk_packages(package.__path__, f"{name}."):
            if not module.name.endswith("__main__"):  # a command line itself: importing it runs it
                importlib.import_module(module.name)
    global _new
    _new = max(_new, 1)  # write even when nothing was new, so the file is this run's whole set
    save()
    return len(_compiled)


if __name__ == "__main__":
    from workloads import method_cache  # the module the others import, not this __main__ copy of it

    print(f"dataclass methods cached: {method_cache.warm(*(sys.argv[1:] or ['workloads']))}")
