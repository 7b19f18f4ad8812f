"""GrammarMatcher: accepting tokens and text, rollback, reset, termination, jump-forward,
speculative drafts, forks."""

import threading

import numpy as np
import pytest

import formwork

VERSION_RE = r'\{"version": "\d+(\.\d+)*", "stable": (true|false)\}'
TEXT = '{"version": "2.14.0", "stable": true}'


def allowed(info: formwork.TokenizerInfo, m: formwork.GrammarMatcher) -> np.ndarray:
    """Ids the mask allows, via a numpy bitmask."""
    bitmask = formwork.allocate_token_bitmask(1, info.vocab_size, backend="numpy")
    m.fill_next_token_bitmask(bitmask)
    return np.flatnonzero(np.unpackbits(bitmask[0].view(np.uint8), bitorder="little"))


def test_accept_tokens_to_termination(qwen3: formwork.TokenizerInfo, compiler: formwork.GrammarCompiler) -> None:
    compiled = compiler.compile_regex(VERSION_RE)
    m = formwork.GrammarMatcher(compiled)
    assert m.compiled_grammar is not None and m.stop_token_ids == qwen3.stop_token_ids
    tokens = qwen3.encode(TEXT)
    for i, t in enumerate(tokens):
        assert t in allowed(qwen3, m)
        assert not m.is_accepting()
        assert m.accept_token(t)
        assert m.num_accepted == i + 1
    assert m.is_accepting() and not m.is_terminated()
    eos = qwen3.stop_token_ids[0]
    assert eos in allowed(qwen3, m)
    assert m.accept_token(eos)
    assert m.is_terminated()
    assert set(allowed(qwen3, m)) == set(qwen3.stop_token_ids)  # after termination: stops only
    assert not m.accept_token(tokens[0])  # terminated: rejected, nothing changes
    assert "terminated=True" in repr(m)


def test_rejected_token_and_string_change_nothing(qwen3: formwork.TokenizerInfo, compiler: formwork.GrammarCompiler) -> None:
    m = formwork.GrammarMatcher(compiler.compile_regex(VERSION_RE))
    assert m.accept_string('{"version": "1')
    before = allowed(qwen3, m)
    assert not m.accept_token(qwen3.encode("x")[0])
    assert not m.accept_string(".x")
    assert not m.accept_token(qwen3.stop_token_ids[0])  # incomplete: no stop token
    assert m.num_accepted == 1
    assert np.array_equal(before, allowed(qwen3, m))
    with pytest.raises(formwork.MatchError) as e:
        m.accept_token(qwen3.vocab_size + 5)
    assert e.value.kind == "UnknownToken" and e.value.token == qwen3.vocab_size + 5


def test_accept_string_is_one_rollback_step(qwen3: formwork.TokenizerInfo, compiler: formwork.GrammarCompiler) -> None:
    compiled = compiler.compile_regex(VERSION_RE)
    by_text = formwork.GrammarMatcher(compiled)
    by_tokens = formwork.GrammarMatcher(compiled)
    half = len(TEXT) // 2
    assert by_text.accept_string(TEXT[:half]) and by_text.accept_string(TEXT[half:].encode())
    for t in qwen3.encode(TEXT):
        by_tokens.accept_token(t)
    assert np.array_equal(allowed(qwen3, by_text), allowed(qwen3, by_tokens))
    assert by_text.num_accepted == 2 and by_text.is_accepting()
    by_text.rollback()
    assert by_text.num_accepted == 1 and not by_text.is_accepting()
    assert by_text.accept_string(TEXT[half:])
    by_text.reset()
    assert by_text.num_accepted == 0
    assert np.array_equal(allowed(qwen3, by_text), allowed(qwen3, formwork.GrammarMatcher(compiled)))
    with pytest.raises(formwork.MatchError) as e:
        by_text.rollback(1)
    assert e.value.kind == "RollbackTooFar"


def test_jump_forward_string_and_forced_tokens(qwen3: formwork.TokenizerInfo, compiler: formwork.GrammarCompiler) -> None:
    m = formwork.GrammarMatcher(compiler.compile_regex(VERSION_RE))
    assert m.find_jump_forward_string() == '{"version": "'
    forced = m.forced_token_ids()
    # Canonical tokens of the forced text, the last held back (the model may merge it).
    forced_text = b"".join(qwen3.token_bytes(t) for t in forced)
    assert forced and '{"version": "'.encode().startswith(forced_text) and len(forced_text) < 13
    for t in forced:
        assert m.accept_token(t)
    assert (forced_text + m.find_jump_forward_string().encode()) == b'{"version": "'
    assert m.accept_string(m.find_jump_forward_string())
    assert m.accept_string("3")
    assert m.find_jump_forward_string() == ""
    assert m.accept_string('", "stable": ')
    assert m.find_jump_forward_string() == ""  # true or false
    assert m.accept_string("t")
    assert m.find_jump_forward_string() == "rue}"
    assert m.accept_string(m.find_jump_forward_string()) and m.is_accepting()


