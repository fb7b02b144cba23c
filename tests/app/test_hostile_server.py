"""The app's server against long links and oversized uploads.

A link of any length a browser sends reaches the page (which cuts a long text with a note), and
the server's memory is back within 10 % once sessions that sent the largest and oversized uploads
have closed.

A server of its own (``app/serve.py``, as ``make run`` starts it; :class:`loadtest.Server`) that
drops a disconnected session after :data:`SESSION_TTL` seconds instead of Streamlit's 120, so
that what is read at the end is what stays once the sessions are gone. Two browser sessions at
once each upload the largest file the Batch page accepts (just under its 2 MB, in 50 long texts), pick a
file over the limit (the widget refuses it; nothing is sent) and send 150 MB straight to the
server's upload address the way the widget sends a file, with no length given (chunked), which
the server cuts off at its limit. The server's resident memory (VmRSS from /proc) is read once the
app's model and pages are warm, at the peak of the uploads and after both sessions closed; the
figures are printed.
"""

from __future__ import annotations

import http.client
import threading
import time
from urllib.parse import urlsplit

import pytest

from app.analysis import BATCH_MAX_BYTES, LINK_TEXT_READ
from app.serve import REQUEST_HEAD_MAX, read_long_requests

from .test_browser import (  # noqa: F401  (browser: a fixture; Server: loadtest's)
    ARTIFACTS,
    VIEWPORT,
    Server,
    browser,
    no_error,
    text_box,
    wait_idle,
)

SESSION_TTL = 5
"""Seconds a closed session's state and uploaded files are kept (``server.disconnectedSessionTTL``)."""
HOSTILE_MB = 150


@pytest.fixture(scope="module")
def server():
    ARTIFACTS.mkdir(exist_ok=True)
    with Server(ARTIFACTS / "streamlit-server-memory.log",
                ("--server.disconnectedSessionTTL", str(SESSION_TTL))) as srv:
        srv.wait_healthy(300)  # a busy machine starts it slowly
        yield srv


ROWS = 50
"""Texts in the largest file: few and long, so that classifying them stays cheap."""


