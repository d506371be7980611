"""The checked stdio transport (`mcpworld/core/stdio.py`) as a person meets it: a stdio server typed in a terminal
says on stderr what it waits for, and Ctrl-C stops it (it printed nothing and ignored Ctrl-C, issue 35)."""

from __future__ import annotations

import os
import pty
import select
import signal
import sys
import time

from mcpworld.core.contain import wait_until


def _read(fd: int, into: bytearray) -> None:
    while select.select([fd], [], [], 0)[0]:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return
        if not chunk:
            return
        into += chunk


def test_a_stdio_server_in_a_terminal_says_what_it_waits_for_and_stops_on_ctrl_c() -> None:
    pid, fd = pty.fork()
    if pid == 0:  # the child: a world's stdio server with a terminal on stdin, stdout and stderr
        os.execv(sys.executable, [sys.executable, "-m", "mcpworld", "serve", "world", "airline", "--stdio",
                                  "--interactive"])
    out = bytearray()
    status: list[int] = []
    try:
        assert wait_until(lambda: (_read(fd, out), b"Ctrl-C stops it" in out)[1], timeout=60), bytes(out)
        assert b"waiting for a client" in out and b"registry export" in out
        start = time.monotonic()
        os.write(fd, b"\x03")  # Ctrl-C, as the terminal sends it

        def ended() -> bool:
            _read(fd, out)
            done, code = os.waitpid(pid, os.WNOHANG)
            if done:
                status.append(code)
            return bool(done)

        assert wait_until(ended, timeout=30), f"still running {time.monotonic() - start:.0f}s after Ctrl-C"
        assert os.waitstatus_to_exitcode(status[0]) == 130
    finally:
        if not status:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
