"""The ``kvlint`` console command: the same command line as the Rust binary, run in-process."""

from __future__ import annotations

import sys


def main() -> None:
    from kvlint_cache._kvlint import run_cli

    sys.exit(run_cli(list(sys.argv)))


if __name__ == "__main__":  # python -m kvlint_cache._cli
    main()
