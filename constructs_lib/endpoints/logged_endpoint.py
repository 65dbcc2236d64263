"""An endpoint whose log group exists before it does, with the estate's retention and key.

SageMaker writes an endpoint's container logs to /aws/sagemaker/Endpoints/[EndpointName] (SageMaker
Developer Guide, "Log groups and streams that Amazon SageMaker AI sends to Amazon CloudWatch Logs"),
creating the group on first write when it does not exist. So the endpoint is named here, and its group
made first. The name carries the stack's name and the first block of the stack's ID: two estates never
collide, and a stack created again gets new names, so a retained group of the old one is never in the way.
The group is kept even when the create fails (lifecycle.KEPT_EVEN_IF_CREATE_FAILS): an endpoint that does not start
sends its user to these logs. It is made once the endpoint's config is, so a deploy refused earlier (the artifact
check) leaves no empty group behind. The model's role (`writer`, as which SageMaker writes the container's logs) may
write this group and no other endpoint's.
"""

from __future__ import annotations

from aws_cdk import Fn, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from workloads.planning.monitoring import container_logs

from ..lifecycle import KEPT_EVEN_IF_CREATE_FAILS
from ..logs_key import kept_log_group
from ..sagemaker_access import allow_log_writes

MAX_NAME = 63  # EndpointName: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}
STACK_ID_BLOCK = 8  # hex characters of the stack ID's UUID, after the last "/"


def stack_id_block(stack: Stack) -> str:
    """The first block of the stack ID's UUID: unique to this stack, new when it is created again."""
    return Fn.select(0, Fn.split("-", Fn.select(2, Fn.split("/", stack.stack_id))))


def logged_endpoint(scope: Construct, *, config: sagemaker.CfnEndpointConfig, logs_key: kms.IKey,
                    writer: iam.IRole) -> sagemaker.CfnEndpoint:
    stack = Stack.of(scope)
    prefix = f"{stack.stack_name}-{scope.node.id}"[:MAX_NAME - STACK_ID_BLOCK - 1]
    name = Fn.join("-", [prefix, stack_id_block(stack)])
    # Every kind of endpoint writes there (metrics.yaml container_logs), a component's container excepted.
    group = Fn.join("", [container_logs("realtime").removesuffix("{EndpointName}"), name])
    logs = kept_log_group(scope, "Logs", key=logs_key, name=group, removal=KEPT_EVEN_IF_CREATE_FAILS)
    allow_log_writes(writer, group=group)
    logs.node.add_dependency(config)
    endpoint = sagemaker.CfnEndpoint(scope, "Endpoint", endpoint_name=name,
                                     endpoint_config_name=config.attr_endpoint_config_name)
    endpoint.node.add_dependency(logs)
    return endpoint
