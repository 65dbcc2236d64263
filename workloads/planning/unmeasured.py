"""LLM serving candidates whose speed no measurement backs: vLLM below compute capability 8.0 (Turing: T4) attends
through its Triton backend, not the FlashAttention every recorded measurement ran, and no published vLLM figure on
such a GPU is recorded (catalog/serving.yaml llm_measured_only). The planner does not cost them from the Ampere-and-
newer fit: left out of the comparison, with the reason in the candidate table; a type the config names is planned with
a WARNING. Pure Python (never imports aws_cdk or sagemaker)."""

from __future__ import annotations

from functools import cache

from ..catalog import InstanceType, load_catalog, load_serving
from ..catalog import _cited, _load_yaml  # the catalog's own reader and source check
from ..errors import WARNING, Finding
from .fp8_serving import load_fp8


@cache
def _rule() -> dict:
    rule = _load_yaml("serving.yaml")["llm_measured_only"]
    _cited("serving.yaml llm_measured_only", [rule["source"]], load_catalog().sources)
    return rule


def llm_unmeasured(itype: InstanceType) -> str:
    """Why an LLM on `itype`'s GPU has no measured basis ("" where it has one: compute capability 8.0 or newer, or a
    decode measurement recorded on that accelerator)."""
    acc = itype.accelerator
    if acc is None or acc.kind != "nvidia-gpu":
        return ""
    rule = _rule()
    capability = load_fp8().compute_capability.get(acc.model, 0.0)
    if capability >= float(rule["below_compute_capability"]) or \
            any(m.accelerator == acc.model for m in load_serving().decode):
        return ""
    return (f"left out: no published vLLM measurement on the {acc.model} (compute capability {capability:g}: vLLM "
            f"attends through its Triton backend there, not the FlashAttention the recorded measurements ran "
            f"[{rule['source']}]), so its speed would be extrapolated; name it in inference.<kind>.instance_type to "
            "plan it anyway")


def unmeasured_findings(inference: dict) -> tuple[Finding, ...]:
    """A WARNING for each vLLM endpoint or job the config put on a GPU no measurement backs: planned as asked, its
    throughput and latency extrapolated from the Ampere-and-newer fit."""
    out = []
    for kind, ip in inference.items():
        if ip.serving is None or ip.serving.container != "vllm" or ip.serving.drain or ip.instance_type is None:
            continue
        itype = load_catalog().get(ip.instance_type)
        if itype is not None and (why := llm_unmeasured(itype)):
            out.append(Finding(WARNING, f"inference.{kind}.instance_type", ip.instance_type,
                               f"speed extrapolated: set by the config, but its throughput and latency rest on "
                               f"no measurement: "
                               f"{why.removeprefix('left out: ').split('; name it')[0]}; measure it (plan "
                               "--calibrate) before sizing the fleet on it",
                               source=_rule()["source"]))
    return tuple(out)