def largest_file(path, session: int) -> None:
    """:data:`ROWS` texts, just under :data:`BATCH_MAX_BYTES` in all, each session's its own."""
    width = (BATCH_MAX_BYTES - 4096) // ROWS - 1
    row = f"session {session}: the striker scored as shares rose and a new chip shipped; "
    lines = [(f"{i} " + row * (width // len(row) + 1))[:width] for i in range(ROWS)]
    path.write_text("\n".join(lines) + "\n")
    assert BATCH_MAX_BYTES - 8192 < path.stat().st_size < BATCH_MAX_BYTES


def send_chunked(url: str, headers: dict[str, str], megabytes: int) -> int | None:
    """PUT a multipart body of ``megabytes`` MB to ``url`` with ``headers`` (the widget's cookie
    and XSRF token), chunked (no Content-Length): the HTTP status, None when the server closed
    the connection before answering."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    boundary = "----budgetformer-memory-test"
    conn.putrequest("PUT", parts.path)
    for name in ("x-xsrftoken", "cookie", "origin"):
        if name in headers:
            conn.putheader(name, headers[name])
    conn.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.txt\"\r\n"
            "Content-Type: text/plain\r\n\r\n").encode()
    chunk = b"a text\n" * (2**20 // 7)
    try:
        for piece in [head, *[chunk] * megabytes, f"\r\n--{boundary}--\r\n".encode()]:
            conn.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        conn.send(b"0\r\n\r\n")
    except OSError:
        pass  # the server stopped reading and closed the connection
    try:
        return conn.getresponse().status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


class Peak(threading.Thread):
    """The highest RSS of the server while running (read every 0.1 s)."""

    def __init__(self, srv: Server):
        super().__init__(daemon=True)
        self.srv, self.mb, self.done = srv, 0.0, threading.Event()

    def run(self) -> None:
        while not self.done.is_set() and self.srv.proc.poll() is None:
            self.mb = max(self.mb, self.srv.rss_mb())
            time.sleep(0.1)


def open_batch(context, srv: Server):
    page = context.new_page()
    page.goto(srv.url + "/batch")
    page.locator("h1", has_text="Batch analysis").wait_for(timeout=120_000)
    wait_idle(page, 120_000)
    return page


def test_memory_returns_after_the_largest_and_oversized_uploads(server, browser, tmp_path):  # noqa: F811
    started = server.rss_mb()
    # warm: the model, the Batch page and a small upload once (what any first visitor pays)
    context = browser.new_context(viewport=VIEWPORT)
    page = open_batch(context, server)
    small = tmp_path / "small.csv"
    small.write_text("text\nThe striker scored twice.\nShares rose after record profits.\n")
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(small))
    classified = page.locator('[data-testid="stMetric"]', has_text="Texts classified")
    classified.get_by_text("2 of 2").wait_for(timeout=120_000)
    context.close()
    time.sleep(SESSION_TTL + 2)
    warm = server.rss_mb()

    peak = Peak(server)
    peak.start()
    try:
        statuses, contexts = uploads_of_two_sessions(server, browser, tmp_path)
    finally:
        peak.done.set()
        peak.join()
    for context in contexts:
        context.close()
    time.sleep(SESSION_TTL + 2)
    after = server.rss_mb()
    deadline = time.monotonic() + 30
    while after > 1.1 * warm and time.monotonic() < deadline:  # a session ends at its TTL's next check
        time.sleep(2)
        after = server.rss_mb()
    print(f"\nserver RSS: started {started:.0f} MB, warm {warm:.0f} MB, peak during two sessions' uploads "
          f"{peak.mb:.0f} MB, after they closed {after:.0f} MB ({after / warm - 1:+.1%} of warm); "
          f"{HOSTILE_MB} MB sent chunked: HTTP {statuses}")
    assert after <= 1.1 * warm


def uploads_of_two_sessions(server: Server, browser, tmp_path) -> tuple[list, list]:  # noqa: F811
    """Two sessions at once: the largest file each, a file over the limit each, and
    :data:`HOSTILE_MB` MB sent chunked to the upload address of each. (The statuses of the
    chunked uploads, the browser contexts.)"""
    contexts, pages, uploads = [], [], []
    for _ in range(2):
        contexts.append(browser.new_context(viewport=VIEWPORT))
        pages.append(open_batch(contexts[-1], server))
        pages[-1].on("request", lambda r: r.method == "PUT" and "/_stcore/upload_file/" in r.url and uploads.append(r))
    for session, page in enumerate(pages):  # both sessions upload, then both classify at once
        largest = tmp_path / f"largest-{session}.txt"
        largest_file(largest, session)
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(largest))
    for page in pages:
        page.locator('[data-testid="stMetric"]', has_text="Texts classified").get_by_text(
            f"{ROWS} of {ROWS}").wait_for(timeout=300_000)
        wait_idle(page, 120_000)
        no_error(page)
    assert len(uploads) == 2
    over = tmp_path / "over.txt"
    over.write_bytes(b"a text\n" * (BATCH_MAX_BYTES // 7 + 1000))
    for page in pages:  # a file over the limit is refused by the widget: nothing is sent
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(over))
        page.get_by_text("File must be").first.wait_for(timeout=30_000)
    assert len(uploads) == 2
    statuses = [send_chunked(r.url, r.all_headers(), HOSTILE_MB) for r in uploads]  # straight to the server
    assert all(s in (413, None) for s in statuses), statuses
    return statuses, contexts


def test_a_long_link_reaches_the_page(server, browser, monkeypatch):  # noqa: F811
    """A request head of 600,000 bytes (more than the socket's first read, more than Streamlit's
    512 Ki characters of query) is answered with the page, and Streamlit keeps a query string of
    that length; in the browser, a link whose text is over 8,000 characters opens with the note."""
    import socket

    from streamlit.runtime.state import query_params
    from streamlit.web.server.starlette import starlette_server

    query = "model=bbc-budgetformer&text=" + "w" * 600_000
    with socket.create_connection(("127.0.0.1", server.port), timeout=120) as sock:
        sock.sendall(f"GET /?{query} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200") and b"<noscript>" in answer, answer[:200]

    for module, name in ((query_params, "CLIENT_STATE_QUERY_STRING_MAX_LENGTH"),
                         (starlette_server, "_get_uvicorn_config_kwargs")):
        monkeypatch.setattr(module, name, getattr(module, name))  # restored after the test
    read_long_requests()
    assert starlette_server._get_uvicorn_config_kwargs()["h11_max_incomplete_event_size"] == REQUEST_HEAD_MAX
    assert query_params.sanitize_query_string(query) == query
    assert len(query) < REQUEST_HEAD_MAX

    page = browser.new_page(viewport=VIEWPORT)
    page.goto(f"{server.url}/?model=bbc-budgetformer&text=" + "w" * 20_000, wait_until="domcontentloaded")
    page.get_by_text(f"The link's text has 20,000 characters; a link carries at most {LINK_TEXT_READ:,}").wait_for(
        timeout=180_000)
    assert len(text_box(page).input_value()) == LINK_TEXT_READ
    no_error(page)
    page.close()
