"""A token going round three positions: a fair cycle.

Properties (progress):
- reaches-two: the token is at position two infinitely often.
- reaches-three: the token is at position three infinitely often (never: there is none).
- zero-leads-to-two-unfair: from position zero the token reaches two, with no action fair.
"""
from kcheck import If, Int, Spec

spec = Spec("ring", __doc__)


@spec.state
def state(p):
    return {"pos": Int(0, 3)}


@spec.init
def init(p):
    yield {"pos": 0}


@spec.action
def Tick(s, p):
    """The token moves on."""
    s.require(s.pos < 3)
    s.pos = If(s.pos == 2, 0, s.pos + 1)


@spec.always_eventually("reaches-two", fair=["Tick"])
def reaches_two(s, p):
    """The token is at position two infinitely often."""
    return s.pos == 2


@spec.always_eventually("reaches-three", fair=["Tick"])
def reaches_three(s, p):
    """The token is at position three infinitely often."""
    return s.pos == 3


@spec.leads_to("zero-leads-to-two-unfair", fair=[])
def zero_two(s, p):
    """From position zero the token eventually reaches position two, with no action fair."""
    return s.pos == 0, s.pos == 2


spec.variant("ring", "the ring", default=True,
             violates=["reaches-three", "zero-leads-to-two-unfair"])
