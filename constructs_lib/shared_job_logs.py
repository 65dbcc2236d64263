"""A team stack's reference to the account's shared job log groups (stacks/job_logs_stack.py), by SSM parameter.

A team's stage cannot depend on a stack outside it (CDK refuses dependencies across stage boundaries), and an export
would tie every team to the shared stack's template. The shared stack's key ARN is read instead as a CloudFormation
parameter of type AWS::SSM::Parameter::Value<String>, resolved when the team stack is deployed: with no shared stack
in the account and region the deployment stops before creating anything, naming the parameter. It decides nothing
(the value is the same for every team): it orders the deployments and says which key the team's job logs are under.

The team's roles need nothing on that key: CloudWatch Logs encrypts and decrypts the group's events itself, as the
service the key policy names ("This enables CloudWatch Logs to decrypt this data whenever it is requested", CloudWatch
Logs API Reference, AssociateKmsKey).
"""

from __future__ import annotations

from aws_cdk import aws_ssm as ssm
from constructs import Construct

from .job_log_groups import KEY_PARAMETER


class SharedJobLogs(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.key_arn: str = ssm.StringParameter.value_for_string_parameter(self, KEY_PARAMETER)
