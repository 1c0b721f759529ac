"""Efficiency presets and their calibration on the shipped table of public measurements."""

import math

import pytest

import rooflab as rl
from rooflab import calibration

ROWS = calibration.measurements()


def test_presets():
    ideal = rl.efficiency("ideal")
    assert (ideal.mfu, ideal.mbu, ideal.overhead.m_as("ms")) == (1.0, 1.0, 0.0)
    typical = rl.efficiency("typical")
    assert 0.3 <= typical.mfu <= 0.8 and 0.5 <= typical.mbu <= 0.95 and 0 < typical.overhead.m_as("ms") < 10
    assert rl.efficiency(typical) is typical and rl.efficiency("Typical") is typical
    with pytest.raises(KeyError, match="Did you mean.*typical"):
        rl.efficiency("typcial")
    with pytest.raises(ValueError, match=r"mbu must be in \(0, 1\]"):
        rl.Efficiency("mine", 0.5, 1.5)


def test_the_table_has_at_least_15_sourced_measurements():
    assert len(ROWS) >= 15
    assert len({row.source_url for row in ROWS}) >= 3
    for row in ROWS:
        assert row.source_url.startswith("https://github.com/") and row.source_title and row.source_date
        assert row.metric in ("ttft", "output_throughput") and row.value > 0
        # each configuration fits in what a process can allocate on its device (a static-batch engine takes
        # what the batch needs, not vLLM's 90%) and stays within the model's context
        m = rl.model(row.model)
        assert row.prompt_len + row.output_len - 1 <= m.max_context, row
        assert rl.memory_budget(row.model, row.device, row.prompt_len + row.output_len - 1, row.batch,
                                row.precision, gpu_memory_utilization=1.0).fits, row


def test_the_ideal_is_a_bound_no_measurement_beats():
    ratios = [calibration.ideal_ratio(row) for row in ROWS]
    assert max(ratios) <= 1
    # and not a loose one: the best engines reach most of it
    assert max(ratios) > 0.7


def test_prediction_of_one_row_by_hand():
    # gpt-fast, Llama-2-7B bf16 on an A100-80GB, batch 1, 5-token prompt, 100 tokens: tokens/s = 100 / e2e
    row = next(r for r in ROWS if r.model == "Llama-2-7B" and r.precision == "bf16")
    P, D, V, KV, BW, PEAK = 6_476_271_616, 4096, 32000, 2 * 32 * 4096 * 2, 2.039e12, 312e12
    assert rl.model("Llama-2-7B").non_embedding_params == P
    ttft = max(2 * P * 5 / PEAK, (P + 5 * D) * 2 / BW) + max(2 * 32 * 4096 * 25 / PEAK, 5 * KV / BW) + V * D * 2 / BW
    steps = sum((P + D) * 2 / BW + (c + 1) * KV / BW + V * D * 2 / BW for c in range(5, 104))
    assert calibration.predict(row) == pytest.approx(100 / (ttft + steps))
    assert calibration.ideal_ratio(row) == pytest.approx(row.value / (100 / (ttft + steps)))


def test_calibration_reproduces_the_typical_preset():
    fitted = calibration.calibrate()
    typical = rl.efficiency("typical")
    assert fitted.mfu == pytest.approx(typical.mfu, abs=0.011)
    assert fitted.mbu == pytest.approx(typical.mbu, abs=0.011)
    assert fitted.overhead.m_as("ms") == pytest.approx(typical.overhead.m_as("ms"), abs=0.02)
    # the goal: a median absolute error under 25 %; and the fit is better than the ideal
    assert calibration.median_error(ROWS, typical) < 0.25
    assert calibration.median_error(ROWS, typical) < calibration.median_error(ROWS, "ideal")


def test_a_row_with_a_bad_unit_is_refused():
    with pytest.raises(ValueError, match="metric 'ttft' must be in ms"):
        calibration.Measurement("Llama-2-7B", "H100", "fp16", 1, 128, 1, "ttft", 7.0, "s", "x", "t",
                                "https://github.com/x", "2023")
    assert math.isfinite(calibration.median_error(ROWS[:3], "ideal"))
