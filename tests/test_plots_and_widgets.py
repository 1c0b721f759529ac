"""Figures and explorers: they draw what they claim, and say so when a configuration is impossible."""

import matplotlib

matplotlib.use("Agg")


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
    # prefill right of the ridge at the compute roof; decode left of it at bandwidth x intensity
    assert px > 295 and abs(py - 989.4) < 1e-6
    assert dx < 295 and abs(dy - 3.35 * dx) < 1e-6


def test_phase_bars_show_each_request():
    llama, h100 = rl.model("Llama-3-8B"), rl.hardware("H100")
    ax = plots.phase_bars({"chat": rl.request(llama, h100, 50, 500), "summary": rl.request(llama, h100, 4000, 100)})
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["chat", "summary"]


def test_explain_covers_fits_does_not_fit_and_missing_precision():
    text, costs = widgets.explain("Llama-3-8B", "H100-SXM", "fp16", 2000, 300, 1)
    assert "TTFT 29.3 ms (compute-bound)" in text and "ITL 4.56 ms (memory-bound)" in text and set(costs) == {"prefill", "decode step"}
    text, costs = widgets.explain("Llama-3-8B", "T4", "fp16", 2000, 300, 1)
    assert text.startswith("Does not fit") and "16 GB" in text and costs == {}
    text, costs = widgets.explain("Llama-3-8B", "A100-80GB", "fp8", 2000, 300, 1)
    assert "has no fp8 compute rate" in text and costs == {}


def test_explorer_builds_its_controls():
    box = widgets.serving_explorer()
    descriptions = [c.description for row in box.children[:2] for c in row.children]
    assert descriptions == ["GPU", "precision", "prompt", "answer", "batch"]


def test_memory_explain_and_figure():
    # 2,000-token contexts of Llama-3-8B on 80 GB: (80e9 - 16.06e9) / (2000 x 131072) = 243 sequences
    text = widgets.explain_memory("Llama-3-8B", "H100-SXM", 2000, 64, "fp16")
    assert "fits (largest batch 243)" in text and "KV 16.8 GB" in text
    assert "DOES NOT FIT" in widgets.explain_memory("Llama-3-8B", "H100-SXM", 2000, 300, "fp16")
    assert "fits (largest batch 487)" in widgets.explain_memory("Llama-3-8B", "H100-SXM", 2000, 300, "fp8")
    ax = plots.memory_figure("Llama-3-8B", "H100", 2000, 300)
    assert "largest batch that fits is 243" in ax.get_title()
    box = widgets.memory_explorer()
    assert [c.description for row in box.children[:2] for c in row.children] == ["GPU", "KV cache", "context", "batch"]


def test_batching_figure_falls_short_of_the_ideal_at_long_context():
    ax = plots.batching_figure("Llama-3-8B", "H100", contexts=(2000,), max_batch_shown=64)
    ideal, curve = ax.get_lines()
    assert curve.get_ydata()[-1] < 0.55 * ideal.get_ydata()[-1]  # about 32x at batch 64, not 64x


def test_quantization_figure_shows_decode_gains_below_the_byte_ratio():
    ax = plots.quantization_figure("Llama-3-8B", "H100")
    decode_int4 = next(line for line in ax.get_lines() if line.get_label() == "decode, INT4, batch 16")
    gains = decode_int4.get_ydata()
    assert gains[0] > 3.8 and gains[-1] < 1.5  # near 16 / 4.125 at short context, far below it at 32k


def test_crossover_explain_and_figure():
    text = widgets.explain_crossovers("Llama-3-8B", "H100-SXM", 64, 4000)
    assert "53,250 tokens" in text and "at no batch" in text
    # attention half way at P / (L x A) = 6,979,588,096 / (32 x 4096) = 53,250
    fig = plots.crossover_figure("Llama-3-8B", "H100")
    assert len(fig.axes) == 3
    box = widgets.crossover_explorer()
    assert [c.description for row in box.children[:2] for c in row.children] == ["model", "GPU", "answer", "context"]
