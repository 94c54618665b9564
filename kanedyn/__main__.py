"""``python -m kanedyn`` and the ``kanedyn`` console script (:func:`run`).

The command line's own module (:mod:`kanedyn.cli`, with NumPy behind it) is imported
inside :func:`run`, so that Ctrl-C while it loads ends the command with one line and exit
code 130, as Ctrl-C does at any later moment, rather than with a traceback.
"""

import sys


def run() -> int:
    """Import the command line and run it; Ctrl-C during the import exits 130."""
    try:
        from kanedyn.cli import main
    except KeyboardInterrupt:
        print("kanedyn: interrupted", file=sys.stderr)
        return 130
    return main()


if __name__ == "__main__":
    sys.exit(run())
