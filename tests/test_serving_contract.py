"""Serving contracts: every synthesized SageMaker model carries what its container needs to start.

The requirements below are the containers' own, written here from their sources (not from
workloads/planning/contracts.py, so the two can disagree and the test catch it):
- vLLM DLC (GPU): sagemaker_args.py turns SM_VLLM_<FLAG> into --<flag>; without SM_VLLM_MODEL it serves
  /opt/ml/model only if that holds files, else HF_MODEL_ID (aws/deep-learning-containers scripts/docker/vllm);
  vLLM refuses a tensor-parallel size that does not divide the attention heads.
- vLLM on Neuron: the entrypoint turns SM_ON_<ARG> into `optimum-cli neuron serve --<arg>`; serve needs the model
  directory (a Neuron export, or it looks the model up on the Hub) and checks tensor_parallel_size, batch_size and
  sequence_length against the export (huggingface/optimum-neuron v0.4.5, docker/vllm/Dockerfile, serve.py).
- scikit-learn container: the handler module is SAGEMAKER_PROGRAM under code/ in the archive
  (aws/sagemaker-scikit-learn-container).
- Ray Serve DLC (PyTorch models that are not LLMs): /opt/ml/model/config.yaml, else SM_RAYSERVE_APP (module:app), or
  the container exits (aws/deep-learning-containers scripts/docker/ray/sagemaker_entrypoint.sh).
- XGBoost built-in: model.tar.gz with `xgboost-model`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from workloads import ConfigError, load, plan
from workloads.catalog import load_catalog
from workloads.planning.contracts import REQUESTS
from workloads.planning import neuron_hosting

from .conftest import ROOT, VARIANTS

NEURON_ENV = ("SM_ON_MODEL", "SM_ON_TENSOR_PARALLEL_SIZE", "SM_ON_BATCH_SIZE", "SM_ON_SEQUENCE_LENGTH")
SERVING_VARIANTS = ("small", "intermediate", "huge", "small-all-kinds")


def _container(image: str) -> str:
    repo = image.split("/", 1)[1].split(":")[0]
    tag = image.rsplit(":", 1)[1]
    if repo == "vllm":
        return "vllm"
    if repo == "huggingface-vllm-inference-neuronx":
        # The published tag (AWS DLC data): any other names an image no registry holds.
        assert tag == "0.11.0-optimum0.4.5-neuronx-py310-sdk2.26.1-ubuntu22.04", image
        return "vllm-neuronx"
    return {"ray": "ray-serve", "tensorflow-inference": "tensorflow", "sagemaker-xgboost": "xgboost",
            "sagemaker-scikit-learn": "sklearn"}[repo]


def _instance_types(template: dict) -> dict[str, str]:
    """Model logical ID -> the instance type that serves it (endpoint configs and the transform job)."""
    out = {}
    for r in template["Resources"].values():
        if r["Type"] == "AWS::SageMaker::EndpointConfig":
            for v in r["Properties"]["ProductionVariants"]:
                if "InstanceType" in v and "ModelName" in v:
                    out[v["ModelName"]["Fn::GetAtt"][0]] = v["InstanceType"]
                elif "InstanceType" in v:  # inference components name the model; they run on this variant
                    for c in template["Resources"].values():
                        if c["Type"] == "AWS::SageMaker::InferenceComponent":
                            out[c["Properties"]["Specification"]["ModelName"]["Fn::GetAtt"][0]] = v["InstanceType"]
        if r["Type"] == "AWS::StepFunctions::StateMachine":
            text = json.dumps(r["Properties"]["DefinitionString"])
            found = re.search(r'"Fn::GetAtt": \["(\w+)", "ModelName"\]', text)
            if found is None:  # a batch drained through the async endpoint names no model (test_hosts.py)
                continue
            model = found.group(1)
            out[model] = re.search(r'\\"InstanceType\\":\\"(ml\.[a-z0-9.]+)\\"', text).group(1)
    return out


def _check_model(logical: str, props: dict, itype: str | None, heads: int) -> list[str]:
    c = props["PrimaryContainer"]
    env, kind = c.get("Environment", {}), _container(c["Image"])
    problems = []
    if kind in ("vllm", "vllm-neuronx"):
        model = env.get("SM_VLLM_MODEL") if kind == "vllm" else env.get("SM_ON_MODEL")
        if model != "/opt/ml/model":
            problems.append("the model must be the directory SageMaker fills (/opt/ml/model)")
        source = c.get("ModelDataSource", {}).get("S3DataSource", {})
        if (source.get("S3DataType"), source.get("CompressionType")) != ("S3Prefix", "None"):
            problems.append("an LLM directory is served uncompressed from an S3 prefix")
        acc = load_catalog().types[itype.removeprefix("ml.")].accelerator
        if kind == "vllm":
            shards = int(env.get("SM_VLLM_TENSOR_PARALLEL_SIZE", 0))
            if not (1 <= shards <= acc.count and heads % shards == 0):
                problems.append(f"SM_VLLM_TENSOR_PARALLEL_SIZE={shards}: 1..{acc.count} GPUs of {itype}, dividing "
                                f"{heads} heads")
            if not int(env.get("SM_VLLM_MAX_MODEL_LEN", 0)) > 0 or not int(env.get("SM_VLLM_MAX_NUM_SEQS", 0)) > 0:
                problems.append("SM_VLLM_MAX_MODEL_LEN and SM_VLLM_MAX_NUM_SEQS bound the sequences vLLM admits")
            if any(k.startswith(("HF_NUM", "MAX_", "SM_NUM")) for k in env):
                problems.append(f"TGI settings vLLM ignores: {sorted(env)}")
        else:
            missing = [k for k in NEURON_ENV if k not in env]
            if missing:
                problems.append(f"missing {missing}: serve then takes the export's values unchecked, or looks the "
                                "model up on the Hub")
            cores = int(env.get("SM_ON_TENSOR_PARALLEL_SIZE", 0))
            # Neuron pads attention heads: any core count dividing the instance's (Hugging Face compiles 64-head
            # Llama-3.3-70B for all 24 cores of inf2.48xlarge).
            if not (1 <= cores <= acc.count * 2 and (acc.count * 2) % cores == 0):
                problems.append(f"SM_ON_TENSOR_PARALLEL_SIZE={cores}: up to {acc.count * 2} NeuronCores of {itype}, "
                                "dividing them")
            if not int(env.get("SM_ON_BATCH_SIZE", 0)) > 0 or not int(env.get("SM_ON_SEQUENCE_LENGTH", 0)) > 0:
                problems.append("SM_ON_BATCH_SIZE and SM_ON_SEQUENCE_LENGTH are the export's compiled shapes")
            if any(k.startswith(("HF_NUM", "MAX_", "SM_VLLM")) for k in env):
                problems.append(f"settings optimum-neuron's serve ignores: {sorted(env)}")
    else:
        if not str(json.dumps(c.get("ModelDataUrl", ""))).endswith('.tar.gz"]]}'):
            problems.append(f"{kind} reads a model.tar.gz through ModelDataUrl")
        if kind == "sklearn" and env.get("SAGEMAKER_PROGRAM") != "inference.py":
            problems.append("SAGEMAKER_PROGRAM names the handler in code/")
        if kind == "ray-serve" and not re.fullmatch(r"[A-Za-z_]\w*:[A-Za-z_]\w*", env.get("SM_RAYSERVE_APP", "")):
            problems.append("SM_RAYSERVE_APP names the Ray Serve application (module:app) when no config.yaml is there")
    return [f"{logical} ({kind} on {itype}): {p}" for p in problems]


@pytest.mark.parametrize("variant", SERVING_VARIANTS)
def test_every_model_carries_what_its_container_needs(synth, variant):
    workload, overrides = VARIANTS[variant]
    s = synth(workload, overrides)
    heads = load(workload, overrides).model.attention_heads or 0
    template = s.templates["InferenceStack"]
    types = _instance_types(template)
    problems = []
    for logical, r in template["Resources"].items():
        if r["Type"] == "AWS::SageMaker::Model":
            problems += _check_model(logical, r["Properties"], types.get(logical), heads)
    assert not problems, "\n".join(problems)


# "GPU deployments require inference_ami_version — the default SageMaker host AMI has incompatible NVIDIA drivers"
# (aws/deep-learning-containers docs/vllm/ and docs/ray/deployment/sagemaker.md). The Ray example's gpu-3-1 (driver 550)
# runs its CUDA 12.9 build; the vLLM build is CUDA 13.0 since v2.0 ("requires NVIDIA driver 580+", docs/vllm/changelog),
# which only gpu-4-1 has (SageMaker API Reference, ProductionVariant).
HOST_AMI = {"vllm": "al2023-ami-sagemaker-inference-gpu-4-1", "ray-serve": "al2-ami-sagemaker-inference-gpu-3-1"}


def _component_model(template: dict, config: str) -> dict:
    """The model an Inference Components endpoint config serves: its variant names none, its component does."""
    endpoints = [lid for lid, r in template["Resources"].items() if r["Type"] == "AWS::SageMaker::Endpoint"
                 and config in json.dumps(r["Properties"]["EndpointConfigName"])]
    model, = [r["Properties"]["Specification"]["ModelName"] for r in template["Resources"].values()
              if r["Type"] == "AWS::SageMaker::InferenceComponent" and endpoints
              and endpoints[0] in json.dumps(r["Properties"]["EndpointName"])]
    return model


@pytest.mark.parametrize("variant", SERVING_VARIANTS)
def test_gpu_endpoints_of_the_cuda_dlcs_ask_for_their_host_ami(synth, variant):
    workload, overrides = VARIANTS[variant]
    template = synth(workload, overrides).templates["InferenceStack"]
    images = {logical: r["Properties"]["PrimaryContainer"]["Image"] for logical, r in template["Resources"].items()
              if r["Type"] == "AWS::SageMaker::Model"}
    problems = []
    for logical, r in template["Resources"].items():
        if r["Type"] != "AWS::SageMaker::EndpointConfig":
            continue
        for v in r["Properties"]["ProductionVariants"]:
            itype = v.get("InstanceType")
            model = v.get("ModelName") or _component_model(template, logical)
            kind = _container(images[model["Fn::GetAtt"][0]])
            acc = load_catalog().types[itype.removeprefix("ml.")].accelerator if itype else None
            wanted = HOST_AMI.get(kind) if acc and acc.kind == "nvidia-gpu" else \
                neuron_hosting.inference_ami() if acc and acc.kind == "inferentia" else None
            if v.get("InferenceAmiVersion") != wanted:
                problems.append(f"{logical} ({kind} on {itype}): InferenceAmiVersion {v.get('InferenceAmiVersion')}, "
                                f"wanted {wanted}")
    assert not problems, "\n".join(problems)


def test_neuron_export_and_gpu_weights_live_apart(synth):
    s = synth("huge")
    uris = {}
    for logical, r in s.resources("InferenceStack", "AWS::SageMaker::Model").items():
        c = r["Properties"]["PrimaryContainer"]
        uris[_container(c["Image"])] = json.dumps(c["ModelDataSource"]["S3DataSource"]["S3Uri"])
    assert set(uris) == {"vllm-neuronx", "vllm"} and uris["vllm-neuronx"] != uris["vllm"]


def test_llm_batch_sends_one_record_per_request(synth):
    """huge's GPU LLM batch drains through the async endpoint (no transform host runs the vLLM DLC): one object a
    request, sent with the content type vLLM's /invocations reads (one JSON document)."""
    machine = json.dumps(synth("huge").one("InferenceStack", "AWS::StepFunctions::StateMachine")["Properties"])
    assert "invokeEndpointAsync" in machine and '\\"ContentType\\":\\"application/json\\"' in machine
    assert REQUESTS["vllm"].records == "one" and REQUESTS["vllm"].content_type == "application/json"


