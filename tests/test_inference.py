"""Issue 5: inference kinds chosen and sized from the workload, their limits and their templates
(`python -m workloads invoke` against the emulator is in test_emulator_contract.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from workloads import ConfigError, load, plan

from .conftest import ROOT, VARIANTS

NO_KINDS = {"inference.realtime": "null", "inference.serverless": "null", "inference.batch": "null"}


@pytest.mark.parametrize("overrides, kind", [
    ({"inference.traffic": "steady"}, "realtime"),
    ({"inference.traffic": "spiky"}, "serverless"),
    ({"inference.traffic": "spiky", "inference.latency_ms": "100"}, "realtime"),
    ({"inference.traffic": "periodic"}, "batch"),
    ({"inference.payload_mb": "50"}, "async"),
    ({"inference.processing_seconds": "300"}, "async"),
    ({"inference.traffic": "rare", "model.parameters_billion": "7", "model.framework": "pytorch"}, "async"),
])
def test_kinds_follow_the_traffic(overrides, kind):
    p = plan(load("small", {**NO_KINDS, **overrides}))
    assert list(p.inference) == [kind]
    assert "(seeds)" in p.inference[kind].why_kind


def test_serverless_memory_is_sized_for_the_model():
    p = plan(load("small", {**NO_KINDS, "inference.traffic": "spiky", "model.framework": "pytorch",
                            "model.parameters_billion": "1"}))
    assert p.inference["serverless"].memory_mb == 5120  # 1B fp32 = 3.7 GiB, in 80% of memory


@pytest.mark.parametrize("overrides, field, fragment", [
    ({"inference.payload_mb": "10"}, "inference.payload_mb", "at most 6 MB for realtime"),
    ({"inference.processing_seconds": "120"}, "inference.processing_seconds", "at most 60 s for realtime"),
    ({"inference.realtime": "null", "inference.payload_mb": "5"}, "inference.payload_mb", "at most 4 MB for serverless"),
    ({"inference.serverless.memory_mb": "1500"}, "inference.serverless.memory_mb", "multiple of 1024"),
    ({"inference.serverless.max_concurrency": "201"}, "inference.serverless.max_concurrency", "200"),
    ({"inference.serverless.provisioned_concurrency": "30"}, "inference.serverless",
     "provisioned_concurrency 30 exceeds max_concurrency 20"),
    ({"inference.processing_seconds": "4000"}, "inference.processing_seconds", "less than or equal to 3600"),
    ({"inference.payload_mb": "2048"}, "inference.payload_mb", "less than or equal to 1024"),
    ({"inference.batch.max_payload_mb": "101"}, "inference.batch.max_payload_mb", "less than or equal to 100"),
    ({"inference.batch.max_payload_mb": "20", "inference.batch.max_concurrent_transforms": "6"},
     "inference.batch", "max_concurrent_transforms x max_payload_mb = 120 MB exceeds 100 MB"),
])
def test_limits_are_refused_with_the_field_named(overrides, field, fragment):
    with pytest.raises(ConfigError) as err:
        load("small", overrides)
    assert str(err.value).startswith(f"{field} = ") and fragment in str(err.value), str(err.value)


def test_async_allows_what_real_time_cannot():
    p = plan(load("small", {**NO_KINDS, "inference.async.max_instances": "2", "inference.payload_mb": "500",
                            "inference.processing_seconds": "1800"}))
    assert list(p.inference) == ["async"]


def test_plan_shows_cost_per_kind():
    p = plan(load("huge"))
    for kind in ("realtime", "async", "batch"):
        ip = p.inference[kind]
        assert ip.instance_type.startswith("ml.") and ip.usd_per_hour_max >= ip.usd_per_hour_min
        assert ip.requests_per_second_per_instance > 0 and ip.usd_per_million > 0
    s = plan(load("small")).inference["serverless"]
    assert s.instance_type is None and s.usd_per_million == pytest.approx(2 * 0.5 * 0.00002 * 1e6)
    out = subprocess.run([sys.executable, "-m", "workloads", "plan", "small"], cwd=ROOT, capture_output=True, text=True)
    assert "$ per million requests" in out.stdout and "req/s/instance" in out.stdout


def _props(s, rtype, prefix):
    found = [v for k, v in s.resources("InferenceStack", rtype).items() if k.startswith(prefix)]
    assert len(found) == 1, (rtype, prefix)
    return found[0]["Properties"]


def test_serverless_endpoint(synth):
    s = synth("small", {"inference.serverless.provisioned_concurrency": "5"})
    config = _props(s, "AWS::SageMaker::EndpointConfig", "ServerlessConfig")
    assert config["ProductionVariants"][0]["ServerlessConfig"] == {
        "MemorySizeInMB": 2048, "MaxConcurrency": 20, "ProvisionedConcurrency": 5}
    # Serverless takes the data key: KmsKeyId is refused only for instance types with local storage (issue 25).
    assert "DataKey" in json.dumps(config["KmsKeyId"]) and "InstanceType" not in config["ProductionVariants"][0]
    model = _props(s, "AWS::SageMaker::Model", "ServerlessModel")
    assert "VpcConfig" not in model and model["EnableNetworkIsolation"] is False
    assert "cpu" in model["PrimaryContainer"]["Image"] or "xgboost" in model["PrimaryContainer"]["Image"]


def test_realtime_data_capture(synth):
    s = synth("huge", {"inference.realtime.data_capture_percent": "20"})
    capture = _props(s, "AWS::SageMaker::EndpointConfig", "RealtimeConfig")["DataCaptureConfig"]
    assert capture["InitialSamplingPercentage"] == 20 and capture["EnableCapture"] is True
    assert "inference/capture/" in json.dumps(capture["DestinationS3Uri"])


def test_async_endpoint_scales_to_zero_with_both_policies(synth):
    s = synth("huge")
    config = _props(s, "AWS::SageMaker::EndpointConfig", "AsyncConfig")
    asyncc = config["AsyncInferenceConfig"]
    out = asyncc["OutputConfig"]
    assert "inference/async/output/" in json.dumps(out["S3OutputPath"])
    assert "inference/async/failure/" in json.dumps(out["S3FailurePath"])
    assert out["KmsKeyId"] and set(out["NotificationConfig"]) == {"SuccessTopic", "ErrorTopic"}
    assert asyncc["ClientConfig"]["MaxConcurrentInvocationsPerInstance"] == 4
    assert "KmsKeyId" not in config  # g5 has local NVMe
    for topic in s.resources("InferenceStack", "AWS::SNS::Topic").values():
        assert "KmsMasterKeyId" in topic["Properties"]
    policies = [p["Properties"]["PolicyDocument"]["Statement"] for p in s.resources("InferenceStack", "AWS::SNS::TopicPolicy").values()]
    assert len(policies) == 2 and all(any(st["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for st in p)
                                      for p in policies)
    target = _props(s, "AWS::ApplicationAutoScaling::ScalableTarget", "AsyncScaling")
    assert (target["MinCapacity"], target["MaxCapacity"]) == (0, 4)
    scaling = [v["Properties"] for k, v in s.resources("InferenceStack", "AWS::ApplicationAutoScaling::ScalingPolicy").items()
               if k.startswith("AsyncScaling")]
    tracking = [p for p in scaling if p["PolicyType"] == "TargetTrackingScaling"]
    steps = [p for p in scaling if p["PolicyType"] == "StepScaling"]
    assert tracking[0]["TargetTrackingScalingPolicyConfiguration"]["CustomizedMetricSpecification"]["MetricName"] \
        == "ApproximateBacklogSizePerInstance"
    assert steps
    alarms = [a["Properties"] for a in s.resources("InferenceStack", "AWS::CloudWatch::Alarm").values()]
    assert any(a["MetricName"] == "HasBacklogWithoutCapacity" for a in alarms)


def test_batch_transform_runs_on_a_schedule_with_unique_job_names(synth):
    s = synth("huge")
    machine = s.one("InferenceStack", "AWS::StepFunctions::StateMachine")["Properties"]
    definition = json.dumps(machine["DefinitionString"])
    assert "createTransformJob.sync" in definition and "$$.Execution.Name" in definition
    assert "States.Format" in definition and plan(load("huge")).inference["batch"].instance_type in definition
    assert machine["LoggingConfiguration"]["Level"] == "ALL" and machine["TracingConfiguration"]["Enabled"] is True
    schedule = s.one("InferenceStack", "AWS::Scheduler::Schedule")["Properties"]
    assert schedule["ScheduleExpression"] == "cron(0 2 * * ? *)"
    assert "BatchStateMachine" in json.dumps(schedule["Target"]["Arn"])
    roles = s.resources("InferenceStack", "AWS::IAM::Role")
    assert not any("ManagedPolicyArns" in r["Properties"] for r in roles.values())  # no SageMakerFullAccess


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_real_time_scaling_tracks_the_plans_invocations_per_instance(synth, variant):
    workload, overrides = VARIANTS[variant]
    realtime = plan(load(workload, overrides)).inference.get("realtime")
    policies = [r["Properties"] for lid, r in synth(workload, overrides).resources(
        "InferenceStack", "AWS::ApplicationAutoScaling::ScalingPolicy").items() if lid.startswith("RealtimeScaling")]
    if realtime is None:
        assert not policies
        return
    (policy,) = policies
    config = policy["TargetTrackingScalingPolicyConfiguration"]
    assert config["PredefinedMetricSpecification"]["PredefinedMetricType"] == "SageMakerVariantInvocationsPerInstance"
    assert config["TargetValue"] == realtime.invocations_per_instance
