"""FAIL_OVER ordering: priority, weight, key rotation, cooldown."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from modelgate.config import FailoverSettings
from modelgate.routing.failover import FailoverPlanner
from tests.resilience_fakes import FakeClock, endpoint, route


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def planner(clock: FakeClock) -> FailoverPlanner:
    return FailoverPlanner(FailoverSettings(), clock, random.Random(3))


def ids(planner: FailoverPlanner, routes) -> list[str]:
    return [f"c{c.route.channel_id}/{c.endpoint.id}" for c in planner.candidates(routes)]


def test_lower_priority_number_first(planner: FailoverPlanner) -> None:
    routes = [route(3, priority=2), route(1, priority=0), route(2, priority=1)]
    assert ids(planner, routes) == ["c1/p1:k1", "c2/p2:k1", "c3/p3:k1"]


def test_equal_priority_is_shared_by_weight(planner: FailoverPlanner) -> None:
    routes = [route(1, weight=3), route(2, weight=1), route(3, priority=1, weight=100)]
    firsts = Counter(planner.order_routes(routes)[0].channel_id for _ in range(4000))
    # weight 3 vs 1: channel 1 leads about 75 % of calls; the priority-1 route never leads
    assert set(firsts) == {1, 2}
    assert 0.72 <= firsts[1] / 4000 <= 0.78
    for _ in range(50):
        order = [r.channel_id for r in planner.order_routes(routes)]
        assert sorted(order[:2]) == [1, 2] and order[2] == 3


def test_seeded_order_is_reproducible(clock: FakeClock) -> None:
    routes = [route(i, weight=i) for i in range(1, 6)]
    a = FailoverPlanner(FailoverSettings(), clock, random.Random(9))
    b = FailoverPlanner(FailoverSettings(), clock, random.Random(9))
    assert [ids(a, routes) for _ in range(5)] == [ids(b, routes) for _ in range(5)]


def test_weight_zero_is_only_a_fallback(planner: FailoverPlanner) -> None:
    routes = [route(1, weight=0), route(2, weight=1), route(3, weight=5)]
    for _ in range(50):
        assert planner.order_routes(routes)[-1].channel_id == 1


def test_keys_of_a_channel_rotate_from_call_to_call(planner: FailoverPlanner) -> None:
    keys = (endpoint(1, 1), endpoint(1, 2), endpoint(1, 3))
    routes = [route(1, keys)]
    assert ids(planner, routes) == ["c1/p1:k1", "c1/p1:k2", "c1/p1:k3"]
    assert ids(planner, routes) == ["c1/p1:k2", "c1/p1:k3", "c1/p1:k1"]
    assert ids(planner, routes) == ["c1/p1:k3", "c1/p1:k1", "c1/p1:k2"]
    assert ids(planner, routes) == ["c1/p1:k1", "c1/p1:k2", "c1/p1:k3"]


def test_a_failed_key_is_skipped_for_the_cooldown(planner: FailoverPlanner, clock: FakeClock) -> None:
    keys = (endpoint(1, 1), endpoint(1, 2))
    routes = [route(1, keys), route(2, priority=1)]
    planner.cool_down("p1:k1")
    assert ids(planner, routes) == ["c1/p1:k2", "c2/p2:k1", "c1/p1:k1"]
    clock.advance(29.9)
    assert ids(planner, routes)[-1] == "c1/p1:k1"
    clock.advance(0.1)
    assert not planner.cooling("p1:k1")
    assert "c1/p1:k1" in ids(planner, routes)[:2]


def test_a_channel_whose_keys_all_failed_drops_behind_the_others(planner: FailoverPlanner) -> None:
    routes = [route(1, (endpoint(1, 1), endpoint(1, 2))), route(2, priority=5)]
    planner.cool_down("p1:k1")
    planner.cool_down("p1:k2")
    order = ids(planner, routes)
    assert order[0] == "c2/p2:k1"
    assert sorted(order[1:]) == ["c1/p1:k1", "c1/p1:k2"]  # still there when nothing else is left


def test_cooling_candidates_are_kept_when_nothing_else_is_left(planner: FailoverPlanner) -> None:
    planner.cool_down("p1:k1")
    assert ids(planner, [route(1)]) == ["c1/p1:k1"]


def test_a_success_ends_the_cooldown(planner: FailoverPlanner) -> None:
    planner.cool_down("p1:k1")
    planner.recovered("p1:k1")
    assert not planner.cooling("p1:k1")


def test_cooldown_is_configurable(clock: FakeClock) -> None:
    planner = FailoverPlanner(FailoverSettings(cooldown_seconds=5), clock)
    planner.cool_down("p1:k1")
    clock.advance(5)
    assert not planner.cooling("p1:k1")
