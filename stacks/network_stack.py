from __future__ import annotations

from typing import Any

from constructs import Construct

from constructs_lib.cluster_security import ClusterSecurityGroups
from constructs_lib.network import OneAzNetwork

from .base import EstateStack


class NetworkStack(EstateStack):
    def __init__(self, scope: Construct, construct_id: str, *, availability_zone: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, availability_zone=availability_zone, **kwargs)
        self.network = OneAzNetwork(self, "Network", availability_zone=availability_zone)
        self.security = ClusterSecurityGroups(self, "Security", vpc=self.network.vpc)
