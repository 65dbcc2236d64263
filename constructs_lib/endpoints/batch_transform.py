"""Batch transform on a schedule. Transform jobs have no CloudFormation resource, so a Step
Functions state machine runs one to completion (.sync) under a unique job name per execution,
and an EventBridge Scheduler schedule starts the state machine.

The transform job runs as the model's role (SageMaker API Reference, CreateModel): it lists and
reads the input prefix and writes the output prefix encrypted with the output key
(TransformOutput.KmsKeyId), so the role gets exactly that.
"""

from __future__ import annotations

import re

from aws_cdk import ArnFormat, Duration, Fn, Names, Size, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from workloads.planning.contracts import RequestContract

from ..logs_key import kept_log_group
from ..nag import acknowledge_prefix_grants, acknowledge_wildcards, ignore_cfn_lint
from ..job_log_groups import JOB_LOG_GROUPS
from ..sagemaker_access import allow_log_writes, allow_reading, allow_volume_key
from .logged_endpoint import stack_id_block

JOB_PREFIX = "batch"  # job name: batch-<stack ID block>-<execution name>; an execution name is unique per state machine


def _member(enum, api_value: str):
    """The CDK enum member of a SageMaker API value: SingleRecord -> SINGLE_RECORD, Line -> LINE."""
    return enum[re.sub(r"(?<=[a-z])(?=[A-Z])", "_", api_value).upper()]


TIMEOUT = Duration.hours(24)


def _definition(scope: Construct, transform: tasks.SageMakerCreateTransformJob,
                ami: str | None) -> tuple[sfn.DefinitionBody, list[iam.PolicyStatement]]:
    """The state machine's definition; with `ami`, the transform job's TransformResources.TransformAmiVersion, which
    CreateTransformJob takes (SageMaker API Reference, TransformResources) and aws-cdk-lib's task does not render; then
    the task's own statements, which the state machine's role needs (from_chainable adds them itself)."""
    if ami is None:
        return sfn.DefinitionBody.from_chainable(transform), []
    state_graph = sfn.StateGraph(transform, "transform")
    state_graph.timeout = TIMEOUT  # what the state machine's `timeout` renders with from_chainable
    graph = state_graph.to_graph_json()
    graph["States"][transform.id]["Parameters"]["TransformResources"]["TransformAmiVersion"] = ami
    return sfn.DefinitionBody.from_string(Stack.of(scope).to_json_string(graph)), state_graph.policy_statements


