"""The dynamic sampling simulation runs and reports what its section of benchmarks/RESULTS.md quotes."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))


def test_simulation_short_run(tmp_path):
    import dynamic_sampling_sim

    out = tmp_path / "sim.json"
    dynamic_sampling_sim.main(
        ["--keep-rates", "0.5", "--steady-steps", "40", "--short-runs", "2", "--short-steps", "5",
         "--backoff-steps", "3", "--out", str(out)]
    )  # fmt: skip
    result = json.loads(out.read_text())
    runs = {run["scheme"]: run for run in result["results"]}
    assert set(runs) == {scheme.name for scheme in dynamic_sampling_sim.SCHEMES}
    for run in runs.values():
        assert run["steady"]["filled_fraction"] == 1.0
    # A buffer of one batch with staleness 1 is emptied at every step: nothing ever expires.
    assert runs["adaptive+carry"]["steady"]["carried_expired_per_step"] == 0.0
    assert runs["adaptive"]["steady"]["carried_fraction_of_kept"] == 0.0
    # verl generates 3 batches per round: at p = 0.5 one round fills the batch, 1.5 sequences per kept x p.
    assert runs["verl"]["steady"]["sequences_per_kept_times_p"] >= 1.5 - 1e-9
    # The simulation runs the package's sampler: every step generates at least one round.
    assert all(run["steady"]["rounds_per_step"] >= 1.0 for run in runs.values())
    # Constant rewards: with back-off, the steps after the first cost one plain batch.
    constant = {(r["scheme"], r["groups"]): r for r in result["constant_rewards"] if r["keep_rate"] == 0.0}
    assert constant[("adaptive+backoff", 32)]["later_steps_generated_over_batch"] == 1.0
    assert constant[("adaptive", 32)]["later_steps_generated_over_batch"] == 80.0
