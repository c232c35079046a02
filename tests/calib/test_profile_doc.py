"""The profile writer's round-trip document: shipped profiles come back byte for byte, a value's note is set and
read as data, an unchanged re-calibration leaves the file as it was, and ruamel stays off the run path."""

import dataclasses
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from simcast.calib.profiles import profile_notes as pn
from simcast.calib.profiles import profile_yaml as py
from simcast.calib.profiles.profile_doc import delete, dump_doc, load_doc, note, set_value
from simcast.cli.main import main
from simcast.core.errors import SimcastInputError
from simcast.inputs.loaders import load_device

PROFILES = Path(__file__).resolve().parents[2] / "device_profiles"
SHIPPED = sorted(PROFILES.glob("*.yaml"))

SMALL = """\
# a profile
name: x                              # must equal the file name stem
efficiency:
  matmul: 0.80                       # prior: a datasheet
  memory: 0.85

# links follow
links:
  intra_node:
    latency_s: 3.0e-6
    collectives:                   # t = latency_s + ...
      - {kind: all_reduce, gpus: 8, latency_s: 1.0e-5, bus_bw_bytes_per_s: 3.0e+11}  # fit by simcast calibrate on a.csv
"""


@pytest.mark.slow
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_profile_round_trips_byte_for_byte(path):
    text = path.read_text()
    assert dump_doc(load_doc(text, path.name)) == text


def test_set_value_writes_the_value_and_its_note_in_place():
    doc = load_doc(SMALL, "small")
    assert note(doc, "efficiency.matmul") == "prior: a datasheet" and note(doc, "efficiency.memory") == ""
    set_value(doc, "efficiency.matmul", 0.71234, "fit by simcast calibrate on g.csv; prior 0.80: a datasheet")
    set_value(doc, "efficiency.memory", 0.9, "fit by simcast calibrate on g.csv")
    set_value(doc, "efficiency.vector_memory", 0.6, "fit by simcast calibrate on g.csv")  # new: end of its section
    out = dump_doc(doc).splitlines()
    # `key: value` padded to 36 characters, then ` # note` (hand-counted: 2 + 8 + 9 = 19 characters + 17 spaces)
    assert out[3] == "  matmul: 7.1234e-1" + " " * 17 + " # fit by simcast calibrate on g.csv; prior 0.80: a datasheet"
    assert out[4] == "  memory: 9.0000e-1" + " " * 17 + " # fit by simcast calibrate on g.csv"
    assert out[5] == "  vector_memory: 6.0000e-1" + " " * 10 + " # fit by simcast calibrate on g.csv"
    assert out[6:8] == ["", "# links follow"]  # the lines after the section stay after it
    assert note(doc, "efficiency.memory") == "fit by simcast calibrate on g.csv"
    assert yaml.safe_load("\n".join(out))["efficiency"] == {"matmul": 0.71234, "memory": 0.9, "vector_memory": 0.6}


def test_delete_keeps_the_lines_that_followed_the_value():
    for path, gone in (
        ("efficiency.memory", "  memory: 0.85\n"),
        ("efficiency.matmul", "  matmul: 0.80                       # prior: a datasheet\n"),  # first of its block
        ("efficiency", "efficiency:\n  matmul: 0.80                       # prior: a datasheet\n  memory: 0.85\n"),
    ):
        doc = load_doc(SMALL, "small")
        delete(doc, path)
        assert dump_doc(doc) == SMALL.replace(gone, ""), path


def test_notes_are_counted_from_the_document():
    doc = load_doc(SMALL, "small")
    assert pn.count_fitted(doc) == 2  # one collective fit: alpha and beta
    assert pn.link_fitted_here(doc, "intra_node") and not pn.link_fitted_here(doc, "inter_node")
    set_value(doc, "efficiency.matmul", 0.7, "carried over from y, where fit by simcast calibrate on b.csv")
    set_value(doc, "efficiency.memory", 0.9, "carried over from y, where it is an uncalibrated prior")
    assert pn.carried_counts(doc) == (2, 1)
    names = [name for name, *_ in pn.walk(doc)]
    assert names == [
        "name",
        "efficiency.matmul",
        "efficiency.memory",
        "links.intra_node.latency_s",
        "links.intra_node.all_reduce.8",
    ]


