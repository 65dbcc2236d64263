"""The node venv installs from a checked-in hash lock (workloads/catalog/node_locks.py, tools/lock_node_packages.py):
every pin the catalog names is what the lock installs, every wheel has the sha256 its index published, and the bake
installs with --require-hashes --no-deps from exactly that file. A stack without a lock warns in the plan."""

from __future__ import annotations

import re
import subprocess

import pytest

from constructs_lib.node_image import ML_VENV, framework_script, install_framework
from tools.lock_node_packages import PYPI, lock_text, pip_command
from workloads import load, plan
from workloads.catalog import load_software
from workloads.catalog.node_locks import LOCKS, canonical, node_lock, parse

from .conftest import TRN1

STACKS = load_software().stacks
LOCKED = [s for s in STACKS if node_lock(s.device) is not None]


def test_the_cuda_stack_is_locked_and_every_lock_belongs_to_a_stack():
    assert "cuda" in [s.device for s in LOCKED]
    assert {p.stem for p in LOCKS.glob("*.txt")} <= {s.device for s in STACKS}


@pytest.mark.parametrize("stack", LOCKED, ids=lambda s: s.device)
def test_a_lock_installs_exactly_the_catalogs_pins_with_a_hash_for_every_wheel(stack):
    """A pin changed in software.yaml without running the tool again fails here, as does a wheel without a hash."""
    lock = node_lock(stack.device)
    for pin in (*stack.pip, *load_software().example_pip):
        assert lock.holds(pin), f"{pin} is not what catalog/locks/{stack.device}.txt installs: run the lock tool"
    assert lock.versions and set(lock.versions) == set(lock.hashes)
    assert all(digests and all(re.fullmatch(r"[0-9a-f]{64}", d) for d in digests) for digests in lock.hashes.values())
    assert stack.name in lock.text.splitlines()[0] and re.search(r"read \d{4}-\d\d-\d\d by", lock.text)
    # pip itself reads the file as a hash-checking requirements file
    from pip._internal.network.session import PipSession
    from pip._internal.req.req_file import parse_requirements
    parsed = list(parse_requirements(str(LOCKS / f"{stack.device}.txt"), session=PipSession()))
    assert len(parsed) == len(lock.versions)
    assert all(r.options and r.options.get("hashes", {}).get("sha256") for r in parsed)


def test_holds_reads_exact_and_wildcard_pins():
    lock = parse("torch-neuronx==2.14.3.0.1234 \\\n    --hash=sha256:" + "a" * 64 + "\nNumPy==2.2.6 \\\n"
                 "    --hash=sha256:" + "b" * 64 + "\n")
    assert lock.holds("torch_neuronx==2.14.3.0.*") and lock.holds("numpy==2.2.6")
    assert not lock.holds("numpy==2.2.7") and not lock.holds("torch-neuronx==2.14.4.0.*") and not lock.holds("nki==1")


def _run_install(stack, tmp_path) -> tuple[subprocess.CompletedProcess, list[str], str]:
    """InstallFramework's own shell, with apt-get and python3 -m venv stubbed: the venv's pip records its arguments
    and keeps the lock file it was given."""
    bin_, venv = tmp_path / "bin", tmp_path / "venv"
    bin_.mkdir()
    (bin_ / "apt-get").write_text("#!/bin/bash\n")
    (bin_ / "python3").write_text(
        f'#!/bin/bash\nmkdir -p {venv}/bin\ncat > {venv}/bin/pip <<\'EOF\'\n#!/bin/bash\necho "$*" >> {tmp_path}/pip.log\n'
        f'EOF\nchmod +x {venv}/bin/pip\n')
    for stub in bin_.iterdir():
        stub.chmod(0o755)
    script = install_framework(stack).commands().split("# check:")[0].replace(ML_VENV, str(venv))
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                         env={"PATH": f"{bin_}:/usr/bin:/bin"})
    calls = (tmp_path / "pip.log").read_text().splitlines() if (tmp_path / "pip.log").exists() else []
    written = (venv / "node-lock.txt").read_text() if (venv / "node-lock.txt").exists() else ""
    return run, calls, written


