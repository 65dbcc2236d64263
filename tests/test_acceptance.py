"""After deploy (issue 35): the acceptance jobs, the node health check, HyperPod's auto-resume and `plan --calibrate`,
run as a cluster runs them. The scripts run in a sandbox with stubbed binaries (`mpirun`/`all_reduce_perf`,
`nccom-test`, `neuron-ls`, `nvidia-smi`, `dcgmi`, `scontrol`, `srun`) that print passing or failing output; the command
lines are the synthesized TrainStack's outputs, so what the stack prints is what is tested."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from constructs_lib.node_bootstrap import HEALTH_CONF, HEALTH_SCRIPT, SLURMD_DROPIN, UNHEALTHY, Health, node_script
from workloads import load, plan
from workloads.planning.acceptance import MIN_FRACTION, acceptance_script, expected_busbw_gbs
from workloads.catalog import devices, load_catalog, load_utilisation
from workloads.commands.cli import main as cli
from workloads.planning.train_commands import EXAMPLES_ON_NODE
from workloads.planning.estimates import peak_tflops

from .conftest import ROOT, VARIANTS
from .test_node_boot_contract import LUSTRE, STUBS as BOOT_STUBS
from .test_sbatch_scripts import CLUSTERS

EXAMPLES = ROOT / "examples" / "slurm"
FIXTURES = Path(__file__).parent / "fixtures" / "calibration"


def _nccl_rows(busbw: float) -> str:
    """all_reduce_perf's table (nccl-tests 2.x columns: size count type redop root time algbw busbw #wrong, twice)."""
    rows = ["#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"]
    for size, bw in ((8, 0.0), (1 << 20, busbw / 10), (1 << 31, busbw)):
        rows.append(f"  {size:>12} {size // 4:>12}     float     sum      -1   100.0   1.00 {bw:7.2f}      0   100.0   "
                    f"1.00 {bw:7.2f}      0")
    return "\n".join(rows + [f"# Avg bus bandwidth    : {busbw / 3:.4f}"])


def _nccom_rows(busbw: float) -> str:
    """nccom-test's table (its user guide: size(B) count(elems) type time(us) algbw(GB/s) busbw(GB/s))."""
    rows = ["     size(B)    count(elems)     type    time(us)    algbw(GB/s)    busbw(GB/s)"]
    for size, bw in ((8, 0.0), (1 << 20, busbw / 10), (1 << 30, busbw)):
        rows.append(f"  {size:>10} {size // 4:>12}     fp32       100       1.00   {bw:10.2f}")
    return "\n".join(rows + [f"Avg bus bandwidth:      {busbw / 3:.4f}GB/s"])


_LOG = """import json, os, sys
with open(os.environ["STUB_LOG"], "a") as log:
    log.write(json.dumps({"cmd": os.path.basename(sys.argv[0]), "argv": sys.argv[1:], "env": {k: v for k, v in os.environ.items() if k.startswith(("NCCL", "FI_", "NEURON", "LD_"))}}) + "\\n")
"""
STUBS = {
    "nvidia-smi": _LOG + """
if os.environ.get("STUB_NVSMI_FAIL"):
    print("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"); sys.exit(9)
print("\\n".join(f"GPU {i}: stub (UUID: GPU-{i})" for i in range(int(os.environ["STUB_DEVICES"]))))
""",
    "neuron-ls": _LOG + """
print(json.dumps([{"neuron_device": i, "nc_count": int(os.environ["STUB_CORES"])} for i in range(int(os.environ["STUB_DEVICES"]))]))
""",
    "dcgmi": _LOG + """
fail = os.environ.get("STUB_DCGM_FAIL")
print("| Diagnostic | Result |\\n| Memory | " + ("Fail - GPU 3: uncorrectable ECC" if fail else "Pass") + " |")
sys.exit(226 if fail else 0)
""",
    "nccom-test": _LOG + """
print(open(os.environ["STUB_OUTPUT"] + ".nccom").read())
""",
    "mpirun": _LOG + """
print(open(os.environ["STUB_OUTPUT"] + ".nccl").read())
""",
    "all_reduce_perf": _LOG,
    "srun": _LOG + """
import subprocess
words = sys.argv[1:]
while words and words[0].startswith("-"):
    words.pop(0)
sys.exit(subprocess.run(words).returncode)
""",
    "scontrol": _LOG + """
if sys.argv[1:3] == ["show", "hostnames"]:
    print("\\n".join(f"node-{i}" for i in range(1, int(os.environ["SLURM_JOB_NUM_NODES"]) + 1)))
""",
}


