"""The stack base: concrete availability zones from the config, never a lookup."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct


class EstateStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, *, availability_zone: str,
                 second_availability_zone: str | None = None, **kwargs: Any) -> None:
        """`second_availability_zone`: only the stacks that place hosted endpoints' subnets need it."""
        super().__init__(scope, construct_id, **kwargs)
        self._zones = [availability_zone, *([second_availability_zone] if second_availability_zone else [])]

    @property
    def availability_zones(self) -> list[str]:
        # Synthesis stays offline: the zones come from the config, not from an account lookup.
        return list(self._zones)
