"""Workload config -> validated Workload -> Plan. Pure Python: no aws_cdk, no sagemaker."""

from .errors import ConfigError
from .loader import DEFAULT_WORKLOAD, load, overrides_from_context, preset_names
from .planner import Plan, plan
from .schema import Workload

__all__ = ["ConfigError", "DEFAULT_WORKLOAD", "Plan", "Workload", "load", "overrides_from_context", "plan", "preset_names"]
