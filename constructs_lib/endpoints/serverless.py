"""A serverless endpoint: CPU only, memory and concurrency from the plan, scales to zero."""

from __future__ import annotations

from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from .logged_endpoint import logged_endpoint
from ..nag import acknowledge_no_volume_key


class ServerlessEndpoint(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, model_name: str, logs_key: kms.IKey,
                 memory_mb: int, max_concurrency: int, provisioned_concurrency: int | None) -> None:
        super().__init__(scope, construct_id)
        self.config = sagemaker.CfnEndpointConfig(
            self, "Config",
            production_variants=[sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                variant_name="AllTraffic", model_name=model_name,
                serverless_config=sagemaker.CfnEndpointConfig.ServerlessConfigProperty(
                    memory_size_in_mb=memory_mb, max_concurrency=max_concurrency,
                    provisioned_concurrency=provisioned_concurrency))],
        )
        acknowledge_no_volume_key(self.config, "A serverless endpoint has no ML storage volume to encrypt; SageMaker "
                                  "manages the serverless compute's storage and accepts no KmsKeyId for it.")
        self.endpoint = logged_endpoint(self, config=self.config, logs_key=logs_key)
        self.endpoint_name = self.endpoint.attr_endpoint_name
