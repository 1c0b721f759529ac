"""Why a numpy forward pass is slower than the roofline: the gap, taken apart by timing its pieces alone.

The roofline prices a pass of the course's :class:`~rooflab.tiny_transformer.TinyTransformer` as its weight
matrix products (body and head) and its attention, each at the calibrated peak or bandwidth.  A measured pass
is slower.  :func:`explain_gap` times the pass again, and in turns with it, on the model's own weights and at
the pass's shapes, the pieces a pass is made of, each alone (the best of a few rounds: in turns, so that the
pass and its pieces see the same load on a shared machine):

* **matrix products**: every weight product of the pass (seven per layer and the head) with the activations'
  shape; their time minus the roofline's body and head is what BLAS loses against the calibrated rates (a
  one-row product streams the weights more slowly than the calibration's large stream);
* **attention**: the score and weighted-value products and the writes into the KV cache, minus the roofline's
  attention;
* **element-wise passes**: the RMSNorms, rotary positions, the causal softmax, SwiGLU and the residual adds,
  which the roofline does not count at all.

On a shared machine a fourth part is often the largest: the time the pass waited while other programs had the
core.  So every round is timed twice, by the wall clock and by the thread's CPU clock (``time.thread_time``,
which stops while the thread waits); the waiting is the pass's wall time less its CPU time, and the pieces are
compared in CPU time.  A calibration taken under the same load waited too, so its roofline is slower than the
machine, and the products' line can come out negative.

What the parts leave of the gap is printed as unexplained (the Python loop, reshapes, the embedding look-up, and
the pieces running slower together than alone, when they evict each other from the caches).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pint

from .hardware import Hardware, hardware as _hardware
from .measure import PRECISION
from .serving import decode_step, prefill
from .units import quantity
from .validation import lengths

__all__ = ["Gap", "explain_gap"]


@dataclass(frozen=True)
class Gap:
    """The gap between one measured pass and its roofline, in pieces; ``*_si`` in s."""

    phase: str  # "prefill" or "decode"
    point: int  # the prompt length (prefill) or the batch (decode)
    measured_si: float  # the pass, timed in turns with its pieces (wall clock: its best round)
    roofline_si: float  # the roofline's time of the same pass
    waiting_si: float  # of measured_si, the time the pass waited for the core (wall less CPU time, same round)
    products_si: float  # the weight matrix products, timed alone (CPU time, like the two below)
    products_roofline_si: float  # the roofline's body + head
    attention_si: float  # score and value products and the cache writes, timed alone
    attention_roofline_si: float  # the roofline's attention
    elementwise_si: float  # norms, rotary positions, softmax, SwiGLU, residual adds, timed alone
    yours_si: float | None = None  # the same pass as the caller measured it earlier, if given

    @property
    def gap_si(self) -> float:
        """measured - roofline, s."""
        return self.measured_si - self.roofline_si

    @property
    def parts_si(self) -> dict[str, float]:
        """The explained parts of the gap, s: products and attention beyond their roofline, element-wise passes."""
        return {"waiting for the core (other programs ran)": self.waiting_si,
                "matrix products below the calibrated rates": self.products_si - self.products_roofline_si,
                "attention and cache writes beyond the roofline": self.attention_si - self.attention_roofline_si,
                "element-wise passes (not counted by the roofline)": self.elementwise_si}

    @property
    def unexplained_si(self) -> float:
        """The gap less its explained parts, s (negative when the pieces alone took longer than the pass)."""
        return self.gap_si - sum(self.parts_si.values())

    @property
    def gap(self) -> pint.Quantity:
        """measured - roofline, ms."""
        return quantity(self.gap_si, "time").to("ms")

    def table(self) -> str:
        """The decomposition as text: each part in ms and as a share of the gap, then what is left."""
        what = f"prefill of {self.point} tokens" if self.phase == "prefill" else f"decode step at batch {self.point}"
        yours = "" if self.yours_si is None else f"yours {self.yours_si * 1e3:.2f} ms; "
        # The gap is taken from the re-timing, not from the student's figure: the pieces are timed in turns with
        # it, under the same load, and only then do their shares add up.
        rows = [f"{what}: {yours}timed again with its pieces {self.measured_si * 1e3:.2f} ms, roofline "
                f"{self.roofline_si * 1e3:.2f} ms, gap {self.gap_si * 1e3:.2f} ms (from the time taken again)"]
        if self.gap_si <= 0:
            return rows[0] + " (at or below the roofline: part of the weights came from a cache)"
        for name, seconds in list(self.parts_si.items()) + [("unexplained", self.unexplained_si)]:
            rows.append(f"  {name:<52} {seconds * 1e3:>8.2f} ms {seconds / self.gap_si:>6.0%}")
        speed = self.products_roofline_si / self.products_si
        rows.append(f"  (in CPU time the weight products alone ran at {speed:.0%} of their roofline's speed: their "
                    "roofline time, at whichever calibrated roof binds them, over their time)")
        return "\n".join(rows)


def _pieces(net, batch: int, n: int, start: int):
    """Three callables running, for every layer, the pass's weight products, its attention, its element-wise work
    on (batch, n) new tokens after ``start`` cached ones, with the model's own weights and random activations."""
    s = net.spec
    rng = np.random.default_rng(0)
    rows, total, group = batch * n, start + n, s.heads // s.kv_heads

    def data(*shape):
        return rng.standard_normal(shape, dtype=np.float32)

    x, flat, mixed, hidden, last = (data(batch, n, s.d_model), data(rows, s.d_model), data(rows, s.attention_width),
                                    data(rows, s.mlp_dim), data(batch, s.d_model))
    gate, up = data(rows, s.mlp_dim), data(rows, s.mlp_dim)
    q, new_k, new_v = data(batch, s.kv_heads, group, n, s.head_dim), data(batch, s.kv_heads, n, s.head_dim), \
        data(batch, s.kv_heads, n, s.head_dim)
    keys, values = data(batch, s.kv_heads, total, s.head_dim), data(batch, s.kv_heads, total, s.head_dim)
    q_heads, k_heads = data(batch, s.heads, n, s.head_dim), data(batch, s.kv_heads, n, s.head_dim)
    scores = data(batch, s.kv_heads, group, n, total)
    positions = np.arange(start, start + n)
    causal = np.arange(total)[None, :] > positions[:, None]
    scale = np.float32(np.sqrt(s.head_dim))

    def products():
        for layer in net.layers:
            for w in (layer["wq"], layer["wk"], layer["wv"], layer["w_gate"], layer["w_up"]):
                flat @ w
            mixed @ layer["wo"]
            hidden @ layer["w_down"]
        last @ net.head

    def attention():
        for _ in net.layers:
            keys[:, :, start:total] = new_k
            values[:, :, start:total] = new_v
            (q @ keys[:, :, None].transpose(0, 1, 2, 4, 3)) / scale @ values[:, :, None]

    def elementwise():
        for layer in net.layers:
            y = x + net._rms_norm(x, layer["attn_norm"])
            net._rope(q_heads, positions), net._rope(k_heads, positions)
            weights = np.where(causal, np.float32(-np.inf), scores)
            weights = np.exp(weights - weights.max(axis=-1, keepdims=True))
            weights /= weights.sum(axis=-1, keepdims=True)
            y + net._rms_norm(y, layer["mlp_norm"])
            gate / (1.0 + np.exp(-gate)) * up
        net._rms_norm(x, net.final_norm)

    return products, attention, elementwise


