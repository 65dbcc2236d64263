"""Inference Components (issue 32): an LLM on vLLM GPUs at a real-time endpoint runs several copies per instance.
TP is the fewest GPUs (a power of two dividing the attention and KV heads) whose memory holds the weights plus a
typical request's KV cache; copies = GPUs / TP; an instance serves copies x one copy's rate; the fleet is sized in
copies. Before: one copy per instance, a 13B at TP 1 on ml.p4d.24xlarge left seven GPUs idle."""

from __future__ import annotations

import json
import math

import pytest

from workloads import load, plan
from workloads.catalog import load_catalog
from workloads.planning.serving import serving_speed
from workloads.commands.report import summary
from workloads.planning.contracts import copy_degrees
from workloads.config.model import model_shape
from workloads.planning import speed

CAT = load_catalog()
LLM = {"inference.artifact.format": "huggingface", "inference.async": "null", "inference.batch": "null",
       "inference.latency_ms": "null"}


def _rt(overrides: dict[str, str]):
    p = plan(load("intermediate", {**LLM, **overrides}))
    return p, p.inference["realtime"]


@pytest.mark.parametrize("billion,fewest", [(13, 1), (70, 4)])
def test_tp_is_the_fewest_power_of_two_that_holds_weights_and_a_typical_request(billion, fewest):
    w = load("intermediate", {**LLM, "model.parameters_billion": str(billion)})
    p4d = CAT.get("p4d.24xlarge")
    degrees = copy_degrees(w, p4d)
    assert degrees[0] == fewest
    _, heads, kv_heads, _ = model_shape(w)
    assert all(d & (d - 1) == 0 and heads % d == 0 and kv_heads % d == 0 and 8 % d == 0 for d in degrees)


def test_an_instance_serves_copies_times_one_copy():
    """13B on ml.p4d.24xlarge: every candidate's rate is GPUs / TP copies of the rate one copy has alone."""
    _, rt = _rt({"model.parameters_billion": "13", "inference.realtime.instance_type": "ml.p4d.24xlarge",
                 "inference.requests_per_second": "50"})
    w = load("intermediate", {**LLM, "model.parameters_billion": "13"})
    p4d = CAT.get("p4d.24xlarge")
    seen = set()
    for c in rt.candidates:
        alone = speed.llm(w, p4d, c.tensor_parallel, speed.Targets.of("realtime", w))
        assert c.copies == 8 // c.tensor_parallel
        assert c.requests_per_second == pytest.approx(c.copies * alone.requests_per_second, rel=1e-3)
        seen.add(c.copies)
    assert 8 in seen and len(seen) > 1  # TP=1 (eight copies) is compared, not only the whole instance


def test_the_fleet_is_sized_in_copies_and_the_plan_says_it():
    p, rt = _rt({"model.parameters_billion": "13", "inference.realtime.instance_type": "ml.p4d.24xlarge",
                 "inference.requests_per_second": "50"})
    tp = rt.serving.tensor_parallel
    assert rt.copies_per_instance == 8 // tp
    per_copy = rt.requests_per_second_per_instance / rt.copies_per_instance
    assert rt.copies_needed_at_peak == math.ceil(50 / per_copy - 1e-6)
    assert rt.max_copies == rt.max_instances * rt.copies_per_instance
    assert rt.min_copies == rt.min_instances * rt.copies_per_instance
    assert rt.serving.environment["SM_VLLM_TENSOR_PARALLEL_SIZE"] == str(tp)
    line = f"{rt.copies_per_instance} copies of TP={tp} per ml.p4d.24xlarge"
    assert line in rt.reason and any(line in s for s in summary(p))


def test_bursty_traffic_without_a_latency_target_scales_copies_to_zero():
    _, rt = _rt({"inference.traffic": "spiky", "inference.realtime": "{instance_type: ml.g6.xlarge}"})
    assert rt.copies_per_instance and rt.min_copies == 0 and rt.min_instances == 0
    assert rt.usd_per_hour_min == 0 and "scales to zero" in rt.reason


@pytest.mark.parametrize("overrides", [
    {"inference.traffic": "spiky", "inference.realtime": "{instance_type: ml.g6.xlarge}", "inference.time_to_first_token_ms": "2000"},
    {"inference.traffic": "spiky", "inference.realtime": "{instance_type: ml.g6.xlarge, min_instances: 1}"},
    {"inference.traffic": "steady", "inference.realtime": "{instance_type: ml.g6.xlarge}"},
])
def test_never_zero_with_a_latency_target_a_set_minimum_or_steady_traffic(overrides):
    _, rt = _rt(overrides)
    assert rt.min_copies >= 1 and rt.min_instances >= 1


def test_async_and_neuron_keep_one_model_per_instance():
    p = plan(load("intermediate", {"inference.artifact.format": "huggingface"}))
    assert p.inference["async"].copies_per_instance is None
    _, rt = _rt({"inference.realtime.instance_type": "ml.inf2.48xlarge", "model.neuron_supported": "true"})
    assert rt.copies_per_instance is None and all(c.copies == 1 for c in rt.candidates)


