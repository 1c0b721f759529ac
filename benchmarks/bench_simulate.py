"""rooflab.simulate: its speed (10,000 requests, budget 1 s on one core) and its error against published serving
benchmarks (data/serving_benchmarks.csv).  Prints, asserts nothing.  Timings are noisy on a shared machine: the
best of three runs is shown."""

import statistics
import time

import rooflab as rl
from rooflab.simulate import against_benchmark, engine, published_benchmarks, simulate

BUDGET_S = 1.0


def speed() -> None:
    fixed = dict(prompt_len=2000, output_len=300)
    mixed = dict(prompt_len={500: 2, 2000: 2, 4000: 1}, output_len=[100, 300])
    cases = [("2000/300, apart", engine("Llama-3-8B", "H100"), fixed),
             ("2000/300, chunked", engine("Llama-3-8B", "H100", prefill="chunked"), fixed),
             ("mixed, apart", engine("Llama-3-8B", "H100"), mixed),
             ("mixed, chunked", engine("Llama-3-8B", "H100", prefill="chunked"), mixed),
             ("mixed, small pool", engine("Llama-3-8B", "H100", prefill="chunked", kv_blocks=4000), mixed)]
    print("10,000 requests, Llama-3-8B on an H100, Poisson 7/s; 2000/300 tokens, or prompts {500, 2000, 4000} "
          "and answers {100, 300}:")
    for name, e, lengths in cases:
        simulate(e, rate=rl.Q_(7, "1/s"), prompt_len=100, output_len=10, requests=10)  # prices tabled once
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            run = simulate(e, rate=rl.Q_(7, "1/s"), requests=10_000, seed=1, **lengths)
            best = min(best, time.perf_counter() - start)
        print(f"  {name:22} {best:6.2f} s  ({best / BUDGET_S:.2f} x the {BUDGET_S:.0f} s budget; {run.passes:,} passes, "
              f"{run.preemptions:,} pre-emptions)")


def accuracy() -> None:
    rows = published_benchmarks()
    print(f"\n{len(rows)} published rows from {len({r.source_url for r in rows})} source(s); simulated at 'typical':")
    print(f"{'engine':16} {'model':12} {'device':6} {'in/out':>8} {'load':>14} {'metric':9} {'measured':>9} "
          f"{'simulated':>9} {'error':>7}")
    errors: dict[str, list[float]] = {}
    for row in rows:
        for metric, (sim, meas) in against_benchmark(row).items():
            error = sim / meas - 1
            errors.setdefault(metric.split("_")[0], []).append(abs(error))
            load = f"{row.load:g} {'req/s' if row.load_kind == 'rate' else 'in flight'}"
            print(f"{row.engine + ' ' + row.version:16} {row.catalogue_model:12} {row.device:6} "
                  f"{row.prompt_len:>4}/{row.output_len:<3} {load:>14} {metric:9} {meas:9.1f} {sim:9.1f} "
                  f"{error:+7.0%}")
    everything = [e for values in errors.values() for e in values]
    print(f"\nmedian |error|: all {statistics.median(everything):.0%}, "
          + ", ".join(f"{kind} {statistics.median(values):.0%}" for kind, values in errors.items()))


if __name__ == "__main__":
    speed()
    accuracy()
