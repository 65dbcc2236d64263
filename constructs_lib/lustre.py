"""FSx for Lustre PERSISTENT_2 in the cluster's subnet, linked to the dataset bucket prefix by prefix; a cache of the
bucket, deleted with its stack (the bucket is kept).

One data repository association per prefix of `workloads.planning.layout.FSX_LINKS`: /fsx/datasets imports the
dataset of record and exports nothing, /fsx/checkpoints and /fsx/output are exported back to S3. The rest
of the bucket (the models endpoints serve, inference requests and results, job code) is never linked, so
a shell on a node cannot read or overwrite it through /fsx.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from workloads.planning.layout import FSX_LINKS

# The service-linked role FSx creates per file system to reach a linked S3 bucket.
S3_ACCESS_ROLE = "aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_*"


class LustreFileSystem(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, subnet: ec2.ISubnet,
                 security_group: ec2.ISecurityGroup, key: kms.Key, bucket: s3.IBucket,
                 storage_capacity_gib: int, per_unit_mb_s: int) -> None:
        super().__init__(scope, construct_id)
        self.file_system = fsx.CfnFileSystem(
            self, "FileSystem",
            file_system_type="LUSTRE",
            file_system_type_version="2.15",
            storage_capacity=storage_capacity_gib,
            subnet_ids=[subnet.subnet_id],
            security_group_ids=[security_group.security_group_id],
            kms_key_id=key.key_id,
            lustre_configuration=fsx.CfnFileSystem.LustreConfigurationProperty(
                deployment_type="PERSISTENT_2",
                per_unit_storage_throughput=per_unit_mb_s,
                data_compression_type="LZ4",
                # The bucket (versioned) is the system of record; the file system is a fast cache of it.
                automatic_backup_retention_days=0,
            ),
        )
        # Deleted with its stack, unlike the bucket (lifecycle.py). What it holds of value is in the bucket: the datasets
        # it imports, and the checkpoints and outputs its links export. Backups "cannot be enabled on S3-linked file
        # systems" (FSx API Reference, DeleteFileSystem: https://docs.aws.amazon.com/fsx/latest/APIReference/API_DeleteFileSystem.html),
        # so the export is the copy that is kept. A retained file system would keep billing (43,200 GiB for huge) and,
        # since its network interfaces live in NetworkStack's subnet and security group, would make deleting
        # NetworkStack fail. It is only deleted once TrainStack, its only client, is gone (TrainStack imports it);
        # docs/operations.md ("Tearing down") says to let the exports finish first.
        self.file_system.apply_removal_policy(RemovalPolicy.DESTROY)
        D = fsx.CfnDataRepositoryAssociation
        self.links: dict[str, fsx.CfnDataRepositoryAssociation] = {}
        for path, prefix, imports, exports in FSX_LINKS:
            link = D(self, "Link" + path.strip("/").title(), file_system_id=self.file_system.ref, file_system_path=path,
                     data_repository_path=f"s3://{bucket.bucket_name}/{prefix}",
                     batch_import_meta_data_on_create=bool(imports),
                     s3=D.S3Property(
                         auto_import_policy=D.AutoImportPolicyProperty(events=list(imports)) if imports else None,
                         auto_export_policy=D.AutoExportPolicyProperty(events=list(exports)) if exports else None))
            link.apply_removal_policy(RemovalPolicy.DESTROY)  # goes with its file system
            self.links[path] = link
        # FSx reads and writes the KMS-encrypted bucket as its S3 service-linked role, whose own policy
        # (AWSFSxS3AccessServiceRolePolicy) grants no KMS: the key policy itself must grant the role (FSx for
        # Lustre guide, "Working with server-side encrypted Amazon S3 buckets"). An account-root principal would
        # only delegate to IAM and so grant it nothing. The role's name holds the file-system ID, and naming it
        # would make the key depend on the file system that depends on the key; so the principal is `*`, narrowed
        # to that role by aws:PrincipalArn, to this account by kms:CallerAccount and to requests S3 makes for it
        # by kms:ViaService.
        stack = Stack.of(self)
        key.add_to_resource_policy(iam.PolicyStatement(
            sid="FsxLustreS3DataRepository",
            principals=[iam.AnyPrincipal()],
            actions=["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:DescribeKey"],
            resources=["*"],
            conditions={
                "ArnLike": {"aws:PrincipalArn": f"arn:{stack.partition}:iam::{stack.account}:role/{S3_ACCESS_ROLE}"},
                "StringEquals": {"kms:CallerAccount": stack.account, "kms:ViaService": f"s3.{stack.region}.amazonaws.com"},
            },
        ))
        self.file_system_id = self.file_system.ref
        self.dns_name = self.file_system.attr_dns_name
        self.mount_name = self.file_system.attr_lustre_mount_name
