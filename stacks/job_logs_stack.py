"""One stack per account and region: the SageMaker job log groups every estate there writes to.

Every estate and every team in an account and region builds this stack with the same name and the same template
(no workload, team or stage in it), so deploying it again is a no-op and no estate owns it. It is termination
protected, and its key and groups are retained even if it is deleted.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from constructs_lib.job_log_groups import JobLogGroups

STACK_NAME = "sagemaker-job-logs"


class JobLogsStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, stack_name=STACK_NAME, termination_protection=True,
                         description="SageMaker job and notebook log groups of this account and region (shared by "
                                     "every ML estate here)", **kwargs)
        self.logs = JobLogGroups(self, "JobLogs")
