"""Build the four stacks of one estate from a plan (used by app.py and the tests alike)."""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from workloads import DEFAULT_WORKLOAD, load, overrides_from_context, plan
from workloads.planner import Plan

from .data_stack import DataStack
from .inference_stack import InferenceStack
from .network_stack import NetworkStack
from .train_stack import TrainStack


@dataclass(frozen=True)
class Estate:
    network: NetworkStack
    data: DataStack
    train: TrainStack
    inference: InferenceStack | None  # only when the plan serves the model

    @property
    def stacks(self) -> tuple[cdk.Stack, ...]:
        return tuple(s for s in (self.network, self.data, self.train, self.inference) if s is not None)


def build_estate(scope: Construct, plan: Plan, *, account: str | None = None, protect_all: bool = False) -> Estate:
    """`protect_all`: termination protection on every stack (prod teams), not only the DataStack option."""
    w = plan.workload
    env = cdk.Environment(account=account, region=w.region)
    common = dict(env=env, availability_zone=w.availability_zone)
    protect = dict(termination_protection=True) if protect_all else {}
    what = f"{w.name}: {plan.training.instance_count} x {plan.training.instance_type}"

    network = NetworkStack(scope, "NetworkStack", description=f"One-AZ VPC for {what}", **common, **protect)
    net = network.network
    data = DataStack(scope, "DataStack", description=f"Dataset bucket, key and file systems for {w.name} (retained)",
                     workload_name=w.name, vpc=net.vpc, subnet=net.private_subnet, security=network.security,
                     fsx=plan.training.fsx, shared_home=w.data.shared_home or plan.training.storage == "efs",
                     termination_protection=protect_all or w.data.termination_protection, **common)
    train = TrainStack(scope, "TrainStack", description=f"Training for {what}", training=plan.training,
                       bucket=data.bucket, key=data.key, subnet=net.private_subnet, security=network.security,
                       lustre=data.lustre, home=data.home, notebook=w.notebook,
                       training_plan_arn=w.training.training_plan_arn, **common, **protect)
    inference = None if not plan.inference else InferenceStack(
        scope, "InferenceStack", description=f"SageMaker inference for {w.name}", inference=plan.inference,
        vpc=network.network.vpc, subnets=network.network.vpc.private_subnets,
        bucket=data.bucket, key=data.key, **common, **protect)
    estate = Estate(network, data, train, inference)
    for stack in estate.stacks:
        cdk.Tags.of(stack).add("workload", w.name)
    return estate


def add_checks(app: cdk.App) -> None:
    """cdk-nag AwsSolutions on everything; findings go to the policy validation report."""
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def build_from_context(app: cdk.App) -> list[Estate]:
    """The one place context is read: a teams file (one stage per team, `team` picks one), or one
    workload with dotted overrides and an account. Raises ConfigError."""
    from workloads.teams import load_teams

    from .team_stage import TeamStage

    context = app.node.get_all_context()
    if context.get("teams"):
        stamped = load_teams(str(context["teams"]), only=context.get("team"))
        estates = [TeamStage(app, stamped=s).estate for s in stamped]
    else:
        the_plan = plan(load(str(context.get("workload") or DEFAULT_WORKLOAD), overrides_from_context(context)))
        estates = [build_estate(app, the_plan, account=context.get("account"))]
    add_checks(app)
    return estates
