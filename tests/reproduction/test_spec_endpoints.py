"""A spec or experiment file sends nothing to a host the user did not name: ``twostage reproduce`` refuses a
step naming a host (``--endpoint URL``, ``--ray HOST:PORT``) unless ``--allow-endpoint`` allows it, and hands
the environment's API keys only to a step calling an allowed endpoint; an experiment file cannot name one.

The table of hostile inputs holds the end-to-end cases (``client/spec-endpoint-refused-without-allow-endpoint``,
``client/spec-key-only-to-an-allowed-endpoint``, ``client/experiment-file-naming-a-host-refused``); here: the
reading of a step's options against click's own parser, the allow rules, and which step gets which keys.
"""

from __future__ import annotations

import json
import textwrap

import click
import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from toolkit.cli import main
from toolkit.cli.options import HostOption
from toolkit.errors import ConfigError, InputFormatError
from toolkit.experiments.spec import parse_experiment
from toolkit.guard.client import CREDENTIAL_VARIABLES
from toolkit.reproduction.runner import HOST_OPTIONS, CommandResult, Runner, named_hosts
from toolkit.reproduction.schema import load_spec

QRELS = "1 0 d1 1\n1 0 d2 0\n1 0 d3 2\n2 0 d4 1\n2 0 d5 1\n"
RUN = "1 Q0 d3 1 3.0 t\n1 Q0 d2 2 2.0 t\n1 Q0 d1 3 1.0 t\n2 Q0 d9 1 2.0 t\n2 Q0 d4 2 1.0 t\n"
KEY = "sk-spec-endpoints-SECRET"


def _commands(group: click.Group = main, prefix: tuple[str, ...] = ()):
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*prefix, name))
        else:
            yield (*prefix, name), cmd


def test_every_option_naming_a_host_is_read_by_the_runner():
    marked = {
        opt
        for _, cmd in _commands()
        for p in cmd.params
        if isinstance(p, HostOption)
        for opt in p.opts
        if opt.startswith("--")
    }
    assert marked == set(HOST_OPTIONS)
    # an option whose value reads as a place on the network is marked (a new one cannot slip past the runner);
    # reproduce's --allow-endpoint names hosts a spec may reach, and sends nothing
    for path, cmd in _commands():
        for p in cmd.params:
            if path == ("reproduce",) and p.name == "allow_endpoints":
                continue
            if isinstance(p, click.Option) and any(w in (p.metavar or "") for w in ("URL", "HOST", "ADDRESS")):
                assert isinstance(p, HostOption), (path, p.opts)


TOKENS = st.sampled_from(
    [
        "--endpoint",
        "--endpoint=http://a.example:1/v1",
        "--ray",
        "--ray=10.0.0.1:6379",
        "--ray=auto",
        "auto",
        "local",
        "http://b.example/v1",
        "ray://10.0.0.2:10001",
        "10.0.0.3:6379",
        "--model",
        "m",
        "--no-progress",
        "--depth",
        "3",
        "-",
        "--",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["judge", "rerank"]), st.lists(TOKENS, max_size=8))
@example("judge", ["--model", "--endpoint", "--endpoint=http://a.example:1/v1"])  # --model takes "--endpoint"
def test_named_hosts_misses_nothing_click_reads(verb, args):
    """Oracle: click's own parser of the verb (no callbacks run): every host value it hands the verb for an
    option the CLI marks as naming a host is found by ``named_hosts`` (which may read more, never less)."""
    cmd = main.commands[verb]
    try:
        opts, _, _ = cmd.make_parser(click.Context(cmd)).parse_args(list(args))
    except click.UsageError:
        return  # the verb would stop before it sends anything
    found = named_hosts(args)
    for param in cmd.params:
        if not isinstance(param, HostOption) or param.name not in opts:
            continue
        values = opts[param.name] if isinstance(opts[param.name], list) else [opts[param.name]]
        for value in values:
            if not isinstance(value, str):  # --ray given alone: its flag value, a private local Ray
                value = param.flag_value
            if param.name == "ray_address" and value in ("local", "auto"):
                continue
            assert (param.opts[0], value) in found, (args, found)


