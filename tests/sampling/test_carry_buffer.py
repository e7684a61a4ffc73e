"""CarryBuffer and the carry helpers: exact behaviour on hand-made groups, properties with hypothesis."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trl_ext.sampling.carry import (
    CarriedGroup,
    CarryBuffer,
    first_round_plan,
    staleness_stats,
    surplus_informative_groups,
)


def group(generated_at: int, prompt_index: int = 0, payload=None, process_index: int = 0) -> CarriedGroup:
    return CarriedGroup(payload, generated_at=generated_at, prompt_index=prompt_index, process_index=process_index)


def test_take_hands_out_oldest_first_and_keeps_the_rest():
    buffer = CarryBuffer(max_groups=10, max_staleness=3)
    buffer.add([group(5, prompt_index=1), group(4, prompt_index=2), group(5, prompt_index=3)])
    taken, expired = buffer.take(2, policy_version=5)
    assert [g.prompt_index for g in taken] == [2, 1] and expired == 0
    assert [g.prompt_index for g in buffer] == [3] and len(buffer) == 1


def test_take_drops_groups_past_the_staleness_limit():
    buffer = CarryBuffer(max_groups=10, max_staleness=1)
    buffer.add([group(3, prompt_index=1), group(4, prompt_index=2), group(5, prompt_index=3)])
    taken, expired = buffer.take(5, policy_version=5)
    # Version 3 lags 2 updates (> 1): dropped; versions 4 and 5 lag 1 and 0.
    assert expired == 1 and [g.prompt_index for g in taken] == [2, 3] and len(buffer) == 0


def test_zero_staleness_carries_nothing_to_the_next_policy_version():
    buffer = CarryBuffer(max_groups=10, max_staleness=0)
    buffer.add([group(7), group(7)])
    taken, expired = buffer.take(1, policy_version=7)  # same version: usable
    assert len(taken) == 1 and expired == 0
    taken, expired = buffer.take(1, policy_version=8)
    assert taken == [] and expired == 1 and len(buffer) == 0


def test_add_beyond_the_bound_drops_the_oldest_first():
    buffer = CarryBuffer(max_groups=3, max_staleness=5)
    assert buffer.add([group(1, prompt_index=1), group(2, prompt_index=2)]) == 0
    dropped = buffer.add([group(3, prompt_index=3), group(1, prompt_index=4), group(2, prompt_index=5)])
    # Oldest by version, then the earliest added: 1 (first added), 4 (version 1) go; 2, 5, 3 stay.
    assert dropped == 2 and [g.prompt_index for g in buffer] == [2, 5, 3]


def test_zero_capacity_keeps_nothing():
    buffer = CarryBuffer(max_groups=0, max_staleness=1)
    assert buffer.add([group(0), group(0)]) == 2 and len(buffer) == 0


def test_take_of_zero_or_negative_hands_out_nothing_but_still_expires():
    buffer = CarryBuffer(max_groups=4, max_staleness=0)
    buffer.add([group(0), group(1)])
    assert buffer.take(0, policy_version=1) == ([], 1)
    assert buffer.take(-3, policy_version=1) == ([], 0) and len(buffer) == 1


@pytest.mark.parametrize(("max_groups", "max_staleness", "field"), [(-1, 1, "max_groups"), (2, -1, "max_staleness")])
def test_rejects_negative_limits(max_groups, max_staleness, field):
    with pytest.raises(ValueError, match=field):
        CarryBuffer(max_groups=max_groups, max_staleness=max_staleness)


def test_state_dict_survives_torch_save_with_tensors(tmp_path):
    payload = {
        "completion_ids": torch.tensor([[5, 6, 0], [7, 8, 9]]),
        "old_per_token_logps": torch.tensor([[-0.5, -1.25, 0.0], [-0.1, -0.2, -0.3]]),
        "advantages": torch.tensor([1.0, -1.0]),
    }
    buffer = CarryBuffer(max_groups=4, max_staleness=1)
    buffer.add([group(3, prompt_index=17, payload=payload, process_index=1), group(4, prompt_index=2)])
    torch.save(buffer.state_dict(), tmp_path / "carry.pt")

    restored = CarryBuffer(max_groups=4, max_staleness=1)
    restored.load_state_dict(torch.load(tmp_path / "carry.pt", weights_only=True))
    first, second = list(restored)
    assert (first.generated_at, first.prompt_index, first.process_index) == (3, 17, 1)
    assert (second.generated_at, second.prompt_index, second.payload) == (4, 2, None)
    for key, value in payload.items():
        assert torch.equal(first.payload[key], value)
    # The restored buffer takes the same decisions as the original.
    assert [g.prompt_index for g in restored.take(1, 5)[0]] == [g.prompt_index for g in buffer.take(1, 5)[0]]


def test_load_state_dict_applies_the_new_bound():
    buffer = CarryBuffer(max_groups=3, max_staleness=1)
    buffer.add([group(1, prompt_index=1), group(2, prompt_index=2), group(3, prompt_index=3)])
    smaller = CarryBuffer(max_groups=2, max_staleness=1)
    smaller.load_state_dict(buffer.state_dict())
    assert [g.prompt_index for g in smaller] == [2, 3]


def test_surplus_informative_groups_are_the_informative_ones_after_the_kept():
    informative = torch.tensor([True, False, True, True, False, True, True])
    # groups_to_keep(informative, 2) keeps groups 0 and 2; the surplus is 3, 5, 6.
    assert surplus_informative_groups(informative, needed=2, limit=10).tolist() == [3, 5, 6]
    assert surplus_informative_groups(informative, needed=2, limit=2).tolist() == [3, 5]
    assert surplus_informative_groups(informative, needed=0, limit=1).tolist() == [0]
    assert surplus_informative_groups(informative, needed=9, limit=5).tolist() == []
    assert surplus_informative_groups(informative, needed=-1, limit=-1).tolist() == []


def test_first_round_plan_generates_only_what_carried_groups_leave_open():
    # 8 sampler prompts, 5 groups carried: a request of 4 uses the first 4 usable sampler prompts, no refill.
    assert first_round_plan([True] * 8, size=4) == ([True] * 4 + [False] * 4, 0)
    # Skipped or already-carried prompts are passed over; the next usable ones take their place.
    assert first_round_plan([False, True, False, True, True, True], size=3) == (
        [False, True, False, True, True, False],
        0,
    )
    # A request beyond the usable prompts is completed with refills.
    assert first_round_plan([True, False, True, False], size=5) == ([True, False, True, False], 3)
    assert first_round_plan([], size=2) == ([], 2)


@given(st.lists(st.booleans(), max_size=12), st.integers(0, 20))
def test_first_round_plan_always_generates_exactly_the_request(usable, size):
    used, refills = first_round_plan(usable, size)
    assert sum(used) + refills == size and refills >= 0
    assert all(ok for ok, use in zip(usable, used) if use)  # never a prompt that may not be generated
    # the earliest usable prompts: no usable prompt is passed over for a later one
    first_unused = next((i for i, (ok, use) in enumerate(zip(usable, used)) if ok and not use), len(usable))
    assert not any(used[first_unused:])


def test_staleness_stats():
    assert staleness_stats([], policy_version=9) == (0.0, 0)
    assert staleness_stats([group(8), group(7), group(9)], policy_version=9) == (1.0, 2)


operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(st.integers(0, 6), max_size=6)),
        st.tuples(st.just("take"), st.integers(0, 5)),
    ),
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 5), st.integers(0, 3), operations)
def test_buffer_invariants_and_mirroring(max_groups, max_staleness, ops):
    """Bounded, never hands out a stale group, loses no group silently, and a payload-free mirror agrees."""
    buffer = CarryBuffer(max_groups, max_staleness)
    mirror = CarryBuffer(max_groups, max_staleness)
    version = added = handed_out = dropped = 0
    for number, (kind, argument) in enumerate(ops):
        if kind == "add":
            # Groups are generated at the current version or earlier (a round's surplus is from now).
            new = [
                group(version - lag, prompt_index=number * 10 + i, payload=f"rows{number}-{i}")
                for i, lag in enumerate(argument)
            ]
            dropped += buffer.add(new)
            mirror.add([group(g.generated_at, g.prompt_index) for g in new])
            added += len(new)
        else:
            taken, expired = buffer.take(argument, version)
            mirror_taken, mirror_expired = mirror.take(argument, version)
            assert [g.prompt_index for g in taken] == [g.prompt_index for g in mirror_taken]
            assert expired == mirror_expired
            assert len(taken) <= argument
            assert all(0 <= g.staleness(version) <= max_staleness for g in taken)
            assert [g.generated_at for g in taken] == sorted(g.generated_at for g in taken)
            assert all(g.generated_at >= t.generated_at for g in buffer for t in taken)  # the oldest went first
            assert all(g.payload == f"rows{g.prompt_index // 10}-{g.prompt_index % 10}" for g in taken)
            handed_out += len(taken)
            dropped += expired
            version += 1
        assert len(buffer) <= max_groups
        assert added == handed_out + dropped + len(buffer)
