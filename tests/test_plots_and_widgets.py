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
