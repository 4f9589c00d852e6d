"""`kcheck new NAME`: writes a small, complete, checkable spec to start from, with its test (the
pytest plugin's fixture) and a scenario.

    NAME.py                     the spec: parameters, state, initial state, actions, properties,
                                variants with their record
    test_NAME.py                pytest: every variant's verdicts match the record; the scenario replays
    NAME_scenarios/join_then_heartbeat.json
                                a scenario: the steps a Kafka test would take, with expected answers

`kcheck check NAME.py` passes on it as written; `kcheck check NAME.py --all-variants` shows the
second variant's recorded violation.

`kcheck new --from SHIPPED NAME` writes NAME.py alone: the shipped spec derived under the name
NAME (Spec.derive), with one rule replaced in a new variant that carries its measured record
(FROM), to change, check, compare with the shipped rule (`kcheck compare NAME.py --variants
VARIANT SHIPPED:DEFAULT`) and prove.
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


# `kcheck new --from SHIPPED NAME`: a spec derived from a shipped one (Spec.derive) with one rule
# replaced in a new variant. Each spec here has its example: a change of one guard, whose record
# (violates=, findings=) is what `kcheck check` gives it at the default parameters, so that
# `check --all-variants` on the written file matches the record (exit 0) and its findings say what
# the change does. `kcheck new --from` refuses the other shipped specs, naming these: two_phase
# has no named rule, and classic_group's and shared_consumption's rules have no example yet.
FROM = {
    "consumer_group": (
        "any-partition", "offset-commit",
        '''"""{name}: consumer_group with its offset-commit rule changed, as variant any-partition.

