"""Per-instance test environments: a virtualenv per (Python version, requirements), built offline, cached, reused.

An `EnvSpec` has the shape of the SWE-bench harness's per-repo/version specs (`python`, `packages`,
`pip_packages`, `pre_install`, `install`, `test_cmd`, `eval_commands`) and of SWE-rebench's `install_config`.
`EnvManager.ensure(spec)` builds `python -m venv` with the requested interpreter and installs the requirements
with `pip --no-index --find-links <wheelhouse>`: nothing is downloaded (`index=True` lets a manager without a
wheelhouse install from the index pip is configured with instead: AWM's runtime, `awm_runtime`). A failure names
what could not be had (the interpreter, or the distribution pip could not find). Environments live under
`$MCPWORLD_SWE_ENVS` (default `/var/tmp/mcpworld-swe-envs-<uid>`), outside the data directory, because contained
commands see the host read-only except homes and the data directory.

The repository under test is never installed into the shared environment (one environment serves many checkouts
at once): grading puts the checkout on PYTHONPATH (`.` and `src`), which is what an editable install does.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mcpworld.swe.workspace import WorkspaceError

_EDITABLE = re.compile(r"^\s*(python -m )?pip install\s+(-e|--editable)?\s*\.(\[[\w,.-]*\])?\s*$")


class EnvironmentUnavailable(WorkspaceError):
    """A test environment that cannot be built here; the message names what is missing and how to provide it."""


@dataclass(frozen=True)
class EnvSpec:
    """What an instance's tests need, in the harness's spec shape."""

    python: str = ""                 # "3.9"; "" = the interpreter running mcpworld
    packages: list[str] = field(default_factory=list)      # requirements (the harness's space-separated string)
    pip_packages: list[str] = field(default_factory=list)
    pre_install: list[str] = field(default_factory=list)   # shell commands run in each checkout before tests
    install: str = ""                # run in each checkout; `pip install -e .` is done by PYTHONPATH instead
    test_cmd: str = ""
    env_vars: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_record(cls, raw: dict[str, Any] | None) -> EnvSpec | None:
        """A harness spec or SWE-rebench `install_config` dict; None when there is none."""
        if not raw:
            return None
        if not isinstance(raw, dict):
            raise ValueError("environment spec must be an object with python / packages / pip_packages / install")

        def words(value: Any) -> list[str]:
            if value in (None, ""):
                return []
            if isinstance(value, str):
                if value in ("requirements.txt", "environment.yml") or value.endswith((".txt", ".yml")):
                    raise ValueError(f"packages: {value!r} names a file in the repository; list the requirements "
                                     "themselves (they are installed offline from the wheelhouse)")
                return value.split()
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return list(value)
            raise ValueError(f"expected a list of requirement strings, got {value!r}")

        test_cmd = raw.get("test_cmd") or ""
        if isinstance(test_cmd, list):
            test_cmd = " && ".join(test_cmd)
        pre = raw.get("pre_install") or []
        return cls(python=str(raw.get("python") or ""), packages=words(raw.get("packages")),
                   pip_packages=words(raw.get("pip_packages")),
                   pre_install=[pre] if isinstance(pre, str) else list(pre),
                   install=str(raw.get("install") or ""), test_cmd=str(test_cmd),
                   env_vars={str(k): str(v) for k, v in (raw.get("env_vars") or {}).items()})

    @property
    def requirements(self) -> list[str]:
        return [*self.packages, *self.pip_packages]

    def checkout_commands(self) -> list[str]:
        """Commands run in a fresh checkout before its tests (editable installs excluded: see the module doc)."""
        install = [] if not self.install or _EDITABLE.match(self.install) else [self.install]
        return [*self.pre_install, *install]


@dataclass(frozen=True)
class Env:
    """A built environment: its folder and the variables that make commands use it."""

    path: Path
    python: Path

    def variables(self, checkout: Path) -> dict[str, str]:
        paths = [str(checkout)] + ([str(checkout / "src")] if (checkout / "src").is_dir() else [])
        return {"VIRTUAL_ENV": str(self.path), "PYTHONPATH": os.pathsep.join(paths),
                "PATH": f"{self.path / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}


def default_root() -> Path:
    given = os.environ.get("MCPWORLD_SWE_ENVS")
    return Path(given) if given else Path("/var/tmp") / f"mcpworld-swe-envs-{os.getuid()}"


def find_python(version: str) -> Path:
    """The interpreter for `version` ("3.9"): this one if it matches, `pythonX.Y` on PATH, or a pyenv build."""
    if not version or version == f"{sys.version_info.major}.{sys.version_info.minor}":
        return Path(sys.executable)
    if not re.fullmatch(r"\d+\.\d+", version):
        raise EnvironmentUnavailable(f"python: {version!r} is not a version like 3.9")
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    for candidate in sorted(pyenv.glob(f"{version}.*"), reverse=True):
        exe = candidate / "bin" / f"python{version}"
        if exe.is_file():
            return exe
    found = shutil.which(f"python{version}")
    if found and "/shims/" not in found:  # a pyenv shim fails unless that version is selected
        return Path(found)
    raise EnvironmentUnavailable(f"Python {version} is not installed here: no python{version} on PATH and none "
                                 f"under {pyenv}. Install it (e.g. `pyenv install {version}`) and grade again.")


class EnvManager:
    """Builds and caches environments under `root`, installing only from the `wheelhouse` folders (or, with `index`
    and no wheelhouse, from pip's configured index, its cache used); `say` hears what a build is doing."""

    def __init__(self, wheelhouse: list[Path] | None = None, root: Path | None = None, *, index: bool = False,
                 say: Callable[[str], None] | None = None):
        self.wheelhouse = [Path(w) for w in (wheelhouse or [])]
        self.root = root or default_root()
        self.index = index
        self.say = say or (lambda _: None)

    def key(self, spec: EnvSpec) -> str:
        """Same spec and same wheelhouse files: the same environment."""
        files = sorted(p.name for w in self.wheelhouse if w.is_dir() for p in w.iterdir())
        blob = json.dumps({"python": str(find_python(spec.python)), "reqs": spec.requirements, "files": files})
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def ensure(self, spec: EnvSpec) -> Env:
        """The environment for `spec`, built on first use (concurrent callers wait for one build)."""
        python = find_python(spec.python)
        path = self.root / self.key(spec)
        env = Env(path, path / "bin" / "python")
        if (path / ".ready").is_file():
            return env
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f"{path.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if (path / ".ready").is_file():
                return env
            shutil.rmtree(path, ignore_errors=True)  # a build that died half-way
            started = time.monotonic()
            wanted = " ".join(spec.requirements) or "no packages"
            self.say(f"building the environment {path} (Python {python}; {wanted}), once: later uses reuse it")
            try:
                self._build(python, path, spec)
            except BaseException:
                shutil.rmtree(path, ignore_errors=True)
                raise
            (path / ".ready").write_text(json.dumps(asdict(spec)))
            self.say(f"built {path} in {time.monotonic() - started:.0f}s")
        return env

    def _build(self, python: Path, path: Path, spec: EnvSpec) -> None:
        # Without pip (ensurepip costs seconds): this interpreter's pip installs into it (`pip --python`).
        made = subprocess.run([str(python), "-m", "venv", "--without-pip", str(path)], capture_output=True, text=True,
                              timeout=300)
        if made.returncode != 0:
            raise EnvironmentUnavailable(f"could not create a virtualenv with {python}: {made.stderr.strip()[-800:]}")
        if not spec.requirements:
            return
        if not self.wheelhouse and self.index:  # pip as the user configured it (index, proxy, cache)
            pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(path / "bin" / "python"), "install",
                                  "--disable-pip-version-check", "--quiet", *spec.requirements],
                                 capture_output=True, text=True, timeout=1800)
            if pip.returncode != 0:
                raise EnvironmentUnavailable(f"pip could not install {' '.join(spec.requirements)} from its index: "
                                             f"{pip.stderr.strip()[-1500:]}")
            return
        if not self.wheelhouse:
            raise EnvironmentUnavailable(f"the environment needs {', '.join(spec.requirements)} but no wheelhouse "
                                         "was given: pass --wheelhouse DIR (pip download -d DIR <requirements>)")
        links = [arg for w in self.wheelhouse for arg in ("--find-links", str(w))]
        pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(path / "bin" / "python"), "install",
                              "--no-index", "--no-cache-dir",
                              "--disable-pip-version-check", "--quiet", *links, *spec.requirements],
                             capture_output=True, text=True, timeout=1800,
                             env={"PATH": os.environ.get("PATH", os.defpath), "HOME": str(path),
                                  "PIP_CONFIG_FILE": os.devnull})
        if pip.returncode != 0:
            missing = re.findall(r"No matching distribution found for (\S+)", pip.stderr)
            what = (f"{', '.join(missing)} is not in the wheelhouse" if missing
                    else f"pip failed: {pip.stderr.strip()[-1500:]}")
            raise EnvironmentUnavailable(f"cannot build the test environment offline: {what} "
                                         f"(wheelhouse: {', '.join(map(str, self.wheelhouse))}). Add it with "
                                         f"`pip download -d {self.wheelhouse[0]} <requirement>` and grade again.")


def harness_image(instance_id: str, given: str = "", namespace: str | None = "swebench", tag: str = "latest",
                  arch: str = "x86_64") -> str:
    """The SWE-bench harness's per-instance image (what the docker backend runs an instance in): the record's own
    (`image`, SWE-rebench's `docker_image`), else `<namespace>/sweb.eval.<arch>.<id>:<tag>`, lower-cased, with
    '__' written '_1776_' on a registry (Docker Hub refuses '__')."""
    if given:
        return given
    name = f"sweb.eval.{arch}.{instance_id}:{tag}"
    return (f"{namespace}/{name}".replace("__", "_1776_") if namespace else name).lower()
