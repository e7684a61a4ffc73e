"""Masked positions in NumPy's checks (inside the sandbox; standard library only).

`numpy.testing`'s array checks (`assert_array_equal`, `assert_allclose`, `assert_equal`, `assert_almost_equal`,
`assert_array_less`, ...) skip every position that either side masks. So a program that returns
`np.ma.masked_all(n)`, or the masked constant `np.ma.masked`, passes every such check against any expected array,
without computing anything.

Where a test runs in the program's process with `numpy.testing` loaded (it uses it), the harness loads `numpy.ma`
with it before any program runs, and the function those checks share, `assert_array_compare`, first compares the
two sides' masks: a position that one side masks and the other does not fails the check, as a differing value
would. Where both sides mask the same positions (the test expects a masked result), NumPy compares the rest as it
would. Nothing else changes: the check is NumPy's own otherwise.

The state of the check is a tuple (`MethodType`: neither can be changed); what the program changes in NumPy's
namespaces while its code runs is put back when it returns (`call_guard`), this function with it.
"""

import types

_UTILITIES = "numpy.testing._private.utils"


def _masks_first(state, comparison, x, y, *args, assertion_error=AssertionError, **kwargs):
    """NumPy's `assert_array_compare(comparison, x, y, ...)`, after the masks of `x` and `y` are compared."""
    compare, masked_array, mask_of, broadcast, type_, is_subclass, value_error = state
    if is_subclass(type_(x), masked_array) or is_subclass(type_(y), masked_array):
        try:
            x_mask, y_mask = broadcast(mask_of(x), mask_of(y))
        except value_error:  # shapes that do not match: NumPy's own check says so
            x_mask = y_mask = None
        if x_mask is not None and (x_mask != y_mask).any():
            raise assertion_error("Arrays are not equal: a position is masked on one side only (masked values "
                                 "are compared, not skipped)")
    return compare(comparison, x, y, *args, **kwargs)


def compare_masks(modules):
    """Make `numpy.testing`'s checks compare masks before values, where `numpy.testing` is loaded (in `modules`,
    i.e. `sys.modules`); made after the program's top-level code, before the test runs. Returns whether it did."""
    utilities = modules.get(_UTILITIES)
    numpy = modules.get("numpy")
    compare = getattr(utilities, "assert_array_compare", None)
    if numpy is None or type(compare) is not types.FunctionType:
        return False
    # NumPy's own, loaded by the harness with `numpy.testing` before any program ran (and put back since in
    # `sys.modules`): never a module the program planted there, nor an import that could fail now.
    masked = modules.get("numpy.ma")
    if masked is None:  # `numpy.testing` came with the program's code, not the test's: NumPy's own, through numpy
        masked = numpy.ma
    state = (compare, masked.MaskedArray, masked.getmaskarray, numpy.broadcast_arrays, type, issubclass, ValueError)
    utilities.assert_array_compare = types.MethodType(_masks_first, state)
    return True


# What the audit hook refuses to rewire (`__code__`).
PROTECTED_FUNCTIONS = (_masks_first,)
