"""The packaged-YAML cache (workloads/packaged.py): same data as parsing, never stale, never required,
and what it buys the plan: a preset plan neither imports PyYAML nor scans for pydantic plugins."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest
import yaml

from workloads import packaged
from workloads.packaged import read_packaged_yaml

from .conftest import ROOT


def _caches(folder):
    return sorted((folder / "__pycache__").glob("*.pickle"))


@pytest.mark.parametrize("path", sorted((ROOT / "workloads").rglob("*.yaml")), ids=lambda p: p.name)
def test_cache_gives_what_parsing_gives(path):
    assert read_packaged_yaml(path) == yaml.safe_load(path.read_text(encoding="utf-8"))


def test_cache_written_then_used(tmp_path):
    src = tmp_path / "facts.yaml"
    src.write_text("a: 1\nchecked: 2026-11-23\n")
    first = read_packaged_yaml(src, write=True)
    [cache] = _caches(tmp_path)
    assert first == {"a": 1, "checked": yaml.safe_load("2026-11-23")}
    cache.write_bytes(pickle.dumps({"from": "cache"}))
    assert read_packaged_yaml(src) == {"from": "cache"}  # a hit does not parse


def test_edited_file_is_parsed_again_and_old_cache_removed(tmp_path):
    src = tmp_path / "facts.yaml"
    src.write_text("a: 1\n")
    read_packaged_yaml(src, write=True)
    src.write_text("a: 2\n")
    assert read_packaged_yaml(src, write=True) == {"a": 2}
    assert len(_caches(tmp_path)) == 1


def test_corrupt_cache_is_ignored(tmp_path):
    src = tmp_path / "facts.yaml"
    src.write_text("a: 1\n")
    read_packaged_yaml(src, write=True)
    [cache] = _caches(tmp_path)
    cache.write_bytes(b"not a pickle")
    assert read_packaged_yaml(src, write=True) == {"a": 1}
    assert read_packaged_yaml(src) == {"a": 1}


def test_no_cache_where_python_writes_no_bytecode(tmp_path, monkeypatch):
    src = tmp_path / "facts.yaml"
    src.write_text("a: 1\n")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert read_packaged_yaml(src) == {"a": 1}
    assert not (tmp_path / "__pycache__").exists()


def test_unwritable_folder_still_parses(tmp_path):
    src = tmp_path / "facts.yaml"
    src.write_text("a: 1\n")
    (tmp_path / "__pycache__").write_text("a file where the folder would go")
    assert read_packaged_yaml(src, write=True) == {"a": 1}


def test_warm_covers_catalog_and_presets():
    names = {p.name for p in packaged.warm()}
    assert {"instances.yaml", "serving.yaml", "huge.yaml", "small.yaml"} <= names
    for path in packaged.warm():
        assert (path.parent / "__pycache__").is_dir() and any(
            c.name.startswith(path.name + ".") for c in _caches(path.parent))


def test_preset_plan_skips_yaml_and_plugin_scan():
    """What the cache and the lazy package buy `python -m workloads plan huge` (issue 13: 0.3 s)."""
    packaged.warm()
    code = ("import runpy, sys\nsys.argv = ['workloads', 'plan', 'huge', '--json']\n"
            "try:\n    runpy.run_module('workloads', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "import pydantic.plugin._loader as plugins\n"
            "print('yaml' in sys.modules, getattr(plugins, '_plugins', None), file=sys.stderr)")  # the stand-in has none
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"})
    assert out.stderr.strip().splitlines()[-1] == "False None", out.stderr


def test_importing_the_package_loads_nothing_heavy():
    code = "import sys, workloads; print(sorted(m for m in ('pydantic', 'yaml', 'workloads.planning.planner') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
