"""A toy group written the old way: members x partitions as one flat array indexed by
slot arithmetic, a request in flight as parallel arrays, error precedence as nested Ifs.
tests/test_lang.py checks that records.py, the same protocol in 2-D arrays, records and Case,
has the very same fields, bit layout, states and verdicts."""
from kcheck import Array, Bool, Enum, Exists, Forall, If, Int, Spec

spec = Spec("lang_flat", __doc__)
spec.param("members", 2, lo=1, hi=3)
spec.param("partitions", 2, lo=1, hi=3)
spec.param("max_epoch", 3, lo=1, hi=6)

Error = spec.outcomes(Enum("Error", "NONE FENCED_MEMBER_EPOCH STALE_MEMBER_EPOCH"))


def _slot(p, m, q):
    return m * p.partitions + q


@spec.state
def state(p):
    return {
        "epoch": Int(0, p.max_epoch, search_bound=True),
        "leader": Int(0, p.members - 1),
        "owns": Array(Bool, p.members * p.partitions),
        "request_present": Array(Bool, p.members),
        "request_epoch": Array(Int(0, p.max_epoch), p.members),
    }


@spec.init
def init(p):
    yield {"epoch": 0, "leader": 0, "owns": [False] * (p.members * p.partitions),
           "request_present": [False] * p.members, "request_epoch": [0] * p.members}


@spec.action(m=lambda p: range(p.members), q=lambda p: range(p.partitions))
def Assign(s, p, m, q):
    s.require(Forall(range(p.members), lambda o: ~s.owns[_slot(p, o, q)]))
    s.owns[_slot(p, m, q)] = True
    s.epoch = s.epoch + 1


@spec.action(q=lambda p: range(p.partitions))
def LeaderReleases(s, p, q):
    # an expression index: the member named by a state field
    s.owns[s.leader * p.partitions + q] = False


@spec.action(m=lambda p: range(p.members))
def BecomeLeader(s, p, m):
    s.leader = m


@spec.action(m=lambda p: range(p.members))
def Send(s, p, m):
    s.require(~s.request_present[m])
    s.request_present[m] = True
    s.request_epoch[m] = s.epoch


@spec.action(m=lambda p: range(p.members))
def Receive(s, p, m):
    s.require(s.request_present[m])
    s.request_present[m] = False
    s.respond(If(s.request_epoch[m] + 1 < s.epoch, Error.FENCED_MEMBER_EPOCH,
                 If(s.request_epoch[m] < s.epoch, Error.STALE_MEMBER_EPOCH, Error.NONE)))


@spec.invariant("one-owner")
def one_owner(s, p):
    """No partition is owned by two members."""
    return Forall(range(p.partitions), lambda q: Forall(range(p.members), lambda a: Forall(
        range(a + 1, p.members), lambda b: ~(s.owns[_slot(p, a, q)] & s.owns[_slot(p, b, q)]))))


@spec.invariant("leader-owns-nothing")
def leader_owns_nothing(s, p):
    """The leader owns no partition (false: a leader may be assigned one)."""
    return Forall(range(p.partitions), lambda q: ~Exists(
        range(p.members), lambda m: (s.leader == m) & s.owns[_slot(p, m, q)]))


@spec.transition_property("no-fencing-of-current", actions=["Receive"])
def no_fencing(pre, post, action, args, outcome, p):
    """A request of the current epoch is never fenced."""
    m = args["m"]
    return (pre.request_epoch[m] != pre.epoch) | (outcome == Error.NONE)


@spec.sometimes("request-to-fence")
def request_to_fence(s, p):
    """Some request in flight is two epochs old, so the coordinator will fence it."""
    return Exists(range(p.members), lambda m: s.request_present[m] & (s.request_epoch[m] + 1 < s.epoch))


@spec.sometimes("shared-partition")
def shared_partition(s, p):
    """Some partition is owned by two members (never: one-owner holds)."""
    return Exists(range(p.partitions), lambda q: Exists(range(p.members), lambda a: Exists(
        range(a + 1, p.members), lambda b: s.owns[_slot(p, a, q)] & s.owns[_slot(p, b, q)])))



@spec.leads_to("request-answered", fair=["Receive"])
def request_answered(s, p):
    """A request in flight is eventually answered."""
    return (Exists(range(p.members), lambda m: s.request_present[m]),
            Forall(range(p.members), lambda m: ~s.request_present[m]))


spec.variant("default", "as is", default=True, violates=["leader-owns-nothing", "request-answered", "shared-partition"])
