"""Write the node venv's hash locks (workloads/catalog/node_locks.py) from the package indexes.

    python -m tools.lock_node_packages            # every stack whose indexes answer
    python -m tools.lock_node_packages cuda       # one stack, by its train.py --device

For each stack of workloads/catalog/software.yaml, pip resolves the stack's pins and the example trainer's packages
(example_pip) for the parent DLAMI's Python and glibc (node_platform), wheels only, without installing anything
(`pip install --dry-run --report`), from PyPI and the stack's own indexes and nowhere else (`--isolated`: this
machine's pip configuration, find-links and mirrors are ignored). The sha256 of each wheel is the one the index
publishes beside it; a wheel without one is refused. The lock records the date and the command.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from workloads.catalog import SoftwareStack, load_software
from workloads.catalog.node_locks import canonical, lock_path

PYPI = "https://pypi.org/simple"
# Old manylinux aliases pip still matches (PEP 600: manylinux1 = 2_5, manylinux2010 = 2_12, manylinux2014 = 2_17)
_LEGACY_TAGS = ("manylinux1", "manylinux2010", "manylinux2014")


def pip_command(stack: SoftwareStack, *, report: Path, target: Path) -> list[str]:
    """The resolver's command for `stack`: its node's Python and every manylinux tag its glibc runs."""
    glibc_minor = int(stack.node_glibc.split(".")[1])
    python = stack.node_python.replace(".", "")
    platforms = [f"manylinux_2_{m}_x86_64" for m in range(5, glibc_minor + 1)] + [f"{t}_x86_64" for t in _LEGACY_TAGS]
    indexes = ["--index-url", PYPI, *(arg for url in stack.index_urls for arg in ("--extra-index-url", url))]
    return [sys.executable, "-m", "pip", "--isolated", "install", "--dry-run", "--ignore-installed", "--quiet",
            "--report", str(report), "--target", str(target), "--only-binary=:all:", "--implementation", "cp",
            "--python-version", stack.node_python, "--abi", f"cp{python}", "--abi", "abi3", "--abi", "none",
            *(arg for p in platforms for arg in ("--platform", p)), *indexes,
            *stack.pip, *load_software().example_pip]


def lock_text(stack: SoftwareStack, report: dict, *, today: str) -> str:
    """The requirements file for pip's installation report: one `name==version` per wheel with its index sha256."""
    lines = [f"# {stack.name}",
             f"# The node venv's every wheel (CPython {stack.node_python}, glibc {stack.node_glibc}, x86_64), with the "
             "sha256 its index publishes,", f"# read {today} by `python -m tools.lock_node_packages {stack.device}`. "
             "Do not edit: change software.yaml and run it again."]
    for item in sorted(report["install"], key=lambda i: canonical(i["metadata"]["name"])):
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        info = item["download_info"]
        digest = (info.get("archive_info") or {}).get("hashes", {}).get("sha256")
        if not digest:
            raise SystemExit(f"{name}=={version}: the index publishes no sha256 for {info['url']}: not locked")
        lines += [f"{canonical(name)}=={version} \\", f"    --hash=sha256:{digest}",
                  f"    # {info['url'].rsplit('/', 1)[-1].split('#')[0]}"]
    return "\n".join(lines) + "\n"


def lock(stack: SoftwareStack) -> Path:
    with tempfile.TemporaryDirectory() as work:
        report = Path(work) / "report.json"
        run = subprocess.run(pip_command(stack, report=report, target=Path(work) / "target"),
                             capture_output=True, text=True, timeout=900)
        if run.returncode != 0:
            raise SystemExit(f"{stack.device}: pip could not resolve {' '.join(stack.pip)} from "
                             f"{', '.join([PYPI, *stack.index_urls])}:\n{run.stderr.strip()[-2000:]}")
        text = lock_text(stack, json.loads(report.read_text()), today=datetime.date.today().isoformat())
    path = lock_path(stack.device)
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def main(argv: list[str]) -> int:
    stacks = [s for s in load_software().stacks if not argv or s.device in argv]
    failed = []
    for stack in stacks:
        try:
            print(f"{stack.device}: wrote {lock(stack)}")
        except SystemExit as refused:
            print(refused, file=sys.stderr)
            failed.append(stack.device)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
