"""Test-log parsers that read logs exactly as the SWE-bench harness does, so FAIL_TO_PASS ids match its datasets.

The harness does not normalise test ids: each parser keeps what its framework printed, quirks included (pytest
summary ids are cut at their first space, `unittest`/Django tests are named by their docstring's first line when
they have one, Python >= 3.11 prints `test_x (module.Class.test_x)`). Matching those quirks is the point: a
dataset's FAIL_TO_PASS list was produced by these rules. `tests/swe/test_logparsers.py` runs the official
`swebench` parsers beside these on logs of real test runs and asserts identical results.

`PARSERS` maps the harness's parser names (an instance's `log_parser`) to functions; `REPO_PARSERS` is its
repository map; `parser_name(...)` picks one for an instance.
"""

from __future__ import annotations

import re
from collections.abc import Callable

PASSED, FAILED, SKIPPED, ERROR, XFAIL = "PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL"
STATUSES = (FAILED, PASSED, SKIPPED, ERROR, XFAIL)  # what the harness's TestStatus holds (no XPASS)
Parser = Callable[[str], dict[str, str]]

_SKIP_COUNT = re.compile(r"\[\d+\]")
_CONTROL = str.maketrans("", "", "".join(chr(c) for c in range(1, 32)))
_COLOUR = re.compile(r"\[\d+m")


def _status_word(line: str) -> bool:
    return line.startswith(STATUSES)


def _skip_summary(status: str, name: str) -> bool:
    """pytest's `SKIPPED [3] file.py:12: reason`: the [3] is a count, not a test."""
    return status == SKIPPED and _SKIP_COUNT.fullmatch(name) is not None


def _summary_lines(log: str, rename: Callable[[str], str] | None = None,
                   prepare: Callable[[str], str] | None = None) -> dict[str, str]:
    """pytest `-rA` summary lines (`STATUS id [- message]`): the id is the first word after the status."""
    out: dict[str, str] = {}
    for line in log.split("\n"):
        if prepare is not None:
            line = prepare(line)
        if not _status_word(line):
            continue
        if line.startswith(FAILED):
            line = line.replace(" - ", " ")
        words = line.split()
        if len(words) < 2 or _skip_summary(words[0], words[1]):
            continue
        out[rename(words[1]) if rename else words[1]] = words[0]
    return out


def parse_pytest(log: str) -> dict[str, str]:
    """pytest's summary lines; a parametrized id holding a space is cut at it, as in SWE-bench's lists."""
    return _summary_lines(log)


def _short_option(name: str) -> str:
    """`test[/abs/path/to/file]` -> `test[/file]` (absolute paths in parameters differ between machines)."""
    start, end = name.find("["), name.rfind("]")
    if start == -1 or end <= start:
        return name
    main, option = name[:start], name[start + 1:end]
    if option.startswith("/") and not option.startswith("//") and "*" not in option:
        option = "/" + option.split("/")[-1]
    return f"{main}[{option}]"


def parse_pytest_options(log: str) -> dict[str, str]:
    """pytest summary lines, path parameters shortened to their last part (requests, pylint, pydicom)."""
    return _summary_lines(log, rename=_short_option)


def parse_pytest_v2(log: str) -> dict[str, str]:
    """Later pytest logs (astropy, scikit-learn, sphinx): colour codes and control characters removed, whole ids
    kept (spaces included), and `id STATUS` lines of older pytest versions read too."""
    out: dict[str, str] = {}
    for raw in log.split("\n"):
        line = _COLOUR.sub("", raw).translate(_CONTROL)
        if _status_word(line):
            if line.startswith(FAILED):
                line = line.split(" - ", 1)[0]
            words = line.split()
            if len(words) >= 2 and not _skip_summary(words[0], words[1]):
                out[" ".join(words[1:])] = words[0]
        elif line.endswith(STATUSES):
            words = line.split()
            if len(words) >= 2:
                out[" ".join(words[:-1])] = words[-1]
    return out


def parse_matplotlib(log: str) -> dict[str, str]:
    """pytest summary lines with mouse-button enum names written as their numbers."""
    return _summary_lines(log, prepare=lambda line: line.replace("MouseButton.LEFT", "1")
                          .replace("MouseButton.RIGHT", "3"))


def parse_seaborn(log: str) -> dict[str, str]:
    """seaborn's logs: `FAILED id`, `id PASSED ...` or `PASSED id`."""
    out: dict[str, str] = {}
    for line in log.split("\n"):
        words = line.split()
        if len(words) < 2:
            continue
        if line.startswith(FAILED):
            out[words[1]] = FAILED
        elif f" {PASSED} " in line:
            if words[1] == PASSED:
                out[words[0]] = PASSED
        elif line.startswith(PASSED):
            out[words[1]] = PASSED
    return out


_DJANGO_PASS = (" ... ok", " ... OK", " ...  OK")
_DJANGO_7188 = "Applying sites.0002_alter_domain_unique...test_no_migrations"
# A long message printed between "name ... " and "ok" that spans lines (Django's own runner does this).
_DJANGO_INTERRUPTED = [re.compile(p, re.MULTILINE) for p in (
    r"^(.*?)\s\.\.\.\sTesting against Django installed in ((?s:.*?)) silenced\)\.\nok$",
    r"^(.*?)\s\.\.\.\sInternal Server Error: \/(.*)\/\nok$",
    r"^(.*?)\s\.\.\.\sSystem check identified no issues \(0 silenced\)\nok$",
)]


