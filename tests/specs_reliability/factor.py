"""Two registers built bit by bit; the invariant says their product is never N, a product of two
large primes. Bounded model checking of it is factoring: a single solver call runs for hours,
which is what the tests of stopping a solver call need (SIGTERM during one long Z3 call)."""
from kcheck import Int, Spec

spec = Spec("factor", __doc__)
BITS = 31
N = 1234567891 * 1987654421    # two primes below 2**31
spec.param("bits", BITS, 1, BITS, "bits of each register")


@spec.state
def state(p):
    return {"x": Int(0, 2 ** p.bits - 1), "y": Int(0, 2 ** p.bits - 1)}


@spec.init
def init(p):
    yield {"x": 0, "y": 0}


@spec.action(b=lambda p: (0, 1))
def ShiftX(s, p, b):
    """x takes one more low bit."""
    s.require(s.x < 2 ** (p.bits - 1))
    s.x = s.x * 2 + b


@spec.action(b=lambda p: (0, 1))
def ShiftY(s, p, b):
    """y takes one more low bit."""
    s.require(s.y < 2 ** (p.bits - 1))
    s.y = s.y * 2 + b


@spec.invariant("not-factored")
def not_factored(s, p):
    """The registers' product is not N."""
    return s.x * s.y != N