Written by `kcheck new --from consumer_group {name}`. The spec is the shipped consumer_group,
imported (not copied, so it follows kcheck's updates) and derived under its own name: its saved
traces name this file and replay against it, and its record stays apart from the shipped one's.
Every shipped variant is here unchanged; the one added, any-partition, replaces the rule
"offset-commit" (ConsumerGroup.validateOffsetCommit, KIP-1251) with a copy that leaves out one
guard. The workflow:

  kcheck check {name}.py --variant any-partition
      the search at the default parameters, against the variant's record below
  kcheck compare {name}.py --rule offset-commit --variants any-partition consumer_group:kip1251
      the copied rule against the shipped one, with Z3, in every state the invariants allow
  kcheck prove {name}.py --variant any-partition --property no-spurious-fencing
      a property for every epoch

To change another rule, `kcheck list` names each shipped spec's rules; consumer_group's are
in spec/consumer_group.py (the module kcheck.spec.consumer_group).
"""
from kcheck import And, Or
from kcheck.spec.consumer_group import spec as shipped

spec = shipped.derive("{name}", __doc__)

# The shipped rule (kip1251_commit in kcheck.spec.consumer_group), as Kafka 4.3 checks the epoch
# of an offset commit:
#     Or(epoch == s.member_epoch[m],
#        And(epoch < s.member_epoch[m], s.holds[m][q] != Hold.NONE,
#            s.assignment_epoch[m][q] <= epoch))
# The copy below leaves out `s.holds[m][q] != Hold.NONE`: a commit below the member epoch is then
# accepted for a partition the member no longer holds when its epoch is at least the partition's
# assignment epoch, which is 0 once the partition is released.


@spec.rule("offset-commit", variant="any-partition")
def any_partition_commit(s, p, m, q, epoch):
    """assignment epoch <= commit epoch <= member epoch, whether the member holds the partition or not."""
    return Or(epoch == s.member_epoch[m],
              And(epoch < s.member_epoch[m], s.assignment_epoch[m][q] <= epoch))


# The variant's record: the properties `kcheck check {name}.py --variant any-partition` finds
# violated at the default parameters. `kcheck check {name}.py --all-variants` and `kcheck prove`
# compare their verdicts with it and name any that changes. The copy breaks the properties the
# shipped default breaks, no more; its zombie commit is shorter.
default = shipped.variants[shipped.default_variant]
spec.variant("any-partition", "kip1251 without the check that the member still holds the partition",
             violates=sorted(default.expected_violations),
             findings={{**default.findings,
                       "no-zombie-commit": "5 steps: member 0 sends a commit for p1 at epoch 1 and "
                       "leaves, p1 goes to member 1, member 0 rejoins under the same member id at "
                       "epoch 3, and its commit is accepted: p1 is no longer member 0's, and its "
                       "assignment epoch there is 0 (11 steps in the shipped kip1251)"}})
'''),
    "producer": (
        "no-busy-check", "init-producer-id",
        '''"""{name}: producer with its init-producer-id rule changed, as variant no-busy-check.

Written by `kcheck new --from producer {name}`. The spec is the shipped producer, imported (not
copied, so it follows kcheck's updates) and derived under its own name: its saved traces name
this file and replay against it, and its record stays apart from the shipped one's. Every
shipped variant is here unchanged; the one added, no-busy-check, replaces the rule
"init-producer-id" (TransactionCoordinator.handleInitProducerId) with a copy that leaves out one
guard. The workflow:

  kcheck check {name}.py --variant no-busy-check
      the search at the default parameters, against the variant's record below
  kcheck compare {name}.py --rule init-producer-id --variants no-busy-check producer:kip360
      the copied rule against the shipped one, with Z3, in every state the invariants allow
  kcheck prove {name}.py --variant no-busy-check --property no-duplicate
      a property for every epoch

To change another rule, `kcheck list` names each shipped spec's rules; producer's are in
spec/producer.py (the module kcheck.spec.producer).
"""
from kcheck import If
from kcheck.spec.producer import NO_EPOCH, Error
from kcheck.spec.producer import spec as shipped

spec = shipped.derive("{name}", __doc__)

# The shipped rule (init_producer_id in kcheck.spec.producer): a transaction that is preparing
# or ongoing answers CONCURRENT_TRANSACTIONS, so that the coordinator aborts an ongoing one, with
# its markers, before a new epoch starts:
#     busy = prepare(s) | (s.txn_state == TxnState.Ongoing)
#     if expected is None:
#         return If(busy, Error.CONCURRENT_TRANSACTIONS, Error.NONE)
#     valid = (s.txn_epoch == NO_EPOCH) | (expected == s.txn_epoch) | (expected == s.txn_last_epoch)
#     return If(busy, Error.CONCURRENT_TRANSACTIONS, If(valid, Error.NONE, Error.PRODUCER_FENCED))
# The copy below leaves out `busy`: the new epoch starts at once and the open transaction is
# dropped without a marker.


@spec.rule("init-producer-id", variant="no-busy-check")
def init_producer_id_while_busy(s, p, expected):
    """InitProducerId answers NONE or PRODUCER_FENCED by its epoch alone, whatever state the transaction is in."""
    if expected is None:
        return Error.NONE
    valid = (s.txn_epoch == NO_EPOCH) | (expected == s.txn_epoch) | (expected == s.txn_last_epoch)
    return If(valid, Error.NONE, Error.PRODUCER_FENCED)


# The variant's record: the properties `kcheck check {name}.py --variant no-busy-check` finds
# violated at the default parameters. `kcheck check {name}.py --all-variants` and `kcheck prove`
# compare their verdicts with it and name any that changes.
HANGING = ("9 steps: the producer's transaction is ongoing with a second batch in flight when a "
           "second instance's InitProducerId is answered NONE; the coordinator starts epoch 1 "
           "without aborting the transaction, and the batch, still at epoch 0, is appended to a "
           "transaction no marker will close")
default = shipped.variants[shipped.default_variant]
spec.variant("no-busy-check", "kip360 with InitProducerId accepted while a transaction is open",
             violates=sorted({{*default.expected_violations, "no-hanging-transaction",
                              "fenced-stays-fenced", "open-transaction-is-unfinished",
                              "current-marker-matches-transaction"}}),
             findings={{**default.findings,
                       "no-hanging-transaction": HANGING,
                       "fenced-stays-fenced": "the same 9 steps: the fenced first instance's "
                       "batch is appended after the second instance initialised",
                       "open-transaction-is-unfinished": "6 steps: a record of the transaction "
                       "is appended, then the second instance's InitProducerId is answered NONE "
                       "and the coordinator drops the transaction the replicas hold open",
                       "current-marker-matches-transaction": "8 steps: the coordinator aborts a "
                       "timed-out transaction and its marker is on the wire when the second "
                       "instance's InitProducerId, answered NONE in PrepareAbort, moves the "
                       "coordinator to epoch 2 and an empty transaction"}})
'''),
}


def write_derived(shipped: str, name: str, directory: Path) -> Path:
    """Writes NAME.py, the spec derived from ``shipped`` with its example rule change."""
    from kcheck.options import SaveFailed, write_file
    path = directory / f"{name}.py"
    try:
        write_file(path, FROM[shipped][2].format(name=name))
    except OSError as e:
        raise SaveFailed(f"cannot write {path} ({e.strerror}); give a writable --dir") from None
    return path


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
    n = sub.add_parser("new", help="write a small, checkable spec to start from, with its test and a "
                                   "scenario; or, with --from, a copy of a shipped spec's rule to change")
    n.add_argument("name", help="the spec's name: a Python identifier, e.g. my_protocol")
    n.add_argument("--from", dest="from_spec", metavar="SHIPPED",
                   help=f"write NAME.py only: the shipped spec SHIPPED under the name NAME, with "
                        f"one of its rules copied and changed as a new variant "
                        f"({', '.join(FROM)})")
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
    if args.from_spec is not None:
        return _new_from(args, name, d, console)
    targets = [d / f"{name}.py", d / f"test_{name}.py", d / f"{name}_scenarios" / "join_then_heartbeat.json"]
    existing = [str(t) for t in targets if t.exists()]
    if existing and not args.force:
        raise BadInput(f"{', '.join(existing)} already exist(s); use --force to overwrite")
    for p in write(name, d):
        console.print(f"wrote {p}", markup=False)
    console.print(f"next: kcheck check {d / (name + '.py')} --all-variants, then pytest {d / ('test_' + name + '.py')}",
                  markup=False)
    return OK


def _new_from(args, name: str, d: Path, console) -> int:
    from kcheck.options import OK, BadInput
    from kcheck.spec import SHIPPED
    shipped = args.from_spec
    if shipped not in FROM:
        what = ("has no example rule change" if shipped in SHIPPED else "not a shipped spec")
        raise BadInput(f"--from {shipped}: {what}; valid: {', '.join(FROM)}")
    target = d / f"{name}.py"
    if target.exists() and not args.force:
        raise BadInput(f"{target} already exists; use --force to overwrite")
    path = write_derived(shipped, name, d)
    variant, rule = FROM[shipped][:2]
    console.print(f"wrote {path}: {shipped} as {name}, with rule {rule} changed in variant {variant}",
                  markup=False)
    console.print(f"next: kcheck check {path} --variant {variant}, then kcheck compare {path} --rule "
                  f"{rule} --variants {variant} {shipped}:{SHIPPED_DEFAULT[shipped]}", markup=False)
    return OK


# the shipped default variant each example is compared with (FROM's `next:` line); a test checks
# it against the spec, so a renamed default cannot leave a stale command here
SHIPPED_DEFAULT = {"consumer_group": "kip1251", "producer": "kip360"}
