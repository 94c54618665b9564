"""Plain Unicode text of a derivation, for a terminal (``print(eom.stages())``), and the
numbers as a reader expects to see them.

* :func:`readable_numbers`: a rational with more than :data:`DIGITS` digits in its
  numerator or denominator (the exact value of a binary float, such as a joint
  rotation's cosine) is shown as a decimal rounded to :data:`DIGITS` significant digits,
  and a number the user wrote as a decimal (``0.3333``, exact as ``3333/10000``) as that
  decimal; small fractions (``1/3``, ``1/12``) stay fractions. Exponents are left alone.
  Display only: the derivation stays exact.
* :func:`text`: a sympy expression as one line of Unicode (``m_link1·c_link1,x²``,
  ``s_elbow_0`` for ``sin(q_elbow_0)``, ``u̇_elbow_0``), the names of the tables
  (``\\omega_{\\mathrm{B},x}``) written as ``ω_B,x``.
* :func:`from_latex`: the small LaTeX vocabulary of the stage tables (``\\mathrm``,
  sub- and superscripts, Greek letters, ``\\times``, ``\\cdot``, ``\\dot``, matrices) as
  Unicode text.
"""

from __future__ import annotations

import re
from typing import Any

import sympy as sm
from sympy.printing.str import StrPrinter

__all__ = ["DIGITS", "from_latex", "readable_numbers", "shown_float", "text"]

#: Numbers with more digits than this are shown rounded to this many significant digits.
DIGITS = 6

_GREEK = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "zeta": "ζ",
    "eta": "η", "theta": "θ", "iota": "ι", "kappa": "κ", "lambda": "λ", "mu": "μ",
    "nu": "ν", "xi": "ξ", "pi": "π", "rho": "ρ", "sigma": "σ", "tau": "τ",
    "upsilon": "υ", "phi": "φ", "chi": "χ", "psi": "ψ", "omega": "ω", "Gamma": "Γ",
    "Delta": "Δ", "Theta": "Θ", "Lambda": "Λ", "Xi": "Ξ", "Pi": "Π", "Sigma": "Σ",
    "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω",
}  # fmt: skip
_SYMBOLS = {
    "times": "×", "cdot": "·", "sum": "Σ", "partial": "∂", "dots": "…", "ldots": "…",
    "quad": "  ", "qquad": "    ", "le": "≤", "ge": "≥", "neq": "≠", "to": "→",
    "approx": "≈", "hline": "",
}  # fmt: skip
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
_DOT = "\u0307"  # combining dot above
_ACCENTS = {"dot": _DOT, "ddot": "\u0308", "bar": "\u0304", "hat": "\u0302", "tilde": "\u0303"}


