"""SageMaker serving container images (workloads/commands/images.py, re-exported here for the stacks), and the
images of every shipped workload written down ahead.

The SDK's answers are remembered per SDK version (workloads/commands/image_cache.py);
`python -m constructs_lib.images` (run by `make setup`) writes those of every shipped workload.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from workloads.commands import image_cache
from workloads.commands.images import plan_images, serving_image  # noqa: F401 (their home is the commands layer)

if TYPE_CHECKING:
    from workloads.planning.planner import Plan


def shipped_plans() -> list[Plan]:
    """The plans of every shipped workload: the presets, examples/workloads and config/teams.yaml's teams."""
    from workloads.config.loader import load, preset_names
    from workloads.planning.planner import plan
    from workloads.planning.teams import load_teams

    root = Path(__file__).resolve().parent.parent
    plans = [plan(load(name)) for name in preset_names()]
    plans += [plan(load(str(path))) for path in sorted((root / "examples" / "workloads").glob("*.yaml"))]
    return plans + [t.plan for t in load_teams(str(root / "config" / "teams.yaml"))]


def warm() -> int:
    """Write down the images of every shipped workload (`make setup`); the SDK is imported only if one is new."""
    asked = sum(len(plan_images(p)) for p in shipped_plans())
    image_cache.save()
    return asked


if __name__ == "__main__":
    print(f"container images written down: {warm()} asked")
