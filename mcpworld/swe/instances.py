"""SWE-bench instances: load them from JSON or JSONL, validate every field, and know how to test them.

Instances follow SWE-bench's fields (FAIL_TO_PASS / PASS_TO_PASS as JSON strings or lists), plus two of ours:
`repo_source` (a local git repository or an archive holding one: machines here have no network) and `test_cmd`
(the command that runs the instance's tests; a pytest default is derived from the test ids when absent).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from mcpworld.swe.datasets import normalize

ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")
_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/^~@{}-]{0,199}$")
_UNITTEST_ID = re.compile(r"^(\w+) \(([\w.]+)\)$")
PYTEST_DEFAULT = "python -m pytest -rA -v -p no:cacheprovider"

Framework = Literal["pytest", "unittest"]


class InstanceError(ValueError):
    """A malformed instance or instances file; the message names the file, line and field."""


@dataclass(frozen=True)
class Instance:
    """One task: a repository at `base_commit`, an issue to fix, and the tests that judge the fix."""

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    FAIL_TO_PASS: list[str]
    PASS_TO_PASS: list[str] = field(default_factory=list)
    patch: str = ""
    test_patch: str = ""
    version: str = ""
    environment_setup_commit: str = ""
    hints_text: str = ""
    created_at: str = ""
    repo_source: str = ""
    test_cmd: str = ""
    difficulty: Literal["easy", "medium", "hard"] = "medium"
    split: Literal["train", "test"] = "test"
    log_parser: str = ""             # the harness's parser name (SWE-bench 5 / SWE-rebench records carry one)
    eval_type: str = ""              # "fail_only" for the harness's fail-only repositories
    image: str = ""                  # the harness's per-instance image (docker backend)
    env: dict[str, Any] | None = None  # an environment spec: SWE-rebench's install_config, or ours
    extra: dict[str, Any] = field(default_factory=dict, compare=False)  # every other field, kept as given
    origin: str = field(default="", compare=False, repr=False)  # the file it was read from; not in record()

    @property
    def framework(self) -> Framework:
        """unittest when the command or the test ids say so, else pytest."""
        if "unittest" in self.test_cmd or "runtests.py" in self.test_cmd:
            return "unittest"
        ids = self.FAIL_TO_PASS + self.PASS_TO_PASS
        if not self.test_cmd and ids and all(_UNITTEST_ID.match(t) for t in ids):
            return "unittest"
        return "pytest"

    @property
    def test_files(self) -> list[str]:
        """Files the tests live in (pytest ids) or dotted modules (unittest ids), plus files test_patch touches."""
        out: list[str] = []
        for test in self.FAIL_TO_PASS + self.PASS_TO_PASS:
            m = _UNITTEST_ID.match(test)
            dotted = m.group(2).removesuffix("." + m.group(1)) if m else ""  # 3.11+: module.Class.test_x
            item = dotted.rsplit(".", 1)[0] if m else test.split("::", 1)[0]
            if item and item not in out:
                out.append(item)
        return out

    @property
    def test_patch_files(self) -> list[str]:
        return patch_files(self.test_patch)

    def test_command(self) -> str:
        """The shell command grading runs in the repository root: `test_cmd`, else the harness's for Django and
        sympy (on the test modules `test_patch` touches), else pytest / unittest on the tests' files."""
        if self.test_cmd:
            return self.test_cmd
        runner = REPO_TEST_COMMANDS.get(self.repo)
        if runner and self.test_patch_files:
            return f"{runner} {' '.join(shlex.quote(d) for d in test_directives(self.repo, self.test_patch_files))}"
        files = " ".join(shlex.quote(f) for f in self.test_files)
        if self.framework == "unittest":
            return f"python -m unittest -v {files}"
        return f"{PYTEST_DEFAULT} {files}"

    def record(self) -> dict[str, Any]:
        """The instance as a SWE-bench style dict (lists kept as lists)."""
        return {k: v for k, v in asdict(self).items() if k != "origin"}


def answer_paths(instances: Iterable[Instance]) -> list[str]:
    """What gives the answers away, for the sandboxes of whoever serves or grades these instances to hide: the
    files they were read from (gold and test patches) and their source repositories (later commits and tags)."""
    paths = [path for inst in instances for path in (inst.origin, inst.repo_source) if path]
    return list(dict.fromkeys(paths))


# The harness's test commands for the repositories that do not use pytest.
REPO_TEST_COMMANDS = {
    "django/django": "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1",
    "sympy/sympy": "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose",
}
_NON_TEST = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")


def test_directives(repo: str, files: list[str]) -> list[str]:
    """What the harness passes its test command: the test files, as dotted modules under tests/ for Django."""
    out = [f for f in files if not f.endswith(_NON_TEST)]
    if repo == "django/django":
        out = [f.removesuffix(".py").removeprefix("tests/").replace("/", ".") for f in out]
    return out


