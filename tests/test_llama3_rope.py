"""Issue 42 (review R2 P4, T9, T3): Llama 3.1+ bases fine-tune. Their config.json's rope_scaling (rope_type llama3) is
built as transformers builds it, the export carries it and the base's max_position_embeddings, and fp8 under FSDP2
precomputes the float8 weight scales after each optimizer step (torchao)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.test_trainer import _base_loss, _losses, _torchrun

pytestmark = pytest.mark.trainer
SLURM = Path(__file__).resolve().parent.parent / "examples" / "slurm"
# Llama 3.1's published rope_scaling (meta-llama/Llama-3.1-8B config.json), with a short original context here so the
# scaling changes a 64-token sequence's logits.
LLAMA31_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192}


def _slurm(name: str):
    sys.path.insert(0, str(SLURM))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(SLURM))


def _config(rope: dict, **shape):
    from transformers import LlamaConfig

    return LlamaConfig(**{"vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                          "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 2048,
                          "rope_theta": 500000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
                          "rope_scaling": dict(rope), **shape})  # a copy: transformers adds rope_theta to it


def test_the_trainers_inverse_frequencies_are_transformers_llama3_ones():
    import torch
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    model = _slurm("model")
    config = _config(LLAMA31_ROPE, hidden_size=4096, num_attention_heads=32, num_key_value_heads=8)
    theirs, _ = ROPE_INIT_FUNCTIONS["llama3"](config, torch.device("cpu"))
    ours = model.inverse_frequencies(128, torch.device("cpu"), 500000.0, LLAMA31_ROPE)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
    assert not torch.allclose(model.inverse_frequencies(128, torch.device("cpu"), 500000.0), theirs)


def _saved_base(directory: Path) -> None:
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(3)
    LlamaForCausalLM(_config({**LLAMA31_ROPE, "original_max_position_embeddings": 16})).save_pretrained(directory)


def test_a_llama31_style_base_loads_with_transformers_logits(tmp_path):
    """Before: base_shape refused any rope_scaling."""
    import torch
    from safetensors.torch import load_file
    from transformers import LlamaForCausalLM

    finetune, model = _slurm("finetune"), _slurm("model")
    _saved_base(tmp_path)
    shape = finetune.base_shape(tmp_path)
    assert shape["rope_scaling"]["rope_type"] == "llama3" and shape["rope_theta"] == 500000.0
    assert shape["max_positions"] == 2048
    ours = model.Llama(vocab=256, layers=2, hidden=64, heads=4, kv_heads=2, intermediate=128, recompute_blocks=False,
                       rope_theta=shape["rope_theta"], norm_eps=shape["norm_eps"], rope_scaling=shape["rope_scaling"])
    ours.load_state_dict(load_file(next(tmp_path.glob("*.safetensors"))))
    ids = torch.randint(0, 256, (2, 64), generator=torch.Generator().manual_seed(0))
    theirs = LlamaForCausalLM.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        expected = theirs(ids).logits
        torch.testing.assert_close(ours.eval()(ids), expected, rtol=1e-4, atol=1e-4)
        ours.rope_scaling = None  # the test can fail: unscaled RoPE gives other logits
        assert not torch.allclose(ours(ids), expected, rtol=1e-4, atol=1e-4)


def test_fine_tuning_a_llama31_base_exports_its_rope_scaling_and_context(tmp_path, tokens):  # noqa: F811
    """Before: refused at start; the export wrote rope_scaling null and max_position_embeddings = --seq."""
    base, export = tmp_path / "base", tmp_path / "export"
    _saved_base(base)
    out = _torchrun(tmp_path, "--init-from", str(base), "--data", str(tokens), "--steps", "2", "--global-batch", "4",
                    "--sharding", "full", "--tensor", "1", "--checkpoint-dir", str(tmp_path / "ckpt"),
                    "--export-dir", str(export))
    assert _losses(out)[1] == pytest.approx(_base_loss(base, tokens, 32, 1, 4), rel=1e-4), out
    config = json.loads((export / "config.json").read_text())
    assert config["max_position_embeddings"] == 2048 and config["rope_theta"] == 500000.0
    assert config["rope_scaling"] == {**LLAMA31_ROPE, "original_max_position_embeddings": 16}


@pytest.mark.parametrize("sharding", ["full", "none"])
def test_fp8_under_fsdp_precomputes_the_float8_scales_after_each_step(tmp_path, tokens, sharding):  # noqa: F811
    """torchao's precompute_float8_dynamic_scale_for_fsdp after the optimizer step, only where FSDP2 all-gathers
    float8 weights (emulated float8 on CPU ranks). Before: never called."""
    out = _torchrun(tmp_path, "--steps", "2", "--data", str(tokens), "--global-batch", "4", "--precision", "fp8",
                    "--sharding", sharding, "--tensor", "1", "--checkpoint-dir", str(tmp_path / "c"))
    assert ("float8 weight scales precomputed for 14 weights" in out) == (sharding == "full"), out
