"""A counter that should reach three but gets stuck at two in the 'stuck' variant.

Properties:
- small: the counter stays within 0..3.
Progress:
- reaches-three: the counter eventually reaches three.
"""
from kcheck import Int, Spec

spec = Spec("stuck", __doc__)
spec.param("start", 0, lo=0, hi=3)


@spec.state
def state(p):
    return {"x": Int(0, 3), "y": Int(0, 1)}


@spec.init
def init(p):
    yield {"x": p.start, "y": 0}
    yield {"x": p.start, "y": 1}


@spec.action
def Inc(s, p):
    s.require(s.x < 3)
    if s.variant == "stuck":
        s.require(s.x != 2)
    s.x = s.x + 1


@spec.invariant("small")
def small(s, p):
    """The counter stays within 0..3."""
    return s.x <= 3


@spec.terminal
def done(s, p):
    return s.x == 3


@spec.always_eventually("reaches-three", fair=["Inc"])
def reaches_three(s, p):
    """The counter eventually reaches three."""
    return s.x == 3


spec.variant("counts", "counts to three", default=True)
spec.variant("stuck", "stops at two", violates=["deadlock", "reaches-three"])
