"""The role training nodes run as: read the dataset, write outputs and checkpoints, nothing else."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from .nag import acknowledge_prefix_grants, acknowledge_wildcards
from .job_log_groups import JOB_LOG_GROUPS
from .sagemaker_access import allow_log_writes, allow_sagemaker_basics, allow_volume_key, allow_vpc_access

from workloads.planning import layout

DATASET_PREFIX = layout.DATASETS
JOBS_PREFIX = layout.JOBS
OUTPUT_PREFIX = layout.OUTPUT
CHECKPOINT_PREFIX = layout.CHECKPOINTS


class TrainingRole(Construct):
    """`service` is the principal that runs the nodes: ec2 (Slurm) or sagemaker (jobs, HyperPod).

    `job_images`: every image the SageMaker jobs that run as this role pull (workloads.commands.jobs.job_images: `submit`'s
    training image and `process`'s scikit-learn image); empty where no SageMaker job runs as it (Slurm and HyperPod
    nodes). A jobs role pulls exactly those repositories, reads and writes the processing prefixes
    (layout.PROCESSING_READS / PROCESSING_WRITES), may grant EBS the data key `key` for the jobs' volumes, and writes
    the log streams of jobs whose names start with `job_names` (workloads.commands.jobs.job_names_start) in the account's
    shared job groups, and no other job's (another team's) there.

    `metric_namespaces`: the CloudWatch namespaces the nodes' own software publishes to (node_metrics.namespaces:
    the CloudWatch agent, Neuron's monitor), and no other."""

    def __init__(self, scope: Construct, construct_id: str, *, service: str, bucket: s3.IBucket,
                 vpc: ec2.IVpc, subnet: ec2.ISubnet, security_group: ec2.ISecurityGroup,
                 key: kms.IKey | None = None, job_images: Sequence[str] = (), job_names: str = "",
                 path: str | None = None, metric_namespaces: Sequence[str] = ()) -> None:
        super().__init__(scope, construct_id)
        # AWS PCS accepts node roles named AWSPCS* or under the path /aws-pcs/.
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal(f"{service}.amazonaws.com"), path=path,
                             description=f"Training nodes ({service}): dataset read, outputs and checkpoints write")
        reads, writes = [DATASET_PREFIX], [OUTPUT_PREFIX]
        bucket.grant_read(self.role, DATASET_PREFIX + "*")
        # Checkpoints are read, written and deleted (rotation), but never their versions: versioning keeps what a
        # delete removed (s3:DeleteObject adds a delete marker; s3:DeleteObjectVersion would erase the data).
        bucket.grant_read(self.role, CHECKPOINT_PREFIX + "*")
        bucket.grant_put(self.role, CHECKPOINT_PREFIX + "*")
        self.role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:DeleteObject"],
                                                              resources=[bucket.arn_for_objects(CHECKPOINT_PREFIX + "*")]))
        bucket.grant_put(self.role, OUTPUT_PREFIX + "*")
        if service == "sagemaker":
            reads.append(JOBS_PREFIX)  # the job code `submit` and `process` upload
            bucket.grant_read(self.role, JOBS_PREFIX + "*")
            allow_sagemaker_basics(self.role, image_uris=job_images)  # HyperPod nodes pull none
            allow_vpc_access(self.role, vpc=vpc, subnets=[subnet], security_group=security_group)
        if job_images:
            for prefix in layout.PROCESSING_READS:
                if prefix not in reads:
                    reads.append(prefix)
                    bucket.grant_read(self.role, prefix + "*")
            for prefix in layout.PROCESSING_WRITES:
                if prefix not in writes:
                    writes.append(prefix)
                    bucket.grant_put(self.role, prefix + "*")
            if key is not None:  # jobs on EBS-only types encrypt their volumes with the data key (jobs.Estate)
                allow_volume_key(self.role, key=key)
            if not job_names:
                raise ValueError("a jobs role needs the start of its jobs' names (workloads.commands.jobs.job_names_start)")
            for group in (JOB_LOG_GROUPS["TrainingJobs"], JOB_LOG_GROUPS["ProcessingJobs"]):
                allow_log_writes(self.role, group=group, streams=f"{job_names}*")
        if metric_namespaces:
            # PutMetricData takes no resource; the cloudwatch:namespace condition limits where it writes (CloudWatch
            # User Guide, "Using condition keys to limit access to CloudWatch namespaces",
            # https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/iam-cw-condition-keys-namespace.html).
            self.role.add_to_principal_policy(iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"], resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": sorted(metric_namespaces)}}))
            acknowledge_wildcards(self.role, resources=["*"], reason=(
                "cloudwatch:PutMetricData has no resource-level permissions; the statement is limited to the "
                "namespaces the nodes' CloudWatch agent and Neuron monitor write (cloudwatch:namespace)."))
        self.reads, self.writes = tuple(reads), tuple(writes)  # what jobs running as this role may read and write
        acknowledge_prefix_grants(
            self.role, bucket=bucket, prefixes=(*dict.fromkeys((*reads, CHECKPOINT_PREFIX, *writes)),),
            reason="Object access is confined to named prefixes of the dataset bucket (workloads/planning/layout.py: datasets/, "
                   "checkpoints/, output/, and for SageMaker jobs jobs/ and processed/); the wildcard actions are "
                   "CDK's grant action groups on that one bucket and its key.")
