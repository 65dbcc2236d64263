"""The plan as a whole (workloads/planning/planner.py composes it): the JSON interface, the readable table, and the planner's
imports. Training planning is tested in test_plan_training.py, serving planning in test_plan_serving.py."""

from __future__ import annotations

import json
import subprocess
import sys

from workloads import load, plan

from .conftest import ROOT


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workloads", *args], cwd=ROOT, capture_output=True, text=True)


def test_plan_json_has_the_interface_fields():
    out = _cli("plan", "huge", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    t = plan(load("huge")).training
    assert data["training"]["instance_type"] == t.instance_type
    assert data["training"]["software"]["device"] == t.software.device  # issue 11: the pinned stack the nodes run
    assert (data["training"]["compute_min_nodes"], data["training"]["scale_down_idle_s"]) == (0, 600)
    assert data["training"]["network_interfaces"][0] == {"card": 0, "device": 0, "kind": "interface"}
    assert data["training"]["instance_count"] == 16
    assert data["estimates"]["usd_total"] > 0 and data["estimates"]["hours"] > 0
    assert set(data["inference"]) == {"realtime", "async", "batch"}
    assert data["inference"]["realtime"]["instance_type"].startswith("ml.")
    spread = data["training"]["parallelism"]  # issue 11: the layout, integer degrees
    assert {k: spread[k] for k in ("data", "tensor", "pipeline", "sharding")} == \
        {"data": t.parallelism.data, "tensor": 1, "pipeline": 1, "sharding": "full"}
    assert all(isinstance(spread[k], int) for k in ("data", "tensor", "pipeline"))


def test_plan_table_is_readable():
    """Its speed is measured by tools/bench_plan.py, not asserted here: a shared machine's load fails a timing."""
    out = _cli("plan", "huge", "--full")
    assert out.returncode == 0, out.stderr
    t = plan(load("huge")).training
    for text in (f"{t.instance_type} x 16", f"software: {t.software.name.split(' (')[0]}", "Training candidates",
                 "p5.48xlarge", "dynamic compute nodes (0 to 16)", "Inference", "Assumptions"):
        assert text in out.stdout


def test_planner_path_never_imports_cdk_or_sagemaker():
    code = ("import sys, workloads, workloads.commands.cli, workloads.commands.report, workloads.planning.teams; "
            "workloads.plan(workloads.load('huge')); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('aws_cdk', 'sagemaker', 'jsii')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_model_trained_on_the_cluster_is_the_model_served():
    """huge: train.py exports to /fsx/output/NAME, the FSx link writes it to models/NAME/, and the GPU kinds read
    exactly that key (the Neuron kind reads its compiled export beside it); the plan says so, step by step."""
    from workloads.planning import layout
    from workloads.planning.run_length import FSX_OUTPUT_DIR

    p = plan(load("huge"))
    export = p.training.parallelism.export_dir
    link = next(prefix for path, prefix, _, exports in layout.FSX_LINKS if FSX_OUTPUT_DIR.endswith(path) and exports)
    key = link + export.removeprefix(FSX_OUTPUT_DIR + "/") + "/"
    gpu = [ip for ip in p.inference.values() if ip.serving and ip.serving.container == "vllm"]
    assert gpu and all(ip.serving.artifact_key == key for ip in gpu)
    assert p.path[0].startswith(f"trained on 16 x {p.training.instance_type}") and key in p.path[1]
    assert all(f"reading s3://<DatasetBucketName>/{ip.serving.artifact_key}" in "\n".join(p.path)
               for ip in p.inference.values() if ip.serving)
    assert p.to_dict()["path"] == list(p.path)


def test_the_plans_words_do_not_repeat_themselves():
    """'served serverless on serverless' and '(none (CPU))' (issue 34 item 10.9)."""
    small = plan(load("small"))
    assert any(line.startswith("served serverless by ") for line in small.path)
    assert not any("on serverless" in line for line in small.path)
    assert small.training.accelerator == "CPU only"


def test_a_command_in_the_plan_is_never_wrapped_mid_command():
    """Rich wrapped `python -m workloads promote <workload> / --job <job>` at 150 columns: it could not be pasted
    (issue 34 item 10.10). A quoted command is printed on a line of its own, unwrapped, however narrow the console."""
    from rich.console import Console

    from workloads.commands.report import print_line, print_plan

    console = Console(width=150, record=True)
    print_plan(plan(load("small")), console)
    lines = console.export_text().splitlines()
    assert "      python -m workloads promote <workload> --job <job>" in lines
    narrow = Console(width=30, record=True)
    print_line(narrow, "first `python -m workloads plan huge -c training.instance_type=p5.48xlarge` then more words")
    out = narrow.export_text().splitlines()
    assert "      python -m workloads plan huge -c training.instance_type=p5.48xlarge" in out
    assert "the command below" in " ".join(out)
