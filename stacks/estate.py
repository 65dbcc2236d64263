"""Build the stacks of one estate from a plan (stacks.build calls it for one workload or for each team's stage)."""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from constructs_lib.shared_job_logs import SharedJobLogs
from constructs_lib.team_ml_users import team_name_prefix
from workloads.planning.artifacts import artifact_checks
from workloads.commands.jobs import job_images, job_names_start
from workloads.planning.planner import Plan

from .data_stack import DataStack
from .inference_stack import InferenceStack
from .job_logs_stack import STACK_NAME, JobLogsStack
from .network_stack import NetworkStack
from .train_stack import TrainStack


@dataclass(frozen=True)
class Estate:
    network: NetworkStack
    data: DataStack
    train: TrainStack
    inference: InferenceStack | None  # only when the plan serves the model
    # Shared by every estate of the account and region (no workload or team in it); None in a team's stage, whose
    # stacks read the account's shared stack (outside every stage) by SSM parameter instead.
    job_logs: JobLogsStack | None

    @property
    def sagemaker_roles(self) -> tuple[iam.IRole, ...]:
        """The roles SageMaker runs the estate's work as (jobs, notebook, models)."""
        roles = [self.train.role] if self.train.role_service == "sagemaker" else []
        if self.train.notebook is not None:
            roles.append(self.train.notebook.role)
        return (*roles, *(self.inference.model_roles if self.inference else ()))

    def pass_role_arns(self, scope: Construct) -> list[str]:
        """What the estate's ML users may pass, as ARNs `scope` can name: the job and notebook roles, and the models'
        roles by their IAM path (role/PATH*), so naming them does not make `scope` wait for the InferenceStack, which
        deploys only once the model is in the bucket."""
        arns = [r.role_arn for r in self.sagemaker_roles if not (self.inference and r in self.inference.model_roles)]
        if self.inference:
            arns.append(cdk.Stack.of(scope).format_arn(service="iam", region="", resource="role",
                                                       resource_name=self.inference.model_role_path.lstrip("/") + "*"))
        return arns

    @property
    def stacks(self) -> tuple[cdk.Stack, ...]:
        return tuple(s for s in (self.network, self.data, self.train, self.inference) if s is not None)


def stage_of(scope: Construct) -> str:
    """The team's stage the estate is built in; "" for a lone workload (the App is a Stage too, named "")."""
    return scope.stage_name if isinstance(scope, cdk.Stage) else ""


def commands_target(scope: Construct, workload: str) -> str:
    """What `python -m workloads submit|promote` take to find this estate: a team's copy also names its stage."""
    stage = stage_of(scope)
    return workload + (f" --stage {stage}" if stage else "")


def build_estate(scope: Construct, plan: Plan, *, account: str | None = None, protect_all: bool = False,
                 named_by_workload: bool = False, alarm_emails: tuple[str, ...] = (), workload_args: str = "",
                 shared_job_logs: bool = False) -> Estate:
    """`protect_all`: termination protection on every stack (prod teams), not only the DataStack option.
    `named_by_workload`: CloudFormation names carry the workload (`huge-TrainStack`), so two workloads deploy
    side by side in one account and region; the construct IDs, which `cdk deploy TrainStack` selects, stay.
    `alarm_emails`: subscribed to the estate's alarm topic (a team's; a lone workload subscribes by hand).
    `workload_args`: the workload as the user gave it (file or preset, with -c overrides), for the commands the
    estate prints; the workload's name where absent.
    `shared_job_logs`: the account's job log groups are another stack's, outside `scope` (a team's stage): the stacks
    that run jobs read its key by SSM parameter (constructs_lib/shared_job_logs.py) rather than build a copy."""
    w = plan.workload
    env = cdk.Environment(account=account, region=w.region)
    common = dict(env=env, availability_zone=w.availability_zone)

    def named(stack_id: str) -> dict:
        return dict(stack_name=f"{w.name}-{stack_id}") if named_by_workload else {}
    protect = dict(termination_protection=True) if protect_all else {}
    what = f"{w.name}: {plan.training.instance_count} x {plan.training.instance_type}"

    # The SageMaker job log groups exist before any job or notebook of this estate can write to them.
    job_logs = None if shared_job_logs else JobLogsStack(scope, "JobLogsStack", env=env)
    first, second = plan.hosting_zones
    network = NetworkStack(scope, "NetworkStack", **named("NetworkStack"),
                           description=f"VPC for {what}: training in {first}, endpoints in {first} and {second}",
                           second_availability_zone=second, alarm_emails=alarm_emails, **common, **protect)
    net = network.network
    data = DataStack(scope, "DataStack", **named("DataStack"),
                     description=f"Dataset bucket, key and file systems for {w.name} (retained)",
                     workload_name=w.name, vpc=net.vpc, subnet=net.private_subnet, security=network.security,
                     fsx=plan.training.fsx, shared_home=w.data.shared_home or plan.training.storage == "efs",
                     termination_protection=protect_all or w.data.termination_protection, **common)
    train = TrainStack(scope, "TrainStack", **named("TrainStack"), description=f"Training for {what}",
                       training=plan.training, bucket=data.bucket, key=data.key, logs_key=network.logs_key,
                       access_logs=data.datasets.access_logs, subnet=net.private_subnet, security=network.security,
                       lustre=data.lustre, home=data.home, notebook=w.notebook,
                       training_plan_arn=w.training.training_plan_arn, init_from=w.training.init_from, vpc=net.vpc,
                       job_images=job_images(plan), workload_name=w.name, alarm_topic=network.alarm_topic,
                       job_names=job_names_start(w.name, stage_of(scope)),
                       # A team's ML users may start their notebooks (TEAM-...) as the estate's notebook role.
                       notebook_log_streams=f"{team_name_prefix(stage_of(scope))}*" if stage_of(scope) else None,
                       **common, **protect)
    inference = None if not plan.inference else InferenceStack(
        scope, "InferenceStack", **named("InferenceStack"), description=f"SageMaker inference for {w.name}",
        inference=plan.inference, artifacts=artifact_checks(plan.training, plan.inference,
                                                                   workload=commands_target(scope, workload_args or w.name)),
        vpc=network.network.vpc, subnets=network.network.hosting_subnets, security_group=network.security.workspace,
        second_availability_zone=second, bucket=data.bucket, key=data.key, logs_key=network.logs_key,
        alarm_topic=network.alarm_topic, latency_ms=w.inference.latency_ms, **common, **protect)
    estate = Estate(network, data, train, inference, job_logs)
    network.alarms.admit(stack_names=[s.stack_name for s in (train, inference) if s is not None])  # their alarms
    for stack in (train, inference):
        if stack is None:
            continue
        if job_logs is not None:
            stack.add_stack_dependency(job_logs, "SageMaker job and notebook log groups exist before anything writes")
        else:
            cdk.CfnOutput(stack, "JobLogsKeyArn", value=SharedJobLogs(stack, "SharedJobLogs").key_arn,
                          description="The key of the account's /aws/sagemaker job log groups (the shared "
                                      f"{STACK_NAME} stack, deployed first)")
    for stack in estate.stacks:
        cdk.Tags.of(stack).add("workload", w.name)
    return estate
