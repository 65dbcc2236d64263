"""The workload's KMS key: datasets, endpoint volumes and topics are encrypted with it."""

from __future__ import annotations

from aws_cdk import aws_kms as kms
from constructs import Construct

from .lifecycle import KEPT


class DataKey(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, description: str) -> None:
        super().__init__(scope, construct_id)
        # Kept: data encrypted with it outlives any stack that is destroyed (lifecycle.py).
        self.key = kms.Key(self, "Key", description=description, enable_key_rotation=True, removal_policy=KEPT)
