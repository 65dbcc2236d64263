"""Fine-tune an encoder classifier (the plan's layout `task: sequence-classification`, workloads/planning/encoder.py):
train.py hands over here when the layout says so, with the same command line and environment, so the plan's Slurm
Submit line and SageMaker job launch it unchanged.

    torchrun ... train.py --device cuda|cpu --layout layout.json --data /fsx/tokens/NAME --tokenizer DIR \
        [--epochs E] [--init-from BERT_DIR] [--export-dir DIR|FILE.tar.gz]

The model: encoder_model.py (BERT with BertForSequenceClassification's names), from --init-from's weights (a Hugging
Face BERT directory: config.json and *.safetensors; its classifier head is new) or initialised as BERT is. Data: the
prepare step's labelled examples (classify_data.py; --text tokenizes them first on a SageMaker job). The recipe is the
layout's (BERT's: batch 32, AdamW at 2e-5 with weight decay 0.01 off biases and LayerNorm, a linear warmup over a tenth
of the steps then linear decay to zero, gradient norm clipped at 1.0 (google-research/bert optimization.py), three
epochs); the steps are the epochs over the examples the data holds. Data parallel (DDP) on every rank: the model is
small enough that each rank holds it whole (the plan checked). A step whose gradient norm or loss is not finite is
skipped and too many in a row stop the run, as in train.py (safety.StepGuard).

Checkpoints: the writer ranks (startup.prunes_here: rank 0, and each node's local rank 0 where the directory is the
node's own) save model, optimizer and step to CHECKPOINT_DIR/step-NNNNNNNN.pt every --checkpoint-every steps and at
the end, replaced whole; a new start resumes after `latest`. Evaluation: loss and accuracy on the prepare step's
held-out examples. The export (rank 0): config.json with id2label and label2id, model.safetensors, the tokenizer's
files and code/ (the Ray Serve application, classifier_serve.py as inference.py, and this model's module), a Hugging
Face directory BertForSequenceClassification loads; as model.tar.gz where the export path ends in .tar.gz (the
framework archive the serving contract reads), and on a SageMaker job SM_MODEL_DIR, which SageMaker packs so.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import tarfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

import classify_data
import encoder_model
import safety
from hf_export import TOKENIZER_FILES
from recipe import publish

HERE = Path(__file__).resolve().parent
TASK = classify_data.TASK
# google-research/bert optimization.py create_optimizer (read at 02102db, 2026-11-28): AdamWeightDecayOptimizer(weight_decay_rate=0.01, beta_1=0.9,
# beta_2=0.999, epsilon=1e-6, exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"]), clip_by_global_norm 1.0.
WEIGHT_DECAY, BETAS, EPS, CLIP_NORM = 0.01, (0.9, 0.999), 1e-6, 1.0
WARMUP_SHARE = 0.1  # run_classifier.py warmup_proportion
EPOCHS, BATCH, LR, SEQ = 3, 32, 2e-5, 128  # BERT's (section 4.1; run_classifier.py max_seq_length)
SERVE_FILES = {"classifier_serve.py": "inference.py", "encoder_model.py": "encoder_model.py"}
EXTRA_TOKENIZER_FILES = ("vocab.txt",)  # a WordPiece vocabulary, where the tokenizer directory has one


def wanted(layout: dict) -> bool:
    return layout.get("task") == TASK


def layout_of(argv: list[str]) -> tuple[dict, str]:
    """The layout as train.py reads it (--layout FILE, else LAYOUT_JSON) and the device, before the rest."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--layout", type=Path)
    early.add_argument("--device", default="cuda")
    known, _ = early.parse_known_args(argv)
    return json.loads(known.layout.read_text() if known.layout else os.environ.get("LAYOUT_JSON", "{}")), known.device


