"""Bitmasks: xgrammar's layout, numpy and torch, apply in place, batch fills."""

import subprocess
import sys

import numpy as np
import pytest

import formwork

# A toy vocabulary where token i is the letter chr(97 + i % 26) repeated (i // 26 + 1) times,
# 70 tokens in a mask of 100 ids: three words, the last partial.
TOY = [chr(97 + i % 26) * (i // 26 + 1) for i in range(69)] + ["</s>"]


@pytest.fixture(scope="module")
def toy() -> formwork.TokenizerInfo:
    return formwork.TokenizerInfo(TOY, vocab_size=100, stop_token_ids=[69])


def test_shape_dtype_and_fill_match_xgrammar_docs() -> None:
    # xgrammar.allocate_token_bitmask: int32, (batch, ceil(vocab / 32)), every bit set.
    for vocab in (1, 31, 32, 33, 151_936):
        assert formwork.get_bitmask_shape(3, vocab) == (3, -(-vocab // 32))
        arr = formwork.allocate_token_bitmask(3, vocab, backend="numpy")
        assert arr.dtype == np.int32 and arr.shape == (3, -(-vocab // 32)) and (arr == -1).all()
    with pytest.raises(ValueError):
        formwork.allocate_token_bitmask(1, 10, backend="jax")


def test_bit_t_of_word_t_over_32_is_token_t(toy: formwork.TokenizerInfo) -> None:
    compiler = formwork.GrammarCompiler(toy)
    for token in (0, 31, 32, 33, 63, 64, 68):
        text = TOY[token]
        # Exactly this token's text: only the tokens that are prefixes of it are allowed.
        m = formwork.GrammarMatcher(compiler.compile_regex(text.replace("a", "a")))
        bitmask = formwork.allocate_token_bitmask(2, toy.vocab_size, backend="numpy")
        assert m.fill_next_token_bitmask(bitmask, 1) is True
        assert (bitmask[0] == -1).all()  # other rows untouched
        word, bit = divmod(token, 32)
        assert (bitmask[1, word] >> bit) & 1 == 1
        allowed = {t for t in range(100) if (bitmask[1, t // 32] >> (t % 32)) & 1}
        assert allowed == {t for t in range(69) if text.startswith(TOY[t])}


def test_fill_checks_the_bitmask(toy: formwork.TokenizerInfo, qwen3: formwork.TokenizerInfo) -> None:
    m = formwork.GrammarMatcher(formwork.GrammarCompiler(toy).compile_regex("a+"))
    good = formwork.allocate_token_bitmask(1, toy.vocab_size, backend="numpy")
    one_row = good[0]
    m.fill_next_token_bitmask(one_row)  # a 1-D row is one row
    assert np.array_equal(one_row, good[0])
    with pytest.raises(ValueError, match="words"):
        m.fill_next_token_bitmask(formwork.allocate_token_bitmask(1, qwen3.vocab_size, backend="numpy"))
    with pytest.raises(IndexError):
        m.fill_next_token_bitmask(good, 1)
    with pytest.raises(TypeError, match="int32"):
        m.fill_next_token_bitmask(np.zeros((1, 4), dtype=np.int64))
    with pytest.raises(ValueError, match="contiguous"):
        m.fill_next_token_bitmask(np.full((4, 8), -1, dtype=np.int32)[:, ::2])
    read_only = formwork.allocate_token_bitmask(1, toy.vocab_size, backend="numpy")
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        m.fill_next_token_bitmask(read_only)
    with pytest.raises(TypeError, match="numpy array or a torch tensor"):
        m.fill_next_token_bitmask([0, 0, 0, 0])
    formwork.reset_token_bitmask(good)
    assert (good == -1).all()


def test_need_apply_is_false_only_for_a_full_mask() -> None:
    info = formwork.TokenizerInfo(["a", "b"], vocab_size=2)
    m = formwork.GrammarMatcher(formwork.GrammarCompiler(info).compile_regex("[ab]*"))
    bitmask = formwork.allocate_token_bitmask(1, 2, backend="numpy")
    assert m.fill_next_token_bitmask(bitmask) is False  # "a", "b" both allowed: nothing masked


def xgrammar_apply(logits: np.ndarray, bitmask: np.ndarray, vocab: int) -> np.ndarray:
    """xgrammar's documented semantics, by hand: logit t kept iff bit t % 32 of word t // 32."""
    out = logits.copy()
    for r in range(out.shape[0]):
        for t in range(vocab):
            if not (int(bitmask[r, t // 32]) >> (t % 32)) & 1:
                out[r, t] = -np.inf
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_apply_numpy(dtype) -> None:
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((3, 70)).astype(dtype)
    bitmask = rng.integers(-(2**31), 2**31, size=(3, 3), dtype=np.int64).astype(np.int32)
    expected = xgrammar_apply(logits, bitmask, 70)
    masked = logits.copy()
    formwork.apply_token_bitmask_inplace(masked, bitmask)
    assert np.array_equal(masked, expected)
    # indices: only rows 0 and 2; vocab_size: columns past it are masked.
    masked = logits.copy()
    formwork.apply_token_bitmask_inplace(masked, bitmask, indices=[2, 0], vocab_size=40)
    assert np.array_equal(masked[1], logits[1])
    for r in (0, 2):
        assert np.array_equal(masked[r, :40], expected[r, :40]) and np.isneginf(masked[r, 40:]).all()
    row = logits[1].copy()
    formwork.apply_token_bitmask_inplace(row, bitmask[1])
    assert np.array_equal(row, expected[1])
    # A strided view is masked in place through numpy operations.
    wide = np.repeat(logits, 2, axis=1)
    formwork.apply_token_bitmask_inplace(wide[:, ::2], bitmask)
    assert np.array_equal(wide[:, ::2], expected) and np.array_equal(wide[:, 1::2], logits)
    with pytest.raises(ValueError):
        formwork.apply_token_bitmask_inplace(logits.copy(), bitmask[:2])
    with pytest.raises(ValueError):
        formwork.apply_token_bitmask_inplace(logits.copy(), bitmask, indices=[3])


def test_apply_torch_cpu_matches_numpy() -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed: the torch apply path is untested here")
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((4, 100)).astype(np.float32)
    bitmask = rng.integers(-(2**31), 2**31, size=(4, 4), dtype=np.int64).astype(np.int32)
    expected = logits.copy()
    formwork.apply_token_bitmask_inplace(expected, bitmask, vocab_size=97)
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
        t = torch.from_numpy(logits.copy()).to(dtype)
        formwork.apply_token_bitmask_inplace(t, torch.from_numpy(bitmask), vocab_size=97)
        assert torch.equal(torch.isinf(t), torch.from_numpy(np.isinf(expected))), dtype
    # A non-contiguous view is masked in place through the torch fallback.
    wide = torch.from_numpy(np.concatenate([logits, logits], axis=1))
    view = wide[:, ::2]
    formwork.apply_token_bitmask_inplace(view, torch.from_numpy(bitmask[:, :2]))
    assert torch.isinf(wide[:, ::2]).sum() > 0 and not torch.isinf(wide[:, 1::2]).any()
    mixed = torch.from_numpy(logits.copy())
    formwork.apply_token_bitmask_inplace(mixed, bitmask, vocab_size=97)  # numpy bitmask
    assert torch.equal(torch.isinf(mixed), torch.from_numpy(np.isinf(expected)))
    assert formwork.allocate_token_bitmask(2, 100).dtype == torch.int32  # torch imported: torch


def test_bitmask_layout_is_xgrammars() -> None:
    xgr = pytest.importorskip("xgrammar", reason="xgrammar is not installed: layout compared with its docs only")
    import torch

    for vocab in (1, 33, 151_936):
        ours = formwork.allocate_token_bitmask(2, vocab, backend="torch")
        theirs = xgr.allocate_token_bitmask(2, vocab)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape and torch.equal(ours, theirs)
    rng = np.random.default_rng(2)
    bitmask = torch.from_numpy(rng.integers(-(2**31), 2**31, size=(2, 4), dtype=np.int64).astype(np.int32))
    logits = torch.from_numpy(rng.standard_normal((2, 128)).astype(np.float32))
    a, b = logits.clone(), logits.clone()
    formwork.apply_token_bitmask_inplace(a, bitmask)
    xgr.apply_token_bitmask_inplace(b, bitmask)
    assert torch.equal(a, b)


def test_batch_fill_equals_single_fills(qwen3: formwork.TokenizerInfo, compiler: formwork.GrammarCompiler) -> None:
    constraints = [
        compiler.compile_regex(r"[0-9]+"),
        compiler.compile_json_schema({"type": "object"}),
        compiler.compile_request('reference_lookup(topics: 1..5, ids: {"1", "2"})'),
    ]
    matchers = [formwork.GrammarMatcher(c) for c in constraints for _ in range(3)]
    for i, m in enumerate(matchers):
        m.accept_string(["1", "{", '[{"topic": ['][i // 3] * (i % 3 > 0))
    single = formwork.allocate_token_bitmask(len(matchers), qwen3.vocab_size, backend="numpy")
    for i, m in enumerate(matchers):
        m.fill_next_token_bitmask(single, i)
    batched = np.zeros_like(single)
    formwork.fill_next_token_bitmasks(matchers, batched)
    assert np.array_equal(batched, single)
    # Scattered rows, a pool of its own, and the xgrammar-shaped class.
    scattered = np.zeros((12, single.shape[1]), dtype=np.int32)
    order = [11, 0, 5, 3, 8, 1, 2, 10, 7]
    pool = formwork.BatchGrammarMatcher(max_threads=3)
    pool.batch_fill_next_token_bitmask(matchers, scattered, order)
    for i, row in enumerate(order):
        assert np.array_equal(scattered[row], single[i])
    assert formwork.BatchGrammarMatcher("auto") is not None
    with pytest.raises(ValueError):
        formwork.fill_next_token_bitmasks(matchers, batched, [0] * len(matchers))
    with pytest.raises(ValueError):
        formwork.fill_next_token_bitmasks(matchers, batched, [0, 1])
    with pytest.raises(IndexError):
        formwork.fill_next_token_bitmasks(matchers[:1], batched, [len(matchers)])


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/status")
def test_a_pool_the_system_cannot_start_is_an_error_and_leaks_no_thread() -> None:
    # In a child whose address space holds about a hundred thread stacks more: a pool past
    # them is refused (it panicked), and the threads started before the refusal are stopped
    # (they stayed asleep, so no thread could start after).
    code = """
import resource, formwork
with open("/proc/self/status") as f:
    size = next(int(line.split()[1]) for line in f if line.startswith("VmSize:")) * 1024
resource.setrlimit(resource.RLIMIT_AS, (size + (256 << 20), resource.RLIM_INFINITY))
for _ in range(3):
    try:
        formwork.BatchGrammarMatcher(max_threads=100_000)
    except OSError as e:
        assert "starting the worker threads" in str(e), e
    else:
        raise SystemExit("started 100,000 threads")
formwork.BatchGrammarMatcher(max_threads=4)
"""
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-2000:]


def test_batch_accept_and_rollback(qwen3: formwork.TokenizerInfo, compiler: formwork.GrammarCompiler) -> None:
    compiled = compiler.compile_regex("[ab]+c")
    ms = [formwork.GrammarMatcher(compiled) for _ in range(3)]
    a, b, c = (qwen3.encode(x)[0] for x in "abc")
    assert formwork.BatchGrammarMatcher.batch_accept_token(ms, [a, b, c]) == [True, True, False]
    assert formwork.BatchGrammarMatcher.batch_accept_string(ms, ["b", "ac", b"a"]) == [True, True, True]
    assert [m.num_accepted for m in ms] == [2, 2, 1]
    formwork.BatchGrammarMatcher.batch_rollback(ms, [1, 2, 0])
    assert [m.num_accepted for m in ms] == [1, 0, 1]
    formwork.BatchGrammarMatcher.batch_rollback(ms[:1])
    assert ms[0].num_accepted == 0
