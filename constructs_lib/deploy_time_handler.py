"""A Lambda that CloudFormation runs at deploy time (a custom resource's handler): its own role, a kept log group
with the estate's key, inline standard-library code, and the cdk-nag acknowledgements every such handler has.
Custom::ArtifactCheck and Custom::ParentImage are made with it."""

from __future__ import annotations

from pathlib import Path

from dataclasses import dataclass
from typing import Any

from aws_cdk import CustomResource, Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from .logs_key import kept_log_group
from .nag import acknowledge_own_handler


def deploy_time_handler(scope: Construct, *, role: iam.IRole, logs_key: kms.IKey, source: Path, timeout_s: int,
                        description: str, reason: str, network: str) -> lambda_.Function:
    """`scope`'s "Logs" group and "Handler" function running `source` (index.handler) as `role`. `timeout_s` only
    bounds a hang, so CloudFormation hears in time; the handlers' own calls time out in seconds."""
    logs = kept_log_group(scope, "Logs", key=logs_key)
    logs.grant_write(role)  # the function writes its log as its role (LoggingConfig.LogGroup)
    function = lambda_.Function(
        # The newest Python runtime aws-cdk-lib knows (cdk-nag AwsSolutions-L1 asks for it).
        scope, "Handler", runtime=lambda_.Runtime.PYTHON_3_14, handler="index.handler",
        code=lambda_.Code.from_inline(source.read_text()), role=role, log_group=logs,
        timeout=Duration.seconds(timeout_s), memory_size=128, description=description)
    acknowledge_own_handler(function, reason=reason, network=network)
    return function


@dataclass(frozen=True)
class DeployTimeResource:
    role: iam.Role
    function: lambda_.Function
    resource: CustomResource


def deploy_time_resource(scope: Construct, *, role_description: str, statements: list[iam.PolicyStatement],
                         resource_type: str, properties: dict[str, Any], **handler: Any) -> DeployTimeResource:
    """`scope`'s "Role" (allowed `statements`), its deploy_time_handler (`handler`: logs_key, source, timeout_s,
    description, reason, network) and the "Resource" it answers, created only once the role's policy exists (so the
    first call is not refused while IAM catches up)."""
    role = iam.Role(scope, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                    description=role_description)
    for statement in statements:
        role.add_to_principal_policy(statement)
    function = deploy_time_handler(scope, role=role, **handler)
    resource = CustomResource(scope, "Resource", service_token=function.function_arn, resource_type=resource_type,
                              properties=properties)
    resource.node.add_dependency(role.node.find_child("DefaultPolicy"))
    return DeployTimeResource(role, function, resource)
