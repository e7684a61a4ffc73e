"""Precompiled standard headers (`trl_ext.sandbox.cpp_headers`): which header a program starts with, the cache
built on the host, that GCC really reads it in the sandbox, that programs compile to the same verdicts, and that
no program can write into the cache that every later compile reads."""

from __future__ import annotations

import hashlib
import threading

import pytest
from adversarial import CPP_SUM, fenced
from sandbox_helpers import ISOLATING_BACKENDS, backend_id

from trl_ext.rewards.code import CodeReward
from trl_ext.sandbox import cpp_compiler
from trl_ext.sandbox.cpp_headers import first_standard_include, precompiled_header_dir, precompiled_headers_root
from trl_ext.sandbox.testing import DEFAULT_CPP_FLAGS, close_servers

SUM_TESTS = [{"input": "1 2\n", "output": "3\n"}, {"input": "40 2", "output": "42"}]
BITS_SUM = "#include <bits/stdc++.h>\nusing namespace std;\nint main() { long a, b; cin >> a >> b; cout << a + b; }\n"
BACKENDS = [pytest.param(backend, id=backend_id(backend)) for backend in ISOLATING_BACKENDS]


@pytest.mark.parametrize(
    "source, header",
    [
        ("#include <iostream>\nint main() {}", "iostream"),
        ("#include<bits/stdc++.h>\nusing namespace std;", "bits/stdc++.h"),
        ("// solution\n/* two\n lines */\n\n#include <vector>\n#include <iostream>", "vector"),
        ("#define LOCAL\n#pragma GCC optimize(\"O3\")\n#include <vector>", "vector"),  # GCC decides validity
        ("#include <cstdio>\n#include <vector>", None),  # a C header first: too cheap to be worth precompiling
        ('#include "mine.h"\n#include <iostream>', None),  # a program's own header comes first
        ("#include <boost/graph.hpp>", None),  # not a standard header: nothing is built for it
        ("#include <../../etc/passwd>", None),
        ("int x;\n#include <iostream>", None),  # code before the first include: GCC would not use it
        ("", None),
    ],
)
def test_first_standard_include(source, header):
    assert first_standard_include(source) == header


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRL_EXT_PCH_DIR", str(tmp_path / "pch"))
    assert cpp_compiler() is not None, "g++ is needed for the C++ tests (apt-get install g++)"
    return tmp_path / "pch"


def test_a_header_is_built_once_into_the_cache(cache):
    found = []
    threads = [
        threading.Thread(target=lambda: found.append(precompiled_header_dir(cpp_compiler(), DEFAULT_CPP_FLAGS, "vector")))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(found)) == 1 and found[0].startswith(str(cache))
    built = list(cache.rglob("*.gch"))
    assert [path.name for path in built] == ["vector.gch"] and (cache / built[0].parent / "vector").read_text() == "#include_next <vector>\n"
    assert not [path for path in cache.rglob("*") if path.name.startswith(".build-")]  # no half-written file
    # Other flags make another header: GCC would refuse one built with different flags.
    other = precompiled_header_dir(cpp_compiler(), ("-std=c++14", "-O0"), "vector")
    assert other != found[0]
    assert precompiled_header_dir(cpp_compiler(), DEFAULT_CPP_FLAGS, "boost/graph.hpp") is None


def test_the_cache_stops_growing_at_its_limit(cache, monkeypatch):
    from trl_ext.sandbox import cpp_headers

    assert precompiled_header_dir(cpp_compiler(), DEFAULT_CPP_FLAGS, "vector") is not None
    monkeypatch.setattr(cpp_headers, "MAX_CACHE_BYTES", 1 << 20)  # smaller than vector's precompiled form
    assert precompiled_header_dir(cpp_compiler(), DEFAULT_CPP_FLAGS, "map") is None
    assert precompiled_header_dir(cpp_compiler(), DEFAULT_CPP_FLAGS, "vector") is not None  # built ones stay in use
    assert sorted(path.name for path in cache.rglob("*.gch")) == ["vector.gch"]


def test_a_failed_build_leaves_nothing(cache):
    assert precompiled_header_dir(cpp_compiler(), ("-std=c++17", "-fno-such-flag"), "vector") is None
    assert list(cache.rglob("*.gch")) == []
    assert precompiled_header_dir("/nonexistent/g++", DEFAULT_CPP_FLAGS, "vector") is None


def compile_report(reward: CodeReward, program: str):
    report = reward.evaluate(fenced(program, "cpp"), SUM_TESTS)
    assert [outcome.passed for outcome in report.outcomes] == [True, True], report
    return report.compile["diagnostics"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_gcc_reads_the_precompiled_header_in_the_sandbox(cache, backend):
    # `-H` makes GCC list what it reads: "! <file>.gch" is a precompiled header used, "x <file>.gch" one refused.
    flags = (*DEFAULT_CPP_FLAGS, "-H")
    reward = CodeReward(language="cpp", isolation=backend, cpp_flags=flags, timeout=2.0)
    try:
        for program, header in ((CPP_SUM, "iostream"), (BITS_SUM, "bits/stdc++.h")):
            used = compile_report(reward, program)
            assert used.startswith(f"! {precompiled_header_dir(cpp_compiler(), flags, header)}/{header}.gch"), used
        # A macro defined before the header changes it: GCC refuses the precompiled one and reads the header.
        debug = "#define _GLIBCXX_DEBUG\n" + CPP_SUM
        refused = compile_report(reward, debug)
        assert "! " not in refused.splitlines()[0]
    finally:
        close_servers(reward.sandbox)
    off = CodeReward(language="cpp", isolation=backend, cpp_flags=flags, timeout=2.0, precompiled_headers=False)
    try:
        assert ".gch" not in compile_report(off, CPP_SUM)
    finally:
        close_servers(off.sandbox)


def test_no_precompiled_header_without_file_system_isolation(cache):
    reward = CodeReward(language="cpp", isolation="none", cpp_flags=(*DEFAULT_CPP_FLAGS, "-H"), timeout=2.0)
    assert ".gch" not in compile_report(reward, CPP_SUM)


PLANT = r"""
#include <iostream>
#include <cstdio>
#include <dirent.h>
#include <string>
// Tries to plant a header into the cache every later compile reads, and to overwrite the ones there.
void plant(const std::string& dir) {
    DIR* d = opendir(dir.c_str());
    if (!d) return;
    while (dirent* e = readdir(d)) {
        std::string name = e->d_name;
        if (name == "." || name == "..") continue;
        std::string path = dir + "/" + name;
        if (FILE* f = fopen(path.c_str(), "r+")) { fputs("planted", f); fclose(f); }
        plant(path);
    }
    closedir(d);
    if (FILE* f = fopen((dir + "/planted.gch").c_str(), "w")) { fputs("planted", f); fclose(f); }
}
int main() { plant("ROOT"); long a, b; if (scanf("%ld %ld", &a, &b) == 2) printf("%ld\n", a + b); }
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_programs_cannot_write_into_the_cache(cache, backend):
    reward = CodeReward(language="cpp", isolation=backend, timeout=2.0)
    try:
        compile_report(reward, CPP_SUM)  # builds iostream's precompiled form, which PLANT then uses too
        before = {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in cache.rglob("*") if path.is_file()}
        assert before
        compile_report(reward, PLANT.replace("ROOT", str(precompiled_headers_root())))
        after = {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in cache.rglob("*") if path.is_file()}
        assert after == before and not list(cache.rglob("planted*"))
    finally:
        close_servers(reward.sandbox)
