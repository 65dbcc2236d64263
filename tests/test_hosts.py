"""Each container runs on its host: every synthesized endpoint config and transform job pairs a GPU image with a host
AMI whose NVIDIA driver runs the image's CUDA.

Facts (workloads/catalog/hosts.yaml, each with its source): the CUDA of each GPU build (AWS's image data), the driver
of each InferenceAmiVersion and TransformAmiVersion (botocore's sagemaker model, checked here against the model's own
text), and NVIDIA's minimum driver per CUDA major version. Before: the vLLM DLC (CUDA 13.0, driver 580+) was deployed
on al2-ami-sagemaker-inference-gpu-3-1 (driver 550), and its GPU batch transform on SageMaker's default host.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import replace
from functools import cache
from pathlib import Path

import botocore
import pytest

from workloads import ConfigError, load, plan
from workloads.catalog import load_catalog
from workloads.planning import hosts
from workloads.planning.contracts import CONTAINERS

from .conftest import ROOT, VARIANTS
from .test_published_images import published
from .test_serving_contract import _component_model, _container

EXAMPLES = sorted((ROOT / "examples" / "workloads").glob("*.yaml"))
VISION = str(ROOT / "examples" / "workloads" / "vision-classifier.yaml")
# Every serving estate the suite synthesizes (presets, their variants with serving, the examples), and a PyTorch
# model's batch on a GPU (the Ray DLC's CUDA 12.9 build on TransformAmiVersion 535).
CASES = {**{name: VARIANTS[name] for name in ("small", "intermediate", "huge", "small-all-kinds")},
         **{p.stem: (str(p), None) for p in EXAMPLES},
         "vision-gpu-batch": (VISION, {"inference.batch": '{"instance_type": "ml.g5.xlarge"}'})}
# LLM batch on a GPU: the vLLM DLC is CUDA 13.0 and transform hosts stop at driver 535, so these presets' nightly
# batch drains through their async endpoint (driver 580) instead of a transform job (hosts.drain_route).
DRAINED = {"intermediate", "huge"}


@cache
def _sagemaker_model() -> dict:
    path = Path(botocore.__file__).parent / "data" / "sagemaker" / "2017-07-24" / "service-2.json.gz"
    return json.loads(gzip.decompress(path.read_bytes()))


def _doc(shape: str, member: str) -> str:
    return re.sub(r"<[^>]+>", " ", _sagemaker_model()["shapes"][shape]["members"][member]["documentation"])


def test_inference_amis_are_the_api_enum_with_its_drivers():
    enum = set(_sagemaker_model()["shapes"]["ProductionVariantInferenceAmiVersion"]["enum"])
    table = hosts.host_facts()["inference_amis"]
    gpu = {a for a in enum if "-gpu-" in a}
    assert set(table) == gpu, "a GPU InferenceAmiVersion is missing from catalog/hosts.yaml, or one is not in the API"
    text = " ".join(_doc("ProductionVariant", "InferenceAmiVersion").split())
    for ami, fact in table.items():
        said = re.search(re.escape(ami) + r" Accelerator: GPU NVIDIA driver version: (\d+) CUDA version: ([\d.]+)", text)
        assert said and int(said[1]) == fact["driver"] and said[2] == fact["cuda"], ami


def test_transform_amis_are_the_apis_with_their_drivers():
    text = " ".join(_doc("TransformResources", "TransformAmiVersion").split())
    said = dict(re.findall(r"(al2-ami-sagemaker-batch-gpu-\d+) Accelerator: GPU NVIDIA driver version: (\d+)", text))
    assert {a: int(d) for a, d in said.items()} == {a: f["driver"] for a, f in
                                                     hosts.host_facts()["transform_amis"].items()}


def test_every_gpu_container_has_its_cuda_recorded():
    for key, c in CONTAINERS.items():
        assert ("nvidia-gpu" in c.accelerators) == (hosts.image_cuda(key) is not None), key


def test_the_recorded_cuda_agrees_with_the_published_tags():
    """Where a tag names its CUDA (cu129), it is the recorded one."""
    tags = published()[1]["tensorflow-inference"]["tags"]
    assert any(t.startswith("2.20") and "cu129" in t for t in tags) and hosts.image_cuda("tensorflow") == "12.9"


def test_the_driver_rule():
    assert hosts.min_driver("13.0") == 580 and hosts.min_driver("12.9") == 525
    assert not hosts.runs_on("vllm", 550) and hosts.runs_on("vllm", 580)
    assert hosts.runs_on("ray-serve", 535) and not hosts.runs_on("ray-serve", 470)
    assert hosts.endpoint_host("vllm").ami == "al2023-ami-sagemaker-inference-gpu-4-1"
    assert hosts.transform_host("vllm") is None
    assert hosts.transform_host("ray-serve").ami == "al2-ami-sagemaker-batch-gpu-535"


def _gpu(itype: str | None) -> bool:
    acc = load_catalog().types[itype.removeprefix("ml.")].accelerator if itype else None
    return acc is not None and acc.kind == "nvidia-gpu"


def _runs(container: str, ami: str | None) -> bool:
    driver = hosts.driver_of(ami) if ami else None
    return driver is not None and hosts.runs_on(container, driver)


def _images(template: dict) -> dict[str, str]:
    return {logical: r["Properties"]["PrimaryContainer"]["Image"] for logical, r in template["Resources"].items()
            if r["Type"] == "AWS::SageMaker::Model"}


def _definition(r: dict) -> tuple[dict, list]:
    """A state machine's definition, its CloudFormation tokens as TOKEN<i> (the i-th part of its Fn::Join)."""
    body = r["Properties"]["DefinitionString"]
    parts = body["Fn::Join"][1] if isinstance(body, dict) else [body]
    text = "".join(p if isinstance(p, str) else f"TOKEN{i}" for i, p in enumerate(parts))
    return json.loads(text), parts


