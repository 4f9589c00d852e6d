"""The toy group of flat.py in 2-D arrays, records and Case: ``owns[m][q]``, one record per
request in flight, the error precedence as a Case. Same fields in the same order, so the same
bit layout, states and verdicts (tests/test_lang.py)."""
from kcheck import Array, Bool, Case, Enum, Exists, Forall, Int, Record, Spec

spec = Spec("lang_records", __doc__)
spec.param("members", 2, lo=1, hi=3)
spec.param("partitions", 2, lo=1, hi=3)
spec.param("max_epoch", 3, lo=1, hi=6)

Error = spec.outcomes(Enum("Error", "NONE FENCED_MEMBER_EPOCH STALE_MEMBER_EPOCH"))


@spec.state
def state(p):
    return {
        "epoch": Int(0, p.max_epoch, search_bound=True),
        "leader": Int(0, p.members - 1),
        "owns": Array(Array(Bool, p.partitions), p.members),
        "request": Array(Record(present=Bool, epoch=Int(0, p.max_epoch)), p.members),
    }


@spec.init
def init(p):
    yield {"epoch": 0, "leader": 0, "owns": [[False] * p.partitions] * p.members,
           "request": [{"present": False, "epoch": 0}] * p.members}


@spec.action(m=lambda p: range(p.members), q=lambda p: range(p.partitions))
def Assign(s, p, m, q):
    s.require(Forall(range(p.members), lambda o: ~s.owns[o][q]))
    s.owns[m][q] = True
    s.epoch = s.epoch + 1


@spec.action(q=lambda p: range(p.partitions))
def LeaderReleases(s, p, q):
    s.owns[s.leader][q] = False


@spec.action(m=lambda p: range(p.members))
def BecomeLeader(s, p, m):
    s.leader = m


@spec.action(m=lambda p: range(p.members))
def Send(s, p, m):
    s.require(~s.request[m].present)
    s.request[m] = {"present": True, "epoch": s.epoch}


@spec.action(m=lambda p: range(p.members))
def Receive(s, p, m):
    req = s.request[m]
    s.require(req.present)
    s.request[m].present = False
    s.respond(Case((req.epoch + 1 < s.epoch, Error.FENCED_MEMBER_EPOCH),
                   (req.epoch < s.epoch, Error.STALE_MEMBER_EPOCH),
                   default=Error.NONE))


@spec.invariant("one-owner")
def one_owner(s, p):
    """No partition is owned by two members."""
    return Forall(range(p.partitions), lambda q: Forall(range(p.members), lambda a: Forall(
        range(a + 1, p.members), lambda b: ~(s.owns[a][q] & s.owns[b][q]))))


@spec.invariant("leader-owns-nothing")
def leader_owns_nothing(s, p):
    """The leader owns no partition (false: a leader may be assigned one)."""
    return Forall(range(p.partitions), lambda q: ~Exists(
        range(p.members), lambda m: (s.leader == m) & s.owns[m][q]))


@spec.transition_property("no-fencing-of-current", actions=["Receive"])
def no_fencing(pre, post, action, args, outcome, p):
    """A request of the current epoch is never fenced."""
    m = args["m"]
    return (pre.request[m].epoch != pre.epoch) | (outcome == Error.NONE)


@spec.sometimes("request-to-fence")
def request_to_fence(s, p):
    """Some request in flight is two epochs old, so the coordinator will fence it."""
    return Exists(range(p.members), lambda m: s.request[m].present & (s.request[m].epoch + 1 < s.epoch))


@spec.sometimes("shared-partition")
def shared_partition(s, p):
    """Some partition is owned by two members (never: one-owner holds)."""
    return Exists(range(p.partitions), lambda q: Exists(range(p.members), lambda a: Exists(
        range(a + 1, p.members), lambda b: s.owns[a][q] & s.owns[b][q])))



@spec.leads_to("request-answered", fair=["Receive"])
def request_answered(s, p):
    """A request in flight is eventually answered."""
    return (Exists(range(p.members), lambda m: s.request[m].present),
            Forall(range(p.members), lambda m: ~s.request[m].present))


spec.variant("default", "as is", default=True, violates=["leader-owns-nothing", "request-answered", "shared-partition"])
