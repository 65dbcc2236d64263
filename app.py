#!/usr/bin/env python3
"""CDK entry point: read context once, load and plan the workload, build the stacks.

    cdk synth -c workload=huge -c training.instance_type=p5.48xlarge
"""

from __future__ import annotations

import sys

import aws_cdk as cdk

from stacks.estate import build_from_context
from workloads import ConfigError


def main() -> int:
    app = cdk.App()
    try:
        build_from_context(app)
    except ConfigError as exc:
        # One line, no traceback, nothing written: bad input never reaches CloudFormation.
        print(f"error: {exc}", file=sys.stderr)
        return 2
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
