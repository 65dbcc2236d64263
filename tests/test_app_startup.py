"""app.py's start-up work (docs/performance.md): the objects its imports make (the CDK's classes, about 250,000) are
never scanned by the garbage collector, which main() then leaves off for the build."""

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


def test_the_app_runs_without_jsii_type_checks_and_the_tests_keep_them():
    """`python app.py` (main(one_shot=True)) turns the garbage collector off for the build, and jsii's per-argument
    type checks as `python -O` would (docs/performance.md); a caller that goes on after main() (the tests run it
    in-process) keeps both, so a construct given the wrong type still fails in the tests."""
    code = ("import app\nfrom jsii._type_checking import check_type\n"
            "def stop(*args, **kwargs):\n    raise LookupError('stop before synthesis')\n"
            "app.read_context = stop\n"
            "try:\n    app.main(one_shot=True)\nexcept LookupError:\n    pass\n"
            "import gc\nassert not gc.isenabled(), 'the collector runs during the build'\n"
            "check_type(argname='argument x', value=1, expected_type=str)\nprint('unchecked')")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.splitlines()[-1] == "unchecked", run.stderr[-2000:]
    # A caller that goes on after main() (tests run it in-process) keeps the checks and the collector.
    kept = ("import app\nfrom jsii._type_checking import check_type\n"
            "def stop(*args, **kwargs):\n    raise LookupError('stop before synthesis')\n"
            "app.read_context = stop\n"
            "try:\n    app.main()\nexcept LookupError:\n    pass\n"
            "import gc\nassert gc.isenabled(), 'the collector is off after main()'\n"
            "try:\n    check_type(argname='argument x', value=1, expected_type=str)\nexcept TypeError:\n"
            "    print('checked')\n")
    run = subprocess.run([sys.executable, "-c", kept], cwd=ROOT, capture_output=True, text=True)
    assert run.stdout.strip() == "checked", "jsii's type checks are off after main(): " + run.stderr[-2000:]