def _sandbox(tmp: Path, *, itype, nodes: int, **stub_env: str) -> dict[str, str]:
    """Stubs on PATH; the collective tests print the tables for STUB_BUSBW GB/s at the largest message."""
    busbw = float(stub_env.get("STUB_BUSBW", "1"))
    (tmp / "collective.nccl").write_text(_nccl_rows(busbw))
    (tmp / "collective.nccom").write_text(_nccom_rows(busbw))
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in STUBS.items():
        (bin_dir / name).write_text(f"#!{sys.executable}\n{body}")
        (bin_dir / name).chmod(0o755)
    per_node, _ = devices(itype)
    chips = itype.accelerator.count
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "STUB_LOG": str(tmp / "calls.jsonl"), "STUB_OUTPUT": str(tmp / "collective"),
           "EXAMPLES_DIR": str(EXAMPLES), "SLURM_JOB_ID": "7", "SLURM_JOB_NAME": "acceptance",
           "SLURM_JOB_NUM_NODES": str(nodes), "SLURM_JOB_NODELIST": f"node-[1-{nodes}]",
           "ALL_REDUCE_PERF": str(bin_dir / "all_reduce_perf"), "MPIRUN": str(bin_dir / "mpirun"),
           "STUB_DEVICES": str(chips if itype.accelerator.kind == "trainium" else per_node),
           "STUB_CORES": str(per_node // chips)}
    return {**env, **stub_env}


def _calls(tmp: Path) -> list[dict]:
    path = tmp / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _acceptance_line(synth, variant: str) -> str:
    return synth(*VARIANTS[variant]).templates["TrainStack"]["Outputs"]["Acceptance"]["Value"]


def _run_line(line: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """The Acceptance output as sbatch would run it: its script (from the repository) with its arguments."""
    words = shlex.split(line.removeprefix("cd /fsx && "))
    assert words[0] == "sbatch"
    at = next(i for i, w in enumerate(words) if w.startswith(EXAMPLES_ON_NODE))
    script = words[at].replace(EXAMPLES_ON_NODE, str(EXAMPLES))
    return subprocess.run(["bash", script, *words[at + 1:]], env=env, cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("variant", CLUSTERS)
@pytest.mark.parametrize("healthy", [True, False], ids=["line-rate", "fallen-back"])
def test_the_acceptance_output_runs_on_every_node_and_judges_the_bus_bandwidth(variant, healthy, synth, tmp_path):
    t = plan(load(*VARIANTS[variant])).training
    itype = load_catalog().get(t.instance_type)
    line = _acceptance_line(synth, variant)
    expected = expected_busbw_gbs(itype)
    assert f"--nodes={t.instance_count}" in line and acceptance_script(t.accelerator_kind) in line
    assert f"--expected-gbs {expected:g}" in line and f"--min-fraction {MIN_FRACTION:g}" in line
    measured = expected * (0.8 if healthy else MIN_FRACTION / 2)  # a TCP fall back lands far below the line rate
    done = _run_line(line, _sandbox(tmp_path, itype=itype, nodes=t.instance_count, STUB_BUSBW=str(measured)), tmp_path)
    verdict = done.stdout.strip().splitlines()[-1]
    assert f"measured {measured:.1f} GB/s, expected up to {expected:.1f} GB/s for {itype.name}" in verdict, done.stdout
    if t.instance_count < 2:
        assert done.returncode == 0 and "not judged" in verdict
    elif healthy:
        assert done.returncode == 0 and verdict.startswith("acceptance passed"), done.stdout + done.stderr
    else:
        assert done.returncode == 1 and verdict.startswith("acceptance FAILED") and "below the stated" in verdict
    calls = _calls(tmp_path)
    if t.accelerator_kind == "trainium":
        (test,) = [c for c in calls if c["cmd"] == "nccom-test"]
        per_node, _ = devices(itype)
        argv = test["argv"]
        assert argv[argv.index("-r") + 1] == str(per_node * t.instance_count) and "allr" in argv
        assert argv[argv.index("--hosts") + 1:] == [f"node-{i}" for i in range(1, t.instance_count + 1)]
        assert test["env"]["NEURON_RT_ROOT_COMM_ID"] == "node-1:44444" and test["env"]["FI_PROVIDER"] == "efa"
    else:
        (run,) = [c for c in calls if c["cmd"] == "mpirun"]
        # One rank per GPU, over EFA through the OFI plugin; across nodes NCCL may not fall back to sockets.
        assert run["argv"][run["argv"].index("-N") + 1] == str(devices(itype)[0])
        assert run["env"]["FI_PROVIDER"] == "efa" and "/opt/amazon/ofi-nccl/lib" in run["env"]["LD_LIBRARY_PATH"]
        assert run["env"].get("NCCL_NET") == ("AWS Libfabric" if t.instance_count > 1 else None)


def test_the_verdict_reads_the_largest_message_not_the_average():
    """Both tools' "Avg bus bandwidth" averages every size, latency-bound small ones included: a healthy run's average
    is far below the line rate, so the verdict reads the largest message's row."""
    sys.path.insert(0, str(EXAMPLES))
    from acceptance_verdict import largest_message_busbw

    assert largest_message_busbw(_nccl_rows(300.0), "nccl") == (1 << 31, 300.0)
    assert largest_message_busbw(_nccom_rows(47.09), "nccom") == (1 << 30, 47.09)
    assert largest_message_busbw("NCCL WARN no EFA device found\n", "nccl") is None


def test_an_acceptance_job_without_its_figures_stops_naming_them(tmp_path):
    itype = load_catalog().get("p5.48xlarge")
    done = subprocess.run(["bash", str(EXAMPLES / "acceptance-gpu.sbatch")], env=_sandbox(tmp_path, itype=itype, nodes=2),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--expected-gbs and --min-fraction are required" in done.stderr


# ------------------------------------------------------------------ the node's health check

def _health(tmp: Path, itype, *args: str, **stub_env: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    root = tmp / "root"
    (root / HEALTH_CONF.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
    kind = itype.accelerator.kind
    expected = itype.accelerator.count if kind == "trainium" else devices(itype)[0]
    (root / HEALTH_CONF.lstrip("/")).write_text(f"KIND={kind}\nDEVICES={expected}\n")
    env = {**_sandbox(tmp, itype=itype, nodes=1, STUB_BUSBW="40"), "ML_ESTATE_ROOT": str(root), **stub_env}
    done = subprocess.run(["bash", str(EXAMPLES / "node-health.sh"), *args], env=env, capture_output=True, text=True,
                          timeout=60)
    return done, _calls(tmp)


@pytest.mark.parametrize("itype_name", ["p5.48xlarge", "trn1.32xlarge"])
def test_a_healthy_node_passes_both_checks(itype_name, tmp_path):
    itype = load_catalog().get(itype_name)
    for args in ((), ("--full",)):
        done, calls = _health(tmp_path, itype, *args)
        assert done.returncode == 0 and "ml-estate health: ok" in done.stdout, done.stdout + done.stderr
    deep = {"nvidia-gpu": ("dcgmi", ["diag", "-r", "2"]), "trainium": ("nccom-test", ["-r", "2", "allr"])}
    cmd, argv = deep[itype.accelerator.kind]
    assert [c["argv"] for c in calls if c["cmd"] == cmd] == [argv]  # the deep check runs at boot (--full) only


@pytest.mark.parametrize("itype_name, stub_env, reason", [
    ("p5.48xlarge", {"STUB_DEVICES": "7"}, "nvidia-smi sees 7 of 8 GPUs"),
    ("p5.48xlarge", {"STUB_NVSMI_FAIL": "1"}, "nvidia-smi failed"),
    ("trn1.32xlarge", {"STUB_DEVICES": "15"}, "neuron-ls sees 15 of 16 Neuron devices"),
])
def test_as_the_prolog_a_failing_node_drains_itself_with_the_reason(itype_name, stub_env, reason, tmp_path):
    """Slurm runs the Prolog with the job's and node's names in the environment; a failing check drains the node
    with the reason (Slurm itself drains a node whose Prolog fails and requeues the job)."""
    itype = load_catalog().get(itype_name)
    done, calls = _health(tmp_path, itype, SLURMD_NODENAME="node-3", **stub_env)
    assert done.returncode == 1 and reason in done.stdout.strip().splitlines()[-1], done.stdout
    (drain,) = [c["argv"] for c in calls if c["cmd"] == "scontrol"]
    assert drain[:3] == ["update", "NodeName=node-3", "State=DRAIN"] and reason in drain[3]


def test_a_failing_gpu_diagnostic_at_boot_keeps_slurmd_off_and_says_why(tmp_path):
    itype = load_catalog().get("p5.48xlarge")
    done, _ = _health(tmp_path, itype, "--full", STUB_DCGM_FAIL="1")
    assert done.returncode == 1 and "dcgmi diag -r 2 failed" in done.stdout and "uncorrectable ECC" in done.stdout


@pytest.mark.parametrize("healthy", [True, False])
def test_the_node_boot_runs_the_full_check_and_gates_slurmd_on_it(healthy, tmp_path):
    """The generated user data in the boot sandbox (tests/test_node_boot_contract.py's stubs), the shipped health
    script at its place under the root: a node whose check fails records why and slurmd's drop-in refuses to start."""
    script = node_script(accelerator_kind="nvidia-gpu", mounts=LUSTRE, efa=True, health=Health("nvidia-gpu", 8))
    root, state = tmp_path / "root", tmp_path / "state"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "fstab").write_text("")
    (root / HEALTH_SCRIPT.lstrip("/")).parent.mkdir(parents=True)
    (root / HEALTH_SCRIPT.lstrip("/")).write_text((EXAMPLES / "node-health.sh").read_text())
    state.mkdir()
    (state / "mount-failures").write_text("0")
    env = _sandbox(tmp_path, itype=load_catalog().get("p5.48xlarge"), nodes=1, STUB_BUSBW="1")
    for name, body in BOOT_STUBS.items():
        (tmp_path / "bin" / name).write_text(body + "\n")
        (tmp_path / "bin" / name).chmod(0o755)
    env.update(ML_ESTATE_ROOT=str(root), STATE=str(state), **({} if healthy else {"STUB_DCGM_FAIL": "1"}))
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (root / HEALTH_CONF.lstrip("/")).read_text() == "KIND=nvidia-gpu\nDEVICES=8\n"
    dropin = (root / SLURMD_DROPIN.lstrip("/")).read_text()
    assert f"ExecStartPre=/usr/bin/test ! -e {UNHEALTHY}" in dropin
    gate = subprocess.run(["test", "!", "-e", str(root / UNHEALTHY.lstrip("/"))])
    assert (gate.returncode == 0) == healthy
    if not healthy:
        assert "dcgmi diag -r 2 failed" in (root / UNHEALTHY.lstrip("/")).read_text()
        assert "slurmd will not start" in done.stderr


def test_pcs_clusters_run_the_health_check_as_their_prolog_and_the_login_node_skips_it(synth):
    """Prolog is among the cluster custom settings PCS supports (HealthCheckProgram is not): the compute nodes' user
    data writes the plan's devices for it, the login node's does not (it has no accelerators)."""
    import base64

    for variant in CLUSTERS:
        if plan(load(*VARIANTS[variant])).training.orchestrator != "slurm":
            continue
        resources = synth(*VARIANTS[variant]).templates["TrainStack"]["Resources"]
        (cluster,) = [r for r in resources.values() if r["Type"] == "AWS::PCS::Cluster"]
        settings = cluster["Properties"]["SlurmConfiguration"]["SlurmCustomSettings"]
        assert settings == [{"ParameterName": "Prolog", "ParameterValue": HEALTH_SCRIPT}]
        templates = {k: r for k, r in resources.items() if r["Type"] == "AWS::EC2::LaunchTemplate"}

        def user_data(name: str) -> str:
            (data,) = [r["Properties"]["LaunchTemplateData"]["UserData"] for k, r in templates.items() if name in k]
            return json.dumps(data)
        assert HEALTH_CONF in user_data("Compute") and HEALTH_CONF not in user_data("Login")


# ------------------------------------------------------------------ jobs that survive a node failure

def test_hyperpod_submits_with_auto_resume_and_pcs_with_requeue(synth):
    """HyperPod's auto-resume (`srun --auto-resume=1`) replaces a failed node and runs the step again; PCS has no such
    flag, and the training scripts' `#SBATCH --requeue` puts the job back in the queue. Either way train.py resumes
    from `latest` (tests/test_trainer.py kills a rank and shows it)."""
    seen = set()
    for variant in CLUSTERS:
        t = plan(load(*VARIANTS[variant])).training
        submit = synth(*VARIANTS[variant]).templates["TrainStack"]["Outputs"]["Submit"]["Value"]
        train = submit.split("&& ", 2)[2]
        assert train.startswith("AUTO_RESUME=1 sbatch ") == (t.orchestrator == "hyperpod"), submit
        seen.add(t.orchestrator)
    assert seen == {"slurm", "hyperpod"}
    for script in ("train-gpu.sbatch", "train-trainium.sbatch"):
        text = (EXAMPLES / script).read_text()
        assert "#SBATCH --requeue" in text and 'RESUME=(--auto-resume=1)' in text and 'srun "${RESUME[@]}" torchrun' in text


# ------------------------------------------------------------------ plan --calibrate

def test_plan_calibrate_shows_the_measured_speed_beside_the_plan_and_recomputes_the_run(capsys):
    """The fixture is what train.py --calibrate-output wrote on two CPU ranks: the CLI shows it beside the planned
    range, says it is not the plan's layout, and recomputes the run's time and cost from the measured rate."""
    fixture = FIXTURES / "cpu-two-ranks.json"
    assert cli(["plan", "intermediate", "--calibrate", str(fixture), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["calibration"]
    p = plan(load("intermediate")).training
    result = json.loads(fixture.read_text())
    # a 144k-parameter model carries over as its MFU (over the plan's peak), not as tokens/s
    parameters = p.estimate.flops / 6 / (p.estimate.tokens_billion * 1e9)
    assert out["tokens_s"] == pytest.approx(out["mfu"] * (peak_tflops(load_catalog().get(p.instance_type), p.precision,
                                                                      load_utilisation()) or 0) * 1e12
                                            * p.instance_count / (6 * parameters))
    assert out["hours"] == pytest.approx(p.estimate.tokens_billion * 1e9 / out["tokens_s"] / 3600)
    assert out["usd_total"] == pytest.approx(out["hours"] * p.estimate.usd_per_hour)
    assert tuple(out["planned_range"]) == p.estimate.utilisation_range
    assert any("CPU ranks" in w for w in out["warnings"]) and any("ranks" in w for w in out["warnings"])
    assert cli(["plan", "intermediate", "--calibrate", str(fixture)]) == 0
    text = capsys.readouterr().out
    assert "Calibration (measured)" in text and "run at the measured rate" in text and "MFU measured" in text


H200 = FIXTURES / "h200-2026-11-28"


def test_one_gpus_measurement_scales_per_rank_not_per_node():
    """A result of the plan's own model on 1 rank of 1 node speaks for 1/8 of a node: scaled by nodes it would say
    the plan's 128 ranks run at 16 ranks' speed."""
    from workloads.planning.calibration import calibrate

    t = plan(load("huge")).training
    parameters = t.estimate.flops / 6 / (t.estimate.tokens_billion * 1e9)
    c = calibrate(t, {"tokens_per_s": 1000.0, "ranks": 1, "nodes": 1, "parameters": parameters})
    assert t.parallelism.ranks == 128 and c.tokens_s == pytest.approx(128_000)
    assert any("1 ranks (1 node(s)), the plan's layout has 128" in w for w in c.warnings)


@pytest.mark.parametrize("name", ["bf16-eager", "bf16-compiled", "fp8-compiled"])
def test_the_h200_measurements_carry_over_as_mfu_on_the_plans_basis(name):
    """tools/gpu_calibration.sh on one H200 (2026-11-28): a 2.8B model of 8B's layer shape. Its MFU is over the dense
    peak of the plan's precision (fp8's for an fp8 plan: half the trainer's bf16-peak figure), and a plan of another
    model or device is recomputed at that MFU, saying so."""
    from workloads.planning.calibration import calibrate

    result = json.loads((H200 / f"{name}.json").read_text())
    assert result["device_name"] == "NVIDIA H200" and result["ranks"] == 1 and result["parameters"] > 2e9
    own = 6 * result["parameters"] * result["tokens_per_s"] / (result["peak_tflops_per_rank"] * 1e12)
    assert result["mfu"] == pytest.approx(own)
    for workload, overrides, device_warning in (("huge", {}, True),  # B200: the MFU is the H200's own
                                               ("huge", {"training": {"instance_type": "p5en.48xlarge"}}, False)):
        t = plan(load(workload, overrides)).training
        assert t.precision == "fp8"
        c = calibrate(t, result)
        assert c.mfu == pytest.approx(own / 2, rel=2e-3)  # the fp8 basis: twice the bf16 peak on Hopper and Blackwell
        assert any("2.8B-parameter model" in w for w in c.warnings)
        assert any("measured on NVIDIA H200" in w for w in c.warnings) is device_warning
        parameters = t.estimate.flops / 6 / (t.estimate.tokens_billion * 1e9)
        peak = peak_tflops(load_catalog().get(t.instance_type), "fp8", load_utilisation())
        assert c.tokens_s == pytest.approx(c.mfu * peak * 1e12 * t.instance_count / (6 * parameters))
        assert c.hours == pytest.approx(t.estimate.tokens_billion * 1e9 / c.tokens_s / 3600)
        assert any("measured in bf16" in w for w in c.warnings) is name.startswith("bf16")


def test_a_result_that_meets_the_plan_is_within_its_range():
    from workloads.planning.calibration import calibrate

    from workloads.catalog import load_utilisation
    from workloads.planning.estimates import peak_tflops

    t = plan(load("huge")).training
    itype = load_catalog().get(t.instance_type)
    parameters = t.estimate.flops / 6 / (t.estimate.tokens_billion * 1e9)
    # the plan's MFU is over the dense peak of its precision (fp8's on B200: issue 42), and so is the measured one
    peak = peak_tflops(itype, t.precision, load_utilisation())
    assert t.precision == "fp8" and peak == 2 * itype.peak_tflops
    # a run at the plan's hours (its compute and the communication it cannot hide)
    tokens_s = t.estimate.tokens_billion * 1e9 / (t.estimate.hours * 3600)
    c = calibrate(t, {"tokens_per_s": tokens_s, "ranks": t.parallelism.ranks, "nodes": t.instance_count,
                      "parameters": parameters})
    assert c.verdict == "within the planned range" and not c.warnings
    assert c.hours == pytest.approx(t.estimate.hours, rel=1e-6)


@pytest.mark.parametrize("body, why", [("not json", "cannot be read"), ('{"tokens_per_s": 5}', "missing ranks")])
def test_a_bad_result_file_is_refused_naming_the_flag(body, why, tmp_path, capsys):
    path = tmp_path / "result.json"
    path.write_text(body)
    assert cli(["plan", "intermediate", "--calibrate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --calibrate = ") and why in err and "Traceback" not in err


@pytest.mark.parametrize("result, field", [
    # the new user's: 1.5 M tokens/s of a 70B model on 16 nodes is above 100% MFU on any recorded type
    ({"tokens_per_s": 1500000, "ranks": 128, "nodes": 16, "parameters": 70000000000, "mfu": 0.35},
     "--calibrate tokens_per_s = 1500000"),
    # an mfu its own figures do not give (6 x 1e9 x 1e4 / (100e12 x 8) = 7.5%)
    ({"tokens_per_s": 10000, "ranks": 8, "nodes": 1, "parameters": 1000000000, "mfu": 0.5,
      "peak_tflops_per_rank": 100}, "--calibrate mfu = 0.5")])
def test_an_impossible_calibration_result_is_refused_naming_the_field_and_value(result, field, tmp_path, capsys):
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result))
    assert cli(["plan", "huge", "--calibrate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {field}: ") and "Traceback" not in err
