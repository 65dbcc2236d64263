from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import Construct

from constructs_lib.cluster_security import ClusterSecurityGroups
from constructs_lib.hyperpod_cluster import HyperPodCluster
from constructs_lib.logs_key import kept_log_group
from constructs_lib.lustre import LustreFileSystem
from constructs_lib.node_bootstrap import HEALTH_SCRIPT, Health, Metrics, Mounts, mime_user_data, node_script
from constructs_lib.node_image import NodeImage
from constructs_lib.node_launch_template import NodeLaunchTemplate
from constructs_lib.node_metrics import namespaces
from constructs_lib.notebook import IdleStoppingNotebook
from constructs_lib.shared_home import SharedHome
from constructs_lib.slurm_cluster import SlurmCluster, connect_command
from constructs_lib.training_monitor import TrainingMonitor
from constructs_lib.training_role import DATASET_PREFIX, TrainingRole
from workloads.planning.acceptance import acceptance_submit, calibration_submit
from workloads.catalog import PRIMARY, load_catalog, load_software
from workloads.planning.monitoring import cluster_gpu_nodes, training_dashboard
from workloads.planning.training import TrainingPlan
from workloads.planning.train_commands import slurm_submit
from workloads.config.schema import Notebook

from .base import EstateStack

_INPUT_MODE = {"s3-file": "File", "s3-fastfile": "FastFile", "fsx-lustre": "FSxLustre", "efs": "EFS"}


