"""`python -m workloads`'s start-up (workloads/__main__.py): the plan imports no more than it uses."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pydantic.plugin._schema_validator as schema_validator

from .conftest import ROOT


def test_the_plan_never_imports_importlib_metadata():
    """Before: pydantic's plugin loader (imported even with plugins off) and the image cache's version key each
    imported importlib.metadata, with email, zipfile and csv: about 12-15 ms of a 0.22 s plan."""
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "workloads", "plan", "huge", "--json"], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    imported = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "pydantic" in imported  # the importtime lines were read
    assert not imported & {"importlib.metadata", "email", "zipfile"}, sorted(imported & {"importlib.metadata", "email"})


def test_the_stand_in_plugin_loader_answers_as_pydantics_does_with_plugins_off():
    """With PYDANTIC_DISABLE_PLUGINS=__all__ (which __main__ sets unless the user set it), pydantic's get_plugins()
    returns () and create_schema_validator uses nothing else of the loader: the stand-in keeps both true. A pydantic
    that asks its loader for more fails here, not in a user's plan."""
    uses = re.findall(r"from \._loader import ([\w, ]+)", Path(schema_validator.__file__).read_text())
    assert uses == ["get_plugins"], uses
    code = ("import os; os.environ['PYDANTIC_DISABLE_PLUGINS'] = '__all__'\n"
            "from pydantic.plugin._loader import get_plugins; print(repr(tuple(get_plugins())))")
    real = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    code = ("import runpy, sys; sys.argv = ['workloads', '--help']\n"
            "try:\n    runpy.run_module('workloads', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "from pydantic.plugin._loader import get_plugins; print(repr(tuple(get_plugins())))")
    ours = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert real == "()" and ours.stdout.strip().splitlines()[-1] == real
