"""An asynchronous endpoint: requests queue in S3, results and failures land in S3 with SNS
notices, and it scales to zero (SageMaker developer guide, "Autoscale an asynchronous endpoint"):

- target tracking on ApproximateBacklogSizePerInstance keeps the queue short per instance;
- a step policy on HasBacklogWithoutCapacity starts the first instance when requests arrive
  while none runs (target tracking alone never scales out from zero).

SageMaker does the queue's work as the model's role ("Complete the prerequisites"): it reads each
request from the input prefix, writes the output and failure objects encrypted with the output
key, and publishes to the two topics. The role gets exactly that.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from constructs import Construct

from workloads.planning.async_client import backlog_target
from workloads.planning.startup import Startup

from ..nag import acknowledge_no_volume_key, acknowledge_prefix_grants
from ..sagemaker_access import allow_reading, allow_volume_key
from .logged_endpoint import logged_endpoint
from .scaling import VARIANT, variant_instances


class AsyncEndpoint(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, model_name: str, logs_key: kms.IKey,
                 model_role: iam.IRole, instance_type: str, max_instances: int, max_concurrent_invocations: int,
                 bucket: s3.IBucket, input_prefix: str, output_prefix: str, failure_prefix: str, key: kms.IKey,
                 volume_key: kms.IKey | None, startup: Startup,
                 inference_ami_version: str | None = None) -> None:
        super().__init__(scope, construct_id)
        # Topics: KMS-encrypted, TLS only (enforce_ssl adds the aws:SecureTransport deny).
        self.success_topic = sns.Topic(self, "Success", master_key=key, enforce_ssl=True)
        self.error_topic = sns.Topic(self, "Error", master_key=key, enforce_ssl=True)
        allow_reading(model_role, bucket=bucket, key=input_prefix, listing=False)  # requests are read one by one, never listed
        bucket.grant_put(model_role, output_prefix + "*")
        bucket.grant_put(model_role, failure_prefix + "*")
        acknowledge_prefix_grants(
            model_role, bucket=bucket, prefixes=[input_prefix, output_prefix, failure_prefix],
            reason=("Asynchronous inference: SageMaker reads requests from the input prefix and writes outputs and "
                   "failures as the model's role, on those three prefixes only."))
        for topic in (self.success_topic, self.error_topic):
            topic.grant_publish(model_role)
        if volume_key is not None:
            allow_volume_key(model_role, key=volume_key)  # the instances' ML storage volumes (KmsKeyId)
        output_uri, failure_uri = bucket.s3_url_for_object(output_prefix), bucket.s3_url_for_object(failure_prefix)
        C = sagemaker.CfnEndpointConfig
        self.config = C(
            self, "Config",
            kms_key_id=volume_key.key_arn if volume_key else None,
            production_variants=[C.ProductionVariantProperty(
                variant_name=VARIANT, model_name=model_name, instance_type=instance_type,
                initial_instance_count=1, initial_variant_weight=1.0,
                # Sized from the model's bytes by the plan (workloads/planning/startup.py): a large model's download and
                # load overrun SageMaker's defaults and the endpoint rolls back.
                model_data_download_timeout_in_seconds=startup.download_timeout_s,
                container_startup_health_check_timeout_in_seconds=startup.startup_timeout_s,
                volume_size_in_gb=startup.volume_gb,
                # The host AMI the container needs (workloads/planning/contracts.py: Ray Serve's GPU build); None: the default.
                inference_ami_version=inference_ami_version)],
            async_inference_config=C.AsyncInferenceConfigProperty(
                client_config=C.AsyncInferenceClientConfigProperty(
                    max_concurrent_invocations_per_instance=max_concurrent_invocations),
                output_config=C.AsyncInferenceOutputConfigProperty(
                    s3_output_path=output_uri, s3_failure_path=failure_uri, kms_key_id=key.key_arn,
                    notification_config=C.AsyncInferenceNotificationConfigProperty(
                        success_topic=self.success_topic.topic_arn, error_topic=self.error_topic.topic_arn))),
        )
        if volume_key is None:
            acknowledge_no_volume_key(self.config,
                        f"{instance_type} has local NVMe instance storage, which SageMaker encrypts with a hardware "
                        "module and for which it refuses KmsKeyId. Outputs are still KMS-encrypted in S3.")
        self.endpoint = logged_endpoint(self, config=self.config, logs_key=logs_key, writer=model_role)
        self.endpoint_name = self.endpoint.attr_endpoint_name

        target = variant_instances(self, "Scaling", endpoint_name=self.endpoint_name, min_capacity=0,
                                   max_capacity=max_instances)
        dimensions = {"EndpointName": self.endpoint_name}
        target.scale_to_track_metric(
            # The backlog counts in-flight requests: an instance serving its full concurrency is the target.
            "Backlog", target_value=backlog_target(max_concurrent_invocations),
            custom_metric=cloudwatch.Metric(namespace="AWS/SageMaker", metric_name="ApproximateBacklogSizePerInstance",
                                            dimensions_map=dimensions, statistic="Average", period=Duration.minutes(1)),
            scale_in_cooldown=Duration.minutes(10), scale_out_cooldown=Duration.minutes(2),
        )
        target.scale_on_metric(
            "WakeFromZero",
            metric=cloudwatch.Metric(namespace="AWS/SageMaker", metric_name="HasBacklogWithoutCapacity",
                                     dimensions_map=dimensions, statistic="Average", period=Duration.minutes(1)),
            scaling_steps=[appscaling.ScalingInterval(upper=0.5, change=0),
                           appscaling.ScalingInterval(lower=0.5, change=1)],
            adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY, cooldown=Duration.minutes(2),
            evaluation_periods=1,
        )
