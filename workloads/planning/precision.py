"""The run's compute precision and compiler, and the trainer flags that run them. Pure Python.

- fp8 (torchao's Float8 training: Float8Linear in place of the blocks' nn.Linear, dynamic tensor-wise scales) where the
  accelerator has FP8 tensor cores (a dense FP8 peak recorded in catalog/utilisation.yaml: Hopper and Blackwell) and the
  model's linears take it: the trainer's decoder, both weight dimensions multiples of 16 (torchao float8 README,
  module_filter_fn: "don't convert linear modules with weight dimensions not divisible by 16");
- else bf16 where the accelerator has bf16 tensor cores, fp16 with loss scaling where it has neither (T4, V100);
- torch.compile of the blocks on NVIDIA GPUs (Neuron compiles its own graph).

`training.precision` overrides the choice; a precision the accelerator cannot run refuses that type. The estimate is
priced at the published runs of the chosen precision (estimates.utilisation_range, the fastest stack's median), and
the planned launch commands pass `--precision fp8 --compile` to examples/slurm/train.py (train_commands.py).
"""

from __future__ import annotations

from ..catalog import InstanceType, load_utilisation
from ..config.model import architecture, ffn_width, model_shape
from ..config.schema import Workload
from . import estimates as est

FP8_ALIGNMENT = 16  # torchao Float8Linear: in_features and out_features multiples of 16


def fp8_refusal(w: Workload, itype: InstanceType) -> str:
    """Why this workload does not train in fp8 on `itype`, or "" where it can."""
    assert itype.accelerator
    model = itype.accelerator.model
    if est.peak_tflops(itype, "fp8", load_utilisation()) is None:
        offered = ", ".join(sorted(load_utilisation().peaks.get("fp8", {})))
        return f"{model} has no recorded FP8 tensor-core peak (fp8 is offered on {offered})"
    kind, _ = architecture(w)
    if kind != "decoder":
        return f"the trainer's Float8 linears are its decoder's; a{'n' if kind[0] in 'aeiou' else ''} {kind} model " \
               "trains in bf16"
    hidden, width = model_shape(w)[3], ffn_width(w)
    if hidden % FP8_ALIGNMENT or width % FP8_ALIGNMENT:
        return (f"torchao's Float8 linears need weight dimensions divisible by {FP8_ALIGNMENT} (hidden {hidden}, "
                f"FFN width {width})")
    return ""


def choose(w: Workload, itype: InstanceType) -> tuple[str, str]:
    """The run's compute precision on `itype` and why, or ("", why not) when training.precision is impossible there."""
    assert itype.accelerator
    has_bf16 = (itype.peak_tflops_dtype or "bf16") == "bf16"
    model = itype.accelerator.model
    wanted = w.training.precision
    no_fp8 = fp8_refusal(w, itype)
    if wanted is None:
        if not no_fp8:
            return "fp8", (f"fp8 (torchao Float8 training, torch.compile): {model} has FP8 tensor cores and the "
                           "decoder's linears take it; training.precision bf16 opts out")
        if has_bf16:
            return "bf16", f"bf16 (not fp8: {no_fp8})"
        return "fp16", f"fp16 with dynamic loss scaling: {model} has no bf16 tensor cores"
    if wanted == "bf16" and not has_bf16:
        return "", f"{model} has no bf16 tensor cores (fp16 with loss scaling is what it trains in)"
    if wanted == "fp8" and no_fp8:
        return "", no_fp8
    return wanted, f"{wanted} set by training.precision"


def compiles(itype: InstanceType) -> bool:
    """Whether the trainer compiles its blocks (torch.compile) on `itype`: on NVIDIA GPUs."""
    return bool(itype.accelerator and itype.accelerator.kind == "nvidia-gpu")


def trainer_flags(precision: str, compiled: bool) -> list[str]:
    """examples/slurm/train.py's flags for the planned precision and compiler (the layout carries bf16 or fp16 as the
    compute dtype; fp8 is the Float8 linears on top of it)."""
    return (["--precision", "fp8"] if precision == "fp8" else []) + (["--compile"] if compiled else [])
