"""`vllm serve` command lines for SWT and SWR checkpoints, under the model names the world-model clients ask for.

Printing them is the default (copy to a GPU machine); `--run` starts them here and waits. Each server speaks the
OpenAI-compatible API at http://HOST:PORT/v1, which is what MCPWORLD_SWT_URL / MCPWORLD_SWR_URL point at.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass

SWT_NAME, SWR_NAME = "swt", "swr"


@dataclass(frozen=True)
class ServeSpec:
    """One `vllm serve`: which checkpoint, under which served name, where, on which GPUs."""

    checkpoint: str
    name: str
    port: int
    host: str = "127.0.0.1"
    tensor_parallel: int = 1
    gpu_memory_utilization: float = 0.9
    max_model_len: int = 32768
    gpus: str | None = None  # CUDA_VISIBLE_DEVICES for this server
    extra: tuple[str, ...] = ()

    def argv(self) -> list[str]:
        return ["vllm", "serve", self.checkpoint, "--served-model-name", self.name, "--host", self.host,
                "--port", str(self.port), "--tensor-parallel-size", str(self.tensor_parallel),
                "--gpu-memory-utilization", f"{self.gpu_memory_utilization:g}",
                "--max-model-len", str(self.max_model_len), *self.extra]

    def env(self) -> dict[str, str]:
        return {"CUDA_VISIBLE_DEVICES": self.gpus} if self.gpus else {}

    def shell_line(self) -> str:
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env().items())
        return (prefix + " " if prefix else "") + shlex.join(self.argv())

    def url(self, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}/v1"


def serve_specs(swt: str | None, swr: str | None, *, swt_port: int = 8001, swr_port: int = 8002,
                host: str = "127.0.0.1", tensor_parallel: int = 1, gpu_memory_utilization: float | None = None,
                max_model_len: int = 32768, swt_gpus: str | None = None, swr_gpus: str | None = None,
                extra: tuple[str, ...] = ()) -> list[ServeSpec]:
    """Specs for the checkpoints given; two models sharing GPUs get half the memory each unless told otherwise."""
    chosen = [(c, n, p, g) for c, n, p, g in ((swt, SWT_NAME, swt_port, swt_gpus), (swr, SWR_NAME, swr_port, swr_gpus))
              if c]
    if not chosen:
        raise ValueError("give an SWT and/or an SWR checkpoint (a local folder or a Hugging Face id)")
    shared = len(chosen) == 2 and swt_gpus == swr_gpus
    memory = gpu_memory_utilization if gpu_memory_utilization is not None else (0.45 if shared else 0.9)
    return [ServeSpec(c, n, p, host, tensor_parallel, memory, max_model_len, g, extra) for c, n, p, g in chosen]


def env_exports(specs: list[ServeSpec], host: str = "127.0.0.1") -> list[str]:
    """The `export` lines that point mcpworld at the servers."""
    names = {SWT_NAME: "MCPWORLD_SWT_URL", SWR_NAME: "MCPWORLD_SWR_URL"}
    return [f"export {names[s.name]}={s.url(host)}" for s in specs if s.name in names]


def vllm_available() -> bool:
    return shutil.which("vllm") is not None


def run_servers(specs: list[ServeSpec]) -> int:
    """Start every server, wait; Ctrl-C (or one exiting) stops the others. Returns the first non-zero exit code."""
    if not vllm_available():
        raise RuntimeError("`vllm` is not on PATH: install it on a GPU machine (pip install 'mcpworld[gpu]'), or "
                           "run the printed commands where it is")
    procs = [subprocess.Popen(s.argv(), env={**os.environ, **s.env()}) for s in specs]
    try:
        while True:
            for proc in procs:
                code = proc.poll()
                if code is not None:
                    return code
            try:
                procs[0].wait(timeout=1)
            except subprocess.TimeoutExpired:
                continue
    except KeyboardInterrupt:
        return 130
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        sys.stdout.flush()
