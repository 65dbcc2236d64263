"""NxD Training's converted checkpoint as the Hugging Face directory the serving contract reads.

    python nxdt_export.py --state /fsx/checkpoints/JOB/nxdt/hf/checkpoint.pt --config config.json \
        --tokenizer /fsx/datasets/tokenizer --output /fsx/output/NAME

NxD's checkpoint converter (--convert_to_full_state) writes one torch state dict with Hugging Face's Llama names to
checkpoint.pt. This writes it as model.safetensors in bf16, with the model's config.json and the tokenizer's files
beside it, the layout examples/slurm/hf_export.py gives the shipped trainer's export; built in a temporary directory
and renamed into place when whole.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def export(state: dict, config: dict, tokenizer: Path, output: Path) -> None:
    import torch
    from safetensors.torch import save_file

    state = state.get("model", state) if isinstance(state.get("model"), dict) else state
    tensors = {k: v.to(torch.bfloat16).contiguous() for k, v in state.items() if torch.is_tensor(v)}
    missing = [k for k in ("model.embed_tokens.weight", "lm_head.weight") if k not in tensors]
    if missing:
        raise SystemExit(f"nxdt_export: the converted state has no {', '.join(missing)}: not a Llama HF state dict")
    tmp = output.with_name(f".{output.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    for name in TOKENIZER_FILES:
        if (tokenizer / name).exists():
            shutil.copy(tokenizer / name, tmp / name)
    shutil.rmtree(output, ignore_errors=True)
    tmp.replace(output)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--state", type=Path, required=True, help="the converter's checkpoint.pt")
    p.add_argument("--config", type=Path, required=True, help="the model's config.json (the plan's)")
    p.add_argument("--tokenizer", type=Path, required=True)
    p.add_argument("--output", type=Path, required=True)
    args = p.parse_args(argv)
    import torch

    export(torch.load(args.state, map_location="cpu", weights_only=True), json.loads(args.config.read_text()),
           args.tokenizer, args.output)
    print(f"nxdt_export: {args.output}")


if __name__ == "__main__":
    main()
