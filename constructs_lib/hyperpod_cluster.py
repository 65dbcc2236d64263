"""A SageMaker HyperPod cluster with the Slurm orchestrator: controller, login and worker groups.

HyperPod configures Slurm from the API (Orchestrator.Slurm, per-group SlurmConfig) and mounts
FSx for Lustre at /fsx from the groups' storage config; the project's lifecycle scripts
(lifecycle/hyperpod, a CDK asset unpacked into a bucket of their own, because HyperPod reads an S3 prefix,
not a zip) run after that on every node, as root. Their own bucket keeps them out of the dataset bucket:
the deployment that writes them can write nothing else, and no file system link or node role reaches them. Worker groups run
deep health checks when they start, and HyperPod replaces failed nodes automatically.
"""

from __future__ import annotations

import re
from pathlib import Path

from aws_cdk import DefaultStackSynthesizer, Fn, IgnoreMode, Stack, SymlinkFollowMode
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from workloads.catalog import SoftwareStack, load_catalog, load_software, strip_ml
from workloads.planning.cluster_nodes import HYPERPOD_CONTROLLER_TYPE, HYPERPOD_LOGIN_TYPE

from .dataset_bucket import private_bucket
from .ensured_log_group import EnsuredLogGroup
from .logs_key import kept_log_group
from .lustre import LustreFileSystem
from .node_image import framework_script
from .nag import GRANT_ACTIONS, acknowledge_cdk_handler, acknowledge_wildcards
from .sagemaker_access import allow_log_writes
from .ssm_access import allow_ssm_sessions

LIFECYCLE = Path(__file__).resolve().parent.parent / "lifecycle" / "hyperpod"
LIFECYCLE_SCRIPT = "on_init_complete.sh"
LIFECYCLE_PREFIX = "lifecycle/hyperpod/"
FRAMEWORK_SCRIPT = "install-framework.sh"  # beside the lifecycle script, generated from the plan
LAYOUT_FILE = "layout.json"
CONTROLLER_TYPE, LOGIN_TYPE = HYPERPOD_CONTROLLER_TYPE, HYPERPOD_LOGIN_TYPE  # priced in the monthly estimate
PARTITION = "train"
C = sagemaker.CfnCluster


def health_checks(*, accelerator_kind: str | None, count: int) -> list[str] | None:
    """Deep health checks for accelerated workers; the NCCL connectivity test needs 2+ GPU nodes."""
    if accelerator_kind is None:
        return None
    checks = ["InstanceStress"]
    if accelerator_kind == "nvidia-gpu" and count >= 2:
        checks.append("InstanceConnectivity")
    return checks


