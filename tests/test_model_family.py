"""Review R2, P5: a Llama 3.1 workload was sized with Llama 2's 32k vocabulary. model.family names the decoder's
family (catalog/model_families.yaml, from the published config.json files): its vocabulary and published shape size
memory and time, its rope goes to the trainer's layout, a name outside the table is refused (field, value, allowed,
exit 2), and a fine-tune says it builds the base's own shape."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from workloads import load, plan
from workloads.catalog.model_families import load_families
from workloads.commands.cli import main
from workloads.config.model import model_lines
from workloads.errors import ConfigError
from workloads.planning.training_layout import trained_billion

from .conftest import ROOT

EXAMPLE = "examples/workloads/llm-finetune-realtime.yaml"


def test_a_family_outside_the_table_is_refused_naming_field_value_and_allowed(capsys):
    with pytest.raises(ConfigError) as refused:
        load("intermediate", {"model.family": "llama4"})
    said = str(refused.value)
    assert "model.family" in said and "llama4" in said and all(f in said for f in load_families())
    assert main(["plan", "intermediate", "-c", "model.family=llama4"]) == 2
    err = capsys.readouterr().err
    assert "model.family" in err and "Traceback" not in err


@pytest.mark.parametrize("name", sorted(load_families()))
def test_each_family_sizes_the_decoder_with_its_vocabulary_and_published_shape(name):
    fam = load_families()[name]
    billions, (layers, heads, kv, hidden, width) = fam.sizes[0]
    w = load("intermediate", {"model.family": name, "model.parameters_billion": billions,
                              "model.attention_heads": None, "model.architecture": "decoder"})
    spread = plan(w).training.parallelism
    assert (spread.vocab, spread.layers, spread.heads, spread.kv_heads, spread.hidden, spread.intermediate) == \
        (fam.vocab_size, layers, heads, kv, hidden, width)
    assert spread.family == {"name": name, "rope_theta": fam.rope_theta, "rope_scaling": fam.rope_scaling}
    assert json.loads(spread.as_json())["family"]["rope_theta"] == fam.rope_theta
    assert f"model.family {name}'s published shape" in model_lines(w)[1]


def test_llama_3_1_is_sized_with_its_128k_vocabulary_not_llama_2s():
    """The example's 8B Llama 3.1: 8.03B parameters with 128,256 entries (Meta's count), not 7.24B with 32,000; the
    hours follow the parameters."""
    with_family = plan(load(EXAMPLE))
    without = plan(load(EXAMPLE, {"model.family": None}))
    assert with_family.workload.model.family == "llama3.1"
    assert with_family.training.parallelism.vocab == 128256 and without.training.parallelism.vocab == 32000
    assert trained_billion(with_family.workload) == pytest.approx(8.03, abs=0.01)
    assert trained_billion(without.workload) == pytest.approx(7.24, abs=0.01)
    assert with_family.training.estimate.hours > 1.05 * without.training.estimate.hours
    lines = model_lines(with_family.workload)
    assert any("builds the base's own config.json shape" in line for line in lines)


def test_a_family_the_trainer_cannot_fine_tune_is_a_warning():
    for name, why in (("mistral", "model_type mistral"), ("llama3.2", "tied embeddings")):
        p = plan(load(EXAMPLE, {"model.family": name}))
        found = [f for f in p.training.findings if f.field == "model.family"]
        assert found and why in found[0].message and found[0].level == "WARNING", found
    assert not [f for f in plan(load(EXAMPLE)).training.findings if f.field == "model.family"]


@pytest.mark.trainer
def test_the_trainer_builds_and_exports_the_familys_rope_from_the_layout(tmp_path):
    layout = json.loads(plan(load("intermediate", {"model.family": "llama3.1"})).training.parallelism.as_json())
    layout.update(sharding="none", tensor=1, export_dir="", steps=2, global_batch=0, warmup_steps=1)
    path = tmp_path / "layout.json"
    path.write_text(json.dumps(layout))
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1",
         str(ROOT / "examples" / "slurm" / "train.py"), "--device", "cpu", "--layout", str(path), "--layers", "2",
         "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--seq", "32", "--vocab", "256", "--batch", "1",
         "--checkpoint-dir", str(tmp_path / "ckpt"), "--export-dir", str(tmp_path / "export")],
        cwd=tmp_path, capture_output=True, text=True, timeout=240,
        env={**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    config = json.loads((tmp_path / "export" / "config.json").read_text())
    assert config["rope_theta"] == 500000.0 and config["rope_scaling"]["rope_type"] == "llama3"
    assert config["max_position_embeddings"] == 32  # the length it trained at, not the family's 131,072
