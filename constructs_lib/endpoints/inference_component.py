"""Copies of one model on a real-time endpoint (AWS::SageMaker::InferenceComponent), scaled in copies.

The component names the model, the accelerators and host memory each copy takes, how many copies run, and the
start-up timeouts (CloudFormation Template Reference, AWS::SageMaker::InferenceComponent: Specification.ModelName,
Specification.ComputeResourceRequirements NumberOfAcceleratorDevicesRequired / MinMemoryRequiredInMb (required),
Specification.StartupParameters, RuntimeConfig.CopyCount; the same fields in the SageMaker API's
CreateInferenceComponent, botocore's sagemaker service model). SageMaker places the copies on the endpoint's
instances, and its managed instance scaling adds or removes instances to hold them (the variant's
ManagedInstanceScaling, constructs_lib/endpoints/realtime.py).

Application Auto Scaling scales the copies: resource ID `inference-component/NAME`, dimension
`sagemaker:inference-component:DesiredCopyCount`, target tracking on the predefined
`SageMakerInferenceComponentInvocationsPerCopy` (Application Auto Scaling API, RegisterScalableTarget ResourceId and
MetricType, botocore's application-autoscaling service model). Where the plan lets it scale to zero, target
tracking cannot scale out from zero copies, so a step policy adds one copy when SageMaker counts a request it had no
copy for: `NoCapacityInvocationFailures` (AWS/SageMaker, dimension InferenceComponentName), ChangeInCapacity +1,
cooldown 60 s (SageMaker Developer Guide, "Scale an endpoint to zero instances",
https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html). The guide's alarm fires
above 1 failure a minute; this one fires at the first (a sum above 0.5), so one lone request wakes the endpoint.

A component's container logs go to a log group of its own, /aws/sagemaker/InferenceComponents/<component name>, not
the endpoint's (catalog/metrics.yaml container_logs, with what was searched: AWS's log table does not list it; real
accounts' log groups do). The group is made first, with the estate's retention and key, and the model's role, as which
SageMaker writes them, may write it and no other, as for an endpoint's group (logged_endpoint.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, Fn, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from workloads.planning.monitoring import container_logs
from workloads.planning.startup import Startup

from ..lifecycle import KEPT_EVEN_IF_CREATE_FAILS
from ..logs_key import kept_log_group
from ..metrics import metric
from ..sagemaker_access import allow_log_writes
from .logged_endpoint import MAX_NAME, STACK_ID_BLOCK, stack_id_block
from .scaling import scaling_role_arn


def component_log_prefix() -> str:
    """The component's log group, less its name (metrics.yaml container_logs)."""
    group = container_logs("realtime", components=True)
    assert group.endswith("{InferenceComponentName}"), group
    return group.removesuffix("{InferenceComponentName}")


@dataclass(frozen=True)
class CopyFleet:
    """The plan's copies (workloads/planning/serving.py InferencePlan): each on `tensor_parallel` accelerators."""

    tensor_parallel: int
    per_instance: int
    min_copies: int  # 0: scales to zero
    max_copies: int
    invocations_per_copy: int  # a minute, the scaling target
    memory_mb: int  # host memory each copy reserves


class InferenceComponent(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, endpoint_name: str, variant_name: str,
                 model_name: str, copies: CopyFleet, startup: Startup, logs_key: kms.IKey, writer: iam.IRole) -> None:
        """`writer`: the role SageMaker runs the container as (the endpoint config's ExecutionRoleArn)."""
        super().__init__(scope, construct_id)
        # Named here: the scaling target's resource ID and `invoke` need the name, which the resource does not return.
        stack = Stack.of(self)
        prefix = f"{stack.stack_name}-{construct_id}"[:MAX_NAME - STACK_ID_BLOCK - 1]
        self.component_name = Fn.join("-", [prefix, stack_id_block(stack)])
        group = Fn.join("", [component_log_prefix(), self.component_name])
        self.logs = kept_log_group(self, "Logs", key=logs_key, name=group, removal=KEPT_EVEN_IF_CREATE_FAILS)
        allow_log_writes(writer, group=group)
        self.component = sagemaker.CfnInferenceComponent(
            self, "Resource", endpoint_name=endpoint_name, variant_name=variant_name,
            inference_component_name=self.component_name,
            specification=sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
                model_name=model_name,
                compute_resource_requirements=sagemaker.CfnInferenceComponent
                .InferenceComponentComputeResourceRequirementsProperty(
                    number_of_accelerator_devices_required=copies.tensor_parallel,
                    min_memory_required_in_mb=copies.memory_mb),
                # The plan's timeouts (workloads/planning/startup.py): a large model's download and load overrun the defaults.
                startup_parameters=sagemaker.CfnInferenceComponent.InferenceComponentStartupParametersProperty(
                    model_data_download_timeout_in_seconds=startup.download_timeout_s,
                    container_startup_health_check_timeout_in_seconds=startup.startup_timeout_s)),
            # At least one copy at deploy, so the stack proves the model starts; scaling takes it to zero after.
            runtime_config=sagemaker.CfnInferenceComponent.InferenceComponentRuntimeConfigProperty(
                copy_count=max(1, copies.min_copies)))
        self.component.node.add_dependency(self.logs)  # the group is there before the first copy writes

        self.scaling = appscaling.ScalableTarget(
            self, "Scaling", service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
            resource_id=f"inference-component/{self.component_name}",
            scalable_dimension="sagemaker:inference-component:DesiredCopyCount",
            min_capacity=copies.min_copies, max_capacity=copies.max_copies,
            # The SageMaker endpoint service-linked role (constructs_lib/endpoints/scaling.py), which scales inference
            # components too: its policy allows sagemaker:UpdateInferenceComponentRuntimeConfig (AWS Managed Policy
            # Reference, AWSApplicationAutoscalingSageMakerEndpointPolicy v2).
            role=iam.Role.from_role_arn(self, "ScalingRole", scaling_role_arn(self), mutable=False))
        # The name is a string, not a reference: without this the target (and its policies and alarm) could be
        # registered before the component exists, which Application Auto Scaling refuses (SageMaker Developer Guide,
        # "Scale an endpoint to zero instances": the endpoint must be in service and host the component first).
        self.scaling.node.add_dependency(self.component)
        self.scaling.scale_to_track_metric(
            "Invocations", target_value=copies.invocations_per_copy,
            predefined_metric=appscaling.PredefinedMetric.SAGEMAKER_INFERENCE_COMPONENT_INVOCATIONS_PER_COPY)
        if copies.min_copies == 0:
            self.scaling.scale_on_metric(
                "WakeFromZero",
                metric=metric("AWS/SageMaker:NoCapacityInvocationFailures",
                              {"InferenceComponentName": self.component_name}, statistic="Sum", period_s=60),
                scaling_steps=[appscaling.ScalingInterval(upper=0.5, change=0),
                               appscaling.ScalingInterval(lower=0.5, change=1)],
                adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY, cooldown=Duration.seconds(60),
                evaluation_periods=1)
