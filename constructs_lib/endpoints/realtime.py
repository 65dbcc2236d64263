"""A real-time endpoint that scales between min and max instances on invocations per instance, or, for an LLM
planned in copies (`copies`), one that hosts an inference component (constructs_lib/endpoints/inference_component.py).

With copies the variant names no model: its instances are capacity that SageMaker's managed instance scaling grows
and shrinks between min and max (ProductionVariant ManagedInstanceScaling: Status ENABLED, MinInstanceCount 0 or
more, MaxInstanceCount 1 or more; SageMaker API Reference, ProductionVariantManagedInstanceScaling,
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ProductionVariantManagedInstanceScaling.html), requests
go to the instance with the fewest outstanding (RoutingConfig LEAST_OUTSTANDING_REQUESTS,
API_ProductionVariantRoutingConfig), and the endpoint config carries the execution role that SageMaker acts with
for the endpoint (CreateEndpointConfig ExecutionRoleArn, which the caller must be allowed to pass): the model's, which
may already do all the endpoint needs. The start-up timeouts move to the component's StartupParameters. An endpoint
scales to zero instances only when it hosts inference components and MinInstanceCount is 0 (SageMaker Developer
Guide, "Scale an endpoint to zero instances").

With data capture on, SageMaker writes the captured requests and responses to S3 as the model's
role (SageMaker Developer Guide, "Capture data from real-time endpoint"), so the role may put
objects under the capture prefix and nowhere else.
"""

from __future__ import annotations

from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from workloads.planning.startup import Startup

from ..nag import acknowledge_no_volume_key, acknowledge_prefix_grants
from ..sagemaker_access import allow_volume_key
from .inference_component import CopyFleet, InferenceComponent
from .logged_endpoint import logged_endpoint
from .scaling import VARIANT, variant_instances


class RealtimeEndpoint(Construct):
    """`kms_key` is None for instance types with local NVMe: SageMaker refuses KmsKeyId there."""

    def __init__(self, scope: Construct, construct_id: str, *, model_name: str, logs_key: kms.IKey,
                 model_role: iam.IRole, instance_type: str, min_instances: int, max_instances: int,
                 invocations_per_instance: int, kms_key: kms.IKey | None, startup: Startup, bucket: s3.IBucket,
                 capture_prefix: str, capture_percent: int = 0, copies: CopyFleet | None = None,
                 inference_ami_version: str | None = None,
                 network: tuple[list[str], list[str]] | None = None) -> None:
        """`network`: the model's (subnet IDs, security group IDs), which an Inference Components endpoint config
        carries itself (its variant names no model), with network isolation as the model has it."""
        super().__init__(scope, construct_id)
        if kms_key is not None:
            allow_volume_key(model_role, key=kms_key)  # the instances' ML storage volumes (KmsKeyId)
        capture_uri = bucket.s3_url_for_object(capture_prefix)
        if capture_percent:
            bucket.grant_put(model_role, capture_prefix + "*")
            acknowledge_prefix_grants(
                model_role, bucket=bucket, prefixes=[capture_prefix],
                reason=("Data capture: SageMaker writes captured requests and responses as the model's role, only "
                       "under the capture prefix."))
        if copies is None:
            variant = sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                variant_name=VARIANT, model_name=model_name, instance_type=instance_type,
                initial_instance_count=min_instances, initial_variant_weight=1.0,
                # Sized from the model's bytes by the plan (workloads/planning/startup.py): a large model's download and
                # load overrun SageMaker's defaults and the endpoint rolls back.
                model_data_download_timeout_in_seconds=startup.download_timeout_s,
                container_startup_health_check_timeout_in_seconds=startup.startup_timeout_s,
                volume_size_in_gb=startup.volume_gb,
                # The host AMI the container needs (workloads/planning/contracts.py: vLLM's and Ray Serve's GPU builds); None:
                # the default.
                inference_ami_version=inference_ami_version)
        else:
            variant = sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                variant_name=VARIANT, instance_type=instance_type, initial_variant_weight=1.0,
                initial_instance_count=max(1, min_instances),  # one to start the first copy on
                managed_instance_scaling=sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
                    status="ENABLED", min_instance_count=min_instances, max_instance_count=max_instances),
                routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                    routing_strategy="LEAST_OUTSTANDING_REQUESTS"),
                volume_size_in_gb=startup.volume_gb, inference_ami_version=inference_ami_version)
        self.config = sagemaker.CfnEndpointConfig(
            self, "Config",
            kms_key_id=kms_key.key_arn if kms_key else None,
            execution_role_arn=model_role.role_arn if copies else None,
            # With Inference Components the endpoint config, not the model, places the instances (CreateEndpointConfig
            # VpcConfig and EnableNetworkIsolation, SageMaker API Reference).
            vpc_config=sagemaker.CfnEndpointConfig.VpcConfigProperty(subnets=network[0], security_group_ids=network[1])
            if copies and network else None,
            enable_network_isolation=True if copies and network else None,
            production_variants=[variant],
            data_capture_config=sagemaker.CfnEndpointConfig.DataCaptureConfigProperty(
                enable_capture=True, initial_sampling_percentage=capture_percent, destination_s3_uri=capture_uri,
                kms_key_id=kms_key.key_arn if kms_key else None,
                capture_options=[sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode=m)
                                 for m in ("Input", "Output")]) if capture_percent else None,
        )
        if copies:  # the endpoint launches its instances and network interfaces as this role (R6 F5)
            self.config.node.add_dependency(model_role.node.find_child("DefaultPolicy"))
        if kms_key is None:
            acknowledge_no_volume_key(self.config,
                        f"{instance_type} has local NVMe instance storage, which SageMaker encrypts with a hardware "
                        "module and for which it refuses KmsKeyId.")
        self.endpoint = logged_endpoint(self, config=self.config, logs_key=logs_key, writer=model_role)
        self.endpoint_name = self.endpoint.attr_endpoint_name

        self.component: InferenceComponent | None = None
        if copies is not None:
            # Copies scale on their own invocations; managed instance scaling follows them with instances.
            self.component = InferenceComponent(self, "Copies", endpoint_name=self.endpoint_name, variant_name=VARIANT,
                                                model_name=model_name, copies=copies, startup=startup,
                                                logs_key=logs_key, writer=model_role)
            return
        target = variant_instances(self, "Scaling", endpoint_name=self.endpoint_name, min_capacity=min_instances,
                                   max_capacity=max_instances)
        target.scale_to_track_metric(
            "Invocations",
            target_value=invocations_per_instance,
            predefined_metric=appscaling.PredefinedMetric.SAGEMAKER_VARIANT_INVOCATIONS_PER_INSTANCE,
        )
