"""formwork inside Hugging Face ``transformers``' ``generate()``.

::

    info = formwork.TokenizerInfo.from_huggingface(tokenizer, vocab_size=model.config.vocab_size)
    compiled = formwork.GrammarCompiler(info).compile_json_schema(schema)
    out = model.generate(
        **inputs,
        logits_processor=[formwork.contrib.hf.LogitsProcessor(compiled)],
        eos_token_id=info.stop_token_ids,
    )

Needs ``torch`` and ``transformers`` (not dependencies of formwork).
"""

from typing import Any, List, Optional, Sequence, Union

import torch
import transformers

import formwork

__all__ = ["LogitsProcessor"]


class LogitsProcessor(transformers.LogitsProcessor):
    """Constrains ``generate()``: one :class:`formwork.GrammarMatcher` per batch row, which
    accepts the token sampled for its row at each step and masks the next logits.

    ``compiled_grammar``: one grammar for every row, or one per row. Pass the tokenizer info's
    ``stop_token_ids`` as ``generate``'s ``eos_token_id``: a row's stop token is allowed
    exactly where its output is complete, and after it the row's matcher only allows stop
    tokens (``generate`` pads finished rows). Masks of the whole batch are filled on worker
    threads (:func:`formwork.fill_next_token_bitmasks`).

    Use one processor per ``generate()`` call: it keeps the rows' state (as xgrammar's).
    """

    def __init__(self, compiled_grammar: Union[formwork.CompiledGrammar, Sequence[formwork.CompiledGrammar]]) -> None:
        grammars = [compiled_grammar] if isinstance(compiled_grammar, formwork.CompiledGrammar) else list(compiled_grammar)
        if not grammars:
            raise ValueError("no compiled grammar given")
        self.compiled_grammars: List[formwork.CompiledGrammar] = grammars
        self.vocab_size: int = grammars[0].tokenizer_info.vocab_size
        self.matchers: List[formwork.GrammarMatcher] = []
        self.token_bitmask: Optional[Any] = None
        self._started = False

    def _start(self, batch_size: int) -> None:
        grammars = self.compiled_grammars
        if len(grammars) == 1:
            grammars = grammars * batch_size
        if len(grammars) != batch_size:
            raise ValueError(f"{len(grammars)} compiled grammars for a batch of {batch_size} rows")
        self.matchers = [formwork.GrammarMatcher(g) for g in grammars]
        self.token_bitmask = formwork.allocate_token_bitmask(batch_size, self.vocab_size, backend="torch")

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        """Accepts each row's last sampled token (from the second call on), fills the rows'
        bitmasks and masks ``scores`` in place."""
        batch_size = input_ids.shape[0]
        if not self.matchers:
            self._start(batch_size)
        if batch_size != len(self.matchers):
            raise RuntimeError(f"batch of {batch_size} rows, the processor was started with {len(self.matchers)}")
        if scores.shape[-1] < self.vocab_size:
            raise ValueError(
                f"logits have {scores.shape[-1]} columns but the tokenizer info's vocab_size is "
                f"{self.vocab_size}: pass vocab_size=model.config.vocab_size to TokenizerInfo"
            )
        if self._started:
            last = input_ids[:, -1].tolist()
            for row, (matcher, token) in enumerate(zip(self.matchers, last)):
                if not matcher.is_terminated() and not matcher.accept_token(token):
                    raise RuntimeError(f"row {row}: the sampled token {token} was not allowed by the mask")
        self._started = True
        formwork.fill_next_token_bitmasks(self.matchers, self.token_bitmask)
        formwork.apply_token_bitmask_inplace(scores, self.token_bitmask, vocab_size=self.vocab_size)
        return scores
