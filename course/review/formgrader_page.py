"""A Jupyter server extension `course formgrader` loads: formgrader's pages say when a save failed.

nbgrader's formgrader saves a score or a comment with a background request and shows a tick when it
succeeds; when it fails (the login expired, the server stopped, the gradebook refused) the page shows
nothing, and the grade is lost on the next reload.  This extension adds, to every HTML page under
``/formgrader/``, a script that listens for any failed request of the page (jQuery's ``ajaxError``, which
Backbone's saves go through) and shows a red banner saying what was not saved and why.  A save answered
with the login page (HTTP 302 to /login, then HTML where JSON was expected) counts as failed too; a save
without a valid sign-in is refused with HTTP 403, and the banner says to sign in again.
"""

from __future__ import annotations

from tornado.web import OutputTransform

BANNER_ID = "rooflab-save-error"
SCRIPT = """
<script>
(function () {
  function banner(text) {
    var box = document.getElementById("%(id)s");
    if (!box) {
      box = document.createElement("div");
      box.id = "%(id)s";
      box.setAttribute("role", "alert");
      box.style.cssText = "position:fixed;top:0;left:0;right:0;z-index:10000;padding:.8em 1.2em;" +
        "background:#c0392b;color:#fff;font:bold 15px sans-serif";
      document.body.appendChild(box);
    }
    box.textContent = text;
  }
  if (!window.jQuery) { return; }
  jQuery(document).ajaxError(function (event, xhr, settings, error) {
    var method = (settings.type || "GET").toUpperCase();
    var what = method === "GET" ? "Could not load " : "NOT SAVED: ";
    var why = xhr.status ? "HTTP " + xhr.status : "no answer from the server";
    var signin = " (open an address `course formgrader` printed, then reload)";
    if (xhr.status === 200 && /login/i.test(xhr.responseText || "")) {
      why = "the server asked for a sign-in" + signin;
    } else if (xhr.status === 403) {
      why = "HTTP 403: the server did not take this page's sign-in" + signin;
    } else if (error) {
      why += " (" + error + ")";
    }
    banner(what + settings.url + ": " + why + ". Reload the page before grading further.");
  });
})();
</script>
""" % {"id": BANNER_ID}


class SaveErrorBanner(OutputTransform):
    """Insert :data:`SCRIPT` before ``</body>`` of formgrader's HTML pages, sent whole."""

    def __init__(self, request):
        super().__init__(request)
        self._formgrader = request.path.startswith("/formgrader")

    def transform_first_chunk(self, status_code, headers, chunk, finishing):
        if (self._formgrader and finishing and status_code == 200
                and headers.get("Content-Type", "").startswith("text/html") and b"</body>" in chunk):
            head, _, tail = chunk.rpartition(b"</body>")
            chunk = head + SCRIPT.encode() + b"</body>" + tail
            if "Content-Length" in headers:
                headers["Content-Length"] = str(len(chunk))
        return status_code, headers, chunk


def _jupyter_server_extension_points():
    return [{"module": "course.review.formgrader_page"}]


def _load_jupyter_server_extension(serverapp) -> None:
    serverapp.web_app.add_transform(SaveErrorBanner)
