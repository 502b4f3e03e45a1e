"""Gang fitting: one agent first (best / worst), then whole agents; never the wrong slots."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from stalwart.master.scheduler import AgentView, PoolSettings, Request
from stalwart.master.scheduler.fitting import Avail, PoolModel, fit, reserve
from tests.master.scheduler.helpers import agent


def free_view(agents: list[AgentView], aux: int = 100) -> tuple[PoolModel, Avail]:
    model = PoolModel(agents, aux)
    view = Avail(
        {a.id: {s.id for s in a.slots if s.free and s.enabled} for a in agents},
        {a.id: aux for a in agents},
    )
    return model, view


def fit_on(
    agents: list[AgentView],
    request: Request,
    *,
    policy: str = "best",
    het: bool = False,
    aux: int = 100,
) -> tuple[tuple[str, tuple[str, ...]], ...] | None:
    model, view = free_view(agents, aux)
    return fit(request, view, model, "best" if policy == "best" else "worst", het)


def test_best_fit_takes_the_fullest_agent_that_fits() -> None:
    agents = [agent("a", 8, busy=range(2)), agent("b", 8, busy=range(5)), agent("c", 8)]
    assert fit_on(agents, Request("r", "g", 2)) == (("b", ("5", "6")),)


def test_worst_fit_takes_the_least_used_agent() -> None:
    agents = [agent("a", 8, busy=range(2)), agent("b", 8, busy=range(5)), agent("c", 4)]
    assert fit_on(agents, Request("r", "g", 2), policy="worst") == (("c", ("0", "1")),)


def test_a_gang_spreads_over_whole_idle_agents_of_one_size() -> None:
    agents = [agent("a", 4), agent("b", 4), agent("c", 4, busy=[0]), agent("d", 2), agent("e", 2)]
    placement = fit_on(agents, Request("r", "g", 8))
    assert placement is not None
    assert sorted(a for a, _ in placement) == ["a", "b"]
    assert all(len(slots) == 4 for _, slots in placement)


def test_single_node_requests_never_spread() -> None:
    agents = [agent("a", 4), agent("b", 4)]
    assert fit_on(agents, Request("r", "g", 8, is_single_node=True)) is None
    assert fit_on(agents, Request("r", "g", 4, is_single_node=True)) is not None


def test_sizes_must_divide_the_request_unless_heterogeneous_fits_are_allowed() -> None:
    agents = [agent("a", 8), agent("b", 6), agent("c", 6)]
    assert fit_on(agents, Request("r", "g", 12)) is not None  # 6 + 6
    assert fit_on(agents, Request("r", "g", 14)) is None
    placement = fit_on(agents, Request("r", "g", 14), het=True)
    assert placement is not None
    assert sorted(a for a, _ in placement) == ["a", "b"]


def test_heterogeneous_fit_is_exact_where_greedy_largest_first_fails() -> None:
    # Largest-first takes the 8 and then cannot make 4 out of 6s; 6 + 6 works.
    agents = [agent("a", 8), agent("b", 6), agent("c", 6), agent("d", 4, busy=[0])]
    placement = fit_on(agents, Request("r", "g", 12), het=True)
    assert placement is not None
    assert sorted(a for a, _ in placement) == ["b", "c"]


def test_disabled_draining_and_wrong_type_slots_are_never_used() -> None:
    agents = [
        agent("off", 8, enabled=False),
        agent("drain", 8, draining=True),
        agent("cpu", 8, device_type="cpu"),
        agent("gpu", 4, disabled_slots=[0]),
    ]
    assert fit_on(agents, Request("r", "g", 4)) is None
    assert fit_on(agents, Request("r", "g", 3)) == (("gpu", ("1", "2", "3")),)
    assert fit_on(agents, Request("r", "g", 8, device_type="cpu")) == (
        ("cpu", tuple(str(i) for i in range(8))),
    )


def test_blocked_agents_are_never_used() -> None:
    """A trial's ``exclude_node`` log policies keep it off the agents that logged the line."""
    agents = [agent("a", 4, busy=range(2)), agent("b", 4), agent("c", 2)]
    assert fit_on(agents, Request("r", "g", 2)) == (("a", ("2", "3")),)
    blocked = frozenset({"a"})
    assert fit_on(agents, Request("r", "g", 2, blocked_agents=blocked)) == (("c", ("0", "1")),)
    assert fit_on(agents, Request("r", "g", 6), het=True) == (
        ("b", ("0", "1", "2", "3")),
        ("c", ("0", "1")),
    )
    assert fit_on(agents, Request("r", "g", 6, blocked_agents=frozenset({"c"})), het=True) is None
    assert fit_on(agents, Request("r", "g", 0, blocked_agents=frozenset({"a", "b"}))) == (
        ("c", ()),
    )


def test_zero_slot_requests_take_an_auxiliary_container() -> None:
    agents = [agent("a", 0), agent("b", 4)]
    model, view = free_view(agents, aux=2)
    view.aux["a"] = 1
    assert fit(Request("z", "g", 0), view, model, "best", False) == (("a", ()),)
    assert fit(Request("z", "g", 0), view, model, "worst", False) == (("b", ()),)
    view.aux = {"a": 0, "b": 0}
    assert fit(Request("z", "g", 0), view, model, "best", False) is None


