"""The efficiency presets against the public measurements they are fitted on: prints, asserts nothing.

For each table (rooflab.calibration.tables): every row's measurement, the ideal roofline's figure and
its ratio to the measurement (ideal time / measured time, a throughput inverted: never above 1 for a
bound), and the fitted preset's figure and error.  Then both presets refitted (to show the shipped
values are the fit's), and the budget table: each preset's median and maximum |error| on each table
against issue 23's budget (10 % median, 25 % maximum).  A preset is judged on the tables of its own
vintage ("typical": 2024-2025 engines; "typical-2023": the 2023 static-batch table); its figures on the
other vintage's tables are printed for comparison.  Then the rows held out of every fit (Llama-2-70B in the
same TensorRT-LLM v0.12 table, data/held_out_at_load.csv) as an out-of-sample check, and, for each table still
over budget, the rows beyond 25 % and what the sources say about each (docs/decisions.md, "What stands between").
"""

import statistics
import time

import rooflab as rl
from rooflab import calibration

#: issue 23's budget for every preset on every table: median |error| at most 10 %, maximum at most 25 %.
MEDIAN_BUDGET, MAX_BUDGET = 0.10, 0.25
FITTED = ("typical", "typical-2023")

#: Why each row beyond the budget's 25 % stays there (the evidence is in docs/decisions.md), by
#: (model, device, precision, tp, prompt_len, output_len).
BEYOND = {
    ("Llama-3-70B", "A100-80GB", "fp16", 2, 2048, 2048):
        "2.4x slower than Llama-2-70B's row of the same table and configuration (212.97 tok/s: same cache bytes "
        "a token, 2% fewer weights), which the preset predicts within 15% (held-out table): whatever held this "
        "engine back (its batch, an activation reserve, a fallback to a smaller cache fraction after an "
        "out-of-memory error) is not published, and the H100 column has no figure for this row at all.",
    ("Llama-3-70B", "H100-SXM", "fp8", 4, 128, 4096):
        "20% slower than Llama-2-70B's row of the same table and configuration (7,564.99 tok/s, same cache "
        "bytes a token; not predicted: past Llama-2's 4,096-token context).  The held-out Llama-2-70B rows at "
        "tp 4 lean the same way (128/2048 over, 128/128 and 2048/128 under by about a quarter): at tp 4 the "
        "long decodes run slower and the prefills faster than the model says.  Neither a ring all-reduce whose "
        "latency grows with the GPUs nor a separate attention efficiency removed it (docs/decisions.md).",
    ("Llama-2-13B", "H200", "fp8", 1, 128, 2048):
        "NVIDIA's H200 blog figure (2023-11), marked preliminary by NVIDIA; the table's other 128/2048 rows "
        "(Llama-2-7B on an H100, an L40S and an A100, the same engine) are within 7%.",
}


def rows_table(preset: str) -> None:
    """Each row of the preset's tables: measured, ideal, ideal / measured, the preset's figure and error."""
    e = rl.efficiency(preset)
    print(f"\n== {e.describe(detail=True)}\n")
    print(f"{'model':13} {'device':9} {'precision':17} {'tp':>2} {'batch':>5} {'in/out':>11} {'measured':>16} "
          f"{'ideal':>9} {'ideal/meas':>10} {preset:>9} {'error':>7}")
    groups = dict(calibration.tables(preset))
    if preset == "typical":
        groups["held out (not fitted): Llama-2-70B, same v0.12 table"] = held_out()
    for table, rows in groups.items():
        print(f"-- {table}")
        for row in rows:
            ideal, guess = calibration.predicted(row, "ideal"), calibration.predicted(row, e)
            batch = getattr(row, "batch", None) or getattr(row, "concurrency", None) or calibration.load_batch(row)
            what = "TTFT" if row.metric == "ttft" else "tok/s"
            print(f"{row.model:13} {row.device:9} {row.precision:17} {getattr(row, 'tp', 1):2} {batch:5} "
                  f"{row.prompt_len:>5}/{row.output_len:<5} {row.value:>10,.4g} {what:5} {ideal:9,.4g} "
                  f"{calibration.ideal_ratio(row) if hasattr(row, 'batch') else row.value / ideal:10.2f} "
                  f"{guess:9,.4g} {guess / row.value - 1:+7.0%}")


def held_out() -> tuple:
    """The rows of data/held_out_at_load.csv (never fitted)."""
    return calibration.load_measurements(calibration.HELD_OUT)


def budget_table() -> None:
    """Median and maximum |error| per table and per preset, against the budget (printed, not asserted)."""
    print(f"\nbudget: median |error| <= {MEDIAN_BUDGET:.0%}, max <= {MAX_BUDGET:.0%} on each table of the preset's "
          f"own vintage (the others for comparison)")
    print(f"{'preset':13} {'table':28} {'rows':>4} {'median':>7} {'max':>7}  verdict")
    tables = {name: calibration.tables(name) for name in FITTED}
    for preset in ("ideal", *FITTED):
        for owner, groups in tables.items():
            for table, rows in groups.items():
                errors = [abs(calibration.error(row, preset)) for row in rows]
                median, worst = statistics.median(errors), max(errors)
                if preset == "ideal":
                    verdict = "(the bound: not fitted)"
                elif preset != owner:
                    verdict = "(other vintage)"
                elif median <= MEDIAN_BUDGET and worst <= MAX_BUDGET:
                    verdict = "within"
                else:
                    over = sum(e > MAX_BUDGET for e in errors)
                    verdict = f"OVER budget ({over} row{'s' * (over != 1)} beyond {MAX_BUDGET:.0%})"
                print(f"{preset:13} {table:28} {len(errors):4} {median:7.1%} {worst:7.0%}  {verdict}")
    errors = [abs(calibration.error(row, "typical")) for row in held_out()]
    print(f"{'typical':13} {'held out (Llama-2-70B)':28} {len(errors):4} {statistics.median(errors):7.1%} "
          f"{max(errors):7.0%}  (out of sample: not fitted, not judged)")


def beyond_budget() -> None:
    """Each row of a preset's own tables beyond the 25 % budget, with what the sources say about it."""
    print(f"\nwhat stands between the presets and the budget: rows beyond {MAX_BUDGET:.0%} on their own vintage")
    for preset in FITTED:
        for table, rows in calibration.tables(preset).items():
            for row in rows:
                e = calibration.error(row, preset)
                if abs(e) <= MAX_BUDGET:
                    continue
                key = (row.model, row.device, row.precision, getattr(row, "tp", 1), row.prompt_len, row.output_len)
                why = BEYOND.get(key, "no explanation recorded: see docs/decisions.md")
                print(f"- {preset}, {table}: {' '.join(map(str, key))}: {e:+.0%}.\n    {why}")


def main() -> None:
    for preset in FITTED:
        rows_table(preset)
    print()
    for preset in FITTED:
        start = time.perf_counter()
        fitted = calibration.calibrate(preset)
        shipped = rl.efficiency(preset)
        same = fitted == shipped
        factors = fitted.describe(detail=True).split(". Fitted")[0]
        print(f"refit of {preset} ({time.perf_counter() - start:.1f} s): {factors}"
              f"\n  {'equals' if same else 'DIFFERS FROM'} the shipped preset")
    budget_table()
    beyond_budget()


if __name__ == "__main__":
    main()
