"""A small SageMaker notebook that stops itself after an idle time (the seeds' cost guardrail).

The lifecycle configuration installs a cron job that checks Jupyter's sessions every 5 minutes
and calls StopNotebookInstance once every kernel has been idle for the configured time (the
pattern of aws-samples' auto-stop-idle lifecycle sample, written out here so that the
notebook needs no internet access to fetch it).
"""

from __future__ import annotations

import re

from aws_cdk import CfnTag, Fn, Names, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from .job_log_groups import JOB_LOG_GROUPS
from .nag import acknowledge_wildcards
from .sagemaker_access import allow_log_writes, allow_vpc_access

TAG = "ml-estate:notebook"
NAME_MAX = 63  # NotebookInstanceName: up to 63 characters, ^[a-zA-Z0-9](-*[a-zA-Z0-9])* (CreateNotebookInstance API)

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


def notebook_name(stack_name: str) -> str:
    """The notebook's name, known at synthesis so its role can name the notebook's log streams without waiting for
    it: the stack's name first (a team's stacks are TEAM-..., as its ML users' notebooks must be named)."""
    name = re.sub(r"[^a-zA-Z0-9-]", "-", f"{stack_name}-Notebook")
    if len(name) > NAME_MAX:
        raise ValueError(f"stack name {stack_name!r}: the notebook's name {name!r} would be over {NAME_MAX} characters")
    return name


class IdleStoppingNotebook(Construct):
    """`log_streams`: the streams of /aws/sagemaker/NotebookInstances its role may write, as a name pattern; by
    default this notebook's own (NAME/...). A team passes TEAM-*: its ML users may start their notebooks (named
    TEAM-...) as this role, and another team's streams stay out of reach."""

    def __init__(self, scope: Construct, construct_id: str, *, instance_type: str, idle_minutes: int,
                 vpc: ec2.IVpc, subnet: ec2.ISubnet, security_group: ec2.ISecurityGroup, key: kms.IKey,
                 log_streams: str | None = None) -> None:
        super().__init__(scope, construct_id)
        self.name = notebook_name(Stack.of(self).stack_name)
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
            self, "Notebook", notebook_instance_name=self.name, instance_type=instance_type, role_arn=self.role.role_arn,
            lifecycle_config_name=lifecycle.attr_notebook_instance_lifecycle_config_name,
            subnet_id=subnet.subnet_id, security_group_ids=[security_group.security_group_id],
            direct_internet_access="Disabled", root_access="Disabled", kms_key_id=key.key_id,
            # IMDSv2 only (session tokens): left out, a notebook also answers IMDSv1's plain GETs, which an SSRF in
            # anything the notebook runs can turn into the role's credentials.
            instance_metadata_service_configuration=sagemaker.CfnNotebookInstance
            .InstanceMetadataServiceConfigurationProperty(minimum_instance_metadata_service_version="2"),
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
        # SageMaker writes the lifecycle scripts' output to /aws/sagemaker/NotebookInstances as this role, in streams
        # NOTEBOOK-NAME/HOOK ("log stream [notebook-instance-name]/[LifecycleConfigHook]", https://docs.aws.amazon.com/
        # sagemaker/latest/APIReference/API_CreateNotebookInstanceLifecycleConfig.html); without it a failing
        # autostop leaves no trace. Only this notebook's streams (or the team's notebooks'), never every notebook's of the account.
        allow_log_writes(self.role, group=JOB_LOG_GROUPS["NotebookInstances"], streams=log_streams or f"{self.name}/*")
        acknowledge_wildcards(self.role, resources=[notebooks], reason=(
            "Stop/Describe are limited by the aws:ResourceTag condition to the one notebook tagged with this "
            "construct's unique ID."))
