"""Node boot contract: what runs on a node or a bake instance must run there. A failed image bake costs
the user 30-45 minutes, a node that cannot mount /fsx a failed job, so every script is linted with
shellcheck and every bake step is either required and checked, or allowed to fail."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from constructs_lib.node_bootstrap import (ENV_ON_NODE, LAYOUT_ON_NODE, MOUNT_ATTEMPTS, MOUNT_BACKOFF_S, SLURMD_DROPIN,
                                            Mounts, node_script)
from constructs_lib.node_image import COMPONENT_MAX_CHARS, bake_steps, component_documents, framework_script
from workloads.catalog import load_software

from .test_node_locks import installs
from .conftest import ROOT

KINDS = load_software().stacks  # every pinned stack the node image can bake
SHELLCHECK = shutil.which("shellcheck") or str(ROOT / ".venv" / "bin" / "shellcheck")


def shellcheck(script: str) -> str:
    """shellcheck's findings (warnings and errors) for a bash script, '' when clean."""
    done = subprocess.run([SHELLCHECK, "--shell=bash", "--severity=warning", "--format=gcc", "-"], input=script,
                          capture_output=True, text=True, check=False)
    return done.stdout.strip()


def test_shellcheck_is_live():
    assert "SC2045" in shellcheck('#!/bin/bash\nfor f in $(ls); do echo "$f"; done\n')
    assert shellcheck('#!/bin/bash\necho "ok"\n') == ""


@pytest.mark.parametrize("kind", KINDS, ids=lambda s: s.device)
def test_every_bake_step_is_required_and_checked_or_allowed_to_fail(kind):
    documents = component_documents(software=kind, region="us-west-2")
    assert all(len(d) <= COMPONENT_MAX_CHARS for d in documents)
    entries = [e for d in documents for e in yaml.safe_load(d)["phases"][0]["steps"]]
    steps = {s.name: s for s in bake_steps(software=kind, region="us-west-2")}
    assert [e["name"] for e in entries] == list(steps), "every step, once, in order"
    for entry in entries:
        if entry["action"] != "ExecuteBash":
            continue
        step, script = steps[entry["name"]], entry["inputs"]["commands"][0]
        assert script.startswith("set -euxo pipefail"), entry["name"]
        if step.check is None:
            assert entry.get("onFailure") == "Continue", f"{step.name}: optional steps may fail"
        else:
            assert "onFailure" not in entry, f"{step.name}: a required step aborts the bake"
            assert script.rstrip().endswith(step.check), f"{step.name}: the check runs last"


@pytest.mark.parametrize("kind", KINDS, ids=lambda s: s.device)
def test_bake_scripts_pass_shellcheck(kind):
    for step in bake_steps(software=kind, region="us-west-2"):
        findings = shellcheck("#!/bin/bash\n" + step.commands() + "\n")
        assert not findings, f"{step.name}:\n{findings}"


@pytest.mark.parametrize("kind", KINDS, ids=lambda s: s.device)
def test_bake_installs_what_it_then_uses(kind):
    """`python3 -m venv` needs python3-venv (the DLAMI's python3 has no ensurepip); apt waits for the dpkg lock."""
    script = "\n".join(s.commands() for s in bake_steps(software=kind, region="us-west-2"))
    venv_at = script.index("python3 -m venv")
    assert re.search(r"install -y[^\n]*\bpython3-venv\b", script[:venv_at])
    for line in script.splitlines():
        if re.search(r"\bapt-get\b.*\b(install|update)\b", line):
            assert "DPkg::Lock::Timeout" in line, line
    assert "pip install --upgrade pip" not in script


def test_fsx_mount_waits_for_the_network_that_ubuntu_24_has():
    script = node_script(accelerator_kind="nvidia-gpu",
                         mounts=Mounts(lustre_dns="fs-1.fsx.us-west-2.amazonaws.com", lustre_mount_name="abcd",
                                       home_dns="fs-2.efs.us-west-2.amazonaws.com"))
    fstab = next(line for line in script.splitlines() if " /fsx lustre " in line)
    assert "network.service" not in script  # Ubuntu 24.04 has no such unit: the mount never starts
    assert "x-systemd.requires=network-online.target" in fstab and "_netdev" in fstab
    assert not shellcheck(script), shellcheck(script)


