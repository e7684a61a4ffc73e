"""Structured output: `json_valid` (the answer parses as JSON) and `json_schema` (and matches a JSON Schema).

The JSON is the whole completion, or the content of its last fenced code block (```json ... ``` or a bare
``` fence), or of its last `<answer>` tag: models often wrap JSON that way. Score 1 / 0 (`scoring="dapo"`
gives +1 / -1).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from .base import Reward, dataset_column, scores_for
from .extraction import tag_content
from .registry import register_reward

__all__ = ["JsonSchemaReward", "JsonValidReward", "extract_json_text", "load_json"]

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n(.*?)```", flags=re.DOTALL)
_MISSING = object()


def extract_json_text(text: str, extract: str = "auto") -> str:
    """The candidate JSON text: "auto" takes the last fenced block, else the last `<answer>` tag, else the
    whole completion; "none" always takes the whole completion."""
    if extract == "auto":
        blocks = _FENCE.findall(text)
        if blocks:
            return blocks[-1].strip()
        tagged = tag_content(text, "answer")
        if tagged is not None:
            return tagged
    return text.strip()


def load_json(text: str, *, allow_scalars: bool = True) -> Any:
    """The parsed JSON value, or `_MISSING` if `text` is not one JSON document (or is a bare scalar and
    `allow_scalars` is False). NaN / Infinity, which Python accepts but JSON does not, are refused."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    try:
        value = json.loads(text, parse_constant=refuse)
    except (ValueError, RecursionError):
        return _MISSING
    if not allow_scalars and not isinstance(value, (dict, list)):
        return _MISSING
    return value


def _check_extract(extract: str, reward: str) -> None:
    if extract not in ("auto", "none"):
        raise ValueError(f"Reward {reward!r}: extract must be 'auto' or 'none', got {extract!r}.")


@register_reward("json_valid", aliases=("json",))
class JsonValidReward(Reward):
    """The answer is valid JSON (whole completion, or its last ```json block / `<answer>` tag): 1, else 0.

    Args:
        extract: "auto" (fenced block or `<answer>` tag if present, else the whole completion) or "none".
        require_container: only an object or array counts (not a bare string or number).
        scoring: "binary" (1 / 0) or "dapo" (+1 / -1).
    """

    def __init__(
        self,
        extract: Literal["auto", "none"] = "auto",
        require_container: bool = True,
        scoring: Literal["binary", "dapo"] = "binary",
    ):
        self.correct_score, self.incorrect_score = scores_for(scoring, reward="json_valid")
        _check_extract(extract, "json_valid")
        self.extract = extract
        self.require_container = require_container
        self.scoring = scoring

    def score(self, texts: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        return [
            self.incorrect_score
            if load_json(extract_json_text(text, self.extract), allow_scalars=not self.require_container) is _MISSING
            else self.correct_score
            for text in texts
        ]


def _load_schema(schema: Any, *, source: str, allow_path: bool = True) -> dict:
    """A JSON Schema from a mapping, a JSON string, or a path to a JSON file; checked against its metaschema."""
    import jsonschema

    if allow_path and isinstance(schema, (str, Path)) and not str(schema).lstrip().startswith("{"):
        path = Path(schema)
        if not path.is_file():
            raise ValueError(
                f"{source}: schema file {str(path)!r} does not exist; pass a schema mapping or a JSON file path."
            )
        schema = path.read_text()
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError as error:
            raise ValueError(f"{source}: the schema is not valid JSON: {error}.") from None
    if not isinstance(schema, Mapping):
        raise ValueError(f"{source}: a schema must be a JSON object, got {type(schema).__name__}.")
    schema = dict(schema)
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as error:
        raise ValueError(f"{source}: invalid JSON Schema: {error.message}.") from None
    return schema


@register_reward("json_schema")
class JsonSchemaReward(Reward):
    """The answer is JSON that validates against a JSON Schema (the `jsonschema` library): 1, else 0.

    Args:
        schema: the schema for every example: a mapping, a JSON string, or a path to a JSON file.
        schema_column: instead, a dataset column holding each example's schema as a JSON string (a column of
            mappings also works, but Arrow merges the keys of all rows' mappings and fills missing ones with
            null, which changes a schema).
        extract: "auto" (fenced block or `<answer>` tag if present, else the whole completion) or "none".
        scoring: "binary" (1 / 0) or "dapo" (+1 / -1).

    Exactly one of `schema` and `schema_column` is needed. A fixed schema is checked at construction; a
    per-example schema that is missing or invalid gives None (cannot judge).
    """

    def __init__(
        self,
        schema: Mapping[str, Any] | str | None = None,
        schema_column: str | None = None,
        extract: Literal["auto", "none"] = "auto",
        scoring: Literal["binary", "dapo"] = "binary",
    ):
        self.correct_score, self.incorrect_score = scores_for(scoring, reward="json_schema")
        _check_extract(extract, "json_schema")
        if (schema is None) == (schema_column is None):
            raise ValueError("Reward 'json_schema': give exactly one of `schema` (one for all) and `schema_column`.")
        self.schema = None if schema is None else _load_schema(schema, source="Reward 'json_schema'")
        self.schema_column = schema_column
        self.extract = extract
        self.scoring = scoring

    def _valid(self, text: str, schema: Mapping[str, Any]) -> bool:
        import jsonschema

        value = load_json(extract_json_text(text, self.extract))
        if value is _MISSING:
            return False
        validator = jsonschema.validators.validator_for(schema)(schema)
        return validator.is_valid(value)

    def score(self, texts: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        if self.schema is not None:
            return [self.correct_score if self._valid(text, self.schema) else self.incorrect_score for text in texts]
        schemas = dataset_column(
            columns, self.schema_column, len(texts), reward=self.__name__, argument="schema_column"
        )
        rewards = []
        for text, raw in zip(texts, schemas):
            try:
                schema = None if raw is None else _load_schema(raw, source="json_schema", allow_path=False)
            except ValueError:
                schema = None
            rewards.append(
                None if schema is None else self.correct_score if self._valid(text, schema) else self.incorrect_score
            )
        return rewards
