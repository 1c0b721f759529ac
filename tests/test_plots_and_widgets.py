"""Figures and explorers: they draw what they claim, and say so when a configuration is impossible."""

import matplotlib

matplotlib.use("Agg")


import math  # noqa: E402
import re  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import rooflab as rl  # noqa: E402
from rooflab import plots, widgets  # noqa: E402


def test_roofline_figure_places_each_phase_on_its_roof():
    llama, h100 = rl.model("Llama-3-8B"), rl.hardware("H100")
    prefill, decode = rl.prefill(llama, h100, 2000), rl.decode_step(llama, h100, 2000)
    ax = plots.roofline_figure(h100, {"prefill": prefill, "decode": decode})
    points = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert len(points) == 2
    (px,), (py,) = points[0].get_data()
    (dx,), (dy,) = points[1].get_data()
    # prefill right of the ridge, just under the compute roof: its memory-bound head adds 0.31 ms to 29.3 ms
    assert px > 295 and py == prefill.flops.m_as("TFLOP") / prefill.time.m_as("s") and 970 < py < 989.4
    # decode left of it: bandwidth x intensity, exactly, since all three of its operations are memory-bound
    assert dx < 295 and abs(dy - 3.35 * dx) < 1e-6
    # with parts, each operation sits on its own roof: the prefill's body on the flat one
    ax = plots.roofline_figure(h100, {"prefill": prefill, "decode": decode}, parts=True)
    points = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert len(points) == 8
    (_,), (body_y,) = points[2].get_data()
    assert abs(body_y - 989.4) < 1e-6


def test_phase_bars_show_each_request():
    llama, h100 = rl.model("Llama-3-8B"), rl.hardware("H100")
    ax = plots.phase_bars({"chat": rl.request(llama, h100, 50, 500), "summary": rl.request(llama, h100, 4000, 100)})
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["chat", "summary"]


def test_explain_covers_fits_does_not_fit_and_missing_precision():
    text, costs = widgets.explain("Llama-3-8B", "H100-SXM", "fp16", 2000, 300, 1)
    assert "TTFT 29.6 ms ideal" in text and "ITL 4.56 ms ideal" in text and set(costs) == {"prefill", "decode step"}
    assert "typical (compute-bound)" in text and "typical (memory-bound)" in text
    assert "ms ideal (compute-bound)" in text and "ms ideal (memory-bound)" in text  # each figure names its own bound
    # a prefill of 8 x 32,000 tokens takes seconds, printed in s: 2 x 8.03e9 weights x 256,000 tokens / 989 TFLOP/s
    # is 4.2 s before attention, so the ideal TTFT is between 4 and 10 s and reads "N.NN s"
    long, _ = widgets.explain("Llama-3.1-8B", "H100-SXM", "fp16", 32000, 256, 8)
    ttft = long.split(" ideal")[0].removeprefix("TTFT ")
    assert ttft.endswith(" s") and 4 < float(ttft[:-2]) < 10 and "ms" not in ttft
    # 120 tokens on an A100: memory-bound at the ideal (the turn is at 154 tokens, the ridge point near 153 FLOP/B),
    # compute-bound at typical efficiency, whose MFU falls further below 1 than its MBU
    text, _ = widgets.explain("Llama-3-8B", "A100-80GB", "fp16", 120, 300, 1)
    assert "ideal (memory-bound)" in text.split("ITL")[0]
    text, costs = widgets.explain("Llama-3-8B", "T4", "fp16", 2000, 300, 1)
    assert text.startswith("Does not fit") and "16.1 GB" in text and costs == {}
    # the line adds up (to the rounding of its three one-decimal parts), against what a process can allocate
    # (15.83 GB of a T4): 8.03 B weights x 2 B = 16.06 GB alone exceed it
    parts = [float(x) for x in re.findall(r"([\d.]+) GB", text)]
    assert len(parts) == 5 and abs(sum(parts[:3]) - parts[3]) <= 0.15 and parts[4] == 15.8 < parts[0]
    assert "a process can allocate 15.8 GB of the T4" in text
    text, costs = widgets.explain("Llama-3-8B", "H100-SXM", "fp16", 16000, 300, 1)
    assert text.startswith("Not possible") and "Llama-3.1-8B" in text and costs == {}
    text, costs = widgets.explain("Llama-3-8B", "A100-80GB", "fp8", 2000, 300, 1)
    assert "has no fp8 compute rate" in text and costs == {}


