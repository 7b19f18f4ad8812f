"""Items of :meth:`formwork.GrammarCompiler.compile_structural_tag`."""

from dataclasses import dataclass
from typing import Any, Dict, Union


@dataclass
class StructuralTagItem:
    """One structured tag: after the text ``begin`` comes a JSON value of ``schema`` (a JSON
    Schema as ``str`` or ``dict``), then ``end``. ``begin`` starts with one of the triggers
    given to ``compile_structural_tag``. Same fields as ``xgrammar.StructuralTagItem``, whose
    instances are accepted too."""

    begin: str
    schema: Union[str, Dict[str, Any]]
    end: str