class TrainStack(EstateStack):
    def __init__(self, scope: Construct, construct_id: str, *, availability_zone: str, training: TrainingPlan,
                 bucket: s3.IBucket, key: kms.IKey, logs_key: kms.IKey, access_logs: s3.IBucket,
                 subnet: ec2.ISubnet,
                 security: ClusterSecurityGroups,
                 lustre: LustreFileSystem | None, home: SharedHome | None, notebook: Notebook | None,
                 training_plan_arn: str | None, vpc: ec2.IVpc, job_images: tuple[str, ...], workload_name: str,
                 alarm_topic: sns.ITopic, job_names: str, notebook_log_streams: str | None = None,
                 init_from: str | None = None, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, availability_zone=availability_zone, **kwargs)
        self.workload_name = workload_name
        self.init_from = init_from  # training.init_from: the base model a fine-tune starts from
        self.notebook: IdleStoppingNotebook | None = None
        slurm = training.orchestrator == "slurm"
        # `job_images`: what `submit` and `process` run, for sagemaker-jobs plans only (workloads.commands.jobs.job_images).
        self.role_service = "ec2" if slurm else "sagemaker"  # who runs as self.role: PCS nodes or SageMaker
        self.role = TrainingRole(self, "TrainingRole", service=self.role_service, bucket=bucket,
                                 vpc=vpc, subnet=subnet, security_group=security.cluster, key=key,
                                 job_images=job_images, job_names=job_names, path="/aws-pcs/" if slurm else None,
                                 metric_namespaces=namespaces(training.accelerator_kind) if slurm else ()).role
        cdk.CfnOutput(self, "TrainingRoleArn", value=self.role.role_arn)
        if job_images:
            cdk.CfnOutput(self, "TrainingImage", value=job_images[0],
                          description="The image `python -m workloads submit` runs")
            cdk.CfnOutput(self, "ProcessingImage", value=job_images[1],
                          description="The image `python -m workloads process` runs; the role pulls only these two")
        cdk.CfnOutput(self, "Cluster", value=f"{training.instance_count} x {training.instance_type} "
                                             f"({training.orchestrator})")
        cdk.CfnOutput(self, "InputMode", value=_INPUT_MODE[training.storage],
                      description="How training reads the dataset")
        cdk.CfnOutput(self, "DatasetPrefix", value=DATASET_PREFIX,
                      description="Training reads s3://<DataStack.DatasetBucketName>/" + DATASET_PREFIX)
        if slurm:
            self._slurm(training, subnet, security, lustre, home, access_logs, logs_key)
        elif training.orchestrator == "hyperpod":
            hyperpod = HyperPodCluster(
                self, "HyperPod", role=self.role, key=key, logs_key=logs_key, access_logs=access_logs,
                subnet=subnet,
                security_group=security.cluster,
                instance_type=training.sagemaker_instance_type, instance_count=training.instance_count,
                accelerator_kind=training.accelerator_kind, lustre=lustre, training_plan_arn=training_plan_arn,
                software=training.software, layout=training.parallelism.as_json() if training.parallelism else None)
            cdk.CfnOutput(self, "HyperPodClusterName", value=hyperpod.cluster_name)
            _submit_output(self, training, workload=self.workload_name, init_from=self.init_from)
            cdk.CfnOutput(self, "Connect", description="Shell on the login node (SSM Session Manager)",
                          value=f"aws sagemaker list-cluster-nodes --cluster-name {hyperpod.cluster_name} "
                                "--instance-group-name-contains login; then aws ssm start-session --target "
                                f"sagemaker-cluster:<cluster-id>_login-<instance-id>")
        if training_dashboard(training):
            # The Cluster dimension the compute nodes' CloudWatch agent publishes with (node_metrics.py): this stack's name.
            TrainingMonitor(self, "Monitor", topic=alarm_topic, cluster=self.stack_name if slurm else None,
                            # the run's metrics: shipped by the Slurm nodes' agent, or a SageMaker job's stdout;
                            # HyperPod's nodes run no agent of ours
                            workload=None if training.orchestrator == "hyperpod" else self.workload_name,
                            gpu_nodes=cluster_gpu_nodes(training),
                            file_system_id=lustre.file_system_id if lustre else None,
                            fsx_capacity_gib=training.fsx.storage_capacity_gib if training.fsx else None)
        if notebook is not None:
            nb = IdleStoppingNotebook(self, "Notebook", instance_type=notebook.instance_type,
                                      idle_minutes=notebook.idle_minutes, vpc=vpc, subnet=subnet,
                                      security_group=security.workspace, key=key,
                                      log_streams=notebook_log_streams)
            self.notebook = nb
            cdk.CfnOutput(self, "NotebookName", value=nb.notebook.attr_notebook_instance_name,
                          description=f"Stops itself after {notebook.idle_minutes} idle minutes")

    def _slurm(self, t: TrainingPlan, subnet: ec2.ISubnet, security: ClusterSecurityGroups,
               lustre: LustreFileSystem | None, home: SharedHome | None, logs: s3.IBucket, logs_key: kms.IKey) -> None:
        assert t.software is not None  # Slurm clusters train on accelerators, each with its pinned stack
        assert t.compute_min_nodes is not None  # the plan sets it for every Slurm cluster
        # Root volumes: the default, or what the accelerator's vendor asks for (workloads/catalog/software.yaml).
        root_gib = load_software().root_volume_gib(load_catalog().get(t.instance_type))
        image = NodeImage(self, "NodeImage", software=t.software, subnet=subnet, security_group=security.bake,
                          logs=logs, logs_key=logs_key, root_volume_gib=root_gib)
        mounts = Mounts(lustre_dns=lustre.dns_name if lustre else None,
                        lustre_mount_name=lustre.mount_name if lustre else None,
                        home_dns=f"{home.file_system_id}.efs.{self.region}.amazonaws.com" if home else None)
        layout = t.parallelism.as_json() if t.parallelism else None
        itype = load_catalog().get(t.instance_type)
        health = Health(kind=t.accelerator_kind, devices=itype.accelerator.count) if itype.accelerator else None
        # The compute nodes report to the cluster's dashboard (TrainingMonitor's Cluster dimension: this stack's name).
        # The trainer's metrics file, shipped by each node's agent (node_metrics.TRAIN_METRICS_FILE); CloudWatch Logs
        # extracts its EMF lines into the dashboard's MLEstate/Training metrics.
        training_logs = kept_log_group(self, "TrainingMetricsLogs", key=logs_key)
        training_logs.grant_write(self.role)
        metrics = Metrics(cluster=self.stack_name, region=self.region, training_log_group=training_logs.log_group_name)
        user_data, login_data = (mime_user_data(node_script(accelerator_kind=t.accelerator_kind, mounts=mounts,
                                                            layout=layout, efa=t.efa_interfaces > 0, health=checked,
                                                            metrics=reporting))
                                 # the login node has no accelerators to check, and is not a node that runs jobs
                                 for checked, reporting in ((health, metrics), (None, None)))
        placement = ec2.CfnPlacementGroup(self, "PlacementGroup", strategy="cluster") if t.placement_group else None
        compute = NodeLaunchTemplate(
            self, "ComputeTemplate", subnet=subnet, security_group=security.cluster, interfaces=t.network_interfaces,
            user_data=user_data, placement_group=placement, capacity_reservation_id=t.capacity_reservation_id,
            capacity_block_instance_type=t.instance_type if t.capacity_block else None,
            name_tag=f"{self.stack_name}-compute", root_volume_gib=root_gib)
        login = NodeLaunchTemplate(self, "LoginTemplate", subnet=subnet, security_group=security.cluster,
                                   interfaces=PRIMARY, user_data=login_data, name_tag=f"{self.stack_name}-login",
                                   root_volume_gib=root_gib)  # the same image, so at least its snapshot
        cluster = SlurmCluster(self, "Slurm", subnet=subnet, security_group=security.cluster, node_role=self.role,
                               image_id=image.image_id, compute_template=compute, login_template=login,
                               instance_type=t.instance_type, node_count=t.instance_count,
                               min_nodes=t.compute_min_nodes, scale_down_idle_s=t.scale_down_idle_s,
                               capacity_block=t.capacity_block, prolog=HEALTH_SCRIPT if health else None)
        cdk.CfnOutput(self, "PcsClusterId", value=cluster.cluster_id)
        cdk.CfnOutput(self, "NodeImageId", value=image.image_id,
                      description=f"Baked from the newest {image.parent.query['Filters'][0]['Values'][0]} image "
                                  f"of {(image.parent.marker or 'its name').rstrip('.')} with the PCS agent and Slurm")
        cdk.CfnOutput(self, "Connect", value=connect_command(region=self.region, login_group_id=cluster.login.attr_id),
                      description="Shell on the login node (SSM Session Manager)")
        _submit_output(self, t, workload=self.workload_name, init_from=self.init_from)