class ScheduledBatchTransform(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, model_name: str, model_arn: str, model_role: iam.IRole,
                 instance_type: str, instance_count: int, max_payload_mb: int, max_concurrent_transforms: int,
                 request: RequestContract, bucket: s3.IBucket, input_prefix: str, output_prefix: str, schedule: str,
                 key: kms.IKey, volume_key: kms.IKey | None, logs_key: kms.IKey,
                 transform_ami_version: str | None = None) -> None:
        """`model_arn`: the model's ARN (the only model the state machine may transform with);
        `transform_ami_version`: the GPU host AMI whose driver runs the image (workloads/planning/hosts.py)."""
        super().__init__(scope, construct_id)
        allow_reading(model_role, bucket=bucket, key=input_prefix, listing=True)  # the job lists the input prefix (S3Prefix)
        bucket.grant_put(model_role, output_prefix + "*")
        acknowledge_prefix_grants(
            model_role, bucket=bucket, prefixes=[input_prefix, output_prefix],
            reason=("Batch transform: the job reads the input prefix and writes the output prefix as the model's "
                   "role, on those two prefixes only."))
        if volume_key is not None:
            # The transform's ML storage volumes (VolumeKmsKeyId). The caller of CreateTransformJob (the state
            # machine's role) needs kms:CreateGrant only when the model's role has no policy that permits it, so
            # the model's role holds it and the state machine's does not.
            allow_volume_key(model_role, key=volume_key)
        input_uri, output_uri = bucket.s3_url_for_object(input_prefix), bucket.s3_url_for_object(output_prefix)
        # The account's transform jobs share one log group: this estate's jobs carry its stack's ID, and the model's
        # role writes their streams only. A scheduled execution has no name given, so Step Functions names it with a
        # UUID (Step Functions API Reference, StartExecution `name`): 36 characters, the job name 51 of 63.
        prefix = Fn.join("-", [JOB_PREFIX, stack_id_block(Stack.of(self))])
        allow_log_writes(model_role, group=JOB_LOG_GROUPS["TransformJobs"], streams=f"{prefix}-*")
        transform = tasks.SageMakerCreateTransformJob(
            self, "Transform",
            transform_job_name=sfn.JsonPath.format("{}-{}", prefix, sfn.JsonPath.string_at("$$.Execution.Name")),
            model_name=model_name,
            role=model_role,  # otherwise the task makes a role with AmazonSageMakerFullAccess
            integration_pattern=sfn.IntegrationPattern.RUN_JOB,
            # The container's request contract (workloads/planning/contracts.py REQUESTS): how the input is cut, what each
            # request carries and says it is, and how the responses are joined.
            transform_input=tasks.TransformInput(
                split_type=_member(tasks.SplitType, request.split_type), content_type=request.content_type,
                transform_data_source=tasks.TransformDataSource(s3_data_source=tasks.TransformS3DataSource(
                    s3_uri=input_uri, s3_data_type=tasks.S3DataType.S3_PREFIX))),
            transform_output=tasks.TransformOutput(
                s3_output_path=output_uri, encryption_key=key, accept=request.accept,
                assemble_with=_member(tasks.AssembleWith, request.assemble_with)),
            transform_resources=tasks.TransformResources(
                instance_count=instance_count, instance_type=ec2.InstanceType(instance_type.removeprefix("ml.")),
                volume_encryption_key=volume_key),
            max_payload=Size.mebibytes(max_payload_mb),
            max_concurrent_transforms=max_concurrent_transforms,
            batch_strategy=_member(tasks.BatchStrategy, request.batch_strategy),
        )
        log_group = kept_log_group(self, "Logs", key=logs_key)
        definition, statements = _definition(self, transform, transform_ami_version)
        stack = Stack.of(self)
        name, role = state_machine_role(self, description="Runs the batch transform on the estate's model only")
        # CreateTransformJob authorizes on the job's ARN; the model it names is the sagemaker:ModelArn condition key
        # (workloads/catalog/sagemaker_references.yaml): any other model is refused.
        role.add_to_policy(iam.PolicyStatement(
            sid="OnlyTheEstatesModel", effect=iam.Effect.DENY, actions=["sagemaker:CreateTransformJob"],
            resources=["*"], conditions={"ArnNotEquals": {"sagemaker:ModelArn": model_arn}}))
        self.state_machine = sfn.StateMachine(
            self, "StateMachine", definition_body=definition, state_machine_name=name, role=role,
            timeout=TIMEOUT, tracing_enabled=True,
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL),
        )
        ignore_cfn_lint(self.state_machine, "W3005", "aws-cdk-lib adds a DependsOn on the role next to the GetAtt")
        for statement in statements:
            self.state_machine.add_to_role_policy(statement)
        acknowledge_wildcards(self.state_machine.role, resources=[
            stack.format_arn(service="sagemaker", resource="transform-job", resource_name="*"), "*"], reason=(
            "Transform job names are made per execution (batch-<execution name>), so the job ARN is a prefix "
            "wildcard in this account and region; the '*' statements are CloudWatch Logs delivery, X-Ray and "
            "sagemaker:ListTags, which Step Functions needs for logging and tracing and which take no resource ARN."))
        self.schedule_role, self.schedule = start_on_schedule(
            self, self.state_machine, schedule=schedule,
            description="Starts the batch transform state machine on its schedule")



def state_machine_role(scope: Construct, *, description: str) -> tuple[str, iam.Role]:
    """A name for `scope`'s state machine and a role only that state machine may assume. The name comes from the stack
    and construct path (unique in an account and region, as stack names are), so the trust names its one state
    machine without a cycle (the state machine takes the role); aws-cdk-lib's own role trusts `stateMachine:*`.
    (Step Functions Developer Guide, "Creating an IAM role for your state machine", Prevent cross-service confused
    deputy issue: aws:SourceArn and aws:SourceAccount in the trust;
    https://docs.aws.amazon.com/step-functions/latest/dg/procedure-create-iam-role.html)"""
    stack = Stack.of(scope)
    name = Names.unique_resource_name(scope, max_length=80, allowed_special_characters="-_")
    arn = stack.format_arn(service="states", resource="stateMachine", resource_name=name,
                           arn_format=ArnFormat.COLON_RESOURCE_NAME)
    return name, iam.Role(scope, "StateMachineRole", description=description,
                          assumed_by=iam.ServicePrincipal("states.amazonaws.com", conditions={
                              "ArnEquals": {"aws:SourceArn": arn}, "StringEquals": {"aws:SourceAccount": stack.account}}))

def start_on_schedule(scope: Construct, state_machine: sfn.StateMachine, *,
                      schedule: str, description: str) -> tuple[iam.Role, scheduler.CfnSchedule]:
    """An EventBridge Scheduler schedule that starts `state_machine`, with a role only it can start and only this
    account's schedules may assume (EventBridge Scheduler User Guide, "Set up the execution role": the trust
    policy's aws:SourceAccount condition, against the confused deputy)."""
    role = iam.Role(
        scope, "ScheduleRole", description=description,
        assumed_by=iam.ServicePrincipal("scheduler.amazonaws.com", conditions={
            "StringEquals": {"aws:SourceAccount": Stack.of(scope).account}}))
    state_machine.grant_start_execution(role)
    return role, scheduler.CfnSchedule(
        scope, "Schedule", schedule_expression=schedule,
        flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
        target=scheduler.CfnSchedule.TargetProperty(arn=state_machine.state_machine_arn, role_arn=role.role_arn,
                                                    input="{}"),
    )
