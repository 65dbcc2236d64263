"""The model a training run builds and how it is spread: the decoder (or encoder classifier) the trainer builds and its
parameter count, its layout on a candidate's nodes (parallelism.py, encoder.py, nxd.py), the precision it computes in,
and the utilisation, communication and hours of that layout. Pure Python: the candidates (candidates.py) are sized and
timed with it, the chosen run's estimate (training_estimate.py) too."""

from __future__ import annotations

from dataclasses import replace

from ..catalog import InstanceType, devices, load_utilisation
from ..config.model import SHAPE_TOLERANCE, architecture, attention_heads, decoder_parameters, family, ffn_width, \
    model_shape, shape_line, vocab
from ..config.schema import Workload
from ..errors import WARNING, ConfigError, Finding
from . import communication, encoder, finetune_recipe
from . import estimates as est
from . import nxd, parallelism
from .parallelism import Parallelism
from .precision import choose as choose_precision


def _decoder(w: Workload) -> dict:
    """The decoder the shipped trainer builds for this workload: the config's shape, each absent value the usual
    decoder's at its size, the usual grouped-query key/value heads where they divide the heads (else one per head)."""
    layers, _, kv, hidden = model_shape(w)
    heads, _ = attention_heads(w)
    return dict(layers=layers, hidden=hidden, heads=heads, kv_heads=kv if heads % kv == 0 else heads,
                intermediate=ffn_width(w), vocab=vocab(w.model))


def trained_billion(w: Workload) -> float:
    """The parameters (billions) of the model the trainer builds (config/model.py decoder_parameters, or the encoder
    classifier's): what memory and time are sized from, whatever model.parameters_billion says (a WARNING when a
    decoder's differ by over a tenth)."""
    if encoder.is_classifier(w):
        return encoder.parameters_billion(w)
    return decoder_parameters(**_decoder(w)) / 1e9


def shape_mismatch(w: Workload) -> Finding | None:
    """A WARNING when the decoder the trainer builds differs from model.parameters_billion by more than a tenth: the
    plan sizes memory and time from the shape's count, so the stated size is not what is trained or priced."""
    stated, built = w.model.parameters_billion, trained_billion(w)
    if encoder.is_classifier(w) or abs(built / stated - 1) <= SHAPE_TOLERANCE:
        return None
    return Finding(WARNING, "model.parameters_billion", stated,
                   f"the decoder the trainer builds ({shape_line(w)}) has {built:.3g}B parameters, not the "
                   f"{stated:g}B stated: memory and time are sized at {built:.3g}B; set the model's shape "
                   "(model.layers, hidden_size, attention_heads, kv_heads, intermediate_size, vocab_size) or "
                   "parameters_billion to match it", "")


def planned_sequence(w: Workload) -> int:
    """The sequence length the plan trains at: training.sequence_length, else the layout's default."""
    return encoder.sequence(w) if encoder.is_classifier(w) else w.training.sequence_length or parallelism.SEQUENCE


def choose_layout(w: Workload, itype: InstanceType, count: int) -> Parallelism | None:
    """parallelism.choose for the decoder the trainer builds (_decoder), sized at its own parameter count; an encoder
    classifier's own layout (encoder.layout); on the Neuron 2.28 XLA stack (Trn1/Trn1n) NxD Training's layout where the
    shipped trainer's DDP does not fit (nxd.py)."""
    if encoder.is_classifier(w):
        return encoder.layout(w, itype, count)
    shape = dict(parameters_billion=trained_billion(w), **_decoder(w), itype=itype, nodes=count,
                 sequence=w.training.sequence_length or parallelism.SEQUENCE,
                 global_batch_tokens=finetune_recipe.global_batch_tokens(w))
    spread = parallelism.choose(**shape)
    if (spread is None or spread.sharding != "none") and nxd.trains_on(itype):
        spread = nxd.choose(**shape)
    known = family(w.model)
    if spread is None or known is None:
        return spread
    # Its rotary embedding; not its context: a run from scratch exports the length it trained at.
    return replace(spread, family={"name": known.name, "rope_theta": known.rope_theta,
                                   "rope_scaling": known.rope_scaling})


