"""Shared fixtures. Synthesis is expensive: each (workload, overrides) pair is synthesized
once per test session and every test reads the same cloud assembly."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = ROOT / ".venv" / "bin"
PRESETS = ("small", "intermediate", "huge")
STACKS = ("JobLogsStack", "NetworkStack", "DataStack", "TrainStack", "InferenceStack")

# jsii starts `node`: use the supported Node.js inside the virtualenv, never the system one.
if (VENV_BIN / "node").exists():
    os.environ["JSII_NODE"] = str(VENV_BIN / "node")
    os.environ["PATH"] = f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
sys.path.insert(0, str(ROOT))
# `make demo` / `make emulator` from a test: with this interpreter and no `make setup` (Makefile SETUP).
MAKE_NO_SETUP = ["SETUP=", f"PY={sys.executable}"]


def build_app(app):
    """What app.py does with its context: read it once, then build (stacks.build), with every cdk-nag pack."""
    from constructs_lib.nag import ALL_PACKS
    from stacks.build import build
    from workloads.commands.context import read_context

    return build(app, read_context(app.node.get_all_context()), packs=ALL_PACKS)


def cdk_json_context() -> dict:
    return json.loads((ROOT / "cdk.json").read_text())["context"]


@pytest.fixture
def pin_images(tmp_path, monkeypatch):
    """pin_images(plan, ...): every image those plans pull recorded by digest (a made-up one) in a record of the
    test's own, in place of workloads/catalog/image_digests.yaml: a test counting a plan's other warnings is not
    given the one about images deployed by tag only (tests/test_image_pins.py tests that one)."""
    from workloads.commands import image_pins
    from workloads.commands.images import plan_images

    path = tmp_path / "image_digests.yaml"
    monkeypatch.setattr(image_pins, "RECORD", path)

    def pin(*plans) -> None:
        image_pins.record([image_pins.Pin(*image_pins.split(uri), "sha256:" + "d" * 64, "2026-11-28T00:00:00Z", "test")
                           for p in plans for uri in plan_images(p)], path)
    return pin


@dataclass(frozen=True)
class Synth:
    """One synthesized app: its templates by stack name, and its assembly directory."""

    outdir: Path
    templates: dict[str, dict]
    nag_report: dict
    manifest: dict

    def resources(self, stack: str, rtype: str) -> dict[str, dict]:
        res = self.templates[stack]["Resources"]
        return {k: v for k, v in res.items() if v["Type"] == rtype}

    def one(self, stack: str, rtype: str) -> dict:
        found = self.resources(stack, rtype)
        assert len(found) == 1, f"expected one {rtype} in {stack}, found {sorted(found)}"
        return next(iter(found.values()))

    def template_path(self, stack: str) -> Path:
        return self.outdir / f"{stack}.template.json"

    def artifact(self, stack: str) -> dict:
        return self.manifest["artifacts"][stack]


_CACHE: dict[tuple, Synth] = {}


def _stack_templates(outdir: Path) -> dict[str, dict]:
    manifest = json.loads((outdir / "manifest.json").read_text())
    # Keyed by construct ID (`TrainStack`), which `cdk deploy` selects; the CloudFormation name carries the workload.
    return {name: json.loads((outdir / art["properties"]["templateFile"]).read_text())
            for name, art in manifest["artifacts"].items() if art["type"] == "aws:cloudformation:stack"}


@contextmanager
def _once(outdir: Path):
    """Synthesize into `outdir` once for every test process (pytest-xdist workers share the directory)."""
    from filelock import FileLock

    outdir.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(outdir) + ".lock"):
        done = outdir / ".synthesized"
        if not done.exists():
            yield True
            done.touch()
        else:
            yield False


def synthesize(outroot: Path, workload: str, overrides: dict[str, str] | None = None) -> Synth:
    key = (workload, tuple(sorted((overrides or {}).items())))
    if key in _CACHE:
        return _CACHE[key]
    outdir = outroot / ("-".join([workload, *(f"{k}={v}" for k, v in key[1])]).replace("/", "_"))
    with _once(outdir) as needed:
        if needed:
            import aws_cdk as cdk

            app = cdk.App(outdir=str(outdir), context={**cdk_json_context(), "workload": workload, **(overrides or {})})
            build_app(app)
            app.synth()
    report_path = outdir / "validation-report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {"pluginReports": []}
    manifest = json.loads((outdir / "manifest.json").read_text())
    _CACHE[key] = Synth(outdir, _stack_templates(outdir), report, manifest)
    return _CACHE[key]


@pytest.fixture(scope="session")
def synth_root(tmp_path_factory, worker_id) -> Path:
    """One synthesis directory for the whole run: shared by the pytest-xdist workers (`make test` runs two)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if worker_id != "master" else base) / "cdk-out"


@pytest.fixture(scope="session")
def synth(synth_root):
    """synth(workload, {"training.instance_type": "p5.48xlarge"}) -> Synth, cached for the session."""
    def _synth(workload: str, overrides: dict[str, str] | None = None) -> Synth:
        return synthesize(synth_root, workload, overrides)
    return _synth


