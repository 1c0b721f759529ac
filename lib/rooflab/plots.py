"""matplotlib figures of the roofline and of where a request's time goes.

Imported on demand (``from rooflab import plots``), so ``import rooflab``
does not pay for matplotlib.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .hardware import Hardware, hardware as _hardware
from .precision import as_precision
from .roofline import Cost
from .models import Model, model as _model
from .precision import Precision
from .serving import Request, decode_step, memory_budget, prefill, request

__all__ = ["roofline_figure", "phase_bars", "memory_figure", "batching_figure", "quantization_figure",
           "crossover_figure", "decode_figure", "frontier_figure", "gap_histogram", "measured_figure"]

_COLOURS = {"compute": "#C44E52", "memory": "#4C72B0"}
_GREY = "#AAAAAA"


def _plot_fitting(ax, x, y, fits, *args, label=None, **kwargs):
    """Plot y against x where ``fits`` holds, and the rest as a thin grey dotted line: a configuration
    that does not fit in memory is never drawn as if it did.  Returns the line of the fitting part."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    fits = np.broadcast_to(np.asarray(fits, dtype=bool), y.shape)
    line, = ax.plot(x, np.where(fits, y, np.nan), *args, label=label, **kwargs)
    if not np.all(fits):
        # include the last fitting point so the grey part joins the coloured one
        grey = ~fits | np.roll(~fits, -1) & fits
        ax.plot(x, np.where(grey, y, np.nan), ":", color=_GREY, lw=1,
                label="does not fit in memory" if "does not fit in memory" not in
                [h.get_label() for h in ax.get_lines()] else None)
    return line


def roofline_figure(
    device: Hardware | str,
    points: dict[str, Cost] | None = None,
    precision: str = "fp16",
    ax=None,
    parts: bool = False,
):
    """Draw the device's roofline (attainable FLOP/s against intensity, log-log) and place costs on it.

    Each point sits at its intensity and its achieved rate, flops / time; a point on the
    slanted roof is memory-bound, on the flat roof compute-bound.  A pass of several operations
    sits below the roof (its time is the sum of theirs); with ``parts=True`` each operation of a
    pass is drawn too, as a small point on its own roof.  Returns the Axes.
    """
    device = _hardware(device)
    peak = device.peak_flops_for(as_precision(precision).compute)
    bandwidth = device.memory_bandwidth_si
    ridge = peak / bandwidth
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.2))
    shown = [(label, cost, 8) for label, cost in (points or {}).items()]
    if parts:
        shown += [(f"{label}: {name}", part, 5) for label, cost in (points or {}).items()
                  for name, part in cost.parts.items()]
    intensities = [float(np.max(c.flops_si / c.bytes_si)) for _, c, _ in shown]
    low = min([0.1, *intensities]) / 2
    high = max([ridge * 30, *intensities]) * 2
    x = np.geomspace(low, high, 300)
    ax.loglog(x, np.minimum(peak, bandwidth * x) / 1e12, color="black", lw=2, label=f"{device.name} roofline")
    ax.axvline(ridge, color="grey", ls=":", lw=1)
    ax.annotate(f"ridge point\n{ridge:.0f} FLOP/B", (ridge, peak / 1e12 / 30), ha="left", fontsize=8, color="grey",
                xytext=(4, 0), textcoords="offset points")
    for label, cost, size in shown:
        intensity = np.asarray(cost.flops_si / cost.bytes_si, dtype=float)
        achieved = np.asarray(cost.flops_si / cost.time_si, dtype=float) / 1e12
        colour = _COLOURS[cost.bound if isinstance(cost.bound, str) else "memory"]
        if not np.all(cost.fits):
            colour, label = _GREY, f"{label}, does not fit"
        ax.plot(intensity, achieved, "o", ms=size, color=colour)
        point = (float(intensity.flat[-1]), float(achieved.flat[-1]))
        if size < 8:  # an operation of a pass: its name only, above and left of the point
            ax.annotate(label, point, xytext=(-4, 6), ha="right", textcoords="offset points", fontsize=7,
                        color=colour)
            continue
        on_flat_roof = cost.bound == "compute" if isinstance(cost.bound, str) else False
        ax.annotate(f"{label}\n({cost.bound if isinstance(cost.bound, str) else 'sweep'}-bound)", point,
                    # under the flat roof the label would sit on the line: put it below the point
                    xytext=(0, -30) if on_flat_roof else (6, -14), ha="center" if on_flat_roof else "left",
                    textcoords="offset points", fontsize=8, color=colour)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel(f"attainable {precision} TFLOP/s")
    ax.set_title(f"{device.name}: {peak / 1e12:.0f} TFLOP/s, {bandwidth / 1e12:.2f} TB/s")
    ax.grid(True, which="both", alpha=0.2)
    return ax


