"""The last touches to a feedback page nbgrader wrote: readable offline, long lines wrapped, lateness said.

nbgrader's feedback template loads MathJax from a CDN, so a student who opens the page offline (or behind a
firewall) sees raw ``$$ ... $$``; this replaces every formula outside code with a picture of it drawn here,
by matplotlib's mathtext (an SVG inside the page), and drops the CDN script.  A formula mathtext cannot draw
stays as its TeX, in a code span.  Output lines (a failing check's message) wrap instead of running off the
page.  A late hand-in gets a line at the top saying by how much, and the penalty.
"""

from __future__ import annotations

import base64
import html
import io
import re

WRAP = """<style>
/* course feedback: long output lines wrap instead of running off the page */
pre, .output_text pre, .output_error pre, .output_stream pre, code { white-space: pre-wrap;
  overflow-wrap: anywhere; word-break: break-word; }
div.output_area, div.output_subarea { max-width: 100%; overflow-x: visible; }
.rooflab-late { background: #fff3cd; border-left: 4px solid #e0a800; padding: .6em 1em; margin: 1em 0; }
img.tex { vertical-align: middle; }
</style>
"""
CDN = re.compile(r"<script[^>]*src=\"https?://[^\"]*mathjax[^\"]*\"[^>]*>\s*</script>", re.I)
MATHJAX_CONFIG = re.compile(r"<script type=\"text/x-mathjax-config\">.*?</script>", re.I | re.S)
PROTECTED = re.compile(r"(<script.*?</script>|<style.*?</style>|<pre.*?</pre>|<code.*?</code>|<textarea.*?</textarea>)",
                       re.I | re.S)
DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.S)
INLINE = re.compile(r"(?<![\\$\w])\$(?![\s$])([^$\n]+?)(?<![\s\\])\$(?![\w$])")


def finish(page, row=None) -> None:
    """Rewrite the HTML file ``page`` in place (see the module's docstring); ``row`` a course.review.report.Row."""
    text = page.read_text(encoding="utf-8")
    page.write_text(rewrite(text, getattr(row, "late", ""), getattr(row, "late_penalty", 0.0)), encoding="utf-8")


def rewrite(text: str, late: str = "", penalty: float = 0.0) -> str:
    text = MATHJAX_CONFIG.sub("", CDN.sub("", text))
    head, body_tag, body = text.partition("<body")
    if not body_tag:
        return text
    body = "".join(part if PROTECTED.fullmatch(part) else _maths(part) for part in PROTECTED.split(body))
    head = head.replace("</head>", WRAP + "</head>", 1) if "</head>" in head else head + WRAP
    if late:
        said = f"Handed in {html.escape(late)}" + (f"; {penalty:g} points were taken off for it." if penalty else ".")
        body = re.sub(r"^([^>]*>)", lambda m: m.group(1) + f'\n<p class="rooflab-late">{said}</p>', body, count=1)
    return head + body_tag + body


def _maths(part: str) -> str:
    part = DISPLAY.sub(lambda m: _formula(m.group(1), display=True) or m.group(0), part)
    return INLINE.sub(lambda m: _formula(m.group(1), display=False) or m.group(0), part)


def _formula(source: str, display: bool) -> str | None:
    if "<" in source or ">" in source:
        return None  # spans HTML tags: not one formula
    tex = html.unescape(source).strip()
    svg = svg_of(tex)
    if svg is None:
        return f'<code class="tex">{html.escape(tex)}</code>'
    image = (f'<img class="tex" alt="{html.escape(tex, quote=True)}" '
             f'src="data:image/svg+xml;base64,{base64.b64encode(svg).decode()}">')
    return f'<div style="text-align:center">{image}</div>' if display else image


def svg_of(tex: str) -> bytes | None:
    """The formula drawn by matplotlib's mathtext as SVG; None if mathtext cannot parse it."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import mathtext

    # mathtext draws one line of TeX; display maths often spans lines and aligns on &
    flat = re.sub(r"\\\\|&|\\(begin|end)\{[a-z*]+\}", " ", tex.replace("\n", " "))
    buffer = io.BytesIO()
    try:
        mathtext.math_to_image(f"${flat}$", buffer, dpi=100, format="svg")
    except (ValueError, RuntimeError):
        return None
    return buffer.getvalue()
