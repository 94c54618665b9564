"""An FMI 2.0 co-simulation FMU of a model (``kd.codegen.to_fmu``).

:func:`to_fmu` writes the model's equations as C with run-time parameters
(:func:`kanedyn.compiled.c.to_c`), adds the FMI 2.0 functions around them
(:data:`WRAPPER`, written once for every model; the model-specific parts are tables),
compiles them into a shared library for this platform with the system C compiler, and
zips ``modelDescription.xml``, ``sources/`` and ``binaries/<platform>/`` into one
``.fmu`` file (FMI 2.0 standard, Modelica Association, 2014, sections 2.3 and 4).

The FMU's variables, in value-reference order:

* outputs: the coordinates ``q`` then the speeds ``u`` (names of
  :func:`kanedyn.model.names.coordinate_names` and ``speed_names``, SI units), each with
  ``initial="exact"`` and the model's initial state as its start value, settable before
  initialization (the initial state);
* inputs: the generalized efforts ``tau.<speed name>`` (N.m or N; zero at start), added
  to the joint springs and dampers; then per body a torque and a force at its mass
  centre, components in the body's axes, ``load.<body>.torque.x`` ... (N.m) and
  ``load.<body>.force.x`` ... (N; zero at start), added to the model's loads (as
  :class:`kanedyn.Torque` and :class:`kanedyn.Force` with ``frame="body"``: the ``loads``
  of :func:`kanedyn.compiled.c.to_c` with ``body_loads=True``);
* tunable parameters: every field of the C's ``prefix_params``
  (:func:`kanedyn.compiled.c.runtime_parameters`), named as kanedyn names them
  (``link0.mass``, ``hinge0.stiffness0``, ``gravity.y``).

``fmi2DoStep`` advances by the communication step in RK4 steps of at most ``step``
(``ceil(Δt / step)`` equal steps; one when ``Δt == step``), the step of
:func:`kanedyn.simulate`, the inputs held over the interval.
"""

from __future__ import annotations

import hashlib
import platform
import shutil
import subprocess
import sys
import tempfile
import uuid
import zipfile
from pathlib import Path
from xml.sax.saxutils import quoteattr

from kanedyn.compiled.c import literal, runtime_parameters, to_c
from kanedyn.errors import ModelError
from kanedyn.model import Model, State

__all__ = ["WRAPPER", "platform_dir", "to_fmu"]


def platform_dir() -> str:
    """The FMI 2.0 binaries folder of this platform: ``linux64``, ``darwin64``, ``win64``."""
    bits = "64" if sys.maxsize > 2**32 else "32"
    system = {"Linux": "linux", "Darwin": "darwin", "Windows": "win"}.get(platform.system())
    if system is None:
        raise ModelError(f"to_fmu: no FMI 2.0 platform name for {platform.system()!r}")
    return system + bits


