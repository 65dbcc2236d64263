"""The example trainer's files packed for the node image's bake (ShipExamples steps): base64 xz tars, each within
ARCHIVE_MAX_CHARS, computed once per content and cached like bytecode.

Packing is a greedy fill: one xz compression per file tried, at preset 9 extreme (xz(1): 674 MiB to compress, most
of it set up before the first byte), about 1.2 s of a `cdk synth -c workload=huge` and as much again for every
Slurm estate in a team file (issue 43). The archives depend only on the files' names and bytes (and the Python that
compressed them), so they are kept in `__pycache__/ship_examples.<digest>.json`, keyed by a hash of those: an edited
example is packed again. As with workloads/packaged.py they are written as Python writes bytecode (not under
PYTHONDONTWRITEBYTECODE, which this machine sets), and `make setup` writes them either way (`warm`).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import lzma
import sys
import tarfile
from functools import cache
from pathlib import Path

from workloads.packaged import write_atomically

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "slurm"
_CACHE = Path(__file__).parent / "__pycache__"
# The base64 archive one ShipExamples step carries: with the step's own lines, well within a component.
ARCHIVE_MAX_CHARS = 14000


def example_files() -> list[Path]:
    return sorted(p for p in EXAMPLES.iterdir() if p.suffix in (".sbatch", ".py", ".sh"))


def examples_archive(files: list[tuple[str, bytes]]) -> str:
    """These (name, bytes) as a base64 xz-compressed tar, byte-identical for identical files (no times, owners or
    modes from this machine; xz records no time): a component's document is at most 16,000 characters, too few for
    the files inline, and gzip's archive no longer fits beside the other steps."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz", preset=9 | lzma.PRESET_EXTREME) as tar:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buffer.getvalue()).decode()


PACKING = 2  # the packing's own version, in the cache's key: archives packed another way are packed again
PART = ".part"  # a file too large for one archive ships as NAME.part1, NAME.part2, ...: joined on the node


def _chunks(name: str, data: bytes, limit: int = ARCHIVE_MAX_CHARS) -> list[bytes]:
    """`data` whole if its archive alone fits `limit`, else cut at line ends into halves, again until each fits
    (train.py outgrew one step's room when the trainer grew). The halves are measured against a limit 256 characters
    lower: they ship under their part names (NAME.part1, ...), whose bytes move the compressed size a little."""
    cut = data.rfind(b"\n", 0, len(data) // 2) + 1
    if not cut or len(examples_archive([(name, data)])) <= limit:
        return [data]
    return [*_chunks(name, data[:cut], ARCHIVE_MAX_CHARS - 256), *_chunks(name, data[cut:], ARCHIVE_MAX_CHARS - 256)]


def _parts(files: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """The files, each too large for one archive as its parts (NAME.part1, ...) in order."""
    out = []
    for name, data in files:
        chunks = _chunks(name, data)
        out += [(name, data)] if len(chunks) == 1 else [(f"{name}{PART}{i}", c) for i, c in enumerate(chunks, 1)]
    return out


def joins(names: list[str]) -> dict[str, list[str]]:
    """Each split file's name and its parts' names, in order (the node's `cat` joins them)."""
    out: dict[str, list[str]] = {}
    for name in names:
        whole, _, index = name.rpartition(PART)
        if whole and index.isdigit():
            out.setdefault(whole, []).append(name)
    return out


def _pack(files: list[tuple[str, bytes]]) -> list[tuple[list[str], str]]:
    """The files packed, in order, into as few archives as keep each within ARCHIVE_MAX_CHARS: (names, archive). A
    file whose archive alone would not fit goes as its parts (_parts)."""
    groups: list[list[tuple[str, bytes]]] = [[]]
    archives: list[str | None] = [None]  # the group's archive when already made (a fit that was tried)
    for file in _parts(files):
        if groups[-1]:
            tried = examples_archive([*groups[-1], file])
            if len(tried) > ARCHIVE_MAX_CHARS:
                groups.append([])
                archives.append(None)
            else:
                archives[-1] = tried
        groups[-1].append(file)
    return [([name for name, _ in group], archive if archive is not None else examples_archive(group))
            for group, archive in zip(groups, archives)]


def _cache_path(files: list[tuple[str, bytes]]) -> Path:
    digest = hashlib.blake2b(f"{sys.version}\0{PACKING}".encode(), digest_size=12)
    for name, data in files:
        digest.update(f"\0{name}\0{len(data)}\0".encode())
        digest.update(data)
    return _CACHE / f"ship_examples.{digest.hexdigest()}.json"


@cache
def packed_examples() -> tuple[tuple[tuple[str, ...], str], ...]:
    """Every example, packed: ((names, base64 archive), ...) in order."""
    return _load_or_pack(write=not sys.dont_write_bytecode)


def _load_or_pack(*, write: bool) -> tuple[tuple[tuple[str, ...], str], ...]:
    files = [(p.name, p.read_bytes()) for p in example_files()]
    path = _cache_path(files)
    try:
        packed = json.loads(path.read_text())
    except Exception:  # absent, damaged or from elsewhere: pack instead
        packed = _pack(files)
        if write:
            write_atomically(path, json.dumps(packed).encode(), stale="ship_examples.*.json")
    return tuple((tuple(names), archive) for names, archive in packed)


def warm() -> int:
    """Write the archives' cache (`make setup`, as compileall writes bytecode): the number of archives."""
    return len(_load_or_pack(write=True))


if __name__ == "__main__":
    print(f"example archives cached: {warm()}")
