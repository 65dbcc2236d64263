"""A serverless endpoint: CPU only, memory and concurrency from the plan, scales to zero."""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from .logged_endpoint import logged_endpoint
from ..sagemaker_access import allow_volume_key


class ServerlessEndpoint(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, model_name: str, model_role: iam.IRole,
                 logs_key: kms.IKey, kms_key: kms.IKey, memory_mb: int, max_concurrency: int,
                 provisioned_concurrency: int | None) -> None:
        super().__init__(scope, construct_id)
        # KmsKeyId holds for serverless: the API reference refuses it only for instance types with local storage
        # (CreateEndpointConfig, KmsKeyId), and "KMS keys" left Serverless Inference's feature exclusions (SageMaker
        # Developer Guide, "Deploy models with Amazon SageMaker Serverless Inference", Feature exclusions:
        # https://docs.aws.amazon.com/sagemaker/latest/dg/serverless-endpoints.html; the preview-era page listed
        # them). As for instance endpoints, the model's role makes the volume's grant (role_calls.yaml KmsKeyId).
        allow_volume_key(model_role, key=kms_key)
        self.config = sagemaker.CfnEndpointConfig(
            self, "Config", kms_key_id=kms_key.key_arn,
            production_variants=[sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                variant_name="AllTraffic", model_name=model_name,
                serverless_config=sagemaker.CfnEndpointConfig.ServerlessConfigProperty(
                    memory_size_in_mb=memory_mb, max_concurrency=max_concurrency,
                    provisioned_concurrency=provisioned_concurrency))],
        )
        self.endpoint = logged_endpoint(self, config=self.config, logs_key=logs_key, writer=model_role)
        self.endpoint_name = self.endpoint.attr_endpoint_name