def test_recount_fixes_stale_counts():
    doc = load_doc(SMALL + "calibration:\n  fitted_parameters: 99\n", "small")
    py.recount_calibration(doc)
    assert dump_doc(doc).endswith("calibration:\n  fitted_parameters: 2\n")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("name: x\nname: y\n", "name"),  # a key given twice
        ("- a\n- b\n", "mapping"),
        ("name: [x\n", "YAML"),
    ],
)
def test_bad_profile_text_is_one_input_error(text, needle):
    with pytest.raises(SimcastInputError) as e:
        load_doc(text, "--device")
    assert "\n" not in str(e.value) and needle in str(e.value) and str(e.value).startswith("--device")


@pytest.mark.parametrize("flag", ["--device", "--device-template"])
def test_calibrate_with_a_duplicate_key_profile_is_one_line_exit_2(tmp_path, capsys, flag):
    bad = tmp_path / "dup.yaml"
    bad.write_text((PROFILES / "a10.yaml").read_text() + "name: a10\n")
    out = tmp_path / "o.yaml"
    args = ["calibrate", str(tmp_path / "m.csv"), flag, str(bad), "--out", str(out)]
    (tmp_path / "m.csv").write_text("kind,device,m,n,k,time_s\ngemm,a10,16,1024,1024,1e-5\n")
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "name" in err and not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in SHIPPED if "calibration:" in p.read_text()], ids=lambda p: p.stem)
def test_unchanged_refit_leaves_the_profile_unchanged(path):
    """Re-writing every fitted value with the value and note it already has, and the same calibration block,
    gives back the shipped file (a fit note keeps the old value's prior, not itself)."""
    text = path.read_text()
    dev, doc = load_device(str(path)), load_doc(text, path.name)
    fitted = {name: n.split("; prior ", 1)[0] for name, _at, _v, n in pn.walk(doc) if n.startswith(pn.FIT_NOTE)}
    notes = {p: fitted[p] for p in py.scalar_values(dev) if p in fitted}
    notes |= {p: fitted[p] for p in py.collective_paths(dev) if p in fitted}
    py.update_profile(doc, dev, notes)
    py.set_calibration(doc, yaml.safe_load(text)["calibration"], note(doc, "calibration"))
    assert dump_doc(doc) == text


def test_from_db_refit_with_the_same_fit_gives_back_the_shipped_profile(tmp_path, monkeypatch, capsys):
    """``simcast calibrate --from-db`` end to end (the database stubbed with what a100_sxm_80gb's profile says it
    found): the written profile is the shipped one, byte for byte."""
    from simcast.calib.fitting import from_db
    from simcast.calib.readers import aic_db
    from simcast.cli import calibrate_db

    text = (PROFILES / "a100_sxm_80gb.yaml").read_text()
    data = yaml.safe_load(text)
    block = data["calibration"]["from_db"]
    dev = load_device("a100_sxm_80gb")
    engine = block["engines"]["vllm"]

    def fit_engine(system, e, base, version):
        errs = {k: tuple(v) for k, v in data["engines"][e]["fit_abs_err_pct"].items()}
        return dev.engines[e], errs, types.SimpleNamespace(tables=engine["tables"], proxies=engine["proxies"])

    nccl = block["nccl"]
    nerr = {k: tuple(v) for k, v in nccl["held_out_abs_err_pct"].items()}
    monkeypatch.setattr(from_db, "fit_engine", fit_engine)
    monkeypatch.setattr(from_db, "nccl_fits", lambda system: (dev.links.intra_node.collectives, nerr, nccl["source"]))
    monkeypatch.setattr(aic_db, "data_root", lambda: tmp_path)
    monkeypatch.setattr(aic_db, "package_version", lambda: block["package"].split()[-1])
    day = types.SimpleNamespace(isoformat=lambda: block["date"])
    monkeypatch.setattr(calibrate_db, "_dt", types.SimpleNamespace(date=types.SimpleNamespace(today=lambda: day)))
    out = tmp_path / "a100_sxm_80gb.yaml"
    argv = ["calibrate", "--from-db", "aiconfigurator", "--system", block["system"], "--engine", "vllm"]
    assert main([*argv, "--device", "a100_sxm_80gb", "--out", str(out)]) == 0, capsys.readouterr().err
    assert out.read_text() == text