#: The FMI 2.0 co-simulation functions, for every model: ``@P@`` is the C prefix of the
#: model's code, ``@M@`` that of its macros; the tables ``@P@_fmu_*`` come before it.
WRAPPER = r"""
#include <math.h>
#include <string.h>

typedef void *fmi2Component;
typedef void *fmi2ComponentEnvironment;
typedef void *fmi2FMUstate;
typedef unsigned int fmi2ValueReference;
typedef double fmi2Real;
typedef int fmi2Integer;
typedef int fmi2Boolean;
typedef char fmi2Char;
typedef const fmi2Char *fmi2String;
typedef char fmi2Byte;
typedef enum { fmi2OK, fmi2Warning, fmi2Discard, fmi2Error, fmi2Fatal, fmi2Pending } fmi2Status;
typedef enum { fmi2ModelExchange, fmi2CoSimulation } fmi2Type;
typedef enum { fmi2DoStepStatus, fmi2PendingStatus, fmi2LastSuccessfulTime,
               fmi2Terminated } fmi2StatusKind;
typedef void (*fmi2CallbackLogger)(fmi2ComponentEnvironment, fmi2String, fmi2Status,
                                   fmi2String, fmi2String, ...);
typedef void *(*fmi2CallbackAllocateMemory)(size_t, size_t);
typedef void (*fmi2CallbackFreeMemory)(void *);
typedef void (*fmi2StepFinished)(fmi2ComponentEnvironment, fmi2Status);
typedef struct {
    const fmi2CallbackLogger logger;
    const fmi2CallbackAllocateMemory allocateMemory;
    const fmi2CallbackFreeMemory freeMemory;
    const fmi2StepFinished stepFinished;
    const fmi2ComponentEnvironment componentEnvironment;
} fmi2CallbackFunctions;

#if defined(_WIN32)
#define FMI2_EXPORT __declspec(dllexport)
#else
#define FMI2_EXPORT __attribute__((visibility("default")))
#endif

typedef struct {
    double x[@M@_NX];
    double tau[@M@_N];
    double loads[@M@_NL];
    @P@_params p;
    double time;
    int failed;
    const fmi2CallbackFunctions *cb;
} Instance;

static void fmu_log(Instance *s, fmi2Status status, const char *message)
{
    if (s->cb->logger) s->cb->logger(s->cb->componentEnvironment, "@P@", status, "error", message);
}

/* the value of variable vr: q and u, then tau, then the body loads, then the parameters */
static double *fmu_ref(Instance *s, fmi2ValueReference vr)
{
    const fmi2ValueReference params = @M@_NX + @M@_N + @M@_NL;
    if (vr < @M@_NX) return &s->x[vr];
    if (vr < @M@_NX + @M@_N) return &s->tau[vr - @M@_NX];
    if (vr < params) return &s->loads[vr - @M@_NX - @M@_N];
    if (vr < params + @M@_NP) return @P@_fmu_param(&s->p, vr - params);
    return NULL;
}

static void fmu_defaults(Instance *s)
{
    int i;
    for (i = 0; i < @M@_NX; ++i) s->x[i] = @P@_fmu_x0[i];
    for (i = 0; i < @M@_N; ++i) s->tau[i] = 0.0;
    for (i = 0; i < @M@_NL; ++i) s->loads[i] = 0.0;
    s->p = @P@_default_params;
    s->time = 0.0;
    s->failed = 0;
}

FMI2_EXPORT const char *fmi2GetTypesPlatform(void) { return "default"; }
FMI2_EXPORT const char *fmi2GetVersion(void) { return "2.0"; }

FMI2_EXPORT fmi2Component fmi2Instantiate(fmi2String instanceName, fmi2Type fmuType,
        fmi2String fmuGUID, fmi2String fmuResourceLocation,
        const fmi2CallbackFunctions *functions, fmi2Boolean visible, fmi2Boolean loggingOn)
{
    Instance *s;
    (void)instanceName; (void)fmuResourceLocation; (void)visible; (void)loggingOn;
    if (!functions || !functions->allocateMemory || fmuType != fmi2CoSimulation) return NULL;
    if (!fmuGUID || strcmp(fmuGUID, @P@_fmu_guid) != 0) return NULL;
    s = (Instance *)functions->allocateMemory(1, sizeof(Instance));
    if (!s) return NULL;
    s->cb = functions;
    fmu_defaults(s);
    return s;
}

FMI2_EXPORT void fmi2FreeInstance(fmi2Component c)
{
    Instance *s = (Instance *)c;
    if (s && s->cb->freeMemory) s->cb->freeMemory(s);
}

FMI2_EXPORT fmi2Status fmi2SetDebugLogging(fmi2Component c, fmi2Boolean on, size_t n,
                                           const fmi2String categories[])
{ (void)c; (void)on; (void)n; (void)categories; return fmi2OK; }

FMI2_EXPORT fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean tolDefined,
        fmi2Real tol, fmi2Real start, fmi2Boolean stopDefined, fmi2Real stop)
{
    (void)tolDefined; (void)tol; (void)stopDefined; (void)stop;
    ((Instance *)c)->time = start;
    return fmi2OK;
}

FMI2_EXPORT fmi2Status fmi2EnterInitializationMode(fmi2Component c) { (void)c; return fmi2OK; }
FMI2_EXPORT fmi2Status fmi2ExitInitializationMode(fmi2Component c) { (void)c; return fmi2OK; }
FMI2_EXPORT fmi2Status fmi2Terminate(fmi2Component c) { (void)c; return fmi2OK; }

FMI2_EXPORT fmi2Status fmi2Reset(fmi2Component c)
{
    fmu_defaults((Instance *)c);
    return fmi2OK;
}

FMI2_EXPORT fmi2Status fmi2GetReal(fmi2Component c, const fmi2ValueReference vr[],
                                   size_t n, fmi2Real value[])
{
    size_t i;
    for (i = 0; i < n; ++i) {
        double *v = fmu_ref((Instance *)c, vr[i]);
        if (!v) { fmu_log((Instance *)c, fmi2Error, "unknown value reference"); return fmi2Error; }
        value[i] = *v;
    }
    return fmi2OK;
}

FMI2_EXPORT fmi2Status fmi2SetReal(fmi2Component c, const fmi2ValueReference vr[],
                                   size_t n, const fmi2Real value[])
{
    size_t i;
    for (i = 0; i < n; ++i) {
        double *v = fmu_ref((Instance *)c, vr[i]);
        if (!v) { fmu_log((Instance *)c, fmi2Error, "unknown value reference"); return fmi2Error; }
        *v = value[i];
    }
    return fmi2OK;
}

static fmi2Status fmu_none(fmi2Component c, size_t n)
{
    if (n == 0) return fmi2OK;
    fmu_log((Instance *)c, fmi2Error, "the FMU has only Real variables");
    return fmi2Error;
}

FMI2_EXPORT fmi2Status fmi2GetInteger(fmi2Component c, const fmi2ValueReference vr[],
                                      size_t n, fmi2Integer value[])
{ (void)vr; (void)value; return fmu_none(c, n); }
FMI2_EXPORT fmi2Status fmi2GetBoolean(fmi2Component c, const fmi2ValueReference vr[],
                                      size_t n, fmi2Boolean value[])
{ (void)vr; (void)value; return fmu_none(c, n); }
FMI2_EXPORT fmi2Status fmi2GetString(fmi2Component c, const fmi2ValueReference vr[],
                                     size_t n, fmi2String value[])
{ (void)vr; (void)value; return fmu_none(c, n); }
FMI2_EXPORT fmi2Status fmi2SetInteger(fmi2Component c, const fmi2ValueReference vr[],
                                      size_t n, const fmi2Integer value[])
{ (void)vr; (void)value; return fmu_none(c, n); }
FMI2_EXPORT fmi2Status fmi2SetBoolean(fmi2Component c, const fmi2ValueReference vr[],
                                      size_t n, const fmi2Boolean value[])
{ (void)vr; (void)value; return fmu_none(c, n); }
FMI2_EXPORT fmi2Status fmi2SetString(fmi2Component c, const fmi2ValueReference vr[],
                                     size_t n, const fmi2String value[])
{ (void)vr; (void)value; return fmu_none(c, n); }

static fmi2Status fmu_unsupported(fmi2Component c, const char *what)
{
    fmu_log((Instance *)c, fmi2Error, what);
    return fmi2Error;
}

FMI2_EXPORT fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *state)
{ (void)state; return fmu_unsupported(c, "FMU states are not supported"); }
FMI2_EXPORT fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate state)
{ (void)state; return fmu_unsupported(c, "FMU states are not supported"); }
FMI2_EXPORT fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *state)
{ (void)state; return fmu_unsupported(c, "FMU states are not supported"); }
FMI2_EXPORT fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate state,
                                                  size_t *size)
{ (void)state; (void)size; return fmu_unsupported(c, "FMU states are not supported"); }
FMI2_EXPORT fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate state,
                                             fmi2Byte bytes[], size_t size)
{ (void)state; (void)bytes; (void)size; return fmu_unsupported(c, "FMU states are not supported"); }
FMI2_EXPORT fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte bytes[],
                                               size_t size, fmi2FMUstate *state)
{ (void)state; (void)bytes; (void)size; return fmu_unsupported(c, "FMU states are not supported"); }
FMI2_EXPORT fmi2Status fmi2GetDirectionalDerivative(fmi2Component c,
        const fmi2ValueReference u[], size_t nu, const fmi2ValueReference z[], size_t nz,
        const fmi2Real du[], fmi2Real dz[])
{
    (void)u; (void)nu; (void)z; (void)nz; (void)du; (void)dz;
    return fmu_unsupported(c, "directional derivatives are not provided");
}
FMI2_EXPORT fmi2Status fmi2SetRealInputDerivatives(fmi2Component c,
        const fmi2ValueReference vr[], size_t n, const fmi2Integer order[], const fmi2Real value[])
{
    (void)vr; (void)order; (void)value;
    return n ? fmu_unsupported(c, "input derivatives are not used") : fmi2OK;
}
FMI2_EXPORT fmi2Status fmi2GetRealOutputDerivatives(fmi2Component c,
        const fmi2ValueReference vr[], size_t n, const fmi2Integer order[], fmi2Real value[])
{
    (void)vr; (void)order; (void)value;
    return n ? fmu_unsupported(c, "output derivatives are not provided") : fmi2OK;
}

FMI2_EXPORT fmi2Status fmi2DoStep(fmi2Component c, fmi2Real currentCommunicationPoint,
        fmi2Real communicationStepSize, fmi2Boolean noSetFMUStatePriorToCurrentPoint)
{
    Instance *s = (Instance *)c;
    double n_steps, h;
    long k, n;
    (void)noSetFMUStatePriorToCurrentPoint;
    if (s->failed) return fmi2Error;
    if (!(communicationStepSize > 0.0)) {
        fmu_log(s, fmi2Error, "the communication step must be positive");
        return fmi2Error;
    }
    n_steps = ceil(communicationStepSize / @P@_fmu_step * (1.0 - 1e-12));
    n = n_steps < 1.0 ? 1 : (long)n_steps;
    h = n == 1 ? communicationStepSize : communicationStepSize / (double)n;
    for (k = 0; k < n; ++k) {
        if (@P@_step(s->x, s->tau, s->loads, &s->p, h)) {
            s->failed = 1;
            fmu_log(s, fmi2Error, "the state is not finite (a singular mass matrix?)");
            return fmi2Error;
        }
    }
    s->time = currentCommunicationPoint + communicationStepSize;
    return fmi2OK;
}

FMI2_EXPORT fmi2Status fmi2CancelStep(fmi2Component c) { (void)c; return fmi2Error; }

FMI2_EXPORT fmi2Status fmi2GetStatus(fmi2Component c, const fmi2StatusKind kind,
                                     fmi2Status *value)
{ (void)kind; (void)value; return fmu_unsupported(c, "no asynchronous steps"); }
FMI2_EXPORT fmi2Status fmi2GetRealStatus(fmi2Component c, const fmi2StatusKind kind,
                                         fmi2Real *value)
{
    if (kind != fmi2LastSuccessfulTime) return fmu_unsupported(c, "no such status");
    *value = ((Instance *)c)->time;
    return fmi2OK;
}
FMI2_EXPORT fmi2Status fmi2GetIntegerStatus(fmi2Component c, const fmi2StatusKind kind,
                                            fmi2Integer *value)
{ (void)kind; (void)value; return fmu_unsupported(c, "no such status"); }
FMI2_EXPORT fmi2Status fmi2GetBooleanStatus(fmi2Component c, const fmi2StatusKind kind,
                                            fmi2Boolean *value)
{
    if (kind != fmi2Terminated) return fmu_unsupported(c, "no such status");
    *value = 0;
    return fmi2OK;
}
FMI2_EXPORT fmi2Status fmi2GetStringStatus(fmi2Component c, const fmi2StatusKind kind,
                                           fmi2String *value)
{ (void)kind; (void)value; return fmu_unsupported(c, "no such status"); }
"""