def _transform_jobs(template: dict) -> list[tuple[str, str, str | None]]:
    """(model logical ID, instance type, TransformAmiVersion) of every transform job a state machine starts."""
    out = []
    for r in template["Resources"].values():
        if r["Type"] != "AWS::StepFunctions::StateMachine":
            continue
        definition, parts = _definition(r)
        for state in definition["States"].values():
            if "createTransformJob" in state.get("Resource", ""):
                p = state["Parameters"]
                model = parts[int(p["ModelName"].removeprefix("TOKEN"))]["Fn::GetAtt"][0]
                res = p["TransformResources"]
                out.append((model, res["InstanceType"], res.get("TransformAmiVersion")))
    return out


def _template(synth, case: str) -> dict:
    workload, overrides = CASES[case]
    return synth(workload, overrides).templates["InferenceStack"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_endpoint_config_hosts_its_image_on_a_driver_that_runs_it(synth, case):
    template = _template(synth, case)
    images, problems, seen = _images(template), [], 0
    for logical, r in template["Resources"].items():
        if r["Type"] != "AWS::SageMaker::EndpointConfig":
            continue
        for v in r["Properties"]["ProductionVariants"]:
            itype = v.get("InstanceType")
            model = v.get("ModelName") or _component_model(template, logical)
            container = _container(images[model["Fn::GetAtt"][0]])
            if not _gpu(itype):
                continue
            seen += 1
            if not _runs(container, v.get("InferenceAmiVersion")):
                problems.append(f"{logical}: {container} (CUDA {hosts.image_cuda(container)}) on {itype} with "
                                f"InferenceAmiVersion {v.get('InferenceAmiVersion')}")
    assert not problems, "\n".join(problems)
    if case in ("intermediate", "huge", "vision-classifier"):
        assert seen, f"{case} has GPU endpoints: the walk found none"


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_transform_job_hosts_its_image_on_a_driver_that_runs_it(synth, case):
    template = _template(synth, case)
    images = _images(template)
    problems = [f"{model}: {_container(images[model])} (CUDA {hosts.image_cuda(_container(images[model]))}) on "
                f"{itype} with TransformAmiVersion {ami}"
                for model, itype, ami in _transform_jobs(template)
                if _gpu(itype) and not _runs(_container(images[model]), ami)]
    assert not problems, "\n".join(problems)


def test_a_pytorch_batch_on_a_gpu_runs_on_driver_535(synth):
    """Before: refused (the task set no TransformAmiVersion). The Ray DLC's GPU build is CUDA 12.9, which driver 535
    runs (minor version compatibility), so the transform job names al2-ami-sagemaker-batch-gpu-535."""
    template = _template(synth, "vision-gpu-batch")
    jobs = _transform_jobs(template)
    assert [(itype, ami) for _, itype, ami in jobs] == [("ml.g5.xlarge", "al2-ami-sagemaker-batch-gpu-535")]
    machine, = [r for r in template["Resources"].values() if r["Type"] == "AWS::StepFunctions::StateMachine"]
    assert _definition(machine)[0]["TimeoutSeconds"] == 24 * 3600  # as the chainable definition renders it
    actions = json.dumps([r["Properties"]["PolicyDocument"] for r in template["Resources"].values()
                          if r["Type"] == "AWS::IAM::Policy"])
    for action in ("sagemaker:CreateTransformJob", "sagemaker:DescribeTransformJob", "sagemaker:StopTransformJob"):
        assert action in actions  # the task's own statements, added by hand with a string definition


def test_a_cpu_transform_job_names_no_gpu_host(synth):
    jobs = _transform_jobs(_template(synth, "small"))
    assert jobs and all(ami is None for _, _, ami in jobs)


def _drains(template: dict) -> list[tuple[str, str]]:
    """(endpoint logical ID, S3 prefix) of every scheduled run that sends a prefix's objects to InvokeEndpointAsync."""
    out = []
    for r in template["Resources"].values():
        if r["Type"] != "AWS::StepFunctions::StateMachine":
            continue
        definition, parts = _definition(r)
        for state in definition["States"].values():
            processor = state.get("ItemProcessor", {}).get("States", {})
            for inner in processor.values():
                if inner.get("Resource", "").endswith(":states:::aws-sdk:sagemakerruntime:invokeEndpointAsync"):
                    endpoint = parts[int(inner["Parameters"]["EndpointName"].removeprefix("TOKEN"))]["Fn::GetAtt"][0]
                    assert "$.Key" in inner["Parameters"]["InputLocation.$"]  # the listed object is the request
                    reader = state["ItemReader"]
                    assert reader["Resource"].endswith(":states:::s3:listObjectsV2")
                    out.append((endpoint, reader["Parameters"]["Prefix"]))
    return out


@pytest.mark.parametrize("preset", sorted(DRAINED))
def test_an_llm_batch_on_a_gpu_drains_through_the_async_endpoint_whose_host_runs_it(synth, preset):
    """Before: a transform job of the CUDA 13 vLLM DLC on SageMaker's default transform host, which could not start.
    Now no transform job: the schedule starts a Distributed Map over batch/input/ that queues each object on the async
    endpoint, whose endpoint config names a host AMI whose driver runs the image."""
    template = synth(preset).templates["InferenceStack"]
    assert not _transform_jobs(template)
    (endpoint, prefix), = _drains(template)
    assert prefix == "inference/batch/input/"
    config = template["Resources"][endpoint]["Properties"]["EndpointConfigName"]["Fn::GetAtt"][0]
    variant, = template["Resources"][config]["Properties"]["ProductionVariants"]
    model = template["Resources"][variant["ModelName"]["Fn::GetAtt"][0]]["Properties"]["PrimaryContainer"]["Image"]
    assert _container(model) == "vllm" and _runs("vllm", variant["InferenceAmiVersion"])
    assert "AsyncInferenceConfig" in template["Resources"][config]["Properties"]
    # The endpoint reads each request as its model's role: that role may get the batch prefix's objects.
    role = template["Resources"][variant["ModelName"]["Fn::GetAtt"][0]]["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0]
    reads = [st for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy"
             and {"Ref": role} in r["Properties"]["Roles"] for st in r["Properties"]["PolicyDocument"]["Statement"]
             if st["Action"] == "s3:GetObject" and "/inference/batch/input/*" in json.dumps(st["Resource"])]
    assert reads
    schedule, = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::Scheduler::Schedule"]
    assert schedule["ScheduleExpression"] == load(preset).inference.batch.schedule
    policies = json.dumps([r["Properties"]["PolicyDocument"] for r in template["Resources"].values()
                           if r["Type"] == "AWS::IAM::Policy"])
    assert '"Action": "sagemaker:InvokeEndpointAsync", "Effect": "Allow", "Resource": {"Ref": "%s"}' % endpoint \
        in policies


@pytest.mark.parametrize("preset", sorted(DRAINED))
def test_the_plan_says_the_batch_drains_through_the_async_endpoint_and_why(preset):
    p = plan(load(preset))
    batch = p.inference["batch"]
    assert batch.serving.container == "vllm" and batch.serving.drain == "async"
    assert batch.serving.transform_ami_version is None
    warned, = [f for f in p.warnings if f.field == "inference.batch.instance_type"]
    for said in ("580", "470/535", "InvokeEndpointAsync", p.inference["async"].instance_type, "Processing job",
                 "CUDA 12 image"):
        assert said in warned.message, said
    assert p.to_dict()["inference"]["batch"]["serving"]["drain"] == "async"
    # The runs are priced on the fleet that serves them: the async endpoint's, scaled out to its maximum.
    queue, run = p.inference["async"], batch.batch_run
    hours = run.records / (queue.requests_per_second_per_instance * queue.max_instances) / 3600
    assert run.usd == pytest.approx((hours + run.startup_s / 3600) * queue.usd_per_hour_max, rel=1e-3)
    assert queue.instance_type in run.basis and "async endpoint" in run.basis
    assert f"batch drained through the async endpoint on {queue.instance_type}" in " ".join(p.path)
    # and the month names them so: no transform job runs (the full plan's monthly line said "batch transform runs")
    line, = [m for m in p.monthly.lines if "batch" in m.item]
    assert line.item == "async endpoint scaled out for the batch runs" and queue.instance_type in line.price


def test_without_an_async_endpoint_the_llm_batch_is_a_warning_that_names_the_way():
    """No async endpoint to drain through: nothing runs the batch, and the plan says to add one."""
    p = plan(load("huge", {"inference.async": "null"}))
    assert p.inference["batch"].serving.drain == "" and "async" not in p.inference
    warned, = [f for f in p.warnings if f.field == "inference.batch.instance_type"]
    assert "cannot start" in warned.message and "Add inference.async" in warned.message


def test_no_drain_where_the_async_endpoint_runs_another_container():
    planned = plan(load("huge")).inference
    undrained = {**planned, "batch": replace(planned["batch"], serving=replace(planned["batch"].serving, drain=""))}
    assert hosts.drain_route(undrained)["batch"].serving.drain == "async"
    other = {**undrained, "async": replace(planned["async"], serving=replace(planned["async"].serving,
                                                                             container="ray-serve"))}
    assert hosts.drain_route(other)["batch"].serving.drain == ""


def test_a_container_no_transform_host_runs_is_refused_for_a_non_llm_gpu_batch(monkeypatch):
    """A non-LLM container whose GPU build no transform host runs is refused on a GPU batch type, naming the field."""
    monkeypatch.setitem(hosts.host_facts()["images"], "ray-serve", {"cuda": "13.0"})
    with pytest.raises(ConfigError) as e:
        plan(load(VISION, {"inference.batch": '{"instance_type": "ml.g5.xlarge"}'}))
    assert "inference.batch.instance_type" in str(e.value) and "470/535" in str(e.value)


def _runtime_model() -> dict:
    import gzip
    from pathlib import Path

    import botocore
    path, = (Path(botocore.__file__).parent / "data" / "sagemaker-runtime").glob("*/service-2.json*")
    return json.load(gzip.open(path) if path.suffix == ".gz" else path.open())


@pytest.mark.parametrize("preset", sorted(DRAINED))
def test_the_drain_retries_only_errors_the_api_defines_and_gives_requests_the_longest_life(synth, preset):
    """The second template review (R4): the drain retried a ThrottlingException InvokeEndpointAsync does not define,
    never its InternalFailure, and left RequestTTLSeconds (6 h) and InvocationTimeoutSeconds (15 min) at their
    defaults while it queues a whole prefix at once. Each is read against botocore's sagemaker-runtime model."""
    model = _runtime_model()
    op = model["operations"]["InvokeEndpointAsync"]
    defined = {e["shape"] for e in op["errors"]}
    members = model["shapes"][op["input"]["shape"]]["members"]
    template = synth(preset).templates["InferenceStack"]
    seen = 0
    for r in template["Resources"].values():
        if r["Type"] != "AWS::StepFunctions::StateMachine":
            continue
        definition, _ = _definition(r)
        for state in definition["States"].values():
            for inner in state.get("ItemProcessor", {}).get("States", {}).values():
                if not inner.get("Resource", "").endswith(":invokeEndpointAsync"):
                    continue
                seen += 1
                retried = {e for retry in inner["Retry"] for e in retry["ErrorEquals"]}
                assert retried == {f"SageMakerRuntime.{e}Exception" for e in defined - {"ValidationError"}}
                for field in ("RequestTTLSeconds", "InvocationTimeoutSeconds"):
                    assert inner["Parameters"][field] == model["shapes"][members[field]["shape"]]["max"], field
    assert seen == 1


# --------------------------------------------------------------- Neuron: the host's driver and the image's runtime

def test_neuron_amis_are_the_api_enum_with_their_drivers():
    """Every Neuron InferenceAmiVersion of the API is recorded with the Neuron driver its documentation gives, and the
    Neuron serving facts name the same AMI and driver."""
    from workloads.planning import neuron_hosting

    enum = set(_sagemaker_model()["shapes"]["ProductionVariantInferenceAmiVersion"]["enum"])
    table = hosts.host_facts()["neuron_inference_amis"]
    assert set(table) == {a for a in enum if "-neuron-" in a}
    text = " ".join(_doc("ProductionVariant", "InferenceAmiVersion").split())
    for ami, fact in table.items():
        said = re.search(re.escape(ami) + r" Accelerator: Inferentia2 and Trainium Neuron driver version: ([\d.]+)", text)
        assert said and said[1] == fact["driver"], ami
    served = neuron_hosting.facts()["sagemaker"]
    assert hosts.neuron_driver(served["inference_ami"]) == served["neuron_driver"]


@pytest.mark.parametrize("case", ["huge"])
def test_every_neuron_endpoint_config_names_a_host_whose_driver_no_stated_floor_refuses(synth, case):
    """The pairing walk covers Neuron: every Inferentia2/Trainium variant names a Neuron host AMI recorded with its
    driver, and the image's runtime library has no floor above it in Neuron's release notes."""
    template = _template(synth, case)
    images, seen = _images(template), 0
    for logical, r in template["Resources"].items():
        if r["Type"] != "AWS::SageMaker::EndpointConfig":
            continue
        for v in r["Properties"]["ProductionVariants"]:
            if not v.get("InstanceType", "").startswith(("ml.inf", "ml.trn")):
                continue
            seen += 1
            model = v.get("ModelName") or _component_model(template, logical)
            container = _container(images[model["Fn::GetAtt"][0]])
            assert container in hosts.host_facts()["neuron_images"], container
            ami = v.get("InferenceAmiVersion")
            assert hosts.neuron_driver(ami) and not hosts.neuron_refusal(container, ami), (logical, ami)
    assert seen, "huge serves on Inferentia2: the walk found none"


def test_a_neuron_runtime_above_the_hosts_floor_is_refused(monkeypatch):
    """Neuron's rule: the driver stays backwards compatible with older runtimes; a newer runtime may need a newer
    driver. Runtime 2.32 is stated to need a driver above 2.26, so an image with it cannot start on the 2.19 host:
    refused, naming the floor's source."""
    facts = hosts.host_facts()
    newer = {**facts, "neuron_images": {"vllm-neuronx": {**facts["neuron_images"]["vllm-neuronx"],
                                                         "runtime_lib": "2.32.5"}}}
    monkeypatch.setattr(hosts, "host_facts", lambda: newer)
    assert "neuron-runtime-rn" in hosts.neuron_refusal("vllm-neuronx", "al2-ami-sagemaker-inference-neuron-2")
    with pytest.raises(ConfigError, match="needs a driver newer than 2.26"):
        plan(load("huge"))


def test_the_untested_neuron_pair_is_a_warning_with_its_sources():
    """The image's Neuron SDK 2.26.1 ships driver 2.24.7; SageMaker's only Neuron host AMI has 2.19. No floor refuses
    the pair and the published deployments use it, so it is planned, with a WARNING naming both versions."""
    warned = [f for f in plan(load("huge")).findings
              if f.level == "WARNING" and f.field == "inference.realtime.instance_type" and "Neuron driver" in f.message]
    assert len(warned) == 1
    image = hosts.host_facts()["neuron_images"]["vllm-neuronx"]
    assert "2.19" in warned[0].message and image["sdk_driver"] in warned[0].message
    assert "nrt-troubleshoot" in warned[0].source and "runtime.rst" in warned[0].source


@pytest.mark.parametrize("preset", sorted(DRAINED))
def test_the_drain_lists_the_batch_prefix_and_nothing_else(synth, preset):
    """Outside review R6: aws-cdk-lib's item reader grants s3:ListBucket on the whole bucket; the drain's role lists
    the batch input prefix only (s3:prefix, the Prefix ListObjectsV2 sends), evaluated as S3 authorizes it."""
    from .contract_policy import Call, evaluate
    from .test_runtime_contract import world_of

    world = world_of(synth(preset))
    role = world.role("BatchDrain/StateMachineRole/Resource")
    bucket = world.arn("DataStack/Datasets/Dataset/Resource", "AWS::S3::Bucket")

    def lists(prefix: str) -> bool:
        return evaluate(role, Call("s3:ListBucket", bucket, "ListObjectsV2", context={"s3:prefix": prefix}),
                        world).allowed
    assert lists("inference/batch/input/")
    assert not lists("datasets/") and not lists("")
    assert not evaluate(role, Call("s3:ListBucket", bucket, "ListObjectsV2 without a Prefix"), world).allowed
