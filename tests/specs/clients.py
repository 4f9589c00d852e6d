"""A server with two clients: weak fairness per action instance.

Client 1's request stays pending while client 0 requests and is served again and again. With
weak fairness per instance, Serve(c=1) is continuously enabled along that cycle and never
taken, so the cycle is unfair and client 1 is served; with fairness on the action as a whole
(TLC's WF_vars(\\E c: Serve(c))) the cycle would be fair, since Serve(c=0) is taken.

Properties (progress):
- served: a pending request of client 1 is eventually served.
- served-unfair: the same with no action fair.
"""
from kcheck import Array, Bool, Spec, And

spec = Spec("clients", __doc__)


@spec.state
def state(p):
    return {"pending": Array(Bool, 2)}


@spec.init
def init(p):
    yield {"pending": [False, False]}


@spec.action(c=range(2))
def Request(s, p, c):
    s.require(~s.pending[c])
    s.pending[c] = True


@spec.action(c=range(2))
def Serve(s, p, c):
    s.require(s.pending[c])
    s.pending[c] = False


@spec.leads_to("served", fair=["Serve"])
def served(s, p):
    """A pending request of client 1 is eventually served."""
    return s.pending[1], ~s.pending[1]


@spec.leads_to("served-unfair", fair=[])
def served_unfair(s, p):
    """A pending request of client 1 is eventually served, with no action fair."""
    return And(s.pending[1]), ~s.pending[1]


spec.variant("per-instance", "weak fairness per instance", default=True, violates=["served-unfair"])
