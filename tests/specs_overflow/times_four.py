"""x starts at 2^62, and four times x is 2^64, which a 64-bit integer cannot hold (issue 36):
the engines must refuse this spec, not wrap 2^64 to 0."""
from kcheck import Int, Spec

spec = Spec("times_four", __doc__)


@spec.state
def state(p):
    return {"x": Int(0, 2**62)}


@spec.init
def init(p):
    yield {"x": 2**62}


@spec.invariant("small")
def small(s, p):
    """Four times x stays below 2^62."""
    return s.x * 4 < 2**62
