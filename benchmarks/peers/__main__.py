"""`python -m benchmarks.peers openenv [--setup | --quick]`: build the OpenEnv peer's own venv, or run the
comparison alone (it also runs inside `python -m benchmarks.run --only serving`)."""

from __future__ import annotations

import argparse
import sys

from benchmarks.peers import OPENENV_VENV, openenv_missing, openenv_python, setup_openenv


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("peer", choices=["openenv"])
    parser.add_argument("--setup", action="store_true",
                        help=f"build or complete {OPENENV_VENV}: openenv-core, then mcpworld and its ORM")
    parser.add_argument("--quick", action="store_true", help="c = 1, 64, 256 and fewer episodes")
    args = parser.parse_args(argv)
    if args.setup:
        out = setup_openenv()
        print(f"{OPENENV_VENV} ready in {out['seconds']:.0f} s ({out['runtime_seconds']:.0f} s of it for "
              f"mcpworld's runtime); {out['mib']:.0f} MiB")
        return 0
    if openenv_python() is None:
        print(openenv_missing(), file=sys.stderr)
        return 1
    from benchmarks.common import print_table
    from benchmarks.peers.openenv import openenv_rows

    rows = openenv_rows(args.quick)
    print_table(rows)
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
