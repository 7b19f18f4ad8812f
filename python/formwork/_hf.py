"""What :meth:`formwork.TokenizerInfo.from_huggingface` reads off a ``transformers`` tokenizer."""

from typing import Any, List, Optional, Sequence, Tuple, Union

from formwork.errors import TokenizerError


def describe(
    tokenizer: Any, stop_token_ids: Optional[Union[int, Sequence[int]]]
) -> Tuple[str, str, Optional[List[str]]]:
    """The tokenizer's ``tokenizer.json`` text, a name for errors, and its stop tokens by
    content (``stop_token_ids`` if given, else ``eos_token_id``; ``None`` when neither names
    one: the loader then takes well-known end tokens)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise TokenizerError(
            f"{type(tokenizer).__name__} is not a fast tokenizer (no backend_tokenizer): load it "
            "with use_fast=True, or pass its tokenizer.json to TokenizerInfo.from_tokenizer_json",
            kind="UnsupportedEncoding",
        )
    if stop_token_ids is None:
        eos = getattr(tokenizer, "eos_token_id", None)
        ids = [] if eos is None else [eos]
    elif isinstance(stop_token_ids, int):
        ids = [stop_token_ids]
    else:
        ids = list(stop_token_ids)
    stop = [tokenizer.convert_ids_to_tokens(int(i)) for i in ids]
    source = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    return backend.to_str(), source, stop or None