def test_ties_are_spread_by_hash_but_deterministic() -> None:
    agents = [agent(f"a{i}", 4) for i in range(6)]
    chosen = {fit_on(agents, Request(f"r{i}", "g", 1)) for i in range(30)}
    assert len(chosen) > 1
    assert fit_on(agents, Request("r1", "g", 1)) == fit_on(agents, Request("r1", "g", 1))


def test_reserve_prefers_the_placement_nearest_to_free_and_its_free_slots() -> None:
    agents = [agent("a", 8, busy=range(6)), agent("b", 8, busy=range(3))]
    model, now = free_view(agents)
    placement = reserve(Request("r", "g", 6), model.full(), now, model, False)
    assert placement is not None
    (agent_id, slots), *_ = placement
    assert agent_id == "b"
    assert {"3", "4", "5", "6", "7"} <= set(slots)
    assert reserve(Request("r", "g", 24), model.full(), now, model, True) is None


# -- against a brute-force oracle --------------------------------------------------------------


def oracle(agents: list[AgentView], request: Request, het: bool) -> bool:
    """Whether some valid placement exists (the module's rules, by exhaustive search)."""
    n = request.slots_needed
    usable = [a for a in agents if a.schedulable]

    def of_type(a: AgentView) -> list[str]:
        return [s.id for s in a.slots if s.enabled and s.device_type == request.device_type]

    def free(a: AgentView) -> list[str]:
        return [
            s.id for s in a.slots if s.enabled and s.free and s.device_type == request.device_type
        ]

    if any(len(free(a)) >= n for a in usable):
        return True
    if n <= 1 or request.is_single_node:
        return False
    idle = [a for a in usable if of_type(a) and len(free(a)) == len(of_type(a))]
    for k in range(1, len(idle) + 1):
        for combo in itertools.combinations(idle, k):
            sizes = [len(of_type(a)) for a in combo]
            if sum(sizes) == n and (het or len(set(sizes)) == 1):
                return True
    return False


@st.composite
def clusters(draw: st.DrawFn) -> list[AgentView]:
    out = []
    for i in range(draw(st.integers(1, 5))):
        size = draw(st.sampled_from([1, 2, 3, 4, 6, 8]))
        out.append(
            agent(
                f"a{i}",
                size,
                busy=draw(st.sets(st.integers(0, size - 1))),
                device_type=draw(st.sampled_from(["cuda", "cuda", "rocm"])),
                enabled=draw(st.integers(0, 6)) > 0,
                draining=draw(st.integers(0, 6)) == 0,
                disabled_slots=draw(st.sets(st.integers(0, size - 1), max_size=1)),
            )
        )
    return out


@given(
    clusters(),
    st.integers(1, 20),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["best", "worst"]),
    st.sampled_from(["cuda", "rocm"]),
)
def test_fit_finds_a_valid_placement_exactly_when_one_exists(
    agents: list[AgentView], n: int, single: bool, het: bool, policy: str, device: str
) -> None:
    request = Request(
        "r",
        "g",
        n,
        is_single_node=single,
        device_type="cuda" if device == "cuda" else "rocm",
    )
    placement = fit_on(agents, request, policy=policy, het=het)
    assert (placement is not None) == oracle(agents, request, het)
    if placement is None:
        return
    by_id = {a.id: a for a in agents}
    slots = [(a, s) for a, ss in placement for s in ss]
    assert len(slots) == len(set(slots)) == n
    for agent_id, ids in placement:
        view = by_id[agent_id]
        assert view.schedulable
        free = {s.id for s in view.slots if s.free and s.enabled and s.device_type == device}
        assert set(ids) <= free
    if len(placement) > 1:
        # Only when no single agent could, and then with the fewest agents of any exact fit.
        assert not any(
            len([s for s in a.slots if s.free and s.enabled and s.device_type == device]) >= n
            for a in agents
            if a.schedulable
        )
        sizes = {
            len([s for s in by_id[a].slots if s.enabled and s.device_type == device])
            for a, _ in placement
        }
        assert het or len(sizes) == 1, "agents of one size unless heterogeneous fits are allowed"
        if het:
            assert not any(oracle_k(agents, request, k) for k in range(1, len(placement)))


def oracle_k(agents: list[AgentView], request: Request, k: int) -> bool:
    """Whether exactly ``k`` whole idle agents (any sizes) sum to the request."""
    device = request.device_type
    idle = [
        a
        for a in agents
        if a.schedulable
        and [s for s in a.slots if s.enabled and s.device_type == device]
        and all(s.free for s in a.slots if s.enabled and s.device_type == device)
    ]
    return any(
        sum(len([s for s in a.slots if s.enabled and s.device_type == device]) for a in combo)
        == request.slots_needed
        for combo in itertools.combinations(idle, k)
    )


def test_pool_settings_default_to_determined() -> None:
    settings = PoolSettings()
    assert (settings.scheduler, settings.preemption, settings.fitting_policy) == (
        "priority",
        False,
        "best",
    )
    assert settings.max_aux_containers_per_agent == 100
