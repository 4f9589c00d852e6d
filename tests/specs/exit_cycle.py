"""A cycle between two states with a fair exit from one of them.

In the default variant the exit is enabled only in state one, so weak fairness does not force
it (the cycle keeps disabling it); in 'steady-exit' the exit is enabled in both states of the
cycle, so weak fairness forces it.

Properties (progress):
- exits: the cycle is eventually left for state two.
"""
from kcheck import Int, Spec

spec = Spec("exit_cycle", __doc__)


@spec.state
def state(p):
    return {"x": Int(0, 2)}


@spec.init
def init(p):
    yield {"x": 0}


@spec.action
def Forth(s, p):
    s.require(s.x == 0)
    s.x = 1


@spec.action
def Back(s, p):
    s.require(s.x == 1)
    s.x = 0


@spec.action
def Exit(s, p):
    if s.variant == "steady-exit":
        s.require(s.x != 2)
    else:
        s.require(s.x == 1)
    s.x = 2


@spec.always_eventually("exits", fair=["Forth", "Back", "Exit"])
def exits(s, p):
    """The cycle is eventually left for state two."""
    return s.x == 2


spec.variant("intermittent-exit", "the exit is enabled in state one only", default=True,
             violates=["exits"])
spec.variant("steady-exit", "the exit is enabled in both states of the cycle")
