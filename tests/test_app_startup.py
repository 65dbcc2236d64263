"""app.py's start-up work (docs/performance.md): the objects its imports make (the CDK's classes, about 250,000) are
never scanned by the garbage collector, and the collector is on again for the build."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import ROOT


def test_app_imports_are_left_out_of_garbage_collection():
    code = ("import gc, json, app\n"
            "print(json.dumps({'enabled': gc.isenabled(), 'frozen': gc.get_freeze_count(),"
            " 'collections': [s['collections'] for s in gc.get_stats()]}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    state = json.loads(out.splitlines()[-1])
    assert state["enabled"]
    # Python's own start-up collects a little before app.py runs; a full collection only happens over the CDK's imports.
    assert state["collections"][2] == 0, f"the collector scanned everything while app.py imported: {state}"
    assert state["frozen"] > 100_000, state["frozen"]
