"""One real Kafka broker per release for the whole test session, shared by every `kafka`-marked
test module (import `kafka_broker` / `broker_for` from here), and one cluster of three nodes per
release for the traces that need replicas (`cluster_for`, started on first use: a cluster costs
three JVMs, so a session starts at most one per release and the tests that need one share it).

The broker runs the settings every adapter asks for (broker.BASE_SETTINGS plus each adapter's
``broker_settings``), so the consumer_group, classic_group and producer tests can share it. A
broker that cannot start fails the test with the reason in one line (no Java, Maven cannot
resolve the release, the broker exited: the log's path); it is never skipped."""
from __future__ import annotations

import pytest

from kcheck.conform import driver
from kcheck.conform.broker import Broker, BrokerError, Cluster

# the releases the conformance tests run: 4.3.1 (the default), one before KIP-1251, the newest
RELEASES = ("4.3.1", "4.2.2", "4.4.0")

_brokers: dict[str, Broker] = {}
_clusters: dict[str, Cluster] = {}
_failed: dict[str, str] = {}


def adapter_settings() -> dict[str, str]:
    """The union of every adapter's broker settings (adapters must not disagree)."""
    out: dict[str, str] = {}
    for name in ("consumer_group", "classic_group", "producer"):
        try:
            adapter = driver.adapter_for(name)
        except Exception:          # an adapter not built yet
            continue
        for k, v in adapter.broker_settings.items():
            if out.get(k, v) != v:
                raise ValueError(f"adapters disagree on broker setting {k}: {out[k]} and {v}")
            out[k] = v
    return out


def broker_for(version: str) -> Broker:
    """The session's broker of this release, started on first use and stopped at exit."""
    if version in _failed:
        pytest.fail(_failed[version], pytrace=False)
    if version not in _brokers:
        try:
            _brokers[version] = Broker(version, extra_settings=adapter_settings()).start()
        except BrokerError as e:
            _failed[version] = f"the Kafka {version} broker could not be started: {e}"
            pytest.fail(_failed[version], pytrace=False)
    return _brokers[version]


def cluster_for(version: str) -> Cluster:
    """The session's cluster of three nodes of this release, started on first use, stopped at
    exit."""
    key = f"cluster {version}"
    if key in _failed:
        pytest.fail(_failed[key], pytrace=False)
    if version not in _clusters:
        try:
            _clusters[version] = Cluster(version, extra_settings=adapter_settings()).start()
        except BrokerError as e:
            _failed[key] = f"the cluster of three Kafka {version} nodes could not be started: {e}"
            pytest.fail(_failed[key], pytrace=False)
    return _clusters[version]


def stop_cluster(version: str) -> None:
    """Stop this release's cluster (a later `cluster_for` starts a new one)."""
    c = _clusters.pop(version, None)
    if c is not None:
        c.stop()


def stop_broker(version: str) -> None:
    """Stop this release's broker (a module that alone uses a release frees its memory; a later
    `broker_for` starts a new one)."""
    b = _brokers.pop(version, None)
    if b is not None:
        b.stop()


def stop_all() -> None:
    """Stop every broker and cluster of the session (also run at exit)."""
    for b in list(_brokers.values()) + list(_clusters.values()):
        b.stop()


@pytest.fixture(scope="session", params=RELEASES)
def kafka_broker(request) -> Broker:
    """A running broker, once per release in RELEASES."""
    return broker_for(request.param)


def spec_walk(model, adapter, depth: int, seed: int) -> dict:
    """A seeded random walk (checker/walk.py) through the action instances the adapter can drive,
    as `kcheck conform --walks` takes them, leaving out the actions that need the cluster of three
    (the walk tests run on one broker; the failover traces have their own cluster test)."""
    from kcheck.conform_cli import walk_filter
    from kcheck.trace import random_walk
    drivable = walk_filter(adapter)
    return random_walk(model, depth, seed, allow=lambda state, inst: (
        inst.action.name not in adapter.replica_actions and drivable(state, inst)))