def _submit_output(stack: cdk.Stack, t: TrainingPlan, *, workload: str, init_from: str | None = None) -> None:
    hyperpod = t.orchestrator == "hyperpod"
    cdk.CfnOutput(stack, "Submit", value=slurm_submit(workload=workload, nodes=t.instance_count,
                                                      accelerator_kind=t.accelerator_kind, parallelism=t.parallelism,
                                                      auto_resume=hyperpod, speed=t.speed_flags,
                                                      init_from=init_from),
                  description="Tokenize datasets/text/ with datasets/tokenizer/, then train the plan's steps on every "
                              "node and export the model where serving reads it (docs/training.md)")
    itype = load_catalog().get(t.instance_type)
    cdk.CfnOutput(stack, "Acceptance", value=acceptance_submit(workload=workload, nodes=t.instance_count, itype=itype,
                                                               accelerator_kind=t.accelerator_kind),
                  description="Before the first run: a collective over EFA on every node, its bus bandwidth beside "
                              "the type's EFA line rate (docs/operations.md)")
    if t.parallelism and not t.parallelism.nxdt:  # NxD Training's layouts rest on Neuron's published throughput
        cdk.CfnOutput(stack, "Calibrate", value=calibration_submit(
            workload=workload, nodes=t.instance_count, itype=itype, accelerator_kind=t.accelerator_kind,
            precision=t.precision, speed=t.speed_flags),
            description="The trainer for a few steps on the plan's layout; then `python -m "
                                                 "workloads plan --calibrate RESULT.json` (docs/operations.md)")
