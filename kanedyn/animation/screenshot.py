"""Screenshot an animation page with headless Chromium.

Usage::

    python -m kanedyn.animation.screenshot PAGE.html OUT.png [--t SECONDS] [--size 960x640]
    python -m kanedyn.animation.screenshot --example explorer1 OUT.png [--t SECONDS]
    python -m kanedyn.animation.screenshot --example flexible_spacecraft OUT.png [--t SECONDS]

The second form simulates the built-in Explorer-1 flat spin (20000 s, RK4 with
Δt = 1 s, an output every 20 s, as ``kanedyn simulate`` does), animates it and
screenshots the page; the documentation's picture is made this way. The third
simulates the 20° slew of :func:`kanedyn.examples.flexible_spacecraft` (30 s, RK4 with
Δt = 0.01 s, an output every 0.1 s) and draws the solar arrays' deflection 20 times
true size.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from kanedyn.animation.browser import screenshot
from kanedyn.errors import KanedynError


def _example(name: str, page: Path) -> None:
    import kanedyn as kd

    if name == "flexible_spacecraft":
        case = kd.examples.flexible_spacecraft()
        traj = kd.simulate(case.model, case.state, 30.0, 0.01, controller=case.controller,
                           output_every=0.1, progress=False)  # fmt: skip
        traj.animate(page, title="A 20° slew with flexible solar arrays", deflection_scale=20.0,
                     view=(0.2, -0.4, 1.0))  # fmt: skip
        return
    if name != "explorer1":
        raise KanedynError(f"unknown example {name!r} (known: explorer1, flexible_spacecraft)")
    model = kd.examples.explorer1()
    state = kd.examples.explorer1_state(model)
    traj = kd.simulate(model, state, 20000.0, 1.0, output_every=20.0, progress=False)
    traj.animate(page, title="Explorer 1: the energy-sink flat spin")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kanedyn.animation.screenshot",
                                 description="Screenshot a kanedyn animation page.")  # fmt: skip
    ap.add_argument("page", nargs="?", help="the animation HTML file")
    ap.add_argument("png", help="the PNG file to write")
    ap.add_argument(
        "--example", help="animate a built-in example instead (explorer1, flexible_spacecraft)"
    )
    ap.add_argument("--t", type=float, help="time to show [s] (the page's #t=)")
    ap.add_argument("--size", default="960x640", help="window size WIDTHxHEIGHT")
    args = ap.parse_args(argv)
    try:
        w, h = (int(x) for x in args.size.lower().split("x"))
        with tempfile.TemporaryDirectory() as tmp:
            page = Path(tmp, "animation.html") if args.example else Path(args.page or "")
            if args.example:
                _example(args.example, page)
            elif not page.is_file():
                raise KanedynError(f"{args.page}: no such animation page")
            out = screenshot(page, args.png, t=args.t, size=(w, h))
    except (KanedynError, ValueError) as exc:
        print(f"screenshot: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
