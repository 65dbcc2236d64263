from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from constructs_lib.endpoints.model import ServingModel
from constructs_lib.endpoints.realtime import RealtimeEndpoint
from constructs_lib.images import serving_image
from workloads.planner import InferencePlan

from .base import EstateStack


class InferenceStack(EstateStack):
    def __init__(self, scope: Construct, construct_id: str, *, availability_zone: str, realtime: InferencePlan,
                 framework: str, model_data_key: str, vpc: ec2.IVpc, subnets: list[ec2.ISubnet],
                 bucket: s3.IBucket, key: kms.IKey, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, availability_zone=availability_zone, **kwargs)
        assert realtime.instance_type and realtime.invocations_per_instance
        image = serving_image(framework=framework, region=self.region, instance_type=realtime.instance_type,
                              accelerator_kind=realtime.accelerator_kind)
        model = ServingModel(self, "RealtimeModel", image_uri=image, bucket=bucket, model_data_key=model_data_key,
                             vpc=vpc, subnets=subnets)
        endpoint = RealtimeEndpoint(
            self, "Realtime", model_name=model.model_name, instance_type=realtime.instance_type,
            min_instances=realtime.min_instances, max_instances=realtime.max_instances,
            invocations_per_instance=realtime.invocations_per_instance,
            # SageMaker refuses KmsKeyId on instance types with local NVMe storage.
            kms_key=None if realtime.local_nvme else key,
        )
        cdk.CfnOutput(self, "RealtimeEndpointName", value=endpoint.endpoint_name)
        cdk.CfnOutput(self, "RealtimeInstanceType", value=realtime.instance_type)
        cdk.CfnOutput(self, "ModelDataKey", value=model_data_key,
                      description="The model artifact's key in DataStack.DatasetBucketName; upload it before deploying")