def _compiler() -> str:
    """The system C compiler (``cc``, ``gcc`` or ``clang``), or a ModelError."""
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return found
    raise ModelError("to_fmu: no C compiler (cc, gcc or clang) on PATH to build the FMU's binary")


def to_fmu(model: Model, path: str | Path, step: float = 0.01, *,
           name: str = "kd_model", state: State | None = None) -> Path:  # fmt: skip
    """Write ``model`` as an FMI 2.0 co-simulation FMU at ``path`` (see the module
    docstring): inputs the generalized efforts and the body loads, outputs the
    coordinates and speeds, tunable parameters the model's parameters.

    Parameters
    ----------
    model : Model
        A model the compiled engine takes (:func:`kanedyn.compiled.supports`).
    path : str or Path
        The ``.fmu`` file to write (its folder is created if missing).
    step : float
        The largest RK4 step inside a communication step (s), > 0.
    name : str
        The model identifier: a C identifier, the binary's name and the prefix of the C.
    state : State, optional
        The start values of the outputs (default ``model.initial_state()``).

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    ModelError
        A model the compiled engine does not take, a bad ``name`` or ``step``, no C
        compiler, or a compiler error.
    """
    if not (step > 0.0 and step < float("inf")):
        raise ModelError(f"to_fmu: step must be a positive number of seconds, got {step!r}")
    from kanedyn.model.names import (
        coordinate_names,
        coordinate_units,
        effort_units,
        speed_names,
        speed_units,
    )

    path = Path(path)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "sources"
        h, c = to_c(model, src, prefix=name, parameters="runtime", body_loads=True)
        params = runtime_parameters(model)
        # the outputs: x = [q_joints | η | u | ξ] (the modal states of flexible bodies
        # included); the efforts are the joints' (model.n)
        nq, nu = model.nq_total, model.n_total
        state = model.initial_state() if state is None else model.check_state(state, flexible=True)
        x0 = [*map(float, state.q), *map(float, state.u)]
        names = coordinate_names(model) + speed_names(model)
        units = coordinate_units(model) + speed_units(model)
        tau_names = [f"tau.{s}" for s in speed_names(model)[: model.n]]
        xml_vars = []
        for i, (nm, unit) in enumerate(zip(names, units, strict=True)):
            modal = model.nq <= i < nq or i >= nq + model.n
            what = ("modal " if modal else "") + ("coordinate" if i < nq else "speed")
            xml_vars.append(_variable(nm, i, "output", "continuous", "exact", x0[i], unit,
                                      f"{what} x[{i}]"))  # fmt: skip
        efforts = effort_units(model)[: model.n]
        for r, (nm, unit) in enumerate(zip(tau_names, efforts, strict=True)):
            xml_vars.append(_variable(nm, nq + nu + r, "input", "continuous", None,
                                      0.0, unit, f"generalized effort tau[{r}]"))  # fmt: skip
        base = nq + nu + model.n
        for i, b in enumerate(model.bodies):
            for v, (what, unit) in enumerate((("torque", "N.m"), ("force", "N"))):
                for c_ in range(3):
                    k = 6 * i + 3 * v + c_
                    xml_vars.append(_variable(
                        f"load.{b.name}.{what}.{'xyz'[c_]}", base + k, "input", "continuous",
                        None, 0.0, unit, f"{what} at the mass centre, body axes: loads[{k}]"))  # fmt: skip
        base += 6 * model.nb
        for k, par in enumerate(params):
            xml_vars.append(_variable(par.name, base + k, "parameter", "tunable", "exact",
                                      par.value, par.unit, f"parameter p.{par.field}"))  # fmt: skip
        all_units = sorted({u for u in units + effort_units(model) + [p.unit for p in params]}
                           | {"N", "N.m"})  # fmt: skip
        body = "\n".join(xml_vars)
        guid = "{" + str(uuid.UUID(hashlib.sha256((body + h.read_text() + c.read_text())
                                                  .encode()).hexdigest()[:32])) + "}"  # fmt: skip
        outputs = "\n".join(f'      <Unknown index="{i + 1}"/>' for i in range(nq + nu))
        unit_defs = "\n".join(f"    <Unit name={quoteattr(u)}/>" for u in all_units if u != "1")
        xml = f"""<?xml version="1.0" encoding="UTF-8"?>
<fmiModelDescription fmiVersion="2.0" modelName={quoteattr(name)} guid="{guid}"
  description="equations of motion of a {model.nb}-body model, generated by kanedyn (kd.codegen.to_fmu)"
  generationTool="kanedyn" numberOfEventIndicators="0">
  <CoSimulation modelIdentifier="{name}" canHandleVariableCommunicationStepSize="true"
    canNotUseMemoryManagementFunctions="false">
    <SourceFiles>
      <File name="{c.name}"/>
      <File name="{name}_fmu.c"/>
    </SourceFiles>
  </CoSimulation>
  <UnitDefinitions>
{unit_defs}
  </UnitDefinitions>
  <DefaultExperiment startTime="0.0" stepSize="{step!r}"/>
  <ModelVariables>
{body}
  </ModelVariables>
  <ModelStructure>
    <Outputs>
{outputs}
    </Outputs>
  </ModelStructure>
</fmiModelDescription>
"""
        P = name.upper()
        cases = "\n".join(f"    case {k}: return &p->{par.field};" for k, par in enumerate(params))
        x0_c = ", ".join(literal(v) for v in x0)
        tables = f"""/* {name}_fmu.c: the FMI 2.0 co-simulation functions of {name}.c, generated by
 * kanedyn (kd.codegen.to_fmu). */
#include <stddef.h>
#include "{h.name}"

static const char *const {name}_fmu_guid = "{guid}";
static const double {name}_fmu_step = {literal(step)};
static const double {name}_fmu_x0[{P}_NX] = {{{x0_c}}};

static double *{name}_fmu_param({name}_params *p, unsigned int k)
{{
    switch (k) {{
{cases}
    default: return NULL;
    }}
}}
"""
        wrapper = src / f"{name}_fmu.c"
        wrapper.write_text(tables + WRAPPER.replace("@M@", P).replace("@P@", name))
        binaries = Path(tmp) / "binaries" / platform_dir()
        binaries.mkdir(parents=True)
        suffix = {"linux": ".so", "darwin": ".dylib", "win": ".dll"}[platform_dir()[:-2]]
        lib = binaries / (name + suffix)
        res = subprocess.run(
            [_compiler(), "-std=c99", "-O2", "-shared", "-fPIC", "-fvisibility=hidden",
             "-I", str(src), str(c), str(wrapper), "-o", str(lib), "-lm"],
            capture_output=True, text=True,
        )  # fmt: skip
        if res.returncode != 0:
            raise ModelError(f"to_fmu: the C compiler failed on the FMU's sources:\n{res.stderr}")
        path.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("modelDescription.xml", xml)
            for f in (h, c, wrapper):
                z.write(f, f"sources/{f.name}")
            z.write(lib, f"binaries/{platform_dir()}/{lib.name}")
    return path


def _variable(name: str, vr: int, causality: str, variability: str, initial: str | None,
              start: float, unit: str, description: str) -> str:  # fmt: skip
    """One ``<ScalarVariable>`` of type Real."""
    init = f' initial="{initial}"' if initial else ""
    unit_attr = f" unit={quoteattr(unit)}" if unit != "1" else ""
    return (f"    <ScalarVariable name={quoteattr(name)} valueReference=\"{vr}\" "
            f"causality=\"{causality}\" variability=\"{variability}\"{init} "
            f"description={quoteattr(description)}>\n"
            f"      <Real start=\"{start!r}\"{unit_attr}/>\n    </ScalarVariable>")  # fmt: skip
