"""What the plan says of the node image's Python packages: hash-locked (catalog/node_locks.py), or not, and why."""

from __future__ import annotations

from ..catalog import SoftwareStack
from ..catalog.node_locks import lock_path, node_lock
from ..errors import WARNING, Finding

__all__ = ["node_lock", "unlocked_warning"]


def unlocked_warning(instance_type: str, software: SoftwareStack) -> Finding:
    """A stack without a checked-in lock still bakes (its pins hold), but its dependencies resolve from the index at
    bake time and nothing checks their bytes: a warning that says how to lock it."""
    where = ", ".join(software.index_urls) or "PyPI"
    return Finding(WARNING, "training.instance_type", instance_type,
                   f"the node image installs {software.name} without a hash lock "
                   f"({lock_path(software.device).relative_to(lock_path(software.device).parents[3])} is not checked "
                   "in): its dependencies resolve from the index at bake time, unverified; run `python -m "
                   f"tools.lock_node_packages {software.device}` where {where} answers, and commit the lock",
                   "tools/lock_node_packages.py")
