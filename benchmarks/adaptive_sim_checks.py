"""The simulator's own recount of informative groups (`benchmarks/adaptive_sim.py`), kept apart from the sampler.

`HistoryMirror` keeps each prompt's discounted reward history as the sampler's beliefs do, but from the generation
calls a run made (the source's record), and recounts which groups the sampler should have found informative: whole
groups, pilots and their commits, and extensions. The simulator asserts the sampler's count equals it at every step.
"""

from __future__ import annotations

import numpy as np

ATOL = 1e-6  # what counts as a non-zero advantage (the sampler's)


class HistoryMirror:
    """The per-prompt discounted reward sum and count, kept apart from the sampler's beliefs, to recompute which
    groups the history baseline makes informative."""

    def __init__(self, decay: float):
        self.decay, self.history, self.last = decay, {}, {}

    def informative(self, prompts: list[int], rewards: np.ndarray, use_history: bool) -> np.ndarray:
        """Judge a round's groups against the history from before the round, then record the round (and keep
        each group with that history, in case an extension follows)."""
        mixed = rewards.max(axis=1) != rewards.min(axis=1)
        before = [self.history.get(prompt, (0.0, 0.0)) for prompt in prompts]
        judged = mixed if not use_history else self.against_history(rewards, before)
        self.last = {prompt: (history, group) for prompt, history, group in zip(prompts, before, rewards)}
        for prompt, group in zip(prompts, rewards):
            self.record(prompt, group)
        return judged

    @staticmethod
    def against_history(rewards: np.ndarray, before: list) -> np.ndarray:
        """Whether each group (a row of any size) has a non-zero leave-one-out advantage against its history."""
        history = np.array(before, dtype=float).reshape(-1, 2)
        others = rewards.sum(axis=1, keepdims=True) - rewards
        advantages = rewards - (history[:, 0:1] + others) / (history[:, 1:2] + rewards.shape[1] - 1)
        return (np.abs(advantages) > ATOL).any(axis=1)

    def extension(self, prompts: list[int], rewards: list, group_size: int) -> int:
        """An extension call: each prompt's group so far and its `G` more are one group, judged against the history
        from before the round; when informative, every slot of `G` of it counts (none of them counted before: only
        groups that would train on nothing are extended). The extension joins the prompt's visit of this round."""
        informative = 0
        for prompt, more in zip(prompts, rewards):
            history, group = self.last[prompt]
            group = np.concatenate([group, more])
            informative += (len(group) // group_size) * int(self.against_history(group[None, :], [history])[0])
            self.last[prompt] = (history, group)
            total, count = self.history[prompt]
            self.history[prompt] = (total + more.sum(), count + len(more))
        return informative

    def record(self, prompt: int, rewards: np.ndarray) -> None:
        total, count = self.history.get(prompt, (0.0, 0.0))
        self.history[prompt] = (total * self.decay + rewards.sum(), count * self.decay + len(rewards))

    def informative_in_calls(self, calls: list, group_size: int, use_history: bool, with_pilot: bool = False) -> int:
        """Informative groups of a step's generation calls, each `(prompts, rewards per prompt)`. A call of `G`
        completions per prompt is a round of whole groups; with the pilot, a call of pilots is followed by the commit
        of some of its prompts (a call whose prompts are all pilots still pending), and the pilots never committed
        are recorded as visits of their own; a call of `G` per prompt after a commit is an extension."""
        informative, pending = 0, []  # (prompt, pilot rewards), in order: a prompt may come twice in a round

        def stop_pending():
            for prompt, pilot in pending:
                self.record(prompt, pilot)
            pending.clear()

        def is_commit(prompts):  # the call's prompts are pending pilots, in order
            names = iter(prompt for prompt, _ in pending)
            return bool(pending) and all(any(prompt == name for name in names) for prompt in prompts)

        for prompts, rewards in calls:
            if is_commit(prompts):  # the commit of pending pilots (the committed ones, in their order)
                groups, rest = [], iter(enumerate(pending))
                for prompt, commit in zip(prompts, rewards):
                    position, (_, pilot) = next((i, entry) for i, entry in rest if entry[0] == prompt)
                    groups.append(np.concatenate([pilot, commit]))
                    pending[position] = (None, None)
                informative += int(self.informative(prompts, np.stack(groups), use_history).sum())
                pending[:] = [entry for entry in pending if entry[0] is not None]
                stop_pending()
            elif len(rewards[0]) == group_size and not pending and with_pilot:
                informative += self.extension(prompts, rewards, group_size)
            elif len(rewards[0]) == group_size and not pending:
                informative += int(self.informative(prompts, np.stack(rewards), use_history).sum())
            else:  # pilots
                stop_pending()
                pending = list(zip(prompts, rewards))
        stop_pending()
        return informative
