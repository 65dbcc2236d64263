"""The estate's key for CloudWatch Logs, and the one way the estate makes a log group.

Every log group the estate writes to is created ahead by CloudFormation, with a retention and this key,
rather than left to the service that would otherwise create it on first write (unencrypted, kept forever).
CloudWatch Logs encrypts with a customer managed key only when the key policy lets the regional logs
service use it for this account's log groups (CloudWatch Logs user guide, "Encrypt log data in CloudWatch
Logs using AWS KMS").
"""

from __future__ import annotations

from aws_cdk import ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from .kept_key import kept_key
from .lifecycle import KEPT

RETENTION = logs.RetentionDays.ONE_YEAR
RETENTION_DAYS = 365  # RETENTION in days, for the API calls that take a number


class LogsKey(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, description: str) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        # Kept, like the log groups it encrypts: destroying a stack never makes its logs unreadable (lifecycle.py).
        self.key = kept_key(self, "Key", description=description)
        self.key.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchLogsOfThisAccount",
            principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
            actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
            resources=["*"],
            conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn": stack.format_arn(
                service="logs", resource="log-group", resource_name="*", arn_format=ArnFormat.COLON_RESOURCE_NAME)}}))


def kept_log_group(scope: Construct, construct_id: str, *, key: kms.IKey, name: str | None = None,
                   removal: RemovalPolicy = KEPT) -> logs.LogGroup:
    """A log group with the estate's retention and key, kept when its stack goes (lifecycle.py). `name` only when the
    service writes to a name it chooses, and then one that a retry never meets: it holds a generated name or the
    stack's ID (tests/test_lifecycle.py checks every template)."""
    return logs.LogGroup(scope, construct_id, log_group_name=name, retention=RETENTION, encryption_key=key,
                         removal_policy=removal)
