"""`kcheck new NAME`: writes a small, complete, checkable spec to start from, with its test (the
pytest plugin's fixture) and a scenario.

    NAME.py                     the spec: parameters, state, initial state, actions, properties,
                                variants with their record
    test_NAME.py                pytest: every variant's verdicts match the record; the scenario replays
    NAME_scenarios/join_then_heartbeat.json
                                a scenario: the steps a Kafka test would take, with expected answers

`kcheck check NAME.py` passes on it as written; `kcheck check NAME.py --all-variants` shows the
second variant's recorded violation.
"""
from __future__ import annotations

import json
import keyword
from pathlib import Path

SPEC = '''"""{name}: a member heartbeats with its member epoch; the coordinator fences stale epochs.

A starting point written by `kcheck new`. It follows the shape of KIP-848's epoch check on
ConsumerGroupHeartbeat (GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid): a member
joins and is given the bumped group epoch; a heartbeat carries the epoch the member last saw, and
one from an older epoch (a request delayed in the network) is fenced. Simplified: Kafka also
accepts the previous epoch when the member owns only partitions of its assignment (the response
that carried the new epoch may have been lost); this starter leaves that out.

Replace the state, the actions and the properties with your protocol's, citing the Kafka class
and method each rule comes from. See docs/writing-specs.md.

Properties:
- epoch-order: no member epoch is ahead of the group epoch.
- stale-epoch-fenced: a heartbeat from an older epoch is answered FENCED_MEMBER_EPOCH.
- older-epoch-exists (sometimes): a member holds an epoch that an older one can be sent against.
"""
from kcheck import Array, Enum, Exists, Forall, If, Int, Spec

spec = Spec("{name}", __doc__)
spec.param("members", 2, lo=1, hi=4, doc="consumers in the group")
spec.param("max_epoch", 3, lo=1, hi=10, doc="epoch cap of the explicit search")

Error = spec.outcomes(Enum("Error", "NONE FENCED_MEMBER_EPOCH"))
NOT_JOINED = -1


@spec.state
def state(p):
    return {{
        "group_epoch": Int(0, p.max_epoch, search_bound=True),
        # the epoch the coordinator holds for each member; -1 before it joins
        "member_epoch": Array(Int(NOT_JOINED, p.max_epoch, search_bound=True), p.members),
    }}


@spec.init
def init(p):
    yield {{"group_epoch": 0, "member_epoch": [NOT_JOINED] * p.members}}


def members(p):
    return range(p.members)


def epochs(p):
    return range(p.max_epoch + 1)


@spec.action(m=members, actors=("member {{m}}", "coordinator"))
def Join(s, p, m):
    """A member joins: the group epoch is bumped and the member gets it."""
    s.require(s.member_epoch[m] == NOT_JOINED)
    s.group_epoch = s.group_epoch + 1
    s.member_epoch[m] = s.group_epoch + 1
    s.respond(Error.NONE)


@spec.action(m=members, epoch=epochs, actors=("member {{m}}", "coordinator"))
def Heartbeat(s, p, m, epoch):
    """A heartbeat carrying ``epoch``: the member's current epoch, or an older one (a delayed request)."""
    s.require(s.member_epoch[m] != NOT_JOINED, epoch <= s.member_epoch[m])
    if s.variant == "accept-stale":
        s.respond(Error.NONE)
    else:
        s.respond(If(epoch == s.member_epoch[m], Error.NONE, Error.FENCED_MEMBER_EPOCH))


@spec.invariant("epoch-order")
def epoch_order(s, p):
    """No member epoch is ahead of the group epoch."""
    return Forall(members(p), lambda m: s.member_epoch[m] <= s.group_epoch)


@spec.transition_property("stale-epoch-fenced", actions=["Heartbeat"])
def stale_epoch_fenced(pre, post, action, args, outcome, p):
    """A heartbeat from an older epoch than the member's is answered FENCED_MEMBER_EPOCH."""
    return (args["epoch"] == pre.member_epoch[args["m"]]) | (outcome == Error.FENCED_MEMBER_EPOCH)


@spec.sometimes("older-epoch-exists")
def older_epoch_exists(s, p):
    """Some member holds an epoch above 0, so a heartbeat from an older epoch can be sent (the case
    stale-epoch-fenced judges: were it unreachable, that property would hold vacuously)."""
    return Exists(members(p), lambda m: s.member_epoch[m] > 0)


spec.variant("fenced", "stale epochs are fenced, as the coordinator does", default=True)
spec.variant("accept-stale", "the coordinator accepts any epoch it has seen",
             violates=["stale-epoch-fenced"])
'''