def phase_bars(requests: dict[str, Request], ax=None):
    """Horizontal bars of each request's prefill and decode time, s, with the decode share written on.

    Returns the Axes.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 0.6 + 0.5 * len(requests)))
    labels = list(requests)
    prefill = np.array([float(requests[k].ttft_si) for k in labels])
    decode = np.array([float(requests[k].decode_time_si) for k in labels])
    ax.barh(labels, prefill, color=_COLOURS["compute"], label="prefill (TTFT)")
    ax.barh(labels, decode, left=prefill, color=_COLOURS["memory"], label="decode")
    for i, (p, d) in enumerate(zip(prefill, decode)):
        ax.text(p + d, i, f"  decode {d / (p + d):.0%}", va="center", fontsize=8)
    ax.set_xlabel("seconds")
    ax.set_xlim(0, float(np.max(prefill + decode)) * 1.3)
    ax.invert_yaxis()
    ax.legend(loc="lower right", fontsize=8)
    return ax


def memory_figure(model: Model | str, device: Hardware | str, context_len: int, max_batch_shown: int = 256,
                  precision="fp16", gpu_memory_utilization: float = 0.9, ax=None):
    """Memory held (weights, KV cache, engine reserve) against batch at one context length, GB.

    What a process can allocate is a horizontal line, the total the device reports a dotted one; batches
    past the first are shaded "does not fit".
    Returns the Axes.
    """
    device = _hardware(device)
    batches = np.arange(1, max_batch_shown + 1)
    budget = memory_budget(model, device, context_len, batches, precision, gpu_memory_utilization)
    weights = np.full(batches.shape, budget.weights_si / 1e9)
    kv = np.asarray(budget.kv_si) / 1e9
    reserve = np.full(batches.shape, budget.reserve_si / 1e9)
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.stackplot(batches, weights, kv, reserve, labels=["weights", "KV cache", "engine reserve"],
                 colors=["#8C8C8C", _COLOURS["memory"], "#DDDDDD"])
    capacity = budget.allocatable.m_as("GB")
    ax.axhline(budget.capacity_si / 1e9, color="black", lw=1, ls=":")
    ax.axhline(capacity, color="black", lw=1.5)
    ax.annotate(f"{device.name}: {capacity:.1f} GB a process can allocate\n(of the "
                f"{budget.capacity_si / 1e9:.1f} GB, {budget.capacity_si / 2**20:,.0f} MiB, the device reports: dotted)",
                (batches[-1], capacity), xytext=(-4, 6), textcoords="offset points", fontsize=8, ha="right")
    fits = int(np.max(budget.max_batch)) if np.size(budget.max_batch) else 0
    if fits < batches[-1]:
        ax.axvspan(max(fits, 0) + 0.5, batches[-1], color=_COLOURS["compute"], alpha=0.12, label="does not fit")
    ax.set_xlim(batches[0], batches[-1])
    ax.set_ylim(0, max(capacity, float(weights[-1] + kv[-1] + reserve[-1])) * 1.15)  # room for the label
    ax.set_xlabel(f"batch (sequences of {context_len:,} tokens)")
    ax.set_ylabel("memory, GB")
    ax.set_title(f"{model if isinstance(model, str) else model.name}: largest batch that fits is {max(fits, 0)}")
    ax.legend(loc="lower right", fontsize=8)
    return ax


def batching_figure(model: Model | str, device: Hardware | str, contexts=(128, 2000, 16000), max_batch_shown: int = 256,
                    precision="fp16", ax=None):
    """Decode throughput gain (batch x step time at batch 1 / step time at batch B) against batch.

    One line per context length, and the ideal line gain = B.  Batches whose cache does not fit
    in memory are drawn as a grey dotted line.  Contexts beyond the model's are left out.
    Returns the Axes.
    """
    batches = np.arange(1, max_batch_shown + 1)
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.plot(batches, batches, color="grey", ls=":", label="gain = batch (ideal)")
    for context in contexts:
        if context + 1 > _max_context(model):
            continue
        one = decode_step(model, device, context, 1, precision, allow_overflow=True).time_si
        many = decode_step(model, device, context, batches, precision, allow_overflow=True)
        _plot_fitting(ax, batches, batches * one / np.asarray(many.time_si), many.fits,
                      label=f"context {context:,} tokens")
    ax.set_xlabel("batch")
    ax.set_ylabel("decode throughput gain over batch 1")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.2)
    return ax


def quantization_figure(model: Model | str, device: Hardware | str, max_len: int = 32768, ax=None):
    """Speed-up of weight-only INT8 and INT4 (groups of 128) over FP16, by phase, against length.

    Decode at batch 1 and 16 against the context, prefill against the prompt, up to the model's
    context; dotted lines mark the ratio of the weight bytes a step reads (the embedding and head stay
    16-bit, as shipped), which decode approaches only while weights dominate.  Where FP16 weights and cache
    do not fit in memory the lines turn grey and dotted.  Returns the Axes.
    """
    top = min(max_len, _max_context(model) - 1)
    lengths = np.unique(np.geomspace(16, top, 60).round().astype(int))
    formats = {"INT8": Precision(weights="int8"), "INT4": Precision(weights="int4", group_size=128)}
    if ax is None:
        _, ax = plt.subplots(figsize=(6.8, 4.2))
    for batch, style in ((1, "-"), (16, "--")):
        base = decode_step(model, device, lengths, batch, "fp16", allow_overflow=True)
        for label, precision in formats.items():
            step = np.asarray(decode_step(model, device, lengths, batch, precision, allow_overflow=True).time_si)
            _plot_fitting(ax, lengths, np.asarray(base.time_si) / step, base.fits, style,
                          label=f"decode, {label}, batch {batch}")
    base = prefill(model, device, lengths, precision="fp16", allow_overflow=True)
    quick = np.asarray(prefill(model, device, lengths, precision=formats["INT4"], allow_overflow=True).time_si)
    _plot_fitting(ax, lengths, np.asarray(base.time_si) / quick, base.fits, color="black", lw=2,
                  label="prefill, INT4")
    m = _model(model)
    for label, precision in formats.items():
        ratio = _step_weight_bytes(m, Precision()) / _step_weight_bytes(m, precision)
        ax.axhline(ratio, color="grey", ls=":", lw=1)
        ax.annotate(f"{label}: ratio of the weight bytes a step reads, {ratio:.2f}x", (lengths[0], ratio), xytext=(2, 3),
                    textcoords="offset points", fontsize=7, color="grey")
    ax.set_xscale("log")
    ax.set_xlabel("context (decode) or prompt (prefill) length, tokens")
    ax.set_ylabel("speed-up over FP16 weights")
    ax.legend(fontsize=7, loc="lower left")  # clear of the curves, which fall to the right
    ax.grid(alpha=0.2)
    return ax


def crossover_figure(model: Model | str, device: Hardware | str, output_lens=(64, 256), contexts=(0, 4000),
                     max_prompt: int = 131072, max_batch_shown: int = 2048, figure=None):
    """Three panels, each with its crossing marked where there is one, within the model's context.

    Left: share of prefill FLOPs in attention against the prompt (half at attention_crossover_len).
    Middle: TTFT against the decode time of answers of ``output_lens`` tokens.
    Right: a decode step's operations against batch at ``contexts``: the body's compute and memory
    time (they cross near the ridge batch at any context) and attention's time (memory-bound).
    Configurations that do not fit in memory are grey and dotted.  Draws on ``figure`` (a
    matplotlib Figure of the caller's, as the explorer passes) or a new pyplot one.  Returns the Figure.
    """
    from .crossover import attention_crossover_len, attention_share, ttft_exceeds_decode_len

    limit = _max_context(model)
    if figure is None:
        fig, (left, middle, right) = plt.subplots(1, 3, figsize=(14, 4.0))
    else:
        fig = figure
        left, middle, right = fig.subplots(1, 3)
    prompts = np.unique(np.geomspace(128, min(max_prompt, limit), 200).round().astype(int))
    left.semilogx(prompts, attention_share(model, prompts), color="black")
    half = attention_crossover_len(model)
    left.axhline(0.5, color="grey", ls=":")
    if half <= prompts[-1]:
        left.axvline(half, color=_COLOURS["compute"], ls="--")
        left.annotate(f"half at {half:,.0f}", (half, 0.5), xytext=(4, -14), textcoords="offset points", fontsize=8)
    else:
        left.annotate(f"half at {half:,.0f},\nbeyond the {limit:,}-token context", (prompts[-1], 0.5),
                      xytext=(-4, 4), textcoords="offset points", fontsize=8, ha="right")
    left.set_xlabel("prompt length, tokens")
    left.set_ylabel("attention share of prefill FLOPs")

    pre = prefill(model, device, prompts, allow_overflow=True)
    middle.loglog(prompts, np.where(pre.fits, pre.time_si, np.nan), color="black", lw=2, label="TTFT")
    for output_len in output_lens:
        shown = prompts[prompts + output_len - 1 <= limit]
        if not shown.size:
            continue
        r = request(model, device, shown, output_len, allow_overflow=True)
        line = _plot_fitting(middle, shown, r.decode_time_si, r.fits, label=f"decode of {output_len} tokens")
        crossing = ttft_exceeds_decode_len(model, device, output_len)
        if crossing <= shown[-1]:
            middle.axvline(crossing, color=line.get_color(), ls="--")
            middle.annotate(f"{crossing:,.0f}", (crossing, float(np.min(pre.time_si))), xytext=(3, 0),
                            textcoords="offset points", fontsize=8, color=line.get_color())
    middle.set_xscale("log")
    middle.set_yscale("log")
    middle.set_xlabel("prompt length, tokens")
    middle.set_ylabel("seconds")
    middle.legend(fontsize=8)

    _decode_panel(right, model, device, contexts, max_batch_shown)
    name = model if isinstance(model, str) else model.name
    fig.suptitle(f"{name} on the {_hardware(device).name}: where the binding resource changes", fontsize=11)
    fig.tight_layout()
    return fig


def _decode_panel(axis, model, device, contexts, max_batch_shown: int, precision="fp16") -> None:
    """A decode step's operations against the batch at each context: the body's (or an MoE's experts') compute and
    memory time, attention's time, and the batch where the weight matmuls turn compute-bound."""
    from .crossover import decode_compute_bound_batch

    limit = _max_context(model)
    batches = np.unique(np.geomspace(1, max_batch_shown, 120).round().astype(int))
    for context, style in zip(contexts, ("-", "--")):
        if context + 1 > limit:
            continue
        step = decode_step(model, device, context, batches, precision, allow_overflow=True)
        part = "body" if "body" in step.parts else "experts"  # an MoE's experts: its last matmul to turn
        body, attention = step.parts[part], step.parts["attention"]
        _plot_fitting(axis, batches, body.compute_time_si, step.fits, style, color=_COLOURS["compute"],
                      label=f"{part} compute, context {context:,}")
        _plot_fitting(axis, batches, body.memory_time_si, step.fits, style, color=_COLOURS["memory"],
                      label=f"{part} memory, context {context:,}")
        _plot_fitting(axis, batches, attention.time_si, step.fits, style, color="#55A868",
                      label=f"attention (memory-bound), context {context:,}")
        crossing = decode_compute_bound_batch(model, device, context, precision=precision, detail=True)
        if crossing.value <= batches[-1]:
            axis.axvline(crossing.value, color="grey", ls=style, lw=1)
            note = "" if crossing.fits else " (does not fit)"
            axis.annotate(f"{part} compute-bound\nfrom batch {crossing.value:,.0f}{note}",
                          (crossing.value, float(np.min(body.memory_time_si))), xytext=(3, 3),
                          textcoords="offset points", fontsize=8)
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("batch")
    axis.set_ylabel("time of each operation in a decode step, s")
    axis.legend(fontsize=7)


def decode_figure(model: Model | str, device: Hardware | str, contexts=(0, 4000), precision="fp16",
                  max_batch_shown: int = 2048, figure=None):
    """One panel: a decode step's operations against the batch at ``contexts`` (the right panel of
    :func:`crossover_figure`), at ``precision``, with the batch where the weight matmuls turn compute-bound marked.
    Configurations that do not fit in memory are grey and dotted.  Draws on ``figure`` or a new pyplot one; returns
    the Figure."""
    if figure is None:
        fig, axis = plt.subplots(figsize=(8, 4.5))
    else:
        fig = figure
        axis = fig.subplots()
    _decode_panel(axis, model, device, contexts, max_batch_shown, precision)
    name = model if isinstance(model, str) else model.name
    shown = precision.upper() if isinstance(precision, str) else str(precision)
    fig.suptitle(f"{name} on the {_hardware(device).name} at {shown}: a decode step against the batch", fontsize=11)
    fig.tight_layout()
    return fig


def frontier_figure(model: Model | str, configs, prompt_len, output_len, ttft_limit=None, itl_limit=None,
                    efficiency: str = "ideal", ax=None):
    """The latency-throughput frontier of each configuration: ITL against output tokens/s per GPU, one point per
    batch from 1 to the most that fits (memory ends each line).

    ``configs`` are device names or (device, precision, tp) tuples.  On each line a circle marks where the
    decode step's weight matmuls turn compute-bound (the bend) and a star the best point under the SLA, whose
    ITL target is a dashed line.  A configuration that does not fit, or meets no target, says so in the legend.
    Returns the Axes.
    """
    from .fleet import SLAUnmet, best_under_sla, frontier

    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4.5))
    for config in configs:
        device, precision, tp = (config, "fp16", 1) if isinstance(config, str) else config
        label = _hardware(device).name + (f", {precision}" if precision != "fp16" else "") + (f", tp={tp}" if tp > 1 else "")
        try:
            f = frontier(model, device, prompt_len, output_len, precision=precision, tp=tp, efficiency=efficiency)
        except ValueError as error:  # does not fit, no such precision, too long for the model
            ax.plot([], [], " ", label=f"{label}: {str(error).split(':')[0]}")
            continue
        x, y = f.output_throughput.m_as("token/s"), f.itl.m_as("ms")
        line, = ax.plot(x, y, label=label)
        bent = np.flatnonzero(np.asarray(f.bound) == "compute")
        if bent.size:
            ax.plot(x[bent[0]], y[bent[0]], "o", color=line.get_color(), mfc="none")
            ax.annotate(f"bends at {int(f.batch[bent[0]])}", (x[bent[0]], y[bent[0]]), xytext=(-4, 6),
                        textcoords="offset points", fontsize=7, ha="right", color=line.get_color())
        if ttft_limit is not None or itl_limit is not None:
            try:
                best = best_under_sla(model, device, prompt_len, output_len, ttft_limit, itl_limit, precision, tp,
                                      efficiency=efficiency)
            except SLAUnmet:
                line.set_label(f"{label} (meets no target)")
                continue
            ax.plot(best.output_throughput.m_as("token/s"), best.itl.m_as("ms"), "*", ms=12, color=line.get_color())
            ax.annotate(f"batch {best.batch}", (best.output_throughput.m_as("token/s"), best.itl.m_as("ms")),
                        xytext=(5, -10), textcoords="offset points", fontsize=7, color=line.get_color())
    if itl_limit is not None:
        ax.axhline(itl_limit.m_as("ms"), color="grey", ls="--", lw=1, label=f"ITL target {itl_limit.m_as('ms'):g} ms")
    name = model if isinstance(model, str) else model.name
    ax.set_xlabel("output tokens per second per GPU")
    ax.set_ylabel("ITL, ms")
    ax.set_title(f"{name}, {_shown_lengths(prompt_len)} in / {_shown_lengths(output_len)} out, {efficiency}: "
                 f"circle = the bend, star = best under the SLA", fontsize=9)
    ax.legend(fontsize=7)
    return ax