def test_explorer_builds_its_controls():
    box = widgets.serving_explorer()
    descriptions = [c.description for row in box.children[:2] for c in row.children]
    assert descriptions == ["GPU", "precision", "prompt", "answer", "batch"]


def test_memory_explain_and_figure():
    # 2,000-token contexts of Llama-3-8B in vLLM's 0.9 of the 79.11 GiB a process can allocate on an H100:
    # (0.9 x 79.11 x 2^30 - 16.06e9) / (2000 x 131072) = 230 sequences; 460 with an FP8 cache
    text = widgets.explain_memory("Llama-3-8B", "H100-SXM", 2000, 64, "fp16")
    assert "fits (largest batch 230)" in text and "KV 16.8 GB" in text and "ms typical" in text
    overflow = widgets.explain_memory("Llama-3-8B", "H100-SXM", 2000, 300, "fp16")
    assert "DOES NOT FIT" in overflow and " ms" not in overflow  # no time for what does not fit
    assert "fits (largest batch 460)" in widgets.explain_memory("Llama-3-8B", "H100-SXM", 2000, 300, "fp8")
    ax = plots.memory_figure("Llama-3-8B", "H100", 2000, 300)
    assert "largest batch that fits is 230" in ax.get_title()
    box = widgets.memory_explorer()
    assert [c.description for row in box.children[:2] for c in row.children] == ["GPU", "KV cache", "context", "batch"]


def test_batching_figure_falls_short_of_the_ideal_at_long_context():
    ax = plots.batching_figure("Llama-3-8B", "H100", contexts=(2000,), max_batch_shown=64)
    ideal, curve = ax.get_lines()
    assert curve.get_ydata()[-1] < 0.55 * ideal.get_ydata()[-1]  # about 32x at batch 64, not 64x
    # past the largest batch that fits (230 at 2,000 tokens) the line is cut, and drawn grey and dotted
    ax = plots.batching_figure("Llama-3-8B", "H100", contexts=(2000,), max_batch_shown=300)
    _, curve, grey = ax.get_lines()
    assert np.isnan(curve.get_ydata()[230]) and not np.isnan(curve.get_ydata()[229])
    assert grey.get_label() == "does not fit in memory" and not np.isnan(grey.get_ydata()[-1])


def test_quantization_figure_shows_decode_gains_below_the_byte_ratio():
    ax = plots.quantization_figure("Llama-3-8B", "H100")
    decode_int4 = next(line for line in ax.get_lines() if line.get_label() == "decode, INT4, batch 16")
    lengths, gains = decode_int4.get_data()
    assert lengths[-1] < 8192  # the model's context, not 32k
    # batch 16 at 16 tokens: every byte read, fp16 against INT4 g128 with the embedding and head in FP16
    P, D, V, KV = 6_979_588_096, 4096, 128256, 131072
    cache, head = 16 * 17 * KV, V * D * 2
    assert gains[0] == pytest.approx(((P + 16 * D) * 2 + head + cache) / (P * 4.125 / 8 + 16 * D * 2 + head + cache))
    assert 3.1 < gains[0] < 3.3 and gains[-1] < 2  # 3.2x, not 16 / 4.125 = 3.9x, and less once the cache matters


