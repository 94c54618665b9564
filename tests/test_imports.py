"""``import kanedyn`` stays light: sympy and matplotlib load on first use only.

Each check runs in a fresh interpreter, since this test process has imported both already.
"""

import subprocess
import sys
import textwrap


def run_python(code: str) -> str:
    res = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_import_kanedyn_loads_neither_sympy_nor_matplotlib():
    out = run_python(
        """
        import sys

        import kanedyn as kd
        import kanedyn.cli
        import kanedyn.plotting

        heavy = sorted(m for m in sys.modules if m.startswith(("sympy", "matplotlib")))
        assert not heavy, heavy
        # the numeric path runs without them too
        model = kd.examples.chain(2)
        kd.mass_matrix(model, model.initial_state())
        heavy = sorted(m for m in sys.modules if m.startswith(("sympy", "matplotlib")))
        assert not heavy, heavy
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_import_kanedyn_loads_only_the_scipy_a_tree_simulation_needs():
    """scipy.integrate (adaptive methods) and scipy.special (Monte Carlo draws) load on
    first use; a fixed-step run of a tree needs neither."""
    out = run_python(
        """
        import sys

        import kanedyn as kd

        def loaded():
            heavy = ("scipy.integrate", "scipy.special", "sympy", "matplotlib")
            return sorted(m for m in sys.modules if m.startswith(heavy))

        assert not loaded(), loaded()
        model = kd.examples.chain(2)
        state = model.set_joint(model.initial_state(), "joint0", angles=[0.5])
        traj = kd.simulate(model, state, 0.1, 0.01, progress=False)
        assert traj.t.size == 11 and not loaded(), loaded()
        assert kd.simulate(model, state, 0.1, 0.01, method="DOP853", progress=False).t.size
        assert "scipy.integrate" in sys.modules
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_symbolic_loads_on_first_access():
    out = run_python(
        """
        import sys

        import kanedyn as kd

        assert "symbolic" in kd.__all__ and "symbolic" in dir(kd)
        assert "sympy" not in sys.modules and "kanedyn.symbolic" not in sys.modules
        assert callable(kd.symbolic.kane)
        assert "sympy" in sys.modules and kd.symbolic is sys.modules["kanedyn.symbolic"]
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_unknown_attribute_is_still_an_attribute_error():
    out = run_python(
        """
        import kanedyn as kd

        try:
            kd.no_such_name
        except AttributeError as exc:
            print(exc)
        """
    )
    assert "no_such_name" in out


def test_old_module_paths_warn_and_reach_the_moved_modules():
    """Modules that moved into the layered packages keep their old import paths,
    deprecated: each attribute read warns, naming the new module, and is the new
    module's object; patching the old path patches the new module."""
    import importlib

    import pytest

    import kanedyn
    from kanedyn.simulation import integrate

    for old, new in kanedyn._MOVED.items():
        module = importlib.import_module(new)
        public = [n for n in dir(module) if not n.startswith("_")]
        with pytest.warns(DeprecationWarning, match=f"kanedyn.{old} is deprecated; use {new}"):
            value = getattr(importlib.import_module(f"kanedyn.{old}"), public[0])
        assert value is getattr(module, public[0])
    with pytest.warns(DeprecationWarning, match="kanedyn.integrate is deprecated"):
        from kanedyn.integrate import simulate as old_simulate
    assert old_simulate is integrate.simulate is kanedyn.simulate
    original = integrate.check_times
    try:
        with pytest.warns(DeprecationWarning):
            importlib.import_module("kanedyn.integrate").check_times = "patched"
        assert integrate.check_times == "patched"
    finally:
        integrate.check_times = original


def test_the_command_line_parser_loads_no_engine():
    """``kanedyn --help`` builds the parser only: no scipy, no compiled engine, no model
    layer (every public name of kanedyn is imported on first use)."""
    out = run_python(
        """
        import sys

        import kanedyn
        from kanedyn.cli import build_parser

        assert "simulate" in build_parser().format_help()
        heavy = ("scipy", "sympy", "matplotlib", "kanedyn.compiled", "kanedyn.dynamics",
                 "kanedyn.model", "kanedyn.io")
        loaded = sorted(m for m in sys.modules if m.startswith(heavy))
        assert not loaded, loaded
        assert isinstance(kanedyn.Model, type) and "kanedyn.model" in sys.modules
        assert set(kanedyn.__all__) <= set(dir(kanedyn))
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_an_old_module_path_keeps_the_public_function_of_the_same_name():
    out = run_python(
        """
        import kanedyn as kd
        import kanedyn.kinematics
        import kanedyn.partials
        from kanedyn.dynamics import kinematics as module

        assert kanedyn.kinematics is kd.kinematics is module.kinematics  # the function
        assert callable(kd.partials) and not isinstance(kd.partials, type(module))
        assert module.__spec__.name == "kanedyn.dynamics.kinematics"
        import sys
        assert sys.modules["kanedyn.kinematics"].__dict__["target"] is module  # deprecated
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_every_public_name_resolves_on_first_access():
    """Each name of ``kanedyn.__all__`` imports from the module the lazy table names (a
    name moved to another module without updating ``kanedyn._LAZY`` fails here)."""
    out = run_python(
        """
        import types

        import kanedyn as kd

        for name in kd.__all__:
            value = getattr(kd, name)
            assert value is not None, name
            if isinstance(value, types.ModuleType):
                assert name in kd._SUBMODULES, name
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_public_module_names_of_the_facade_import_without_warning():
    """``kanedyn.msd`` and ``kanedyn.rotation`` are the facade's modules (kd.msd,
    kd.rotation), not deprecated paths."""
    out = run_python(
        """
        import warnings

        warnings.simplefilter("error")
        import kanedyn as kd
        from kanedyn.msd import momenta
        from kanedyn.rotation import skew

        assert momenta is kd.msd.momenta and skew is kd.skew
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_ctrl_c_while_the_command_line_loads_exits_130_with_one_line():
    """SIGINT delivered while ``kanedyn``'s entry point imports the command line (here: as
    NumPy is imported) ends with one line and exit code 130, no traceback; without the
    signal the same entry point runs."""

    script = textwrap.dedent(
        """
        import importlib.abc, os, signal, sys

        class Interrupt(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name == "numpy" and os.environ.get("INTERRUPT"):
                    os.kill(os.getpid(), signal.SIGINT)
                return None

        sys.meta_path.insert(0, Interrupt())
        sys.argv = ["kanedyn", "--help"]
        from kanedyn.__main__ import run
        sys.exit(run())
        """
    )
    env = {**__import__("os").environ, "INTERRUPT": "1"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 130
    assert done.stderr == "kanedyn: interrupted\n" and "Traceback" not in done.stdout
    env.pop("INTERRUPT")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and "simulate" in done.stdout
