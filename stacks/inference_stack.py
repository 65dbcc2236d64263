from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import Construct

from constructs_lib.endpoints.artifact_check import ArtifactCheck
from constructs_lib.endpoints.async_drain import ScheduledAsyncDrain
from constructs_lib.endpoints.async_endpoint import AsyncEndpoint
from constructs_lib.endpoints.batch_transform import ScheduledBatchTransform
from constructs_lib.endpoints.inference_component import CopyFleet
from constructs_lib.endpoints.model import ServingModel
from constructs_lib.endpoints.realtime import RealtimeEndpoint
from constructs_lib.endpoints.serverless import ServerlessEndpoint
from constructs_lib.endpoints.serving_monitor import ServingMonitor, WatchedEndpoint
from constructs_lib.images import serving_image
from workloads.commands.image_pins import pinned
from workloads.planning import layout
from workloads.planning.artifacts import ArtifactCheck as Check
from workloads.planning.monitoring import drain_seconds
from workloads.planning.serving import InferencePlan

from .base import EstateStack


def model_role_path(stack_name: str) -> str:
    """The IAM path of an InferenceStack's model roles: one per stack, so another workload's or team's differ."""
    return f"/{stack_name}/models/"


def copy_fleet(p: InferencePlan) -> CopyFleet | None:
    """The plan's copies for the component, or None: the model is the variant's."""
    if p.copies_per_instance is None:
        return None
    assert p.serving is not None and p.serving.tensor_parallel and p.memory_mb_per_copy is not None
    assert p.min_copies is not None and p.max_copies is not None and p.invocations_per_copy is not None
    return CopyFleet(tensor_parallel=p.serving.tensor_parallel, per_instance=p.copies_per_instance,
                     min_copies=p.min_copies, max_copies=p.max_copies, invocations_per_copy=p.invocations_per_copy,
                     memory_mb=p.memory_mb_per_copy)


