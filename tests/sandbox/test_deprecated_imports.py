"""The old import paths (`trl_ext.rewards.sandbox`, `trl_ext.rewards.code_harness`) keep working for one release,
with a DeprecationWarning that names the new one."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import trl_ext.sandbox
import trl_ext.sandbox.core
import trl_ext.sandbox.harness


def fresh_import(name: str):
    sys.modules.pop(name, None)
    return importlib.import_module(name)


def test_old_sandbox_module_warns_and_exports_the_same_objects():
    with pytest.warns(DeprecationWarning, match="trl_ext.rewards.sandbox is deprecated.*trl_ext.sandbox"):
        old = fresh_import("trl_ext.rewards.sandbox")
    for name in ("ISOLATION_MODES", "SANDBOX_DIR", "Sandbox", "SandboxLimits", "SandboxResult", "RUN_ID_VARIABLE"):
        assert getattr(old, name) is getattr(trl_ext.sandbox.core, name), name
    assert old._cgroup_bases is trl_ext.sandbox.core._cgroup_bases  # helpers too, through __getattr__
    sandbox = old.Sandbox(old.SandboxLimits(wall_time=5))
    assert sandbox.run(["echo", "ok"]).stdout == b"ok\n"


def test_old_harness_module_warns_and_exports_the_same_objects():
    with pytest.warns(DeprecationWarning, match="trl_ext.rewards.code_harness is deprecated"):
        old = fresh_import("trl_ext.rewards.code_harness")
    assert old.encode_value is trl_ext.sandbox.harness.encode_value and old.main is trl_ext.sandbox.harness.main
    assert old.encode_value((1, 2.5)) == {"tuple": [{"int": "1"}, {"float": "2.5"}]}


def test_the_new_package_and_the_reward_do_not_warn():
    # A fresh interpreter where any DeprecationWarning is an error: the reward must not go through the old paths.
    code = "import trl_ext.rewards, trl_ext.sandbox.testing; from trl_ext.rewards.code import CodeReward"
    command = [sys.executable, "-W", "error::DeprecationWarning", "-c", code]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
