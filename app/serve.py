"""Start the app's Streamlit server with torch and the engine already imported.

``make run`` uses this instead of ``streamlit run`` so that importing PyTorch (1–2 s) happens
while the server starts, not during the first page load. Arguments are those of
``streamlit run`` after the script, e.g. ``python app/serve.py --server.port 8502``.

It also lets every address a browser sends reach the app, which cuts a link's long text with a
note. Without this, two limits of the server turn a long link away before the app runs, so it
cannot say why: the HTTP server under Streamlit (uvicorn with h11) buffers at most 16 KiB of an
unfinished request (a link whose query outgrows the first read from the socket gets "400 Invalid
HTTP request received." and the page never loads), and Streamlit drops a query string over 512 Ki
characters (the page opens as if the link had no query). Both are raised to
:data:`REQUEST_HEAD_MAX`, Chromium's longest address and some: Chromium refuses to open a longer
address at all, so nothing longer reaches a server from a browser. A longer request from another
client is answered "400 Bad Request" with :data:`TOO_LONG`, a line that says why.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402, F401  (the slow import, paid before the server is up)
from streamlit.web import cli  # noqa: E402

import app.charts.explore  # noqa: E402, F401  (the default page's charts, and plotly)
import app.charts.heads  # noqa: E402, F401
import app.links  # noqa: E402
import app.logic.explore  # noqa: E402, F401
import budgetformer_core.analysis.infer  # noqa: E402, F401
import budgetformer_core.io.checkpoint  # noqa: E402, F401
import budgetformer_core.measure.timing  # noqa: E402, F401

REQUEST_HEAD_MAX = 2 * 2**20 + 2**16
"""Bytes of a request line and headers the server reads: Chromium sends addresses up to 2 MiB
(it refuses to open a longer one, so nothing longer ever reaches a server)."""
TOO_LONG = (
    f"This address is too long: the server reads at most {REQUEST_HEAD_MAX:,} bytes of an address and "
    f"its headers. A link's text is read up to {app.links.LINK_TEXT_READ:,} characters: shorten it."
)
"""The answer to a request whose address and headers are over :data:`REQUEST_HEAD_MAX` bytes."""


def long_request_protocol() -> type:
    """Uvicorn's h11 protocol reading request heads up to :data:`REQUEST_HEAD_MAX` bytes and
    answering a longer one with :data:`TOO_LONG` (instead of "Invalid HTTP request received.")."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class LongRequestProtocol(H11Protocol):
        def send_400_response(self, msg: str) -> None:
            unread, _ = self.conn.trailing_data  # the unfinished request head h11 gave up on
            super().send_400_response(TOO_LONG if len(unread) > REQUEST_HEAD_MAX else msg)

    return LongRequestProtocol


def read_long_requests() -> None:
    """Make Streamlit's uvicorn server accept request heads, and Streamlit query strings, up to
    :data:`REQUEST_HEAD_MAX` (bytes, characters), and answer a longer head with :data:`TOO_LONG`."""
    try:  # private names of Streamlit 1.67; another version keeps its own limits
        from streamlit.runtime.state import query_params
        from streamlit.web.server.starlette import starlette_server

        options = starlette_server._get_uvicorn_config_kwargs
        protocol = long_request_protocol()
    except (ImportError, AttributeError):
        return
    query_params.CLIENT_STATE_QUERY_STRING_MAX_LENGTH = REQUEST_HEAD_MAX
    starlette_server._get_uvicorn_config_kwargs = lambda: {
        **options(), "http": protocol, "h11_max_incomplete_event_size": REQUEST_HEAD_MAX
    }


if __name__ == "__main__":
    read_long_requests()
    sys.argv = ["streamlit", "run", str(ROOT / "app" / "main.py"), *sys.argv[1:]]
    sys.exit(cli.main())
