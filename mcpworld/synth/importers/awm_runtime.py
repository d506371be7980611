"""The Python an AWM scenario's generated code runs under: AWM's own library versions, not the project's.

AgentWorldModel-1K was generated and verified under AWM's lock (`awm-lock.txt`: FastAPI 0.115.12, SQLAlchemy 2.0.41,
pydantic 2.12.5, ...), and generated code behaves differently under other versions: an ORM class with a column named
`metadata` is refused by SQLAlchemy 2.0.41 and loads under 2.1. So a package served as AWM's (`served_as: "awm"`)
runs its workers with the interpreter of a virtualenv holding exactly that lock, in AWM's Python 3.12 (this one when
no 3.12 is installed, said when built). It is built on first need by `mcpworld.swe.envs.EnvManager` (the builder of
SWE per-instance environments: cached by interpreter, requirements and wheelhouse files, one build for concurrent
callers) under `$MCPWORLD_AWM_ENVS` (default /var/tmp/mcpworld-awm-envs-UID), from pip's configured index or, with
`$MCPWORLD_AWM_WHEELHOUSE` (folders, `:`-separated), offline from those folders only.

The worker's own code (the zygote, `sandbox.jobs`, `awm_worker`: standard library only) reaches that interpreter
through a folder holding nothing but a link to the `mcpworld` package: never mcpworld's source root, which for an
installed mcpworld is the host's site-packages, whose libraries would then shadow the lock's.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from pathlib import Path

from mcpworld.synth.sandbox.worker import PACKAGE_ROOT, Interpreter

LOCK_FILE = Path(__file__).with_name("awm-lock.txt")
PYTHON = "3.12"  # AWM's
ENVS_ENV = "MCPWORLD_AWM_ENVS"
WHEELHOUSE_ENV = "MCPWORLD_AWM_WHEELHOUSE"


class AwmRuntimeUnavailable(RuntimeError):
    """AWM's runtime cannot be built here; the message says why and what to do. Never replaced by host libraries."""


def requirements() -> list[str]:
    """The pinned requirement lines of AWM's lock."""
    lines = (line.split("#")[0].strip() for line in LOCK_FILE.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line]


def root() -> Path:
    given = os.environ.get(ENVS_ENV)
    return Path(given) if given else Path("/var/tmp") / f"mcpworld-awm-envs-{os.getuid()}"


def wheelhouse() -> list[Path]:
    return [Path(p) for p in os.environ.get(WHEELHOUSE_ENV, "").split(os.pathsep) if p]


def _say(message: str) -> None:
    print(f"mcpworld: AWM runtime: {message}", file=sys.stderr, flush=True)


def _harness() -> str:
    """A folder whose only entry is a link to this mcpworld package (one per package location)."""
    folder = root() / "harness" / hashlib.sha256(str(PACKAGE_ROOT).encode()).hexdigest()[:16]
    link = folder / "mcpworld"
    if not link.is_symlink():
        folder.mkdir(parents=True, exist_ok=True)
        temporary = folder / f".mcpworld-{os.getpid()}-{threading.get_ident()}"
        temporary.unlink(missing_ok=True)
        temporary.symlink_to(PACKAGE_ROOT, target_is_directory=True)
        os.replace(temporary, link)
    return str(folder)


_lock = threading.Lock()
_built: Interpreter | AwmRuntimeUnavailable | None = None


def interpreter() -> Interpreter:
    """AWM's runtime for a worker, built on first need (once per machine; a failure is remembered per process)."""
    global _built
    with _lock:
        if _built is None:
            try:
                _built = _build()
            except AwmRuntimeUnavailable as exc:
                _built = exc
        if isinstance(_built, AwmRuntimeUnavailable):
            raise _built
        return _built


def _build() -> Interpreter:
    from mcpworld.swe.envs import EnvironmentUnavailable, EnvManager, EnvSpec, find_python

    houses = wheelhouse()
    try:
        find_python(PYTHON)
        version = PYTHON
    except EnvironmentUnavailable:
        version = ""
        _say(f"no Python {PYTHON} here (AWM's; `pyenv install {PYTHON}` gives one): using this Python "
             f"{sys.version_info.major}.{sys.version_info.minor}")
    source = f"the wheelhouse {os.pathsep.join(map(str, houses))}" if houses else "pip's index"
    try:
        env = EnvManager(houses, root(), index=True, say=_say).ensure(EnvSpec(python=version,
                                                                               packages=requirements()))
    except (EnvironmentUnavailable, OSError) as exc:
        raise AwmRuntimeUnavailable(
            f"cannot build AWM's runtime (the library versions AWM's scenarios were made with, {LOCK_FILE.name}) "
            f"from {source}: {exc}. Imported AWM scenarios run only under it. Offline: `pip download -d DIR -r "
            f"{LOCK_FILE}` where there is a network (for Python {PYTHON}, linux x86_64: add `--python-version "
            f"{PYTHON} --only-binary=:all:`), then set {WHEELHOUSE_ENV}=DIR; or make pip's index reachable.") from None
    harness = _harness()
    base = Path(os.path.realpath(env.python)).parents[1]  # the installation the virtualenv's python links to
    return Interpreter(python=str(env.python), sys_path=(harness,), binds=(str(env.path), str(base), harness))


__all__ = ["AwmRuntimeUnavailable", "interpreter", "requirements"]
