"""Slurm on AWS Parallel Computing Service: cluster, login node group, compute node group, queue.

The compute group runs the EFA launch template with the plan's scaling: dynamic nodes (minimum 0) that PCS starts for
queued jobs and ends after the cluster's ScaleDownIdleTimeInSeconds, or static nodes (minimum = maximum) where the
capacity is paid anyway. With a Capacity Block the group's purchase option is CAPACITY_BLOCK and its launch template
names the block (PCS User Guide, "Configure an AWS PCS compute node group to use a Capacity Block"). The login group
is one small node reached through SSM Session Manager (no SSH, no public IP).
"""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_pcs as pcs
from constructs import Construct

from workloads.planning.cluster_nodes import SLURM_LOGIN_TYPE as LOGIN_INSTANCE_TYPE  # priced in the monthly estimate

from .node_launch_template import NodeLaunchTemplate
from .ssm_access import allow_ssm_sessions

SLURM_VERSION = "25.11"
# PCS cluster sizes by the nodes they manage (PCS user guide, "Cluster size").
_SIZES = ((32, "SMALL"), (512, "MEDIUM"), (2048, "LARGE"))


def cluster_size(nodes: int) -> str:
    return next(size for limit, size in _SIZES if nodes <= limit)


class SlurmCluster(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, subnet: ec2.ISubnet,
                 security_group: ec2.ISecurityGroup, node_role: iam.Role, image_id: str,
                 compute_template: NodeLaunchTemplate, login_template: NodeLaunchTemplate,
                 instance_type: str, node_count: int, min_nodes: int, scale_down_idle_s: int,
                 capacity_block: bool, prolog: str | None = None) -> None:
        """`min_nodes`: 0 for dynamic compute nodes, `node_count` for static ones; `scale_down_idle_s`: how long a
        dynamic node may sit idle before PCS ends it. `prolog`: the node health check Slurm runs before each job
        (a cluster custom setting PCS supports; a failing Prolog drains the node and requeues the job)."""
        super().__init__(scope, construct_id)
        self.cluster = pcs.CfnCluster(
            self, "Cluster",
            scheduler=pcs.CfnCluster.SchedulerProperty(type="SLURM", version=SLURM_VERSION),
            # AWS::PCS::Cluster SlurmConfiguration ScaleDownIdleTimeInSeconds (CloudFormation reference).
            slurm_configuration=pcs.CfnCluster.SlurmConfigurationProperty(
                scale_down_idle_time_in_seconds=scale_down_idle_s,
                slurm_custom_settings=[pcs.CfnCluster.SlurmCustomSettingProperty(
                    parameter_name="Prolog", parameter_value=prolog)] if prolog else None),
            size=cluster_size(node_count + 1),
            networking=pcs.CfnCluster.NetworkingProperty(subnet_ids=[subnet.subnet_id],
                                                         security_group_ids=[security_group.security_group_id]),
        )
        _allow_pcs_node(node_role, self.cluster)
        profile = iam.CfnInstanceProfile(self, "NodeProfile", roles=[node_role.role_name], path="/aws-pcs/")

        def node_group(name: str, template: NodeLaunchTemplate, itype: str, low: int, high: int, purchase: str):
            return pcs.CfnComputeNodeGroup(
                self, name, cluster_id=self.cluster.attr_id, ami_id=image_id,
                custom_launch_template=pcs.CfnComputeNodeGroup.CustomLaunchTemplateProperty(
                    template_id=template.template_id, version=template.version),
                iam_instance_profile_arn=profile.attr_arn,
                instance_configs=[pcs.CfnComputeNodeGroup.InstanceConfigProperty(instance_type=itype)],
                scaling_configuration=pcs.CfnComputeNodeGroup.ScalingConfigurationProperty(
                    min_instance_count=low, max_instance_count=high),
                subnet_ids=[subnet.subnet_id], purchase_option=purchase,
            )

        self.login = node_group("Login", login_template, LOGIN_INSTANCE_TYPE, 1, 1, "ONDEMAND")
        # A Capacity Block's group may not ask for more nodes than the block holds (PCS user guide): the plan's count.
        self.compute = node_group("Compute", compute_template, instance_type, min_nodes, node_count,
                                  "CAPACITY_BLOCK" if capacity_block else "ONDEMAND")
        # Nodes register with PCS as soon as they boot: the grant must exist before any node group starts one.
        for group in (self.login, self.compute):
            group.node.add_dependency(node_role.node.find_child("DefaultPolicy"))
        self.queue = pcs.CfnQueue(
            self, "Queue", cluster_id=self.cluster.attr_id,
            compute_node_group_configurations=[pcs.CfnQueue.ComputeNodeGroupConfigurationProperty(
                compute_node_group_id=self.compute.attr_id)],
        )
        self.cluster_id = self.cluster.attr_id


def _allow_pcs_node(role: iam.Role, cluster: pcs.CfnCluster) -> None:
    """Register with PCS, and SSM Session Manager for shell access instead of SSH."""
    role.add_to_principal_policy(iam.PolicyStatement(actions=["pcs:RegisterComputeNodeGroupInstance"],
                                                     resources=[cluster.attr_arn]))
    allow_ssm_sessions(role, agent=True)


def connect_command(*, region: str, login_group_id: str) -> str:
    return (f"aws ssm start-session --region {region} --target $(aws ec2 describe-instances --region {region} "
            f"--filters Name=tag:aws:pcs:compute-node-group-id,Values={login_group_id} "
            "Name=instance-state-name,Values=running --query 'Reservations[0].Instances[0].InstanceId' --output text)")

