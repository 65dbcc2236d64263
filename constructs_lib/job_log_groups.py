"""The log groups SageMaker jobs and notebooks write to, made ahead with a retention and a key of their own.

SageMaker writes training, processing and transform jobs and notebook instances of every workload and team in
an account and region to one fixed log group per kind (SageMaker Developer Guide, "Log groups and streams that
Amazon SageMaker AI sends to Amazon CloudWatch Logs"), creating it on first write when it does not exist:
unencrypted and kept forever. These groups belong to no one estate, so they live in one stack per account and
region (stacks/job_logs_stack.py) with their own key; the key and the groups are retained. An account that ran a
SageMaker job before already has some of them, so each is ensured (created, or given the key and retention), not
created by CloudFormation, which would fail on an existing name.
"""

from __future__ import annotations

from constructs import Construct

from .ensured_log_group import EnsuredLogGroup
from .logs_key import LogsKey

# Where the shared stack publishes its key's ARN (one per account and region, like the groups): what a team's stacks
# read at deploy time (SharedJobLogs).
KEY_PARAMETER = "/sagemaker-job-logs/key-arn"

# Construct ID -> the name SageMaker writes to. The IDs make the logical IDs a test pins.
JOB_LOG_GROUPS = {
    "TrainingJobs": "/aws/sagemaker/TrainingJobs",
    "ProcessingJobs": "/aws/sagemaker/ProcessingJobs",
    "TransformJobs": "/aws/sagemaker/TransformJobs",
    "NotebookInstances": "/aws/sagemaker/NotebookInstances",
}


class JobLogGroups(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.key = LogsKey(self, "Key", description="CloudWatch Logs of SageMaker jobs and notebooks in this "
                                                     "account and region").key
        self.groups = {construct: EnsuredLogGroup(self, construct, name=name, key=self.key)
                       for construct, name in JOB_LOG_GROUPS.items()}
