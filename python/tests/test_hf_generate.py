"""End to end through transformers' generate(): a small Qwen3 model built locally from a config
with random weights (no hub download), the Qwen3 tokenizer shipped in the repository loaded
as a transformers tokenizer, formwork.contrib.hf.LogitsProcessor, several seeds and
constraints; every output is checked by an independent validator. Skipped, saying so, where
torch or transformers is not installed."""

from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the transformers generate() test is skipped")
transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed: the transformers generate() test is skipped"
)

import formwork  # noqa: E402
import formwork.contrib.hf  # noqa: E402
from decoding import CONSTRAINTS, Constraint, bias_ids, render  # noqa: E402

MAX_NEW_TOKENS = 400


class Bias(transformers.LogitsProcessor):
    """A model's preference for some tokens (added after the mask: masked stays -inf)."""

    def __init__(self, bias: dict) -> None:
        self.bias = bias

    def __call__(self, input_ids: "torch.LongTensor", scores: "torch.FloatTensor") -> "torch.FloatTensor":
        for t, b in self.bias.items():
            scores[:, t] += b
        return scores


@pytest.fixture(scope="module")
def tokenizer(qwen3_tokenizer_dir: Path):
    return transformers.AutoTokenizer.from_pretrained(str(qwen3_tokenizer_dir))


def tiny_qwen3(seed: int):
    torch.manual_seed(seed)
    config = transformers.Qwen3Config(
        vocab_size=151_936,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
    )
    return transformers.Qwen3ForCausalLM(config).eval()


def test_tokenizer_info_from_the_transformers_tokenizer(tokenizer, qwen3: formwork.TokenizerInfo) -> None:
    info = formwork.TokenizerInfo.from_huggingface(tokenizer, vocab_size=151_936)
    assert info.vocab_size == qwen3.vocab_size and info.num_tokens == qwen3.num_tokens
    assert info.stop_token_ids == [tokenizer.eos_token_id]
    text = 'Hi <tool_call>\n{"a": 1}</tool_call><|im_end|>'
    assert info.encode(text) == tokenizer.encode(text, add_special_tokens=False)
    assert info.decoded_vocab == qwen3.decoded_vocab


@pytest.mark.parametrize("constraint", CONSTRAINTS, ids=[c.label for c in CONSTRAINTS])
def test_generate_gives_valid_outputs(constraint: Constraint, tokenizer) -> None:
    stops = [tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
    info = formwork.TokenizerInfo.from_huggingface(tokenizer, vocab_size=151_936, stop_token_ids=stops)
    compiler = formwork.GrammarCompiler(info)
    compiler.register_templates(formwork.shipped_templates())
    compiled = constraint.compile(compiler)
    prompt = tokenizer(["Answer in the required format:", "Go:"], return_tensors="pt", padding=True)
    outputs = set()
    for seed in range(3):
        model = tiny_qwen3(seed)
        processors = transformers.LogitsProcessorList(
            [formwork.contrib.hf.LogitsProcessor(compiled), Bias(bias_ids(info, constraint.bias))]
        )
        generated = model.generate(
            **prompt,
            logits_processor=processors,
            do_sample=True,
            top_k=0,
            top_p=1.0,
            temperature=1.0,
            max_new_tokens=MAX_NEW_TOKENS,
            eos_token_id=stops,
            pad_token_id=stops[1],
        )
        for row in generated[:, prompt["input_ids"].shape[1] :].tolist():
            assert any(t in stops for t in row), f"{constraint.label}: no stop within {MAX_NEW_TOKENS} tokens"
            text = render(info, row[: next(i for i, t in enumerate(row) if t in stops)])
            constraint.check(text)
            outputs.add(text)
    assert len(outputs) > 1