def parse(argv: list[str], layout: dict) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--layout", type=Path)
    p.add_argument("--data", type=Path, required=True, help="the prepare step's labelled examples (classify_data.py)")
    p.add_argument("--text", type=Path, help="labelled *.jsonl to prepare into --data first, on each node")
    p.add_argument("--tokenizer", type=Path, help="the tokenizer's Hugging Face files (exported with the model)")
    p.add_argument("--init-from", type=Path, help="a Hugging Face BERT directory whose encoder starts the run")
    p.add_argument("--epochs", type=float, help="passes over the examples (default: the layout's, else 3)")
    p.add_argument("--steps", type=int, help="optimizer steps (default: the epochs over the examples)")
    p.add_argument("--batch", type=int, help="examples per rank per micro-step (default: the layout's micro_batch)")
    p.add_argument("--global-batch", type=int, help="examples per optimizer step (default: the layout's, else 32)")
    p.add_argument("--lr", type=float)
    p.add_argument("--warmup", type=int, help="warmup steps (default: a tenth of the steps)")
    p.add_argument("--seq", type=int, help="tokens an example is cut or padded to (default: the layout's, else 128)")
    p.add_argument("--precision", choices=("bf16", "fp16", "fp32", "fp8"), help="compute dtype on GPUs (fp8: bf16 "
                   "here, the encoder's projections are too small to gain from float8)")
    p.add_argument("--layers", type=int)
    p.add_argument("--hidden", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--checkpoint-dir", type=Path)
    p.add_argument("--checkpoint-every", type=int)
    p.add_argument("--keep", type=int)
    p.add_argument("--export-dir", type=Path, help="a directory, or FILE.tar.gz for the framework archive")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--eval-every", type=int, help="held-out loss and accuracy every N steps (default: checkpoints)")
    # Safe steps as train.py takes them (safety.StepGuard): a non-finite step is skipped, too many in a row stop.
    p.add_argument("--max-nonfinite-steps", type=int, default=safety.MAX_NONFINITE_IN_A_ROW)
    p.add_argument("--inject-nonfinite", metavar="STEP[,STEP]", help="fault injection: these steps' loss infinite")
    args, _ = p.parse_known_args(argv)  # the decoder's own flags (--compile, --vocab, ...) mean nothing here
    for field, key, default in (("epochs", "epochs", EPOCHS), ("batch", "micro_batch", 1),
                                ("global_batch", "global_batch", BATCH), ("lr", "lr", LR), ("seq", "sequence", SEQ),
                                ("precision", "precision", "bf16"), ("layers", "layers", 2), ("hidden", "hidden", 128),
                                ("heads", "heads", 2), ("checkpoint_every", "checkpoint_every", 500),
                                ("keep", "keep_checkpoints", 2)):
        if getattr(args, field) is None:
            setattr(args, field, layout.get(key) or default)
    args.eval_every = args.checkpoint_every if args.eval_every is None else args.eval_every
    args.vocab = layout.get("vocab")
    if args.export_dir is None and (layout.get("export_dir") or os.environ.get("SM_MODEL_DIR")):
        args.export_dir = Path(layout.get("export_dir") or os.environ["SM_MODEL_DIR"])
    if args.checkpoint_dir is None:
        args.checkpoint_dir = Path(os.environ.get("CHECKPOINT_DIR")
                                   or "/fsx/checkpoints/" + os.environ.get("SLURM_JOB_NAME", "train"))
    if args.text and not args.tokenizer:
        p.error("--text needs --tokenizer (what tokenizes it)")
    return args


def build(args: argparse.Namespace, labels: int, info: dict) -> tuple[encoder_model.EncoderClassifier, str]:
    """From --init-from's config and weights (the classifier head new), else the layout's shape at the tokenizer's
    vocabulary. Returns the model and what it started from."""
    if args.init_from:
        config = json.loads((args.init_from / "config.json").read_text())
        model = encoder_model.from_config({**config, "id2label": {i: i for i in range(labels)}})
        loaded = load_base(model, args.init_from)
        return model, f"{args.init_from} ({loaded} tensors; the classifier head new)"
    model = encoder_model.EncoderClassifier(vocab=info["vocab_size"], layers=args.layers, hidden=args.hidden,
                                            heads=args.heads, labels=labels,
                                            positions=max(args.seq, encoder_model.MAX_POSITIONS))
    return model, "BERT's initialisation"


def load_base(model: torch.nn.Module, directory: Path) -> int:
    """A base BERT's encoder weights (BertModel's names, or BertFor*'s under `bert.`; pre-training heads `cls.*`
    ignored): every encoder tensor must be there."""
    from safetensors.torch import load_file

    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise SystemExit(f"--init-from {directory}: no *.safetensors (a Hugging Face directory saved with "
                         "safe_serialization)")
    base = {}
    for f in files:
        for name, tensor in load_file(str(f)).items():
            name = name if name.startswith(("bert.", "classifier.", "cls.")) else "bert." + name
            base[name] = tensor
    ours = model.state_dict()
    encoder = {k: v for k, v in base.items() if k in ours and not k.startswith("classifier.")}
    missing = sorted(k for k in ours if k.startswith("bert.") and k not in encoder)
    if missing:
        raise SystemExit(f"--init-from {directory}: no {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} "
                         "(a BERT encoder's weights)")
    model.load_state_dict(encoder, strict=False)
    return len(encoder)


def order(step: int, micro: int, rank: int, args: argparse.Namespace, ranks: int, n: int) -> list[int]:
    """The examples of a micro-batch: epoch e draws a permutation of every example (seeded by e), consecutive steps
    take consecutive global batches of it. A function of the step, so a resumed run draws what it would have."""
    start = (step - 1) * args.global_batch + (micro * ranks + rank) * args.batch
    out = []
    for position in range(start, start + args.batch):
        epoch, index = divmod(position, n)
        out.append(_permutation(epoch, n)[index])
    return out


_PERMUTATIONS: dict[tuple[int, int], list[int]] = {}


def _permutation(epoch: int, n: int) -> list[int]:
    if (epoch, n) not in _PERMUTATIONS:
        _PERMUTATIONS.clear()
        _PERMUTATIONS[(epoch, n)] = torch.randperm(n, generator=torch.Generator().manual_seed(epoch)).tolist()
    return _PERMUTATIONS[(epoch, n)]


def batch(data: classify_data.Examples, targets: list[int], rows: list[int], device) -> tuple:
    import numpy as np

    ids = torch.from_numpy(data.ids[rows].astype(np.int64))
    mask = torch.arange(ids.shape[1])[None] < torch.from_numpy(data.lengths[rows])[:, None]
    return ids.to(device), mask.to(device), torch.tensor([targets[r] for r in rows], device=device)


def learning_rate(step: int, args: argparse.Namespace) -> float:
    if step <= args.warmup:
        return args.lr * step / max(1, args.warmup)
    return args.lr * max(0.0, (args.steps - step) / max(1, args.steps - args.warmup))


def optimizer_for(model: torch.nn.Module, args: argparse.Namespace) -> torch.optim.Optimizer:
    decay, plain = [], []
    for name, p in model.named_parameters():
        (plain if name.endswith("bias") or "LayerNorm" in name else decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": plain, "weight_decay": 0.0}],
                             lr=args.lr, betas=BETAS, eps=EPS)


def evaluate(model, held, targets: list[int], args, rank: int, ranks: int, device, autocast) -> tuple[float, float]:
    """Loss and accuracy over every held-out example, each rank a share."""
    totals = torch.zeros(3, device=device)
    model.eval()
    with torch.no_grad():
        rows = list(range(rank, len(held), ranks))
        for i in range(0, len(rows), max(args.batch, 32)):
            ids, mask, y = batch(held, targets, rows[i:i + max(args.batch, 32)], device)
            with autocast:
                logits = model(ids, mask).float()
            totals += torch.stack([F.cross_entropy(logits, y, reduction="sum"), (logits.argmax(-1) == y).sum(),
                                   torch.tensor(float(len(y)), device=device)])
    model.train()
    dist.all_reduce(totals)
    return (totals[0] / totals[2]).item(), (totals[1] / totals[2]).item()


def run(argv: list[str], layout: dict, device: torch.device) -> None:
    from torch.nn.parallel import DistributedDataParallel

    from startup import prunes_here

    args = parse(argv, layout)
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.text:  # a SageMaker job: each node prepares its copy (its local ranks share the files)
        import prepare

        local, local_world = int(os.environ.get("LOCAL_RANK", "0")), int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        prepare.run(prepare.parse(["--input", str(args.text), "--tokenizer", str(args.tokenizer), "--output",
                                   str(args.data), "--part", str(local), "--parts", str(local_world), "--workers", "1",
                                   "--task", TASK, "--seq", str(args.seq)]))
        dist.barrier()
    info = classify_data.ready(args.data)
    data = classify_data.Examples(args.data)
    names = classify_data.label_names(data.labels)
    index = {name: i for i, name in enumerate(names)}
    targets = [index[str(x)] for x in data.labels]
    held = classify_data.Examples(args.data / "heldout") if any((args.data / "heldout").glob("*.ids.npy")) else None
    held_targets = [index.get(str(x), -1) for x in held.labels] if held else []
    if held and -1 in held_targets:
        raise SystemExit(f"{args.data}/heldout holds a label the training examples never show")
    args.seq = info["seq"]
    ranks = world
    if args.global_batch % (ranks * args.batch):
        args.global_batch = max(1, round(args.global_batch / (ranks * args.batch))) * ranks * args.batch
    micro_steps = args.global_batch // (ranks * args.batch)
    args.steps = args.steps or max(1, math.ceil(args.epochs * len(data) / args.global_batch))
    args.warmup = math.ceil(WARMUP_SHARE * args.steps) if args.warmup is None else args.warmup
    torch.manual_seed(0)  # every rank the same initial weights (DDP also broadcasts rank 0's)
    model, origin = build(args, len(names), info)
    model.to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = optimizer_for(model, args)
    args.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    writer = prunes_here(args.checkpoint_dir, rank, device)
    step = resume(model, optimizer, args, names)
    if rank == 0:
        print(f"fine-tuning an encoder classifier ({sum(p.numel() for p in model.parameters()):,} parameters, "
              f"{len(names)} labels) from {origin} on {world} ranks (DDP, {args.device}): {len(data):,} examples x "
              f"{args.epochs:g} epochs at {args.global_batch} a step = {args.steps} steps, peak lr {args.lr:g}, "
              f"warmup {args.warmup}{f'; resumed at step {step}' if step else ''}", flush=True)
    dtype = torch.float16 if args.precision == "fp16" else torch.bfloat16
    autocast = torch.autocast("cuda", dtype=dtype, enabled=device.type == "cuda" and args.precision != "fp32")
    scaler = torch.amp.GradScaler("cuda", enabled=device.type == "cuda" and args.precision == "fp16")
    guard = safety.StepGuard(args.max_nonfinite_steps, loss_scaling=scaler.is_enabled(), rank=rank,
                             checkpoints=args.checkpoint_dir)
    faults = safety.injected(args.inject_nonfinite)
    since = (time.time(), step)
    ddp.train()
    while step < args.steps:
        step += 1
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, args)
        optimizer.zero_grad(set_to_none=True)
        total = torch.zeros((), device=device)
        for micro in range(micro_steps):
            ids, mask, y = batch(data, targets, order(step, micro, rank, args, ranks, len(data)), device)
            sync = ddp.no_sync() if micro < micro_steps - 1 else contextlib.nullcontext()
            with sync:
                with autocast:
                    loss = F.cross_entropy(ddp(ids, mask).float(), y)
                if step in faults:  # --inject-nonfinite: an overflow, as a diverging step makes one
                    loss = loss * float("inf")
                scaler.scale(loss / micro_steps).backward()
            total += loss.detach()
        scaler.unscale_(optimizer)
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)
        dist.all_reduce(total)
        step_loss = total.item() / micro_steps / world
        # The global norm (DDP's gradients are all-reduced) and the all-reduced loss: every rank decides alike.
        good = guard.allows(step, norm.item(), step_loss)
        if scaler.is_enabled():
            scaler.step(optimizer)  # fp16: GradScaler skips a non-finite step itself
        elif good:
            optimizer.step()  # else the weights stay the last good step's
        scaler.update()
        if guard.diverged:
            dist.barrier()
            raise guard.stop(step, writer is not None)
        if rank == 0 and (step % args.log_every == 0 or step == args.steps):
            now = time.time()
            rate = (step - since[1]) * args.global_batch / (now - since[0])
            since = (now, step)
            print(f"step {step} loss {step_loss:.6f} lr {learning_rate(step, args):.3e} grad norm {norm.item():.4f} "
                  f"{rate:,.1f} examples/s{f', {guard.skipped} skipped' if guard.skipped else ''}", flush=True)
        if held and args.eval_every and (step % args.eval_every == 0 or step == args.steps):
            loss, accuracy = evaluate(ddp, held, held_targets, args, rank, ranks, device, autocast)
            if rank == 0:
                print(f"eval step {step} held-out loss {loss:.6f} accuracy {accuracy:.4f}", flush=True)
        if writer and good and (step % args.checkpoint_every == 0 or step == args.steps):
            save(model, optimizer, step, args, names)  # never at a skipped step: each checkpoint's loss is finite
    dist.barrier()
    if rank == 0 and args.export_dir:
        export(model, args, names, info)
    dist.barrier()


