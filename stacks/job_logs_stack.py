"""One stack per account and region: the SageMaker job log groups every estate there writes to.

A lone workload's app builds it beside its estate (`cdk deploy TrainStack` brings it first). A teams file builds it
once per account and region outside every team's stage (`Shared-ACCOUNT-REGION`, workloads.planning.teams
.shared_stack_id), so `cdk destroy 'vision/*'` never reaches it: no team owns the key of the account-wide groups, and
deleting a team leaves the others' logs keyed. Every build makes the same CloudFormation stack name and the same
template (no workload, team or stage in it), so a second deployment is a no-op. It is termination protected, its key
and groups are retained even if it is deleted, and it publishes its key's ARN in SSM Parameter Store
(KEY_PARAMETER), which each team's TrainStack and InferenceStack read at deploy time: a team deployed before the shared
stack fails at once, naming the parameter, instead of running jobs into groups SageMaker would make unencrypted.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from constructs_lib.job_log_groups import KEY_PARAMETER, JobLogGroups

STACK_NAME = "sagemaker-job-logs"


class JobLogsStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, stack_name=STACK_NAME, termination_protection=True,
                         description="SageMaker job and notebook log groups of this account and region (shared by "
                                     "every ML estate here)", **kwargs)
        self.logs = JobLogGroups(self, "JobLogs")
        ssm.StringParameter(self, "KeyArn", parameter_name=KEY_PARAMETER, string_value=self.logs.key.key_arn,
                            description="The key of the account's /aws/sagemaker job log groups (stack "
                                        f"{STACK_NAME}); team stacks read it at deploy time")
