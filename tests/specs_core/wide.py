"""A counter spec whose state needs two 64-bit words, with a search-bound epoch.

Properties:
- small-sum: the sum of the counters stays below the parameter `limit`.
"""
from kcheck import Array, Int, Spec

spec = Spec("wide", __doc__)
spec.param("n", 3, lo=1, hi=8)
spec.param("limit", 100, lo=0, hi=1000)
spec.param("max_epoch", 2, lo=0, hi=10)


@spec.state
def state(p):
    # 30-bit counters: three of them do not fit one word
    return {"c": Array(Int(0, (1 << 30) - 1), p.n), "epoch": Int(0, p.max_epoch, search_bound=True)}


@spec.init
def init(p):
    yield {"c": [0] * p.n, "epoch": 0}


@spec.action(i=lambda p: range(p.n))
def Inc(s, p, i):
    s.require(s.c[i] < 2)
    s.c[i] = s.c[i] + 1


@spec.action
def Bump(s, p):
    s.epoch = s.epoch + 1


@spec.invariant("small-sum")
def small_sum(s, p):
    """The sum of the counters stays below the limit."""
    total = s.c[0]
    for i in range(1, p.n):
        total = total + s.c[i]
    return total < p.limit


spec.variant("default", "as written", default=True)
