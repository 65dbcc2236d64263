"""The node venv's hash locks: every wheel a stack's bake installs (its pins, the example trainer's packages and all
their dependencies), named by exact version and sha256, read from the index by tools/lock_node_packages.py and
checked in under catalog/locks/<device>.txt. The bake installs with `pip --require-hashes --no-deps`, so a wheel the
index serves later with other bytes, or a dependency not in the lock, fails the bake instead of reaching a node."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

LOCKS = Path(__file__).resolve().parent / "locks"
_REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\]+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})\b")


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class NodeLock:
    """A node image's locked requirements: exact versions and their sha256 digests."""
    text: str  # the requirements file as checked in
    versions: dict[str, str]  # canonical name -> exact version
    hashes: dict[str, tuple[str, ...]]  # canonical name -> its sha256 digests

    def holds(self, pin: str) -> bool:
        """Whether a software.yaml pin ('torch==2.15.0', 'torch-neuronx==2.14.3.0.*') is what the lock installs."""
        name, _, version = pin.partition("==")
        locked = self.versions.get(canonical(name))
        if locked is None:
            return False
        return locked.startswith(version[:-1]) if version.endswith("*") else locked == version


def lock_path(device: str) -> Path:
    return LOCKS / f"{device}.txt"


def parse(text: str) -> NodeLock:
    """A pip hash-checking requirements file: `name==version \\` then its `--hash=sha256:...` lines."""
    versions: dict[str, str] = {}
    hashes: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _REQUIREMENT.match(stripped)
        if match:
            current = canonical(match.group(1))
            versions[current] = match.group(2)
            hashes[current] = []
        hashes.setdefault(current or "", []).extend(_HASH.findall(stripped))
    return NodeLock(text=text, versions=versions, hashes={k: tuple(v) for k, v in hashes.items() if k})


def node_lock(device: str) -> NodeLock | None:
    """The checked-in lock of the stack whose train.py --device is `device`, or None where none is checked in."""
    path = lock_path(device)
    return parse(path.read_text()) if path.exists() else None
