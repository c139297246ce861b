"""Running the examples of one page: a scratch folder, a real server, a bash session."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.docs.blocks import Step
from tests.support.processes import create_key, free_port, start_serve, stop, wait_ready

VENV = Path(sys.executable).parent.parent
SECONDS_PER_BLOCK = 300
WRITER_SCOPES = "memory:write,memory:read,subject:forget,audit:read"


@dataclass(frozen=True)
class Ran:
    """What one block did."""

    status: int
    out: str
    err: str


class PageRun:
    """The scratch folder, the server and the shell one page's examples share."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        (folder / ".venv").symlink_to(VENV)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data = folder / "gmem-data"
        self.log = folder / "serve.log"
        self.server: subprocess.Popen[bytes] | None = None
        self.env = {k: v for k, v in os.environ.items() if not k.upper().startswith("GMEM_")}
        self.env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{self.env.get('PATH', '')}"
        self.shell: subprocess.Popen[str] | None = None
        self.count = 0

    def run(self, step: Step) -> Ran:
        """Run one step (starting the page's server first if none runs yet)."""
        code = self._ported(step.block.code)
        if step.kind == "serves":
            self._serve(["bash", "-c", f"exec {code.strip()}"])
            return Ran(0, "", "")
        if self.server is None:
            self._serve(None)
        self.count += 1
        return self._python(code) if step.kind == "python" else self._sh(code)

    def _ported(self, code: str) -> str:
        for old in ("127.0.0.1:8080", "localhost:8080"):
            code = code.replace(old, f"127.0.0.1:{self.port}")
        return code.replace("--port 8080", f"--port {self.port}")

    def _serve(self, command: list[str] | None) -> None:
        if command is None:
            self.server = start_serve(self.data, self.log, self.port, self.env)
        else:
            with self.log.open("ab") as sink:
                self.server = subprocess.Popen(
                    command, cwd=self.folder, env=self.env, stdout=sink, stderr=sink
                )
        wait_ready(self.url, self.server, self.log)
        key = create_key(self.data, WRITER_SCOPES, "trusted", env=self.env)
        reviewer = create_key(self.data, "memory:review", "untrusted", env=self.env)
        self.env |= {
            "GMEM": self.url,
            "GMEM_URL": self.url,
            "KEY": key,
            "GMEM_API_KEY": key,
            "REVIEWER_KEY": reviewer,
        }

    def _python(self, code: str) -> Ran:
        script = self.folder / f"example_{self.count}.py"
        script.write_text(code, "utf-8")
        done = subprocess.run(
            [sys.executable, script.name],
            cwd=self.folder,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=SECONDS_PER_BLOCK,
            check=False,
        )
        return Ran(done.returncode, done.stdout, done.stderr)

    def _sh(self, code: str) -> Ran:
        """The block in the page's bash session; its output and status through files."""
        if self.shell is None:
            self.shell = subprocess.Popen(
                ["bash", "--noprofile", "--norc"],
                cwd=self.folder,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            self._send("set -o pipefail\n")
        n = self.count
        out, err, status = (self.folder / f".block_{n}.{part}" for part in ("out", "err", "status"))
        done = f'echo "$?" >"{status}.tmp"; mv "{status}.tmp" "{status}"'
        self._send(f'{{\n{code}\n}} </dev/null >"{out}" 2>"{err}"\n{done}\n')
        deadline = time.monotonic() + SECONDS_PER_BLOCK
        while not status.exists():
            if self.shell.poll() is not None or time.monotonic() > deadline:
                return Ran(-1, _read(out), _read(err) + "\n(the shell ended or timed out)")
            time.sleep(0.02)
        return Ran(int(status.read_text()), _read(out), _read(err))

    def _send(self, text: str) -> None:
        assert self.shell is not None and self.shell.stdin is not None
        self.shell.stdin.write(text)
        self.shell.stdin.flush()

    def close(self) -> None:
        """End the shell and stop the server (SIGTERM, as an operator would)."""
        if self.shell is not None:
            if self.shell.stdin is not None:
                self.shell.stdin.close()
            try:
                self.shell.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.shell.send_signal(signal.SIGKILL)
                self.shell.wait()
        if self.server is not None:
            stop(self.server)


def _read(path: Path) -> str:
    return path.read_text("utf-8", errors="replace") if path.exists() else ""


__all__ = ["PageRun", "Ran"]
