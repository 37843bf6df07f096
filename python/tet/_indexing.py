"""numpy basic indexing (and outer indexing by integer lists) turned into the per-axis sorted
position lists the Rust reader takes, plus what turns the read block back into the result."""

from __future__ import annotations

import operator

import numpy as np

_U64 = np.uint64


def _axis_positions(k, n: int, axis: int):
    """Positions selected on an axis of length ``n`` by key ``k``: (positions in the order
    asked, whether the axis is dropped)."""
    if isinstance(k, slice):
        return np.arange(*k.indices(n), dtype=np.int64), False
    if isinstance(k, (np.ndarray, list, tuple)):
        a = np.asarray(k)
        if a.dtype == bool:
            if a.shape != (n,):
                raise IndexError(
                    f"boolean index of shape {a.shape} does not match axis {axis} of length {n}"
                )
            return np.flatnonzero(a).astype(np.int64), False
        if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
            raise IndexError("only 1-d integer or boolean arrays are supported as indices")
        a = a.astype(np.int64)
        a = np.where(a < 0, a + n, a)
        if a.size and (a.min() < 0 or a.max() >= n):
            raise IndexError(f"index out of bounds for axis {axis} with size {n}")
        return a, False
    try:
        i = operator.index(k)
    except TypeError:
        raise IndexError(
            f"only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and "
            f"integer or boolean arrays are valid indices, not {type(k).__name__}"
        ) from None
    if i < -n or i >= n:
        raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
    return np.array([i % n], dtype=np.int64), True


def expand_key(key, ndim: int):
    """The key as a tuple with ``...`` expanded, and the positions of ``None`` axes in the
    result."""
    if not isinstance(key, tuple):
        key = (key,)
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    real = [k for k in key if k is not None and k is not Ellipsis]
    if len(real) > ndim:
        raise IndexError(
            f"too many indices: the array is {ndim}-dimensional, but {len(real)} were indexed"
        )
    out = []
    for k in key:
        if k is Ellipsis:
            out.extend([slice(None)] * (ndim - len(real)))
        else:
            out.append(k)
    if not any(k is Ellipsis for k in key):
        out.extend([slice(None)] * (ndim - len(real)))
    return tuple(out)


class Selection:
    """A key resolved against a shape: what to read and how to finish the result."""

    def __init__(self, key, shape):
        key = expand_key(key, len(shape))
        self.read = []  # per axis: sorted unique positions (uint64)
        self.take = []  # per axis: indices into the read block, or None when it is exact
        result_shape = []
        axis = 0
        for k in key:
            if k is None:
                result_shape.append(1)
                continue
            n = shape[axis]
            pos, drop = _axis_positions(k, n, axis)
            uniq, inverse = np.unique(pos, return_inverse=True)
            self.read.append(np.ascontiguousarray(uniq, dtype=_U64))
            exact = len(uniq) == len(pos) and (len(pos) < 2 or bool(np.all(pos[1:] > pos[:-1])))
            self.take.append(None if exact else inverse.reshape(-1))
            if not drop:
                result_shape.append(len(pos))
            axis += 1
        self.shape = tuple(result_shape)

    @property
    def empty(self) -> bool:
        """Whether the selection holds no element (an empty slice on some axis)."""
        return any(len(r) == 0 for r in self.read)

    def finish(self, block: np.ndarray) -> np.ndarray:
        """The result from the block read at ``self.read``."""
        if any(t is not None for t in self.take):
            idx = [np.arange(len(r)) if t is None else t for r, t in zip(self.read, self.take)]
            block = block[np.ix_(*idx)] if idx else block
        return block.reshape(self.shape)
