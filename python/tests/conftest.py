"""Shared fixtures: the embedded Qwen3 vocabulary, a compiler with the shipped templates, the
repository's data, and the formwork CLI (the Rust side of the mask comparisons)."""

import gzip
import os
import shutil
from pathlib import Path
from typing import Optional

import pytest

import formwork

REPO = Path(__file__).resolve().parents[2]
QWEN3_DIR = REPO / "data" / "tokenizers" / "qwen3"


@pytest.fixture(scope="session")
def qwen3() -> formwork.TokenizerInfo:
    return formwork.TokenizerInfo.qwen3()


@pytest.fixture(scope="session")
def compiler(qwen3: formwork.TokenizerInfo) -> formwork.GrammarCompiler:
    c = formwork.GrammarCompiler(qwen3)
    c.register_templates(formwork.shipped_templates())
    return c


@pytest.fixture(scope="session")
def qwen3_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped Qwen3 tokenizer as a folder transformers can load (tokenizer.json
    uncompressed, tokenizer_config.json beside it)."""
    out = tmp_path_factory.mktemp("qwen3")
    with gzip.open(QWEN3_DIR / "tokenizer.json.gz", "rb") as src, open(out / "tokenizer.json", "wb") as dst:
        shutil.copyfileobj(src, dst)
    shutil.copy(QWEN3_DIR / "tokenizer_config.json", out / "tokenizer_config.json")
    return out


def find_cli() -> Optional[Path]:
    """The formwork CLI: $FORMWORK_CLI, else a binary `cargo build`/`cargo test` left in
    target/ (the README's test command builds it before running pytest)."""
    if os.environ.get("FORMWORK_CLI"):
        return Path(os.environ["FORMWORK_CLI"])
    for profile in ("debug", "release"):
        path = REPO / "target" / profile / "formwork"
        if path.exists():
            return path
    return None


@pytest.fixture(scope="session")
def cli() -> Path:
    path = find_cli()
    if path is None:
        pytest.skip(
            "no formwork CLI to compare masks with: run `cargo build` at the repository root "
            "(the README's test command does) or set FORMWORK_CLI"
        )
    return path
