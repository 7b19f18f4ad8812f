"""formwork: exact structured decoding for LLM inference, with an xgrammar-shaped API.

At each decoding step, :class:`GrammarMatcher` fills a token bitmask (which tokens may come
next so the output keeps the required structure) that :func:`apply_token_bitmask_inplace`
applies to the logits::

    import formwork

    info = formwork.TokenizerInfo.from_huggingface(tokenizer, vocab_size=model.config.vocab_size)
    compiler = formwork.GrammarCompiler(info)
    compiled = compiler.compile_json_schema(schema)
    matcher = formwork.GrammarMatcher(compiled)
    bitmask = formwork.allocate_token_bitmask(1, info.vocab_size)
    matcher.fill_next_token_bitmask(bitmask)
    formwork.apply_token_bitmask_inplace(logits, bitmask)
    matcher.accept_token(sampled)

Code written for xgrammar ports by renaming ``xgr`` to ``formwork``; each class's docstring
names its differences. formwork's own additions: templates registered at start-up and
requests compiled in microseconds (:meth:`GrammarCompiler.register_templates`,
:meth:`GrammarCompiler.compile_request`), tool-call formats
(:meth:`GrammarCompiler.compile_tool_calls`), :meth:`GrammarMatcher.validate_tokens` for
speculative drafts, :meth:`GrammarMatcher.forced_token_ids`, and
:func:`fill_next_token_bitmasks` (a batch filled on worker threads, GIL released).
"""

from formwork._native import (
    BatchGrammarMatcher,
    CompiledGrammar,
    GrammarCompiler,
    GrammarMatcher,
    TokenizerInfo,
    fill_next_token_bitmasks,
    shipped_templates,
)
from formwork.bitmask import (
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    get_bitmask_shape,
    reset_token_bitmask,
)
from formwork.errors import (
    CompileError,
    EmptyLanguageError,
    FormworkError,
    GrammarSyntaxError,
    InvalidError,
    LimitError,
    MatchError,
    MatchLimitError,
    NotRegularError,
    TokenizerError,
    UndefinedError,
    UnknownSpecialTokenError,
    UnsupportedError,
)
from formwork.structural_tag import StructuralTagItem

__version__ = "0.1.0"

__all__ = [
    "BatchGrammarMatcher",
    "CompiledGrammar",
    "GrammarCompiler",
    "GrammarMatcher",
    "StructuralTagItem",
    "TokenizerInfo",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "fill_next_token_bitmasks",
    "get_bitmask_shape",
    "reset_token_bitmask",
    "shipped_templates",
    "CompileError",
    "EmptyLanguageError",
    "FormworkError",
    "GrammarSyntaxError",
    "InvalidError",
    "LimitError",
    "MatchError",
    "MatchLimitError",
    "NotRegularError",
    "TokenizerError",
    "UndefinedError",
    "UnknownSpecialTokenError",
    "UnsupportedError",
]