TEST = '''"""{name}: the verdicts of every variant match the spec's record, and the scenario replays.
Run with `pytest` (kcheck's pytest plugin provides the `kcheck` fixture)."""


def test_verdicts_match_the_record(kcheck):
    verdicts = kcheck.check_record("{name}.py")
    assert verdicts[("accept-stale", "stale-epoch-fenced")] == "violated"


def test_join_then_heartbeat(kcheck):
    kcheck.replay("{name}_scenarios/join_then_heartbeat.json")
'''


def scenario(name: str) -> dict:
    # a user's spec is named relative to the trace file (kcheck.trace.spec_path); the state is
    # the spec's only initial state, so the scenario gives none
    from kcheck.trace import FORMAT
    return {"kcheck_trace": FORMAT, "spec": f"../{name}.py", "variant": "fenced",
            "description": "member 0 joins and heartbeats with its epoch; a heartbeat carrying an "
                           "older epoch (a delayed request) is fenced",
            "steps": [{"action": "Join", "args": {"m": 0},
                       "expect": {"outcome": "NONE", "state": {"group_epoch": 1, "member_epoch[0]": 1}}},
                      {"action": "Heartbeat", "args": {"m": 0, "epoch": 1}, "expect": {"outcome": "NONE"}},
                      {"action": "Heartbeat", "args": {"m": 0, "epoch": 0},
                       "expect": {"outcome": "FENCED_MEMBER_EPOCH"}}]}


def write(name: str, directory: Path) -> list[Path]:
    files = {directory / f"{name}.py": SPEC.format(name=name),
             directory / f"test_{name}.py": TEST.format(name=name),
             directory / f"{name}_scenarios" / "join_then_heartbeat.json":
                 json.dumps(scenario(name), indent=2) + "\n"}
    from kcheck.options import SaveFailed, write_file
    for path, text in files.items():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_file(path, text)
        except OSError as e:
            raise SaveFailed(f"cannot write {path} ({e.strerror}); give a writable --dir") from None
    return list(files)


def register(sub) -> dict:
    from kcheck.options import path_value
    n = sub.add_parser("new", help="write a small, checkable spec to start from, with its test and a scenario")
    n.add_argument("name", help="the spec's name: a Python identifier, e.g. my_protocol")
    n.add_argument("--dir", default=".", type=path_value("--dir"), help="where to write the files (default: here)")
    n.add_argument("--force", action="store_true", help="overwrite files that exist")
    return {"new": cmd_new}


def cmd_new(args, console) -> int:
    from kcheck.options import OK, BadInput
    from kcheck.spec import SHIPPED
    name = args.name
    if not name.isidentifier() or keyword.iskeyword(name) or not name.islower():
        raise BadInput(f"'{name}' is not a valid spec name: use a lower-case Python identifier, e.g. my_protocol")
    if name in SHIPPED:
        raise BadInput(f"'{name}' is a shipped spec's name; choose another (shipped: {', '.join(SHIPPED)})")
    d = Path(args.dir)
    if not d.is_dir():
        raise BadInput(f"--dir {args.dir}: not a directory")
    targets = [d / f"{name}.py", d / f"test_{name}.py", d / f"{name}_scenarios" / "join_then_heartbeat.json"]
    existing = [str(t) for t in targets if t.exists()]
    if existing and not args.force:
        raise BadInput(f"{', '.join(existing)} already exist(s); use --force to overwrite")
    for p in write(name, d):
        console.print(f"wrote {p}", markup=False)
    console.print(f"next: kcheck check {d / (name + '.py')} --all-variants, then pytest {d / ('test_' + name + '.py')}",
                  markup=False)
    return OK
