"""Typed exceptions of formwork. Each carries what went wrong and where as attributes.

Compile errors (bad schema, regex, grammar, template, request, tool list) are
:class:`CompileError` subclasses, one per kind, and name their place: ``pointer`` (a JSON
pointer into a schema, tool list or JSON request) or ``source``/``line``/``col`` (a text), and
``location`` as one string (``"#/properties/age/minimum"``, ``"<request>:1:19"``).
All compile errors are also ``ValueError``.
"""

from typing import Any, Optional, Tuple

__all__ = [
    "FormworkError",
    "CompileError",
    "GrammarSyntaxError",
    "UnsupportedError",
    "UndefinedError",
    "InvalidError",
    "NotRegularError",
    "EmptyLanguageError",
    "LimitError",
    "UnknownSpecialTokenError",
    "MatchError",
    "MatchLimitError",
    "TokenizerError",
]


class FormworkError(Exception):
    """Base class of every formwork error."""

    kind: str

    def __init__(self, message: str, kind: str = "", **attrs: Any) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        for name, value in attrs.items():
            setattr(self, name, value)


class CompileError(FormworkError, ValueError):
    """A constraint did not compile. ``kind`` is the Rust ``CompileErrorKind`` name,
    ``detail`` the message without the place, ``location`` the place as text (``None`` when
    the error has none), ``pointer`` a JSON pointer, ``source``/``line``/``col`` a text
    position (1-based), ``limit`` ``(name, value, max)`` for a :class:`LimitError`."""

    detail: str = ""
    location: Optional[str] = None
    pointer: Optional[str] = None
    source: Optional[str] = None
    line: Optional[int] = None
    col: Optional[int] = None
    limit: Optional[Tuple[str, int, int]] = None


class GrammarSyntaxError(CompileError):
    """The text does not parse (regex, template, request, grammar, schema JSON); ``line`` and
    ``col`` say where."""


class UnsupportedError(CompileError):
    """Valid input using something formwork does not support (look-around, an unsupported
    JSON Schema keyword without ``lenient=True``); never silently ignored."""


class UndefinedError(CompileError):
    """A name is used but never defined (rule, structure, parameter, ``$ref``)."""


class InvalidError(CompileError):
    """A value has the wrong shape (an argument of the wrong kind, a negative bound, a tool
    without a name)."""


class NotRegularError(CompileError):
    """The constraint needs a stack and a finite-state backend was asked for."""


class EmptyLanguageError(CompileError):
    """The constraint admits no output at all."""


class LimitError(CompileError):
    """A size or time limit was reached while compiling (``limit`` names it)."""


class UnknownSpecialTokenError(CompileError):
    """The constraint names a special token the vocabulary lacks."""


class MatchError(FormworkError, RuntimeError):
    """A matcher call failed and changed nothing: ``kind`` is ``"UnknownToken"`` (an id outside
    the vocabulary, ``token``), ``"RollbackTooFar"``, ``"MaskSize"``, ... A batch fill's error
    also has ``row``."""

    token: Optional[int] = None
    step: Optional[int] = None
    at_byte: Optional[int] = None
    row: Optional[int] = None


class MatchLimitError(MatchError):
    """A limit on matching work was reached (``limit`` is ``(name, value, max)``)."""

    limit: Optional[Tuple[str, int, int]] = None


class TokenizerError(FormworkError, ValueError):
    """A tokenizer could not be loaded or used (``kind``: ``Io``, ``Parse``,
    ``UnsupportedEncoding``, ``Config``, ``Encode``)."""
