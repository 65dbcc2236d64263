"""The workload's KMS key: datasets, endpoint volumes and topics are encrypted with it."""

from __future__ import annotations

from constructs import Construct

from .kept_key import kept_key


class DataKey(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, description: str) -> None:
        super().__init__(scope, construct_id)
        # Kept: data encrypted with it outlives any stack that is destroyed (lifecycle.py).
        self.key = kept_key(self, "Key", description=description)
