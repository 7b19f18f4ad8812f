"""A decode loop with numpy only (random logits stand in for the model), on the constraints of
the transformers test: every output is checked by an independent validator. Runs everywhere,
CI included. One loop jumps forward over forced tokens without a model call."""

from typing import List

import numpy as np
import pytest

import formwork
from decoding import CONSTRAINTS, Constraint, bias_ids, render

MAX_STEPS = 600


def decode(
    info: formwork.TokenizerInfo, compiled: formwork.CompiledGrammar, constraint: Constraint, seed: int, jump_forward: bool
) -> List[int]:
    rng = np.random.default_rng(seed)
    bias = bias_ids(info, constraint.bias)
    matcher = formwork.GrammarMatcher(compiled)
    bitmask = formwork.allocate_token_bitmask(1, info.vocab_size, backend="numpy")
    tokens: List[int] = []
    for _ in range(MAX_STEPS):
        if jump_forward:
            for t in matcher.forced_token_ids():
                assert matcher.accept_token(t)
                tokens.append(t)
            if matcher.is_terminated():
                break
        logits = rng.standard_normal(info.vocab_size).astype(np.float32)
        for t, b in bias.items():
            logits[t] += b
        matcher.fill_next_token_bitmask(bitmask)
        formwork.apply_token_bitmask_inplace(logits, bitmask[0])
        token = int(np.argmax(logits))  # the argmax of Gaussian logits: a uniform sample
        assert np.isfinite(logits[token]), "the mask allowed nothing"
        assert matcher.accept_token(token), "a token the mask allowed was rejected"
        tokens.append(token)
        if matcher.is_terminated():
            break
    assert matcher.is_terminated(), f"{constraint.label}: no stop within {MAX_STEPS} steps"
    return tokens


@pytest.mark.parametrize("constraint", CONSTRAINTS, ids=[c.label for c in CONSTRAINTS])
def test_random_logits_decode_to_valid_outputs(
    constraint: Constraint, qwen3: formwork.TokenizerInfo, compiler: formwork.GrammarCompiler
) -> None:
    compiled = constraint.compile(compiler)
    outputs = set()
    for seed in range(4):
        tokens = decode(qwen3, compiled, constraint, seed, jump_forward=seed == 3)
        assert tokens[-1] in qwen3.stop_token_ids
        text = render(qwen3, tokens)
        constraint.check(text)
        outputs.add(text)
    assert len(outputs) > 1, "different seeds should give different outputs"