def test_the_plan_shows_container_artifact_and_environment_per_kind():
    p = plan(load("huge"))
    for kind, ip in p.inference.items():
        assert ip.serving and ip.serving.container and ip.serving.artifact_key and ip.serving.environment, kind
    out = subprocess.run([sys.executable, "-m", "workloads", "plan", "huge", "--full"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    tp = p.inference["realtime"].serving.tensor_parallel
    assert "Serving contract" in out and f"SM_ON_TENSOR_PARALLEL_SIZE={tp}" in out and "optimum-cli export neuron" in out
    data = json.loads(subprocess.run([sys.executable, "-m", "workloads", "plan", "huge", "--json"], cwd=ROOT,
                                     capture_output=True, text=True, check=True).stdout)
    assert data["inference"]["realtime"]["serving"]["environment"]["SM_ON_MODEL"] == "/opt/ml/model"


@pytest.mark.parametrize("params, heads, itype, degree", [
    (70, 64, "inf2.48xlarge", 24),   # all 24 NeuronCores: Neuron pads the 64 heads (Hugging Face serves 70B so)
    (3, 24, "inf2.xlarge", 2),
    (34, 64, "inf2.8xlarge", None),  # 2 cores x 16 GiB cannot hold 63 GiB of weights
    (70, 64, "g5.48xlarge", 8),
    (13, 40, "g5.12xlarge", 4),
])
def test_tensor_parallel_degree_is_the_containers_and_holds_the_weights(params, heads, itype, degree):
    from workloads.planning.contracts import REQUESTS, tensor_parallel

    assert tensor_parallel(params, heads, load_catalog().types[itype]) == degree


@pytest.mark.parametrize("workload, overrides, field", [
    ("intermediate", {"inference.serverless.memory_mb": "6144", "model.parameters_billion": "1"}, "inference.serverless"),
    ("intermediate", {"inference.artifact.format": "xgboost"}, "inference.artifact.format"),
    ("small", {"inference.artifact.key": "models/booster/"}, "inference.artifact.key"),
    ("intermediate", {"inference.realtime.artifact_key": "models/llm.tar.gz"}, "inference.realtime.artifact_key"),
    ("huge", {"inference.realtime.artifact_key": "models/llm/"}, "inference.async.artifact_key"),
    ("intermediate", {"inference.realtime.instance_type": "ml.m5.xlarge"}, "inference.realtime.instance_type"),
    ("huge", {"inference.realtime.instance_type": "ml.inf2.8xlarge"}, "inference.realtime.instance_type"),
    ("intermediate", {"inference.async.instance_type": "ml.p3.2xlarge"}, "inference.async.instance_type"),  # V100
    ("intermediate", {"inference.generation.max_input_tokens": "4096"}, "inference.generation"),
])
def test_a_config_no_container_can_serve_is_refused_with_the_field(workload, overrides, field):
    with pytest.raises(ConfigError) as err:
        plan(load(workload, overrides))
    assert err.value.field == field, str(err.value)


def test_each_kind_may_have_its_own_artifact():
    p = plan(load("small", {"inference.batch.artifact_key": "models/batch/model.tar.gz"}))
    assert p.inference["batch"].serving.artifact_key == "models/batch/model.tar.gz"
    assert p.inference["realtime"].serving.artifact_key == "models/model.tar.gz"


def test_vllm_runs_on_turing_or_newer_in_bfloat16_where_the_gpu_has_it():
    """vLLM needs compute capability 7.5 or newer (vLLM docs, GPU installation): V100 types are refused for an LLM,
    naming the field; T4 serves in float16, every GPU with a bf16 peak in bfloat16."""
    from workloads.planning.contracts import VLLM_TOO_OLD, plan_serving

    w = load("intermediate", {"model.parameters_billion": "1", "model.attention_heads": "32"})
    refused = served = 0
    for itype in load_catalog().types.values():
        if not (itype.accelerator and itype.accelerator.kind == "nvidia-gpu" and itype.on_sagemaker):
            continue
        if itype.accelerator.model in VLLM_TOO_OLD:
            with pytest.raises(ConfigError) as err:
                plan_serving("realtime", w, itype)
            assert err.value.field == "inference.realtime.instance_type" and "7.5" in str(err.value)
            refused += 1
        else:
            dtype = "bfloat16" if itype.peak_tflops_dtype == "bf16" else "float16"
            assert plan_serving("realtime", w, itype).environment["SM_VLLM_DTYPE"] == dtype, itype.name
            served += 1
    assert refused and served, "the catalog should hold GPUs on both sides of the rule"


@pytest.mark.parametrize("workload", ["intermediate", "huge"])
def test_no_llm_is_planned_on_v100(workload):
    """The planner never picks a V100 for a Hugging Face LLM, nor shows one among the candidates."""
    from workloads.planning.contracts import VLLM_TOO_OLD

    names = {t.name: t for t in load_catalog().types.values()}
    for ip in plan(load(workload)).inference.values():
        for c in (*ip.candidates, ip):
            t = names.get((c.instance_type or "").removeprefix("ml."))
            assert t is None or t.accelerator is None or t.accelerator.model not in VLLM_TOO_OLD, c.instance_type
