"""The service under load (rooflab.fleet): speed against its budget, and the steady state against public
throughput measured under load.  Prints, asserts nothing.

Speed budget: a 1,000-point sweep over the batch in under 20 ms (issue #15); one steady state in tens of
microseconds.  Then, for each row of rooflab/data/throughput_at_load.csv (TensorRT-LLM's in-flight batching at
maximum load, total output token/s of the group): the library's ideal and typical steady state at the row's
concurrency, or at the most sequences that fit when the source does not publish it.  The ideal must never be
below the measurement (a bound); typical's median error is the figure to watch.
"""

import statistics
import timeit

import numpy as np

import rooflab as rl
from rooflab import calibration


def best(stmt, number, repeat=7, **names):
    return min(timeit.repeat(stmt, globals={"rl": rl, "np": np, **names}, number=number, repeat=repeat)) / number


def speed() -> None:
    batches = np.arange(1, 1001)
    sweep = best('rl.steady_state("Llama-3-8B", "H100", 200, 300, batches, precision="fp8")', 20, batches=batches)
    chunked = best('rl.steady_state("Llama-3-8B", "H100", 200, 300, batches, precision="fp8", prefill="chunked")',
                   20, batches=batches)
    tp = best('rl.steady_state("Llama-3-70B", "H100", 200, 300, batches, precision="fp8", tp=4)', 20, batches=batches)
    point = best('rl.steady_state("Llama-3-8B", "H100", 2000, 300, 64)', 500)
    sla = best('rl.best_under_sla("Llama-3-8B", "H100", 2000, 300, ttft_limit=rl.Q_(500, "ms"), '
               'itl_limit=rl.Q_(50, "ms"))', 50)
    print("speed (best of 7)")
    print(f"  1,000-batch sweep, prefill apart:   {sweep * 1e3:6.2f} ms  (budget 20 ms: {sweep / 20e-3:.1%} of it)")
    print(f"  1,000-batch sweep, chunked prefill: {chunked * 1e3:6.2f} ms")
    print(f"  1,000-batch sweep, tp=4:            {tp * 1e3:6.2f} ms")
    print(f"  one steady state:                   {point * 1e6:6.1f} us")
    print(f"  best batch under an SLA (230 pts):  {sla * 1e3:6.2f} ms")


def calibration_table() -> None:
    rows = calibration.load_measurements()
    print(f"\n{len(rows)} throughput-under-load measurements from {len({r.source_url for r in rows})} sources "
          f"(total output token/s of tp GPUs; concurrency: the most that fits where unpublished)\n")
    print(f"{'model':13} {'device':9} {'prec':4} {'tp':>2} {'in/out':>11} {'batch':>5} {'measured':>9} "
          f"{'ideal':>9} {'ideal/meas':>10} {'typical':>9} {'error':>6} {'chunked':>7}")
    ratios, errors, chunked_errors = [], [], []
    for row in rows:
        ideal = calibration.predict_load(row, "ideal")
        typical = calibration.predict_load(row, "typical")
        chunked = calibration.predict_load(row, "typical", "chunked")
        ratios.append(ideal / row.value)
        errors.append(typical / row.value - 1)
        chunked_errors.append(chunked / row.value - 1)
        print(f"{row.model:13} {row.device:9} {row.precision:4} {row.tp:2} {row.prompt_len:>5}/{row.output_len:<5} "
              f"{calibration.load_batch(row):5} {row.value:9,.0f} {ideal:9,.0f} {ideal / row.value:10.2f} "
              f"{typical:9,.0f} {errors[-1]:+6.0%} {chunked_errors[-1]:+7.0%}")
    absolute = [abs(e) for e in errors]
    print(f"\nideal / measured: min {min(ratios):.2f} (must be >= 1: {'yes' if min(ratios) >= 1 else 'NO'}), "
          f"median {statistics.median(ratios):.2f}")
    print(f"typical, prefill apart: median |error| {statistics.median(absolute):.1%}, "
          f"{sum(a <= 0.25 for a in absolute)}/{len(rows)} within 25 %, worst {max(errors, key=abs):+.0%}")
    print(f"typical, chunked prefill: median |error| {statistics.median(abs(e) for e in chunked_errors):.1%}")
    for label, subset in (("tp = 1", [i for i, r in enumerate(rows) if r.tp == 1]),
                          ("tp > 1", [i for i, r in enumerate(rows) if r.tp > 1])):
        print(f"  {label}: {len(subset)} rows, median |error| {statistics.median(absolute[i] for i in subset):.1%}")


def main() -> None:
    speed()
    calibration_table()


if __name__ == "__main__":
    main()
