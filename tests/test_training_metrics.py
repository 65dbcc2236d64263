"""The run's own metrics reach the training dashboard (issue 42, evaluation): examples/slurm/evaluation.py writes EMF
lines; on a Slurm cluster rank 0 appends them to node_metrics.TRAIN_METRICS_FILE (the sbatch scripts export it where
the node made its directory), each node's CloudWatch agent ships that file to the TrainStack's log group (the role may
write there), CloudWatch Logs extracts the metrics, and the dashboard reads them per Workload: the name the Submit
line and a SageMaker job give the trainer (WORKLOAD_NAME). Held together here, from the trainer's own output to the
synthesized templates and the sourced table workloads/catalog/metrics.yaml."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys

import pytest

from constructs_lib.node_metrics import TRAIN_METRICS_DIR, TRAIN_METRICS_FILE, agent_config, boot_lines
from workloads import load, plan
from workloads.planning.monitoring import metric_facts
from workloads.planning.train_commands import slurm_submit

from .conftest import ROOT, VARIANTS

SLURM_DIR = ROOT / "examples" / "slurm"
FACTS = metric_facts()["metrics"]
SLURM = [n for n in VARIANTS if plan(load(*VARIANTS[n])).training.orchestrator == "slurm"]


def _emitted(tmp_path, monkeypatch) -> list[dict]:
    monkeypatch.syspath_prepend(str(SLURM_DIR))
    monkeypatch.delenv("TRAINING_JOB_NAME", raising=False)
    monkeypatch.setenv("WORKLOAD_NAME", "vision")
    evaluation = __import__("evaluation")
    args = argparse.Namespace(metrics_file=tmp_path / "m.log", peak_tflops=989.0, planned_mfu=0.4)
    metrics = evaluation.Metrics(args, rank=0, parameters=2_000_000_000, world=8)
    metrics.emit(10, Loss=2.5, TokensPerSecond=50_000.0, SkippedSteps=0)
    metrics.emit(10, EvalLoss=2.7)
    return [json.loads(line) for line in (tmp_path / "m.log").read_text().splitlines()]


def test_the_trainer_emits_exactly_the_metrics_the_table_lists(tmp_path, monkeypatch):
    lines = _emitted(tmp_path, monkeypatch)
    emitted = set()
    for line in lines:
        (directive,) = line["_aws"]["CloudWatchMetrics"]
        assert directive["Dimensions"] == [["Workload"]] and line["Workload"] == "vision"
        for m in directive["Metrics"]:
            key = f"{directive['Namespace']}:{m['Name']}"
            assert key in FACTS and FACTS[key]["dimensions"] == ["Workload"], key
            assert m["Unit"] == FACTS[key]["unit"], key
            assert isinstance(line[m["Name"]], (int, float))  # the EMF rule: each metric's value is a member
            emitted.add(key)
    namespace = lines[0]["_aws"]["CloudWatchMetrics"][0]["Namespace"]
    assert emitted == {k for k in FACTS if k.startswith(namespace + ":")}


def test_the_agent_ships_the_file_the_sbatch_scripts_export_from_the_directory_the_node_makes(tmp_path):
    config = agent_config(cluster="c", accelerator_kind="nvidia-gpu", training_log_group="group")
    (entry,) = config["logs"]["logs_collected"]["files"]["collect_list"]
    assert entry["file_path"] == TRAIN_METRICS_FILE and entry["log_group_name"] == "group"
    assert "logs" not in agent_config(cluster="c", accelerator_kind="nvidia-gpu")
    for script in ("train-gpu.sbatch", "train-trainium.sbatch"):
        text = (SLURM_DIR / script).read_text()
        assert f"export TRAIN_METRICS_FILE={TRAIN_METRICS_FILE}" in text and f"-d {TRAIN_METRICS_DIR} ]" in text
    # the boot line makes the directory sticky and writable by any job's user, as /tmp
    (line,) = [x for x in boot_lines(cluster="c", accelerator_kind="nvidia-gpu", region="r", training_log_group="g")
               if TRAIN_METRICS_DIR in x and "install" in x]
    subprocess.run(["bash", "-c", line], env={"R": str(tmp_path), "PATH": "/usr/bin:/bin"}, check=True)
    assert oct((tmp_path / TRAIN_METRICS_DIR.lstrip("/")).stat().st_mode & 0o7777) == "0o1777"
    assert not any(TRAIN_METRICS_DIR in x for x in boot_lines(cluster="c", accelerator_kind=None, region="r"))


def test_the_slurm_training_job_and_a_sagemaker_job_name_the_workload():
    from workloads.commands.jobs import job_environment

    submit = slurm_submit(workload="vision", nodes=2, accelerator_kind="nvidia-gpu", parallelism=None)
    assert "--export=ALL,WORKLOAD_NAME=vision" in submit.split("sbatch --dependency")[1]
    p = plan(load("small"))
    assert job_environment(p)["WORKLOAD_NAME"] == p.workload.name


def _joined(value) -> list:
    return value["Fn::Join"][1] if isinstance(value, dict) and "Fn::Join" in value else [value]


@pytest.mark.parametrize("name", SLURM)
def test_slurm_nodes_ship_the_trainers_metrics_to_the_stacks_group_and_the_dashboard_reads_them(
        name, variant_synth_by_name):
    s = variant_synth_by_name(name)
    template = s.templates["TrainStack"]
    resources = template["Resources"]
    (group,) = [k for k, r in resources.items() if r["Type"] == "AWS::Logs::LogGroup" and "TrainingMetrics" in k]
    assert resources[group]["Properties"]["KmsKeyId"] and resources[group]["DeletionPolicy"] != "Delete"
    # the compute nodes' agent configuration names that group (a Ref in the user data, next to the file's path)
    (lt,) = [k for k, r in resources.items() if r["Type"] == "AWS::EC2::LaunchTemplate" and "Compute" in k]
    parts = _joined(resources[lt]["Properties"]["LaunchTemplateData"]["UserData"]["Fn::Base64"])
    at = parts.index({"Ref": group})
    assert '"log_group_name": "' in parts[at - 1] and TRAIN_METRICS_FILE in parts[at - 1]
    # the role may write exactly there
    writes = [st for r in resources.values() if r["Type"] == "AWS::IAM::Policy"
              for st in r["Properties"]["PolicyDocument"]["Statement"] if "logs:PutLogEvents" in json.dumps(st)]
    assert any(st["Resource"] == {"Fn::GetAtt": [group, "Arn"]} and set(st["Action"]) >= {
        "logs:CreateLogStream", "logs:PutLogEvents"} for st in writes)
    # the dashboard reads every MLEstate/Training metric per the workload's name
    workload = plan(load(*VARIANTS[name])).workload.name
    (dash,) = [r for r in resources.values() if r["Type"] == "AWS::CloudWatch::Dashboard"]
    text = "".join(p if isinstance(p, str) else "TOKEN" for p in _joined(dash["Properties"]["DashboardBody"]))
    read = {(row[1], row[3]) for w in json.loads(text)["widgets"] for row in w["properties"].get("metrics", [])
            if row and row[0] == "MLEstate/Training"}
    assert {m for m, _ in read} == {k.split(":")[1] for k in FACTS if k.startswith("MLEstate/Training:")}
    assert {v for _, v in read} == {workload}


def test_the_node_role_writes_the_trainers_stream_as_cloudwatch_logs_authorizes_it_and_nothing_else(synth):
    """What the agent calls at run time, evaluated against the role's policies: CreateLogStream and PutLogEvents on a
    stream of the TrainStack's metrics group allowed, the same calls on another group of the estate refused."""
    from .contract_policy import Call, evaluate
    from .test_runtime_contract import world_of

    world = world_of(synth("huge"))
    role = world.role("TrainStack/TrainingRole/Role/Resource")
    group = world.arn("TrainingMetricsLogs/Resource", "AWS::Logs::LogGroup").removesuffix(":*")
    other = world.arn("FlowLogs/Resource", "AWS::Logs::LogGroup").removesuffix(":*")
    doc = "CloudWatch Logs API Reference, PutLogEvents and CreateLogStream (resource: the log group's streams)"
    for action in ("logs:CreateLogStream", "logs:PutLogEvents"):
        mine = evaluate(role, Call(action, f"{group}:log-stream:i-0123456789abcdef0", doc), world)
        assert mine.allowed, (action, mine.reason)
        assert not evaluate(role, Call(action, f"{other}:log-stream:i-0123456789abcdef0", doc), world).allowed