def gap_histogram(gaps, label: str | None = None, bins: int = 60, ax=None):
    """Histogram of inter-token gaps on a log time axis, ms, with dashed lines at their p50 and p99.

    ``gaps`` is a time quantity array (such as ``np.concatenate`` of ``run.itl_of(i)``) or a
    ``rooflab.simulate.Simulation``, whose gaps of every request are drawn.  The bins are equal on a log scale, so
    a rare mode of long gaps (a prefill's stall, a pre-emption) shows as a second hump far right of the plain step;
    the y axis counts gaps per bin on a log scale, so a hump of 1% is still visible.  Returns the Axes.
    """
    from .units import Q_

    values = Q_(gaps.gaps_si, "s") if hasattr(gaps, "gaps_si") else gaps
    if not hasattr(values, "m_as") or not values.check("[time]"):
        raise ValueError(f"gaps should be a time quantity array or a Simulation, got {type(gaps).__name__}")
    ms = np.asarray(values.m_as("ms"), dtype=float).ravel()
    if ms.size == 0 or np.any(~np.isfinite(ms)) or np.any(ms <= 0):
        raise ValueError("gaps should be a non-empty array of positive, finite times")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.5))
    low, high = ms.min(), ms.max()
    edges = np.geomspace(low / 1.05, high * 1.05, bins + 1)
    ax.hist(ms, bins=edges, color=_COLOURS["memory"], alpha=0.7, label=label)
    p50, p99 = np.percentile(ms, [50, 99])
    ax.axvline(p50, color="black", ls="--", lw=1, label=f"p50 {p50:.3g} ms")
    ax.axvline(p99, color=_COLOURS["compute"], ls="--", lw=1, label=f"p99 {p99:.3g} ms")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("gap between two tokens of one answer, ms (log scale)")
    ax.set_ylabel("gaps (log scale)")
    ax.set_title(f"{ms.size:,} gaps" + (f": {label}" if label else ""), fontsize=9)
    ax.legend(fontsize=7)
    return ax


