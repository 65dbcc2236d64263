"""The sagemaker SDK's `image_uris.retrieve`, remembered per SDK version (the SDK stays the source of truth).

Importing `sagemaker.core` costs 1.2-1.4 s (its package __init__ builds hundreds of pydantic shape classes) and a
synthesis only wants a few image URIs from it: on this machine that was a quarter of `cdk synth -c workload=huge`
(docs/performance.md). Each answer is kept, keyed by the installed sagemaker-core version and the exact arguments,
in one JSON file in this package's `__pycache__`; a question it has not seen (or another SDK version) asks the SDK.
As with workloads/packaged.py, answers are written as Python writes bytecode (not under PYTHONDONTWRITEBYTECODE,
which this machine sets) and `make setup` writes those of every shipped workload either way (constructs_lib.images's
`warm`). Offline: retrieve() reads the SDK's own tables and makes no call.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..packaged import write_atomically

_FOLDER = Path(__file__).parent / "__pycache__"
_DISTRIBUTION = "sagemaker-core"  # the distribution that ships sagemaker.core.image_uris and its JSON tables
_known: dict[str, str] | None = None  # this process's answers, loaded on first use
_offline = False  # within offline(): answers written down only, never the SDK


@contextmanager
def offline() -> Iterator[None]:
    """Within: a question not answered before raises LookupError instead of importing the SDK (`python -m workloads
    plan` never loads it)."""
    global _offline
    before, _offline = _offline, True
    try:
        yield
    finally:
        _offline = before


def installed_version() -> str:
    """The installed sagemaker-core's version, read from the name of its `.dist-info` folder (the layout of installed
    distributions, PEP 376 and PEP 427's name escaping), the first on sys.path as importlib.metadata finds it. Asking
    importlib.metadata instead imports it (with email, zipfile and csv: about 12 ms, a twentieth of a plan)."""
    prefix = _DISTRIBUTION.replace("-", "_") + "-"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith(prefix) and name.endswith(".dist-info"):
                return name[len(prefix):-len(".dist-info")]
    return "absent"


def _path() -> Path:
    return _FOLDER / f"image_uris.{_DISTRIBUTION}-{installed_version()}.json"


def _load() -> dict[str, str]:
    global _known
    if _known is None:
        try:
            _known = dict(json.loads(_path().read_text()))
        except Exception:  # absent, damaged or unreadable: ask the SDK instead
            _known = {}
    return _known


def retrieve(**args: Any) -> str:
    """`sagemaker.core.image_uris.retrieve(**args)`, written down as Python writes bytecode."""
    known = _load()
    key = json.dumps(args, sort_keys=True)
    if key not in known:
        if _offline:
            raise LookupError(f"no image URI written down for {key}")
        from sagemaker.core import image_uris  # the slow import, only for a question not answered before

        known[key] = image_uris.retrieve(**args)
        if not sys.dont_write_bytecode:
            save()
    return known[key]


def save() -> None:
    """Write down every answer this process knows (atomically; a lost race between two writers only costs another
    SDK call later)."""
    known, path = _load(), _path()
    write_atomically(path, json.dumps(known, indent=0, sort_keys=True).encode(),
                     stale=f"image_uris.{_DISTRIBUTION}-*.json")


def with_tag(uri: str, tag: str | None) -> str:
    """`uri` with the tag AWS publishes, where the SDK builds another (None: the SDK's)."""
    return f"{uri.rsplit(':', 1)[0]}:{tag}" if tag else uri