def test_crossover_explain_and_figure():
    text = widgets.explain_crossovers("Llama-3-8B", "H100-SXM", 64, 4000)
    # attention half way at P / (L x A) = 6,979,588,096 / (32 x 4096) = 53,250, past Llama-3-8B's 8,192 tokens
    assert "53,250 tokens, beyond the model's 8,192-token context" in text
    # the weight matmuls cross near the ridge at any context; 296 sequences of 4,000 tokens do not fit
    assert "compute-bound at batch 296" in text and "do not fit in memory" in text
    assert "attention over the cache stays memory-bound" in text
    assert text.startswith("at the ideal roofline")  # the explorer's figures are bounds, and say so
    # Mixtral's body crosses when its experts do: ridge x E / k = 206.1 x 8 / 2 = 824.5, so batch 825 on the H200
    assert "matmuls (the experts last) turn compute-bound at batch 825" in widgets.explain_crossovers("Mixtral-8x7B", "H200", 64, 1000)
    fig = plots.crossover_figure("Llama-3-8B", "H100")
    assert len(fig.axes) == 3
    assert max(line.get_xdata()[-1] for line in fig.axes[0].get_lines() if len(line.get_xdata()) > 2) <= 8192
    fig = plots.crossover_figure("Llama-3.1-8B", "H100")
    assert "ttft" in fig.axes[1].get_legend_handles_labels()[1][0].lower()
    box = widgets.crossover_explorer()
    assert [c.description for row in box.children[:2] for c in row.children] == ["model", "GPU", "answer", "context"]


def test_decode_explain_and_figure():
    """04's explorer: the body's weight matmuls turn compute-bound where 2 B P / peak = (P + B d) 2 / bandwidth, so
    B = ridge x P / (P - d x ridge): 295.3 x 6.9796e9 / (6.9796e9 - 4096 x 295.3) = 295.4, batch 296 (Llama-3-8B,
    H100, FP16; the 4,096 of d_model is the embedding row each sequence reads); attention's intensity is fixed
    (about 4 FLOP/B), below any ridge, so it never turns."""
    llama, h100 = rl.model("Llama-3-8B"), rl.hardware("H100")
    ridge = (h100.peak_flops("fp16") / h100.memory_bandwidth).m_as("FLOP/B")
    p = llama.active_non_embedding_params
    batch = math.ceil(ridge * p / (p - llama.d_model * ridge))
    text = widgets.explain_decode("Llama-3-8B", "H100-SXM", "fp16", 1000)
    assert batch == 296 and f"weight matmuls turn compute-bound from batch {batch}" in text
    assert "attention over the cache stays memory-bound at every batch" in text
    assert text.startswith("at the ideal roofline")
    assert widgets.explain_decode("Llama-3-8B", "H100", "fp16", 1000) == text  # the catalogue's alias, as elsewhere
    # Mixtral's experts on the H200: ridge x E / k = 206.1 x 4 = 824.5, batch 825, more 1,000-token caches than fit
    moe = widgets.explain_decode("Mixtral-8x7B", "H200", "fp16", 1000)
    assert "the experts (the last of its weight matmuls to turn) turn compute-bound from batch 825, more" in moe
    # Llama-3-70B's 141 GB of FP16 weights are more than an H100 holds
    assert "not even one sequence" in widgets.explain_decode("Llama-3-70B", "H100-SXM", "fp16", 1000)
    fig = plots.decode_figure("Mixtral-8x7B", "H200", contexts=(1000,))
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert "experts compute, context 1,000" in labels and "experts memory, context 1,000" in labels
    assert any(abs(line.get_xdata()[0] - 825) < 1e-9 for line in fig.axes[0].get_lines()
               if len(line.get_xdata()) == 2)  # the marked crossing
    box = widgets.decode_explorer()
    assert [c.description for row in box.children[:2] for c in row.children] == ["model", "GPU", "precision",
                                                                                   "context"]


