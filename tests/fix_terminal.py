"""A slowwave command in a pseudo-terminal, as a person runs it: the terminal is its
controlling one, so a Ctrl-C typed there reaches the whole foreground process group."""

from __future__ import annotations

import contextlib
import os
import pty
import sys
import threading
import time
from pathlib import Path

import psutil


def slowwave(*args: str) -> list[str]:
    return [sys.executable, "-m", "slowwave", *args]


class Terminal:
    """``command`` started in a new pseudo-terminal; its output collected as it comes."""

    def __init__(
        self, command: list[str], env: dict[str, str], cwd: Path, columns: int = 80
    ) -> None:
        env = {**env, "COLUMNS": str(columns), "TERM": "xterm"}
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: exec at once (no Python code of the parent's runs here)
            os.chdir(cwd)
            os.execvpe(command[0], command, env)
        self._output = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.status: int | None = None

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            self._output += data

    @property
    def output(self) -> str:
        return self._output.decode("utf-8", errors="replace")

    def wait_for(self, text: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in self.output:
            if self.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never shown; output:\n{self.output[-3000:]}")
            time.sleep(0.1)

    def ctrl_c(self) -> None:
        """Type Ctrl-C: the terminal sends SIGINT to its foreground process group."""
        os.write(self.fd, b"\x03")

    def descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def poll(self) -> int | None:
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
        return self.status

    def wait(self, timeout_s: float) -> int | None:
        """The exit status, or None if it is still running after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.status

    def kill(self) -> None:
        """End it and what it started (a test that failed half-way)."""
        for process in self.descendants():
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, 9)
        self.wait(10)

    def close(self) -> None:
        if self.poll() is None:
            self.kill()
        os.close(self.fd)
        self._reader.join(timeout=5)