def _exact_decimal(x: sm.Rational) -> str | None:
    """The terminating decimal of ``x`` when it has at most 12 significant digits."""
    q = int(x.q)
    twos = fives = 0
    while q % 2 == 0:
        q //= 2
        twos += 1
    while q % 5 == 0:
        q //= 5
        fives += 1
    if q != 1:
        return None
    places = max(twos, fives)
    digits = str(abs(int(x.p)) * 10**places // int(x.q))
    if len(digits.lstrip("0").rstrip("0")) > 12:
        return None
    whole, frac = digits[:-places] or "0", digits[-places:].rjust(places, "0")
    return f"{'-' if x < 0 else ''}{whole}.{frac.rstrip('0') or '0'}"


def _number(x: sm.Rational) -> sm.Basic:
    """A readable stand-in for the rational ``x`` (see :func:`readable_numbers`)."""
    if x.q == 1 and len(str(abs(x.p))) <= 12:
        return x
    decimal = _exact_decimal(x) if x.q != 1 else None
    if decimal is not None:
        return sm.Float(decimal, 15)
    if len(str(abs(x.p))) <= DIGITS and len(str(x.q)) <= DIGITS:
        return x
    rounded = float(f"{float(x):.{DIGITS}g}")
    return sm.Integer(int(rounded)) if rounded.is_integer() else sm.Float(rounded, 15)


def readable_numbers(e: Any) -> Any:
    """``e`` with its long or decimal rationals as decimals (see the module docstring);
    exponents are kept exact."""
    if isinstance(e, sm.MatrixBase):
        return e.applyfunc(readable_numbers)
    if not isinstance(e, sm.Basic):
        return e
    return _readable(e)


def _readable(e: sm.Basic) -> sm.Basic:
    if isinstance(e, sm.Rational):
        return _number(e)
    if not e.args or isinstance(e, (sm.Symbol, sm.Float)):
        return e
    if isinstance(e, sm.Pow):
        base = _readable(e.base)
        return e if base is e.base else sm.Pow(base, e.exp)
    args = [_readable(a) for a in e.args]
    if all(a is b for a, b in zip(args, e.args, strict=True)):
        return e
    return e.func(*args)


def shown_float(x: Any) -> str:
    """A float as its shortest form at 12 significant digits (``0.3333``, ``9.81``)."""
    s = f"{float(x):.12g}"
    return s if any(c in s for c in ".en") else s + ".0"


def from_latex(tex: str) -> str:
    """The stage tables' LaTeX (one entry, a name or an inline formula) as Unicode text."""
    return re.sub(r"^- ", "-", _Tex(tex).read().strip())


class _Tex:
    """A small recursive reader of the tables' LaTeX."""

    def __init__(self, tex: str) -> None:
        self.s = tex
        self.i = 0

    def read(self, stop: str = "") -> str:
        out: list[str] = []
        while self.i < len(self.s):
            c = self.s[self.i]
            if stop and c in stop:
                break
            if c == "\\":
                out.append(self._command())
            elif c == "{":
                self.i += 1
                out.append(self.read("}"))
                self.i += 1
            elif c in "_^":
                self.i += 1
                arg = self._argument()
                out.append(_script(c, arg))
            elif c == "&":
                self.i += 1
                out.append(" ")
            else:
                out.append(c)
                self.i += 1
        return re.sub(r"  +", " ", "".join(out)) if not stop else "".join(out)

    def _argument(self) -> str:
        """One argument: a braced group, a command, or one character."""
        while self.i < len(self.s) and self.s[self.i] == " ":
            self.i += 1
        if self.i >= len(self.s):
            return ""
        c = self.s[self.i]
        if c == "{":
            self.i += 1
            out = self.read("}")
            self.i += 1
            return out
        if c == "\\":
            return self._command()
        self.i += 1
        return c

    def _command(self) -> str:
        m = re.compile(r"\\([A-Za-z]+|.)").match(self.s, self.i)
        assert m is not None
        self.i = m.end()
        name = m.group(1)
        if name in ("left", "right", "big", "Big"):
            return ""
        if name in ("mathrm", "text", "mathbf", "operatorname"):
            return self._argument()
        if name in _ACCENTS:
            arg = self._argument()
            return arg[:1] + _ACCENTS[name] + arg[1:]
        if name == "frac":
            a, b = self._argument(), self._argument()
            return f"{_group(a)}/{_group(b)}"
        if name == "sqrt":
            return f"√{_group(self._argument())}"
        if name in ("sin", "cos", "tan"):
            return name
        if name == "begin":
            env = self._argument()
            body = self.read_until(f"\\end{{{env}}}")
            if env == "bmatrix":
                return f"[{_matrix(body)}]"
            return _matrix(body) if env == "matrix" else from_latex(body)
        if name == "\\":
            return "; "
        if name in (",", ";", " ", "!"):
            return " "
        if name in _GREEK:
            return _GREEK[name]
        if name in _SYMBOLS:
            if name in ("partial", "sum"):
                while self.i < len(self.s) and self.s[self.i] == " ":
                    self.i += 1
            return _SYMBOLS[name]
        return name

    def read_until(self, end: str) -> str:
        k = self.s.find(end, self.i)
        k = len(self.s) if k < 0 else k
        body = self.s[self.i : k]
        self.i = k + len(end)
        return body


def _group(x: str) -> str:
    return x if re.fullmatch(r"[\w.·̇]+", x) else f"({x})"


def _script(kind: str, arg: str) -> str:
    arg = arg.strip()
    if kind == "^":
        if arg == "T":
            return "ᵀ"
        if arg == "*":
            return "*"
        if re.fullmatch(r"-?\d+", arg):
            return arg.translate(_SUPERSCRIPT)
        return "^" + (arg if re.fullmatch(r"[^\W_]+", arg) else f"({arg})")
    if re.fullmatch(r"[\w,.'̇]+( [\w,.'̇]+)*", arg):
        return "_" + arg.replace(" ", "_")
    return f"_({arg})"


def _matrix(body: str) -> str:
    rows = [r for r in re.split(r"\\\\", body) if r.strip()]
    cells = [[re.sub(r"^- ", "-", from_latex(c).strip()) for c in r.split("&")] for r in rows]
    return "; ".join(", ".join(r) for r in cells)


class _TextPrinter(StrPrinter):
    """sympy's ``str`` with Unicode names, ``·`` products, superscript powers and the
    short sines and cosines of the coordinates."""

    def _print_Symbol(self, e: Any) -> str:
        name = e.name
        return from_latex(name if "\\" in name or "{" in name else sm.latex(e))

    def _print_Function(self, e: Any) -> str:
        a = e.args[0] if e.args else None
        if e.func in (sm.sin, sm.cos) and isinstance(a, sm.Symbol) and a.name.startswith("q_"):
            return f"{e.func.__name__[0]}_{a.name[2:]}"
        return str(super()._print_Function(e))

    def _print_Float(self, e: Any) -> str:
        return shown_float(e)

    def _print_Pow(self, e: Any, rational: bool = False) -> str:
        b, x = e.args
        if x.is_Integer and 1 < int(x) < 10:
            base = self.parenthesize(b, sm.printing.precedence.PRECEDENCE["Pow"])
            return base + str(int(x)).translate(_SUPERSCRIPT)
        return str(super()._print_Pow(e, rational)).replace("**", "^")

    def _print_Mul(self, e: Any) -> str:
        return str(super()._print_Mul(e)).replace("*", "·")


_TEXT = _TextPrinter({"order": None})


def text(e: Any) -> str:
    """``e`` (a sympy expression) as one line of Unicode text (see the module
    docstring)."""
    return str(_TEXT.doprint(readable_numbers(sm.sympify(e))))