def _shown_lengths(value) -> str:
    return f"{value:,}" if isinstance(value, int) else "mixed"


def _step_weight_bytes(m: Model, precision: Precision) -> float:
    """Weight bytes a batch-1 step reads, B: non-embedding weights + the output head (not the embedding table)."""
    return m.non_embedding_params * precision.bytes_per_weight + m.vocab * m.d_model * precision.embedding_bytes_per_weight


def _max_context(model: Model | str) -> int:
    return _model(model).max_context


def measured_figure(model: Model | str, device: Hardware | str, prompt_lens, ttft, batches, tpot,
                    context_len: int = 12):
    """Two panels of one's own measurements against the calibrated roofline (fp32): the TTFT against the prompt
    length (measured points; the roofline's TTFT; its compute roof, FLOPs / peak, and memory roof, bytes /
    bandwidth), and decode tokens/s = batch / TPOT against the batch, beside the roofline's batch / step time at
    ``context_len``.  ``ttft`` and ``tpot`` are quantities of time, one per point.  Returns the figure."""
    m, dev = _model(model), _hardware(device)
    lens = np.asarray(prompt_lens, dtype=int)
    sizes = np.asarray(batches, dtype=int)
    ttft_ms = np.asarray(ttft.m_as("ms"), dtype=float)
    tpot_ms = np.asarray(tpot.m_as("ms"), dtype=float)
    if ttft_ms.shape != lens.shape or tpot_ms.shape != sizes.shape:
        raise ValueError(f"ttft needs one time per prompt length ({lens.size}) and tpot one per batch "
                         f"({sizes.size}); got {ttft_ms.shape} and {tpot_ms.shape}")
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    grid = np.unique(np.geomspace(lens.min(), lens.max(), 60).round().astype(int))
    costs = [prefill(m, dev, int(n), precision="fp32", allow_overflow=True) for n in grid]
    peak, bandwidth = dev.peak_flops_for("fp32"), dev.memory_bandwidth_si
    left.plot(grid, [c.time_si * 1e3 for c in costs], "-", color="black", label="roofline TTFT")
    left.plot(grid, [c.flops_si / peak * 1e3 for c in costs], "--", color=_COLOURS["compute"],
              label="compute roof (FLOPs / peak)")
    left.plot(grid, [c.bytes_si / bandwidth * 1e3 for c in costs], "--", color=_COLOURS["memory"],
              label="memory roof (bytes / bandwidth)")
    left.plot(lens, ttft_ms, "o", color="black", label="your measured TTFT")
    left.set(xscale="log", yscale="log", xlabel="prompt length (tokens)", ylabel="TTFT (ms)",
             title=f"Prefill of {m.name} on {dev.name}")
    left.legend(fontsize=8)
    grid_b = np.unique(np.geomspace(sizes.min(), sizes.max(), 40).round().astype(int))
    steps = [decode_step(m, dev, context_len, int(b), "fp32", allow_overflow=True) for b in grid_b]
    right.plot(grid_b, [b / s.time_si for b, s in zip(grid_b, steps)], "-", color="black",
               label=f"roofline (context {context_len})")
    right.plot(sizes, sizes / (tpot_ms / 1e3), "o", color="black", label="your measured batch / TPOT")
    right.set(xscale="log", yscale="log", xlabel="batch (sequences)", ylabel="decode output tokens/s",
              title="Decode: output tokens per second")
    right.legend(fontsize=8)
    fig.tight_layout()
    return fig