def parse_django(log: str) -> dict[str, str]:
    """Django's runner and `python -m unittest -v`: `name ... ok|FAIL|ERROR|skipped`, `FAIL: name`, and `ok` on
    a later line. A test with a docstring is named by the docstring's first line (what unittest prints last)."""
    out: dict[str, str] = {}
    previous: str | None = None
    for raw in log.split("\n"):
        line = raw.strip()
        if "--version is equivalent to version" in line:
            out["--version is equivalent to version"] = PASSED
        if " ... " in line:
            previous = line.split(" ... ")[0]
        for suffix in _DJANGO_PASS:
            if line.endswith(suffix):
                if line.strip().startswith(_DJANGO_7188):
                    line = line.split("...", 1)[-1].strip()
                out[line.rsplit(suffix, 1)[0]] = PASSED
                break
        if " ... skipped" in line:
            out[line.split(" ... skipped")[0]] = SKIPPED
        if line.endswith(" ... FAIL"):
            out[line.split(" ... FAIL")[0]] = FAILED
        if line.startswith("FAIL:") and len(line.split()) > 1:
            out[line.split()[1].strip()] = FAILED
        if line.endswith(" ... ERROR"):
            out[line.split(" ... ERROR")[0]] = ERROR
        if line.startswith("ERROR:") and len(line.split()) > 1:
            out[line.split()[1].strip()] = ERROR
        if line.lstrip().startswith("ok") and previous is not None:
            out[previous] = PASSED
    for pattern in _DJANGO_INTERRUPTED:
        for match in pattern.finditer(log):
            out[match.group(1)] = PASSED
    return out


_SYMPY_FAILURE = re.compile(r"_* (.*)\.py:(.*) _*")


def parse_sympy(log: str) -> dict[str, str]:
    """sympy's `bin/test`: `test_x ok|F|E` lines, and `___ path.py:test_x ___` failure headers."""
    out: dict[str, str] = {}
    for path, name in _SYMPY_FAILURE.findall(log):
        out[f"{path}.py:{name}"] = FAILED
    for raw in log.split("\n"):
        line = raw.strip()
        if not line.startswith("test_"):
            continue
        if line.endswith(" E"):
            out[line.split()[0]] = ERROR
        if line.endswith(" F"):
            out[line.split()[0]] = FAILED
        if line.endswith(" ok"):
            out[line.split()[0]] = PASSED
    return out


PARSERS: dict[str, Parser] = {
    "parse_log_pytest": parse_pytest,
    "parse_log_pytest_options": parse_pytest_options,
    "parse_log_pytest_v2": parse_pytest_v2,
    "parse_log_django": parse_django,
    "parse_log_seaborn": parse_seaborn,
    "parse_log_sympy": parse_sympy,
    "parse_log_matplotlib": parse_matplotlib,
    **{f"parse_log_{name}": parse_pytest for name in
       ("astroid", "flask", "marshmallow", "pvlib", "pyvista", "sqlfluff", "xarray")},
    **{f"parse_log_{name}": parse_pytest_options for name in ("pydicom", "requests", "pylint")},
    **{f"parse_log_{name}": parse_pytest_v2 for name in ("astropy", "scikit", "sphinx")},
}

REPO_PARSERS: dict[str, str] = {
    "astropy/astropy": "parse_log_astropy",
    "django/django": "parse_log_django",
    "marshmallow-code/marshmallow": "parse_log_marshmallow",
    "matplotlib/matplotlib": "parse_log_matplotlib",
    "mwaskom/seaborn": "parse_log_seaborn",
    "pallets/flask": "parse_log_flask",
    "psf/requests": "parse_log_requests",
    "pvlib/pvlib-python": "parse_log_pvlib",
    "pydata/xarray": "parse_log_xarray",
    "pydicom/pydicom": "parse_log_pydicom",
    "pylint-dev/astroid": "parse_log_astroid",
    "pylint-dev/pylint": "parse_log_pylint",
    "pytest-dev/pytest": "parse_log_pytest",
    "pyvista/pyvista": "parse_log_pyvista",
    "scikit-learn/scikit-learn": "parse_log_scikit",
    "sqlfluff/sqlfluff": "parse_log_sqlfluff",
    "sphinx-doc/sphinx": "parse_log_sphinx",
    "sympy/sympy": "parse_log_sympy",
}

FRAMEWORK_PARSERS = {"pytest": "parse_log_pytest", "unittest": "parse_log_django", "django": "parse_log_django",
                     "sympy": "parse_log_sympy"}


class UnknownParser(ValueError):
    """An instance names a log parser we do not have; the message lists the ones we do."""


def parser_name(repo: str, framework: str = "pytest", given: str = "") -> str:
    """The parser for an instance: its own `log_parser`, else the harness's choice for its repository, else the
    one for its test framework."""
    if given:
        if given not in PARSERS:
            raise UnknownParser(f"log_parser {given!r} is not one mcpworld has; choose one of "
                                f"{', '.join(sorted(PARSERS))}")
        return given
    base = repo.split("/", 1)[-1].split(".", 1)[0] if repo.startswith("swesmith/") else ""
    if "__" in base:  # SWE-smith: swesmith/<owner>__<name>.<commit>
        repo = base.replace("__", "/", 1)
    return REPO_PARSERS.get(repo) or FRAMEWORK_PARSERS.get(framework, "parse_log_pytest")


def parse(log: str, name: str) -> dict[str, str]:
    """Test id -> status, read from `log` with the parser called `name`."""
    try:
        return PARSERS[name](log)
    except KeyError:
        raise UnknownParser(f"log_parser {name!r} is not one mcpworld has") from None
