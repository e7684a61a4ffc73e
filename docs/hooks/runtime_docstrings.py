"""Griffe extension: the API reference shows the docstring a class has at runtime when a decorator writes part of it.

mkdocstrings reads the source, not the imported package. `DAPOConfig` and `GSPOConfig` get their dynamic-sampling
"Parameters:" entries from `@documents_dynamic_sampling` (one text in `trl_ext/trainers/sampling_arguments.py` for
every config), so for classes with that decorator the imported class's `__doc__` is used instead.
"""

from __future__ import annotations

import importlib
import inspect

import griffe

DECORATORS = ("documents_dynamic_sampling",)


class RuntimeDocstrings(griffe.Extension):
    def on_class_members(self, *, cls: griffe.Class, **kwargs) -> None:
        if not any(str(decorator.value).split(".")[-1] in DECORATORS for decorator in cls.decorators):
            return
        runtime = getattr(importlib.import_module(cls.module.path), cls.name)
        docstring = cls.docstring
        cls.docstring = griffe.Docstring(
            inspect.cleandoc(runtime.__doc__),
            lineno=docstring.lineno if docstring else None,
            endlineno=docstring.endlineno if docstring else None,
            parent=cls,
            parser=docstring.parser if docstring else None,
            parser_options=docstring.parser_options if docstring else None,
        )
