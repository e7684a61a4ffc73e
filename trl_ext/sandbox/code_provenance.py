"""Where code comes from, kept unforgeable (inside the sandbox; standard library only).

Which methods answer with the program's own code, and which code is the program's, is told by the file a
function's code was loaded from (`answer_traps`): a function whose code is a library's file's is the library's.
The audit hook (`audit_hook.install`) asks `forged_library_code` about each event that makes code or a function,
so that no program can make code that claims a library's file (or the test's) without being that file's content,
nor give a library's code globals of its choosing, nor give a library's function other code or defaults.
"""

import os
import sys
import sysconfig
import types

# `types.coroutine`, which the standard library applies to its own generators as it loads (`asyncio.tasks`), gives
# their code a flag through `code.replace`: the same code, under the same file name.
_MARKS_COROUTINES = (types.coroutine.__code__.co_filename, types.coroutine.__code__.co_name)


def library_roots():
    """Where libraries are loaded from: the interpreter's library directories, and every directory of `sys.path`
    that no program can write to (in the sandbox: everything but its tmpfs)."""
    paths = [sysconfig.get_paths()[name] for name in ("stdlib", "platstdlib", "purelib", "platlib")]
    paths += [path for path in sys.path if os.path.isabs(path) and os.path.isdir(path) and not os.access(path, os.W_OK)]
    paths.append(os.path.dirname(os.path.abspath(__file__)))  # the harness's own modules
    return tuple(sorted({os.path.realpath(path).rstrip("/") + "/" for path in paths}))


def forged_library_code(event, args, caller, program_running, roots, read_file, type_=type, bytes_=bytes, str_=str,
                        starts=str.startswith, decode=bytes.decode, marks_coroutines=_MARKS_COROUTINES,
                        code_type=types.CodeType, function_code=types.FunctionType.__code__.__get__):
    """Why `event` (an audit event) would make code that claims to come from a library's file (or the test's)
    without being that file's content, or a function of a library's code that the library did not make, or None.

    - `compile` under a library's file name must compile that file's content (the import system does so); an
      abstract syntax tree (whose file name the event does not show) is not compiled while the program runs;
    - `code.__new__` (`types.CodeType`, `code.replace`) may not name a library's file, the test's or a frozen
      module's, but from `types.coroutine` (which only flags a function's code as a coroutine's: `import asyncio`
      inside a call); nor may `compile`. A file name or code name must be a plain `str`: a subclass's `__eq__`
      would answer the judge's own comparisons (is this the program's code?) with the program's code;
    - `marshal.loads` is the import system's own load of a library's compiled file, its content unchanged;
    - `function.__new__` (`types.FunctionType(code, globals)`) is not given a library's code while the program
      runs: such a function would count as the library's (`answer_traps`) with globals the program chose;
    - `object.__setattr__` of a function's `__code__`, `__defaults__` or `__kwdefaults__` (the caller checks which)
      does not rewire a library's function while the program runs: `np.testing.assert_array_equal.__code__ =
      (lambda *args, **kwargs: None).__code__` would make every later check of the test's with it pass, and no
      snapshot of namespaces sees it; but `types.coroutine` flagging a function's own code.
    `caller`: the frame that raised the event; `read_file(path)`: its bytes, or None."""
    if event == "compile":
        source, filename = args[0], args[1]
        if filename is None:
            return "compiling a syntax tree" if program_running() else None
        if type_(filename) is bytes_:
            filename = decode(filename, errors="replace")
        if type_(filename) is not str_:  # a `str` subclass answers comparisons of the judge's with its own code
            return "compiling code under a file name that is not a plain string"
        if filename == "<test>" or starts(filename, "<frozen "):
            return "compiling code under the test's name or a frozen module's"
        if type_(filename) is str_ and starts(filename, roots) and bytes_(source) != read_file(filename):
            return "compiling code under a library's file name"
    elif event == "code.__new__":
        if type_(args[1]) is not str_ or type_(args[2]) is not str_:
            return "making a code object whose file or name is not a plain string"
        code = caller.f_code if caller is not None else None
        if code is not None and (code.co_filename, code.co_name) == marks_coroutines and args[1] != "<test>":
            return None
        if args[1] == "<test>" or starts(args[1], roots) or starts(args[1], "<frozen "):
            return "making a code object under a library's file name"
    elif event == "marshal.loads":
        code = caller.f_code if caller is not None else None
        if code is None or code.co_name != "_compile_bytecode" or not starts(code.co_filename, "<frozen importlib"):
            return "loading code objects with marshal"
        path = caller.f_locals.get("bytecode_path")
        content = read_file(path) if type_(path) is str_ and starts(path, roots) else None
        if content is None or content[16:] != bytes_(args[0]):
            return "loading code objects with marshal"
    elif event == "function.__new__":
        code = args[0] if args else None
        filename = code.co_filename if type_(code) is code_type else None
        if (filename == "<test>" or type_(filename) is str_ and starts(filename, roots)) and program_running():
            return "making a function of a library's code"
    elif event == "object.__setattr__":
        filename = function_code(args[0]).co_filename
        code = caller.f_code if caller is not None else None
        if (code is not None and (code.co_filename, code.co_name) == marks_coroutines and args[1] == "__code__"
                and type_(args[2]) is code_type and args[2].co_filename == filename):
            return None  # `types.coroutine` setting a library's function's own code, flagged
        if (filename == "<test>" or type_(filename) is str_ and starts(filename, roots)) and program_running():
            return "rewiring a library's function"
    return None
