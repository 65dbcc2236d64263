"""Snapshots of every stack of every preset (asset hashes masked). Update: make snapshot-update."""

from __future__ import annotations

import re

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

from .conftest import HYPERPOD, PRESETS, STACKS

_HASH = re.compile(r"\b[0-9a-f]{64}\b")


def _mask(value):
    if isinstance(value, dict):
        return {k: _mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    if isinstance(value, str):
        return _HASH.sub("<asset-hash>", value)
    return value


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("preset", PRESETS)
def test_template_snapshot(synth, snapshot_json, preset, stack):
    s = synth(preset)
    if stack not in s.templates:
        pytest.skip(f"{preset} has no {stack}")
    assert _mask(s.templates[stack]) == snapshot_json


def test_hyperpod_train_stack_snapshot(synth, snapshot_json):
    s = synth("huge", HYPERPOD)
    assert _mask(s.templates["TrainStack"]) == snapshot_json


@pytest.mark.parametrize("stack", ["GuardrailsStack", *(s for s in STACKS if s != "JobLogsStack"), "MlUsersStack"])
@pytest.mark.parametrize("team", ["vision", "language", "tabular"])
def test_team_template_snapshot(teams_synth, snapshot_json, team, stack):
    assert _mask(teams_synth.templates[team][stack]) == snapshot_json


@pytest.mark.parametrize("shared", ["Shared-123456789012-us-west-2", "Shared-us-east-1"])
def test_shared_stack_snapshot(teams_synth, snapshot_json, shared):
    """The account's shared stack a teams file builds once per account and region (stacks/build.py)."""
    assert _mask(teams_synth.shared[shared]) == snapshot_json
