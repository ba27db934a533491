"""Every public function's errors name one of its own parameters (issue 27).

The guard walks ``otlp.__all__`` and the ``__all__`` of the public subpackages, calls each
callable with a valid baseline (:data:`BASELINES`) and then, one parameter at a time, with
invalid values generated from the parameter's annotation (wrong type, negative, NaN, infinite,
wrong shape, unknown name). A ``ValueError`` or ``TypeError`` must name a parameter of that
function: the text before the first ``:`` is one (``q[0]`` names ``q``, ``"m, dim"`` names
``m``), or a parameter's name appears in the message as a word. Any other exception from a
bad argument (``IndexError``, ``AttributeError``, ``ZeroDivisionError``, ...) fails too.

A new public callable fails :func:`test_every_public_callable_has_a_baseline_or_is_a_record`
until it gets a baseline here (or is listed as a record type the library builds itself).
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import otlp

# otlp.solvers and otlp.instances (the backends' table, the instance suites) are not walked here,
# as before they moved under otlp: their own tests check their arguments.
MODULES = [
    "otlp",
    *(f"otlp.{name}" for name in otlp.SUBPACKAGES if name not in ("solvers", "instances")),
]

# Result and record types the library builds for the caller, exceptions, protocols, abstract
# bases and type aliases: not called with user input.
RECORDS = {
    "otlp.DraftVerification",
    "otlp.multistep.BlockEfficiencyBound",
    "otlp.ProblemTooLarge",
    "otlp.SubsetSelection",
    "otlp.TransportPlan",
    "otlp.VerificationError",
    "otlp.VerificationReport",
    "otlp.VerificationWarning",
    "otlp.decoding.DecodeResult",
    "otlp.decoding.FirstStep",
    "otlp.decoding.Fidelity",
    "otlp.decoding.ModelPair",
    "otlp.decoding.TreeModel",
    "otlp.decoding.TreeSession",
    "otlp.TreeVerification",
    "otlp.multistep.AutoregressiveModel",
    "otlp.multistep.BlockLPResult",
    "otlp.multistep.TreeOptimum",
    "otlp.multistep.EfficiencyRow",
    "otlp.multistep.OptimalSelection",
    "otlp.multistep.OutputLaw",
    "otlp.multistep.PrefixTable",
    "otlp.multistep.SimulationResult",
    "otlp.multistep.SingleStepVerifier",
    "otlp.rules.DraftJoint",
    "otlp.rules.ExactJoint",
    "otlp.rules.Rule",
    "otlp.rules.RuleDraw",
    "otlp.sketch.QJLKey",
    "otlp.sketch.SampleSketch",
    "otlp.validate.Case",
    "otlp.validate.Check",
    "otlp.validate.CheckResult",
    "otlp.validate.Outcome",
    "otlp.validate.Report",
}

# Callables whose baseline needs torch models on disk: their bad arguments are tested with tiny
# random models in tests/test_decoding_own_models.py, not walked here.
NOT_WALKED = {
    "otlp.decoding.fidelity": "needs two loaded torch models",
    "otlp.decoding.load_model_pair": "needs model folders or GGUF files on disk",
}

P3 = [0.5, 0.3, 0.2]
Q3 = [0.2, 0.3, 0.5]


def _inst() -> otlp.Instance:
    return otlp.Instance(P3, Q3, 2)


def _models() -> tuple[Any, Any]:
    return otlp.multistep.model_pair("markov", 2, depth=3)


def _pair(**arguments: Any) -> dict[str, Any]:
    """A baseline of ``target`` and ``draft`` (:func:`_models`) and ``arguments``."""
    target, draft = _models()
    return {"target": target, "draft": draft, **arguments}


def _tables() -> tuple[Any, Any]:
    target, draft = _models()
    return otlp.multistep.tabulate(target, 2), otlp.multistep.tabulate(draft, 2)


def _tree() -> dict[str, Any]:
    rows = np.array([[P3] * 3]), np.array([[Q3] * 3])
    return {"tokens": np.array([[0, 1]]), "p": rows[0], "q": rows[1]}


def _prefix_pair() -> tuple[Any, Any]:
    target, draft = _models()
    return otlp.decoding.PrefixLM(target), otlp.decoding.PrefixLM(draft)


# Public name -> keyword arguments of a call that succeeds (small and fast).
BASELINES: dict[str, Callable[[], dict[str, Any]]] = {
    "otlp.Instance": lambda: {"p": P3, "q": Q3, "n": 2, "scheme": "iid", "top_k": 3},
    "otlp.Tolerances": lambda: {"target_l1": 1e-7, "draft_l1": 1e-7, "negative": 1e-8},
    "otlp.describe_methods": dict,
    "otlp.method_names": dict,
    "otlp.optimal_acceptance": lambda: {"inst": _inst(), "method": "auto"},
    "otlp.psi": lambda: {"inst": _inst(), "mask": np.array([True, False, False])},
    "otlp.solve": lambda: {"inst": _inst(), "method": "maxflow"},
    "otlp.verify": lambda: {"plan": otlp.solve(_inst(), "maxflow", check=False)},
    "otlp.verify_drafts": lambda: {
        "p": P3,
        "q": Q3,
        "drafts": [[0, 1]],
        "method": "maxflow_cs",
        "top_k": 3,
        "rng": 0,
    },
    "otlp.verification.default_method": lambda: {"scheme": "iid"},
    "otlp.decoding.ancestors": lambda: {"parents": otlp.decoding.chain(2), "node": 1},
    "otlp.decoding.chain": lambda: {"length": 2},
    "otlp.decoding.check_parents": lambda: {"parents": [-1, 0]},
    "otlp.decoding.children": lambda: {"parents": [-1, 0]},
    "otlp.decoding.children_probability": lambda: {"q": Q3, "omega": [0, 1], "scheme": "iid"},
    "otlp.decoding.depth": lambda: {"parents": [-1, 0]},
    "otlp.decoding.k_ary_tree": lambda: {"branching": [2, 1]},
    "otlp.decoding.node_law": lambda: {
        "p": np.array(P3),
        "q": np.array(Q3),
        "omega": np.array([0]),
        "method": "sps",
    },
    "otlp.outcome_law": lambda: {
        **{key: value[0] for key, value in _tree().items()},
        "parents": [-1, 0],
        "method": "sps",
    },
    "otlp.decoding.path_shape": lambda: {"parents": [-1, 0]},
    "otlp.decoding.path_tree": lambda: {"paths": 2, "length": 2},
    "otlp.decoding.restrict_top_k": lambda: {"q": np.array([Q3]), "top_k": 2},
    "otlp.decoding.sample_children": lambda: {"q": [Q3], "n": 2, "rng": 0},
    "otlp.verify_chain": lambda: {**_tree(), "method": "sps", "rng": 0},
    "otlp.verify_tree": lambda: {
        **_tree(),
        "parents": [-1, 0],
        "method": "sps",
        "rng": 0,
    },
    "otlp.decoding.Memoized": lambda: {"fn": _models()[0]},
    "otlp.decoding.PrefixLM": lambda: {"fn": _models()[0], "temperature": 1.0},
    "otlp.decoding.Speculation": lambda: {"method": "sps", "parents": otlp.decoding.chain(2)},
    "otlp.decoding.MemoizedTreeLM": lambda: {"model": _prefix_pair()[0], "top_k": 2},
    "otlp.decoding.measure_first_step": lambda: {
        "target": _prefix_pair()[0],
        "draft": _prefix_pair()[1],
        "prompt": [0],
        "parents": otlp.decoding.chain(2),
        "methods": ["sps"],
        "samples": 2,
        "seed": 0,
    },
    "otlp.decoding.decode": lambda: {
        "target": _prefix_pair()[0],
        "draft": _prefix_pair()[1],
        "prompts": [[0]],
        "speculation": otlp.decoding.Speculation("sps", otlp.decoding.chain(2)),
        "max_new_tokens": 2,
        "seed": 0,
    },
    "otlp.multistep.NGramModel": lambda: {"table": [[0.5, 0.5]] * 3},
    "otlp.multistep.NodeSpace": lambda: {"vocab_size": 2, "gamma": 1},
    "otlp.multistep.PlanVerifier": lambda: {"method": "maxflow"},
    "otlp.multistep.TabularModel": lambda: {"conditionals": [[[0.5, 0.5]]]},
    "otlp.multistep.antichain_violations": lambda: {
        "weights": np.zeros(2),
        "draft_mass": np.full(2, 0.5),
        "space": otlp.multistep.NodeSpace(2, 1),
        "paths": 2,
    },
    "otlp.multistep.budget_violation": lambda: {
        "budgets": (np.array([1.0, 0.8]),),
        "target": otlp.multistep.tabulate(_models()[0], 1),
        "draft": otlp.multistep.tabulate(_models()[1], 1),
        "paths": 2,
    },
    "otlp.multistep.efficiency_sweep": lambda: _pair(
        gammas=[1], paths=[1], methods=["token"], lp=False
    ),
    "otlp.multistep.enumerate_antichains": lambda: {"space": otlp.multistep.NodeSpace(2, 1)},
    "otlp.multistep.expected_accepted": lambda: _pair(gamma=2, method="block"),
    "otlp.multistep.get_verifier": lambda: {"rule": "ot"},
    "otlp.multistep.markov_model": lambda: {
        "initial": [0.5, 0.5],
        "transition": [[0.5, 0.5], [0.5, 0.5]],
    },
    "otlp.multistep.model_pair": lambda: {"kind": "markov", "vocab": 2, "seed": 0, "depth": 3},
    "otlp.multistep.multi_path_lp": lambda: _pair(gamma=1, paths=2),
    "otlp.multistep.optimal_block_efficiency": lambda: _pair(gamma=1, shape="kary2"),
    "otlp.multistep.tree_optimum": lambda: _pair(gamma=1, shape="paths2"),
    "otlp.verification.rule_block_efficiency": lambda: _pair(gamma=1, method="rrs", shape="kary2"),
    "otlp.multistep.optimal_path_selection": lambda: _pair(gamma=1, paths=2),
    "otlp.multistep.output_distribution": lambda: _pair(gamma=1, method="token"),
    "otlp.multistep.output_law": lambda: _pair(gamma=1, method="token"),
    "otlp.multistep.simulate": lambda: _pair(gamma=1, method="token", calls=3),
    "otlp.multistep.single_path_lp": lambda: _pair(gamma=2),
    "otlp.multistep.skewed_table": lambda: {
        "target": _tables()[0],
        "draft": _tables()[1],
        "gamma": 1,
        "paths": 2,
    },
    "otlp.multistep.block_efficiency_bound": lambda: _pair(gamma=1, shape="kary2"),
    "otlp.multistep.tabulate": lambda: {"model": _models()[0], "depth": 2},
    "otlp.multistep.target_distribution": lambda: {"target": _models()[0], "length": 1},
    "otlp.rules.describe": dict,
    "otlp.rules.get": lambda: {"name": "rrs"},
    "otlp.rules.names": dict,
    "otlp.sketch.JL": lambda: {"m": 2, "dim": 3, "rng": 0, "copies": 2, "kind": "sign"},
    "otlp.sketch.QJL": lambda: {"m": 2, "dim": 3, "rng": 0, "constant": "printed"},
    "otlp.sketch.CountSketch": lambda: {"m": 2, "dim": 3, "rng": 0},
    "otlp.sketch.PrioritySampling": lambda: {"m": 2, "dim": 3, "rng": 0},
    "otlp.sketch.ThresholdSampling": lambda: {"m": 2, "dim": 3, "rng": 0},
    "otlp.sketch.estimate_inner_products": lambda: {
        "method": "jl_sign",
        "a": [1.0, 2.0],
        "b": [3.0, 4.0],
        "m": 2,
        "rng": 0,
        "copies": 2,
    },
    "otlp.validate.checks": dict,
    "otlp.validate.get": lambda: {"name": "gr.thm3_1.subset_selection"},
    "otlp.validate.replay": lambda: {"name": "gr.thm3_1.subset_selection", "seed": 0, "index": 1},
    "otlp.validate.run": lambda: {"checks": ["gr.thm3_1.subset_selection"], "count": 1, "seed": 0},
    "otlp.validate.select": lambda: {"checks": ["gr."]},
    "otlp.warm_up": lambda: {"dtypes": (np.float64,)},
}


def _public() -> dict[str, Any]:
    import importlib

    found: dict[str, Any] = {}
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if callable(obj) and not inspect.ismodule(obj) and not _listed(obj, found):
                found[f"{module_name}.{name}"] = obj  # under its first public name only
    return found


def _listed(obj: Any, found: dict[str, Any]) -> bool:
    return any(obj is other for other in found.values())


PUBLIC = _public()


def test_every_public_callable_has_a_baseline_or_is_a_record() -> None:
    missing = sorted(set(PUBLIC) - set(BASELINES) - RECORDS - set(NOT_WALKED))
    assert not missing, f"give these a baseline in BASELINES (or list them in RECORDS): {missing}"
    assert not set(BASELINES) - set(PUBLIC), "a baseline for a name that is no longer public"


def _invalid(annotation: str, baseline: Any) -> Iterator[tuple[str, Any]]:
    """Invalid values for a parameter, from its annotation (a string: the package uses
    ``from __future__ import annotations``) and its valid baseline value."""
    text = annotation.replace(" ", "")
    if "Callable" in text:  # callbacks: not values a caller gets wrong by type
        return
    yield "wrong type", object()
    if isinstance(baseline, bool) or text == "bool":
        return
    if isinstance(baseline, int) or re.search(r"\bint\b", text):
        yield "a string", "x"
        yield "negative", -1
        yield "fractional", 2.5
        yield "nan", math.nan
    if isinstance(baseline, float) or re.search(r"\bfloat\b", text):
        yield "a string", "x"
        yield "negative", -1.0
        yield "nan", math.nan
        yield "inf", math.inf
    if isinstance(baseline, str):
        yield "unknown name", "nosuch"
        yield "a number", 3
    if isinstance(baseline, list | tuple | np.ndarray):
        arr = np.asarray(baseline)
        yield "a string", "x"
        yield "empty", []
        yield "an extra axis", np.expand_dims(arr, 0).tolist() * 2
        if arr.dtype.kind in "fi" and arr.size:
            yield "nan entries", np.full(arr.shape, math.nan).tolist()
            yield "negative entries", (-np.abs(arr) - 1).tolist()


def _names_a_parameter(message: str, parameters: list[str]) -> bool:
    head = message.split(":", 1)[0] if ":" in message else ""
    heads = {part.strip() for part in re.split(r"[,/]", re.sub(r"\[.*?\]", "", head))}
    if heads & set(parameters):
        return True
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", message))
    return any(name in words for name in parameters if len(name) > 1)


def _cases() -> Iterator[Any]:
    for qualname, make in sorted(BASELINES.items()):
        func = PUBLIC[qualname]
        signature = inspect.signature(func)
        baseline = make()
        for parameter in signature.parameters.values():
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                continue
            value = baseline.get(parameter.name, parameter.default)
            if value is inspect.Parameter.empty:
                continue
            annotation = str(parameter.annotation)
            for label, bad in _invalid(annotation, value):
                yield pytest.param(
                    qualname, parameter.name, bad, id=f"{qualname}({parameter.name}={label})"
                )


def test_baselines_run() -> None:
    for qualname, make in BASELINES.items():
        PUBLIC[qualname](**make())


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(("qualname", "parameter", "bad"), list(_cases()))
def test_errors_name_a_parameter_of_the_function(qualname: str, parameter: str, bad: Any) -> None:
    func = PUBLIC[qualname]
    parameters = list(inspect.signature(func).parameters)
    arguments = {**BASELINES[qualname](), parameter: bad}
    try:
        func(**arguments)
    except (ValueError, TypeError) as exc:
        if not _names_a_parameter(str(exc), parameters):
            pytest.fail(f"{type(exc).__name__} names none of {parameters}: {exc}")
    except Exception as exc:  # any other exception from a bad argument is a bug
        pytest.fail(f"{type(exc).__name__} (not a ValueError naming an argument): {exc}")
