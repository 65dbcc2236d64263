from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from constructs_lib.cluster_security import ClusterSecurityGroups
from constructs_lib.data_key import DataKey
from constructs_lib.dataset_bucket import DatasetBucket
from constructs_lib.lustre import LustreFileSystem
from constructs_lib.shared_home import SharedHome
from workloads.planning.storage import FsxPlan

from .base import EstateStack


class DataStack(EstateStack):
    """Stateful: retained on destroy, logical IDs independent of the workload (a test pins them)."""

    def __init__(self, scope: Construct, construct_id: str, *, availability_zone: str, workload_name: str,
                 vpc: ec2.IVpc, subnet: ec2.ISubnet, security: ClusterSecurityGroups, fsx: FsxPlan | None,
                 shared_home: bool, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, availability_zone=availability_zone, **kwargs)
        self.key = DataKey(self, "DataKey", description=f"Datasets and models of workload {workload_name}").key
        self.datasets = DatasetBucket(self, "Datasets", key=self.key)
        self.bucket = self.datasets.bucket
        cdk.CfnOutput(self, "DatasetBucketName", value=self.bucket.bucket_name,
                      description="Upload training data under datasets/ and the model artifact under models/")
        cdk.CfnOutput(self, "DataKeyArn", value=self.key.key_arn)

        self.lustre: LustreFileSystem | None = None
        if fsx is not None:
            self.lustre = LustreFileSystem(
                self, "Lustre", subnet=subnet, security_group=security.lustre, key=self.key, bucket=self.bucket,
                storage_capacity_gib=fsx.storage_capacity_gib, per_unit_mb_s=fsx.per_unit_mb_s)
            cdk.CfnOutput(self, "FsxFileSystemId", value=self.lustre.file_system_id)
            cdk.CfnOutput(self, "FsxMount", value=f"{self.lustre.dns_name}@tcp:/{self.lustre.mount_name}",
                          description="mount -t lustre -o relatime,flock <this> /fsx")
        self.home: SharedHome | None = None
        if shared_home:
            self.home = SharedHome(self, "SharedHome", vpc=vpc, subnet=subnet, security_group=security.nfs, key=self.key)
            cdk.CfnOutput(self, "SharedHomeFileSystemId", value=self.home.file_system_id)
