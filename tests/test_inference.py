"""Issue 5: the inference templates (kinds chosen and sized by the planner are tested in test_plan_serving.py;
`python -m workloads invoke` against the emulator is in test_emulator_contract.py)."""

from __future__ import annotations

import json

import pytest

from workloads import load, plan

from .conftest import SERVING_VARIANTS, VARIANTS


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
    # The server's batch, not a fixed 4 (tests/test_async_client.py holds every async endpoint to its plan).
    assert asyncc["ClientConfig"]["MaxConcurrentInvocationsPerInstance"] == plan(load("huge")).inference["async"].concurrency
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
    s = synth("small")  # huge's LLM batch drains through its async endpoint (tests/test_hosts.py)
    machine = s.one("InferenceStack", "AWS::StepFunctions::StateMachine")["Properties"]
    definition = json.dumps(machine["DefinitionString"])
    assert "createTransformJob.sync" in definition and "$$.Execution.Name" in definition
    assert "States.Format" in definition and plan(load("small")).inference["batch"].instance_type in definition
    assert machine["LoggingConfiguration"]["Level"] == "ALL" and machine["TracingConfiguration"]["Enabled"] is True
    schedule = s.one("InferenceStack", "AWS::Scheduler::Schedule")["Properties"]
    assert schedule["ScheduleExpression"] == "cron(0 2 * * ? *)"
    assert "BatchStateMachine" in json.dumps(schedule["Target"]["Arn"])
    roles = s.resources("InferenceStack", "AWS::IAM::Role")
    assert not any("ManagedPolicyArns" in r["Properties"] for r in roles.values())  # no SageMakerFullAccess


@pytest.mark.parametrize("variant", SERVING_VARIANTS)
def test_real_time_scaling_tracks_the_plans_invocations_per_instance(synth, variant):
    workload, overrides = VARIANTS[variant]
    realtime = plan(load(workload, overrides)).inference.get("realtime")
    policies = [r["Properties"] for lid, r in synth(workload, overrides).resources(
        "InferenceStack", "AWS::ApplicationAutoScaling::ScalingPolicy").items() if lid.startswith("RealtimeScaling")]
    if realtime is None:
        assert not policies
        return
    if realtime.copies_per_instance is not None:  # copies scale instead (tests/test_inference_components.py)
        assert not policies
        return
    (policy,) = policies
    config = policy["TargetTrackingScalingPolicyConfiguration"]
    assert config["PredefinedMetricSpecification"]["PredefinedMetricType"] == "SageMakerVariantInvocationsPerInstance"
    assert config["TargetValue"] == realtime.invocations_per_instance