def test_load_explain_and_frontier_figure():
    text = widgets.explain_load("Llama-3-8B", "H100-SXM", "fp16", 1, 2000, 300, 500, 50)
    # typical efficiency: the SLA's best batch of the 200 whose 2,300-token caches fit, at the example $3.95 an hour
    best = rl.best_under_sla("Llama-3-8B", "H100", 2000, 300, rl.Q_(500, "ms"), rl.Q_(50, "ms"), efficiency="typical")
    usd = 3.9492 / 3600 / best.output_throughput.m_as("token/s") * 1e6  # price per second / tokens per second
    assert f"best batch {best.batch} of the 200 that fit" in text and f"${usd:.3g} per million tokens" in text
    assert "memory-bound" in text and "J per token" in text
    # what stops it: batch 167 would miss the 50 ms ITL (the library's own step, one more sequence)
    more = rl.steady_state("Llama-3-8B", "H100", 2000, 300, best.batch + 1, efficiency="typical")
    assert best.batch < 200 and more.itl.m_as("ms") > 50
    stops = f"what stops the batch: the ITL target ({more.itl.m_as('ms'):.4g} ms > 50 ms) at batch {best.batch + 1}"
    assert stops in text
    # 2,000-token answers: 4,000 tokens of cache a sequence, so the cache space, not a target, caps the batch
    long = widgets.explain_load("Llama-3-8B", "H100-SXM", "fp16", 1, 2000, 2000, 500, 50)
    fits = rl.memory_budget("Llama-3-8B", "H100", 4000).max_batch
    assert f"best batch {fits} of the {fits} that fit" in long and "what stops the batch: cache space" in long
    assert widgets.explain_load("Llama-3-70B", "H100-SXM", "fp16", 1, 2000, 300, 500, 50).startswith(
        "Not possible: not one sequence fits")
    assert "fit on 2 GPUs" in widgets.explain_load("Llama-3-70B", "H100-SXM", "fp16", 2, 2000, 300, 1000, 80)
    assert widgets.explain_load("Llama-3-8B", "L4", "fp16", 1, 2000, 300, 50, 5).startswith("No batch meets")
    ax = plots.frontier_figure("Llama-3-8B", ["H100", "A100-80GB", "T4"], 2000, 300, rl.Q_(500, "ms"),
                               rl.Q_(50, "ms"))
    labels = ax.get_legend_handles_labels()[1]
    assert labels[:2] == ["H100-SXM", "A100-80GB"] and labels[2].startswith("T4: not one sequence fits")
    h100 = ax.get_lines()[0]
    assert len(h100.get_xdata()) == 200 and np.all(np.diff(h100.get_ydata()) > 0)  # memory ends the line
    stars = [line for line in ax.get_lines() if line.get_marker() == "*"]
    assert len(stars) == 2 and stars[0].get_ydata()[0] <= 50
    box = widgets.load_explorer()
    assert [c.description for row in box.children[:4] for c in row.children] == [
        "model", "GPU", "precision", "GPUs (tp)", "prompt", "answer", "TTFT ms", "ITL ms"]


def test_length_sliders_are_log_scaled():
    """A few dozen tokens and a few thousand are both a short drag away: neighbours differ by at most 1.5x."""
    box = widgets.serving_explorer()
    prompt = next(c for row in box.children[:2] for c in row.children if c.description == "prompt")
    lengths = list(prompt.options)
    assert lengths[0] == 16 and lengths[-1] == 8191  # Llama-3-8B's 8,192 tokens, less the first answer token
    assert 2000 in lengths and prompt.value == 2000
    assert [n for n in lengths if 20 <= n <= 60] == [20, 25, 30, 40, 50, 60]
    assert all(b / a <= 1.5 for a, b in zip(lengths, lengths[1:]))
    assert 25 <= len(lengths) <= 45  # about twelve a decade over 2.7 decades
    crossover = widgets.crossover_explorer()
    context = next(c for row in crossover.children[:2] for c in row.children if c.description == "context")
    assert context.options[0] == 0 and context.value == 0


def test_tail_explain_and_curves():
    """Prefill apart stalls the streams (p99 ITL at least a 2,000-token prefill once stalls pass 1% of gaps);
    chunked at 512 tokens keeps every gap far below it, and queues the prompts instead (TTFT p99 rises with load)."""
    prefill = rl.prefill("Llama-3-8B", "H100", 2000, efficiency="typical").time.m_as("ms")
    apart, chunked = widgets.tail_sweep("separate"), widgets.tail_sweep("chunked")
    rates = list(widgets._TAIL_RATES)
    assert apart["ITL p99"][rates.index(5)] >= prefill
    assert np.all(chunked["ITL p99"] < prefill / 2)
    assert np.all(apart["ITL p50"] <= apart["ITL p99"]) and np.all(chunked["TTFT p50"] <= chunked["TTFT p99"])
    assert chunked["TTFT p99"][-1] > 2 * chunked["TTFT p99"][0]
    text = widgets.explain_tail("chunked", 7)
    assert text.startswith("7 requests/s, prefill chunked") and "p99" in text and "pre-emptions" in text
    box = widgets.tail_explorer()
    assert [c.description for c in box.children[0].children] == ["prefill", "requests/s"]


