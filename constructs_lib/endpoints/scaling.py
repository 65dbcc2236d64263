"""The Application Auto Scaling target of an endpoint variant's instance count."""

from __future__ import annotations

from aws_cdk import aws_applicationautoscaling as appscaling
from constructs import Construct

VARIANT = "AllTraffic"


def variant_instances(scope: Construct, construct_id: str, *, endpoint_name: str, min_capacity: int,
                      max_capacity: int) -> appscaling.ScalableTarget:
    return appscaling.ScalableTarget(
        scope, construct_id, service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
        resource_id=f"endpoint/{endpoint_name}/variant/{VARIANT}",
        scalable_dimension="sagemaker:variant:DesiredInstanceCount",
        min_capacity=min_capacity, max_capacity=max_capacity,
    )
