"""A field this kind of workload does not read is warned about, and the warning is true: setting it changes nothing
in the plan but the warning itself (issue 43: fields a workload kind ignores were accepted silently)."""

from __future__ import annotations

import pytest

from workloads import ConfigError, load, plan
from workloads.config.ignored import READ_BY

# A valid value for each field the table lists (a field added to the table without one fails here).
VALUES = {"training.precision": "bf16", "training.sequence_length": "2048", "training.global_batch_tokens": "1048576",
          "data.tokens_billion": "3", "model.layers": "4", "model.hidden_size": "512", "model.kv_heads": "8",
          "model.intermediate_size": "2048", "model.vocab_size": "32000",
          "inference.generation": "{max_batch_size: 4}"}


def _without(d: dict, *keys: str) -> dict:
    return {k: v for k, v in d.items() if k not in keys}


@pytest.mark.parametrize("field", sorted(READ_BY))
def test_a_field_the_workload_does_not_read_is_warned_about_and_changes_nothing(field):
    base = plan(load("small"))  # XGBoost: no deep learning, no decoder
    changed = plan(load("small", {field: VALUES[field]}))
    warned = [f for f in changed.findings if f.level == "WARNING" and f.field.startswith(field)]
    assert warned and "not read for this workload" in warned[0].message and READ_BY[field][0] in warned[0].message
    assert _without(changed.to_dict(), "workload", "warnings") == _without(base.to_dict(), "workload", "warnings")


def test_a_field_the_workload_reads_is_not_warned_about():
    p = plan(load("intermediate", {"training.sequence_length": "2048", "model.vocab_size": "32000"}))
    assert not [f for f in p.findings if "not read for this workload" in f.message]


def test_max_hours_is_a_limit_for_classic_ml_too_and_its_refusal_names_it():
    """It was ignored for XGBoost: `1e-7` planned an 18-minute run; now a candidate that misses it is not picked."""
    with pytest.raises(ConfigError) as err:
        plan(load("small", {"training.max_hours": "1e-7"}))
    assert str(err.value).startswith("training.max_hours = 1e-07: no instance type finishes the run in time; "
                                     "allowed: at least ")
    loose = plan(load("small", {"training.max_hours": "100"}))
    assert loose.training.estimate.hours <= 100


def test_a_tiny_max_hours_on_deep_learning_names_the_field_and_the_shortest_run():
    with pytest.raises(ConfigError) as err:
        plan(load("huge", {"training.max_hours": "0.001"}))
    line = str(err.value)
    assert line.startswith("training.max_hours = 0.001: ") and "allowed: at least " in line and "fastest" in line


def test_the_shortest_run_named_is_the_shortest_any_count_gives():
    """A small model on nodes without EFA: scaling out made each row slower (9 x g4dn.xlarge 94 h against 1 x
    g6.xlarge 14.6 h), and the hint named a slower row; a limit that 14.6 h meets then planned."""
    overrides = {"model.framework": "tensorflow", "data.dataset_size_gib": "20"}
    free = plan(load("small", {**overrides, "training.max_hours": "1000"}))  # every row at its fewest nodes
    shortest = min(c.hours for c in free.training.candidates if c.hours)
    with pytest.raises(ConfigError) as err:
        plan(load("small", {**overrides, "training.max_hours": str(shortest / 4)}))
    assert f"allowed: at least {shortest:.3g} " in str(err.value)
    met = plan(load("small", {**overrides, "training.max_hours": str(shortest * 1.01)}))
    assert met.training.estimate.hours <= shortest * 1.01
