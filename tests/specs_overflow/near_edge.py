"""Arithmetic that comes close to the 64-bit limit without crossing it: three times 2^61 is
6.9e18, under 2^63 - 1 (9.2e18). Every engine computes it exactly, so check, bmc and replay
agree: ``small`` fails in the initial state, ``y_small`` after one Scale (issue 36)."""
from kcheck import Int, Spec

spec = Spec("near_edge", __doc__)


@spec.state
def state(p):
    return {"x": Int(0, 2**61), "y": Int(0, 2**63 - 1)}


@spec.init
def init(p):
    yield {"x": 2**61, "y": 0}


@spec.action()
def Scale(s, p):
    s.y = s.x * 3


@spec.invariant("small")
def small(s, p):
    """Three times x stays below 2^62."""
    return s.x * 3 < 2**62


@spec.invariant("y_small")
def y_small(s, p):
    """y stays below 2^62."""
    return s.y < 2**62