def explain_gap(net, device: Hardware | str, phase: str, point: int, measured: pint.Quantity | None = None,
                context_len: int = 12, repeats: int = 3) -> Gap:
    """Time one pass and its pieces in turns and take apart the pass's gap to its roofline (see the module).

    ``phase`` "prefill": one prompt of ``point`` tokens; "decode": one step of ``point`` sequences at
    ``context_len`` cached tokens (12: the mean of the course's decode profile).  ``repeats`` + 1 rounds, each
    timing the pass, then each piece once; the first round is a warm-up, each figure the best of the others.
    ``measured`` (a time: one's own earlier measurement of the same pass) is only printed beside them.  The
    roofline is ``rooflab.prefill`` or ``rooflab.decode_step`` in fp32.
    """
    spec = getattr(net, "spec", None)
    if spec is None or not hasattr(net, "layers"):
        raise TypeError(f"net must be a TinyTransformer, got {type(net).__name__}")
    if phase not in ("prefill", "decode"):
        raise ValueError(f"phase must be 'prefill' or 'decode', got {phase!r}")
    point = lengths(point, "point")
    context_len = lengths(context_len, "context_len")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a whole number of at least 1, got {repeats!r}")
    yours = None
    if measured is not None:
        try:
            yours = float(measured.m_as("s"))
        except Exception as error:
            raise ValueError(f"measured must be a time (a quantity in s or ms), got {measured!r:.80}") from error
        if not np.isfinite(yours) or yours <= 0:
            raise ValueError(f"measured must be a positive time, got {measured!r:.80}")
    dev = _hardware(device)
    if phase == "prefill":
        batch, n, start = 1, point, 0
        cost = prefill(spec, dev, point, precision=PRECISION, allow_overflow=True)
        tokens = np.zeros((1, point), dtype=np.int64)

        def one_pass() -> tuple[float, float]:
            begin, begin_cpu = time.perf_counter(), time.thread_time()
            net.prefill(tokens, max_new_tokens=0)
            return time.perf_counter() - begin, time.thread_time() - begin_cpu
    else:
        batch, n, start = point, 1, context_len
        cost = decode_step(spec, dev, context_len, point, PRECISION, allow_overflow=True)
        prompt = np.zeros((point, context_len), dtype=np.int64)

        def one_pass() -> tuple[float, float]:
            _, cache = net.prefill(prompt, max_new_tokens=1)  # a fresh cache at context_len, not timed
            new = np.zeros(point, dtype=np.int64)
            begin, begin_cpu = time.perf_counter(), time.thread_time()
            net.decode_step(new, cache)
            return time.perf_counter() - begin, time.thread_time() - begin_cpu
    pieces = _pieces(net, batch, n, start)
    passes, cpu = [], []
    for _ in range(repeats + 1):
        passes.append(one_pass())
        row = []
        for piece in pieces:
            begin = time.thread_time()
            piece()
            row.append(time.thread_time() - begin)
        cpu.append(row)
    best = int(np.argmin([wall for wall, _ in passes[1:]])) + 1  # the first round is a warm-up
    wall, pass_cpu = passes[best]
    products, attention, elementwise = np.min(np.array(cpu[1:]), axis=0)
    parts = cost.parts
    return Gap(phase, point, wall, float(cost.time_si), max(wall - pass_cpu, 0.0), float(products),
               float(parts["body"].time_si + parts["head"].time_si), float(attention),
               float(parts["attention"].time_si), float(elementwise), yours)
