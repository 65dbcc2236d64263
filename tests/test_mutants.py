"""Issue 44: tests that kill the mutants a hand-made mutation audit left alive (snapshot tests aside). Each test
names the bug it catches."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from workloads import load, plan

from workloads.planning.storage import PER_UNIT_MB_S, size_fsx


# FSx's throughput is per TiB (1024 GiB): a planner that took a TiB as GiB/1000 picked 125 MB/s/TiB for a 1200 GiB
# file system that then gives 146.5 MB/s against 148 needed (the audit's 3.7B plan).
@pytest.mark.parametrize("tenths", range(1, 400, 3))
def test_the_chosen_fsx_throughput_covers_the_need(tenths):
    f = size_fsx(dataset_gib=100, parameters_billion=tenths / 10, epochs=1, training_hours=1000)
    assert f.throughput_mb_s == pytest.approx(f.storage_capacity_gib / 1024 * f.per_unit_mb_s)
    assert f.throughput_mb_s >= max(f.read_need_mb_s, f.checkpoint_need_mb_s)
    # and no cheaper tier would have done: the chosen one is the lowest that covers the need
    lower = [u for u in PER_UNIT_MB_S if u < f.per_unit_mb_s]
    assert all(f.storage_capacity_gib / 1024 * u < max(f.read_need_mb_s, f.checkpoint_need_mb_s) for u in lower)


def test_the_audits_3_7b_plan_is_in_the_range_above():
    f = size_fsx(dataset_gib=100, parameters_billion=3.7, epochs=1, training_hours=1000)
    assert f.throughput_mb_s >= f.checkpoint_need_mb_s


# EFS is priced per GB-month (decimal): a month of N GiB is N x 1.073741824 GB. Pricing it per GiB bills 7% short.
@pytest.mark.parametrize("overrides", [{"data.shared_home": "true"},
                                       {"data.storage": "efs", "data.dataset_size_gib": "500"}])
def test_efs_is_priced_per_decimal_gb(overrides):
    from workloads import load, plan
    from workloads.planning.estimates import load_services

    w = load("huge" if "data.shared_home" in overrides else "small", overrides)
    (line,) = [ln for ln in plan(w).monthly.lines if ln.item == "EFS"]
    gib = float(line.quantity.split(" GiB")[0].replace(",", ""))
    price = load_services()["efs_standard"]["usd_per_gb_month"]
    assert line.usd == pytest.approx(gib * 2**30 / 1e9 * price, rel=1e-3)
    assert line.usd > gib * price * 1.05


# `invoke` sends the content type it is given (the serving contract's, or --content-type), on every path: a
# ContentType hard-coded to JSON breaks every CSV (XGBoost, scikit-learn) endpoint.
@pytest.mark.parametrize("kind", ["realtime", "serverless", "async"])
def test_invoke_sends_the_content_type_it_is_given(kind, monkeypatch):
    import io
    import sys
    import types

    from workloads import load, plan
    from workloads.commands import invoke as module

    p = plan(load("small", {"inference.async.max_instances": "2"}))
    assert kind in p.inference, list(p.inference)
    sent = []

    class Client:
        def __init__(self, service, **_):
            self.service = service

        def invoke_endpoint(self, **params):
            sent.append(("invoke_endpoint", params["ContentType"]))
            return {"Body": io.BytesIO(b"ok")}

        def invoke_endpoint_async(self, **params):
            sent.append(("invoke_endpoint_async", params["ContentType"]))
            return {"OutputLocation": "s3://b/out/1.out"}

        def put_object(self, **params):
            sent.append(("put_object", params["ContentType"]))

        def get_object(self, **_):
            return {"Body": io.BytesIO(b"ok")}

    monkeypatch.setitem(sys.modules, "boto3", types.SimpleNamespace(client=lambda service, **kw: Client(service)))
    outputs = {key: "x" for key in ("RealtimeEndpointName", "ServerlessEndpointName", "AsyncEndpointName",
                                    "DatasetBucketName", "AsyncInputPrefix", module.COMPONENT_KEY)}
    outputs.update({module.OUTPUT_KEYS[kind]: "endpoint"})
    monkeypatch.setattr(module, "stack_outputs", lambda *a, **kw: outputs)
    answer = module.invoke(p, kind=kind, body=b"1,2,3\n", content_type="text/csv", poll_s=0, timeout_s=5)
    assert answer.body == b"ok"
    assert sent and all(content_type == "text/csv" for _, content_type in sent), sent


# The alarm topic and its key admit CloudWatch only on behalf of this account's alarms (the confused-deputy
# conditions aws:SourceAccount and aws:SourceArn): without them any account's alarm could publish to our topic.
def test_the_alarm_topic_takes_only_this_accounts_alarms(synth):
    from .contract_policy import Call, Principal, evaluate
    from .test_runtime_contract import world_of

    world = world_of(synth("huge"))
    train = next(st.stack_name for st in world.stacks.values() if st.name == "TrainStack")  # as CloudFormation names it
    topic = world.arn("NetworkStack/Alarms/Topic/Resource", "AWS::SNS::Topic")
    key = world.arn("NetworkStack/Alarms/Key/Resource", "AWS::KMS::Key")
    region, account = topic.split(":")[3], topic.split(":")[4]
    cloudwatch = Principal(arn="cloudwatch.amazonaws.com", account="", identity=[], service="cloudwatch.amazonaws.com")
    ours = {"aws:SourceAccount": account,
            "aws:SourceArn": f"arn:aws:cloudwatch:{region}:{account}:alarm:{train}-MonitorIdle1A2B3C-AbCdEf123456"}
    theirs = {"aws:SourceAccount": "999999999999", "aws:SourceArn": f"arn:aws:cloudwatch:{region}:999999999999:alarm:x"}
    spoofed = {"aws:SourceAccount": account, "aws:SourceArn": theirs["aws:SourceArn"]}
    for action, resource in (("sns:Publish", topic), ("kms:GenerateDataKey", key), ("kms:Decrypt", key)):
        decision = evaluate(cloudwatch, Call(action, resource, "alarm actions", context=ours), world)
        assert decision.allowed, (action, decision.reason)
        for context in (theirs, spoofed, {}):
            assert not evaluate(cloudwatch, Call(action, resource, "confused deputy", context=context),
                                world).allowed, (action, context)


# A SageMaker job's volume holds the local checkpoints SageMaker syncs, as many as the plan keeps: a volume that
# ignored the kept count runs out of disk at the second checkpoint. Only types without local NVMe take a volume
# (every GPU type in the catalog has NVMe), so volume_gb is called directly on a plan whose type is made EBS-only.
def test_the_job_volume_grows_with_the_checkpoints_kept(monkeypatch):
    import dataclasses

    import workloads.catalog as catalog
    from workloads import load, plan
    from workloads.commands import jobs
    from workloads.planning.storage import CHECKPOINT_BYTES_PER_PARAM

    p = plan(load("intermediate"))
    assert p.training.orchestrator == "sagemaker-jobs" and p.training.parallelism is not None
    real = catalog.load_catalog()
    ebs_only = dataclasses.replace(real.get(p.training.instance_type), local_nvme=None)
    monkeypatch.setattr(catalog, "load_catalog", lambda: type("C", (), {"get": staticmethod(lambda name: ebs_only)})())

    def volume(keep: int) -> int:
        parallelism = dataclasses.replace(p.training.parallelism, keep_checkpoints=keep)
        return jobs.volume_gb(dataclasses.replace(p, training=dataclasses.replace(p.training, parallelism=parallelism)),
                              llm_trainer=True)
    one, three = volume(1), volume(3)
    checkpoint_gb = CHECKPOINT_BYTES_PER_PARAM * p.workload.model.parameters_billion
    assert three - one == pytest.approx(2 * checkpoint_gb * 1.1, abs=2)
    assert one >= math.ceil(checkpoint_gb)


# A team's notebook is an instance its estate launches: its family must be among the team's allowed families (the
# ML users' instance-type condition would refuse it otherwise). Left out, a team without t3 deployed a notebook its
# own guardrails then refused.
def test_a_teams_needed_types_include_its_notebook():
    from workloads import load, plan
    from workloads.planning.teams import needed_instance_types

    p = plan(load("huge", {"notebook.idle_minutes": "30", "notebook.instance_type": "ml.m5.xlarge"}))
    assert p.workload.notebook is not None
    other = {p.training.instance_type, *(i.instance_type for i in p.inference.values() if i.instance_type)}
    assert not any(t.removeprefix("ml.").startswith("m5.") for t in other)  # only the notebook is m5
    assert "m5.xlarge" in needed_instance_types(p)


# An inference component reserves its copy's tensor-parallel degree of accelerators; asking for copies-per-instance
# devices instead (the same number on a one-GPU instance) leaves a TP 4 model with one GPU. On ml.g5.12xlarge the
# plan serves one copy of TP 4: devices x copies fill the instance's GPUs, never more (catalog accelerators).
def test_a_component_asks_for_its_tensor_parallel_degree_of_devices(synth):
    from workloads.catalog import load_catalog

    overrides = {"inference.realtime.instance_type": "ml.g5.12xlarge"}
    rt = plan(load("intermediate", overrides)).inference["realtime"]
    assert rt.serving.tensor_parallel != rt.copies_per_instance, "the case must tell the two apart"
    resources = synth("intermediate", overrides).templates["InferenceStack"]["Resources"]
    [component] = [r for r in resources.values() if r["Type"] == "AWS::SageMaker::InferenceComponent"]
    devices = component["Properties"]["Specification"]["ComputeResourceRequirements"][
        "NumberOfAcceleratorDevicesRequired"]
    gpus = load_catalog().get(rt.instance_type.removeprefix("ml.")).accelerator.count
    assert devices == rt.serving.tensor_parallel == 4
    assert devices * rt.copies_per_instance <= gpus


# Each micro-step's loss is divided by the number of micro-steps before backward, so the accumulated gradient is the
# global batch's mean: without it the losses still match and the gradient norm doubles at two micro-steps (the
# audit: 2.92 against 1.46). One rank at batch 2 and one rank at batch 1 with two micro-steps see the same sequences.
@pytest.mark.trainer
def test_two_micro_steps_give_the_gradient_of_one_step_at_twice_the_batch(tmp_path):
    from .test_trainer import _torchrun

    def norms(out: str) -> dict[int, float]:
        return {int(m[1]): float(m[2]) for m in re.finditer(r"^step (\d+) loss [0-9.]+ .*grad norm ([0-9.]+)", out,
                                                             re.M)}

    one = _torchrun(tmp_path, "--steps", "2", "--checkpoint-dir", str(tmp_path / "a"), ranks=1, batch=2)
    two = _torchrun(tmp_path, "--steps", "2", "--checkpoint-dir", str(tmp_path / "b"), "--global-batch", "2",
                    ranks=1, batch=1)
    a, b = norms(one), norms(two)
    assert sorted(a) == [1, 2] and all(b[k] == pytest.approx(a[k], rel=1e-3) for k in a), (a, b)


# prepare.py ends every document with the tokenizer's eos_token: without it documents run into each other and the
# model learns to continue one with the next. Three documents give three EOS ids, each right after its document.
def test_prepare_ends_every_document_with_eos(tmp_path):
    import importlib.util

    import numpy as np

    from .golden import train_tokenizer, write_corpus

    tokenizer_dir = train_tokenizer(write_corpus(tmp_path / "corpus"), tmp_path / "tok")
    spec = importlib.util.spec_from_file_location("prepare", Path(__file__).resolve().parent.parent / "examples"
                                                  / "slurm" / "prepare.py")
    prepare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prepare)
    info = prepare.meta(tokenizer_dir, 1)
    docs = ["The plan says what it costs.", "A second document.", "And a third one here."]
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    target = tmp_path / "shard.bin"
    count = prepare.tokenize(source, target, tokenizer_dir, info, 0)
    ids = np.fromfile(target, dtype=info["dtype"]).tolist()
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    expected = [i for d in docs for i in (*tokenizer.encode(d).ids, info["eos_id"])]
    assert count == len(ids) and ids == expected
    assert ids.count(info["eos_id"]) == len(docs) and ids[-1] == info["eos_id"]


# promote copies a job's model to the serving keys that read it as the job wrote it. A Neuron (vllm-neuronx) key
# needs a Neuron export (NxD Inference compiles the model for the Neuron cores): a plain copy there is a model the
# endpoint cannot load. With real-time on ml.inf2, only the GPU kinds' key gets the job's files.
def test_promote_leaves_the_neuron_key_to_a_neuron_export():
    from workloads.commands import jobs

    p = plan(load("intermediate", {"inference.realtime.instance_type": "ml.inf2.xlarge"}))
    containers = {k: (ip.serving.container, ip.serving.artifact_key) for k, ip in p.inference.items() if ip.serving}
    assert containers["realtime"][0] == "vllm-neuronx"
    neuron_key = containers["realtime"][1]
    gpu_keys = {key for container, key in containers.values() if container != "vllm-neuronx"}
    assert gpu_keys and neuron_key not in gpu_keys
    estate = jobs.Estate(region="us-east-1", role_arn="arn:aws:iam::1:role/r", bucket="b", subnets=("subnet-1",),
                         security_groups=("sg-1",))
    files = ["output/j/output/model/config.json", "output/j/output/model/model.safetensors"]

    class Job:
        def describe_training_job(self, TrainingJobName):
            return {"TrainingJobName": TrainingJobName, "TrainingJobStatus": "Completed",
                    "OutputDataConfig": {"S3OutputPath": "s3://b/output/", "CompressionType": "NONE"}}

    class Bucket:
        copied: list[str] = []

        def get_paginator(self, _):
            class Pages:
                def paginate(self, Bucket, Prefix):
                    return [{"Contents": [{"Key": f} for f in files if f.startswith(Prefix)]}]
            return Pages()

        def copy_object(self, *, Bucket, Key, CopySource):
            self.copied.append(Key)

    bucket = Bucket()
    lines = jobs.promote(p, job_name="j", estate=estate, sagemaker=Job(), s3=bucket)
    assert len(lines) == len(gpu_keys)
    assert sorted(bucket.copied) == sorted(k + f.rsplit("/", 1)[1] for k in gpu_keys for f in files)
    assert not [k for k in bucket.copied if k.startswith(neuron_key)]
