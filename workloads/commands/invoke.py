"""`python -m workloads invoke`: one request to a deployed endpoint, with boto3.

Real-time and serverless answer in the call; an asynchronous request is put in S3, and the
command waits for its output (or failure) object to appear.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from urllib.parse import urlparse

from ..planning.planner import Plan
from .jobs import EstateNotDeployed, stack_outputs

OUTPUT_KEYS = {"realtime": "RealtimeEndpointName", "serverless": "ServerlessEndpointName", "async": "AsyncEndpointName"}
INVOCABLE = tuple(OUTPUT_KEYS)


@dataclass(frozen=True)
class Answer:
    kind: str
    endpoint: str
    body: bytes
    location: str | None = None  # where an async result was read from


def default_kind(plan: Plan) -> str:
    kinds = [k for k in INVOCABLE if k in plan.inference]
    if not kinds:
        raise EstateNotDeployed("the plan has no real-time, serverless or async endpoint to invoke")
    return kinds[0]


def sample_request(plan: Plan, kind: str) -> tuple[str, bytes]:
    """The content type the endpoint's container reads and a sample body of that type (its serving contract)."""
    serving = plan.inference[kind].serving if kind in plan.inference else None
    if serving is None:
        raise EstateNotDeployed(f"the plan has no {kind} endpoint; it has: {', '.join(plan.inference) or 'none'}")
    return serving.request.content_type, serving.request.sample.encode()


# An endpoint of inference components answers a request only when it names the component (SageMaker Runtime API,
# InvokeEndpoint InferenceComponentName: "If the endpoint hosts one or more inference components, this parameter
# specifies the name of inference component to invoke"; botocore's sagemaker-runtime service model).
COMPONENT_KEY = "RealtimeInferenceComponentName"


def invoke_params(plan: Plan, kind: str, outputs: dict[str, str], body: bytes, content_type: str) -> dict:
    """InvokeEndpoint's parameters: the endpoint, and its inference component when the plan runs copies."""
    params = {"EndpointName": outputs[OUTPUT_KEYS[kind]], "Body": body, "ContentType": content_type}
    if kind == "realtime" and plan.inference[kind].copies_per_instance is not None:
        params["InferenceComponentName"] = outputs[COMPONENT_KEY]
    return params


def invoke(plan: Plan, *, kind: str, body: bytes, content_type: str, stage: str = "",
           timeout_s: float = 600, poll_s: float = 2) -> Answer:
    import boto3

    if kind not in plan.inference:
        raise EstateNotDeployed(f"the plan has no {kind} endpoint; it has: {', '.join(plan.inference) or 'none'}")
    outputs = stack_outputs(plan, ("DataStack", "InferenceStack"), stage=stage)
    endpoint = outputs[OUTPUT_KEYS[kind]]
    region = plan.workload.region
    runtime = boto3.client("sagemaker-runtime", region_name=region)
    if kind != "async":
        response = runtime.invoke_endpoint(**invoke_params(plan, kind, outputs, body, content_type))
        return Answer(kind, endpoint, response["Body"].read())

    s3 = boto3.client("s3", region_name=region)
    bucket = outputs["DatasetBucketName"]
    key = f"{outputs['AsyncInputPrefix']}{uuid.uuid4()}"
    s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType=content_type)
    response = runtime.invoke_endpoint_async(EndpointName=endpoint, InputLocation=f"s3://{bucket}/{key}",
                                             ContentType=content_type)
    locations = [response["OutputLocation"], response.get("FailureLocation")]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for location in filter(None, locations):
            found = _read(s3, location)
            if found is not None:
                if location == response.get("FailureLocation"):
                    raise RuntimeError(f"the async request failed: {found.decode(errors='replace')[:500]}")
                return Answer(kind, endpoint, found, location)
        time.sleep(poll_s)
    raise TimeoutError(f"no result at {response['OutputLocation']} after {timeout_s:g} s")


def _read(s3, location: str) -> bytes | None:
    from botocore.exceptions import ClientError

    url = urlparse(location)
    try:
        return s3.get_object(Bucket=url.netloc, Key=url.path.lstrip("/"))["Body"].read()
    except ClientError:
        return None
