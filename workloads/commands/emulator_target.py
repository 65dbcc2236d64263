"""The local emulator (`make emulator`) stands in for AWS at AWS_ENDPOINT_URL: what a command printed for a user to
paste needs there, so that it works as printed against the emulator as against an account."""

from __future__ import annotations

import os
from collections.abc import Mapping

# What `cdk deploy` needs against the emulator: no terminal to approve IAM changes, and no change set (the emulator
# rebuilds outputs and exports only for direct deployments; through a change set the CLI fails on its answer, after
# about 45 s: "XML parse error: mismatched tags").
DEPLOY_OPTIONS = ("--require-approval", "never", "--method", "direct")
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


def is_local(url: str | None) -> bool:
    """The endpoint is a server on this machine (the emulator), not AWS."""
    from urllib.parse import urlparse

    return urlparse(url or "").hostname in LOCAL_HOSTS


def deploy_options(environ: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """The options a printed `cdk deploy` takes in this shell: the emulator's where its endpoint is exported."""
    return DEPLOY_OPTIONS if is_local(environ.get("AWS_ENDPOINT_URL")) else ()
