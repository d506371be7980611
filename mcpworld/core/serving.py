"""Run an ASGI app on a local port in a background thread: for in-process servers (arena, replay LLM, tests)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


@contextmanager
def serve_in_thread(app: Any, port: int, startup_timeout_s: float = 30.0) -> Iterator[str]:
    """Serve `app` on 127.0.0.1:port until the block ends; yields the base URL once the server accepts."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.02)
    if not server.started:
        server.should_exit = True
        raise RuntimeError(f"server on 127.0.0.1:{port} did not start within {startup_timeout_s:g}s")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
