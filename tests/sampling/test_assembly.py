"""What a row of a rollout is: named columns that select, concatenate and assemble alike."""

from __future__ import annotations

import pytest
import torch

from trl_ext.sampling import filter_reward_mask, first_round_plans, prompts_for_processes, prompts_to_request
from trl_ext.sampling.assembly import (
    Round,
    RowFieldError,
    Rows,
    assemble,
    carried_payload,
    rollout_rows,
    sampled_log_probs,
)
from trl_ext.sampling.environments import free_instances, merge_instances, stand_ins
from trl_ext.trainers.trl_bridge import lent_pool


def round_of(tag: str, num_rows: int, *, logprobs=True, extra=True, environments=None) -> Rows:
    """A round whose every column says which row it belongs to (`tag` and the row's position)."""
    generation = (
        [[1, row] for row in range(num_rows)],  # prompt_ids
        [[row, row, 2] for row in range(num_rows)],  # completion_ids
        None,  # tool_mask
        [f"{tag}{row}" for row in range(num_rows)],  # completions
        [[-0.5, -1.0, -0.1] for _ in range(num_rows)] if logprobs else None,
        {"trace": [f"{tag}{row}" for row in range(num_rows)]} if extra else {},
        None,  # images
        [],  # tool_images: none ran
    )
    return rollout_rows(
        generation,
        inputs=[{"tag": f"{tag}{row}"} for row in range(num_rows)],
        prompts=[f"p{tag}{row}" for row in range(num_rows)],
        rewards=torch.arange(num_rows, dtype=torch.float32).unsqueeze(1),
        extra_logs={"note": [f"{tag}{row}" for row in range(num_rows)]},
        environments=environments,
    )


def test_selected_and_concatenated_rows_keep_every_column_together():
    first, second = round_of("a", 4), round_of("b", 4, extra=False)
    rows = Rows.concat([first.select([3, 1]), second.select([0])])
    assert [row["tag"] for row in rows.columns["inputs"]] == ["a3", "a1", "b0"]
    assert rows.columns["completions"] == ["a3", "a1", "b0"]
    assert rows.columns["prompts"] == ["pa3", "pa1", "pb0"]
    assert rows.extra_logs() == {"note": ["a3", "a1", "b0"]}
    assert [float(r) for r in rows.columns["rewards"]] == [3.0, 1.0, 0.0]
    # A field one round lacks is None on its rows; TRL's tuple comes back with every field in place.
    prompt_ids, completion_ids, tool_mask, completions, logprobs, extra, images, tool_images = rows.generation()
    assert extra == {"trace": ["a3", "a1", None]}
    assert completion_ids == [[3, 3, 2], [1, 1, 2], [0, 0, 2]]
    assert tool_mask is None and images is None and tool_images == []


def test_assemble_puts_kept_groups_of_every_round_first_then_fillers():
    rounds = [Round(round_of("a", 6), kept=1, spare=1), Round(round_of("b", 4), kept=1, spare=1)]
    rows, kept = assemble(rounds, [torch.tensor([0]), torch.tensor([], dtype=torch.long)], group_size=2)
    assert kept == 4
    assert rows.columns["completions"] == ["a0", "a1", "b0", "b1", "a2", "a3"]


def test_extra_fields_that_are_not_per_row_are_refused_by_name():
    with pytest.raises(RowFieldError, match="field 'total'"):
        rollout_rows(
            ([[1]], [[1]], None, ["x"], None, {"total": 3.0}, None, []),
            inputs=[{}],
            prompts=["p"],
            rewards=torch.zeros(1, 1),
            extra_logs={},
            environments=None,
        )


def test_carried_rows_drop_their_environments_and_use_complete_sampled_log_probs():
    environments = [object(), object()]
    rows = round_of("a", 2, environments=environments)
    assert rows.columns["environments"] == environments
    payload = carried_payload(rows)
    assert "environments" not in payload
    assert torch.equal(sampled_log_probs(payload, 1), torch.tensor([-0.5, -1.0, -0.1]))
    assert sampled_log_probs(carried_payload(round_of("a", 2, logprobs=False)), 0) is None
    payload["logprobs"][0] = [-0.5, None, -0.1]  # a token the backend could not score
    assert sampled_log_probs(payload, 0) is None
    payload["logprobs"][1] = [-0.5]  # not one value per completion token
    assert sampled_log_probs(payload, 1) is None


def test_environment_pool_lends_free_instances_and_keeps_what_trl_creates():
    class Owner:
        pass

    held, free = object(), object()
    owner = Owner()
    owner._environment_pool = {"game": [held, free]}
    assert free_instances(owner._environment_pool, [held]) == {"game": [free]}
    created = object()
    with lent_pool(owner, lambda pool: free_instances(pool, [held])):
        owner._environment_pool["game"].append(created)  # what TRL does when a round needs one more instance
    assert owner._environment_pool == {"game": [held, free, created]}
    with lent_pool(owner, lambda pool: stand_ins(pool, 3)):
        assert len(owner._environment_pool["game"]) == 3
        assert owner._environment_pool["game"][0].reset(secret=1) is None
    assert owner._environment_pool == {"game": [held, free, created]}  # stand-ins never join the pool
    assert merge_instances({"game": [held]}, {"game": [held, free]}) == {"game": [held, free]}


def test_first_round_plans_skip_carried_and_history_skipped_prompts():
    refills, generated, positions = first_round_plans(
        [[10, 11, 12], [20, 21, 22]], [[False, True, False], [False, False, False]], carried={20}, size=2
    )
    assert refills == [0, 0]
    assert generated == [[10, 12], [21, 22]]
    assert positions == [[0, 2], [1, 2]]
    refills, _, _ = first_round_plans([[10, 11]], [[True, True]], carried=set(), size=2)
    assert refills == [2]


def test_prompts_for_processes_serves_the_process_that_needs_most():
    assert prompts_for_processes([2, 0], [0.5, None], 0.9, 64) == prompts_to_request(2, 0.5, 0.9**0.5, 64)
    assert prompts_for_processes([1, 3], [None, None], 0.9, 64) == 3


def test_filter_reward_mask_names_the_setting_when_it_cannot_filter():
    assert filter_reward_mask(["acc", "len"], [True, False], None) == [True, False]
    assert filter_reward_mask(["acc", "len"], [True, False], "len") == [False, True]
    with pytest.raises(ValueError, match="dynamic_sampling_filter_reward='x'"):
        filter_reward_mask(["acc"], [True], "x")
    with pytest.raises(ValueError, match="shaping"):
        filter_reward_mask(["len"], [False], None)
