"""A small SageMaker notebook that stops itself after an idle time (the seeds' cost guardrail).

The lifecycle configuration installs a cron job that checks Jupyter's sessions every 5 minutes
and calls StopNotebookInstance once every kernel has been idle for the configured time (the
pattern of aws-samples' auto-stop-idle lifecycle sample, written out here so that the
notebook needs no internet access to fetch it).
"""

from __future__ import annotations

from aws_cdk import ArnFormat, CfnTag, Fn, Names, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from .nag import acknowledge_wildcards
from .sagemaker_access import allow_vpc_access

TAG = "ml-estate:notebook"

_AUTOSTOP = r"""#!/bin/bash
set -eo pipefail  # no -u: conda's activate reads unset variables
IDLE_SECONDS={idle}
cat > /usr/local/bin/ml-estate-autostop.py <<'PY'
import datetime, json, ssl, sys, urllib.request
import boto3
idle = int(sys.argv[1])
name = json.load(open("/opt/ml/metadata/resource-metadata.json"))["ResourceName"]
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
sessions = json.load(urllib.request.urlopen("https://localhost:8443/api/sessions", context=ctx))
now = datetime.datetime.now(datetime.timezone.utc)
sm = boto3.client("sagemaker")
if sessions:
    busy = [s for s in sessions if s["kernel"]["execution_state"] != "idle" or
            (now - datetime.datetime.fromisoformat(s["kernel"]["last_activity"].replace("Z", "+00:00"))).total_seconds() < idle]
else:
    modified = sm.describe_notebook_instance(NotebookInstanceName=name)["LastModifiedTime"]
    busy = (now - modified).total_seconds() < idle
if not busy:
    sm.stop_notebook_instance(NotebookInstanceName=name)
PY
PYTHON=$(source /home/ec2-user/anaconda3/bin/activate JupyterSystemEnv && which python)
(crontab -l 2>/dev/null | grep -v ml-estate-autostop; \
 echo "*/5 * * * * $PYTHON /usr/local/bin/ml-estate-autostop.py $IDLE_SECONDS >> /var/log/ml-estate-autostop.log 2>&1") | crontab -
"""


def autostop_script(idle_minutes: int) -> str:
    return _AUTOSTOP.replace("{idle}", str(idle_minutes * 60))


class IdleStoppingNotebook(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, instance_type: str, idle_minutes: int,
                 vpc: ec2.IVpc, subnet: ec2.ISubnet, security_group: ec2.ISecurityGroup, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
                             description="Notebook: may stop itself when idle")
        lifecycle = sagemaker.CfnNotebookInstanceLifecycleConfig(
            self, "AutoStop",
            on_start=[sagemaker.CfnNotebookInstanceLifecycleConfig.NotebookInstanceLifecycleHookProperty(
                content=Fn.base64(autostop_script(idle_minutes)))])
        # What a team's ML users' notebooks may start with too (team_ml_users.py: no other lifecycle configuration).
        self.lifecycle_config_arn = Stack.of(self).format_arn(
            service="sagemaker", resource="notebook-instance-lifecycle-config",
            resource_name=lifecycle.attr_notebook_instance_lifecycle_config_name)
        identity = Names.unique_id(self)
        self.notebook = sagemaker.CfnNotebookInstance(
            self, "Notebook", instance_type=instance_type, role_arn=self.role.role_arn,
            lifecycle_config_name=lifecycle.attr_notebook_instance_lifecycle_config_name,
            subnet_id=subnet.subnet_id, security_group_ids=[security_group.security_group_id],
            direct_internet_access="Disabled", root_access="Disabled", kms_key_id=key.key_id,
            tags=[CfnTag(key=TAG, value=identity)],
        )
        # In our subnet, SageMaker attaches the notebook's interface as this role (CreateNotebookInstance API: Execution
        # Role Permissions; the failure it reports otherwise names ec2:CreateNetworkInterface).
        allow_vpc_access(self.role, vpc=vpc, subnets=[subnet], security_group=security_group)
        # Only this notebook, picked out by its tag: naming its ARN would make the role depend on it.
        notebooks = Stack.of(self).format_arn(service="sagemaker", resource="notebook-instance", resource_name="*")
        self.role.add_to_principal_policy(iam.PolicyStatement(
            actions=["sagemaker:StopNotebookInstance", "sagemaker:DescribeNotebookInstance"],
            resources=[notebooks], conditions={"StringEquals": {f"aws:ResourceTag/{TAG}": identity}}))
        # The lifecycle script's output goes to CloudWatch Logs as this role ("Customize a notebook instance
        # using a lifecycle configuration script"); without it a failing autostop leaves no trace.
        logs = Stack.of(self).format_arn(service="logs", resource="log-group",
                                         resource_name="/aws/sagemaker/NotebookInstances:log-stream:*",
                                         arn_format=ArnFormat.COLON_RESOURCE_NAME)
        self.role.add_to_principal_policy(iam.PolicyStatement(
            actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"], resources=[logs]))
        acknowledge_wildcards(self.role, resources=[notebooks, logs], reason=(
            "Stop/Describe are limited by the aws:ResourceTag condition to the one notebook tagged with this "
            "construct's unique ID; log streams are created per notebook and hook under the one log group "
            "/aws/sagemaker/NotebookInstances."))