def test_serving_speed_of_a_gpu_llm_is_the_instances():
    w = load("intermediate", {**LLM, "model.parameters_billion": "13"})
    s = serving_speed("realtime", w, CAT.get("p4d.24xlarge"), degree=1)
    assert s.copies == 8 and "8 copies of TP=1 per instance" in s.basis


# ---------------------------------------------------------------- the template: the component and its scaling

ZERO = {"inference.traffic": "spiky", "inference.realtime": "{instance_type: ml.g6.xlarge}", "inference.async": "null", "inference.batch": "null"}


def _of(resources: dict, kind: str) -> list[dict]:
    return [r for r in resources.values() if r["Type"] == kind]


def test_the_component_names_the_model_its_gpus_memory_copies_and_start_up(synth):
    rt = plan(load("intermediate")).inference["realtime"]
    res = synth("intermediate").templates["InferenceStack"]["Resources"]
    [ic] = _of(res, "AWS::SageMaker::InferenceComponent")
    spec, props = ic["Properties"]["Specification"], ic["Properties"]
    model = next(lid for lid, r in res.items() if r["Type"] == "AWS::SageMaker::Model" and "Realtime" in lid)
    assert spec["ModelName"] == {"Fn::GetAtt": [model, "ModelName"]}
    assert spec["ComputeResourceRequirements"] == {"NumberOfAcceleratorDevicesRequired": rt.serving.tensor_parallel,
                                                   "MinMemoryRequiredInMb": rt.memory_mb_per_copy}
    assert spec["StartupParameters"] == {"ModelDataDownloadTimeoutInSeconds": rt.startup.download_timeout_s,
                                         "ContainerStartupHealthCheckTimeoutInSeconds": rt.startup.startup_timeout_s}
    assert props["RuntimeConfig"] == {"CopyCount": max(1, rt.min_copies)} and props["VariantName"] == "AllTraffic"


def test_the_variant_names_no_model_and_managed_instance_scaling_holds_the_copies(synth):
    rt = plan(load("intermediate")).inference["realtime"]
    res = synth("intermediate").templates["InferenceStack"]["Resources"]
    config = next(r["Properties"] for r in _of(res, "AWS::SageMaker::EndpointConfig")
                  if "ManagedInstanceScaling" in r["Properties"]["ProductionVariants"][0])
    [variant] = config["ProductionVariants"]
    assert "ModelName" not in variant and "ModelDataDownloadTimeoutInSeconds" not in variant
    assert variant["ManagedInstanceScaling"] == {"Status": "ENABLED", "MinInstanceCount": rt.min_instances,
                                                 "MaxInstanceCount": rt.max_instances}
    assert variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    assert "Fn::GetAtt" in config["ExecutionRoleArn"]


def test_copies_scale_on_invocations_per_copy_not_the_variant(synth):
    rt = plan(load("intermediate")).inference["realtime"]
    res = synth("intermediate").templates["InferenceStack"]["Resources"]
    targets = [r["Properties"] for r in _of(res, "AWS::ApplicationAutoScaling::ScalableTarget")
               if r["Properties"]["ScalableDimension"].startswith("sagemaker:inference-component")]
    [target] = targets
    assert target["ScalableDimension"] == "sagemaker:inference-component:DesiredCopyCount"
    assert target["ResourceId"]["Fn::Join"][1][0] == "inference-component/"
    assert (target["MinCapacity"], target["MaxCapacity"]) == (rt.min_copies, rt.max_copies)
    assert not any(r["Properties"]["ScalableDimension"] == "sagemaker:variant:DesiredInstanceCount" and
                   "Realtime" in json.dumps(r["Properties"]["ResourceId"])
                   for r in _of(res, "AWS::ApplicationAutoScaling::ScalableTarget"))
    [tracking] = [r["Properties"]["TargetTrackingScalingPolicyConfiguration"]
                  for r in _of(res, "AWS::ApplicationAutoScaling::ScalingPolicy")
                  if "TargetTrackingScalingPolicyConfiguration" in r["Properties"]
                  and "Copies" in json.dumps(r["Properties"].get("ScalingTargetId", ""))]
    assert tracking["PredefinedMetricSpecification"]["PredefinedMetricType"] == \
        "SageMakerInferenceComponentInvocationsPerCopy"
    assert tracking["TargetValue"] == rt.invocations_per_copy
    assert not _of(res, "AWS::CloudWatch::Alarm") or not any(
        "NoCapacityInvocationFailures" in json.dumps(a) for a in _of(res, "AWS::CloudWatch::Alarm"))