def save(model, optimizer, step: int, args: argparse.Namespace, names: list[str]) -> None:
    path = args.checkpoint_dir / f"step-{step:08d}.pt"
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step, "labels": names,
                "shape": model.shape}, tmp)
    tmp.replace(path)
    publish(args.checkpoint_dir / "latest", path.name + "\n")
    for old in sorted(args.checkpoint_dir.glob("step-*.pt"))[:-args.keep]:
        old.unlink()


def resume(model, optimizer, args: argparse.Namespace, names: list[str]) -> int:
    marker = args.checkpoint_dir / "latest"
    if not marker.exists():
        return 0
    state = torch.load(args.checkpoint_dir / marker.read_text().strip(), map_location="cpu", weights_only=False)
    if state.get("labels") != names or state.get("shape") != model.shape:
        raise SystemExit(f"{args.checkpoint_dir} holds another run's checkpoints (other labels or shape): give this "
                         "run its own --checkpoint-dir or CHECKPOINT_DIR")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return state["step"]


def export(model, args: argparse.Namespace, names: list[str], info: dict) -> None:
    """The Hugging Face directory (and code/ for the Ray Serve application), renamed into place whole; packed as
    model.tar.gz, its files at the top, where the export path ends in .tar.gz."""
    from safetensors.torch import save_file

    target = args.export_dir
    archive = target.name.endswith(".tar.gz")
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    state = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in model.state_dict().items()}
    save_file(state, tmp / "model.safetensors", metadata={"format": "pt"})
    config = encoder_model.hf_config(model, dict(enumerate(names)), pad_id=info["pad_id"], dtype="float32")
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    for name in (*TOKENIZER_FILES, *EXTRA_TOKENIZER_FILES) if args.tokenizer else ():
        if (args.tokenizer / name).exists():
            shutil.copy(args.tokenizer / name, tmp / name)
    (tmp / "code").mkdir()
    for source, name in SERVE_FILES.items():
        shutil.copy(HERE / source, tmp / "code" / name)
    if archive:
        packed = target.with_name(target.name + ".part")
        with tarfile.open(packed, "w:gz") as tar:
            for item in sorted(tmp.iterdir()):
                tar.add(item, arcname=item.name)
        shutil.rmtree(tmp)
        packed.replace(target)
    else:
        shutil.rmtree(target, ignore_errors=True)
        tmp.replace(target)
    print(f"exported {target} (Hugging Face BertForSequenceClassification, {len(names)} labels"
          f"{', packed as the framework archive' if archive else ''})", flush=True)
