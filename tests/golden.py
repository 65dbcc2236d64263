"""What the golden-path tests share: a small real text corpus (this project's own docs), a tokenizer trained on it
here (nothing downloaded from a model hub), and train.py / prepare.py run as the cluster or a job runs them, on two
CPU ranks, scaled down to a model a CPU trains in seconds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "slurm"
# Appended after the plan's arguments (argparse: the last wins): the plan's layout and data, a CPU-sized shape.
# The plan's global batch (1,024 sequences) and warmup are the run's at scale: here two ranks, one sequence each, one
# micro-step; a tensor-parallel layout runs at degree 2 on the two ranks (tests/test_golden_path.py).
SCALED_DOWN = ["--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--seq", "32", "--steps", "3",
               "--checkpoint-every", "100", "--log-every", "1", "--batch", "1", "--global-batch", "2", "--warmup", "1",
               "--tensor", "1", "--shard-group", "1"]  # HSDP's group sized for two CPU ranks (others ignore it)


def write_corpus(directory: Path) -> Path:
    """Raw text as a user uploads it: some documents as .txt, some as .jsonl lines with a "text" field."""
    directory.mkdir(parents=True, exist_ok=True)
    docs = sorted((ROOT / "docs").glob("*.md"))
    for doc in docs[: len(docs) // 2]:
        (directory / (doc.stem + ".txt")).write_text(doc.read_text())
    with (directory / "more.jsonl").open("w") as out:
        for doc in docs[len(docs) // 2:]:
            for para in doc.read_text().split("\n\n"):
                out.write(json.dumps({"text": para}) + "\n")
    return directory


def save_base_model(directory: Path, *, vocab: int = 256) -> Path:
    """A tiny LlamaForCausalLM saved by transformers (safetensors), as a base model a workload fine-tunes: Llama 2's
    rotary base and norm epsilon (not the trainer's defaults), GQA, SCALED_DOWN's width (2 layers, hidden 64, 4 heads,
    2 KV heads)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(11)
    config = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, rope_theta=10000.0,
                         rms_norm_eps=1e-6, tie_word_embeddings=False)
    LlamaForCausalLM(config).save_pretrained(directory, safe_serialization=True)
    return directory


TOKENIZER_VOCAB = 512  # what train_tokenizer trains


def train_tokenizer(corpus: Path, directory: Path, *, vocab: int = TOKENIZER_VOCAB) -> Path:
    """A byte-level BPE tokenizer trained on the corpus, saved as Hugging Face files transformers loads."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train([str(p) for p in sorted(corpus.rglob("*")) if p.is_file()], trainer)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}))
    return directory


def run(command: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    full = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", **(env or {})}
    done = subprocess.run(command, cwd=cwd, env=full, capture_output=True, text=True, timeout=timeout)
    # rank 0's own lines first: a crash there otherwise scrolls out behind the other ranks' and torchrun's
    first = "\n".join(line for line in done.stderr.splitlines() if line.startswith("[rank0]"))[-3000:]
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{first}\n{done.stderr[-3000:]}"
    return done.stdout


def torchrun(args: list[str], *, cwd: Path, env: dict[str, str] | None = None, ranks: int = 2) -> str:
    """train.py as torchrun starts it on one node: `ranks` CPU processes (gloo)."""
    return run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}",
                str(EXAMPLES / "train.py"), *args], cwd=cwd, env=env)


def generates(export: Path) -> str:
    """The export loads as a served model does (transformers, with its own tokenizer) and generates text."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(export)
    model = AutoModelForCausalLM.from_pretrained(export)
    ids = tokenizer("The plan", return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=5, min_new_tokens=5, do_sample=False)
    assert out.shape[1] == ids.shape[1] + 5
    return tokenizer.decode(out[0])


def record_training_jobs(monkeypatch) -> list[dict]:
    """Every CreateTrainingJob request this process sends, as sent: the emulator keeps neither a job's Environment
    nor its HyperParameters as given."""
    import botocore.client

    sent, call = [], botocore.client.BaseClient._make_api_call

    def recording(client, operation, params):
        if operation == "CreateTrainingJob":
            sent.append(params)
        return call(client, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", recording)
    return sent
