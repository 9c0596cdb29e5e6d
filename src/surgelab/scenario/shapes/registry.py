"""The shapes by name: what ``type:`` may say, the scenario's union of shapes and the docs' list.

A shape's name is its ``type`` literal. The scenario's schema is made from the registry when
``surgelab.scenario`` is imported, so a shape is added by its line in ``SHAPES``
(``surgelab.scenario.shapes``), not registered later.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from typing import Annotated, Any, Union

from pydantic import BeforeValidator, Field

from surgelab.scenario.shapes.base import BaseShape

__all__ = ["ShapeRegistry"]


def _name(cls: type[BaseShape]) -> str:
    field = cls.model_fields.get("type")
    names = typing.get_args(field.annotation) if field is not None else ()
    if len(names) != 1 or not isinstance(names[0], str):
        raise TypeError(f"{cls.__name__} needs a field type: Literal['its-name']")
    return names[0]


class ShapeRegistry:
    """The shapes in the order they are listed (the error for an unknown type, docs/scenario.md)."""

    def __init__(self, *classes: type[BaseShape]) -> None:
        self._classes: dict[str, type[BaseShape]] = {}
        for cls in classes:
            name = _name(cls)
            if name in self._classes:
                raise ValueError(f"shape {name!r} is registered already")
            self._classes[name] = cls

    def __getitem__(self, name: str) -> type[BaseShape]:
        return self._classes[name]

    def __iter__(self) -> Iterator[type[BaseShape]]:
        return iter(self._classes.values())

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._classes)

    def coerce(self, value: Any) -> Any:
        """A bare number is a steady level; anything else must be a shape mapping."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return {"type": "steady", "level": value}
        if not isinstance(value, dict):
            raise ValueError(f"expected a number or a shape mapping with type: one of {', '.join(self.names)}")
        return value

    def of(self, value: Any) -> type[BaseShape]:
        """The class a raw value (a number, or a mapping with a known ``type``) is read as."""
        return self[self.coerce(value)["type"]]

    def union(self) -> Any:
        """The scenario's field type: one of the shapes, chosen by ``type``; a bare number is steady."""
        return Annotated[Union[tuple(self)], Field(discriminator="type"), BeforeValidator(self.coerce)]  # noqa: UP007
