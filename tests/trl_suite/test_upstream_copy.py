"""The upstream test file differs from TRL's only inside its marked import shim blocks."""

import hashlib
import re

from .substitution import UPSTREAM_FILE

# SHA-256 of TRL's tests/test_grpo_trainer.py at the commit named in upstream/README.md.
UPSTREAM_SHA256 = "d8fc6290b727744271bec990ed4141aa95870fa650b206bf80362b396b11e90e"

# The import lines each shim block replaced, in order.
ORIGINAL_IMPORTS = ["from trl import GRPOConfig, GRPOTrainer\n", "from .testing_utils import (\n"]

SHIM_BLOCK = re.compile(r"# >>> trl-ext import shim.*?>>>\n(.*?)# <<< trl-ext import shim <<<\n", re.DOTALL)


def restore_upstream(text: str) -> str:
    """Undo the shim: the first block becomes TRL's trainer import; the second keeps its body with TRL's import line."""
    blocks = iter(ORIGINAL_IMPORTS)

    def original(match: re.Match) -> str:
        replaced = next(blocks)
        if replaced.startswith("from .testing_utils"):
            body = match.group(1)
            return replaced + body.split("\n", 1)[1]
        return replaced

    return SHIM_BLOCK.sub(original, text)


def test_only_the_marked_imports_differ_from_upstream():
    restored = restore_upstream(UPSTREAM_FILE.read_text())
    assert hashlib.sha256(restored.encode()).hexdigest() == UPSTREAM_SHA256
