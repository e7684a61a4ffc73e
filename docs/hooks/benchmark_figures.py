"""MkDocs hook: publish the benchmark figures next to the page that includes `benchmarks/RESULTS.md`.

`docs/benchmarks/results.md` includes RESULTS.md as it is, whose images are linked relative to `benchmarks/`
(`results/<name>.png`); the figures stay where the benchmarks write them and are added to the site here.
"""

from pathlib import Path

from mkdocs.structure.files import File

FIGURES = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def on_files(files, config):
    for figure in sorted(FIGURES.glob("*.png")):
        files.append(File.generated(config, f"benchmarks/results/{figure.name}", abs_src_path=str(figure)))
    return files
