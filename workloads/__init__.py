"""Workload config -> validated Workload -> Plan. Pure Python: no aws_cdk, no sagemaker.

The names below load on first use (PEP 562), so `python -m workloads` can set up its process
before pydantic is imported, and importing one submodule does not import them all.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .errors import ConfigError
    from .config.loader import DEFAULT_WORKLOAD, load, overrides_from_context, preset_names
    from .planning.planner import Plan, plan
    from .config.schema import Workload

_HOME = {"ConfigError": ".errors", "DEFAULT_WORKLOAD": ".config.loader", "load": ".config.loader",
         "overrides_from_context": ".config.loader", "preset_names": ".config.loader", "Plan": ".planning.planner", "plan": ".planning.planner",
         "Workload": ".config.schema"}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_HOME[name], __name__), name)
    globals()[name] = value
    return value