@pytest.mark.parametrize("stack", LOCKED, ids=lambda s: s.device)
def test_the_bake_installs_every_wheel_from_the_lock_by_hash(stack, tmp_path):
    run, calls, written = _run_install(stack, tmp_path)
    assert run.returncode == 0, run.stderr
    assert len(calls) == 1, calls  # one install, from the lock; no second, unhashed pip install
    args = calls[0].split()
    assert {"install", "--require-hashes", "--no-deps", "--only-binary=:all:"} <= set(args)
    assert args[args.index("-r") + 1].endswith("/node-lock.txt")
    assert not [a for a in args if "==" in a]  # nothing named outside the lock
    shipped = parse(written)
    assert shipped.versions == node_lock(stack.device).versions
    assert shipped.hashes == node_lock(stack.device).hashes


@pytest.mark.parametrize("stack", LOCKED, ids=lambda s: s.device)
def test_hyperpod_nodes_install_from_the_same_lock(stack):
    assert "--require-hashes" in framework_script(stack) and "node-lock.txt" in framework_script(stack)


@pytest.mark.parametrize("stack", [s for s in STACKS if node_lock(s.device) is None], ids=lambda s: s.device)
def test_an_unlocked_stack_says_so_in_its_bake(stack, tmp_path):
    run, calls, _ = _run_install(stack, tmp_path)
    assert run.returncode == 0 and "NOT hash-locked" in install_framework(stack).script
    assert not any("--require-hashes" in c for c in calls)


def _lock_warnings(name, overrides):
    return [f for f in plan(load(name, overrides)).findings if "without a hash lock" in f.message]


def test_the_plan_warns_where_the_node_packages_are_not_locked():
    trn1 = _lock_warnings("huge", TRN1)
    assert [f.level for f in trn1] == ["WARNING"] and "tools.lock_node_packages xla" in trn1[0].message
    assert _lock_warnings("huge", {"training.instance_type": "p5.48xlarge"}) == []


# ------------------------------------------------------------------ the tool, offline

def _report(*items):
    return {"install": [{"metadata": {"name": n, "version": v},
                         "download_info": {"url": f"https://files.example/{n}-{v}-py3-none-any.whl",
                                           **({"archive_info": {"hashes": {"sha256": h}}} if h else {})}}
                        for n, v, h in items]}


def test_the_tool_writes_one_hashed_requirement_per_wheel_and_refuses_a_wheel_without_a_hash():
    cuda = next(s for s in STACKS if s.device == "cuda")
    text = lock_text(cuda, _report(("Torch", "2.15.0", "c" * 64), ("numpy", "2.2.6", "d" * 64)), today="2026-11-28")
    lock = parse(text)
    assert lock.versions == {"numpy": "2.2.6", "torch": "2.15.0"}
    assert lock.hashes == {"numpy": ("d" * 64,), "torch": ("c" * 64,)}
    assert "read 2026-11-28" in text
    with pytest.raises(SystemExit, match="no sha256"):
        lock_text(cuda, _report(("torch", "2.15.0", None)), today="2026-11-28")


@pytest.mark.parametrize("stack", STACKS, ids=lambda s: s.device)
def test_the_tool_resolves_for_the_nodes_python_and_glibc_from_the_named_indexes_only(stack, tmp_path):
    args = pip_command(stack, report=tmp_path / "r.json", target=tmp_path / "t")
    assert "--isolated" in args and args[args.index("--index-url") + 1] == PYPI
    assert [args[i + 1] for i, a in enumerate(args) if a == "--extra-index-url"] == list(stack.index_urls)
    assert args[args.index("--python-version") + 1] == stack.node_python
    platforms = [args[i + 1] for i, a in enumerate(args) if a == "--platform"]
    glibc = int(stack.node_glibc.split(".")[1])
    assert f"manylinux_2_{glibc}_x86_64" in platforms and f"manylinux_2_{glibc + 1}_x86_64" not in platforms
    assert {canonical(p.split("==")[0]) for p in (*stack.pip, *load_software().example_pip)} <= {
        canonical(a.split("==")[0]) for a in args if "==" in a}


def installs(script: str, stack, pin: str) -> bool:
    """Whether a bake script installs `pin`: named as pinned, or by its locked exact version from the stack's lock."""
    lock = node_lock(stack.device)
    if lock is None:
        return f"'{pin}'" in script
    name = canonical(pin.split("==")[0])
    return lock.holds(pin) and f"\n{name}=={lock.versions[name]} \\\n" in script
