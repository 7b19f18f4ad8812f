"""Token bitmasks as numpy arrays or torch tensors, in xgrammar's layout: ``int32``, shape
``(batch, ceil(vocab_size / 32))``, bit ``t % 32`` of word ``t // 32`` set when token ``t``
is allowed (words are little-endian two's complement: a full word is ``-1``).

Neither numpy nor torch is a dependency of formwork; these functions import the one the
arrays come from.
"""

import sys
from typing import Any, Optional, Sequence, Tuple

from formwork import _native

__all__ = [
    "get_bitmask_shape",
    "allocate_token_bitmask",
    "reset_token_bitmask",
    "apply_token_bitmask_inplace",
]


def get_bitmask_shape(batch_size: int, vocab_size: int) -> Tuple[int, int]:
    """``(batch_size, ceil(vocab_size / 32))``: the shape of a bitmask for ``batch_size`` rows."""
    return (batch_size, (vocab_size + 31) // 32)


def _is_torch(array: Any) -> bool:
    return type(array).__module__.startswith("torch")


def allocate_token_bitmask(batch_size: int, vocab_size: int, *, backend: Optional[str] = None) -> Any:
    """A bitmask for ``batch_size`` rows with every token allowed (every word ``-1``).

    ``backend``: ``"numpy"`` (an ``np.ndarray``) or ``"torch"`` (a CPU ``torch.Tensor``, as
    xgrammar returns); by default torch if it is already imported, else numpy.
    """
    if backend is None:
        backend = "torch" if "torch" in sys.modules else "numpy"
    shape = get_bitmask_shape(batch_size, vocab_size)
    if backend == "torch":
        import torch

        return torch.full(shape, -1, dtype=torch.int32)
    if backend == "numpy":
        import numpy as np

        return np.full(shape, -1, dtype=np.int32)
    raise ValueError(f'backend must be "numpy" or "torch", got {backend!r}')


def reset_token_bitmask(bitmask: Any) -> None:
    """Sets every bit (every token allowed)."""
    if _is_torch(bitmask):
        bitmask.fill_(-1)
    else:
        bitmask.fill(-1)


def _check_rows(logits_rows: int, mask_rows: int, indices: Optional[Sequence[int]]) -> None:
    if indices is None:
        if logits_rows != mask_rows:
            raise ValueError(
                f"{logits_rows} logits rows but {mask_rows} bitmask rows (give indices to touch "
                "only some rows)"
            )
        return
    for position, row in enumerate(indices):
        if not 0 <= row < min(logits_rows, mask_rows):
            raise ValueError(
                f"indices[{position}] = {row}, but there are {logits_rows} logits rows and "
                f"{mask_rows} bitmask rows"
            )


def _vocab(row_len: int, mask_words: int, vocab_size: Optional[int]) -> int:
    vocab = min(row_len, 32 * mask_words) if vocab_size is None else vocab_size
    if vocab > 32 * mask_words or vocab > row_len:
        raise ValueError(
            f"vocabulary of {vocab} tokens does not fit bitmask rows of {32 * mask_words} bits "
            f"and logits rows of {row_len}"
        )
    return vocab


def _rows(logits: Any) -> Any:
    """A 2-D view of the logits (never a copy: the masking writes through it)."""
    if len(logits.shape) == 2:
        return logits
    if len(logits.shape) == 1:
        return logits[None, :]
    raise ValueError(f"logits must be 1-D or 2-D, got shape {tuple(logits.shape)}")


def _apply_numpy(logits: Any, bitmask: Any, vocab_size: Optional[int], indices: Optional[Sequence[int]]) -> None:
    import numpy as np

    rows = _rows(logits)
    masks = np.ascontiguousarray(bitmask).reshape(-1, bitmask.shape[-1])
    _check_rows(rows.shape[0], masks.shape[0], indices)
    vocab = _vocab(rows.shape[1], masks.shape[1], vocab_size)
    allowed = np.zeros((masks.shape[0], rows.shape[1]), dtype=bool)
    bits = np.unpackbits(masks.astype("<i4").view(np.uint8), axis=1, bitorder="little")
    allowed[:, :vocab] = bits[:, :vocab].astype(bool)
    touched = range(rows.shape[0]) if indices is None else indices
    for r in touched:
        rows[r][~allowed[r]] = -np.inf


def _apply_torch(logits: Any, bitmask: Any, vocab_size: Optional[int], indices: Optional[Sequence[int]]) -> None:
    import torch

    rows = _rows(logits)
    if not _is_torch(bitmask):
        bitmask = torch.from_numpy(bitmask)
    masks = bitmask.to(logits.device, non_blocking=True).reshape(-1, bitmask.shape[-1])
    _check_rows(rows.shape[0], masks.shape[0], indices)
    vocab = _vocab(rows.shape[-1], masks.shape[1], vocab_size)
    shifts = torch.arange(32, device=logits.device, dtype=torch.int32)
    bits = ((masks.unsqueeze(-1) >> shifts) & 1).bool().reshape(masks.shape[0], -1)
    allowed = torch.zeros((masks.shape[0], rows.shape[-1]), dtype=torch.bool, device=logits.device)
    allowed[:, :vocab] = bits[:, :vocab]
    if indices is None:
        rows.masked_fill_(~allowed, float("-inf"))
    else:
        for r in indices:
            rows[r].masked_fill_(~allowed[r], float("-inf"))


def apply_token_bitmask_inplace(
    logits: Any,
    bitmask: Any,
    *,
    vocab_size: Optional[int] = None,
    indices: Optional[Sequence[int]] = None,
) -> None:
    """Sets the logits of disallowed tokens to ``-inf``, in place.

    ``logits``: ``(batch, row_len)`` or ``(row_len,)``, a numpy array or torch tensor;
    ``bitmask``: ``(batch, ceil(vocab_size / 32))`` int32 (numpy or torch, any device).
    Without ``indices`` every row is masked by the bitmask row of the same number; with them
    only those rows. ``vocab_size`` (default ``min(row_len, 32 × words)``): tokens at or past
    it are masked whatever the bitmask says.

    CPU float32/float16/bfloat16 arrays are masked by formwork's native kernel with the GIL
    released; other dtypes and devices (CUDA tensors) with vectorized numpy or torch
    operations, bitmask moved to the logits' device.

    Difference from xgrammar: logits columns at or past ``vocab_size`` (padding of the
    model's head) are masked too, as vLLM's and llguidance's kernels do; xgrammar leaves them.
    """
    idx = None if indices is None else [int(i) for i in indices]
    if _native._apply_token_bitmask_cpu(logits, bitmask, vocab_size, idx):
        return
    if _is_torch(logits):
        _apply_torch(logits, bitmask, vocab_size, idx)
        return
    if _is_torch(bitmask):
        bitmask = bitmask.cpu().numpy()
    _apply_numpy(logits, bitmask, vocab_size, idx)
