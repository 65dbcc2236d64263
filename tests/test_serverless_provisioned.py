"""Serverless with provisioned concurrency, when traffic is spiky and a latency target rules out cold starts.

Before: the plan said only that the latency target ruled serverless out. Serverless with provisioned concurrency keeps
that many requests warm (SageMaker Developer Guide, "Deploy models with Amazon SageMaker Serverless Inference"), but its
prices could not be confirmed at AWS's pricing page in this repository's sources: the plan names it and says why it is
not compared, rather than pricing it with an invented rate. Deploying it (ServerlessConfig ProvisionedConcurrency, at
most MaxConcurrency) is pinned by tests/test_inference.py.
"""

from __future__ import annotations

from workloads import load, plan
from workloads.planning.serving import PROVISIONED_UNPRICED

from .test_cpu_serving import BERT_BASE

SPIKY = {**BERT_BASE, "inference.async": "null", "inference.traffic": "spiky", "inference.latency_ms": "300"}


def test_a_spiky_small_model_with_a_latency_target_says_why_provisioned_serverless_was_not_chosen():
    p = plan(load("intermediate", SPIKY))
    assert set(p.inference) == {"realtime"}
    why = p.inference["realtime"].why_kind
    assert "rules out serverless cold starts" in why and PROVISIONED_UNPRICED in why


def test_steady_traffic_or_an_llm_does_not_mention_it():
    steady = plan(load("intermediate", {**SPIKY, "inference.traffic": "steady"})).inference["realtime"]
    llm = plan(load("intermediate", {"inference.traffic": "spiky", "inference.latency_ms": "2000"}))  # one L4: 1.7 s
    assert PROVISIONED_UNPRICED not in steady.why_kind
    assert all(PROVISIONED_UNPRICED not in ip.why_kind for ip in llm.inference.values())


def test_provisioned_concurrency_is_kept_warm_and_scaled_on_its_utilization(synth):
    """Application Auto Scaling on a serverless variant's provisioned concurrency (SageMaker Developer Guide,
    "Automatically scale Provisioned Concurrency for a serverless endpoint"): from the configured value up to
    MaxConcurrency, tracking SageMakerVariantProvisionedConcurrencyUtilization."""
    s = synth("small", {"inference.serverless.provisioned_concurrency": "5"})
    targets = [r["Properties"] for r in s.resources("InferenceStack", "AWS::ApplicationAutoScaling::ScalableTarget")
               .values() if r["Properties"]["ScalableDimension"] == "sagemaker:variant:DesiredProvisionedConcurrency"]
    assert len(targets) == 1 and (targets[0]["MinCapacity"], targets[0]["MaxCapacity"]) == (5, 20)
    policies = [r["Properties"]["TargetTrackingScalingPolicyConfiguration"]
                for r in s.resources("InferenceStack", "AWS::ApplicationAutoScaling::ScalingPolicy").values()]
    tracked = [p for p in policies if p.get("PredefinedMetricSpecification", {}).get("PredefinedMetricType")
               == "SageMakerVariantProvisionedConcurrencyUtilization"]
    assert len(tracked) == 1 and tracked[0]["TargetValue"] == 0.5
    assert "kept warm" in plan(load("small", {"inference.serverless.provisioned_concurrency": "5"})
                               ).inference["serverless"].reason


def test_without_provisioned_concurrency_nothing_is_scaled(synth):
    s = synth("small")
    dims = {r["Properties"]["ScalableDimension"]
            for r in s.resources("InferenceStack", "AWS::ApplicationAutoScaling::ScalableTarget").values()}
    assert "sagemaker:variant:DesiredProvisionedConcurrency" not in dims
