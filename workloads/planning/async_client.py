"""How many requests SageMaker's asynchronous client hands one instance at once, and the backlog its scaling aims for
(catalog/async_inference.yaml). Pure Python.

The plan sizes an async instance for `concurrency` requests decoded together (an LLM server's batch, times its copies):
its throughput and $/request, and the nightly drain's run time, rest on that. SageMaker's client sends at most
MaxConcurrentInvocationsPerInstance requests to the container, so anything below the plan's concurrency caps the
server's batch and the plan's throughput is never reached. Unless the workload sets the field, it is the plan's
concurrency, within the API's range. ApproximateBacklogSize counts the requests being processed too, so an instance
working through its full concurrency is not a backlog to scale out for: the target per instance is that concurrency.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from ..packaged import read_packaged_yaml


@cache
def facts() -> dict:
    return read_packaged_yaml(Path(__file__).parent.parent / "catalog" / "async_inference.yaml")


def invocations_per_instance(section, concurrency: int) -> int:
    """MaxConcurrentInvocationsPerInstance: the workload's, where it sets one; else the plan's per-instance concurrency
    within the API's range."""
    if section.max_concurrent_invocations_per_instance is not None:
        return section.max_concurrent_invocations_per_instance
    limits = facts()["max_concurrent_invocations"]
    return max(int(limits["min"]), min(int(limits["max"]), concurrency))


def backlog_target(invocations: int) -> int:
    """ApproximateBacklogSizePerInstance to track: an instance's full concurrency (the metric counts in-flight
    requests), so scaling adds an instance when requests queue beyond what the instances are serving."""
    return invocations
