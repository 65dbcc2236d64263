"""Issue 44: tests that kill the mutants a hand-made mutation audit left alive (snapshot tests aside). Each test
names the bug it catches."""

from __future__ import annotations

import math

import pytest

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
    topic = world.arn("NetworkStack/Alarms/Topic/Resource", "AWS::SNS::Topic")
    key = world.arn("NetworkStack/Alarms/Key/Resource", "AWS::KMS::Key")
    region, account = topic.split(":")[3], topic.split(":")[4]
    cloudwatch = Principal(arn="cloudwatch.amazonaws.com", account="", identity=[], service="cloudwatch.amazonaws.com")
    ours = {"aws:SourceAccount": account, "aws:SourceArn": f"arn:aws:cloudwatch:{region}:{account}:alarm:idle"}
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
