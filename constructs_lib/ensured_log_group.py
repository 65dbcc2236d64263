"""A log group a service writes to by a name it chooses, made to carry our retention and key either way.

CloudFormation can only create a log group that does not exist yet. Two of the groups the estate must keep do
not fit that: SageMaker's job log groups (/aws/sagemaker/TrainingJobs ...) already exist in any account that ran a
job before, and HyperPod's /aws/sagemaker/Clusters/NAME/ID is named by an ID that exists only once the cluster
does, by which time its nodes may have created it. So three CloudWatch Logs calls, in order, on create and on
every update: CreateLogGroup with the key (an existing group is fine), AssociateKmsKey (for a group made by
someone else; it encrypts what is ingested from then on) and PutRetentionPolicy. Deleting the stack leaves the
group and its logs, like every other log group of the estate. CloudFormation never deletes such a group, not even
when the create that made it rolls back; so a key of the same stack that encrypts it is kept then too
(lifecycle.KEPT_EVEN_IF_CREATE_FAILS), or the group would be left with a key pending deletion.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import custom_resources as cr
from constructs import Construct

from .lifecycle import KEPT_EVEN_IF_CREATE_FAILS
from .logs_key import RETENTION_DAYS, kept_log_group
from .nag import acknowledge_cdk_handler, acknowledge_wildcards

# The singleton function aws-cdk-lib creates once per stack for every AwsCustomResource in it.
PROVIDER_ID = "AWS679f53fac002430cb0da5b7982bd2287"
HANDLER_LOGS = "EnsuredLogGroupsHandlerLogs"
HANDLER_ROLE = "EnsuredLogGroupsHandlerRole"


class EnsuredLogGroup(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, name: str, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.name = name
        if isinstance(key, kms.Key) and Stack.of(key) is stack:  # one rollback could take the key and not the group
            key.apply_removal_policy(KEPT_EVEN_IF_CREATE_FAILS)
        group = stack.format_arn(service="logs", resource="log-group", resource_name=name,
                                 arn_format=ArnFormat.COLON_RESOURCE_NAME)
        # One handler per stack, so one role per stack: each ensured group adds its own three actions to it.
        handler_logs = stack.node.try_find_child(HANDLER_LOGS) or kept_log_group(stack, HANDLER_LOGS, key=key)
        role = stack.node.try_find_child(HANDLER_ROLE)
        first_in_stack = role is None
        if first_in_stack:
            role = iam.Role(stack, HANDLER_ROLE, assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                            description="Ensures SageMaker's log groups carry the estate's key and retention")
            handler_logs.grant_write(role)
        # CloudWatch Logs authorizes some calls on the group's ARN and some on NAME:* (its streams' parent).
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=["logs:CreateLogGroup", "logs:AssociateKmsKey", "logs:PutRetentionPolicy"],
            resources=[group, f"{group}:*"]))
        acknowledge_wildcards(role, resources=[f"{group}:*"], reason=(
            f"NAME:* is how CloudWatch Logs names one log group ({name}) for the calls it authorizes on it; no "
            "other group matches."))
        previous = None
        # Asked of jsii once, not per call: each question is a round trip to its node process (issue 43).
        key_arn, physical_id = key.key_arn, cr.PhysicalResourceId.of(name)
        for step, action, parameters, ignore in (
                ("Create", "CreateLogGroup", {"logGroupName": name, "kmsKeyId": key_arn},
                 "ResourceAlreadyExistsException"),
                ("Encrypt", "AssociateKmsKey", {"logGroupName": name, "kmsKeyId": key_arn}, None),
                ("Retain", "PutRetentionPolicy", {"logGroupName": name, "retentionInDays": RETENTION_DAYS}, None)):
            call = cr.AwsSdkCall(service="CloudWatchLogs", action=action, parameters=parameters,
                                 physical_resource_id=physical_id,
                                 ignore_error_codes_matching=ignore)
            resource = cr.AwsCustomResource(self, step, on_create=call, on_update=call, role=role,
                                            install_latest_aws_sdk=False, log_group=handler_logs)
            if previous is not None:
                resource.node.add_dependency(previous)
            previous = resource
        if first_in_stack:  # the handler exists once the first AwsCustomResource of the stack made it
            acknowledge_cdk_handler(stack.node.find_child(PROVIDER_ID), reason=(
                "aws-cdk-lib's AwsCustomResource handler: runs only during deployment to create a log group a "
                "service names, or give an existing one our key and retention."), network=(
                "it calls only the CloudWatch Logs API, with IAM and TLS, on those log groups alone; nothing in the "
                "estate's network"), managed_policy=False)