def test_speculative_drafts_validate_then_roll_back(qwen3: formwork.TokenizerInfo, compiler: formwork.GrammarCompiler) -> None:
    schema = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}, "n": {"type": "integer"}}}
    for compiled in (compiler.compile_regex(VERSION_RE), compiler.compile_json_schema(schema, any_whitespace=False)):
        text = TEXT if compiled.backend == "operators" else '{"kids":[{"n":12},{"kids":[]}],"n":-3}'
        tokens = qwen3.encode(text)
        m = formwork.GrammarMatcher(compiled)
        wrong = qwen3.encode("~")[0]
        pos = 0
        while pos < len(tokens):
            # A draft of up to 4 true tokens, then a wrong one, then anything.
            good = min(4, len(tokens) - pos)
            draft = tokens[pos : pos + good] + [wrong] + tokens[pos:]
            before = (m.num_accepted, allowed(qwen3, m))
            assert m.validate_tokens(draft) == good
            assert m.num_accepted == before[0] and np.array_equal(allowed(qwen3, m), before[1])
            # The verifier accepts the draft up to the wrong token, then disagrees with the
            # last drafted one: accept, roll back one, accept the verifier's token.
            for t in draft[:good]:
                assert m.accept_token(t)
            m.rollback(1)
            assert m.accept_token(tokens[pos + good - 1])
            pos += good
        assert m.validate_tokens(qwen3.stop_token_ids[:1]) == 1 and not m.is_terminated()
        assert m.is_accepting()


def test_fork_is_independent(qwen3: formwork.TokenizerInfo, compiler: formwork.GrammarCompiler) -> None:
    m = formwork.GrammarMatcher(compiler.compile_regex("(ab|ac)d"))
    assert m.accept_string("a")
    other = m.fork()
    assert m.accept_string("b") and other.accept_string("c")
    assert not m.accept_string("c")
    assert m.accept_string("d") and other.accept_string("d")
    assert m.num_accepted == other.num_accepted == 3


def test_a_matcher_serves_one_thread_at_a_time(qwen3: formwork.TokenizerInfo, compiler: formwork.GrammarCompiler) -> None:
    m = formwork.GrammarMatcher(compiler.compile_regex("a+"))
    bitmask = formwork.allocate_token_bitmask(2, qwen3.vocab_size, backend="numpy")
    with pytest.raises(RuntimeError, match="in use"):
        formwork.fill_next_token_bitmasks([m, m], bitmask)
    # From several threads in turn (the GIL is held by single calls), results are consistent.
    results = []
    threads = [threading.Thread(target=lambda: results.append(m.accept_string("a"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 8 and m.num_accepted == 8


def test_unique_string_items_refuse_a_repeat(qwen3: formwork.TokenizerInfo, compiler: formwork.GrammarCompiler) -> None:
    """`uniqueItems` over strings: the matcher keeps the items written; the token that would
    close a repeat is masked off and refused, rollback brings the item back."""
    schema = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    m = formwork.GrammarMatcher(compiler.compile_json_schema(schema))
    quote = qwen3.encode('"')[0]
    assert m.accept_string('["ab", "a')
    assert quote in allowed(qwen3, m)
    assert m.accept_string("b")
    assert quote not in allowed(qwen3, m)
    assert not m.accept_token(quote) and not m.accept_string('"]')
    m.rollback()
    assert quote in allowed(qwen3, m)
    assert m.accept_string('c"]') and m.is_accepting()


def test_counted_string_length_is_kept(qwen3: formwork.TokenizerInfo, compiler: formwork.GrammarCompiler) -> None:
    """`maxLength` on a pattern whose automaton times the bound is too big: the matcher counts
    the characters; at the bound only the closing quote is left, an escape counts once."""
    schema = {
        "type": "string",
        "allOf": [{"pattern": "^(?:\\S+\\s+)*\\S+$"}, {"pattern": "^[^x]*$"}],
        "maxLength": 3000,
    }
    m = formwork.GrammarMatcher(compiler.compile_json_schema(schema))
    quote, c = qwen3.encode('"')[0], qwen3.encode("c")[0]
    assert m.accept_string('"' + "ab " * 999 + "\\u00e9")  # 2,998 characters
    assert m.accept_string("b")
    assert c in allowed(qwen3, m)
    assert m.accept_string("c")  # 3,000
    ids = allowed(qwen3, m)
    assert quote in ids and c not in ids
    assert not m.accept_string("d")
    m.rollback()
    assert c in allowed(qwen3, m)
    assert m.accept_string("d") and not m.accept_string("e")
    assert m.accept_string('"') and m.is_accepting()
