"""Feedback pages made readable offline: maths drawn into the page, long lines wrapped, lateness said."""

import base64
import re

from course.review.feedback_page import rewrite, svg_of

PAGE = """<html><head><script src="https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/latest.js?config=TeX"> </script>
<script type="text/x-mathjax-config">init_mathjax = function() {};</script></head>
<body><div><p>The ridge point is $I^* = P/B$; the price is $3.95 or $4.</p>
<p>$$t = \\frac{F}{P}$$</p><pre>a line with $x$ kept as it is</pre><p>$\\notacommand{x}$</p></div></body></html>"""


def test_maths_is_drawn_into_the_page_and_no_cdn_is_loaded():
    page = rewrite(PAGE)
    assert "cdnjs" not in page and "x-mathjax-config" not in page
    images = re.findall(r'<img class="tex" alt="([^"]*)" src="data:image/svg\+xml;base64,([^"]+)"', page)
    assert [alt for alt, _ in images] == ["I^* = P/B", "t = \\frac{F}{P}"]
    assert all(base64.b64decode(data).lstrip().startswith(b"<?xml") for _, data in images)
    assert "$3.95 or $4." in page  # prices are not maths
    assert "<pre>a line with $x$ kept as it is</pre>" in page  # code is left alone
    assert '<code class="tex">\\notacommand{x}</code>' in page  # what mathtext cannot draw stays readable
    assert svg_of("\\notacommand{x}") is None


def test_long_lines_wrap_and_a_late_hand_in_is_said_at_the_top():
    page = rewrite(PAGE, late="late by 2 h 5 min", penalty=5)
    assert "white-space: pre-wrap" in page
    body = page.split("<body", 1)[1]
    assert body.index("Handed in late by 2 h 5 min; 5 points were taken off for it.") < body.index("ridge point")