class InferenceStack(EstateStack):
    def __init__(self, scope: Construct, construct_id: str, *, availability_zone: str,
                 inference: dict[str, InferencePlan], vpc: ec2.IVpc, subnets: list[ec2.ISubnet],
                 security_group: ec2.ISecurityGroup, bucket: s3.IBucket,
                 key: kms.IKey, logs_key: kms.IKey, artifacts: tuple[Check, ...], alarm_topic: sns.ITopic,
                 latency_ms: int | None, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, availability_zone=availability_zone, **kwargs)
        self._bucket, self._key, self._vpc, self._subnets, self._logs_key = bucket, key, vpc, subnets, logs_key
        self._security_group = security_group  # NetworkStack's: deleted after SageMaker's interfaces are gone
        self.model_roles: list[iam.IRole] = []  # the roles the endpoints' models run as
        self.model_role_path = model_role_path(self.stack_name)
        # Every artifact the kinds read, checked once before any model is created.
        self.artifact_check = ArtifactCheck(self, "ArtifactCheck", bucket=bucket, checks=artifacts, logs_key=logs_key)
        self._watched: list[WatchedEndpoint] = []
        self._batch_runs: str | None = None  # the batch state machine's ARN
        self._batch_drain = ""  # "async": the batch drains through the async endpoint (its alarms say so)
        for kind, plan in inference.items():
            getattr(self, f"_{kind}")(plan)
        if self._watched or self._batch_runs:
            # `latency_ms`: the workload's inference.latency_ms, the target the latency alarms hold endpoints to.
            ServingMonitor(self, "Monitor", endpoints=self._watched, topic=alarm_topic, latency_ms=latency_ms,
                           batch_state_machine_arn=self._batch_runs, batch_drain=self._batch_drain,
                           batch_drain_s=drain_seconds(inference) if self._batch_drain == "async" else 0.0)

    def _watch(self, kind: str, endpoint_name: str, p: InferencePlan, *, component_name: str | None = None) -> None:
        self._watched.append(WatchedEndpoint(kind, endpoint_name, accelerated=p.accelerator_kind == "nvidia-gpu",
                                             component_name=component_name, startup=p.startup))

    def _model(self, construct_id: str, plan: InferencePlan, *, in_vpc: bool = True) -> ServingModel:
        assert plan.serving is not None
        # By digest where one is recorded (workloads/catalog/image_digests.yaml), the tag it was read for kept beside it.
        image, tag = pinned(serving_image(container=plan.serving.container, region=self.region,
                                          instance_type=plan.instance_type))
        model = ServingModel(self, construct_id, image_uri=image, image_tag=tag, serving=plan.serving, bucket=self._bucket,
                             vpc=self._vpc if in_vpc else None, subnets=self._subnets, role_path=self.model_role_path,
                             security_group=self._security_group)
        model.model.node.add_dependency(self.artifact_check.resource)
        self.model_roles.append(model.role)
        cdk.CfnOutput(self, f"{construct_id}Artifact", value=plan.serving.artifact_key,
                      description=f"Upload before deploying, in DataStack.DatasetBucketName: {plan.serving.artifact_layout}")
        return model

    def _volume_key(self, plan: InferencePlan) -> kms.IKey | None:
        # SageMaker refuses KmsKeyId on instance types with local NVMe storage.
        return None if plan.local_nvme else self._key

    def _realtime(self, p: InferencePlan) -> None:
        model = self._model("RealtimeModel", p)
        endpoint = RealtimeEndpoint(
            self, "Realtime", model_name=model.model_name, logs_key=self._logs_key, model_role=model.role,
            instance_type=p.instance_type,
            min_instances=p.min_instances, max_instances=p.max_instances,
            invocations_per_instance=p.invocations_per_instance, kms_key=self._volume_key(p), startup=p.startup,
            bucket=self._bucket,
            capture_prefix=layout.CAPTURE, capture_percent=p.data_capture_percent, copies=copy_fleet(p),
            inference_ami_version=p.serving.inference_ami_version, network=model.network)
        cdk.CfnOutput(self, "RealtimeEndpointName", value=endpoint.endpoint_name)
        if endpoint.component is not None:  # invoke names the component (InvokeEndpoint InferenceComponentName)
            cdk.CfnOutput(self, "RealtimeInferenceComponentName", value=endpoint.component.component_name)
        self._watch("realtime", endpoint.endpoint_name, p,
                    component_name=endpoint.component.component_name if endpoint.component is not None else None)
        cdk.CfnOutput(self, "RealtimeInstanceType", value=p.instance_type)

    def _serverless(self, p: InferencePlan) -> None:
        model = self._model("ServerlessModel", p, in_vpc=False)
        endpoint = ServerlessEndpoint(
            self, "Serverless", model_name=model.model_name, model_role=model.role, kms_key=self._key,
            logs_key=self._logs_key, memory_mb=p.memory_mb,
            max_concurrency=p.max_concurrency, provisioned_concurrency=p.provisioned_concurrency,
            utilization_target=p.provisioned_utilization_target)
        cdk.CfnOutput(self, "ServerlessEndpointName", value=endpoint.endpoint_name)
        self._watch("serverless", endpoint.endpoint_name, p)

    def _async(self, p: InferencePlan) -> None:
        model = self._model("AsyncModel", p)
        endpoint = AsyncEndpoint(
            self, "Async", model_name=model.model_name, logs_key=self._logs_key, model_role=model.role,
            instance_type=p.instance_type,
            max_instances=p.max_instances, max_concurrent_invocations=p.max_concurrent_invocations_per_instance,
            bucket=self._bucket, input_prefix=layout.ASYNC_INPUT, output_prefix=layout.ASYNC_OUTPUT,
            failure_prefix=layout.ASYNC_FAILURE, key=self._key, volume_key=self._volume_key(p), startup=p.startup,
            inference_ami_version=p.serving.inference_ami_version)
        self._async_endpoint, self._async_role = endpoint, model.role  # a drained batch sends its requests here
        cdk.CfnOutput(self, "AsyncEndpointName", value=endpoint.endpoint_name)
        self._watch("async", endpoint.endpoint_name, p)
        cdk.CfnOutput(self, "AsyncInputPrefix", value=layout.ASYNC_INPUT)

    def _batch(self, p: InferencePlan) -> None:
        if p.serving.drain == "async":  # no transform host runs the image: the async endpoint's does (hosts.py)
            drain = ScheduledAsyncDrain(
                self, "BatchDrain", endpoint_name=self._async_endpoint.endpoint_name,
                endpoint_arn=self._async_endpoint.endpoint.ref, model_role=self._async_role, bucket=self._bucket,
                input_prefix=layout.BATCH_INPUT, content_type=p.serving.request.content_type,
                accept=p.serving.request.accept, schedule=p.schedule, logs_key=self._logs_key)
            cdk.CfnOutput(self, "BatchStateMachineArn", value=drain.state_machine.state_machine_arn)
            self._batch_runs, self._batch_drain = drain.state_machine.state_machine_arn, "async"
            return
        model = self._model("BatchModel", p)
        batch = ScheduledBatchTransform(
            self, "Batch", model_name=model.model_name, model_arn=model.model_arn, model_role=model.role, instance_type=p.instance_type,
            instance_count=p.min_instances, max_payload_mb=p.max_payload_mb,
            max_concurrent_transforms=p.max_concurrent_transforms, request=p.serving.request,
            bucket=self._bucket,
            input_prefix=layout.BATCH_INPUT, output_prefix=layout.BATCH_OUTPUT, schedule=p.schedule, key=self._key,
            volume_key=self._volume_key(p), logs_key=self._logs_key,
            transform_ami_version=p.serving.transform_ami_version)
        cdk.CfnOutput(self, "BatchStateMachineArn", value=batch.state_machine.state_machine_arn)
        self._batch_runs = batch.state_machine.state_machine_arn
