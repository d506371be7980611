"""Which way a shell command goes in simulated mode: refused, answered (pip install), run for real, or SWT.

SWE-World's split: file operations and read-only inspection are real (cheap, and SWT would only get them wrong);
running repository code is what SWT predicts; installing packages is answered as success; destructive commands are
refused outright. Unknown programs go to SWT: they may well run repository code (`make test`, `./run.sh`).
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from typing import Literal

Route = Literal["refuse", "pip", "real", "model"]

# Programs whose effect is reading or editing files: run for real on the workspace.
REAL = {
    "ls", "cat", "grep", "egrep", "fgrep", "rg", "ag", "find", "head", "tail", "wc", "sed", "awk", "gawk", "sort",
    "uniq", "cut", "tr", "diff", "cmp", "tree", "pwd", "echo", "printf", "true", "false", "test", "[", "which",
    "type", "file", "stat", "du", "basename", "dirname", "realpath", "readlink", "nl", "tac", "rev", "od", "xxd",
    "hexdump", "strings", "column", "fold", "fmt", "paste", "join", "comm", "cd", "export", "unset", "set", "mkdir",
    "touch", "cp", "mv", "rm", "rmdir", "ln", "chmod", "tee", "patch", "sleep", "date", "whoami", "id", "uname",
    "env", "printenv", "md5sum", "sha1sum", "sha256sum", "tar", "gzip", "gunzip", "zcat", "unzip", "jq", "less",
    "more", "locate", "ctags", "exit", "source", ".", "alias", "history", "clear",
}
# git subcommands that only read or change the working tree (push is refused, the rest of git is real too).
GIT_READ = {"status", "diff", "log", "show", "grep", "ls-files", "blame", "branch", "rev-parse", "describe",
            "shortlog", "tag", "config", "checkout", "restore", "stash", "add", "reset", "apply", "mv", "rm",
            "clean", "switch", "cat-file", "ls-tree", "reflog", "commit", "init", "remote", "fetch", "clone"}
PIP = {"pip", "pip3", "uv", "poetry", "conda", "mamba"}
_PYTHON = re.compile(r"^python[\d.]*$")
_WRAPPERS = {"sudo", "exec", "nohup", "time", "command", "builtin", "nice", "stdbuf", "xargs"}
_REDIRECT = re.compile(r"[0-9]*[<>]+&[0-9-]*|&>+")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1[^\n]*\n(.*?\n)?[ \t]*\2[ \t]*(?=\n|$)", re.S)

_DESTRUCTIVE: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\brm\s+(?:-[-\w]*\s+)*(?:/|/\*|~|~/|~/\*|\$HOME|\$\{HOME\}|\"\$HOME\"|/\w+)\s*(?:$|[;&|)])"),
     "deleting the root, home or a system folder"),
    (re.compile(r"\brm\b[^;&|\n]*--no-preserve-root"), "deleting the root folder"),
    (re.compile(r"\bmkfs(?:\.\w+)?\b"), "formatting a file system"),
    (re.compile(r"\bdd\b[^;&|\n]*\bof=/dev/"), "writing raw data to a device"),
    (re.compile(r">\s*/dev/(?:sd|nvme|hd|xvd|vd|disk)\w*"), "writing raw data to a device"),
    (re.compile(r"(?:^|[;&|(`\n])\s*(?:sudo\s+)?(?:shutdown|reboot|halt|poweroff)\b"), "shutting the machine down"),
    (re.compile(r"\binit\s+[06]\b"), "shutting the machine down"),
    (re.compile(r":\s*\(\s*\)\s*\{.*:\s*\|\s*:.*\}"), "a fork bomb"),
    (re.compile(r"\bchmod\s+(?:-[-\w]*\s+)*-R\s+(?:-[-\w]*\s+)*[0-7]{3,4}\s+/(?:\s|$|\*)"),
     "changing permissions of the whole file system"),
    (re.compile(r"\bchmod\s+(?:-[-\w]*\s+)*[0-7]{3,4}\s+-R\s+/(?:\s|$|\*)"),
     "changing permissions of the whole file system"),
    (re.compile(r"\bchown\s+(?:-[-\w]*\s+)*-R\s+\S+\s+/(?:\s|$|\*)"), "changing owners of the whole file system"),
    (re.compile(r"\b(?:kill|pkill|killall)\s+(?:-\w+\s+)*-?1\b(?!\d)"), "killing every process"),
    (re.compile(r"\b(?:curl|wget)\b[^;&\n]*\|\s*(?:sudo\s+)?(?:ba|z|da)?sh\b"), "running a script from the network"),
]


@dataclass(frozen=True)
class Decision:
    route: Route
    reason: str = ""
    command: str = ""  # what to run or simulate (pip install segments replaced by `true`)


def destructive(command: str) -> str | None:
    """Why `command` is refused as destructive, or None."""
    flat = command.replace("\\\n", " ")
    for pattern, why in _DESTRUCTIVE:
        if pattern.search(flat):
            return why
    for segment in split_segments(flat):
        words = command_words(segment)
        if words and os.path.basename(words[0]) == "git" and git_subcommand(words) == "push":
            return "pushing to a remote repository"
    return None


def git_subcommand(words: list[str]) -> str:
    """The subcommand of a git command line (global options such as -C DIR and -c KEY=VALUE skipped)."""
    rest = words[1:]
    while rest and rest[0].startswith("-"):
        rest = rest[2:] if rest[0] in ("-C", "-c", "--git-dir", "--work-tree", "--namespace") else rest[1:]
    return rest[0] if rest else ""


def refusal_message(command: str, why: str) -> str:
    return (f"Refused: `{command.strip()[:200]}` looks destructive ({why}). Commands that could damage the "
            "machine, the file system or remote repositories are not run in this sandbox.")


def _strip_heredocs(command: str) -> str:
    return _HEREDOC.sub(lambda m: "<<" + m.group(2) + "\n", command)


def split_segments(command: str) -> list[str]:
    """Simple commands of a command line: split at ; & | && || and newlines outside quotes."""
    text = _REDIRECT.sub(" > ", _strip_heredocs(command))
    out, cur, quote, i = [], [], "", 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and quote != "'" and i + 1 < len(text):
            cur.append(text[i:i + 2])
            i += 2
            continue
        if quote:
            quote = "" if ch == quote else quote
            cur.append(ch)
        elif ch in "'\"":
            quote = ch
            cur.append(ch)
        elif ch in ";&|\n":
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    out.append("".join(cur))
    return [s for s in out if s.strip()]


def command_words(segment: str) -> list[str]:
    try:
        words = shlex.split(segment, comments=True)
    except ValueError:
        words = segment.split()
    while words and re.match(r"^[A-Za-z_]\w*=", words[0]):  # VAR=value prefixes
        words = words[1:]
    while words:
        head = os.path.basename(words[0])
        if head in _WRAPPERS:
            words = [w for w in words[1:]]
            while words and words[0].startswith("-"):  # wrapper options (xargs -0, nice -n ...: close enough)
                words = words[1:]
            continue
        if head == "env":
            rest = words[1:]
            while rest and (rest[0].startswith("-") or "=" in rest[0]):
                rest = rest[1:]
            if not rest:
                return words
            words = rest
            continue
        if head == "timeout":
            rest = [w for w in words[1:]]
            while rest and rest[0].startswith("-"):
                rest = rest[1:]
            words = rest[1:]  # drop the duration
            continue
        break
    return words


def _is_pip_install(words: list[str]) -> bool:
    if not words:
        return False
    prog = os.path.basename(words[0])
    if _PYTHON.match(prog) and words[1:3] == ["-m", "pip"]:
        words = words[2:]
        prog = "pip"
    if prog in PIP:
        rest = [w for w in words[1:] if not w.startswith("-")]
        if prog == "uv" and rest[:1] == ["pip"]:
            rest = rest[1:]
        return bool(rest) and rest[0] in ("install", "add", "uninstall", "remove", "sync", "download")
    return False


def _segment_route(words: list[str]) -> Route:
    if not words:
        return "real"
    prog = os.path.basename(words[0])
    if prog in ("bash", "sh", "zsh", "dash") and len(words) >= 3 and words[1] == "-c":
        return classify(words[2]).route
    if prog == "git":
        sub = git_subcommand(words)
        return "real" if sub in GIT_READ or not sub else "model"
    if prog in REAL:
        return "real"
    return "model"


def classify(command: str) -> Decision:
    """Route a whole command: refused if any part is destructive; SWT if any part runs code; else real."""
    why = destructive(command)
    if why:
        return Decision("refuse", refusal_message(command, why), command)
    segments = split_segments(command)
    if not segments:
        return Decision("real", "", command)
    routes = []
    pip_segments = []
    for segment in segments:
        words = command_words(segment)
        if _is_pip_install(words):
            pip_segments.append(segment)
            routes.append("pip")
        else:
            routes.append(_segment_route(words))
    if all(r == "pip" for r in routes):
        return Decision("pip", "package installation is answered as success in simulated mode", command)
    rewritten = command
    for segment in pip_segments:  # `pip install -e . && pytest`: keep the rest, answer the install
        if segment.strip() not in rewritten:  # could not cut it out cleanly: let SWT predict it all
            return Decision("model", "runs repository code", command)
        rewritten = rewritten.replace(segment.strip(), "true", 1)
    if "model" in routes:
        return Decision("model", "runs repository code", rewritten)
    return Decision("real", "reads or edits files", rewritten)


def pip_packages(command: str) -> list[str]:
    """The package arguments of a pip-like install command (for a plausible success message)."""
    out: list[str] = []
    for segment in split_segments(command):
        words = command_words(segment)
        if not _is_pip_install(words):
            continue
        skip = False
        for w in words[1:]:
            if skip:
                skip = False
                continue
            if w in ("-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url", "-f",
                     "--find-links", "--target", "-t", "--prefix"):
                skip = True
                continue
            if w.startswith("-") or w in ("pip", "install", "add", "-m") or _PYTHON.match(w):
                continue
            out.append(w)
    return out
