"""The workload config: presets, files, dotted overrides, validation messages."""

from __future__ import annotations

import pydantic
import pytest

from workloads import ConfigError, load, overrides_from_context, preset_names
from workloads.config.loader import _apply_override


def test_presets_exist_and_load():
    assert preset_names() == ["huge", "intermediate", "small"]
    for name in preset_names():
        w = load(name)
        assert w.name == name
        assert w.availability_zone.startswith(w.region)


def test_config_is_frozen():
    w = load("huge")
    with pytest.raises(pydantic.ValidationError, match="frozen_instance|Instance is frozen"):
        w.training.instance_count = 3  # type: ignore[misc]
    assert w.training.instance_count == load("huge").training.instance_count


def test_dotted_overrides_are_parsed_like_yaml():
    w = load("huge", {"training.instance_count": "8", "training.instance_type": "p5.48xlarge"})
    assert w.training.instance_count == 8
    assert w.training.instance_type == "p5.48xlarge"


def test_override_can_null_a_field():
    w = load("huge", {"training.instance_type": "null"})
    assert w.training.instance_type is None


def test_override_creates_missing_sections():
    w = load("small", {"inference.async.max_instances": "3"})
    assert w.inference.async_ is not None and w.inference.async_.max_instances == 3


def test_override_under_a_plain_value_is_refused():
    raw = {"training": {"instance_type": "x"}}
    with pytest.raises(ConfigError, match="training.instance_type.x = 1: unknown field; did you mean training.instance_type"):
        _apply_override(raw, "training.instance_type.x", "1")


def test_overrides_from_context_ignores_feature_flags_and_known_keys():
    ctx = {"@aws-cdk/core:foo": True, "workload": "huge", "account": "1", "training.instance_count": "4",
           "region": "us-east-1", "cli-telemetry": False}
    assert overrides_from_context(ctx) == {"training.instance_count": "4", "region": "us-east-1"}


def test_load_from_file(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nregion: us-east-1\navailability_zone: us-east-1b\n"
                    "model: {parameters_billion: 0.2, framework: pytorch}\ndata: {dataset_size_gib: 10}\n")
    w = load(str(path))
    assert (w.name, w.training.instance_type, w.inference.realtime) == ("mine", None, None)


@pytest.mark.parametrize("overrides, field, fragment", [
    ({"region": "mars-1"}, "region", "not a region the catalog covers"),
    ({"availability_zone": "us-east-1a"}, "availability_zone", "not a zone of region us-east-2"),
    ({"availability_zone": "us-east-2z"}, "availability_zone", "us-east-2a, us-east-2b, us-east-2c"),
    ({"training.instance_type": "p9.huge"}, "training.instance_type", "not in the instance catalog"),
    ({"training.instance_count": "0"}, "training.instance_count", "allowed: a whole number >= 1 and <= 512"),
    ({"training.instance_count": "many"}, "training.instance_count", "text, not a number"),
    ({"training.orchestrator": "k8s"}, "training.orchestrator", "'slurm', 'hyperpod' or 'sagemaker-jobs'"),
    ({"data.storage": "nfs"}, "data.storage", "'s3-file', 's3-fastfile', 'efs' or 'fsx-lustre'"),
    ({"training.instnce_type": "x"}, "training.instnce_type", "unknown field"),
    ({"model.framework": "xgboost", "training.instance_type": "p5.48xlarge"}, "training.instance_type",
     "xgboost trains on CPU"),
    ({"inference.serverless.memory_mb": "1500"}, "inference.serverless.memory_mb", "a multiple of 1024"),
    ({"inference.serverless.max_concurrency": "500"}, "inference.serverless.max_concurrency", "200"),
    ({"inference.realtime.instance_type": "inf2.xlarge"}, "inference.realtime.instance_type", "ml.inf2.xlarge"),
    ({"training.capacity_reservation_id": "res-1"}, "training.capacity_reservation_id", "hex digits"),
])
def test_bad_values_name_field_value_and_allowed(overrides, field, fragment):
    with pytest.raises(ConfigError) as err:
        load("huge", overrides)
    # Every mistake is reported; the one this override makes is among them, on one line of its own.
    mine = [str(e) for e in err.value.errors if e.field == field]
    assert len(mine) == 1, str(err.value)
    assert fragment in mine[0] and "allowed:" in mine[0] and "\n" not in mine[0]


def test_type_not_offered_in_region():
    with pytest.raises(ConfigError, match=r"training.instance_type = 'p6-b300.48xlarge': not offered in region us-east-2"):
        load("huge", {"training.instance_type": "p6-b300.48xlarge"})


def test_scikit_learn_is_single_node():
    with pytest.raises(ConfigError, match="scikit-learn does not distribute"):
        load("small", {"model.framework": "scikit-learn", "training.instance_count": "2"})


def test_realtime_max_below_min():
    with pytest.raises(ConfigError, match="max_instances 1 is below min_instances 3"):
        load("huge", {"inference.realtime.min_instances": "3", "inference.realtime.max_instances": "1"})


def test_null_on_the_command_line_unsets_an_optional_field():
    """`-c inference.realtime.max_instances=null` was refused ('a valid integer') though `-c inference.realtime=null`
    is documented (issue 34 item 10.4): null is absent, so the field's default."""
    from workloads.config.schema import Realtime

    w = load("small", {"inference.realtime.max_instances": "null"})
    assert w.inference.realtime.max_instances == Realtime.model_fields["max_instances"].default
    assert load("small", {"inference.realtime": "null"}).inference.realtime is None
    assert load("huge", {"training.max_hours": "null"}).training.max_hours is None
