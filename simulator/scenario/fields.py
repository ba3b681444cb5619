"""Reading YAML input files (or plain mappings) into typed values, collecting every problem at once.

Errors are for people: each :class:`~simulator.errors.Problem` names the file, the field (as a
dotted path such as ``topology.bandwidth`` or ``sizes[2]``) and what was expected, and suggests
the near miss for a misspelt key or name.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from simulator.errors import InputError, Problem, UnitError, quoted
from simulator.inputs import check_yaml_shape, read_text

T = TypeVar("T")


class _StrictLoader(yaml.SafeLoader):
    """yaml's safe loader, refusing duplicate keys (which plain YAML silently overwrites)."""


def _mapping_without_duplicates(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[object] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, (str, int, float, bool)) and key is not None:
            raise yaml.constructor.ConstructorError(
                None, None, f"keys must be plain names, got {quoted(key)}", key_node.start_mark)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {quoted(key)}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                              _mapping_without_duplicates)


def _without_sexagesimal(resolvers: dict[Any, Any]) -> dict[Any, Any]:
    """YAML 1.1's implicit resolvers, except that numbers never contain ':' (YAML 1.2 dropped
    base-60 numbers): ``4:1`` stays the text of a ratio instead of becoming 241."""
    numbers = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
    return {first: [(tag, re.compile(r"(?!.*:)(?:" + regexp.pattern + ")", regexp.flags))
                    if tag in numbers else (tag, regexp) for tag, regexp in entries]
            for first, entries in resolvers.items()}


_StrictLoader.yaml_implicit_resolvers = _without_sexagesimal(
    yaml.SafeLoader.yaml_implicit_resolvers)


def load_yaml_mapping(path: Path,
                      lists: Mapping[str, Callable[[int], str | None]] | None = None
                      ) -> dict[str, Any]:
    """The top-level mapping of a YAML file, loaded safely; InputError if unreadable or not one,
    or if a top-level list of ``lists`` grows past its rule (:func:`check_yaml_shape`)."""
    return parse_yaml_mapping(read_text(path, "UTF-8 text (is this a YAML file?)"), str(path),
                              lists)


def parse_yaml_mapping(text: str, file: str,
                       lists: Mapping[str, Callable[[int], str | None]] | None = None
                       ) -> dict[str, Any]:
    """The top-level mapping of YAML ``text`` read from ``file``; InputError if not one, or if a
    top-level list of ``lists`` grows past its rule (:func:`check_yaml_shape`)."""
    try:
        check_yaml_shape(text, file, _StrictLoader, lists)
        data = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise InputError([Problem(file, where, f"not valid YAML: {problem}")]) from None
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise InputError([Problem(file, "", f"expected a mapping of keys to values, got {kind}")])
    return data


def did_you_mean(word: object, choices: Iterable[str]) -> str:
    """`` (did you mean 'ring'?)`` for the closest choice, or an empty string."""
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f"; did you mean {quoted(close[0])}?" if close else ""


def choice_problem(value: object, choices: Iterable[str], what: str) -> str | None:
    """What is wrong with ``value`` as one of ``choices``, naming them, or None."""
    choices = list(choices)
    if isinstance(value, str) and value in choices:
        return None
    return f"expected {what} ({', '.join(choices)}), got {quoted(value)}{did_you_mean(value, choices)}"


class FieldReader:
    """Collects the problems of one file while its fields are read."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[Problem] = []

    def problem(self, field: str, message: str) -> None:
        """Record one problem."""
        self.problems.append(Problem(self.file, field, message))

    def raise_if_any(self) -> None:
        """Raise InputError with every recorded problem, if there is one."""
        if self.problems:
            raise InputError(self.problems)

    def check_keys(self, mapping: Mapping[str, object], prefix: str, allowed: Iterable[str],
                   required: Iterable[str] = ()) -> None:
        """Unknown keys are errors (with a suggestion); missing required keys too."""
        allowed = list(allowed)
        for key in mapping:
            if key not in allowed:
                hint = did_you_mean(key, allowed) or f"; expected one of {', '.join(allowed)}"
                self.problem(_join(prefix, key), f"unknown key{hint}")
        for key in required:
            if key not in mapping:
                self.problem(_join(prefix, key), "required but missing")

    def parse(self, field: str, value: object, parser: Callable[[object], T]) -> T | None:
        """``parser(value)``, or None after recording its UnitError/ValueError as a problem."""
        try:
            return parser(value)
        except (UnitError, ValueError) as error:
            self.problem(field, str(error))
            return None

    def choice(self, field: str, value: object, choices: Iterable[str], what: str) -> str | None:
        """``value`` if it is one of ``choices``; otherwise a problem naming them."""
        problem = choice_problem(value, choices, what)
        if problem is None:
            assert isinstance(value, str)
            return value
        self.problem(field, problem)
        return None

    def mapping(self, field: str, value: object) -> Mapping[str, object] | None:
        """``value`` if it is a mapping; otherwise a problem."""
        if isinstance(value, Mapping):
            return value
        self.problem(field, f"expected a mapping of keys to values, got {quoted(value)}")
        return None


def _join(prefix: str, key: object) -> str:
    return f"{prefix}.{key}" if prefix else str(key)
