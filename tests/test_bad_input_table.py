"""Every command refuses malformed input with exit code 2 and one line, and writes nothing: a table of damaged
files (deeply nested JSON, bytes that are not UTF-8, FIFOs, directories, wrong shapes), broken policy modules,
impossible output paths, damaged run state and out-of-range numbers, fed to the real command line in process
(Typer's CliRunner) with a fresh work directory per case.

For each case: the exit code is 2; stderr is exactly one non-empty line, starting ``error:`` and containing the
expected words (which name the culprit: the option, file or value); stdout is empty; no ``Traceback`` anywhere;
and the work directory (a copy of a real recorded run, the damaged files, the planted policy modules' output) has
exactly the entries, types and bytes it had before. Planted FIFOs would block any reader that opened them for
reading in blocking mode: a hang here is a failure (the per-test timeout).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from doctored_files import edit_json
from rollbench.api import evaluate
from rollbench.cli.main import app
from rollbench.envs.libero.setup import libero_dir as libero_installed

pytestmark = pytest.mark.timeout(60)

DEEP = "[" * 200_000 + "]" * 200_000  # deeper than CPython's json recursion limit: RecursionError when parsed
NOT_UTF8 = b'{"env": "\xff\xfe"}'
STDIO_HTTP_ONLY = (
    "--token, --allow-host, --request-timeout-s, --max-connections, --max-sessions and --session-idle-s apply to "
    "--transport http only"
)
LONG = "n" * 300  # a file name longer than 255 bytes (NAME_MAX on Linux)
RUN = ["--env", "scripted/reach", "--policy", "zero", "--episodes", "3", "--max-steps", "3", "--seed", "2"]

POLICY_MODULES = {  # planted in a directory on sys.path (outside the work directory)
    "rbt_boom.py": "raise RuntimeError('boom at import')\n",
    "rbt_exit.py": "raise SystemExit(3)\n",
    "rbt_factories.py": """
from rollbench.policies.basic import make_zero

def raising(name, options):
    raise RuntimeError('factory failed')

def exiting(name, options):
    raise SystemExit(0)

def returns_none(name, options):
    return None

def returns_object(name, options):
    return object()

class _BadClose:
    def __init__(self, inner):
        self.inner, self.info = inner, inner.info
    def reset(self, task, seed):
        self.inner.reset(task, seed)
    def act(self, observation, instruction):
        return self.inner.act(observation, instruction)
    def close(self):
        raise RuntimeError('close failed')

def bad_close(name, options):
    return _BadClose(make_zero('zero', {}))

not_callable = 3


class _StrRaises(Exception):
    def __str__(self):
        raise RuntimeError('no str')


class _StrNotText(Exception):
    def __str__(self):
        return 7


class _FaultRaises(Exception):
    @property
    def fault(self):
        raise RuntimeError('no fault')


class _BaseStrRaises(BaseException):
    def __str__(self):
        raise ValueError('no str')


class _Raising:
    def __init__(self, inner, exc):
        self.inner, self.info, self.exc = inner, inner.info, exc
    def reset(self, task, seed):
        self.inner.reset(task, seed)
    def act(self, observation, instruction):
        raise self.exc()
    def close(self):
        pass


def str_raises(name, options):
    kinds = {'str': _StrRaises, 'text': _StrNotText, 'fault': _FaultRaises, 'base': _BaseStrRaises}
    return _Raising(make_zero('zero', {}), kinds[options.get('kind', 'str')])
""",
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("recorded") / "run"
    evaluate(out=out, env="scripted/reach", policy="zero", episodes=3, max_steps=3, seed=2)
    return out


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("modules")
    for name, text in POLICY_MODULES.items():
        (d / name).write_text(text)
    return d


def listing(root: Path) -> dict[str, str]:
    """Every entry below ``root``: its type, and for regular files a hash of the bytes (never opens a FIFO)."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            mode = p.lstat().st_mode
            kind = (
                "dir" if stat.S_ISDIR(mode) else "link" if stat.S_ISLNK(mode) else "fifo" if stat.S_ISFIFO(mode) else ""
            )
            out[str(p.relative_to(root))] = kind or hashlib.sha256(p.read_bytes()).hexdigest()
    return out


# ---- damage: each writes something into the work directory W (W/run is a copy of the recorded run) -------------
def nothing(w: Path) -> None:
    pass


def write(rel: str, data: str | bytes) -> Callable[[Path], None]:
    def damage(w: Path) -> None:
        p = w / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)

    return damage


def fifo(rel: str) -> Callable[[Path], None]:
    def damage(w: Path) -> None:
        p = w / rel
        if p.exists():
            p.unlink()
        os.mkfifo(p)

    return damage


def mkdir(rel: str) -> Callable[[Path], None]:
    def damage(w: Path) -> None:
        p = w / rel
        if p.is_file():
            p.unlink()
        p.mkdir(parents=True, exist_ok=True)

    return damage


def symlink(rel: str, target: str) -> Callable[[Path], None]:
    def damage(w: Path) -> None:
        (w / rel).symlink_to(target)

    return damage


