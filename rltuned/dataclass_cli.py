"""Command-line flags generated from a dataclass: one `--field-name` per field, typed by its annotation,
defaulted by its default and explained by the docstring written under it.

Training has some thirty knobs; restating each in `cli.py` by hand left eight of them unreachable and let
help texts drift from the code. Here the dataclass is the one place a knob is declared.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import textwrap
import types
import typing
from collections.abc import Collection, Mapping, Sequence
from typing import Any, TypeVar

from rltuned.errors import UsageError

T = TypeVar("T")


def field_docs(cls: type) -> dict[str, str]:
    """The string literal under each annotated field of the class body (PEP 257 attribute docstrings)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0]
    assert isinstance(body, ast.ClassDef)
    docs: dict[str, str] = {}
    for stmt, after in zip(body.body, [*body.body[1:], None], strict=True):
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        if (
            isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[stmt.target.id] = " ".join(after.value.value.split())
    return docs


def add_fields(
    parser: argparse.ArgumentParser,
    cls: type,
    *,
    skip: Collection[str] = (),
    required: Collection[str] = (),
    choices: Mapping[str, Sequence[str]] | None = None,
    aliases: Mapping[str, str] | None = None,
) -> None:
    """One flag per field of `cls` not in `skip`. `aliases` maps a field to an extra flag kept for
    compatibility (`num_minibatches` -> `--minibatches`). Fields in `required` show no default in the
    help (`from_namespace` checks them: a recipe may give them instead).

    A flag not given leaves no attribute in the namespace (its default is only shown in the help), so
    `from_namespace` can tell a value given on the command line from one a recipe supplies: a flag given
    with the default's own value still overrides the recipe."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        flags = ["--" + f.name.replace("_", "-")]
        if aliases and f.name in aliases:
            flags.append(aliases[f.name])
        kind = scalar_type(hints[f.name], f.name)
        help_text = docs.get(f.name, "").replace("%", "%%")
        if f.name in required:
            help_text += " (required)"
        elif f.default is not None and f.default is not dataclasses.MISSING and kind is not bool:
            help_text += f" (default: {f.default})"
        kwargs: dict[str, Any] = {"dest": f.name, "help": help_text, "default": argparse.SUPPRESS}
        if kind is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = kind
            if choices and f.name in choices:
                kwargs["choices"] = choices[f.name]
        parser.add_argument(*flags, **kwargs)


def from_namespace(
    cls: type[T],
    ns: argparse.Namespace,
    *,
    recipe: Mapping[str, Any] | None = None,
    required: Collection[str] = (),
) -> T:
    """The dataclass from, in increasing precedence: its defaults, `recipe` (field values, e.g. read
    from a model's manifest) and the flags given on the command line. A field in `required` must come
    from one of the last two; the error names its flag."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values = {k: v for k, v in (recipe or {}).items() if k in names}
    values.update({name: getattr(ns, name) for name in names if hasattr(ns, name)})
    missing = ["--" + name.replace("_", "-") for name in required if name not in values]
    if missing:
        raise UsageError(f"missing {', '.join(missing)}")
    return cls(**values)


def scalar_type(hint: Any, name: str) -> type:
    """int, float, str or bool, also behind `| None` (then the result `is not hint`)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            hint = args[0]
    if hint in (int, float, str, bool):
        return typing.cast(type, hint)
    raise TypeError(f"field {name}: no command-line type for {hint!r}")


def parse_grid(cls: type, specs: Sequence[str]) -> dict[str, list[Any]]:
    """`FIELD=V1,V2,...` (flag spelling or field name), each value typed as the field is: the grid of a
    sweep, checked before any trial starts."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    grid: dict[str, list[Any]] = {}
    for spec in specs:
        key, sep, text = spec.partition("=")
        name = key.strip().lstrip("-").replace("-", "_")
        if not sep or not text.strip():
            raise ValueError(f"--grid {spec!r}: expected FIELD=V1,V2,...")
        if name not in names or name == "extra":
            raise ValueError(f"--grid {spec!r}: {name!r} is not a training flag")
        kind = scalar_type(hints[name], name)
        try:
            grid[name] = [_convert(kind, v.strip()) for v in text.split(",")]
        except ValueError as exc:
            raise ValueError(f"--grid {spec!r}: {exc}") from None
    return grid


def _convert(kind: type, text: str) -> Any:
    if kind is bool:
        if text.lower() in ("true", "yes", "1"):
            return True
        if text.lower() in ("false", "no", "0"):
            return False
        raise ValueError(f"{text!r} is not a boolean")
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a {kind.__name__}") from None
