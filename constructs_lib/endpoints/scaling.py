"""The Application Auto Scaling targets of an endpoint variant: its instance count, or a serverless variant's
provisioned concurrency.

SageMaker endpoint scaling always runs as Application Auto Scaling's service-linked role: a
custom role passed as RoleARN is ignored (Application Auto Scaling User Guide, "Service-linked
roles for Application Auto Scaling"). The CloudFormation reference asks for the service-linked
role's full ARN in RoleARN, which also creates it when the account has none yet
(AWS::ApplicationAutoScaling::ScalableTarget, RoleARN).
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_iam as iam
from constructs import Construct

VARIANT = "AllTraffic"
SCALING_ROLE = ("role/aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
                "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint")


def scaling_role_arn(scope: Construct) -> str:
    stack = Stack.of(scope)
    return f"arn:{stack.partition}:iam::{stack.account}:{SCALING_ROLE}"


def variant_instances(scope: Construct, construct_id: str, *, endpoint_name: str, min_capacity: int,
                      max_capacity: int) -> appscaling.ScalableTarget:
    return _variant_target(scope, construct_id, endpoint_name=endpoint_name, min_capacity=min_capacity,
                           max_capacity=max_capacity, dimension="sagemaker:variant:DesiredInstanceCount")


def variant_provisioned_concurrency(scope: Construct, construct_id: str, *, endpoint_name: str, min_capacity: int,
                                    max_capacity: int) -> appscaling.ScalableTarget:
    """A serverless variant's provisioned concurrency (SageMaker Developer Guide, "Automatically scale Provisioned
    Concurrency for a serverless endpoint": scalable dimension sagemaker:variant:DesiredProvisionedConcurrency,
    https://docs.aws.amazon.com/sagemaker/latest/dg/serverless-endpoints-autoscale.html)."""
    return _variant_target(scope, construct_id, endpoint_name=endpoint_name, min_capacity=min_capacity,
                           max_capacity=max_capacity, dimension="sagemaker:variant:DesiredProvisionedConcurrency")


def _variant_target(scope: Construct, construct_id: str, *, endpoint_name: str, min_capacity: int, max_capacity: int,
                    dimension: str) -> appscaling.ScalableTarget:
    return appscaling.ScalableTarget(
        scope, construct_id, service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
        resource_id=f"endpoint/{endpoint_name}/variant/{VARIANT}",
        scalable_dimension=dimension,
        min_capacity=min_capacity, max_capacity=max_capacity,
        role=iam.Role.from_role_arn(scope, f"{construct_id}Role", scaling_role_arn(scope), mutable=False),
    )