def test_scale_to_zero_has_min_zero_everywhere_and_a_step_policy_to_wake(synth):
    res = synth("intermediate", ZERO).templates["InferenceStack"]["Resources"]
    [ic] = _of(res, "AWS::SageMaker::InferenceComponent")
    assert ic["Properties"]["RuntimeConfig"] == {"CopyCount": 1}  # one at deploy: the stack proves the model starts
    variant = next(r["Properties"]["ProductionVariants"][0] for r in _of(res, "AWS::SageMaker::EndpointConfig")
                   if "ManagedInstanceScaling" in r["Properties"]["ProductionVariants"][0])
    assert variant["ManagedInstanceScaling"]["MinInstanceCount"] == 0 and variant["InitialInstanceCount"] == 1
    [target] = [r["Properties"] for r in _of(res, "AWS::ApplicationAutoScaling::ScalableTarget")
                if r["Properties"]["ScalableDimension"] == "sagemaker:inference-component:DesiredCopyCount"]
    assert target["MinCapacity"] == 0
    steps = [r["Properties"]["StepScalingPolicyConfiguration"] for r in _of(res, "AWS::ApplicationAutoScaling::ScalingPolicy")
             if "StepScalingPolicyConfiguration" in r["Properties"]]
    assert any(s["AdjustmentType"] == "ChangeInCapacity" and any(a["ScalingAdjustment"] == 1 for a in s["StepAdjustments"])
               for s in steps)
    wake = [a["Properties"] for a in _of(res, "AWS::CloudWatch::Alarm")
            if a["Properties"].get("MetricName") == "NoCapacityInvocationFailures"]
    assert wake and all(a["Namespace"] == "AWS/SageMaker" and a["Dimensions"][0]["Name"] == "InferenceComponentName"
                        for a in wake)


def test_a_model_that_is_not_an_llm_keeps_its_variant(synth):
    res = synth("small").templates["InferenceStack"]["Resources"]
    assert not _of(res, "AWS::SageMaker::InferenceComponent")
    assert all("ModelName" in r["Properties"]["ProductionVariants"][0] for r in _of(res, "AWS::SageMaker::EndpointConfig"))


def test_invoke_names_the_component_of_a_copies_endpoint():
    """InvokeEndpoint's InferenceComponentName (SageMaker Runtime API): a component endpoint answers only when named."""
    from workloads.commands.invoke import COMPONENT_KEY, invoke_params

    outputs = {"RealtimeEndpointName": "ep", COMPONENT_KEY: "ic"}
    p = plan(load("intermediate"))
    assert invoke_params(p, "realtime", outputs, b"{}", "application/json") == {
        "EndpointName": "ep", "Body": b"{}", "ContentType": "application/json", "InferenceComponentName": "ic"}
    small = plan(load("small"))
    assert "InferenceComponentName" not in invoke_params(small, "realtime", {"RealtimeEndpointName": "ep"}, b"",
                                                         "text/csv")


def test_the_stack_outputs_the_component_name_invoke_reads(synth):
    from workloads.commands.invoke import COMPONENT_KEY

    outputs = synth("intermediate").templates["InferenceStack"]["Outputs"]
    assert COMPONENT_KEY in outputs


@pytest.mark.parametrize("variant", ["intermediate", "intermediate-copies-to-zero"])
def test_the_copies_scale_only_once_the_component_exists_and_its_instances_sit_in_the_models_network(
        variant_synth_by_name, variant):
    """A deploying customer's review: the scalable target named the component by a string, so CloudFormation could
    register it (and its policies and alarm) before the component existed; and the endpoint config, which places an
    Inference Components endpoint's instances, carried neither the model's VPC nor its network isolation."""
    res = variant_synth_by_name(variant).templates["InferenceStack"]["Resources"]
    component, = [lid for lid, r in res.items() if r["Type"] == "AWS::SageMaker::InferenceComponent"]
    targets = [r for r in res.values() if r["Type"] == "AWS::ApplicationAutoScaling::ScalableTarget"
               and "inference-component" in json.dumps(r["Properties"]["ResourceId"])]
    assert targets and all(component in r.get("DependsOn", []) for r in targets)
    model = res[res[component]["Properties"]["Specification"]["ModelName"]["Fn::GetAtt"][0]]["Properties"]
    config, = [r["Properties"] for r in res.values() if r["Type"] == "AWS::SageMaker::EndpointConfig"
               and not any("ModelName" in v for v in r["Properties"]["ProductionVariants"])]
    assert config["EnableNetworkIsolation"] is True and model["EnableNetworkIsolation"] is True
    assert config["VpcConfig"] == model["VpcConfig"]


@pytest.mark.parametrize("name", ["intermediate", "intermediate-copies-to-zero"])
def test_an_endpoint_config_with_a_role_waits_for_the_roles_policy(name, variant_synth_by_name):
    """Outside review R6 F5: a component endpoint's config names the role its instances and network interfaces are
    created as (ExecutionRoleArn), but nothing else in it waits for that role's policy (no model is named): a rule
    over every endpoint config that names a role."""
    s = variant_synth_by_name(name)
    configs = {lid: r for lid, r in s.resources("InferenceStack", "AWS::SageMaker::EndpointConfig").items()
               if "ExecutionRoleArn" in r["Properties"]}
    assert configs
    policies = s.resources("InferenceStack", "AWS::IAM::Policy")
    for lid, config in configs.items():
        role = config["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0]
        own = {p for p, r in policies.items() if {"Ref": role} in r["Properties"]["Roles"]}
        assert own and own <= set(config.get("DependsOn", [])), lid
