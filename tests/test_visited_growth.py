"""The visited set grows each of its buffers when it must: the keys' reservation (several words
a state) can fail where the fingerprints' succeeds, and then the keys grow by copying (a search
of 1.65 million 2-word states crashed at 2^20 before this)."""
import numpy as np

from kcheck import explore


def test_keys_grow_when_only_their_reservation_failed(monkeypatch):
    real = explore.reserve
    # the 1-D fingerprint buffer is reserved; the 2-D keys buffer falls back to 2^20 columns
    monkeypatch.setattr(explore, "reserve", lambda shape: real(shape) if len(shape) == 1
                        else np.empty(shape, dtype=np.uint64))
    v = explore.Visited(2)
    total = (1 << 20) + 5
    fp = np.arange(0, 2 * total, 2, dtype=np.uint64)
    keys = np.vstack([fp + 1, fp + 7])
    half = total // 2
    v.add(fp[:half], keys[:, :half])
    v.add(fp[half:], keys[:, half:])
    assert v.n == total and v.keys.shape[1] >= total
    assert (v.sorted_fp == fp).all() and (v.keys[:, :total] == keys).all()
    assert not v.absent(fp[-3:], keys[:, -3:]).any()
