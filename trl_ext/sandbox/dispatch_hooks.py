"""Where a library of arrays asks a class of the program's what its operations make (inside the sandbox; standard
library only).

NumPy asks an operand's class how to compute a ufunc or a function on it (`__array_ufunc__`,
`__array_function__`) and what to make of the result (`__array_wrap__`, `__array_finalize__`); PyTorch asks
`__torch_function__` and `__torch_dispatch__`. Each is handed the other operand or the result, so a class of the
program's that defines one answers NumPy's comparisons itself (`np.testing.assert_array_equal`,
`(f(x) == expected).all()`): they are answering methods (`PROTOCOLS`), trapped with the comparisons outside the
program's calls (`answer_traps`).

Such a library also calls its own methods on what its operations make, and a subclass of the program's overrides
them: an `ndarray` subclass's `all` (the result of `==` is one, and `np.testing`'s checks call it), a `DataFrame`
subclass's `_constructor_from_mgr` (it builds the result of `==`) or `_cmp_method` (it computes it). So in a class
of the program's with a base from such a library (`LIBRARIES`, and PyTorch's `Tensor`), every method, property,
class or other descriptor it defines over an attribute of such a base is trapped too (`overrides`), but for what
makes and names its own objects (`__init__`, `__new__`, `__repr__`, `__str__`, `__format__`) and what `type` itself
puts there: the values the program makes are its answer, what it makes of a library's results is not. Data it
sets over a base's (`_metadata`, `__array_priority__`) stays. Read through `type`'s own descriptors: none of the
program's code runs here.
"""

PROTOCOLS = frozenset({"__array_ufunc__", "__array_function__", "__array_wrap__", "__array_finalize__",
                       "__torch_function__", "__torch_dispatch__"})
# Libraries of arrays and frames, whose operations on an object call methods its class may override: every class of
# a module under one of these packages, and PyTorch's tensors (`torch`, `torch._C`; not its modules:
# `nn.Module.forward` is the program's to write, and the test's to call) and SciPy's sparse arrays (not its
# distributions: a subclass of `rv_continuous` writes `_pdf` for SciPy to call).
LIBRARIES = ("numpy", "pandas", "xarray", "scipy.sparse")
_TENSOR_MODULES = frozenset({"torch", "torch._C"})
# Left as they are: what makes and names the program's own objects, and what `type` itself puts in a class's dict.
_LEFT = frozenset({"__init__", "__new__", "__init_subclass__", "__class_getitem__", "__repr__", "__str__", "__format__",
                   "__dict__", "__weakref__", "__slots__", "__doc__", "__module__", "__qualname__", "__annotations__"})


def _under(module, packages, starts):
    """Whether `module` is one of `packages` or a module under one."""
    for package in packages:
        if module == package or starts(module, package + "."):
            return True
    return False


def _overrides(state, cls, *, under=_under, str_=str):
    """The names of `cls`'s own attributes that override an attribute of a base from `LIBRARIES`, through its
    `__mro__` or its `__bases__` (a metaclass may leave a base out of the `__mro__`)."""
    (mro_of, bases_of, class_dict, module_of, exact, starts, is_subclass, type_, id_, libraries, tensor_modules,
     left, set_) = state
    library_names, seen, pending = set_(), set_(), [*mro_of(cls)[1:], *bases_of(cls)]
    while pending:
        base = pending.pop()
        if id_(base) in seen:
            continue
        seen.add(id_(base))
        pending.extend(bases_of(base))
        module = module_of(base)  # what a class of the program's says: read as an exact `str` (no `__eq__` of its own)
        module = exact(module) if is_subclass(type_(module), str_) else ""
        if module in tensor_modules or under(module, libraries, starts):
            library_names.update(class_dict(base))
    return {name for name in class_dict(cls) if name in library_names and name not in left}


def _trapped_override(state, value, trap):
    """What replaces an override (`overrides`) outside the program's calls: a property reading as the trap where
    `value` is a descriptor (a property, a class or static method, any object whose class has `__get__`), the trap
    where it is callable, None (left as it is) for data."""
    property_, type_, mro_of, class_dict, callable_ = state
    for cls in mro_of(type_(value)):
        if "__get__" in class_dict(cls):
            return property_(trap)
    return trap if callable_(value) else None


def override_traps():
    """`(overrides(cls), trapped_override(value, trap))`, bound before the program runs."""
    import types

    mro_of, class_dict = type.__dict__["__mro__"].__get__, type.__dict__["__dict__"].__get__
    overrides = types.MethodType(_overrides, (
        mro_of, type.__dict__["__bases__"].__get__, class_dict, type.__dict__["__module__"].__get__, str.__str__,
        str.startswith, issubclass, type, id, LIBRARIES, _TENSOR_MODULES, _LEFT, set))
    trapped = types.MethodType(_trapped_override, (property, type, mro_of, class_dict, callable))
    return overrides, trapped


# What the audit hook refuses to rewire (`__code__`).
PROTECTED_FUNCTIONS = (_overrides, _under, _trapped_override)
