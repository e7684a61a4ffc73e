"""The harness's code that runs while a call into the program is under way looks no name up in its module or in
the builtins: a program reaches every harness module (`sys.modules`, any harness function's `__globals__`) and the
builtins, and what it rebinds there stays until its call returns. Had `enter` looked up
`nearest_code_is_program`, a program could rebind it to let itself run the test's helper methods; had the audit
hook looked up `str`, replacing `builtins.str` would have opened the test's code to it (the red team has both).

So every function of the modules a test process loads, and every function nested in one, loads no global, but
those listed below: they run only before the program does, or where every module has been put back since (the
module restore after its top-level code, the call guard after each call), or in a process the program is not in."""

import dis
import importlib
import inspect
import types

import pytest

# Module -> the qualified names of the code that may look names up, and why.
MADE_BEFORE_THE_PROGRAM = {
    "test_process": {
        # the module snapshot, the test's names and the bindings, made before the program runs
        "_module_snapshot", "_module_snapshot.<locals>.<genexpr>", "_module_snapshot.<locals>.<listcomp>", "_names_in", "_names_in.<locals>.<genexpr>", "_genuine_names", "_bind_judge_functions",
        "_bind_judge_functions.<locals>.bind", "_bind_judge_functions.<locals>.bind.<locals>.<genexpr>",
        "_default_signals_and_cpu_limit", "_take_descriptors", "_take_descriptors.<locals>.<genexpr>",
        "_value_frame_writer", "_in_process_keepers", "_exec_child",
        "_exec_child.<locals>.<genexpr>",
        # after the program's top-level code only once the module restore has put every module back
        "_child", "_guarded_namespace",
        # the judge's own process and the program's: the program is never in the judge's process
        "_judged_apart", "_judged_apart.<locals>.write", "_run_program_for_judge",
        "_run_program_for_judge.<locals>.program",
    },
    "call_guard": {
        "context", "memo_finder", "memo_emptier", "warm_copies", "held_dicts", "held_dicts.<locals>.<listcomp>",
        "hider", "guarded",
    },
    "answer_traps": {
        "callee_framer", "context_framer", "library_objects_made", "argument_framer", "answer_traps",
        "answer_traps.<locals>.<genexpr>", "returned_checker", "watcher", "_framing", "_framing_kinds", "_purity",
    },
    "lasting_code": {
        "_pure_functions", "_pure_functions.<locals>.<listcomp>", "_pure_functions.<locals>.<genexpr>",
        "_carriers", "bound", "bound.<locals>.<setcomp>",
    },
    "test_namespace": {
        "test_function_hider", "call_argument_hider", "namespace_keeper", "namespace_keeper.<locals>.namespace",
        "_mock_method_names",
    },
    "audit_hook": {"install", "install.<locals>.<genexpr>", "_provenance_check"},
    "own_anything": {"test_anything", "approximation_check"},
    "masked_positions": {"compare_masks"},
    "library_closures": {"_functions_in", "_functions_in.<locals>.<genexpr>", "closure_cells", "_pointer_views",
                         "cells_keeper"},
    "dispatch_hooks": {"override_traps"},
    "context_state": {"switcher", "switcher.<locals>.<genexpr>"},
    "dict_versions": {"_tag_offset", "version_views", "_gatherer", "changed_since"},
    "plain_data": {"make_comparisons", "value_types", "array_types", "_known_checker"},
    "code_provenance": {"library_roots", "library_roots.<locals>.<listcomp>", "library_roots.<locals>.<setcomp>"},
}
# Not listed, as the program never runs while their code does: `harness` and `test_ends` (the process that forks
# test processes), `program_isolation` and `one_thread` (set up before the program runs), `judge_side` (the judge's process, apart
# from the program's) and `test_records` (read by the trainer).


def _code_objects(module):
    """Every code object of the functions `module` defines, and of the functions nested in them."""
    stack = []
    for value in vars(module).values():
        if inspect.isfunction(value) and value.__module__ == module.__name__:
            stack.append(value.__code__)
        elif inspect.isclass(value) and value.__module__ == module.__name__:
            for member in vars(value).values():
                function = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
                if inspect.isfunction(function):
                    stack.append(function.__code__)
    seen = {}
    while stack:
        code = stack.pop()
        if id(code) not in seen:
            seen[id(code)] = code
            stack.extend(const for const in code.co_consts if isinstance(const, types.CodeType))
    return list(seen.values())


@pytest.mark.parametrize("name", sorted(MADE_BEFORE_THE_PROGRAM))
def test_harness_code_run_during_the_programs_calls_looks_no_name_up(name):
    module = importlib.import_module(f"trl_ext.sandbox.{name}")
    looking_up = {
        code.co_qualname: sorted({instruction.argval for instruction in dis.get_instructions(code)
                                  if instruction.opname == "LOAD_GLOBAL"})
        for code in _code_objects(module)
    }
    offenders = {qualname: names for qualname, names in looking_up.items()
                 if names and qualname not in MADE_BEFORE_THE_PROGRAM[name]}
    assert offenders == {}


def test_the_list_names_only_code_that_exists():
    for name, qualnames in MADE_BEFORE_THE_PROGRAM.items():
        existing = {code.co_qualname for code in _code_objects(importlib.import_module(f"trl_ext.sandbox.{name}"))}
        assert qualnames <= existing, qualnames - existing