def edit_log(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def damage(w: Path) -> None:
        log = json.loads((w / "run/run.json").read_text())
        change(log)
        (w / "run/run.json").write_text(json.dumps(log))

    return damage


def edit_info(**fields: object) -> Callable[[Path], None]:
    def damage(w: Path) -> None:
        info = json.loads((w / "run/meta/info.json").read_text())
        info.update(fields)
        (w / "run/meta/info.json").write_text(json.dumps(info))

    return damage


def edit_feature(name: str, **fields: object) -> Callable[[Path], None]:
    def damage(w: Path) -> None:
        info = json.loads((w / "run/meta/info.json").read_text())
        info["features"][name].update(fields)
        (w / "run/meta/info.json").write_text(json.dumps(info))

    return damage


def copied(src: str, dst: str) -> Callable[[Path], None]:
    def damage(w: Path) -> None:
        shutil.copyfile(w / src, w / dst)

    return damage


def retyped(rel: str, column: str, values: pa.Array) -> Callable[[Path], None]:
    """The parquet file ``rel`` rewritten with ``column`` replaced by ``values`` (another type)."""

    def damage(w: Path) -> None:
        t = pq.read_table(w / rel)
        t = t.set_column(t.column_names.index(column), column, values)
        pq.write_table(t, w / rel)

    return damage


def fake_python(w: Path) -> None:
    """An "interpreter" that fails the way one without lerobot does: a traceback ending in ModuleNotFoundError."""
    p = w / "py"
    p.write_text(
        "#!/bin/sh\necho 'Traceback (most recent call last):'\necho \"ModuleNotFoundError: No module named 'lerobot'\"\nexit 1\n"
    )
    p.chmod(0o755)


def foreign_parquet(w: Path) -> None:
    pq.write_table(pa.table({"x": ["not an episode"]}), w / "run/meta/episodes/chunk-000/file-002.parquet")


def perturbed(block: object) -> Callable[[Path], None]:
    """run.json with episode 1 planned as a perturbed instance whose record is ``block``."""
    return edit_log(lambda log: log["plan"]["episodes"][1].update(perturbation=block))


SPEC = json.dumps({"env": "scripted/reach", "policy": "zero", "episodes": 1})
LABELS = json.dumps({"version": 1, "rubric": "outcome-v1", "labels": {}})
T = tuple[str, Callable[[Path], None], list[str], str]  # id, damage, args (W/ = the work directory), words


def _deep_cases(what: str, rel: str, args: list[str], words: str, directory: bool = True) -> list[T]:
    """The same file damaged five ways (four without ``directory``), for one option or run file."""
    return [
        (f"{what}-deep", write(rel, DEEP), args, "nested too deeply"),
        (f"{what}-not-utf8", write(rel, NOT_UTF8), args, "is not UTF-8"),
        (f"{what}-fifo", fifo(rel), args, "is a FIFO, not a regular file"),
        *([(f"{what}-directory", mkdir(rel), args, "is a directory, not a regular file")] if directory else []),
        (f"{what}-not-json", write(rel, '{"a": '), args, words),
    ]


SEQ = ["--env", "scripted/reach", "--delta", "0.2"]
CASES: list[T] = [
    *_deep_cases("spec", "spec.json", ["eval", "--spec", "W/spec.json"], "--spec"),
    ("spec-missing", nothing, ["eval", "--spec", "W/nope.json"], "--spec"),
    ("spec-no-policy", write("spec.json", '{"env": "scripted/reach"}'), ["eval", "--spec", "W/spec.json"], "--spec W/spec.json names no policy: add it to the file or give --policy"),
    ("spec-only-episodes", write("spec.json", '{"episodes": 2}'), ["eval", "--spec", "W/spec.json"], "--spec W/spec.json names no env and no policy: add them to the file or give --env and --policy"),
    ("spec-list", write("spec.json", "[1]"), ["eval", "--spec", "W/spec.json"], "expected a JSON object"),
    ("spec-wrong-type", write("spec.json", SPEC.replace("1}", '"many"}')), ["eval", "--spec", "W/spec.json"], "episodes"),
    ("spec-unknown-field", write("spec.json", SPEC[:-1] + ', "x": 1}'), ["eval", "--spec", "W/spec.json"], "x: Extra inputs"),
    ("spec-nan-noise", write("spec.json", SPEC[:-1] + ', "action_noise": NaN}'), ["eval", "--spec", "W/spec.json"], "action_noise"),
    *_deep_cases("policy-options-file", "o.json", ["eval", *RUN, "--policy-options", "W/o.json", "--out", "W/t"], "--policy-options"),
    ("policy-options-list", write("o.json", "[1]"), ["eval", *RUN, "--policy-options", "W/o.json"], "must be a JSON object"),
    ("policy-options-inline", nothing, ["eval", *RUN, "--policy-options", '{"a": '], "--policy-options is not readable JSON"),
    ("policy-options-inline-deep", nothing, ["eval", *RUN, "--policy-options", '{"a": ' + DEEP[:20000] + "}"], "nested too deeply"),
    ("policy-options-nan", nothing, ["eval", *RUN, "--policy-options", '{"timeout_s": NaN}'], "NaN is not a JSON number"),
    ("policy-options-inf", nothing, ["eval", *RUN, "--policy-options", '{"a": [-Infinity]}'], "-Infinity is not a JSON number"),
    ("policy-options-missing", nothing, ["eval", *RUN, "--policy-options", "W/nope.json"], "neither a JSON object nor"),
    *_deep_cases("instructions", "i.json", ["eval", *RUN, "--instructions", "W/i.json", "--out", "W/t"], "--instructions"),
    ("instructions-empty", write("i.txt", "\n# only a comment\n"), ["eval", *RUN, "--instructions", "W/i.txt"], "no instruction"),
    ("instructions-shape", write("i.json", '{"a": 1}'), ["eval", *RUN, "--instructions", "W/i.json"], "instructions"),
    ("instructions-missing", nothing, ["eval", *RUN, "--instructions", "W/nope.txt"], "--instructions"),
    # policies that cannot be loaded or built
    ("policy-empty-module", nothing, ["eval", *RUN[:2], "--policy", ":make", "--out", "W/t"], "':make'"),
    ("policy-path-module", nothing, ["eval", *RUN[:2], "--policy", "../../etc/passwd:x", "--out", "W/t"], "../../etc/passwd"),
    ("policy-import-raises", nothing, ["eval", *RUN[:2], "--policy", "rbt_boom:f", "--out", "W/t"], "boom at import"),
    ("policy-import-exits", nothing, ["eval", *RUN[:2], "--policy", "rbt_exit:f", "--out", "W/t"], "rbt_exit"),
    ("policy-no-module", nothing, ["eval", *RUN[:2], "--policy", "rbt_nosuch:f", "--out", "W/t"], "rbt_nosuch"),
    ("policy-no-attr", nothing, ["eval", *RUN[:2], "--policy", "rbt_factories:nope", "--out", "W/t"], "no callable 'nope'"),
    ("policy-not-callable", nothing, ["eval", *RUN[:2], "--policy", "rbt_factories:not_callable", "--out", "W/t"], "not_callable"),
    ("policy-factory-raises", nothing, ["eval", *RUN[:2], "--policy", "rbt_factories:raising", "--out", "W/t"], "factory failed"),
    ("policy-factory-exits", nothing, ["eval", *RUN[:2], "--policy", "rbt_factories:exiting", "--out", "W/t"], "SystemExit"),
    ("policy-factory-none", nothing, ["eval", *RUN[:2], "--policy", "rbt_factories:returns_none", "--out", "W/t"], "returned None"),
    ("policy-factory-object", nothing, ["eval", *RUN[:2], "--policy", "rbt_factories:returns_object", "--out", "W/t"], "not a policy"),
    ("policy-wrong-arity", nothing, ["eval", *RUN[:2], "--policy", "os:getcwd", "--out", "W/t"], "os:getcwd"),
    ("policy-unknown", nothing, ["eval", *RUN[:2], "--policy", "nosuch-policy", "--out", "W/t"], "unknown policy 'nosuch-policy'"),
    # output paths
    ("out-under-a-file", write("f", "notes"), ["eval", *RUN, "--out", "W/f/run"], "W/f"),
    ("out-name-too-long", nothing, ["eval", *RUN, "--out", f"W/{LONG}"], "too long"),
    ("out-in-proc", nothing, ["eval", *RUN, "--out", "/proc/rollbench-x"], "/proc/rollbench-x"),
    ("out-is-a-fifo", fifo("t"), ["eval", *RUN, "--out", "W/t"], "is not a directory"),
    # options out of range or unknown
    ("env-unknown", nothing, ["eval", *RUN[2:], "--env", "nosuch/task"], "unknown env family 'nosuch'"),
    ("env-empty", nothing, ["eval", *RUN[2:], "--env", " , "], "--env is empty"),
    ("env-suite-position", nothing, ["eval", *RUN[2:], "--env", "scripted/all/1"], "'scripted/all/1' is not a task name: scripted/all is a suite and its task 1 is scripted/reach-final"),
    ("env-suite-position-past-end", nothing, ["eval", *RUN[2:], "--env", "scripted/all/7"], "scripted/all is a suite and it has 2 tasks"),
    ("image-size-text", nothing, ["eval", *RUN, "--image-size", "big"], "'big' is not HEIGHTxWIDTH"),
    ("image-size-small", nothing, ["eval", *RUN, "--image-size", "15"], "image size"),
    ("camera-unknown", nothing, ["eval", *RUN, "--cameras", "nosuchcam", "--video", "--out", "W/t"], "nosuchcam"),
    ("success-rule", nothing, ["eval", *RUN, "--success-rule", "sometimes"], "success_rule"),
    ("executor", nothing, ["eval", *RUN, "--executor", "slurm"], "unknown executor 'slurm'"),
    ("retry-errors", nothing, ["eval", *RUN, "--retry-errors", "some"], "some"),
    ("perturb", nothing, ["eval", *RUN, "--instruction-perturb", "shout"], "unknown perturbation 'shout'"),
    ("batch-size", nothing, ["eval", *RUN, "--batch-size", "100000"], "--batch-size must be between 1 and 256"),
    # a mistyped option: the closest real one of that command (issue 30, h-cli 4)
    ("option-typo-episode", nothing, ["eval", *RUN, "--episode", "3"], "no such option --episode. Did you mean --episodes? All options: rollbench eval --help"),
    ("option-typo-json", nothing, ["grade", "W/run", "--jsn"], "no such option --jsn. Did you mean --json? All options: rollbench grade --help"),
    ("latency-not-a-number", nothing, ["eval", *RUN, "--latency", "fixed:abc"], "K: control steps), got 'fixed:abc'"),
    ("summarize-by-typo", nothing, ["summarize", "W/run", "--by", "task,modle"], "--by: unknown key 'modle'. Did you mean model? Valid keys: task, model, policy, host, robot, run, variant, instruction"),
    ("episodes-text", nothing, ["eval", *RUN, "--episodes", "ten"], "--episodes 'ten': must be a whole number"),
    ("episodes-zero", nothing, ["eval", *RUN, "--episodes", "0"], "--episodes '0': must be at least 1"),
    ("instruction-too-long", nothing, ["eval", *RUN, "--instruction", "x" * 5000, "--out", "W/t"], "instruction: String should have at most 4096 characters (got a string of 5000 characters)"),
    ("replan-every-beyond-any-horizon", nothing, ["eval", *RUN, "--replan-every", "10000000000000000000000"], "replan_every: Input should be less than or equal to 1000000"),
    ("max-steps-negative", nothing, ["eval", *RUN, "--max-steps", "-1"], "--max-steps '-1': must be at least 1"),
    ("policy-timeout-nan", nothing, ["eval", *RUN, "--policy-timeout", "nan"], "--policy-timeout 'nan': must be at least 0.001"),
    ("action-noise-nan", nothing, ["eval", *RUN, "--action-noise", "nan"], "--action-noise 'nan': must be at least 0.0"),
    ("action-noise-inf", nothing, ["eval", *RUN, "--action-noise", "inf"], "action_noise"),
    ("episodes-huge", nothing, ["eval", *RUN, "--episodes", "1000000000"], "episodes"),
    ("instruction-blank", nothing, ["eval", *RUN, "--instruction", "  "], "instruction"),
    ("wire-capture", nothing, ["eval", *RUN, "--wire-capture"], "--wire-capture applies to agent"),
    ("host-label", nothing, ["eval", *RUN, "--host-label", "a/b", "--out", "W/t"], "a/b"),
    ("ray-address", nothing, ["eval", *RUN, "--ray-address", "x:1"], "--ray-address only applies"),
    # Ray's limits and an unreachable cluster: refused before the run directory exists (issue 30, h-cli 1)
    ("ray-cpus-huge", nothing, ["eval", *RUN, "--executor", "ray", "--ray-cpus", "1e308", "--out", "W/t"], "--ray-cpus must be a number from 0.0001 to 1e+14 (Ray's limits), got 1e+308"),
    ("ray-cpus-inf", nothing, ["eval", *RUN, "--executor", "ray", "--ray-cpus", "inf", "--out", "W/t"], "--ray-cpus must be a number from 0.0001 to 1e+14 (Ray's limits), got inf"),
    ("ray-cpus-below-rays-resolution", nothing, ["eval", *RUN, "--executor", "ray", "--ray-cpus", "1e-9", "--out", "W/t"], "got 1e-09"),
    ("ray-gpus-huge", nothing, ["eval", *RUN, "--executor", "ray", "--ray-gpus", "1e20", "--out", "W/t"], "--ray-gpus must be 0 or a number from 0.0001 to 1e+14 (Ray's limits), got 1e+20"),
    ("ray-resources-huge", nothing, ["eval", *RUN, "--executor", "ray", "--ray-resources", '{"libero": 1e308}', "--out", "W/t"], "--ray-resources: libero must be 0 or a number from 0.0001 to 1e+14 (Ray's limits), got 1e+308"),
    ("ray-resources-bool", nothing, ["eval", *RUN, "--executor", "ray", "--ray-resources", '{"libero": true}', "--out", "W/t"], "--ray-resources: libero must be 0 or a number from 0.0001 to 1e+14 (Ray's limits), got True"),
    ("ray-resources-tiny", nothing, ["eval", *RUN, "--executor", "ray", "--ray-resources", '{"libero": 1e-7}', "--out", "W/t"], "got 1e-07"),
    ("ray-total-over-limit", nothing, ["eval", *RUN, "--executor", "ray", "--workers", "3", "--ray-cpus", "5e13", "--out", "W/t"], "--ray-cpus 5e+13 × --workers 3 is more than Ray can hold (1e+14)"),
    ("ray-address-refused", nothing, ["eval", *RUN, "--executor", "ray", "--ray-address", "127.0.0.1:1", "--out", "W/t"], "cannot reach Ray at 127.0.0.1:1: Connection refused"),
    ("ray-address-unknown-host", nothing, ["eval", *RUN, "--executor", "ray", "--ray-address", "nosuch.invalid:6379", "--out", "W/t"], "cannot reach Ray at nosuch.invalid:6379"),
    ("ray-address-bad-port", nothing, ["eval", *RUN, "--executor", "ray", "--ray-address", "127.0.0.1:99999", "--out", "W/t"], "--ray-address '127.0.0.1:99999' is not HOST:PORT"),
    ("ray-resume-unreachable", nothing, ["eval", "--resume", "W/run", "--executor", "ray", "--ray-address", "127.0.0.1:1"], "cannot reach Ray at 127.0.0.1:1"),
    ("resume-with-flags", nothing, ["eval", "--resume", "W/run", "--episodes", "5"], "drop --episodes"),
    ("resume-not-a-run", mkdir("empty"), ["eval", "--resume", "W/empty"], "empty is not a rollbench run directory (no run.json)"),
    # damaged run state on resume
    *_deep_cases("resume-run-json", "run/run.json", ["eval", "--resume", "W/run"], "run.json is not a rollbench run log"),
    ("resume-executions", edit_log(lambda log: log.update(executions={"a": 1})), ["eval", "--resume", "W/run"], "'executions'"),
    ("resume-tasks", edit_log(lambda log: log["plan"].update(tasks=[{"name": 3}])), ["eval", "--resume", "W/run"], "list of tasks"),
    ("resume-bad-spec", edit_log(lambda log: log["spec"].update(episodes=-1)), ["eval", "--resume", "W/run"], "episodes"),
    ("resume-spec-env", edit_log(lambda log: log["spec"].update(env="nosuch/x")), ["eval", "--resume", "W/run"], "nosuch"),
    ("resume-lock-dir", mkdir("run/run.lock"), ["eval", "--resume", "W/run"], "run.lock"),
    ("resume-staging-file", write("run/.staging", "x"), ["eval", "--resume", "W/run"], ".staging"),
    ("resume-foreign-parquet", foreign_parquet, ["eval", "--resume", "W/run"], "file-002.parquet"),
    # grade and runs
    *_deep_cases("grade-run-json", "run/run.json", ["grade", "W/run"], "run.json is not a rollbench run log"),
    ("grade-executions", edit_log(lambda log: log.update(executions=7)), ["grade", "W/run"], "'executions'"),
    ("grade-episodes-requested", edit_log(lambda log: log["plan"].update(episodes_requested=50)), ["grade", "W/run"], "run.json is not a rollbench run log: its plan.episodes_requested is 50 but plan.episodes lists 3"),
    ("grade-a-file", write("f", "x"), ["grade", "W/f"], "f is not a directory, so not a rollbench run directory"),
    ("grade-missing", nothing, ["grade", "W/nope"], "nope does not exist"),
    ("runs-missing", nothing, ["runs", "W/nope"], "is not a directory"),
    ("runs-file", write("f", "x"), ["runs", "W/f"], "is not a directory"),
    ("envs-unknown", nothing, ["envs", "nosuch"], "unknown env family 'nosuch'"),
    # summarize, compare, report
    *_deep_cases("labels", "labels.json", ["summarize", "W/run", "--labels", "W/labels.json"], "label file"),
    ("labels-shape", write("labels.json", "[]"), ["summarize", "W/run", "--labels", "W/labels.json"], "not a label sidecar"),
    *_deep_cases("rubric", "r.json", ["summarize", "W/run", "--labels", "W/l.json", "--rubric", "W/r.json"], "rubric file"),
    ("rubric-yaml-deep", write("r.yaml", "[" * 1000 + "]" * 1000), ["summarize", "W/run", "--rubric", "W/r.yaml"], "nested too deeply"),
    ("rubric-unknown", nothing, ["summarize", "W/run", "--rubric", "nosuch-v9"], "nosuch-v9"),
    ("rubric-yaml-impossible-date", write("r.yaml", "name: r\nversion: 2001-02-30\nlabels: [a]\n"), ["summarize", "W/run", "--rubric", "W/r.yaml"], "holds a value YAML cannot read: day is out of range for month"),
    ("rubric-yaml-empty-int-tag", write("r.yaml", 'name: r\nversion: !!int ""\nlabels: [a]\n'), ["summarize", "W/run", "--rubric", "W/r.yaml"], "holds a value YAML cannot read: "),
    ("rubric-yaml-bool-tag", write("r.yaml", 'name: r\nversion: 1\nlabels: [!!bool "maybe"]\n'), ["summarize", "W/run", "--rubric", "W/r.yaml"], "holds a value YAML cannot read: "),
    ("rubric-yaml-timestamp-tag", write("r.yaml", 'name: r\nversion: !!timestamp "x"\nlabels: [a]\n'), ["summarize", "W/run", "--rubric", "W/r.yaml"], "holds a value YAML cannot read: "),
    ("rubric-yaml-bad-int-tag", write("r.yaml", 'name: r\nversion: !!int "zz"\nlabels: [a]\n'), ["report", "W/run", "--rubric", "W/r.yaml", "--out", "W/rep.html"], "holds a value YAML cannot read: invalid literal for int()"),
    ("summarize-by", nothing, ["summarize", "W/run", "--by", "colour"], "colour"),
    ("summarize-json-csv", nothing, ["summarize", "W/run", "--json", "--csv"], "--json or --csv"),
    ("summarize-missing", nothing, ["summarize", "W/nope"], "nope"),
    *_deep_cases("export", "e.json", ["summarize", "W/e.json"], "dashboard export", directory=False),
    ("export-shape", write("e.json", '{"runs": 3}'), ["summarize", "W/e.json"], "'runs' list"),
    ("export-episodes", write("e.json", '{"runs": [{"host": "h", "robot": "r", "name": "n", "episodes": [{"episode_index": 0, "task": ["t"]}]}]}'), ["summarize", "W/e.json"], "task"),
    ("summarize-run-json", write("run/run.json", DEEP), ["summarize", "W/run"], "nested too deeply"),
    ("compare-resamples", nothing, ["compare", "W/run", "W/run", "--resamples", "1000000000"], "--resamples"),
    ("compare-one-run", nothing, ["compare", "W/run"], "two or more run directories"),
    ("compare-run-json", fifo("run/run.json"), ["compare", "W/run", "W/run"], "holds no rollbench run"),
    ("power-huge", nothing, ["compare", "--power", "--p-a", "0.5", "--p-b", "0.5000001"], "more than"),
    ("power-p-range", nothing, ["compare", "--power", "--p-a", "2", "--p-b", "0.5"], "p_a"),
    ("power-p-nan", nothing, ["compare", "--power", "--p-a", "nan", "--p-b", "0.5"], "nan"),
    ("power-alpha-nan", nothing, ["compare", "--power", "--p-a", "0.2", "--p-b", "0.5", "--alpha", "nan"], "alpha"),
    ("power-alpha-denormal", nothing, ["compare", "--power", "--p-a", "0.2", "--p-b", "0.6", "--alpha", "5e-324"], "unbounded"),
    ("power-target-tiny-gap", nothing, ["compare", "--power", "--p-a", "0.2", "--p-b", "0.2000000001", "--alpha", "1e-300"], "more than"),
    # issue 30, item 6: a foreign or retyped parquet file where an episode's file goes: refused naming the file
    ("summarize-foreign-episode-rows", copied("run/meta/tasks.parquet", "run/meta/episodes/chunk-000/file-003.parquet"), ["summarize", "W/run"], "file-003.parquet"),
    ("report-foreign-episode-rows", copied("run/meta/tasks.parquet", "run/meta/episodes/chunk-000/file-003.parquet"), ["report", "W/run", "--out", "W/r.html"], "file-003.parquet"),
    ("summarize-foreign-step-file", copied("run/meta/tasks.parquet", "run/data/chunk-000/file-001.parquet"), ["summarize", "W/run"], "file-001.parquet"),
    ("summarize-string-episode-index", retyped("run/meta/episodes/chunk-000/file-001.parquet", "episode_index", pa.array(["1"])), ["summarize", "W/run"], "file-001.parquet"),
    ("summarize-int-success", retyped("run/meta/episodes/chunk-000/file-002.parquet", "rollbench/success", pa.array([1], pa.int64())), ["summarize", "W/run"], "file-002.parquet"),
    ("summarize-null-length", retyped("run/meta/episodes/chunk-000/file-000.parquet", "length", pa.array([None], pa.int64())), ["summarize", "W/run"], "file-000.parquet"),
    ("summarize-string-frames", retyped("run/data/chunk-000/file-000.parquet", "frame_index", pa.array([str(i) for i in range(3)])), ["summarize", "W/run"], "file-000.parquet"),
    # issue 30, item 9: meta/info.json fields LeRobot readers rely on
    ("summarize-fps-zero", edit_info(fps=0), ["summarize", "W/run"], "fps is 0"),
    ("report-fps-negative", edit_info(fps=-10), ["report", "W/run", "--out", "W/r.html"], "fps is -10"),
    ("summarize-fps-text", edit_info(fps="10"), ["summarize", "W/run"], "fps is '10'"),
    ("summarize-fps-bool", edit_info(fps=True), ["summarize", "W/run"], "fps is True"),
    ("summarize-fps-missing", edit_info(fps=None), ["summarize", "W/run"], "fps is None"),
    ("summarize-total-frames-text", edit_info(total_frames="9"), ["summarize", "W/run"], "total_frames"),
    ("summarize-chunks-size-zero", edit_info(chunks_size=0), ["summarize", "W/run"], "chunks_size"),
    ("summarize-shape-zero", edit_feature("observation.state", shape=[0]), ["summarize", "W/run"], "observation.state"),
    ("summarize-dtype-missing", edit_feature("action", dtype=None), ["summarize", "W/run"], "'action' has no dtype"),
    # issue 30, item 10: a run inside another run
    ("out-inside-a-run", nothing, ["eval", *RUN, "--out", "W/run/meta/sub"], "lies inside the run directory"),
    ("out-inside-a-run-deep", nothing, ["eval", *RUN, "--out", "W/run/a/b/c"], "lies inside the run directory"),
    ("out-a-run-subdirectory", nothing, ["eval", *RUN, "--out", "W/run/data"], "lies inside the run directory"),
    # issue 30, item 12: action noise beyond any action range
    ("action-noise-huge", nothing, ["eval", *RUN, "--action-noise", "1e308"], "action_noise"),
    ("action-noise-over-range", nothing, ["eval", *RUN, "--action-noise", "21", "--out", "W/t"], "over 10 times the action range"),
    # issue 30, item 14: a run.json naming code or a path is not loaded on resume unless named again
    ("resume-names-a-module", edit_log(lambda log: log["spec"].update(policy="rbt_boom:f")), ["eval", "--resume", "W/run"], "--trust-run"),
    ("resume-names-a-gym-module", edit_log(lambda log: log["spec"].update(env="gym:rbt_boom:X-v0")), ["eval", "--resume", "W/run"], "--trust-run"),
    ("resume-names-an-interpreter", edit_log(lambda log: log["spec"].update(policy_options={"python": "/bin/sh"})), ["eval", "--resume", "W/run"], "python=/bin/sh"),
    ("resume-names-an-api-base-url", edit_log(lambda log: log["spec"].update(policy="agent:openai/gpt-4o", policy_options={"base_url": "http://127.0.0.1:9/v1"})), ["eval", "--resume", "W/run"], "base_url=http://127.0.0.1:9/v1"),
    ("resume-names-a-checkpoint", edit_log(lambda log: log["spec"].update(policy="lerobot:/etc")), ["eval", "--resume", "W/run"], "lerobot:/etc"),
    ("resume-another-policy", nothing, ["eval", "--resume", "W/run", "--policy", "random"], "not 'random'"),
    # issue 30, item 20: the LeRobot host's failure in one line, with the option form the CLI takes
    ("lerobot-python-without-lerobot", fake_python, ["eval", *RUN[:2], "--policy", "lerobot:W/ckpt", "--policy-options", '{"python": "W/py"}', "--out", "W/t"], "has no module 'lerobot'"),
    # issue 30, item 23: wss:// is a policy URL like https://
    ("policy-wss", nothing, ["eval", *RUN[:2], "--policy", "wss://127.0.0.1:1", "--out", "W/t"], "cannot reach the policy server wss://127.0.0.1:1"),
    # issue 30, item 13: an MCP server names its LeRobot checkpoints itself
    ("mcp-lerobot-policy", nothing, ["mcp", "--root", "W/mcp", "--lerobot-policy", "/etc"], "--lerobot-policy '/etc'"),
    ("power-with-runs", nothing, ["compare", "W/run", "--power", "--p-a", "0.2", "--p-b", "0.5"], "not runs"),
    ("report-out-dir", mkdir("rep"), ["report", "W/run", "--out", "W/rep"], "is a directory"),
    ("report-out-under-file", write("f", "x"), ["report", "W/run", "--out", "W/f/r.html"], "W/f"),
    ("report-out-too-long", nothing, ["report", "W/run", "--out", f"W/{LONG}.html"], "too long"),
    ("report-plots-under-file", write("f", "x"), ["report", "W/run", "--out", "W/r.html", "--plots", "W/f/p"], "W/f"),
    ("report-url", nothing, ["report", "W/run", "--out", "W/r.html", "--dashboard-url", "ftp://x"], "not an http(s) URL"),
    ("report-labels", write("l.json", DEEP), ["report", "W/run", "--out", "W/r.html", "--labels", "W/l.json"], "nested too deeply"),
    # reproduce
    *_deep_cases("reference", "ref.json", ["reproduce", "W/run", "--reference", "W/ref.json"], "reference file"),
    ("reference-unknown", nothing, ["reproduce", "W/run", "--reference", "nosuch-ref"], "unknown reference 'nosuch-ref'"),
    ("reference-shape", write("ref.json", "[1]"), ["reproduce", "W/run", "--reference", "W/ref.json"], "must be a JSON object"),
    ("reproduce-gap", nothing, ["reproduce", "W/run", "--reference", "pi05-openpi", "--gap", "nan"], "--gap"),
    ("reproduce-nothing", nothing, ["reproduce"], "--reference NAME_OR_FILE"),
    # release
    ("release-date-text", nothing, ["release", "W/run", "--out", "W/rel", "--date", "next tuesday"], "--date 'next tuesday'"),
    ("release-date-month", nothing, ["release", "W/run", "--out", "W/rel", "--date", "2026-13-01"], "--date '2026-13-01'"),
    *_deep_cases("rules", "rules.json", ["release", "W/run", "--out", "W/rel", "--rules", "W/rules.json"], "--rules"),
    ("rules-shape", write("rules.json", "[1]"), ["release", "W/run", "--out", "W/rel", "--rules", "W/rules.json"], "--rules"),
    ("release-out-inside", nothing, ["release", "W/run", "--out", "W/run/rel"], "inside"),
    ("release-run-json", write("run/run.json", DEEP), ["release", "W/run", "--out", "W/rel"], "nested too deeply"),
    ("release-labels-fifo", fifo("l.json"), ["release", "W/run", "--out", "W/rel", "--labels", "W/l.json"], "l.json"),
    # serve-policy (each refused before it listens)
    ("serve-mb-nan", nothing, ["serve-policy", "--policy", "zero", "--max-request-mb", "nan"], "--max-request-mb"),
    ("serve-mb-inf", nothing, ["serve-policy", "--policy", "zero", "--max-request-mb", "inf"], "--max-request-mb"),
    ("serve-mb-negative", nothing, ["serve-policy", "--policy", "zero", "--max-request-mb", "-1"], "--max-request-mb"),
    ("serve-sessions", nothing, ["serve-policy", "--policy", "zero", "--max-sessions", "100000"], "--max-sessions"),
    ("serve-idle-nan", nothing, ["serve-policy", "--policy", "zero", "--session-idle-s", "nan"], "--session-idle-s"),
    ("serve-timeout-inf", nothing, ["serve-policy", "--policy", "zero", "--request-timeout-s", "inf"], "--request-timeout-s"),
    ("serve-window-nan", nothing, ["serve-policy", "--policy", "zero", "--max-batch", "2", "--batch-window-ms", "nan"], "--batch-window-ms"),
    ("serve-max-batch", nothing, ["serve-policy", "--policy", "zero", "--max-batch", "0"], "--max-batch"),
    ("serve-protocol", nothing, ["serve-policy", "--policy", "zero", "--protocol", "grpc"], "unknown protocol 'grpc'"),
    ("serve-path", nothing, ["serve-policy", "--policy", "zero", "--protocol", "http", "--path", "act"], "--path"),
    ("serve-inject", nothing, ["serve-policy", "--policy", "zero", "--inject", "melt"], "unknown --inject 'melt'"),
    ("serve-fault-old-name", nothing, ["serve-policy", "--policy", "zero", "--fault", "melt"], "unknown --inject 'melt'"),
    ("serve-fault-and-inject", nothing, ["serve-policy", "--policy", "zero", "--inject", "error", "--fault", "slow:1"], "give --inject only"),
    ("serve-policy-import", nothing, ["serve-policy", "--policy", "rbt_boom:f"], "boom at import"),
    ("serve-policy-none", nothing, ["serve-policy", "--policy", "rbt_factories:returns_none"], "returned None"),
    ("serve-options-deep", write("o.json", DEEP), ["serve-policy", "--policy", "zero", "--policy-options", "W/o.json"], "nested too deeply"),
    ("serve-obs-map-fifo", fifo("o.json"), ["serve-policy", "--policy", "zero", "--obs-map", "W/o.json"], "--obs-map W/o.json is a FIFO"),
    ("serve-obs-map-not-json", write("o.json", '{"x":'), ["serve-policy", "--policy", "zero", "--obs-map", "W/o.json"], "--obs-map W/o.json is not readable JSON"),
    ("serve-options-missing-beside-obs-map", nothing, ["serve-policy", "--policy", "zero", "--obs-map", "{}", "--policy-options", "W/none"], "--policy-options"),
    ("serve-env", nothing, ["serve-policy", "--policy", "zero", "--env", "nosuch/x"], "nosuch"),
    # dashboard, mcp, optimize-instruction (each refused before it serves or runs)
    ("dashboard-root", nothing, ["dashboard", "--labels", "W/l.json", "--root", "W/nope"], "--root"),
    ("dashboard-labels-in-run", nothing, ["dashboard", "--labels", "W/run/l.json", "--root", "W/run"], "lies inside the run directory"),
    ("dashboard-rubric", write("r.json", DEEP), ["dashboard", "--labels", "W/l.json", "--root", "W/run", "--rubric", "W/r.json"], "nested too deeply"),
    ("dashboard-peer", nothing, ["dashboard", "--labels", "W/l.json", "--peer", "ftp://x"], "--peer"),
    ("dashboard-host", nothing, ["dashboard", "--labels", "W/l.json", "--root", "W/run", "--host", "0.0.0.0"], "token"),
    ("dashboard-annotator", nothing, ["dashboard", "--labels", "W/l.json", "--root", "W/run", "--annotator", "a/b"], "--annotator"),
    ("mcp-transport", nothing, ["mcp", "--transport", "pigeon", "--root", "W/mcp"], "pigeon"),
    ("mcp-stdio-token", nothing, ["mcp", "--token", "t0k3n-abcdefgh", "--root", "W/mcp"], STDIO_HTTP_ONLY),
    ("mcp-stdio-max-connections", nothing, ["mcp", "--max-connections", "5", "--root", "W/mcp"], STDIO_HTTP_ONLY),
    ("mcp-stdio-request-timeout", nothing, ["mcp", "--request-timeout-s", "3", "--root", "W/mcp"], STDIO_HTTP_ONLY),
    ("mcp-stdio-max-sessions", nothing, ["mcp", "--max-sessions", "4", "--root", "W/mcp"], STDIO_HTTP_ONLY),
    ("mcp-stdio-session-idle", nothing, ["mcp", "--session-idle-s", "5", "--root", "W/mcp"], STDIO_HTTP_ONLY),
    ("mcp-host", nothing, ["mcp", "--transport", "http", "--host", "0.0.0.0", "--root", "W/mcp"], "token"),
    ("optimize-proposer", nothing, ["optimize-instruction", *RUN[:4], "--out", "W/o", "--proposer", "magic"], "magic"),
    ("optimize-options", write("o.json", DEEP), ["optimize-instruction", *RUN[:4], "--out", "W/o", "--policy-options", "W/o.json"], "nested too deeply"),
    ("optimize-alpha", nothing, ["optimize-instruction", *RUN[:4], "--out", "W/o", "--alpha", "nan"], "alpha"),
    ("sequential-policy", nothing, ["sequential", *SEQ, "--policy-a", "nope", "--policy-b", "zero", "--out", "W/s"], "nope"),
    ("sequential-delta", nothing, ["sequential", *SEQ[:2], "--delta", "0.9", "--policy-a", "zero", "--policy-b", "zero", "--out", "W/s"], "delta"),
    ("sequential-out-file", write("f", "x"), ["sequential", *SEQ, "--policy-a", "zero", "--policy-b", "zero", "--out", "W/f"], "--out"),
    ("sequential-ray-unreachable", nothing, ["sequential", *SEQ, "--policy-a", "zero", "--policy-b", "zero", "--out", "W/s", "--executor", "ray", "--ray-address", "127.0.0.1:1"], "cannot reach Ray at 127.0.0.1:1"),
    ("sequential-out-foreign", write("s/x", "x"), ["sequential", *SEQ, "--policy-a", "zero", "--policy-b", "zero", "--out", "W/s"], "holds no sequential.json"),
    ("compare-same-run-twice", nothing, ["compare", "W/run", "W/run"], "W/run is given twice; compare needs two different runs (a run against itself has nothing to test)"),
    ("compare-same-run-two-spellings", mkdir("sub"), ["compare", "W/run", "W/sub/../run"], "W/run and W/sub/../run are the same directory; compare needs two different runs"),
    ("compare-sequential-plain-run", nothing, ["compare", "--sequential", "W/run"], "not an arm of rollbench sequential"),
    ("robustness-unperturbed", nothing, ["robustness", "--env", "scripted/reach", "--policy", "zero", "--out", "W/rb"], "is not perturbed"),
    ("robustness-instruction", nothing, ["robustness", "--env", "scripted/reach", "--policy", "zero", "--instruction", "x"], "--instruction"),
    ("robustness-run-and-flags", nothing, ["robustness", "W/run", "--env", "scripted/reach"], "not both"),
    ("robustness-run-and-run-flags", nothing, ["robustness", "W/run", "--workers", "2"], "not both"),
    ("sequential-ray-flag-local", nothing, ["sequential", *SEQ, "--policy-a", "zero", "--policy-b", "zero", "--out", "W/s", "--ray-cpus", "2"], "only apply to --executor ray"),
    ("robustness-no-env", nothing, ["robustness", "--policy", "zero"], "--env"),
    ("robustness-plain-run", nothing, ["robustness", "W/run"], "no episode of this run is a perturbed instance"),
    ("optimize-margin", nothing, ["optimize-instruction", *RUN[:4], "--out", "W/o", "--margin", "nan"], "margin"),
    # issue 30 (a fresh hostile attempt): a malformed perturbation record or plan index in run.json, on every reader
    ("robustness-perturbation-category-int", perturbed({"category": 5}), ["robustness", "W/run"], "its plan.episodes[1].perturbation.category is '5'"),
    ("robustness-perturbation-no-category", perturbed({"level": 1}), ["robustness", "W/run"], "its plan.episodes[1].perturbation has no category"),
    ("robustness-perturbation-list", perturbed([1, 2]), ["robustness", "W/run"], "its plan.episodes[1].perturbation is '[1, 2]'"),
    ("robustness-perturbation-level-inf", perturbed({"category": "position", "level": float("inf")}), ["robustness", "W/run"], "perturbation.level is inf, not a finite number"),
    ("summarize-perturbation-level-text", perturbed({"category": "position", "level": "high"}), ["summarize", "W/run"], "its plan.episodes[1].perturbation.level is 'high'"),
    ("report-perturbation-control-int", perturbed({"category": "position", "control": 3}), ["report", "W/run", "--out", "W/r.html"], "perturbation.control is '3'"),
    ("grade-perturbation-extra-field", perturbed({"category": "position", "evil": 1}), ["grade", "W/run"], "perturbation.evil is '1': Extra inputs"),
    ("compare-task-perturbation", edit_log(lambda log: log["plan"]["tasks"][0].update(perturbation={"category": []})), ["compare", "W/run", "W/run"], "its plan.tasks[0].perturbation.category"),
    ("grade-plan-index-text", edit_log(lambda log: log["plan"]["episodes"][0].update(episode_index="0")), ["grade", "W/run"], "its plan.episodes[0].episode_index is 0, not a non-negative integer"),
    ("summarize-plan-index-negative", edit_log(lambda log: log["plan"]["episodes"][2].update(episode_index=-2)), ["summarize", "W/run"], "plan.episodes[2].episode_index is -2"),
    ("robustness-plan-index-repeated", edit_log(lambda log: log["plan"]["episodes"][1].update(episode_index=0)), ["robustness", "W/run"], "its plan.episodes repeat an episode_index"),
    ("robustness-damaged-run", copied("run/meta/tasks.parquet", "run/data/chunk-000/file-001.parquet"), ["robustness", "W/run"], "is damaged"),
    ("optimize-state", write("o/optimize.json", DEEP), ["optimize-instruction", *RUN[:4], "--out", "W/o"], "nested too deeply"),
    # hostile round 9 (F11): a state file read through its typed model; not an object, wrong types, missing keys
    ("optimize-state-list", write("o/optimize.json", "[1, 2]"), ["optimize-instruction", *RUN[:4], "--out", "W/o"], "is not an instruction search's optimize.json"),
    ("optimize-state-rounds-int", write("o/optimize.json", '{"rollbench_optimize": 1, "config": {}, "rounds": 5}'), ["optimize-instruction", *RUN[:4], "--out", "W/o"], "is damaged: config_identity: Field required"),
    ("optimize-state-version", write("o/optimize.json", '{"rollbench_optimize": 2, "config": {}}'), ["optimize-instruction", *RUN[:4], "--out", "W/o"], "is damaged: rollbench_optimize: Input should be 1 (got 2)"),
    ("checkpoints-missing-folder", nothing, ["checkpoints", "W/nope", "--env", "scripted/reach", "--out", "W/o"], "W/nope is not a folder of checkpoints"),
    ("checkpoints-incomplete", mkdir("train/checkpoints/000100/pretrained_model"), ["checkpoints", "W/train", "--env", "scripted/reach", "--out", "W/o"], "no complete checkpoint under W/train"),
    ("checkpoints-unknown-family", mkdir("train/checkpoints/000100"), ["checkpoints", "W/train", "--env", "nosuch/x", "--out", "W/o"], "unknown env family 'nosuch'. Valid env families: "),
    # issue 42: a policy URL's fragment (never sent, only recorded) and secrets in its path are refused like userinfo
    ("policy-url-fragment", nothing, ["eval", *RUN[:2], "--policy", "http://127.0.0.1:9/act#tok=fR4gS3c", "--out", "W/t"], "policy http://127.0.0.1:9/act#*** has a fragment"),
    ("policy-url-fragment-access-token", nothing, ["eval", *RUN[:2], "--policy", "ws://127.0.0.1:9#access_token=fR4gS3c", "--out", "W/t"], "ws://127.0.0.1:9#*** has a fragment"),
    ("policy-url-path-token", nothing, ["eval", *RUN[:2], "--policy", "http://127.0.0.1:9/act/token/pAth5Ecr3t", "--out", "W/t"], "http://127.0.0.1:9/act/token/*** carries credentials"),
    ("policy-url-path-pair", nothing, ["eval", *RUN[:2], "--policy", "http://127.0.0.1:9/api_key=pAth5Ecr3t/act", "--out", "W/t"], "http://127.0.0.1:9/api_key=***/act carries credentials"),
    ("policy-url-path-password-segment", nothing, ["eval", *RUN[:2], "--policy", "https://h/Password/Hunter22xyz/act", "--out", "W/t"], "https://h/Password/***/act carries credentials"),
    ("policy-options-url-fragment", nothing, ["eval", *RUN[:2], "--policy", "gpu-standin", "--policy-options", '{"inner": "ws://h:1/#sig=fR4gS3c"}', "--out", "W/t"], "policy_options.inner ws://h:1/#*** has a fragment"),
    ("resume-url-fragment", edit_log(lambda log: log["spec"].update(policy="http://127.0.0.1:9/act#tok=fR4gS3c")), ["eval", "--resume", "W/run"], "#*** has a fragment"),
    # issue 42 (hostile round 6, F4): a price that would make a transcript's cost NaN or infinite, refused before any call
    ("agent-price-inf", nothing, ["eval", *RUN[:2], "--policy", "agent:openai/m", "--policy-options", '{"base_url": "http://127.0.0.1:9/v1", "price_per_mtok": {"input": "inf", "output": 1}}', "--out", "W/t"], "policy option price_per_mtok.input must be a number of USD per million tokens from 0 to 1e+06, got 'inf'"),
    ("agent-price-huge", nothing, ["eval", *RUN[:2], "--policy", "agent:openai/m", "--policy-options", '{"base_url": "http://127.0.0.1:9/v1", "price_per_mtok": {"input": 1, "output": 1e308}}', "--out", "W/t"], "price_per_mtok.output must be a number of USD per million tokens from 0 to 1e+06, got 1e+308"),
    ("sequential-url-path-secret", nothing, ["sequential", *SEQ, "--policy-a", "zero", "--policy-b", "http://127.0.0.1:9/v1;token=pAth5Ecr3t", "--out", "W/s"], "v1;token=*** carries credentials"),
    # hostile8 F5: a run given through a link (also with a trailing "/", a dry run, a dangling link): one line
    ("release-link-to-run", symlink("ln", "run"), ["release", "W/ln", "--out", "W/rel"], "W/ln is a link (to run); rollbench reads runs only through their real path: give W/run instead"),
    ("release-link-dry-run", symlink("ln", "run"), ["release", "W/ln", "--dry-run", "--out", "W/rel"], "W/ln is a link (to run)"),
    ("release-link-trailing-slash", symlink("ln", "run"), ["release", "W/ln/", "--out", "W/rel"], "W/ln is a link (to run)"),
    ("release-dangling-link", symlink("ln", "gone"), ["release", "W/ln", "--out", "W/rel"], "W/ln is a link to gone, which does not exist"),
    ("resume-link-to-run", symlink("ln", "run"), ["eval", "--resume", "W/ln/"], "W/ln is a link (to run)"),
    # hostile8 F7: every count has an upper bound
    ("eval-workers-huge", nothing, ["eval", *RUN, "--workers", "99999999999", "--out", "W/t"], "--workers must be between 1 and 1024, got 99999999999"),
    ("sequential-workers-huge", nothing, ["sequential", *SEQ, "--policy-a", "zero", "--policy-b", "zero", "--workers", "1025", "--out", "W/s"], "--workers must be between 1 and 1024, got 1025"),
    ("eval-batch-size-huge", nothing, ["eval", *RUN, "--batch-size", "257", "--out", "W/t"], "--batch-size must be between 1 and 256, got 257"),
    # hostile round 9: work and waits have upper bounds (F8, F4)
    ("sequential-scheduled-budget-over", nothing, ["sequential", *SEQ, "--policy-a", "zero", "--policy-b", "zero", "--budget", "1001", "--look-every", "2", "--out", "W/s"], "budget must be between 1 and 1000 pairs looking every 2 pairs, got 1001"),
    ("checkpoints-poll-inf", mkdir("train/checkpoints/000100"), ["checkpoints", "W/train", "--env", "scripted/reach", "--out", "W/o", "--watch", "--poll-s", "inf"], "--poll-s must be between 0 and 86400 seconds, got inf"),
    ("checkpoints-until-idle-huge", mkdir("train/checkpoints/000100"), ["checkpoints", "W/train", "--env", "scripted/reach", "--out", "W/o", "--watch", "--until-idle", "1e300"], "--until-idle must be between 0 and 2.592e+06 seconds, got 1e+300"),
]  # fmt: skip


def test_the_table_has_at_least_100_cases_over_every_command() -> None:
    assert len(CASES) >= 100 and len({c[0] for c in CASES}) == len(CASES)
    commands = {c[2][0] for c in CASES}
    assert commands >= {c.name for c in app.registered_commands} - {"policies"}, commands


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.slow
def test_bad_input_is_exit_2_one_line_and_writes_nothing(
    case: T, recorded: Path, modules: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, damage, args, words = case
    w = tmp_path / "w"
    w.mkdir()
    shutil.copytree(recorded, w / "run")
    damage(w)
    before = listing(w)
    monkeypatch.syspath_prepend(str(modules))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.chdir(w)
    for name in [m for m in sys.modules if m.startswith("rbt_")]:
        monkeypatch.delitem(sys.modules, name)
    argv = [a.replace("W/", f"{w}/") for a in args]
    result = CliRunner().invoke(app, argv)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    shown = f"exit {result.exit_code}, stdout {result.stdout!r}, stderr {result.stderr!r}, {result.exception!r}"
    assert result.exit_code == 2, shown
    assert isinstance(result.exception, SystemExit), shown
    assert "Traceback" not in result.stdout + result.stderr, shown
    assert len(lines) == 1 and lines[0].startswith("error: "), shown
    assert words.replace("W/", f"{w}/") in lines[0], shown
    assert result.stdout == "", shown
    assert listing(w) == before


@pytest.mark.parametrize("kind", ["str", "text", "fault", "base"])
def test_a_policy_exception_that_cannot_be_printed_ends_its_episode_as_a_policy_error(
    kind: str, modules: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30, item 7: ``str()`` of the exception raises (or is not text), or its ``fault`` raises; each episode
    ends as a ``policy`` error and the run finishes (not INTERRUPTED)."""
    monkeypatch.syspath_prepend(str(modules))
    r = evaluate(
        out=tmp_path / "r",
        env="scripted/reach",
        policy="rbt_factories:str_raises",
        episodes=2,
        max_steps=3,
        policy_options={"kind": kind},
    )
    assert [e.termination_reason for e in r.episodes] == ["error", "error"]
    assert {e.error_fault for e in r.episodes} == {"policy"}
    name = {"str": "_StrRaises", "text": "_StrNotText", "fault": "_FaultRaises", "base": "_BaseStrRaises"}[kind]
    assert all(e.error.startswith(f"{name}: ") for e in r.episodes)
    assert json.loads((tmp_path / "r/run.json").read_text())["status"] != "INTERRUPTED"


def test_power_at_a_tiny_alpha_matches_connors_formula() -> None:
    """Issue 30, item 8: ``--alpha 1e-300`` no longer overflows; the size is eq. 3 of Connor (1987) evaluated here
    with scipy's normal quantiles (p_a 0.2, p_b 0.6 independent: psi = 0.2*0.4 + 0.8*0.6 = 0.56, delta 0.4)."""
    import math

    from scipy.stats import norm

    result = CliRunner().invoke(app, ["compare", "--power", "--p-a", "0.2", "--p-b", "0.6", "--alpha", "1e-300"])
    assert result.exit_code == 0, result.stderr
    psi, delta = 0.2 * 0.4 + 0.8 * 0.6, 0.4
    z_a, z_b = norm.isf(0.5e-300), norm.ppf(0.8)
    n = math.ceil((z_a * math.sqrt(psi) + z_b * math.sqrt(psi - delta**2)) ** 2 / delta**2)
    assert f"{n} paired episodes" in result.stdout or f"n = {n}" in result.stdout or str(n) in result.stdout


def test_compare_of_runs_without_a_common_task_is_refused_paired_or_not(tmp_path: Path) -> None:
    """Issue 30, item 21: no common task is nothing to compare (it printed a pooled row of dashes, Fisher p 1)."""
    for name, env in (("a", "scripted/reach"), ("b", "scripted/reach-final")):
        evaluate(out=tmp_path / name, env=env, policy="zero", episodes=2, max_steps=2)
    for extra in ([], ["--unpaired"], ["--unpaired", "--json"]):
        result = CliRunner().invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), *extra])
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert result.exit_code == 2 and result.stdout == "", (extra, result.stdout)
        assert len(lines) == 1 and "share no task" in lines[0] and "scripted/reach-final" in lines[0]


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda log: log.update(tasks=[1]), "its tasks[0] is not an object with a string task and a list of looks"),
        (
            lambda log: log["tasks"][0].pop("looks"),
            "its tasks[0] is not an object with a string task and a list of looks",
        ),
        (
            lambda log: log["tasks"][0].update(looks=5),
            "its tasks[0] is not an object with a string task and a list of looks",
        ),
        (
            lambda log: log["tasks"][0].update(task=[1]),
            "its tasks[0] is not an object with a string task and a list of looks",
        ),
        (lambda log: log.update(pooled="x"), "its pooled entry is neither null nor an object with a list of looks"),
        # issue 30 (a fresh hostile attempt): the log's parameters against their ranges and the arms' run.json
        (lambda log: log["parameters"].update(alpha=0.1), "its parameters.alpha is 0.1 but the arms' run.json record 0.05"),
        (lambda log: log["parameters"].update(alpha=0.7), "its parameters.alpha is 0.7, not a number in (0.0, 0.5)"),
        (lambda log: log["parameters"].update(alpha=float("nan")), "its parameters.alpha is NaN, not a number in (0.0, 0.5)"),
        (lambda log: log["parameters"].update(delta="0.2"), 'its parameters.delta is "0.2", not a number in (0.0, 1.0)'),
        (lambda log: log["parameters"].update(delta=0.3), "its parameters.delta is 0.3 but the arms' run.json record 0.2"),
        (lambda log: log["parameters"].update(budget=7), "its parameters.budget is 7 but the arms' run.json record 6"),
        (lambda log: log["parameters"].update(budget=6.0), "its parameters.budget is 6.0, not an integer in [1, 5000]"),
        (lambda log: log["parameters"].update(budget=True), "its parameters.budget is true, not an integer in [1, 5000]"),
        (lambda log: log["parameters"].update(look_every=0), "its parameters.look_every is 0, not an integer in [1, 5000]"),
        (lambda log: log["parameters"].update(look_every=2), "its parameters.look_every is 2 but the arms' run.json record 1"),
        (lambda log: log["parameters"].update(beta=0.1), "its parameters.beta is 0.1 but the arms' run.json record 0.2"),
        (lambda log: log["parameters"].update(discordant=0.5), "its parameters.discordant is 0.5 but the arms' run.json record null"),
        (lambda log: log["parameters"].update(discordant=2), "its parameters.discordant is 2, not a number in [0.0, 1.0]"),
        (lambda log: log["parameters"].update(tasks=["x"]), "its parameters.tasks is [\"x\"] but the arms' run.json record [\"scripted/reach\"]"),
        (lambda log: log.pop("parameters"), "it has no parameters object"),
        (lambda log: log.update(parameters=[1]), "it has no parameters object"),
        (lambda log: log.update(alpha_family=0.1), "its alpha_family is 0.1 but the arms' run.json give 0.05"),
        (lambda log: log.update(rule="other"), "its rule is \"other\" but the arms' run.json give \"truncated-sprt-discordant\""),
        (lambda log: log["tasks"][0]["design"].update(type1_error=0.5), "its design of task scripted/reach differs from the arms' run.json (type1_error)"),
        (lambda log: log["tasks"][0].update(design=[1]), "its design of task scripted/reach differs from the arms' run.json (alpha)"),
    ],
)  # fmt: skip
@pytest.mark.slow
def test_compare_sequential_names_a_malformed_decision_log_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, damage: Callable[[dict], None], words: str
) -> None:
    """A sequential comparison's sequential.json with entries of the wrong type is refused with exit 2 and one line
    naming the file (never a traceback); the arms are left as they were."""
    made = tmp_path_factory.getbasetemp() / "sequential-made"
    if not (made / "sequential.json").exists():
        args = [*SEQ, "--policy-a", "zero", "--policy-b", "scripted-expert", "--budget", "6", "--out", made]
        assert CliRunner().invoke(app, ["sequential", *map(str, args)]).exit_code == 0
    out = tmp_path / "s"
    shutil.copytree(made, out)
    edit_json(out / "sequential.json", damage)
    before = listing(out)
    r = CliRunner().invoke(app, ["compare", "--sequential", str(out)])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert r.output.strip().splitlines() == [
        f"error: {out}/sequential.json is not a rollbench sequential decision log: {words}"
    ]
    assert listing(out) == before


@pytest.mark.slow
def test_robustness_refuses_an_unreachable_ray_cluster_before_writing(tmp_path: Path) -> None:
    """Issue 30 (h-cli 1): ``robustness`` connects to Ray before the study's run directory exists (a perturbed suite
    needs LIBERO, an optional extra, so this case is not in the table)."""
    if libero_installed() is None:  # found without importing it: its import writes ~/.libero/config.yaml
        pytest.skip("rpent-libero is not installed")
    args = ["robustness", "--env", "libero/libero_spatial_swap", "--policy", "zero", "--executor", "ray",
            "--ray-address", "127.0.0.1:1", "--out", str(tmp_path / "rb")]  # fmt: skip
    result = CliRunner().invoke(app, args)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.exit_code == 2 and result.stdout == "", result.stderr
    assert lines == [
        "error: cannot reach Ray at 127.0.0.1:1: Connection refused (is `ray start --head` running there?)"
    ]
    assert list(tmp_path.iterdir()) == []
