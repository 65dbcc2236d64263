"""The one builder: one estate, or one stage per team, for what the context asked (workloads.commands.context.Target), with
the checks every synthesis runs. app.py and the tests call it; estate.py and team_stage.py never call back."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
import cdk_nag

from constructs_lib.nag import DEFAULT_PACKS, acknowledge_inline_role_policies
from workloads.commands.context import Target
from workloads.planning.teams import shared_stack_id

from .estate import Estate, build_estate
from .job_logs_stack import JobLogsStack
from .team_stage import TeamStage


def add_checks(app: cdk.App, packs: Sequence[str] = DEFAULT_PACKS) -> None:
    """cdk-nag packs on everything (AwsSolutions and NIST 800-53 rev 5 by default; the tests add HIPAA Security and
    PCI DSS 3.2.1, constructs_lib.nag.ALL_PACKS); findings go to the policy validation report, and an
    unacknowledged one fails the synthesis."""
    acknowledge_inline_role_policies(app)
    cdk.Validations.of(app).add_plugins(*(getattr(cdk_nag, p)(app) for p in packs))


def build(app: cdk.App, target: Target, *, packs: Sequence[str] = DEFAULT_PACKS,
          shard: tuple[int, int] = (0, 1)) -> list[Estate]:
    """`shard` (K, N): a worker of a teams file's synthesis builds teams K, K+N, ... and, when K is 0, the shared
    stacks (workloads/commands/synth_workers.py); (0, 1) builds everything."""
    index, count = shard
    if target.teams:
        # What belongs to no team, once per account and region, outside every team's stage (`cdk deploy 'Shared-*'`).
        for account, region in dict.fromkeys((s.team.account, s.team.region) for s in target.teams) if not index else ():
            JobLogsStack(app, shared_stack_id(account, region), env=cdk.Environment(account=account, region=region))
        estates = [TeamStage(app, stamped=s).estate for s in target.teams[index::count]]
    else:
        assert target.plan is not None
        estates = [build_estate(app, target.plan, account=target.account, named_by_workload=True,
                                workload_args=target.workload_args)]
    add_checks(app, packs)
    return estates
