"""The role training nodes run as: read the dataset, write outputs and checkpoints, nothing else."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from .nag import acknowledge_prefix_grants
from .sagemaker_access import allow_sagemaker_basics, allow_vpc_access

from workloads import layout

DATASET_PREFIX = layout.DATASETS
JOBS_PREFIX = layout.JOBS
OUTPUT_PREFIX = layout.OUTPUT
CHECKPOINT_PREFIX = layout.CHECKPOINTS


class TrainingRole(Construct):
    """`service` is the principal that runs the nodes: ec2 (Slurm) or sagemaker (jobs, HyperPod)."""

    def __init__(self, scope: Construct, construct_id: str, *, service: str, bucket: s3.IBucket,
                 vpc: ec2.IVpc, subnet: ec2.ISubnet, security_group: ec2.ISecurityGroup,
                 image_uri: str | None = None, path: str | None = None) -> None:
        super().__init__(scope, construct_id)
        # AWS PCS accepts node roles named AWSPCS* or under the path /aws-pcs/.
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal(f"{service}.amazonaws.com"), path=path,
                             description=f"Training nodes ({service}): dataset read, outputs and checkpoints write")
        prefixes = (DATASET_PREFIX, CHECKPOINT_PREFIX, OUTPUT_PREFIX)
        bucket.grant_read(self.role, DATASET_PREFIX + "*")
        bucket.grant_read_write(self.role, CHECKPOINT_PREFIX + "*")
        bucket.grant_put(self.role, OUTPUT_PREFIX + "*")
        acknowledge_prefix_grants(
            self.role, bucket=bucket, prefixes=(*prefixes, JOBS_PREFIX),
            reason="Object access is confined to the dataset bucket's datasets/, checkpoints/, output/ and jobs/ prefixes; "
                   "the wildcard actions are CDK's grant action groups on that one bucket and its key.")
        if service == "sagemaker":
            bucket.grant_read(self.role, JOBS_PREFIX + "*")
            # SageMaker training jobs pull the planned training image; HyperPod nodes pull none.
            allow_sagemaker_basics(self.role, image_uri=image_uri)
            allow_vpc_access(self.role, vpc=vpc, subnet=subnet, security_group=security_group)