def planned_layout(w: Workload, itype: InstanceType, count: int, decisions: list[str],
                   mfu: float | None = None) -> Parallelism:
    """The layout of the chosen run (choose_layout), refused with the fields that would change it where none fits;
    its decision line adds one step's communication at the estimate's likely utilisation `mfu`."""
    spread = choose_layout(w, itype, count)
    if spread is None:
        per_node, gib = devices(itype)
        field = "training.instance_count" if w.training.instance_count else "training.instance_type"
        value = w.training.instance_count if w.training.instance_count else itype.name
        raise ConfigError(field, value, "more nodes, or a type with more accelerator memory",
                          reason=f"no data/tensor/pipeline layout of a {w.model.parameters_billion:g}B model fits "
                                 f"{count} x {itype.name} ({count * per_node} ranks of {gib:g} GiB)")
    line = f"layout: {spread.reason}"
    if mfu:
        peak = est.peak_tflops(itype, precision_of(w, itype)[0], load_utilisation()) or itype.peak_tflops or 0
        comm = step_communication(w, itype, count, mfu, peak)
        if comm is not None:
            line += f"; {comm.line()}"
    decisions.append(line)
    return spread


def layout_recomputes(w: Workload, itype: InstanceType, count: int) -> bool:
    """Whether the layout on `count` nodes recomputes activations (no layout that fits: assume it would)."""
    spread = choose_layout(w, itype, count)
    return spread is None or spread.recompute


def precision_of(w: Workload, itype: InstanceType) -> tuple[str, str]:
    """The run's compute precision on `itype` and why, or ("", why not) when the config's precision is impossible
    (precision.choose: fp8 where the accelerator and the model allow it)."""
    return choose_precision(w, itype)


def priced_precision(w: Workload, itype: InstanceType) -> str:
    """The precision the estimate is priced at: the one the trainer runs (train.py --precision fp8 --compile)."""
    return precision_of(w, itype)[0]


def attention_shape(w: Workload) -> tuple[int, int] | None:
    """(layers, hidden) of a decoder, whose causal attention's FLOPs move a published MFU to the planned sequence
    (est.utilisation_range); None for other models (their figures stand as published)."""
    if architecture(w)[0] != "decoder":
        return None
    layers, _, _, hidden = model_shape(w)
    return layers, hidden


def utilisation(itype: InstanceType, parameters_billion: float, *, precision: str = "bf16",
                recompute: bool | None = None, sequence: int | None = None,
                shape: tuple[int, int] | None = None) -> est.UtilisationRange:
    """Low, likely and high MFU for the type's accelerator at this model size and precision, from published runs;
    `recompute`: whether the layout recomputes activations, `sequence`: the planned length (est.utilisation_range).
    The published rows are compiled or hand-tuned stacks'; the shipped trainer compiles its blocks on NVIDIA GPUs
    (precision.compiles) and Neuron compiles its graph, so they stand as published until `plan --calibrate`."""
    return est.utilisation_range(itype, parameters_billion, load_utilisation(), precision=precision,
                                 recompute=recompute, sequence=sequence, shape=shape)


def utilisation_at(w: Workload, itype: InstanceType, count: int, precision: str) -> est.UtilisationRange:
    """The utilisation range of `count` nodes of `itype`: the published runs of its precision, with those measured
    without recompute scaled where the layout on `count` nodes recomputes."""
    spread = choose_layout(w, itype, count)
    if spread is not None and spread.sharding == nxd.SHARDING:  # NxD Training: its own published throughput
        return nxd.utilisation(itype, trained_billion(w))
    return utilisation(itype, w.model.parameters_billion, precision=precision,
                       recompute=spread is None or spread.recompute, sequence=planned_sequence(w),
                       shape=attention_shape(w))


def step_communication(w: Workload, itype: InstanceType, count: int, utilisation: float,
                       peak_tflops: float) -> communication.Communication | None:
    """One optimizer step's communication on `count` nodes against its compute at `utilisation` (None: no layout)."""
    spread = choose_layout(w, itype, count)
    if spread is None or spread.sharding == nxd.SHARDING:  # NxD's published throughput includes its communication
        return None
    tokens = spread.global_batch * spread.sequence
    compute_s = est.training_flops(w.model.parameters_billion, tokens / 1e9) / \
        (peak_tflops * 1e12 * count * utilisation)
    return communication.step(spread, itype, parameters_billion=w.model.parameters_billion, compute_s=compute_s)


def run_hours(w: Workload, itype: InstanceType, count: int, flops: float, utilisation: float,
              peak: float | None) -> float:
    """The run's hours: its compute at `utilisation`, plus the communication its layout cannot hide and a pipelined
    layout's idle fill and drain (parallelism.pipeline_bubble)."""
    hours = est.hours(flops, itype, count, utilisation, peak)
    comm = step_communication(w, itype, count, utilisation, peak or itype.peak_tflops or 0)
    spread = choose_layout(w, itype, count)
    # NxD's published throughput is measured with its own pipeline: its fill and drain are in it already.
    measured = spread is not None and spread.sharding == nxd.SHARDING
    bubble = parallelism.pipeline_bubble(spread) if spread is not None and spread.pipeline > 1 and not measured else 1.0
    return (hours * comm.factor if comm else hours) * bubble
