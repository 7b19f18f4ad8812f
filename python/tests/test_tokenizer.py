"""TokenizerInfo: every constructor and property."""

import gzip
import json

import pytest

import formwork
from conftest import QWEN3_DIR


def test_embedded_qwen3_sizes_and_stop_tokens(qwen3: formwork.TokenizerInfo) -> None:
    assert qwen3.vocab_size == 151_936  # the Qwen3 models' embedding rows
    assert qwen3.num_tokens == 151_669
    assert qwen3.source == "embedded:qwen3"
    im_end = qwen3.encode("<|im_end|>")
    assert len(im_end) == 1 and im_end[0] in qwen3.stop_token_ids
    assert im_end[0] in qwen3.special_token_ids
    assert qwen3.special_token_ids == sorted(qwen3.special_token_ids)
    # Qwen3's <tool_call> is a non-special added token: text.
    tool_call = qwen3.encode("<tool_call>")
    assert len(tool_call) == 1 and tool_call[0] not in qwen3.special_token_ids
    assert qwen3.token_bytes(tool_call[0]) == b"<tool_call>"
    assert "TokenizerInfo(" in repr(qwen3)


def test_token_bytes_are_exact_bytes(qwen3: formwork.TokenizerInfo) -> None:
    ids = qwen3.encode(" héllo\n")
    assert b"".join(qwen3.token_bytes(t) for t in ids) == " héllo\n".encode()
    vocab = qwen3.decoded_vocab
    assert len(vocab) == qwen3.num_tokens
    assert all(vocab[t] == qwen3.token_bytes(t) for t in ids)
    assert qwen3.token_bytes(qwen3.vocab_size - 1) == b""  # padding row: unused
    with pytest.raises(ValueError):
        qwen3.token_bytes(qwen3.vocab_size)


def test_from_tokenizer_json_file_and_text(tmp_path) -> None:
    from_file = formwork.TokenizerInfo.from_tokenizer_json(QWEN3_DIR / "tokenizer.json.gz", vocab_size=151_936)
    assert from_file.vocab_size == 151_936 and from_file.num_tokens == 151_669
    # tokenizer_config.json beside the file names the EOS.
    config = json.loads((QWEN3_DIR / "tokenizer_config.json").read_text())
    eos = config["eos_token"]
    assert [from_file.token_bytes(t).decode() for t in from_file.stop_token_ids] == [eos]
    text = gzip.decompress((QWEN3_DIR / "tokenizer.json.gz").read_bytes()).decode()
    from_text = formwork.TokenizerInfo.from_tokenizer_json_str(
        text, source="qwen3", stop_tokens=["<|endoftext|>", "<|im_end|>"]
    )
    assert from_text.vocab_size == from_text.num_tokens == 151_669
    assert len(from_text.stop_token_ids) == 2
    assert from_text.source == "qwen3"


def test_tokenizer_errors_are_typed(tmp_path) -> None:
    with pytest.raises(formwork.TokenizerError) as e:
        formwork.TokenizerInfo.from_tokenizer_json(tmp_path / "missing.json")
    assert e.value.kind == "Io" and "missing.json" in str(e.value)
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(formwork.TokenizerError) as e:
        formwork.TokenizerInfo.from_tokenizer_json(bad)
    assert e.value.kind == "Parse"
    with pytest.raises(formwork.TokenizerError) as e:
        formwork.TokenizerInfo.from_tokenizer_json(QWEN3_DIR / "tokenizer.json.gz", vocab_size=10)
    assert e.value.kind == "Config"
    with pytest.raises(formwork.TokenizerError) as e:
        formwork.TokenizerInfo.from_tokenizer_json(QWEN3_DIR / "tokenizer.json.gz", stop_tokens=["hello"])
    assert "not a special token" in str(e.value)


def test_raw_token_bytes_constructor() -> None:
    info = formwork.TokenizerInfo(["a", b"b", "ab", "</s>", ""], vocab_size=40, stop_token_ids=[3])
    assert info.vocab_size == 40 and info.num_tokens == 40
    assert info.stop_token_ids == [3] and info.special_token_ids == [3]
    assert info.token_bytes(2) == b"ab" and info.source == "bytes"
    assert info.encode("abab") == [2, 2]
    with pytest.raises(ValueError):
        formwork.TokenizerInfo(["a", "b"], vocab_size=1)


def test_raw_token_bytes_past_the_widest_mask() -> None:
    # Refused before the unused ids are made (2**40 of them took all the memory).
    for width in (2**24 + 1, 2**40):
        with pytest.raises(ValueError, match="widest supported mask"):
            formwork.TokenizerInfo(["a", "b"], vocab_size=width)


class _FakeBackend:
    def __init__(self, text: str) -> None:
        self.text = text

    def to_str(self) -> str:
        return self.text


class FakeHfTokenizer:
    """What from_huggingface reads off a transformers fast tokenizer."""

    def __init__(self) -> None:
        self.backend_tokenizer = _FakeBackend(gzip.decompress((QWEN3_DIR / "tokenizer.json.gz").read_bytes()).decode())
        self.name_or_path = "fake/qwen3"
        self.eos_token_id = 151645  # <|im_end|>

    def convert_ids_to_tokens(self, i: int) -> str:
        return {151645: "<|im_end|>", 151643: "<|endoftext|>"}[i]


def test_from_huggingface_reads_json_and_eos() -> None:
    tok = FakeHfTokenizer()
    info = formwork.TokenizerInfo.from_huggingface(tok, vocab_size=151_936)
    assert info.vocab_size == 151_936 and info.stop_token_ids == [151645]
    assert info.source == "fake/qwen3"
    both = formwork.TokenizerInfo.from_huggingface(tok, stop_token_ids=[151643, 151645])
    assert both.stop_token_ids == [151643, 151645] and both.vocab_size == 151_669
    one = formwork.TokenizerInfo.from_huggingface(tok, stop_token_ids=151643)
    assert one.stop_token_ids == [151643]


def test_from_huggingface_needs_a_fast_tokenizer() -> None:
    with pytest.raises(formwork.TokenizerError) as e:
        formwork.TokenizerInfo.from_huggingface(object())
    assert "fast tokenizer" in str(e.value)