@pytest.fixture(scope="session", params=PRESETS)
def preset_synth(request, synth) -> tuple[str, Synth]:
    return request.param, synth(request.param)


P6_B300 = {"training.instance_type": "p6-b300.48xlarge", "region": "us-west-2", "availability_zone": "us-west-2d"}
# HyperPod is priced at SageMaker rates; no ml.trn2 rate is recorded, so the HyperPod variant trains on p5.
HYPERPOD = {"training.orchestrator": "hyperpod", "notebook.idle_minutes": "30", "training.instance_type": "p5.48xlarge"}
# The largest model Trn1's data-parallel layout holds is about 0.6B parameters (16 GiB per NeuronCore). The shape is
# given (0.47B as the trainer builds it): the usual decoder below 1.5B is Llama 3.2 1B's, 1.1B, which does not fit.
TRN1 = {"training.instance_type": "trn1.32xlarge", "model.parameters_billion": "0.5", "model.layers": "24",
        "model.hidden_size": "1024", "model.attention_heads": "16", "model.kv_heads": "16",
        "model.intermediate_size": "4096"}
# A reservation in huge's zone (the ID's form only: synthesis makes no lookups).
RESERVATION = {"training.capacity_reservation_id": "cr-0123456789abcdef0",
               "training.capacity_reservation_az": "us-east-2b"}
# EC2 sells Trn2 in us-east-2 only as Capacity Blocks, and AWS PCS runs no Trn2 block (catalog `sold`,
# pcs_capacity_block_families): a Trn2 Slurm cluster runs on an On-Demand Capacity Reservation the user holds.
TRN2 = {"training.instance_type": "trn2.48xlarge", **RESERVATION}
# A HyperPod group of Trn2 on a SageMaker training plan bought in huge's region.
TRN2_PLAN = {"training.orchestrator": "hyperpod", "training.instance_type": "trn2.48xlarge",
             "training.training_plan_arn": "arn:aws:sagemaker:us-east-2:123456789012:training-plan/trn2-plan"}
# A Capacity Block of a family PCS runs in blocks, sold as blocks in us-east-2.
CAPACITY_BLOCK = {"training.instance_type": "p5.48xlarge", "training.capacity_block": "true", **RESERVATION}
# Every variant the quality checks (cfn-lint, cdk-nag) cover: the presets and the cluster types.
VARIANTS = {
    "small": ("small", None),
    "intermediate": ("intermediate", None),
    "huge": ("huge", None),
    "huge-p4d": ("huge", {"training.instance_type": "p4d.24xlarge"}),
    "huge-p5": ("huge", {"training.instance_type": "p5.48xlarge"}),
    # p6-b300: card 0 carries no EFA (ENA only); offered in us-west-2, not in huge's us-east-2.
    "huge-p6-b300": ("huge", P6_B300),
    "huge-capacity-block": ("huge", CAPACITY_BLOCK),
    # Neuron 2.33's TorchNeuron stack on Trn2, on a reservation (static nodes, on-demand purchase option).
    "huge-trn2-reservation": ("huge", TRN2),
    "huge-shared-home": ("huge", {"data.shared_home": "true"}),
    "huge-hyperpod": ("huge", HYPERPOD),
    # Trn1 trains on Neuron 2.28's legacy XLA stack, data-parallel only (the shipped trainer there): a model whose
    # whole state fits a 16 GiB NeuronCore; on Slurm (8 EFA cards) and on HyperPod (ml.trn1).
    "huge-trn1": ("huge", TRN1),
    "huge-hyperpod-trn1": ("huge", {**HYPERPOD, **TRN1}),
    # The 70B model itself on Trn1/Trn1n: beyond data parallel, NxD Training's layout (issue 40), on Slurm and HyperPod.
    "huge-trn1-nxd": ("huge", {"training.instance_type": "trn1.32xlarge"}),
    "huge-trn1n-nxd": ("huge", {"training.instance_type": "trn1n.32xlarge"}),
    "huge-hyperpod-trn1-nxd": ("huge", {**HYPERPOD, "training.instance_type": "trn1.32xlarge"}),
    # Trn2 on the capacity SageMaker sells it as: a HyperPod group of ml.trn2.48xlarge on a training plan (issue 40).
    "huge-hyperpod-trn2-plan": ("huge", TRN2_PLAN),
    # Zones named by AZ ID (the same physical zone in every account): the subnets are placed by AvailabilityZoneId.
    "small-zone-ids": ("small", {"availability_zone": "use1-az4", "second_availability_zone": "use1-az6"}),
    # Training only (issue 32): no InferenceStack.
    "huge-training-only": ("huge", {"inference": "none"}),
    # Inference Components scaled to zero (issue 32): an LLM, spiky traffic, no latency target, no minimum set.
    "intermediate-copies-to-zero": ("intermediate", {"inference.traffic": "spiky", "inference.realtime": "{instance_type: ml.g6.xlarge}",
                                                     "inference.async": "null", "inference.batch": "null"}),
    "small-all-kinds": ("small", {"inference.async.max_instances": "2", "inference.realtime.data_capture_percent": "10",
                                  "inference.serverless.provisioned_concurrency": "2"}),
}


