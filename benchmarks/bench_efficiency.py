"""The efficiency presets against the public measurements they are fitted on: prints, asserts nothing.

For each table (rooflab.calibration.tables): every row's measurement, the ideal roofline's figure and
its ratio to the measurement (ideal time / measured time, a throughput inverted: never above 1 for a
bound), and the fitted preset's figure and error.  Then both presets refitted (to show the shipped
values are the fit's), and the budget table: each preset's median and maximum |error| on each table
against issue 23's budget (10 % median, 25 % maximum).  A preset is judged on the tables of its own
vintage ("typical": 2024-2025 engines; "typical-2023": the 2023 static-batch table); its figures on the
other vintage's tables are printed for comparison.
"""

import statistics
import time

import rooflab as rl
from rooflab import calibration

#: issue 23's budget for every preset on every table: median |error| at most 10 %, maximum at most 25 %.
MEDIAN_BUDGET, MAX_BUDGET = 0.10, 0.25
FITTED = ("typical", "typical-2023")


def rows_table(preset: str) -> None:
    """Each row of the preset's tables: measured, ideal, ideal / measured, the preset's figure and error."""
    e = rl.efficiency(preset)
    print(f"\n== {e.describe()}\n")
    print(f"{'model':13} {'device':9} {'precision':17} {'tp':>2} {'batch':>5} {'in/out':>11} {'measured':>16} "
          f"{'ideal':>9} {'ideal/meas':>10} {preset:>9} {'error':>7}")
    for table, rows in calibration.tables(preset).items():
        print(f"-- {table}")
        for row in rows:
            ideal, guess = calibration.predicted(row, "ideal"), calibration.predicted(row, e)
            batch = getattr(row, "batch", None) or getattr(row, "concurrency", None) or calibration.load_batch(row)
            what = "TTFT" if row.metric == "ttft" else "tok/s"
            print(f"{row.model:13} {row.device:9} {row.precision:17} {getattr(row, 'tp', 1):2} {batch:5} "
                  f"{row.prompt_len:>5}/{row.output_len:<5} {row.value:>10,.4g} {what:5} {ideal:9,.4g} "
                  f"{calibration.ideal_ratio(row) if hasattr(row, 'batch') else row.value / ideal:10.2f} "
                  f"{guess:9,.4g} {guess / row.value - 1:+7.0%}")


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


def main() -> None:
    for preset in FITTED:
        rows_table(preset)
    print()
    for preset in FITTED:
        start = time.perf_counter()
        fitted = calibration.calibrate(preset)
        shipped = rl.efficiency(preset)
        same = fitted == shipped
        print(f"refit of {preset} ({time.perf_counter() - start:.1f} s): {fitted.describe().split('. Fitted')[0]}"
              f"\n  {'equals' if same else 'DIFFERS FROM'} the shipped preset")
    budget_table()


if __name__ == "__main__":
    main()