def patch_files(patch: str) -> list[str]:
    """Paths a unified diff touches (new side, or old side for deletions)."""
    out: list[str] = []
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            parts = line.split(" b/", 1)
            if len(parts) == 2 and parts[1] not in out:
                out.append(parts[1])
    return out


# -- loading ---------------------------------------------------------------------------------------------------

_REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "FAIL_TO_PASS")
_STRINGS = ("patch", "test_patch", "version", "environment_setup_commit", "hints_text", "created_at",
            "repo_source", "test_cmd")
_KNOWN = {*_REQUIRED, *_STRINGS, "PASS_TO_PASS", "difficulty", "split", "log_parser", "eval_type", "image",
          "install_config", "env", "source"}


def load_instances(path: str | Path, repos_dir: str | Path | None = None, *, problems: list[str] | None = None,
                   require_source: bool = True) -> list[Instance]:
    """Read and validate every instance in a JSON (list, {"instances": [...]}, or one object) or JSONL file.

    Any public SWE-style dataset's records load (`datasets.normalize`); fields we do not use are kept in
    `Instance.extra`. `repo_source` paths are resolved against the file's folder; an instance without one is
    looked up in `repos_dir` as `<owner>__<name>` or `<name>` (a git repository folder or an archive);
    `require_source=False` loads records without a local repository (listing, converting).
    With `problems` (a list), a malformed record is appended there as "file:line: ..." and the rest still load;
    without it the first one raises.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InstanceError(f"{path}: cannot read instances file: {exc.strerror or exc}") from None
    origin = str(path.resolve())
    out: list[Instance] = []
    seen: dict[str, int] = {}
    for line, raw in _records(path, text):
        try:
            if isinstance(raw, InstanceError):
                raise raw
            inst = parse_instance(raw, where=f"{path}:{line}", base_dir=path.parent, repos_dir=repos_dir,
                                  require_source=require_source, origin=origin)
            if inst.instance_id in seen:
                raise InstanceError(f"{path}:{line}: instance_id: duplicate {inst.instance_id!r} "
                                    f"(first at line {seen[inst.instance_id]})")
        except InstanceError as exc:
            if problems is None:
                raise
            problems.append(str(exc))
            continue
        seen[inst.instance_id] = line
        out.append(inst)
    if not out:
        raise InstanceError(f"{path}: no instances found" + (f" ({len(problems)} malformed: {problems[0]})"
                                                             if problems else ""))
    return out


def _records(path: Path, text: str) -> Iterator[tuple[int, Any]]:
    """(line, decoded object) for each instance, so errors can point at the line it starts on."""
    stripped = text.lstrip()
    if stripped[:1] == "[" and path.suffix != ".jsonl":
        yield from _array_items(path, text)
        return
    if path.suffix != ".jsonl":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            if stripped[:1] != "{" or exc.msg != "Extra data":  # several objects, one a line: JSONL
                raise InstanceError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from None
        else:
            items = doc.get("instances", [doc]) if isinstance(doc, dict) else None
            if not isinstance(items, list):
                raise InstanceError(f"{path}:1: expected a list of instances, an object with 'instances', or JSONL")
            if items is not doc.get("instances"):
                yield 1 + text.count("\n", 0, len(text) - len(stripped)), doc
            else:
                yield from _array_items(path, text, text.index("[", text.index('"instances"')))
            return
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield n, json.loads(line)
            except json.JSONDecodeError as exc:  # reported for this line; the other lines still load
                yield n, InstanceError(f"{path}:{n}: invalid JSON: {exc.msg} (column {exc.colno})")


def _array_items(path: Path, text: str, start: int | None = None) -> Iterator[tuple[int, Any]]:
    """Decode a JSON array item by item, remembering the line each starts on."""
    decoder = json.JSONDecoder()
    i = (text.index("[") if start is None else start) + 1
    while True:
        i = _skip_ws(text, i)
        if i < len(text) and text[i] == "]":
            return
        try:
            obj, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise InstanceError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from None
        yield text.count("\n", 0, i) + 1, obj
        i = _skip_ws(text, end)
        if i < len(text) and text[i] == ",":
            i += 1
        elif i >= len(text) or text[i] != "]":
            raise InstanceError(f"{path}:{text.count(chr(10), 0, i) + 1}: invalid JSON: expected ',' or ']' "
                                "after an instance")


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _test_list(value: Any, where: str, name: str) -> list[str]:
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError as exc:
            raise InstanceError(f"{where}: {name}: not a JSON list of test ids: {exc.msg}") from None
    if not isinstance(value, list) or not all(isinstance(t, str) and t.strip() for t in value):
        raise InstanceError(f"{where}: {name}: must be a list of non-empty test id strings (or a JSON string "
                            "holding one)")
    return list(value)


def parse_instance(raw: Any, *, where: str, base_dir: Path | None = None, repos_dir: str | Path | None = None,
                   require_source: bool = True, origin: str = "") -> Instance:
    """Validate one decoded instance; `where` prefixes every error ("file:line"), `origin` names its file."""
    if not isinstance(raw, dict):
        raise InstanceError(f"{where}: an instance must be a JSON object, got {type(raw).__name__}")
    raw = normalize(raw)
    iid = raw.get("instance_id")
    where = f"{where}: instance {iid!r}" if isinstance(iid, str) and iid else where
    for name in _REQUIRED:
        if raw.get(name) in (None, ""):
            raise InstanceError(f"{where}: {name}: required field missing or empty")
    for name in ("instance_id", "repo", "base_commit", "problem_statement"):
        if not isinstance(raw[name], str):
            raise InstanceError(f"{where}: {name}: must be a string, got {type(raw[name]).__name__}")
    for name in _STRINGS:
        if raw.get(name) is not None and not isinstance(raw[name], str):
            raise InstanceError(f"{where}: {name}: must be a string, got {type(raw[name]).__name__}")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", raw["instance_id"]):
        raise InstanceError(f"{where}: instance_id: {raw['instance_id']!r} may only hold letters, digits, "
                            "'.', '_' and '-'")
    if not _REF.match(raw["base_commit"]):
        raise InstanceError(f"{where}: base_commit: {raw['base_commit']!r} is not a commit id or ref")
    f2p = _test_list(raw["FAIL_TO_PASS"], where, "FAIL_TO_PASS")
    if not f2p:
        raise InstanceError(f"{where}: FAIL_TO_PASS: needs at least one test (it is what decides resolved)")
    p2p = _test_list(raw.get("PASS_TO_PASS", []), where, "PASS_TO_PASS")
    for name in ("patch", "test_patch"):
        text = raw.get(name) or ""
        if text and "--- " not in text:
            raise InstanceError(f"{where}: {name}: not a unified diff (no '--- ' header)")
    difficulty = raw.get("difficulty", "medium")
    if difficulty not in ("easy", "medium", "hard"):
        raise InstanceError(f"{where}: difficulty: must be easy, medium or hard, got {difficulty!r}")
    split = raw.get("split", "test")
    if split not in ("train", "test"):
        raise InstanceError(f"{where}: split: must be train or test, got {split!r}")
    for name in ("log_parser", "eval_type", "image"):
        if raw.get(name) is not None and not isinstance(raw[name], str):
            raise InstanceError(f"{where}: {name}: must be a string, got {type(raw[name]).__name__}")
    env = raw.get("install_config") if raw.get("install_config") is not None else raw.get("env")
    if env is not None and not isinstance(env, dict):
        raise InstanceError(f"{where}: install_config: must be an object (python, packages, install, ...)")
    try:
        source = _resolve_source(raw, where, base_dir, repos_dir)
    except InstanceError:
        if require_source:
            raise
        source = ""
    return Instance(
        instance_id=raw["instance_id"], repo=raw["repo"], base_commit=raw["base_commit"],
        problem_statement=raw["problem_statement"], FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p,
        **{name: raw.get(name) or "" for name in _STRINGS if name != "repo_source"},
        repo_source=source, difficulty=difficulty, split=split,
        log_parser=raw.get("log_parser") or "", eval_type=raw.get("eval_type") or "", image=raw.get("image") or "",
        env=env or None, extra={k: v for k, v in raw.items() if k not in _KNOWN}, origin=origin,
    )


def _resolve_source(raw: dict[str, Any], where: str, base_dir: Path | None, repos_dir: str | Path | None) -> str:
    given = raw.get("repo_source") or raw.get("source")
    candidates: list[Path] = []
    if given:
        p = Path(given).expanduser()
        candidates.append(p if p.is_absolute() or base_dir is None else base_dir / p)
    elif repos_dir is not None:
        owner_name = raw["repo"].replace("/", "__")
        short = raw["repo"].rsplit("/", 1)[-1]
        for stem in (owner_name, short):
            candidates += [Path(repos_dir) / stem] + [Path(repos_dir) / (stem + s) for s in ARCHIVE_SUFFIXES]
    else:
        raise InstanceError(f"{where}: repo_source: required (a local git repository or an archive of one), or "
                            "pass a repositories folder holding <owner>__<name>")
    for candidate in candidates:
        if candidate.is_dir() or (candidate.is_file() and candidate.name.endswith(ARCHIVE_SUFFIXES)):
            return str(candidate.resolve())
    shown = ", ".join(str(c) for c in candidates[:4])
    raise InstanceError(f"{where}: repo_source: no git repository folder or archive "
                        f"({', '.join(ARCHIVE_SUFFIXES)}) at {shown}")
