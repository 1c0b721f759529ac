"""Library speed against its budgets (docs/design.md, "Performance budgets"): prints figures, asserts nothing.

Budgets on a 2-core machine: import <= 0.5 s, one request (quantities in and
out) <= 25 us, a 10,000-point prompt-length sweep <= 10 ms.  The per-operation
model prices three operations per pass, still vectorised.
"""

import statistics
import subprocess
import sys
import timeit



def best(stmt, setup, number, repeat=7):
    return min(timeit.repeat(stmt, setup, number=number, repeat=repeat)) / number


def main() -> None:
    runs = []
    for _ in range(5):
        out = subprocess.run(
            [sys.executable, "-c", "import time; t = time.perf_counter(); import rooflab; print(time.perf_counter() - t)"],
            capture_output=True, text=True, check=True,
        )
        runs.append(float(out.stdout))
    imported = statistics.median(runs)
    heavy = subprocess.run(
        [sys.executable, "-c", "import sys, rooflab; print(any(m in sys.modules for m in ('matplotlib', 'ipywidgets')))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()

    setup = ("import rooflab as rl; from rooflab import Q_; m = rl.model('Llama-3-8B'); h = rl.hardware('H100');"
             "long = rl.model('Llama-3.1-8B'); o = Q_(0.5, 'ms'); import numpy as np;"
             "n = np.linspace(128, 32768, 10_000).round().astype(int); b = np.arange(1, 10_001)")
    one = best("rl.request(m, h, 2000, 300, overhead=o).e2e", setup, 2000)
    bare = best("rl.request(m, h, 2000, 300)", setup, 2000)
    typical = best("rl.request(m, h, 2000, 300, efficiency='typical')", setup, 2000)
    step = best("rl.decode_step(m, h, 2000, batch=64).time_si", setup, 2000)
    sweep = best("rl.request(long, h, n, 256).ttft", setup, 20)
    batches = best("rl.decode_step(m, h, 300, batch=b, allow_overflow=True).time", setup, 20)

    rows = [
        ("import rooflab", imported, 0.5, "s"),
        ("one request, quantity in and out", one, 25e-6, "s"),
        ("one request, ints in, no field read", bare, 25e-6, "s"),
        ("one request, typical preset", typical, 25e-6, "s"),
        ("one decode step, three parts, float time", step, 25e-6, "s"),
        ("10,000-point prompt sweep (request)", sweep, 10e-3, "s"),
        ("10,000-point batch sweep (decode_step)", batches, 10e-3, "s"),
    ]
    print(f"{'what':40} {'measured':>12} {'budget':>12} {'ratio':>7}")
    for what, value, budget, _ in rows:
        print(f"{what:40} {value * 1e6:10.1f}us {budget * 1e6:10.0f}us {value / budget:7.2f}")
    print(f"matplotlib or ipywidgets imported by 'import rooflab': {heavy}")

    try:
        import mlsysim  # an optional point of comparison, never a dependency
    except ImportError:
        print("mlsysim is not installed: no comparison run (pip install mlsysim to add one)")
        return
    theirs_setup = ("import mlsysim; from mlsysim.solvers import ServingModel; s = ServingModel();"
                    "m = mlsysim.Models.Language.Llama3_8B; h = mlsysim.Hardware.Cloud.H100")
    theirs = best("s.solve(m, h, seq_len=2000, batch_size=1)", theirs_setup, 200)
    print(f"mlsysim ServingModel().solve(Llama3_8B, H100, seq_len=2000): {theirs * 1e6:.0f}us, "
          f"{theirs / one:.1f}x rooflab's request with quantities")
    from mlsysim.solvers import ServingModel
    import rooflab as rl
    r = ServingModel().solve(mlsysim.Models.Language.Llama3_8B, mlsysim.Hardware.Cloud.H100, seq_len=2000, batch_size=1)
    ours = rl.request("Llama-3-8B", "H100", 2000, 2, mfu=0.5, mbu=0.5, overhead=rl.Q_(0, "ms"))
    print(f"  their TTFT {r.ttft:.1f~P}, ITL {r.itl:.2f~P} (default efficiency 0.5); rooflab at MFU = MBU = 0.5: "
          f"TTFT {ours.ttft:.1f~P}, ITL {ours.itl:.2f~P}")


if __name__ == "__main__":
    main()