def test_named_hosts_reads_values_as_click_does():
    assert named_hosts(["--endpoint", "http://x:1/v1", "--model", "m"]) == [("--endpoint", "http://x:1/v1")]
    assert named_hosts(["--endpoint=http://x:1/v1"]) == [("--endpoint", "http://x:1/v1")]
    assert named_hosts(["--ray", "--workers", "2"]) == [] and named_hosts(["--ray"]) == []
    assert named_hosts(["--ray", "auto"]) == [] and named_hosts(["--ray=local"]) == []
    assert named_hosts(["--ray", "h:1"]) == [("--ray", "h:1")]
    assert named_hosts(["x", "--", "--endpoint", "u"]) == [("--endpoint", "u")]  # read all the same: refused
    # a token another option takes as its value is read too: here click reads the second (--model takes the first)
    assert ("--endpoint", "u") in named_hosts(["--model", "--endpoint", "--endpoint=u"])


# ------------------------------------------------------------------ the runner
def _spec(tmp_path, commands: list[list[str]]):
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "run.txt").write_text(RUN)
    path = tmp_path / "spec.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            name: s
            title: t
            paths: spec
            columns:
              - {{id: MAP, measure: map}}
            rows:
              - id: sys
                qrels: qrels.txt
                run: run.txt
                commands: {json.dumps(commands)}
                cells: {{MAP: 0.5417}}
            """
        )
    )
    return load_spec(path)


def _run(tmp_path, commands, monkeypatch, started=None, **kw) -> list[tuple[list[str], dict]]:
    """The spec's steps as the runner would start them: (argv, environment) of each, none actually run."""
    for name in CREDENTIAL_VARIABLES:
        monkeypatch.setenv(name, KEY)
    started = [] if started is None else started

    def fake(argv, env):
        started.append((argv, env))
        return CommandResult(0, "")

    spec = _spec(tmp_path, commands)
    Runner(spec, None, tmp_path / "w", tmp_path, run_command=fake, allow_commands=True, **kw).run()
    return started


JUDGE = ["twostage", "judge", "--candidates", "c.json", "--model", "m", "--out", "{work}/j.qrels"]


@pytest.mark.parametrize(
    ("endpoint", "allow"),
    [
        ("http://judge.example:8000/v1", ("judge.example",)),  # a host: any port
        ("http://judge.example:8000/v1", ("JUDGE.example:8000",)),
        ("https://judge.example/v1", ("judge.example:443",)),  # the scheme's port
        ("http://judge.example:8000/v1", ("http://judge.example:8000/v1",)),  # the same endpoint, as a URL
        ("http://127.1:8000/v1", ("127.0.0.1:8000",)),  # one address, however the resolver reads it written
        ("http://[::1]:8000/v1", ("[::1]:8000",)),
        ("http://0x7f.1:8000/v1", ("2130706433",)),
    ],
)
def test_an_allowed_endpoint_runs_with_the_keys(tmp_path, monkeypatch, endpoint, allow):
    started = _run(tmp_path, [[*JUDGE, "--endpoint", endpoint]], monkeypatch, allow_endpoints=allow)
    assert len(started) == 1
    env = started[0][1]
    assert all(env[name] == KEY for name in CREDENTIAL_VARIABLES)


