"""An effect whose value, four times 2^62, wraps to 0 in 64-bit integers (issue 36): the
engines must refuse this spec, not write the wrapped 0 into y."""
from kcheck import Int, Spec

spec = Spec("scale_effect", __doc__)


@spec.state
def state(p):
    return {"x": Int(0, 2**62), "y": Int(0, 2**62)}


@spec.init
def init(p):
    yield {"x": 2**62, "y": 1}


@spec.action()
def Scale(s, p):
    s.y = s.x * 4


@spec.invariant("y_positive")
def y_positive(s, p):
    """y stays positive."""
    return s.y > 0
