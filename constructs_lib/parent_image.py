"""The node image's parent AMI, found at deploy time: the newest DLAMI of the pinned release (Custom::ParentImage).

An SSM `latest` parameter moves with the vendor's next release, and a bake pinned to this one then fails after 30-45
minutes. This custom resource calls ec2:DescribeImages by owner and name (software.yaml `parent_dlami`) and keeps the
newest image whose description names the release (workloads/commands/dlami.py, the rule preflight runs too); none found fails
the deploy in seconds with a line naming the release and the query. It resolves on create and when the query
changes, never on a plain re-deploy: the parent stays what the stack was built on. On Delete it does nothing.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from workloads.commands import dlami
from workloads.catalog import SoftwareStack

from .deploy_time_handler import deploy_time_resource
from .nag import acknowledge_wildcards

HANDLER_SOURCE = Path(dlami.__file__)


class ParentImage(Construct):
    """`image_id`: the parent AMI's ID, a deploy-time token; `query`, `marker`: what was asked."""

    def __init__(self, scope: Construct, construct_id: str, *, software: SoftwareStack, logs_key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        self.query = software.parent_dlami_query()
        self.marker = software.release_marker or ""
        made = deploy_time_resource(
            self, role_description="Finds the node image's parent DLAMI at deploy time",
            # DescribeImages has no resource-level permissions (Service Authorization Reference, Amazon EC2 actions).
            statements=[iam.PolicyStatement(actions=["ec2:DescribeImages"], resources=["*"])],
            resource_type=dlami.RESOURCE_TYPE,
            properties={"Query": self.query, "Marker": self.marker, "Stack": software.name},
            logs_key=logs_key, source=HANDLER_SOURCE, timeout_s=90,
            description="Deploy-time lookup: the newest DLAMI of the node image's pinned release",
            reason=("The TrainStack's deploy-time parent lookup: CloudFormation invokes it on create and when the "
                    "pinned release changes; it calls DescribeImages and replies in seconds."),
            network=("it calls only the EC2 API, with IAM and TLS, to read public image metadata; nothing in the "
                     "estate's network"))
        self.role, self.function, self.resource = made.role, made.function, made.resource
        acknowledge_wildcards(self.role, resources=["*"], reason=(
            "ec2:DescribeImages, read-only, has no resource-level permissions; the handler lists public DLAMIs by "
            "owner and name to find the pinned release's."))
        self.image_id = self.resource.get_att_string("ImageId")
