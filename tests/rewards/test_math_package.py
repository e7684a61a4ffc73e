"""The `trl_ext.rewards.math` package: answer forms registered in one place, the one path from keys to cached or
fresh verdicts, and the former module path `trl_ext.rewards.math_equivalence`."""

from __future__ import annotations

import pytest

from trl_ext.rewards.math import ANSWER_FORMS, VerdictCache, answer_form, forms, verify_math_answer

SETTLING = [
    "labels_for_list", "set_in_words", "integer_family_members", "integer_family", "labelled_values", "statement",
    "units",
]  # fmt: skip
ACCEPTING = [
    "vector", "set_builder", "ordered_chain", "function", "angles", "precision", "percent", "text", "choices",
    "equation_for_expression", "enumerated_choices", "inequality_for_interval", "plus_minus",
]  # fmt: skip


def test_answer_forms_are_registered_in_order_with_their_kind():
    assert sorted(ANSWER_FORMS) == sorted(ACCEPTING + SETTLING)
    assert [name for name, form in ANSWER_FORMS.items() if form.settles] == SETTLING
    assert [name for name, form in ANSWER_FORMS.items() if not form.settles] == ACCEPTING


def test_a_form_name_is_registered_once():
    with pytest.raises(ValueError, match="'vector' is already registered"):
        answer_form("vector")(lambda gold, answer, final, same: False)


def test_a_new_form_is_one_decorated_function(monkeypatch):
    monkeypatch.setattr(forms, "ANSWER_FORMS", dict(ANSWER_FORMS))  # the registry as it was, after the test
    assert verify_math_answer("42", r"So $\boxed{\text{forty-two}}$.") is False

    @answer_form("number_words")
    def _number_words(gold, answer, final, same):
        return gold == "42" and answer == r"\text{forty-two}"

    assert verify_math_answer("42", r"So $\boxed{\text{forty-two}}$.") is True
    assert verify_math_answer("42", r"So $\boxed{\text{forty-one}}$.") is False


def test_the_verdict_cache_computes_the_missing_keys_in_one_call():
    cache, calls = VerdictCache(8), []

    def compute(keys):
        calls.append(list(keys))
        return [key.upper() for key in keys]

    assert cache.get_or_compute(["a", "b"], compute) == ["A", "B"]
    assert cache.get_or_compute(["b", "c"], compute) == ["B", "C"]
    assert cache.get_or_compute(["c"], compute) == ["C"]
    assert calls == [["a", "b"], ["c"], []]
    # What `keep` refuses (a timeout) is returned but not cached.
    timed_out = cache.get_or_compute(["d"], lambda keys: ["timeout"], keep=lambda verdict: verdict != "timeout")
    assert timed_out == ["timeout"]
    assert cache.get("d") == (False, None) and len(cache) == 3


def test_the_former_module_path_re_exports_the_package():
    from trl_ext.rewards import math as package
    from trl_ext.rewards import math_equivalence

    assert package.__all__ == math_equivalence.__all__
    assert all(getattr(math_equivalence, name) is getattr(package, name) for name in package.__all__)
