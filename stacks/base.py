"""The stack base: one concrete availability zone from the config, never a lookup."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct


class EstateStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, *, availability_zone: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self._availability_zone = availability_zone

    @property
    def availability_zones(self) -> list[str]:
        # Synthesis stays offline: the zone comes from the config, not from an account lookup.
        return [self._availability_zone]
