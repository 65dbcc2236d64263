"""The Slurm scripts run as the Submit output runs them: `sbatch`, `srun`, `torchrun`, `scontrol`, `nvidia-smi` and
`neuron-ls` are stubs on PATH that record what they were given, and bash runs the real scripts (the cluster's
Submit line from the TrainStack template, examples/slurm/*.sbatch, the plan's layout file). torchrun must receive
the plan's values: the node count, one process per accelerator device of the layout, the shutdown timeout (the
plan's checkpoint time, not torchrun's 30 s default) and the device; a script that reads a layout key the plan does
not write (a misspelling) fails here."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from workloads import load, plan
from workloads.catalog import load_catalog, load_software
from workloads.planning.run_length import TORCHRUN_DEFAULT_SHUTDOWN_S
from workloads.planning.train_commands import EXAMPLES_ON_NODE

from .conftest import ROOT, VARIANTS

EXAMPLES = ROOT / "examples" / "slurm"

def _clusters() -> list[str]:
    """One cluster variant per (orchestrator, script, device): each way the scripts run, once."""
    seen: dict[tuple, str] = {}
    for name, (w, o) in VARIANTS.items():
        t = plan(load(w, o)).training
        if t.orchestrator != "sagemaker-jobs":
            seen.setdefault((t.orchestrator, t.accelerator_kind, t.software.device), name)
    return list(seen.values())


CLUSTERS = _clusters()

# Each stub appends {"cmd", "argv", "env"} to $STUB_LOG. sbatch runs the script it is given (the node's examples
# folder is the repository's) with the environment Slurm gives a batch job; srun runs torchrun on this one "node"
# and only records other steps (prepare.py has no data here).
_RECORD = """import json, os, sys
with open(os.environ["STUB_LOG"], "a") as log:
    log.write(json.dumps({"cmd": os.path.basename(sys.argv[0]), "argv": sys.argv[1:], "env": dict(os.environ)}) + "\\n")
"""
STUBS = {
    "sbatch": _RECORD + """
import subprocess
args = sys.argv[1:]
at = next(i for i, a in enumerate(args) if not a.startswith("-"))
options = dict(a.removeprefix("--").split("=", 1) for a in args[:at] if "=" in a)
script = args[at].replace(os.environ["EXAMPLES_ON_NODE"], os.environ["EXAMPLES_HERE"])
with open(os.environ["STUB_LOG"]) as log:  # job ids 101, 102, ... in submission order
    jobs = 100 + sum(json.loads(line)["cmd"] == "sbatch" for line in log)
nodes = int(options["nodes"])
env = {**os.environ, "SLURM_JOB_ID": str(jobs), "SLURM_JOB_NAME": options.get("job-name", "job"),
       "SLURM_JOB_NUM_NODES": str(nodes), "SLURM_JOB_NODELIST": f"node-[1-{nodes}]", "SLURM_CPUS_ON_NODE": "8"}
done = subprocess.run(["bash", script, *args[at + 1:]], env=env, stdout=sys.stderr)
if done.returncode:
    sys.exit(done.returncode)
print(f"{jobs};cluster" if "--parsable" in args else f"Submitted batch job {jobs}")  # multi-cluster form
""",
    "srun": _RECORD + """
words = [a for a in sys.argv[1:]]
while words and words[0].startswith("-"):
    words.pop(0)
if words and words[0] == "torchrun":
    os.execvp("torchrun", words)
""",
    "torchrun": _RECORD,
    "scontrol": _RECORD + """
assert sys.argv[1:3] == ["show", "hostnames"], sys.argv
for i in range(1, int(os.environ["SLURM_JOB_NUM_NODES"]) + 1):  # a line a write, as a long list comes
    sys.stdout.write(f"node-{i}\\n")
    sys.stdout.flush()
""",
    "nvidia-smi": _RECORD + """
assert sys.argv[1:] == ["-L"], sys.argv
print("\\n".join(f"GPU {i}: stub (UUID: GPU-{i})" for i in range(int(os.environ["STUB_DEVICES"]))))
""",
    "neuron-ls": _RECORD + """
