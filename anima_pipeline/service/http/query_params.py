"""A request model read from a URL's query string.

Every value of a query string is text, so it is the one place where digits are read as an
integer and ``true`` / ``false`` as a flag (core/validation.py: never elsewhere); after that
the request model's own fields validate, with their limits and words. A list is the key
repeated (``?type=world&type=opinion``); a field may be spelt otherwise in the URL.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from pydantic import BeforeValidator, create_model
from pydantic.fields import FieldInfo

from anima_pipeline.memory.models import Request

R = TypeVar("R", bound=Request)
_INTEGER = re.compile(r"[+-]?\d{1,18}")
_FLAGS = {"true": True, "false": False}


def _integer(value: Any) -> Any:
    return int(value) if isinstance(value, str) and _INTEGER.fullmatch(value) else value


def _flag(value: Any) -> Any:
    return _FLAGS.get(value, value) if isinstance(value, str) else value


def _scalars(annotation: Any) -> set[type]:
    """The int / bool types an annotation holds (through Annotated, unions and lists)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _scalars(get_args(annotation)[0])
    if origin in (Union, types.UnionType, list):
        return set().union(*(_scalars(a) for a in get_args(annotation)))
    return {annotation} & {int, bool}


def query_string(spelt: dict[str, str] | None = None) -> Callable[[type[R]], type[R]]:
    """A class decorator: the request model it subclasses, as FastAPI reads it from a query
    string (`Annotated[Model, Query()]`), a field named in `spelt` under its URL spelling."""

    def read(model: type[R]) -> type[R]:
        fields: dict[str, Any] = {}
        for name, field in model.model_fields.items():
            scalars = _scalars(field.annotation)
            if not scalars and name not in (spelt or {}):
                continue
            annotation: Any = field.annotation
            if bool in scalars:
                annotation = Annotated[annotation, BeforeValidator(_flag)]
            elif int in scalars and get_origin(annotation) is not list:
                annotation = Annotated[annotation, BeforeValidator(_integer)]
            info = field
            if spelt and name in spelt:
                info = FieldInfo.merge_field_infos(field, alias=spelt[name], validation_alias=spelt[name])
            fields[name] = (annotation, info)
        return create_model(model.__name__, __base__=model, __doc__=model.__doc__, **fields)

    return read
