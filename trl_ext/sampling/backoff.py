"""Back off from over-sampling when (almost) nothing is informative.

When every group gets identical rewards (a task far too easy or too hard for the model, or a reward that does not
discriminate), more generation rounds cannot fill the batch: without a brake each step runs all
`dynamic_sampling_max_rounds` rounds at up to `dynamic_sampling_max_oversampling` times the batch, i.e. up to 80x
the generation of a plain step with the defaults, for a batch trained as zeros. `BackoffController` watches the
informative fraction of the generation rounds and switches to a back-off mode (one plain round per step, no
over-sampling) when the evidence says dynamic sampling cannot work, and back as soon as informative groups reappear.

The thresholds (see `BackoffController.from_config`):

- **enter** when the informative fraction pooled over the most recent rounds (at least `evidence_groups` groups) is
  below `threshold = 1 / (max_oversampling * max_rounds)`. Below that rate a step is expected to end its rounds
  without filling the batch even when every round generates the most it may (`max_rounds * max_oversampling`
  batches of prompts hold fewer than one batch of informative groups on average), so over-sampling only burns
  generation.
- **evidence**: `evidence_groups = ceil(2 / threshold)` groups, which hold two informative groups on average at
  the threshold rate; with exactly that many, entering means at most one of them was informative. Less evidence
  backs off too often at low but workable keep rates: in `benchmarks/dynamic_sampling_sim.py`, at 4x the threshold
  (p = 0.05 with the defaults, where dynamic sampling fills a batch in about 3 rounds) `1 / threshold` groups put a
  batch of 4 groups in back-off a quarter of the time, `2 / threshold` 2% of the time (the chance that 160 groups
  at p = 0.05 show at most one informative group is about 0.3%). More evidence delays the back-off: with the
  defaults (8x, 10 rounds) it is 160 groups, the first two rounds of a step for a batch of 18 groups or more.
- **exit** after a back-off round whose informative fraction is at least the threshold and at least one group is
  informative: with a plain round of fewer than `1 / threshold` groups (80 with the defaults), as soon as a round
  shows an informative group. Exiting clears the evidence, so re-entering takes fresh evidence (hysteresis: the trainer does not flip
  back on the rounds that caused the first entry).
"""

from __future__ import annotations

import enum
import math
from collections import deque


class SamplingMode(str, enum.Enum):
    """How a step generates: `NORMAL` over-samples and refills; `BACKOFF` runs one plain round."""

    NORMAL = "normal"
    BACKOFF = "backoff"


class BackoffController:
    """Decides, round by round, whether dynamic sampling runs normally or backs off to one plain round per step.

    Feed it every generation round's informative and total group counts, gathered over all processes so every
    process holds the same state; read `mode` before each round. In `BACKOFF` the trainer generates only the
    prompts the sampler gave (no extra prompts) and runs no further round; a switch to `BACKOFF` in the middle of a
    step ends that step's rounds.

    Args:
        threshold: enter back-off when the pooled informative fraction is below this, in (0, 1).
        evidence_groups: fewest groups the pooled fraction must cover before it can trigger back-off.
    """

    def __init__(self, threshold: float, evidence_groups: int):
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold must be strictly between 0 and 1, got {threshold}.")
        if evidence_groups < 1:
            raise ValueError(f"evidence_groups must be at least 1, got {evidence_groups}.")
        self.threshold = threshold
        self.evidence_groups = evidence_groups
        self.mode = SamplingMode.NORMAL
        self._evidence: deque[tuple[int, int]] = deque()

    @classmethod
    def from_config(cls, max_oversampling: float, max_rounds: int) -> BackoffController:
        """Thresholds from the config's `dynamic_sampling_max_oversampling` and `dynamic_sampling_max_rounds`."""
        threshold = 1.0 / (max_oversampling * max_rounds)
        if threshold >= 1.0:  # one round of one batch: over-sampling is already off, back-off changes nothing
            threshold = 0.5
        return cls(threshold=threshold, evidence_groups=math.ceil(2.0 / threshold - 1e-9))

    def observe_round(self, informative: int, groups: int) -> bool:
        """Record one generation round (counts over all processes); returns True when the mode changed."""
        if groups <= 0:
            return False
        if self.mode is SamplingMode.BACKOFF:
            if informative > 0 and informative >= self.threshold * groups:
                self.mode = SamplingMode.NORMAL
                self._evidence.clear()
                return True
            return False
        self._evidence.append((informative, groups))
        # Keep the most recent rounds that cover the evidence: drop the oldest while the rest still suffices.
        while len(self._evidence) > 1 and self._pooled(skip_oldest=True)[1] >= self.evidence_groups:
            self._evidence.popleft()
        pooled_informative, pooled_groups = self._pooled()
        if pooled_groups >= self.evidence_groups and pooled_informative < self.threshold * pooled_groups:
            self.mode = SamplingMode.BACKOFF
            self._evidence.clear()
            return True
        return False

    def _pooled(self, skip_oldest: bool = False) -> tuple[int, int]:
        rounds = list(self._evidence)[1:] if skip_oldest else self._evidence
        return sum(i for i, _ in rounds), sum(g for _, g in rounds)

    def state_dict(self) -> dict:
        """JSON-serialisable state for a checkpoint."""
        return {"mode": self.mode.value, "evidence": [list(counts) for counts in self._evidence]}

    def load_state_dict(self, state: dict) -> None:
        self.mode = SamplingMode(state["mode"])
        self._evidence = deque((int(informative), int(groups)) for informative, groups in state["evidence"])