def test_gap_histogram_marks_the_median_and_the_tail():
    """980 plain gaps of 10 ms and 20 stalls of 100 ms: the p50 is 10 ms and, since the 99th percentile of 1,000
    sorted values falls at index 989.01, among the stalls, the p99 is 100 ms; all 1,000 gaps are counted."""
    gaps = rl.Q_(np.r_[np.full(980, 10.0), np.full(20, 100.0)], "ms")
    ax = plots.gap_histogram(gaps, label="stalled")
    lines = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert [float(line.get_xdata()[0]) for line in lines] == pytest.approx([10.0, 100.0])
    heights = [patch.get_height() for patch in ax.patches]
    assert sum(heights) == 1000 and sorted(heights)[-2:] == [20, 980]
    assert ax.get_xscale() == "log" and "1,000 gaps" in ax.get_title()
    assert [t.get_text() for t in ax.get_legend().get_texts()][1:] == ["p50 10 ms", "p99 100 ms"]


def test_gap_histogram_takes_a_run_and_refuses_bad_gaps():
    from rooflab.simulate import engine, simulate

    run = simulate(engine("Llama-3-8B", "H100"), rate=rl.Q_(4, "1/s"), prompt_len=200, output_len=20, requests=30,
                   seed=0)
    ax = plots.gap_histogram(run)
    assert sum(p.get_height() for p in ax.patches) == 30 * 19  # 19 gaps in each 20-token answer
    with pytest.raises(ValueError, match="gaps"):
        plots.gap_histogram(rl.Q_(np.array([1.0, 2.0]), "GB"))
    with pytest.raises(ValueError, match="positive"):
        plots.gap_histogram(rl.Q_(np.array([0.0, 2.0]), "ms"))


def test_measured_figure_draws_the_students_points_and_both_roofs():
    import math

    import matplotlib.pyplot as plt

    tiny = rl.tiny_transformer.TINY
    laptop = rl.measure.device(flops=rl.Q_(100, "GFLOP/s"), bandwidth=rl.Q_(20, "GB/s"), name="laptop")
    fig = plots.measured_figure(tiny, laptop, [1, 4, 16], rl.Q_([10.0, 12.0, 30.0], "ms"), [1, 4],
                                rl.Q_([8.0, 10.0], "ms"))
    left, right = fig.axes
    lines = {line.get_label(): line for line in left.get_lines()}
    assert list(lines["your measured TTFT"].get_ydata()) == [10.0, 12.0, 30.0]
    # 1 token by hand: bytes 4 (P + d) + 4 x 2 L K + 4 d V at 20 GB/s; FLOPs 2 P + 2 L A + 2 d V at 100 GFLOP/s
    p, d, v = tiny.non_embedding_params, tiny.d_model, tiny.vocab
    nbytes = 4 * (p + d) + 4 * 2 * tiny.layers * tiny.kv_heads * tiny.head_dim + 4 * d * v
    flops = 2 * p + 2 * tiny.layers * tiny.attention_width + 2 * d * v
    assert math.isclose(lines["memory roof (bytes / bandwidth)"].get_ydata()[0], nbytes / 20e9 * 1e3, rel_tol=1e-9)
    assert math.isclose(lines["compute roof (FLOPs / peak)"].get_ydata()[0], flops / 100e9 * 1e3, rel_tol=1e-9)
    rates = {line.get_label(): line for line in right.get_lines()}
    assert list(rates["your measured batch / TPOT"].get_ydata()) == [125.0, 400.0]  # 1 / 8 ms, 4 / 10 ms
    plt.close(fig)
    with pytest.raises(ValueError, match="one time per prompt length"):
        plots.measured_figure(tiny, laptop, [1, 4], rl.Q_([1.0], "ms"), [1], rl.Q_([1.0], "ms"))
