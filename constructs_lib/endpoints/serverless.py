"""A serverless endpoint: CPU only, memory and concurrency from the plan, scales to zero; with provisioned
concurrency, that concurrency is kept warm and scales up to the maximum on its utilization."""

from __future__ import annotations

from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from .logged_endpoint import logged_endpoint
from .scaling import VARIANT, variant_provisioned_concurrency
from ..sagemaker_access import allow_volume_key


class ServerlessEndpoint(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, model_name: str, model_role: iam.IRole,
                 logs_key: kms.IKey, kms_key: kms.IKey, memory_mb: int, max_concurrency: int,
                 provisioned_concurrency: int | None, utilization_target: float | None = None) -> None:
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
                variant_name=VARIANT, model_name=model_name,
                serverless_config=sagemaker.CfnEndpointConfig.ServerlessConfigProperty(
                    memory_size_in_mb=memory_mb, max_concurrency=max_concurrency,
                    provisioned_concurrency=provisioned_concurrency))],
        )
        self.endpoint = logged_endpoint(self, config=self.config, logs_key=logs_key, writer=model_role)
        self.endpoint_name = self.endpoint.attr_endpoint_name
        if provisioned_concurrency and utilization_target and max_concurrency > provisioned_concurrency:
            # The configured concurrency is the floor; Application Auto Scaling adds to it up to MaxConcurrency when
            # the warm capacity is busy (SageMakerVariantProvisionedConcurrencyUtilization; SageMaker Developer Guide,
            # "Automatically scale Provisioned Concurrency for a serverless endpoint").
            target = variant_provisioned_concurrency(self, "Scaling", endpoint_name=self.endpoint_name,
                                                     min_capacity=provisioned_concurrency, max_capacity=max_concurrency)
            target.scale_to_track_metric(
                "ProvisionedConcurrency", target_value=utilization_target,
                predefined_metric=appscaling.PredefinedMetric.SAGEMAKER_VARIANT_PROVISIONED_CONCURRENCY_UTILIZATION)