assert sys.argv[1:] == ["--json-output"], sys.argv
chips, cores = int(os.environ["STUB_CHIPS"]), int(os.environ["STUB_DEVICES"])
print(json.dumps([{"neuron_device": i, "nc_count": cores // chips} for i in range(chips)]))
""",
}


def _node(tmp: Path, *, layout: str, itype, device: str) -> dict[str, str]:
    """A cluster node's environment in `tmp`: the stubs first on PATH, the layout file, the node image's venv."""
    from workloads.catalog import devices

    bin_dir, venv = tmp / "bin", tmp / "ml-venv"
    bin_dir.mkdir()
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "activate").write_text("# the node image's virtualenv (a stub)\n")
    (venv / "DEVICE").write_text(device + "\n")  # what the Trainium image records for its stack
    for name, body in STUBS.items():
        (bin_dir / name).write_text(f"#!{sys.executable}\n{body}")
        (bin_dir / name).chmod(0o755)
    (tmp / "layout.json").write_text(layout)
    per_node, _ = devices(itype)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "TORCH", "CHECKPOINT_DIR", "DEVICE"))}
    return {**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}", "STUB_LOG": str(tmp / "calls.jsonl"),
            "ML_VENV": str(venv), "LAYOUT": str(tmp / "layout.json"), "EXAMPLES_ON_NODE": EXAMPLES_ON_NODE,
            "EXAMPLES_HERE": str(EXAMPLES), "STUB_DEVICES": str(per_node), "STUB_CHIPS": str(itype.accelerator.count)}


def _calls(tmp: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp / "calls.jsonl").read_text().splitlines()]


def _options(argv: list[str]) -> dict[str, str]:
    return dict(a.removeprefix("--").split("=", 1) for a in argv if a.startswith("--") and "=" in a)


def _run_submit(submit: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    # The Submit line starts with `cd /fsx`: here the test's own folder stands for the file system's root.
    assert submit.startswith("cd /fsx && ")
    return subprocess.run(["bash", "-c", submit.removeprefix("cd /fsx && ")], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("variant", CLUSTERS)
def test_the_submit_line_runs_the_scripts_and_torchrun_gets_the_plans_values(variant, synth, tmp_path):
    workload, overrides = VARIANTS[variant]
    t = plan(load(workload, overrides)).training
    spread, itype = t.parallelism, load_catalog().get(t.instance_type)
    device = load_software().for_type(itype).device
    submit = synth(workload, overrides).templates["TrainStack"]["Outputs"]["Submit"]["Value"]
    env = _node(tmp_path, layout=spread.as_json(), itype=itype, device=device)
    done = _run_submit(submit, env, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    calls = _calls(tmp_path)
    prepare, train = [c for c in calls if c["cmd"] == "sbatch"]
    script = "train-trainium.sbatch" if t.accelerator_kind == "trainium" else "train-gpu.sbatch"
    assert prepare["argv"][prepare["argv"].index(f"{EXAMPLES_ON_NODE}/prepare.sbatch") - 1] == f"--nodes={t.instance_count}"
    (prepare_step,) = [c for c in calls if c["cmd"] == "srun" and "torchrun" not in c["argv"]]
    words = shlex.split(submit.replace("$(", " ").replace(")", " "))
    start = words.index(f"{EXAMPLES_ON_NODE}/prepare.sbatch") + 1
    prepare_args = words[start:words.index("&&", start)]
    assert prepare_step["argv"] == ["--cpus-per-task=8", "python3", f"{EXAMPLES_ON_NODE}/prepare.py", *prepare_args]
    assert f"{EXAMPLES_ON_NODE}/{script}" in train["argv"]
    train_options = _options(train["argv"])
    assert train_options["dependency"] == "afterok:101"  # the prepare job's id, without its cluster name
    assert train_options["signal"] == f"TERM@{spread.signal_lead_s}"
    (torchrun,) = [c for c in calls if c["cmd"] == "torchrun"]
    options, argv = _options(torchrun["argv"]), torchrun["argv"]
    # The node count and one process per GPU or NeuronCore: the layout's ranks, all of them.
    assert int(options["nnodes"]) == t.instance_count and int(options["nproc_per_node"]) == spread.ranks_per_node
    assert int(options["nnodes"]) * int(options["nproc_per_node"]) == spread.ranks
    assert options["rdzv_endpoint"] == "node-1:29500" and options["rdzv_id"] == "102"  # the training job's id
    # The plan's stop budget reaches torchrun: its wait after SIGTERM is the checkpoint time, not the 30 s default.
    assert torchrun["env"]["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] == str(spread.shutdown_timeout_s)
    assert torchrun["env"]["CHECKPOINT_DIR"] == f"/fsx/checkpoints/{workload}-train"
    trained = argv[argv.index(f"{EXAMPLES_ON_NODE}/train.py") + 1:]
    assert trained[:4] == ["--device", "cuda" if t.accelerator_kind == "nvidia-gpu" else device,
                           "--layout", env["LAYOUT"]]
    passed = shlex.split(submit)[shlex.split(submit).index(f"{EXAMPLES_ON_NODE}/{script}") + 1:]
    assert trained[4:] == passed  # the Submit line's train.py arguments, unchanged


def test_each_script_runs_a_plan_whose_stop_budget_is_not_torchruns_default():
    """What makes the check above bite: for each script, a variant whose checkpoint needs minutes, so a script that
    lost the plan's value (a misspelt key read with a default) hands torchrun 30 s and fails it."""
    budgets: dict[str, int] = {}
    for name in CLUSTERS:
        t = plan(load(*VARIANTS[name])).training
        script = "train-trainium.sbatch" if t.accelerator_kind == "trainium" else "train-gpu.sbatch"
        budgets[script] = max(budgets.get(script, 0), t.parallelism.shutdown_timeout_s)
    assert set(budgets) == {"train-gpu.sbatch", "train-trainium.sbatch"}
    assert all(b > TORCHRUN_DEFAULT_SHUTDOWN_S for b in budgets.values()), budgets


@pytest.mark.parametrize("script", ["train-gpu.sbatch", "train-trainium.sbatch"])
def test_a_layout_without_the_shutdown_timeout_stops_the_job_before_torchrun(script, tmp_path):
    """A layout file that lacks a key the script reads (an older or foreign layout, or a misspelt read) ends the job
    at its start, naming the key, instead of running with torchrun's 30 s."""
    t = plan(load("huge", {"training.instance_type": "p5.48xlarge"} if script == "train-gpu.sbatch" else None)).training
    itype = load_catalog().get(t.instance_type)
    layout = {k: v for k, v in json.loads(t.parallelism.as_json()).items() if k != "shutdown_timeout_s"}
    env = _node(tmp_path, layout=json.dumps(layout), itype=itype, device="neuron")
    env.update(SLURM_JOB_ID="7", SLURM_JOB_NAME="train", SLURM_JOB_NUM_NODES="2", SLURM_JOB_NODELIST="node-[1-2]")
    done = subprocess.run(["bash", str(EXAMPLES / script)], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0 and "shutdown_timeout_s" in done.stderr, done.stderr[-2000:]
    assert not [c for c in _calls(tmp_path) if c["cmd"] == "torchrun"]


def test_every_sbatch_script_is_run_here():
    """A new script under examples/slurm is run by a test in this file (the acceptance jobs: tests/test_acceptance.py),
    or this fails."""
    covered = {"prepare.sbatch", "train-gpu.sbatch", "train-trainium.sbatch", "acceptance-gpu.sbatch",
               "acceptance-trainium.sbatch", "train-nxdt.sbatch"}
    assert {p.name for p in EXAMPLES.glob("*.sbatch")} == covered
    kinds = {plan(load(*VARIANTS[v])).training.accelerator_kind for v in CLUSTERS}
    assert {"nvidia-gpu", "trainium"} <= kinds  # both training scripts run above


def test_the_nxd_launcher_runs_nxd_training_with_the_plans_config_and_converts_its_checkpoint(tmp_path):
    """The 70B model on trn1 (NxD Training, issue 40): the Submit line's train-nxdt.sbatch writes the layout's NxD
    config and model config, converts the prepare step's shards, starts training_orchestrator.py with torchrun on every
    NeuronCore of every node, then NxD's converter with the plan's degrees and the export to the plan's directory."""
    import yaml

    from workloads.planning.train_commands import NXDT_SCRIPT, slurm_submit

    p = plan(load("huge", {"training.instance_type": "trn1.32xlarge"}))
    t, spread = p.training, p.training.parallelism
    itype = load_catalog().get(t.instance_type)
    env = _node(tmp_path, layout=spread.as_json(), itype=itype, device="xla")
    python = tmp_path / "bin" / "python3"  # the NxD venv's python: here this interpreter (yaml, json)
    python.symlink_to(sys.executable)
    checkpoints = tmp_path / "checkpoints" / "huge-train"
    (checkpoints / "checkpoints" / "huge-train--step=9-consumed_samples=9216.0.ckpt" / "model").mkdir(parents=True)
    env.update(NXDT_VENV=env["ML_VENV"], NXDT_EXAMPLES="/opt/nxdt/examples", CHECKPOINT_DIR=str(checkpoints))
    for name in ("lctl", "sudo"):  # FSx's client tool, and the sudo that runs it: recorded
        (tmp_path / "bin" / name).write_text(f"#!{sys.executable}\n{_RECORD}")
        (tmp_path / "bin" / name).chmod(0o755)
    (tmp_path / "bin" / "torchrun").write_text(f"#!{sys.executable}\n{_RECORD}" + (
        "import resource\nopen(os.environ['STUB_LOG'] + '.nofile', 'w').write("
        "str(resource.getrlimit(resource.RLIMIT_NOFILE)[0]))\n"))
    submit = slurm_submit(workload="huge", nodes=t.instance_count, accelerator_kind=t.accelerator_kind,
                          parallelism=spread)
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 1024), hard))  # a node's default: the script raises it
    try:
        done = _run_submit(submit, env, tmp_path)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert done.returncode == 0, done.stderr[-3000:]
    calls = _calls(tmp_path)
    # NxD's train_setup.sh: FSx's dirty cache capped, and as many open files as the node allows up to 65535.
    assert ["-n", "lctl", "set_param", "osc.*.max_dirty_mb=64"] in [c["argv"] for c in calls if c["cmd"] == "sudo"]
    want = 65535 if hard == resource.RLIM_INFINITY else min(65535, hard)
    assert int((tmp_path / "calls.jsonl.nofile").read_text()) == want
    train = [c for c in calls if c["cmd"] == "sbatch"][1]
    assert f"{EXAMPLES_ON_NODE}/{NXDT_SCRIPT}" in train["argv"]
    run = checkpoints / "nxdt"
    assert yaml.safe_load((run / "conf" / "nxdt.yaml").read_text()) == spread.nxdt["config"]
    assert json.loads((run / "config.json").read_text()) == spread.nxdt["model_config"]
    (torchrun,) = [c for c in calls if c["cmd"] == "torchrun"]
    options, argv = _options(torchrun["argv"]), torchrun["argv"]
    assert int(options["nnodes"]) * int(options["nproc_per_node"]) == spread.ranks
    assert torchrun["env"]["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] == str(spread.shutdown_timeout_s)
    at = argv.index("/opt/nxdt/examples/training_orchestrator.py")
    assert argv[at + 1:at + 3] == [f"--config-path={run}/conf", "--config-name=nxdt"]
    overrides = dict(a.split("=", 1) for a in argv[at + 3:])
    data = tokens_dir_of(submit)
    assert overrides == {"trainer.devices": str(spread.ranks_per_node), "trainer.num_nodes": str(t.instance_count),
                         "trainer.max_steps": str(spread.steps), "data.train_dir": f"{data}-nxdt"}
    steps = [c["argv"] for c in calls if c["cmd"] == "srun" and "torchrun" not in c["argv"]]
    convert, = [s for s in steps if any(a.endswith("checkpoint_converter.py") for a in s)]
    at = next(i for i, a in enumerate(convert) if a.endswith("checkpoint_converter.py"))
    assert convert[at + 1:at + 1 + len(spread.nxdt["convert"])] == spread.nxdt["convert"]
    assert convert[-6:] == ["--input_dir", f"{checkpoints}/checkpoints/huge-train--step=9-consumed_samples=9216.0.ckpt/model",
                            "--output_dir", f"{run}/hf", "--config", f"{run}/config.json"]
    export, = [s for s in steps if any(a.endswith("nxdt_export.py") for a in s)]
    assert export[export.index("--output") + 1] == spread.export_dir
    parts, index = [s for s in steps if any(a.endswith("nxdt_data.py") for a in s)]
    assert parts[:2] == [f"--ntasks={t.instance_count}", "--ntasks-per-node=1"]  # every node converts its share
    assert index[-3:] == ["--parts", str(t.instance_count), "--finish"] and index[:2] == ["--nodes=1", "--ntasks=1"]
    for convert_data in (parts, index):
        assert convert_data[convert_data.index("--sequence") + 1] == str(spread.sequence)
        assert convert_data[convert_data.index("--vocab") + 1] == str(spread.nxdt["model_config"]["vocab_size"])
    assert steps.index(index) == steps.index(parts) + 1
    assert torchrun["env"]["HF_DATASETS_CACHE"].startswith("/fsx/")


def tokens_dir_of(submit: str) -> str:
    words = shlex.split(submit.split("&& ", 2)[-1])
    return words[words.index("--data") + 1]