def test_from_db_engine_none_rewrites_only_the_nccl_link_fit(tmp_path, monkeypatch, capsys):
    """``--engine none`` refits NCCL's own all-reduce only (database stubbed with what h100_sxm's profile says it
    found): no engine is fitted and the written profile is the shipped one, byte for byte."""
    from simcast.calib.fitting import from_db
    from simcast.calib.readers import aic_db
    from simcast.cli import calibrate_db

    text = (PROFILES / "h100_sxm.yaml").read_text()
    block = yaml.safe_load(text)["calibration"]["from_db"]
    dev = load_device("h100_sxm")

    def fit_engine(*args):
        raise AssertionError("--engine none fits no engine")

    monkeypatch.setattr(from_db, "fit_engine", fit_engine)
    monkeypatch.setattr(
        from_db, "nccl_fits", lambda system: (dev.links.intra_node.collectives, {}, block["nccl"]["source"])
    )
    monkeypatch.setattr(aic_db, "data_root", lambda: tmp_path)
    monkeypatch.setattr(aic_db, "package_version", lambda: block["package"].split()[-1])
    day = types.SimpleNamespace(isoformat=lambda: block["date"])
    monkeypatch.setattr(calibrate_db, "_dt", types.SimpleNamespace(date=types.SimpleNamespace(today=lambda: day)))
    out = tmp_path / "h100_sxm.yaml"
    argv = ["calibrate", "--from-db", "aiconfigurator", "--system", "h100_sxm", "--engine", "none", "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    assert out.read_text() == text


@pytest.mark.slow
def test_transfer_writes_only_carried_values():
    """A transfer's notes name the source; values and the counts agree with the notes (h100_sxm -> h200_sxm)."""
    from simcast.calib.fitting.fit import transfer

    src, dst = load_device("h100_sxm"), load_device("h200_sxm")
    dev = transfer(src, dst)
    doc = load_doc((PROFILES / "h200_sxm.yaml").read_text(), "h200")
    notes, carried, fitted = py.transfer_notes(
        src, load_doc((PROFILES / "h100_sxm.yaml").read_text(), "h100"), dst, dev
    )
    py.update_profile(doc, dev, notes)
    assert pn.carried_counts(doc)[0] == carried == 27 and fitted == 12  # h100's 14 NCCL values (nccl_bridge)
    again = yaml.safe_load(dump_doc(doc))
    assert again["efficiency"]["matmul"] == pytest.approx(src.efficiency.matmul, rel=1e-4)
    assert dataclasses.asdict(src.links.intra_node)["latency_s"] == pytest.approx(
        again["links"]["intra_node"]["latency_s"], rel=1e-4
    )


@pytest.mark.slow
def test_run_path_does_not_load_ruamel():
    """simulate and optimize read profiles with the safe loader; only calibrate's writer imports ruamel."""
    code = (
        "import sys; from simcast.cli.main import main\n"
        "main(['simulate', '--model', 'Qwen/Qwen3-0.6B', '--device', 'h100_sxm'])\n"
        "main(['optimize', '--model', 'Qwen/Qwen3-0.6B', '--device', 'h100_sxm', '--num-devices', '2', '--top', '1'])\n"
        "print('RUAMEL', any(m.startswith('ruamel') for m in sys.modules))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == "RUAMEL False"


def test_write_profile_checks_the_profile_before_it_writes(tmp_path, capsys):
    src = PROFILES / "mi300x.yaml"
    out = tmp_path / "mi300x.yaml"
    py.write_profile(out, load_doc(src.read_text(), str(src)), "public_test", {"script": "t.py"})
    text = out.read_text()
    entry = '  public_test: {"script": "t.py"}\n'
    assert text.endswith(entry) and capsys.readouterr().out == "wrote mi300x.yaml\n"
    assert text.replace(entry, "") == src.read_text()  # nothing else moved (its counts were current)
    bad = tmp_path / "x.yaml"
    with pytest.raises(SimcastInputError):  # not a device profile: refused before the file is written
        py.write_profile(bad, load_doc(SMALL, "small"), "k", {"a": 1})
    assert not bad.exists()
