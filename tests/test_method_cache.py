"""The dataclass method cache (workloads/method_cache.py): the classes are the same from the cache as compiled, a
cached text is not compiled again, a bad or foreign file is ignored, and the CLI and the app use it."""

from __future__ import annotations

import dataclasses
import inspect
import marshal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from workloads import method_cache

ROOT = Path(__file__).resolve().parent.parent


def _define():
    """A class using what the generated code reads: defaults, a factory, kw_only, frozen, order, slots."""

    @dataclass(frozen=True, order=True, slots=True)
    class Point:
        x: int
        y: float = 1.5
        tags: tuple[str, ...] = field(default_factory=tuple)
        label: str = field(default="p", kw_only=True)

    return Point


def _behaviour(cls) -> tuple:
    a, b = cls(1), cls(1, 2.0, ("t",), label="q")
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.x = 3  # type: ignore[misc]
    signature = inspect.signature(cls.__init__)
    return (repr(a), repr(b), a == cls(1), a < b, hash(a) == hash(cls(1)), str(signature),
            signature.return_annotation, [f.name for f in dataclasses.fields(cls)])


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """The cache empty and installed, its file in tmp_path, the real state restored after."""
    monkeypatch.setattr(method_cache, "_compiled", {})
    monkeypatch.setattr(method_cache, "_used", set())
    monkeypatch.setattr(method_cache, "_new", 0)
    monkeypatch.setattr(method_cache, "CACHE", tmp_path / "methods.marshal")
    monkeypatch.setattr(dataclasses, "exec", method_cache._exec, raising=False)
    return tmp_path / "methods.marshal"


def test_classes_from_the_cache_behave_as_compiled_ones(fresh, monkeypatch):
    monkeypatch.delattr(dataclasses, "exec")  # the builtin, as without the cache
    plain = _behaviour(_define())
    monkeypatch.setattr(dataclasses, "exec", method_cache._exec, raising=False)
    compiled = _behaviour(_define())  # a miss: compiled here
    assert method_cache._new > 0
    method_cache.save(fresh)
    monkeypatch.setattr(method_cache, "_compiled", method_cache._load(fresh))
    monkeypatch.setattr(method_cache, "_new", 0)
    cached = _behaviour(_define())  # every text found: nothing compiled
    assert method_cache._new == 0
    assert plain == compiled == cached
    # Compiled without this module's `from __future__ import annotations`, as dataclasses' own exec does: the return
    # annotation is the object None, not the string "None".
    assert plain[6] is None


@pytest.mark.parametrize("content", [b"", b"not marshal", marshal.dumps((1, "3.0.0 (other)", {})),
                                     marshal.dumps((99, sys.version, {})), marshal.dumps((1, sys.version, []))])
def test_a_damaged_or_foreign_file_is_ignored(tmp_path, content):
    path = tmp_path / "methods.marshal"
    path.write_bytes(content)
    assert method_cache._load(path) == {}


def test_nothing_is_written_when_nothing_was_compiled(fresh):
    method_cache.save(fresh)
    assert not fresh.exists()


def test_past_the_cap_only_this_runs_texts_are_kept(fresh, monkeypatch):
    stale = {f"# old {i}": compile("", "<string>", "exec") for i in range(3)}
    method_cache._compiled.update(stale)
    monkeypatch.setattr(method_cache, "_MAX_ENTRIES", 2)
    _define()
    method_cache.save(fresh)
    kept = method_cache._load(fresh)
    assert kept and not set(stale) & set(kept)
    assert set(kept) == method_cache._used


_SPY = (
    "import dataclasses, io, contextlib, runpy, sys\n"
    "seen = []\n"
    "real = dataclasses._process_class\n"
    "def spy(cls, *a, **k):\n"
    "    seen.append((cls.__module__, getattr(dataclasses, 'exec', None)))\n"
    "    return real(cls, *a, **k)\n"
    "dataclasses._process_class = spy\n"
)
_RUN = {
    # the CLI as `python -m workloads plan small --json` runs it
    "cli": ("sys.argv = ['workloads', 'plan', 'small', '--json']\n"
            "try:\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n"
            "        runpy.run_module('workloads', run_name='__main__', alter_sys=True)\n"
            "except SystemExit:\n"
            "    pass\n"),
    # the app's module-level code (its imports), without a synthesis
    "app": "import app\n",
}
_CHECK = (
    "ours = [(m, e) for m, e in seen if m.split('.')[0] in ('workloads', 'stacks', 'constructs_lib')]\n"
    "bad = [m for m, e in ours if getattr(e, '__module__', None) != 'workloads.method_cache']\n"
    "print(f'not through the cache: {bad}' if bad or not ours else f'ok {len(ours)}')\n"
)


@pytest.mark.parametrize("entry", sorted(_RUN))
def test_the_cli_and_the_app_install_it_before_their_dataclasses(entry):
    """Installed first: every class the CLI or the app defines came through the cache's exec."""
    done = subprocess.run([sys.executable, "-c", _SPY + _RUN[entry] + _CHECK], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("ok"), done.stdout
