"""An encrypted EFS file system for /home on every node (shared home directories)."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_efs as efs
from aws_cdk import aws_kms as kms
from constructs import Construct

from .lifecycle import KEPT
from .nag import acknowledge


class SharedHome(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc, subnet: ec2.ISubnet,
                 security_group: ec2.ISecurityGroup, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        self.file_system = efs.FileSystem(
            self, "FileSystem", vpc=vpc, vpc_subnets=ec2.SubnetSelection(subnets=[subnet]),
            security_group=security_group, encrypted=True, kms_key=key,
            performance_mode=efs.PerformanceMode.GENERAL_PURPOSE, throughput_mode=efs.ThroughputMode.ELASTIC,
            enable_automatic_backups=True, removal_policy=KEPT,  # the users' homes outlive the stack
        )
        acknowledge(self.file_system, "NIST.800.53.R5-EFSInBackupPlan",
                    "Automatic backups are on: EFS puts the file system in AWS Backup's default plan "
                    "(aws/efs/automatic-backup-plan, daily, kept 35 days; EFS user guide, \"Automatic backups\").")
        self.file_system_id = self.file_system.file_system_id
