"""The persisted models (``core/schema``: result.json; ``results/tune.py``: tune.json) hold a free-form
``dict[str, Any]`` only where wattbench does not shape the data: ``FREE_FORM`` names each such field
with the reason. A new one fails here (give it a model, or add it with its reason); one typed since
fails too, until it is taken off the list — so the list only shrinks."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Any, Optional, get_args, get_origin

from pydantic import BaseModel

import wattbench.core.schema as schema_pkg
import wattbench.results.tune as tune_file

# (model, field) -> why it stays free-form
FREE_FORM: dict[tuple[str, str], str] = {
    ("ServerIdentity", "exposed"): "the server's own settings as it exposes them, by source: its shape is the server's",
    ("ServerInfo", "effective_config"): "the engine's own configuration (its flags, or what it reports): the engine's shape",
    ("ServerInfo", "extra_body"): "request fields the user (--extra-body) or an engine adds to every request",
    ("Result", "extra"): "keys an older file holds that no field names yet, kept as read",
    ("LevelResult", "extra"): "keys an older file holds that no field names yet, kept as read",
    ("TuneResult", "config"): "the TuneConfig as given, the recorded run configuration among it; read by no code",
}


def _free_form(tp: Any) -> bool:
    """Whether an annotation is, or holds, a ``dict[str, Any]`` (or a bare ``dict``)."""
    if tp is dict:
        return True
    if get_origin(tp) is dict:
        args = get_args(tp)
        if len(args) == 2 and args[1] is Any:
            return True
    return any(_free_form(a) for a in get_args(tp))


def _modules() -> list[ModuleType]:
    mods = [importlib.import_module(f"{schema_pkg.__name__}.{m.name}")
            for m in pkgutil.iter_modules(schema_pkg.__path__)]
    return mods + [tune_file]


def _models() -> list[type[BaseModel]]:
    out = []
    for mod in _modules():
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__module__ == mod.__name__:
                out.append(obj)
    return out


def _found() -> set[tuple[str, str]]:
    return {(m.__name__, name) for m in _models() for name, f in m.model_fields.items() if _free_form(f.annotation)}


def test_the_detector_sees_a_free_form_dict_wherever_it_is_nested() -> None:
    assert _free_form(dict[str, Any]) and _free_form(Optional[dict[str, Any]]) and _free_form(list[dict[str, Any]])
    assert _free_form(dict[str, dict[str, Any]]) and _free_form(dict)
    assert not _free_form(dict[str, float]) and not _free_form(dict[str, list[str]]) and not _free_form(Any)


def test_the_walk_reaches_every_persisted_model() -> None:
    names = {m.__name__ for m in _models()}
    # one model of each module the walk must reach: the result, its blocks, a level, tune.json
    assert {"Result", "BoundaryEnergy", "CrossCheck", "LoadActorInfo", "LevelResult", "Goodput",
            "TuneResult", "TrialFigures", "Recommendation"} <= names


def test_free_form_blocks_are_only_the_listed_ones() -> None:
    found = _found()
    new = sorted(found - set(FREE_FORM))
    assert not new, ("a free-form dict[str, Any] in a persisted model: give it a model with named fields "
                     f"(core/schema), or list it in FREE_FORM with why its shape is not wattbench's: {new}")
    typed = sorted(set(FREE_FORM) - found)
    assert not typed, f"typed since (good): take these off FREE_FORM in {__name__}: {typed}"