@pytest.mark.parametrize("path", sorted(str(p.relative_to(ROOT)) for p in [
    *(ROOT / "lifecycle" / "hyperpod").glob("*.sh"), *(ROOT / "examples" / "slurm").glob("*.sbatch")]))
def test_shipped_scripts_pass_shellcheck(path):
    findings = shellcheck((ROOT / path).read_text())
    assert not findings, findings


@pytest.mark.parametrize("kind", KINDS, ids=lambda s: s.device)
def test_bake_installs_the_pinned_stack_and_checks_its_torch(kind):
    """Every package the stack names is pinned (== or a release-series glob), installed from its indexes, and
    the bake fails unless the pinned torch imports: a bake never picks up an unknown stack."""
    steps = {s.name: s for s in bake_steps(software=kind, region="us-west-2")}
    install = steps["InstallFramework"]
    assert kind.pip and all("==" in p for p in kind.pip)
    for package in kind.pip:
        assert installs(install.script, kind, package), package
    for url in kind.index_urls:
        assert f"--extra-index-url {url}" in install.script
    assert f'startswith("{kind.torch}.")' in install.check
    if kind.neuron_release:  # TorchNeuron, or the XLA path's torch_neuronx and torch_xla
        assert "torch_neuronx" in install.check and ("torch_xla" in install.check) == (kind.device == "xla")
    else:  # GPU nodes must have the AWS OFI NCCL plugin the DLAMI ships, or the bake fails
        assert "libnccl-net" in steps["CheckOfiNcclPlugin"].check


def test_gpu_nodes_load_the_ofi_nccl_plugin_and_refuse_a_tcp_fallback():
    efa = node_script(accelerator_kind="nvidia-gpu", mounts=Mounts(), efa=True)
    assert "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu" in efa and "export NCCL_NET='AWS Libfabric'" in efa
    assert "export FI_PROVIDER=efa" in efa
    single = node_script(accelerator_kind="nvidia-gpu", mounts=Mounts(), efa=False)
    assert "NCCL_NET" not in single and "FI_PROVIDER" not in single  # no EFA: NCCL may use sockets
    sbatch = (ROOT / "examples" / "slurm" / "train-gpu.sbatch").read_text()
    assert "/opt/amazon/ofi-nccl/lib" in sbatch and 'NCCL_NET="AWS Libfabric"' in sbatch and "NCCL_DEBUG=INFO" in sbatch


@pytest.mark.parametrize("kind", KINDS, ids=lambda s: s.device)
def test_unbaked_nodes_install_the_same_stack_with_the_same_checks(kind):
    """HyperPod's nodes run framework_script: the bake's own framework steps, each check included, and on GPUs a
    check that torch reaches the driver (HyperPod's AMI brings its own driver)."""
    script = framework_script(kind)
    steps = {s.name: s for s in bake_steps(software=kind, region="us-west-2")}
    for name in ("InstallFramework", "CheckOfiNcclPlugin"):
        if name in steps:
            assert steps[name].commands() in script
    assert ("torch.cuda.is_available()" in script) == (kind.device == "cuda")
    assert not shellcheck(script), shellcheck(script)


# ------------------------------------------------------------------ the node's user data, run in a sandbox

LUSTRE = Mounts(lustre_dns="fs-1.fsx.us-west-2.amazonaws.com", lustre_mount_name="abcd")
LAYOUT = '{"tensor_parallel": 8, "pipeline_parallel": 1}'
STUBS = {
    # mount succeeds once $STATE/mount-failures attempts have failed (a number; "always" never succeeds)
    "mount": '''#!/bin/bash
echo "$*" >> "$STATE/mount.log"
n=$(wc -l < "$STATE/mount.log"); fails=$(cat "$STATE/mount-failures")
if [ "$fails" = always ] || [ "$n" -le "$fails" ]; then exit 32; fi
touch "$STATE/mounted$(echo "${!#}" | tr / _)"''',
    "mountpoint": '#!/bin/bash\ntest -e "$STATE/mounted$(echo "${!#}" | tr / _)"',
    "sleep": '#!/bin/bash\necho "$1" >> "$STATE/sleep.log"',
    "systemctl": '#!/bin/bash\necho "$*" >> "$STATE/systemctl.log"',
    "chown": "#!/bin/bash\ntrue",
}