class HyperPodCluster(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, role: iam.Role, key: kms.IKey, logs_key: kms.IKey,
                 access_logs: s3.IBucket, subnet: ec2.ISubnet,
                 security_group: ec2.ISecurityGroup, instance_type: str, instance_count: int,
                 accelerator_kind: str | None, lustre: LustreFileSystem | None,
                 training_plan_arn: str | None, software: SoftwareStack | None, layout: str | None) -> None:
        """`software`: the plan's pinned stack, installed on the accelerated nodes by the lifecycle script;
        `layout`: the plan's training.parallelism as JSON, where the sbatch examples read it."""
        super().__init__(scope, construct_id)
        bucket = self.scripts_bucket = private_bucket(self, "Scripts", key=key, access_logs=access_logs,
                                                       log_prefix="lifecycle-scripts/")
        scripts = s3deploy.BucketDeployment(
            self, "LifecycleScripts", destination_bucket=bucket, destination_key_prefix=LIFECYCLE_PREFIX,
            sources=[s3deploy.Source.asset(str(LIFECYCLE), follow_symlinks=SymlinkFollowMode.ALWAYS,
                                           ignore_mode=IgnoreMode.GLOB, exclude=["**/__pycache__", "**/*.pyc"]),
                     *_plan_files(software=software, layout=layout)],
            log_group=kept_log_group(self, "DeploymentLogs", key=logs_key),
        )
        _acknowledge_deployment(self, bucket)
        bucket.grant_read(role, LIFECYCLE_PREFIX + "*")
        acknowledge_wildcards(role, resources=[bucket.arn_for_objects(LIFECYCLE_PREFIX + "*")],
                              reason="Read-only on the lifecycle scripts' prefix of their own bucket.")
        allow_ssm_sessions(role, agent=False)  # as AmazonSageMakerClusterInstanceRolePolicy grants
        storage = [C.ClusterInstanceStorageConfigProperty(fsx_lustre_config=C.ClusterFsxLustreConfigProperty(
            dns_name=lustre.dns_name, mount_name=lustre.mount_name, mount_path="/fsx"))] if lustre else None
        # HyperPod sizes the root volume itself (CloudFormation, ClusterEbsVolumeConfig RootVolume: "You can't
        # specify the VolumeSizeInGB field"); where the workers' vendor asks for a larger disk (Neuron: 512 GB on
        # Trn1/Trn2/Trn3, workloads/catalog/software.yaml root_volume), they get it as the secondary volume HyperPod
        # mounts at /opt/sagemaker.
        facts = load_software()
        disk = facts.root_volume_gib(load_catalog().get(strip_ml(instance_type)))
        worker_disk = [C.ClusterInstanceStorageConfigProperty(ebs_volume_config=C.ClusterEbsVolumeConfigProperty(
            volume_size_in_gb=disk))] if disk > facts.root_volume_default_gib else []
        lifecycle = C.ClusterLifeCycleConfigProperty(source_s3_uri=f"s3://{bucket.bucket_name}/{LIFECYCLE_PREFIX}",
                                                     on_init_complete=LIFECYCLE_SCRIPT)

        def group(name: str, itype: str, count: int, node_type: str, **extra) -> C.ClusterInstanceGroupProperty:
            return C.ClusterInstanceGroupProperty(
                instance_group_name=name, instance_type=itype, instance_count=count, execution_role=role.role_arn,
                life_cycle_config=lifecycle, threads_per_core=1,
                instance_storage_configs=extra.pop("instance_storage_configs", storage),
                slurm_config=C.ClusterSlurmConfigProperty(node_type=node_type, **extra.pop("slurm", {})), **extra)

        stack = Stack.of(self)
        self.cluster = C(
            self, "Cluster",
            # Named (the API requires it); the stack name keeps two teams' clusters apart.
            cluster_name=re.sub(r"[^a-zA-Z0-9-]", "-", f"{stack.stack_name}-hyperpod")[:63],
            orchestrator=C.OrchestratorProperty(slurm=C.ClusterOrchestratorSlurmConfigProperty(
                slurm_config_strategy="Managed")),
            instance_groups=[
                group("controller", CONTROLLER_TYPE, 1, "Controller"),
                group("login", LOGIN_TYPE, 1, "Login"),
                group("workers", instance_type, instance_count, "Compute", slurm={"partition_names": [PARTITION]},
                      instance_storage_configs=[*(storage or []), *worker_disk] or None,
                      on_start_deep_health_checks=health_checks(accelerator_kind=accelerator_kind, count=instance_count),
                      training_plan_arn=training_plan_arn),
            ],
            node_recovery="Automatic",
            vpc_config=C.VpcConfigProperty(security_group_ids=[security_group.security_group_id],
                                           subnets=[subnet.subnet_id]),
        )
        # The nodes write their logs as the role, to this cluster's groups only (below).
        allow_log_writes(role, group=f"/aws/sagemaker/Clusters/{self.cluster.cluster_name}/*")
        # The role's permissions and the scripts must exist before HyperPod runs them.
        self.cluster.node.add_dependency(role.node.find_child("DefaultPolicy"), scripts)
        self.cluster_arn = self.cluster.attr_cluster_arn
        self.cluster_name = self.cluster.cluster_name
        # HyperPod's nodes log to /aws/sagemaker/Clusters/NAME/ID (SageMaker Developer Guide, "Log groups and
        # streams that Amazon SageMaker AI sends to Amazon CloudWatch Logs"); the ID is the ARN's last part.
        cluster_id = Fn.select(1, Fn.split("/", self.cluster.attr_cluster_arn))
        self.log_group = EnsuredLogGroup(self, "ClusterLogs", key=logs_key, name=Fn.join(
            "/", ["/aws/sagemaker/Clusters", self.cluster_name, cluster_id]))


def _plan_files(*, software: SoftwareStack | None, layout: str | None) -> list[s3deploy.ISource]:
    """What the lifecycle script takes from the plan, beside it in the prefix (on_init_complete.sh reads them)."""
    files = [s3deploy.Source.data(FRAMEWORK_SCRIPT, framework_script(software))] if software else []
    return files + ([s3deploy.Source.data(LAYOUT_FILE, layout)] if layout else [])


def _acknowledge_deployment(scope: Construct, bucket: s3.IBucket) -> None:
    """The BucketDeployment's handler is CDK's own singleton Lambda; say why its findings stand."""
    stack = Stack.of(scope)
    handler = next(c for c in stack.node.children if c.node.id.startswith("Custom::CDKBucketDeployment"))
    reason = ("CDK's BucketDeployment handler: runs only during deployment to copy the lifecycle scripts; its "
              "role and runtime are managed by aws-cdk-lib.")
    acknowledge_cdk_handler(handler, reason=reason, network=(
        "it talks only to S3 (the CDK assets bucket to the scripts bucket) with IAM and TLS, never to anything in "
        "the estate's network"))
    acknowledge_wildcards(handler, actions=GRANT_ACTIONS,
                          resources=[bucket.arn_for_objects("*"), _assets_bucket_objects(stack)], reason=reason)


def _assets_bucket_objects(stack: Stack) -> str:
    """The CDK bootstrap assets bucket's objects, where the deployment reads the zipped scripts."""
    qualifier = DefaultStackSynthesizer.DEFAULT_QUALIFIER
    return f"arn:{stack.partition}:s3:::cdk-{qualifier}-assets-{stack.account}-{stack.region}/*"