@pytest.mark.parametrize(
    ("step", "allow", "named"),
    [
        ([*JUDGE, "--endpoint", "http://judge.example:8000/v1"], (), "--allow-endpoint judge.example:8000"),
        ([*JUDGE, "--endpoint", "http://judge.example:8000/v1"], ("judge.example:8001",), "judge.example:8000"),
        ([*JUDGE, "--endpoint", "http://judge.example.evil:80/v1"], ("judge.example",), "judge.example.evil:80"),
        ([*JUDGE, "--endpoint", "http://127.0.0.1:9/v1"], ("localhost",), "--allow-endpoint 127.0.0.1:9"),
        ([*JUDGE, "--endpoint=http://[::1]:9/v1"], (), "--allow-endpoint '[::1]:9'"),
        (["twostage", "bm25", "--ray", "10.0.0.7:6379"], (), "--ray 10.0.0.7:6379"),
        (["twostage", "bm25", "--ray=ray://head.example:10001"], ("other.example",), "head.example:10001"),
    ],
)
def test_a_host_the_command_line_did_not_allow_is_refused_before_anything_runs(
    tmp_path, monkeypatch, step, allow, named
):
    ok = ["twostage", "eval", "--help"]
    started: list = []
    with pytest.raises(ConfigError, match="the command line did not name") as err:
        _run(tmp_path, [ok, step], monkeypatch, started, allow_endpoints=allow)
    assert started == []
    assert "rows.sys.commands[1]" in str(err.value) and named in str(err.value), str(err.value)
    assert "nothing was run" in str(err.value)


def test_only_a_step_calling_an_allowed_endpoint_gets_the_keys(tmp_path, monkeypatch):
    steps = [
        [*JUDGE, "--endpoint", "http://judge.example/v1"],
        ["twostage", "bm25", "--ray", "auto"],  # names no host
        ["twostage", "bm25", "--ray", "10.0.0.7:6379"],  # an allowed cluster, but no endpoint called
        ["python", "-c", "print(1)"],  # a program --allow-commands lets run
    ]
    started = _run(tmp_path, steps, monkeypatch, allow_endpoints=("judge.example", "10.0.0.7"))
    keys = [[name for name in CREDENTIAL_VARIABLES if name in env] for _, env in started]
    assert keys == [list(CREDENTIAL_VARIABLES), [], [], []]
    assert all(env.get("PATH") for _, env in started)  # the rest of the environment is kept


def test_local_ray_and_steps_naming_no_host_need_no_flag(tmp_path, monkeypatch):
    steps = [["twostage", "bm25", "--ray"], ["twostage", "bm25", "--ray", "auto", "--workers", "2"]]
    assert len(_run(tmp_path, steps, monkeypatch)) == 2


def test_a_bad_allow_endpoint_is_a_usage_error(tmp_path):
    spec = _spec(tmp_path, [["twostage", "eval", "--help"]])
    for bad in ("a b", "host:99999", "http://:80/", "h:x"):
        res = CliRunner().invoke(main, ["reproduce", str(spec.path), "--allow-endpoint", bad])
        assert res.exit_code == 2 and "Invalid value for '--allow-endpoint'" in res.output, (bad, res.output)


# ------------------------------------------------------------------ experiment files
BASE = "name: x\ntopics: t.tsv\nqrels: q.txt\nindex: {path: idx}\nstages:\n  bm25: {type: bm25}\n"


@pytest.mark.parametrize(
    ("extra", "line", "what"),
    [
        ("  rr: {type: rerank, input: bm25, model: m, endpoint: 'http://h.example/v1'}\n", 7, "endpoint:"),
        ("  rr: {type: rerank, input: bm25, model: m, Base_URL: 'h.example'}\n", 7, "Base_URL:"),
        ("  rr: {type: rerank, input: bm25, model: 'https://h.example/m'}\n", 7, "stages.rr.model:"),
        ("evaluation: {measures: [map], baseline: 'http://h.example'}\n", 7, "evaluation.baseline:"),
        ("ray: 10.0.0.1:6379\n", 7, "ray:"),
    ],
)
def test_an_experiment_file_cannot_name_a_host(tmp_path, extra, line, what):
    path = tmp_path / "exp.yaml"
    path.write_text(BASE + extra)
    with pytest.raises(InputFormatError) as err:
        parse_experiment(path)
    assert err.value.line == line and "the experiment file names a host" in str(err.value), str(err.value)
    assert what in str(err.value) and "nothing was run" in str(err.value)


def test_an_experiment_file_without_hosts_still_reads(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(BASE + "  rr: {type: rerank, input: bm25, model: models/minilm}\n")
    assert set(parse_experiment(path).stages) == {"bm25", "rr"}
