"""The front page stays a front page, the manual's links resolve, and the README's figures are its sources'.

README.md is at most 150 lines and starts with the two commands; every relative link of README.md,
CONTRIBUTING.md and docs/*.md points at a file that exists (and a heading of it, for `#anchor` links);
the README's Python example runs; a figure quoted in two pages is a marked copy of its source page's
(scripts/sync_doc_figures.py) and equals it; every `--flag` the pages name exists, with the default they quote.
"""

from __future__ import annotations

import contextlib
import io
import re
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def fenced_blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.S | re.M)


def anchors(text: str) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", text).splitlines():
        m = re.match(r"#{1,6} (.*)", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_readme_is_a_front_page():
    text = README.read_text()
    assert len(text.splitlines()) <= 150, "README.md is the front page: move the detail to docs/"
    first = re.search(r"^```\w*\n(.*?)^```", text, re.S | re.M)
    assert first and "make demo" in first.group(1) and "make test" in first.group(1), first


def broken_links(page: Path) -> list[str]:
    """Relative link targets of ``page`` (outside code blocks) with no file, or no such heading."""
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.is_file() and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            broken.append(target)
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    assert not broken_links(page), f"{page.relative_to(ROOT)}: links to nothing: {broken_links(page)}"


def test_link_check_can_fail(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        "# Title\n\n[ok](#title) [here](p.md) [gone](missing.md) [bad anchor](p.md#nope)\n```\n[x](y)\n```\n"
    )
    assert anchors(page.read_text()) == {"title"}
    assert broken_links(page) == ["missing.md", "p.md#nope"]


@pytest.mark.slow  # traces Llama-3.1-70B (torch.compile) on an empty cache
def test_readme_python_example_runs():
    (code,) = fenced_blocks(README.read_text(), "python")  # one block: the lead swaps it as a whole
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - our own front page
    assert re.fullmatch(
        r"TP=\d+ \| PP=\d+ \| DP=\d+ \d+ token/s/device, TPOT [\d.]+ ms\nmedian TTFT [\d.]+ ms\n", out.getvalue()
    ), out.getvalue()


def _sync_script():
    """scripts/sync_doc_figures.py as a module (scripts/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sync_doc_figures", ROOT / "scripts" / "sync_doc_figures.py")
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = script  # its dataclass resolves annotations through sys.modules
    spec.loader.exec_module(script)
    return script


SYNC = _sync_script()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_copied_figures_equal_their_sources(page):
    """Every marked copy (``<!-- fig:NAME -->24.4<!-- /fig -->``) holds what its source page says now."""
    vals = SYNC.values()
    stale = [(n, v, vals.get(n)) for n, v in SYNC.marked(page.read_text()) if vals.get(n) != v]
    assert not stale, f"{page.relative_to(ROOT)}: (figure, copy, source) {stale}: run `make docs`"


def test_every_figure_has_a_source_and_a_copy():
    vals = SYNC.values()  # every reader finds its figure in its source page
    assert set(vals) == set(SYNC.FIGURES)
    copied = {n for page in PAGES for n, _ in SYNC.marked(page.read_text())}
    assert copied == set(SYNC.FIGURES), f"defined, copied nowhere: {set(SYNC.FIGURES) - copied}"
    for name, fig in SYNC.FIGURES.items():  # read from the source's own table, never from a copy in its prose
        text = SYNC.MARK.sub(lambda m: f"<!-- fig:{m.group(1)} --><!-- /fig -->", (ROOT / fig.source).read_text())
        assert fig.read(text) == vals[name], name


def test_figure_sync_can_fail(tmp_path):
    """A copy that differs from its source is stale, the sync rewrites it, an unknown figure is an error."""
    for rel in {f.source for f in SYNC.FIGURES.values()}:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text((ROOT / rel).read_text())
    (tmp_path / "CONTRIBUTING.md").write_text("no copies\n")
    (tmp_path / "README.md").write_text("median <!-- fig:devset_all -->99.9<!-- /fig --> %\n")
    want = SYNC.values()["devset_all"]
    assert SYNC.stale(tmp_path) == {tmp_path / "README.md": f"median <!-- fig:devset_all -->{want}<!-- /fig --> %\n"}
    block = "<!-- fig:published_kinds_table -->\nold\n<!-- /fig -->"
    assert SYNC.marked(SYNC.synced(block, SYNC.values())) == [
        ("published_kinds_table", SYNC.values()["published_kinds_table"])
    ]
    with pytest.raises(KeyError, match="no_such_figure"):
        SYNC.synced("<!-- fig:no_such_figure -->1<!-- /fig -->", SYNC.values())


def test_readme_headline_numbers_are_all_copies():
    """No figure of the README's accuracy table or speed line is typed by hand: each one is a marked copy."""
    readme = README.read_text()
    rows = readme.split("| what | held-out data | median error |", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    assert len(rows) == 5
    speed = readme.split("**Speed**", 1)[1].split("\n\n", 1)[0]
    for text in [*(r.rsplit("|", 2)[1] for r in rows), speed.split("):", 1)[1]]:
        bare = SYNC.MARK.sub("", text).replace("100,000", "")
        assert not re.search(r"\d", bare), f"a number typed by hand: {text!r}"
    assert "<!-- fig:devset_all_rows -->" in readme and "<!-- fig:published_rows -->" in readme


def test_accuracy_moe_median_agrees_with_its_table():
    """docs/accuracy.md states the median of the MoE medians its table holds (cells rounded to 0.1)."""
    text = (ROOT / "docs" / "accuracy.md").read_text()
    assert abs(statistics.median(SYNC._moe_medians(text)) - float(SYNC.moe_median(text))) <= 0.051


NOTEBOOK_QUOTE = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?<!-- q:(\w+) -->")


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_notebook_quotes_are_computed(path):
    """Every number a notebook's prose marks (``763.3<!-- q:best8 -->``) is printed by its ``# Numbers quoted``
    cell; tests/project/test_notebooks.py compares the values after executing it."""
    import json

    cells = json.loads(path.read_text())["cells"]
    src = ["".join(c["source"]) for c in cells]
    marked = {n for c, s in zip(cells, src) if c["cell_type"] == "markdown" for n in NOTEBOOK_QUOTE.findall(s)}
    printed = "".join(s for c, s in zip(cells, src) if c["cell_type"] == "code" and s.startswith("# Numbers quoted"))
    assert not {n for n in marked if f'"{n}":' not in printed}, "quoted in the prose, computed nowhere"
    prose = "".join(s for c, s in zip(cells, src) if c["cell_type"] == "markdown")
    assert prose.count("<!-- q:") == len(NOTEBOOK_QUOTE.findall(prose)), "a marker must follow its number directly"


def test_make_accuracy_keeps_the_hand_written_summary(tmp_path):
    """scripts/accuracy.py rewrites only what lies below its mark in docs/accuracy.md."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("accuracy_script", ROOT / "scripts" / "accuracy.py")
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    page = ROOT / "docs" / "accuracy.md"
    text = page.read_text()
    summary, mark, generated = text.partition(script.GENERATED_MARK)
    assert mark and "## Kernels against measured Vidur timings" in summary
    assert script.with_kept_summary(page, generated.lstrip("\n")) == text
    fresh = tmp_path / "accuracy.md"
    assert script.with_kept_summary(fresh, "# tables\n") == script.GENERATED_MARK + "\n\n# tables\n"
    fresh.write_text(summary + mark + "\n\nold tables\n")
    assert script.with_kept_summary(fresh, "new tables\n") == summary.rstrip() + "\n\n" + mark + "\n\nnew tables\n"


# --- flags the pages name: they exist, and a default they quote is the parser's ------------------------------

FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9_-]*[a-z0-9*])")
OTHER_PROGRAMS = {  # flags of the engines, tools and scripts the pages quote, not simcast's
    **dict.fromkeys(["--tp-size", "--pp-size", "--enable-dp-attention", "--dist-init-addr", "--nnodes"], "SGLang"),
    **dict.fromkeys(["--node-rank", "--disaggregation-mode", "--disaggregation-transfer-backend"], "SGLang"),
    **dict.fromkeys(["--max-running-requests", "--attention-backend"], "SGLang"),
    **dict.fromkeys(["--data-parallel-size"], "vLLM"),
    **dict.fromkeys(["--method", "--num-speculative-tokens"], "ATOM"),
    **dict.fromkeys(["--output-file", "--output-details"], "python -m sglang.bench_serving"),
    **dict.fromkeys(["--save-detailed"], "vllm bench serve"),
    **dict.fromkeys(["--mem-fraction"], "MyEngine, the skeleton engine of docs/development.md"),
    **dict.fromkeys(["--pd-disaggregation", "--prefill", "--decode"], "sglang_router"),
    **dict.fromkeys(["--data-parallel-address", "--data-parallel-size-local", "--headless"], "vLLM"),
    **dict.fromkeys(["--enable-expert-parallel", "--kv-transfer-config", "--pipeline-parallel-size"], "vLLM"),
    **dict.fromkeys(["--is-prefill-worker", "--is-decode-worker"], "Dynamo"),
    **dict.fromkeys(["--router-mode", "--kv-overlap-score-weight", "--router-temperature"], "Dynamo's frontend"),
    **dict.fromkeys(["--policy", "--router-policy", "--dp-size"], "sglang_router, SGLang"),
    **dict.fromkeys(["--check", "--strict-markers", "--target", "--seqlen_limit"], "ruff, pytest, pip, MLPerf"),
    "--flag": "CONTRIBUTING.md's placeholder",
}


HELP_DEFAULT = re.compile(r"\[(?:default )?(-?\d+(?:\.\d+)?)[:,\]]")


def cli_actions() -> list[tuple[str, object, str]]:
    """(option string, default, help) of every option of simcast's parser, subcommands (nested too) included."""
    import argparse

    from simcast.cli.main import make_parser

    out: list[tuple[str, object, str]] = []

    def walk(p: argparse.ArgumentParser) -> None:
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for sub in a.choices.values():
                    walk(sub)
            out.extend((o, a.default, a.help or "") for o in a.option_strings)

    walk(make_parser())
    return out


def cli_defaults() -> dict[str, list[object]]:
    """Option string -> its default in each command that has it; where the parser's default is None (resolved
    later), the number its help states as the default (``[2: LMSYS-Chat-1M's mean]``), if any."""
    out: dict[str, list[object]] = {}
    for flag, default, help_ in cli_actions():
        stated = HELP_DEFAULT.search(help_) if default is None else None
        out.setdefault(flag, []).append(float(stated.group(1)) if stated else default)
    return out


def test_help_states_the_parsers_default():
    """A help text's ``[default N ...]`` is the parser's default (docs/cli.md prints the help)."""
    wrong = []
    for flag, default, help_ in cli_actions():
        stated = HELP_DEFAULT.search(help_)
        if stated and isinstance(default, int | float) and not isinstance(default, bool):
            if float(stated.group(1)) != float(default):
                wrong.append((flag, stated.group(1), default))
    assert not wrong, f"(flag, help's default, parser's) {wrong}"


def script_flags() -> set[str]:
    """Flags of the repository's own scripts and benchmarks (quoted in docs as their usage)."""
    files = [*(ROOT / "scripts").glob("*.py"), *(ROOT / "benchmarks").glob("*.py")]
    return {f for p in files for f in re.findall(r"""["'](--[a-z][\w-]*)["']""", p.read_text())}


def unknown_flags(text: str, known: set[str]) -> list[str]:
    """``--flags`` of ``text`` that are not in ``known`` (``--random-*`` stands for every flag it prefixes)."""
    out = []
    for f in FLAG.findall(text):
        ok = any(k.startswith(f[:-1]) for k in known) if f.endswith("*") else f in known
        if not ok and f not in OTHER_PROGRAMS:
            out.append(f)
    return sorted(set(out))


@pytest.mark.parametrize("page", [p for p in PAGES if p.name != "cli.md"], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_flag_named_in_docs_exists(page):
    """A flag a page names is simcast's (docs/cli.md, generated, is checked by test_cli_docs.py), one of the
    repository's scripts', or another program's listed in OTHER_PROGRAMS."""
    missing = unknown_flags(page.read_text(), set(cli_defaults()) | script_flags())
    assert not missing, f"{page.relative_to(ROOT)} names flags simcast does not have: {missing}"


# "`--flag f` ... (default 1: ..." in one clause: the last flag inside the backticks, a plain number after
# "default" (not "default 4 × the concurrency", a rule the help states in words)
DEFAULT_QUOTE = re.compile(
    r"`([^`\n]*--[a-z][^`\n]*)`([^`\n]{0,100}?)\bdefaults? (?:is |to )?(-?\d+(?:\.\d+)?)(?![\d.]*\s*[×x*])"
)


# "`--kv-transfer whole` is the default", "`--dataset-name random` (the default"
NAMED_DEFAULT = re.compile(r"`(--[a-z][\w-]*) ([\w.-]+)`\**\s*(?:\(the default|is the default)")


def wrong_defaults(text: str, defaults: dict[str, list[object]]) -> list[tuple[str, str, list[object]]]:
    """(flag, quoted default, the parser's defaults) of every default ``text`` quotes that no command has."""
    out = []
    for m in DEFAULT_QUOTE.finditer(text):
        flag = FLAG.findall(m.group(1))[-1]
        have = defaults.get(flag, [])
        if not any(isinstance(d, int | float) and float(d) == float(m.group(3)) for d in have):
            out.append((flag, m.group(3), have))
    for flag, value in NAMED_DEFAULT.findall(text):
        have = defaults.get(flag, [])
        if value not in [str(d) for d in have]:
            out.append((flag, value, have))
    return out


@pytest.mark.parametrize("page", [p for p in PAGES if p.name != "cli.md"], ids=lambda p: str(p.relative_to(ROOT)))
def test_quoted_defaults_are_the_parsers(page):
    wrong = wrong_defaults(page.read_text(), cli_defaults())
    assert not wrong, f"{page.relative_to(ROOT)}: (flag, default quoted, parser's) {wrong}"


def test_flag_checks_can_fail():
    defaults = {"--expert-imbalance": [1.315, 1.315], "--tp": [1], "--refine-prompts": [None]}
    text = (
        "`--expert-imbalance f` scales the load (default 1: uniform); `--tp` sets TP, default 1; "
        "`--refine-prompts` prompts, default 4 × the concurrency; `--gone` and `--random-*` and `--tp*`; "
        "**`--kv-transfer whole` is the default**, `--engine vllm` (the default)"
    )
    defaults |= {"--kv-transfer": ["whole"], "--engine": ["none", "sglang"]}
    assert wrong_defaults(text, defaults) == [
        ("--expert-imbalance", "1", [1.315, 1.315]),
        ("--engine", "vllm", ["none", "sglang"]),
    ]
    assert unknown_flags(text, set(defaults) - {"--kv-transfer", "--engine"}) == [
        "--engine",
        "--gone",
        "--kv-transfer",
        "--random-*",
    ]


# --- files and modules the pages name exist ---------------------------------------------------------------------

REPO_PATH = re.compile(r"(?<![\w/.-])((?:simcast|scripts|benchmarks|tests|device_profiles|models|examples)/[\w./-]*\w)")
PACKAGE_PATH = re.compile(r"`((?:core|inputs|trace|cost|sim|calib|serving|render|api|cli|engines)/[\w/]*\w\.py)`")
DOTTED = re.compile(r"(?<![\w/.])(simcast(?:\.\w+)+)")


def resolves(dotted: str) -> bool:
    """``simcast.a.b.C`` names an importable module, or attributes of the longest importable prefix."""
    import importlib
    import importlib.util

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            spec = importlib.util.find_spec(".".join(parts[:i]))
        except ModuleNotFoundError:
            spec = None
        if spec is not None:
            obj = importlib.import_module(".".join(parts[:i]))
            for name in parts[i:]:
                if not hasattr(obj, name):
                    return False
                obj = getattr(obj, name)
            return True
    return False


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_paths_and_modules_named_in_docs_exist(page):
    """A repository path (``simcast/serving/speculative/spec.py``, or ``cost/ops/moe.py`` inside the package) or module
    (``simcast.core.moe``) a page names exists: a moved module is renamed in the pages too. Paths with a
    placeholder in capitals are skipped."""
    text = page.read_text()
    paths = [p for p in REPO_PATH.findall(text) if not re.search(r"[A-Z]{3,}", p) and not (ROOT / p).exists()]
    paths += [p for p in PACKAGE_PATH.findall(text) if not (ROOT / "simcast" / p).exists()]  # `cost/ops/moe.py`
    modules = [m for m in DOTTED.findall(text) if not resolves(m)]
    assert not paths and not modules, f"{page.relative_to(ROOT)} names what is not there: {paths + modules}"


def test_path_check_can_fail():
    assert resolves("simcast.core.moe.DEFAULT_EXPERT_IMBALANCE") and not resolves("simcast.core.no_such_module")
    assert REPO_PATH.findall("see `simcast/no/such.py` and simcast/core/moe.py.") == [
        "simcast/no/such.py",
        "simcast/core/moe.py",
    ]


def test_refine_prompts_help_states_the_rule():
    """--refine-prompts' default is a rule, not a number: its help (and docs/usage.md) state the code's."""
    from simcast.serving.search.refine import MAX_PROMPTS, MIN_PROMPTS, default_prompts

    assert [default_prompts(c, 1000, 200) for c in (50, 300, 5000)] == [1000, 3000, 20000]  # 10 x c in range
    (help_,) = {h for f, _, h in cli_actions() if f == "--refine-prompts"}
    assert f"10 x the layout's steady-state concurrency within {MIN_PROMPTS}..{MAX_PROMPTS}" in help_
    assert "10 × the steady-state concurrency within 1000–20000" in (ROOT / "docs" / "usage.md").read_text()
