"""A scheduled batch drained through the async endpoint, for an image no transform host runs (the CUDA 13 LLM
servers: transform hosts offer NVIDIA drivers 470 and 535 only; workloads/planning/hosts.py drain_route).

On the batch's schedule a Step Functions Distributed Map lists the batch input prefix (ItemReader
arn:aws:states:::s3:listObjectsV2) and, for each object, calls SageMaker Runtime InvokeEndpointAsync with the object
as InputLocation: one request an object, queued by the endpoint, which scales out from zero on its backlog
(HasBacklogWithoutCapacity) and writes each output under its own output prefix. The endpoint reads the requests as
its model's role, so that role may read the batch prefix too (never list it: the state machine lists).
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Duration, Fn, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from ..logs_key import kept_log_group
from ..nag import INLINE_POLICY_REASON, acknowledge, acknowledge_wildcards, ignore_cfn_lint
from ..sagemaker_access import allow_reading
from .batch_transform import TIMEOUT, start_on_schedule, state_machine_role

# Requests queued at once: the endpoint's queue takes them all; this bounds the Step Functions child executions.
MAX_CONCURRENCY = 100
# InvokeEndpointAsync's limits (botocore's sagemaker-runtime model: RequestTTLSeconds 60-21600, default 6 h;
# InvocationTimeoutSeconds 1-3600, default 15 min): the drain queues the whole prefix at once, so a request may wait
# for the whole backlog (the longest TTL the API allows), and an LLM request with a long output may run past 15 min.
REQUEST_TTL_S = 21600
INVOCATION_TIMEOUT_S = 3600
# The errors InvokeEndpointAsync defines that a retry can cure (the model's InternalFailure and ServiceUnavailable;
# ValidationError is the request's own), as Step Functions names an AWS SDK integration's errors: the service's name
# and the error's with Exception after it (Step Functions Developer Guide, "Handling errors in AWS SDK integrations").
RETRIED = ("InternalFailure", "ServiceUnavailable")


class ScheduledAsyncDrain(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, endpoint_name: str, endpoint_arn: str, model_role: iam.IRole,
                 bucket: s3.IBucket, input_prefix: str, content_type: str, accept: str, schedule: str,
                 logs_key: kms.IKey) -> None:
        """`endpoint_name`: the async endpoint's; `model_role`: its model's role, which reads each request."""
        super().__init__(scope, construct_id)
        allow_reading(model_role, bucket=bucket, key=input_prefix, listing=False)
        acknowledge_wildcards(model_role, resources=[bucket.arn_for_objects(input_prefix + "*")], reason=(
            "Asynchronous inference reads each request (InputLocation) as the model's role: the drained batch's "
            "requests are the objects under the batch input prefix, read one by one, never listed."))
        invoke = tasks.CallAwsService(
            self, "Invoke", service="sagemakerruntime", action="invokeEndpointAsync",
            iam_action="sagemaker:InvokeEndpointAsync", iam_resources=[endpoint_arn],
            parameters={
                "EndpointName": endpoint_name,
                "InputLocation": sfn.JsonPath.format("s3://{}/{}", bucket.bucket_name, sfn.JsonPath.string_at("$.Key")),
                "ContentType": content_type, "Accept": accept,
                "RequestTTLSeconds": REQUEST_TTL_S, "InvocationTimeoutSeconds": INVOCATION_TIMEOUT_S,
            },
            # Throttling and a cold endpoint's queue are retried; a request the endpoint refuses fails the item.
            result_selector={"OutputLocation.$": "$.OutputLocation", "InferenceId.$": "$.InferenceId"})
        invoke.add_retry(errors=[f"SageMakerRuntime.{e}Exception" for e in RETRIED],
                         interval=Duration.seconds(5), max_attempts=6, backoff_rate=2)
        drain = sfn.DistributedMap(
            self, "Drain", max_concurrency=MAX_CONCURRENCY,
            item_reader=sfn.S3ObjectsItemReader(bucket=bucket, prefix=input_prefix),
            item_selector={"Key.$": "$$.Map.Item.Value.Key"},
            # Every item's result in the state's output would pass Step Functions' 256 KiB payload limit on a large
            # prefix; each output's location is the async endpoint's (its output prefix, its success topic).
            result_path=sfn.JsonPath.DISCARD)
        drain.item_processor(invoke)
        log_group = kept_log_group(self, "Logs", key=logs_key)
        name, role = state_machine_role(self, description="Drains the batch prefix through the async endpoint")
        self.state_machine = sfn.StateMachine(
            self, "StateMachine", definition_body=sfn.DefinitionBody.from_chainable(drain), timeout=TIMEOUT,
            state_machine_name=name, role=role, tracing_enabled=True,
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL))
        ignore_cfn_lint(self.state_machine, "W3005", "aws-cdk-lib adds a DependsOn on the role next to the GetAtt")
        # The item reader's ListBucket (aws-cdk-lib grants it on the whole bucket): the batch input prefix only
        # (s3:prefix, the ListObjectsV2 Prefix the reader sends; outside review R6).
        role.add_to_policy(iam.PolicyStatement(
            sid="ListTheBatchPrefixOnly", effect=iam.Effect.DENY, actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn], conditions={"StringNotLike": {"s3:prefix": f"{input_prefix}*"}}))
        acknowledge_wildcards(self.state_machine.role, resources=["*"], reason=(
            "CloudWatch Logs delivery and X-Ray, which Step Functions needs for logging and tracing and which take no "
            "resource ARN."))
        # aws-cdk-lib's own policy for the Distributed Map's child executions: this state machine's executions only.
        runs = self.state_machine.node.find_child("DistributedMapPolicy")
        stack = Stack.of(self)
        name = Fn.select(6, Fn.split(":", self.state_machine.state_machine_arn))  # as aws-cdk-lib writes the policy
        acknowledge_wildcards(runs, resources=[
            stack.format_arn(service="states", resource="execution", resource_name=f"{name}:*",
                             arn_format=ArnFormat.COLON_RESOURCE_NAME),
            stack.format_arn(service="states", resource="execution", resource_name=f"{name}/*:*",
                             arn_format=ArnFormat.COLON_RESOURCE_NAME)], reason=(
            "A Distributed Map runs each item as a child execution of this state machine, named by Step Functions: "
            "the statement covers this state machine's executions and their map runs only."))
        acknowledge(runs, "NIST.800.53.R5-IAMNoInlinePolicy", INLINE_POLICY_REASON)
        self.schedule_role, self.schedule = start_on_schedule(
            self, self.state_machine, schedule=schedule,
            description="Starts the batch drain through the async endpoint on its schedule")