def e2e_beyond(names, kept) -> list:
    """`names` as test parameters, those not in `kept` marked e2e: a slow check over every variant (cfn-lint) runs on
    `kept` in `make test` and on the rest in `make test-e2e`, which CI runs after it."""
    return [pytest.param(name, marks=() if name in kept else pytest.mark.e2e) for name in names]


# The variants with an InferenceStack (the tests of endpoints walk these).
SERVING_VARIANTS = [name for name in VARIANTS if name != "huge-training-only"]


@pytest.fixture(scope="session", params=list(VARIANTS))
def variant_synth(request, synth) -> tuple[str, Synth]:
    workload, overrides = VARIANTS[request.param]
    return request.param, synth(workload, overrides)


@pytest.fixture(scope="session")
def variant_synth_by_name(synth):
    """variant_synth_by_name("huge-p5") -> Synth of that VARIANTS entry, cached for the session."""
    def _synth(name: str):
        workload, overrides = VARIANTS[name]
        return synth(workload, overrides)
    return _synth


TEAMS_FILE = ROOT / "config" / "teams.yaml"


@dataclass(frozen=True)
class TeamsSynth:
    """The example teams file synthesized once: templates by team, then stack id; the account's shared stacks (one
    per account and region, outside every team's stage) by their ID."""

    outdir: Path
    templates: dict[str, dict[str, dict]]
    artifacts: dict[str, dict[str, dict]]
    paths: dict[str, dict[str, Path]]
    shared: dict[str, dict]
    shared_artifacts: dict[str, dict]


@pytest.fixture(scope="session")
def teams_synth(synth_root) -> TeamsSynth:
    import aws_cdk as cdk

    outdir = synth_root / "teams"
    with _once(outdir) as needed:
        if needed:
            app = cdk.App(outdir=str(outdir), context={**cdk_json_context(), "teams": str(TEAMS_FILE)})
            build_app(app)
            app.synth()  # cdk-nag runs here: a finding fails the synthesis
    templates, artifacts, paths = {}, {}, {}
    top = json.loads((outdir / "manifest.json").read_text())
    shared = {sid: art for sid, art in top["artifacts"].items() if art["type"] == "aws:cloudformation:stack"}
    for art in top["artifacts"].values():
        if art["type"] != "cdk:cloud-assembly":
            continue
        nested = outdir / art["properties"]["directoryName"]
        manifest = json.loads((nested / "manifest.json").read_text())
        team = art["properties"]["directoryName"].removeprefix("assembly-")
        for stack in manifest["artifacts"].values():
            if stack["type"] != "aws:cloudformation:stack":
                continue
            sid = stack["displayName"].split("/")[-1]
            path = nested / stack["properties"]["templateFile"]
            templates.setdefault(team, {})[sid] = json.loads(path.read_text())
            artifacts.setdefault(team, {})[sid] = stack
            paths.setdefault(team, {})[sid] = path
    return TeamsSynth(outdir, templates, artifacts, paths,
                      {sid: json.loads((outdir / art["properties"]["templateFile"]).read_text())
                       for sid, art in shared.items()}, shared)



@contextmanager
def sdk_waits_without_sleeping():
    """The SageMaker SDK waits for a Processing job (the language models' prepare step, `wait=True`) by sleeping its
    poll interval, 10 s, before each look; moto (the emulator, mock_aws) ends a job as it starts it, so each submit of
    a test slept 10 s for nothing (120 s of make test's time). Within this block it looks at once, as often as needed:
    the same calls, in the same order, without the sleep."""
    from sagemaker.core import processing

    wait = processing._wait_until
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(processing, "_wait_until", lambda describe, poll=5: wait(describe, poll=0))
        yield


@pytest.fixture(scope="session", autouse=True)
def nothing_written_to_fsx():
    """Tests write only under their temporary directories: a run that creates /fsx on the machine running it (the
    trainer writing the layout's export directory, say) fails here."""
    from workloads.planning.layout import FSX_MOUNT  # the clusters' FSx mount

    fsx = Path(FSX_MOUNT)
    existed = fsx.exists()
    yield
    assert existed or not fsx.exists(), f"a test created {fsx} on this machine: give it a temporary directory"


@pytest.fixture(scope="session")
def tokens(tmp_path_factory) -> Path:
    """A token file with a pattern a model can learn in a few steps (uint16, as train.py's --data reads it): the
    trainer tests' data."""
    import numpy as np

    path = tmp_path_factory.mktemp("data") / "tokens.bin"
    (np.arange(1 << 14) % 17).astype(np.uint16).tofile(path)
    return path
