"""The built-in code job (`recipes/dapo.py` with `recipes/configs/dapo_code_default.yaml`) trains with its programs
judged by two `trl-ext sandbox serve` processes, named from the recipe's YAML (`code:executor=<file of URLs>`), and
every verdict the servers gave equals the local judge's on the same completions."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest
import yaml
from servers import TOKEN, judge_servers

from trl_ext.judge_service.client import JudgeServers
from trl_ext.rewards.code import CodeReward

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "recipes" / "configs" / "dapo_code_default.yaml"


@pytest.mark.slow
def test_the_code_job_trains_with_programs_judged_by_two_servers(tmp_path, monkeypatch, capsys):
    judged = []  # what the servers were asked, and their answers: the real client, only listened to
    original = JudgeServers.score

    def listened(self, texts, rows, languages, settings, warn):
        results = original(self, texts, rows, languages, settings, warn)
        judged.append((list(texts), [dict(row) for row in rows], dict(settings), [score for score, _ in results]))
        return results

    monkeypatch.setattr(JudgeServers, "score", listened)
    monkeypatch.setenv("TRL_EXT_JUDGE_TOKEN", TOKEN)
    with judge_servers(2, "--workers", "2") as started:
        listing = tmp_path / "judges.txt"
        listing.write_text("# the judge servers\n" + "\n".join(url for url, _ in started) + "\n")
        config = yaml.safe_load(CONFIG.read_text())
        config["reward_funcs"] = [f"code:executor={listing}"]
        config_path = tmp_path / "dapo_code_served.yaml"
        config_path.write_text(yaml.safe_dump(config))
        arguments = ["--config", str(config_path), "--output_dir", str(tmp_path / "out"), "--max_steps", "2",
                     "--per_device_train_batch_size", "16", "--steps_per_generation", "1", "--heldout_prompts", "8",
                     "--heldout_samples", "2", "--plot", "false"]
        monkeypatch.setattr(sys, "argv", [str(ROOT / "recipes" / "dapo.py"), *arguments])
        runpy.run_path(str(ROOT / "recipes" / "dapo.py"), run_name="__main__")
    assert "held-out (8 prompts x 2 samples)" in capsys.readouterr().out
    assert sum(len(texts) for texts, _, _, _ in judged) >= 32  # the training batches went to the servers
    local = CodeReward()
    for texts, rows, settings, served_scores in judged:
        columns = {name: [row.get(name) for row in rows] for name in rows[0]}
        assert local(completions=texts, **columns) == served_scores