def _boot(tmp_path, *, mount_failures: str) -> tuple[subprocess.CompletedProcess, dict]:
    """The generated user data with `mount`, `mountpoint`, `sleep`, `systemctl` stubbed and every path under a
    temporary root (ML_ESTATE_ROOT): what it writes, how often it mounts and waits."""
    script = node_script(accelerator_kind="trainium", mounts=LUSTRE, layout=LAYOUT, efa=True)
    assert 'R="${ML_ESTATE_ROOT:-}"' in script.splitlines()[2], "every path the script writes is under $R"
    root, state, stubs = tmp_path / "root", tmp_path / "state", tmp_path / "bin"
    for d in (root / "etc", state, stubs):
        d.mkdir(parents=True)
    (root / "etc" / "fstab").write_text("")
    (state / "mount-failures").write_text(mount_failures)
    for name, body in STUBS.items():
        (stubs / name).write_text(body + "\n")
        (stubs / name).chmod(0o755)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "ML_ESTATE_ROOT": str(root), "STATE": str(state)}
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60)

    def lines(name: str) -> list[str]:
        path = state / name
        return path.read_text().splitlines() if path.exists() else []
    seen = {"root": root, "env": env, "mounts": lines("mount.log"), "sleeps": [int(s) for s in lines("sleep.log")],
            "systemctl": lines("systemctl.log")}
    return run, seen


def _slurmd_would_start(seen: dict) -> bool:
    """Run the drop-in's ExecStartPre checks as systemd would before slurmd (paths under the sandbox root)."""
    dropin = seen["root"] / SLURMD_DROPIN.lstrip("/")
    checks = [line.split("=", 1)[1] for line in dropin.read_text().splitlines() if line.startswith("ExecStartPre=")]
    assert checks
    for check in checks:
        command = check.replace("/usr/bin/mountpoint", "mountpoint").replace(" /", f" {seen['root']}/")
        if subprocess.run(["bash", "-c", command], env=seen["env"]).returncode != 0:
            return False
    return True


def test_a_node_whose_fsx_never_mounts_still_gets_its_job_files_but_takes_no_jobs(tmp_path):
    run, seen = _boot(tmp_path, mount_failures="always")
    root = seen["root"]
    # What jobs read is written whatever the mount does.
    assert (root / LAYOUT_ON_NODE.lstrip("/")).read_text().strip() == LAYOUT
    assert "export FI_PROVIDER=efa" in (root / ENV_ON_NODE.lstrip("/")).read_text()
    # Bounded retries with growing waits.
    assert len(seen["mounts"]) == MOUNT_ATTEMPTS and all("-t lustre" in m for m in seen["mounts"])
    assert seen["sleeps"] == [n * n * MOUNT_BACKOFF_S for n in range(1, MOUNT_ATTEMPTS + 1)]
    # slurmd is kept from starting: the drop-in requires the mount, and systemd re-read it.
    dropin = (root / SLURMD_DROPIN.lstrip("/")).read_text()
    assert "RequiresMountsFor=/fsx" in dropin and "daemon-reload" in seen["systemctl"]
    assert not _slurmd_would_start(seen)
    assert "slurmd will not start" in run.stderr
    assert not (root / "fsx" / "datasets").exists()  # nothing written into the empty mount point


def test_a_slow_fsx_mount_is_retried_and_the_node_joins(tmp_path):
    run, seen = _boot(tmp_path, mount_failures="2")
    assert run.returncode == 0, run.stderr
    assert len(seen["mounts"]) == 3 and seen["sleeps"] == [MOUNT_BACKOFF_S, 4 * MOUNT_BACKOFF_S]
    assert (seen["root"] / "fsx" / "datasets").is_dir() and (seen["root"] / "fsx" / "checkpoints").is_dir()
    assert _slurmd_would_start(seen) and "slurmd will not start" not in run.stderr
    assert (seen["root"] / LAYOUT_ON_NODE.lstrip("/")).exists()
    assert "/fsx lustre" in (seen["root"] / "etc" / "fstab").read_text()
