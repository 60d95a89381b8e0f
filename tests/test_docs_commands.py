"""Every command in a fenced ```bash block of README.md and docs/*.md works as written.

Each command is parsed by the parser of the program it names (``run_bot.py``'s own argparse, the fake LLM's,
a script's option list), its config loaded with its ``--set`` keys and its input files found, so a renamed
flag, a removed subcommand, a required option the docs leave out or a misspelled key fails the build. The
quick ones that need nothing beyond this machine also run (``say``, ``chat``, ``transcribe``, ``llm-command``,
``models --verify``, the records commands, the fake LLM passing ``check``'s LLM rows).

What needs more than a CPU and this checkout is marked in the docs, in a comment before its block::

    <!-- docs-test: needs gpu, vllm -->                      (every command of the block)
    <!-- docs-test: needs hub for "models [--offline]" -->    (the block's lines that hold that text)

A marked command is parsed, never run. A command this file cannot check (a program it does not know:
docker, kubectl, stress-ng) must be marked; so must a command that visibly needs what is named in
``visible_needs`` (``--config config.gpu.toml`` needs the GPU, ``models`` without ``--verify`` the hub).

A figure measured with a setting says which (``<!-- docs-test: measured with stt.window_s = 10.0 -->``): when
the shipped config changes that setting, the test fails until the figure is measured again.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND_LANGS = ("bash", "sh", "shell", "console")
MARKER = re.compile(r"<!--\s*docs-test:\s*needs\s+(?P<needs>[\w\-, ]+?)(?:\s+for\s+(?P<for>.+?))?\s*-->")
NEEDS = {"gpu", "vllm", "hub", "twilio", "kubernetes", "docker", "network", "long-run", "local-llm"}
# Programs that need no check beyond being what they are (shell words and plain utilities).
PLAIN = {"echo", "printf", "export", "cd", "kill", "for", "done", "break", "git", "cat", "sleep", "wait", "true",
         "hostname"}
# Placeholders the docs write in commands, and what stands in for them.
PLACEHOLDERS = {"N": "1", "TEXT": "안녕하세요", "F.wav": str(FIXTURES / "en_hello.wav"), "call.wav": str(FIXTURES / "en_hello.wav"),
                "DIR": "/tmp/docs-test-mirror", "NAME": "pip", "CODE": "ko", "...": None}  # fmt: skip
# Options whose value is a file of the checkout that must exist.
INPUT_FILES = ("--config", "--script", "--lock", "--turns")
PYTEST_FLAGS = {"-n", "-m", "-q", "-x", "-k", "-v", "--durations", "-p"}


@dataclass
class Command:
    """One simple command of a docs block: where it is written, its words, and what its block marks it needing."""

    where: str
    line: str
    argv: list[str]
    needs: set[str] = field(default_factory=set)


def strip_comment(line: str) -> str:
    """The line without its shell comment: a '#' that starts a word outside quotes (keys:2026#  stays)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def blocks(text: str) -> list[tuple[int, str, list[str], list[re.Match]]]:
    """Fenced blocks: (line number of the fence, language, lines, the docs-test markers just before it)."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = re.match(r"\s*```(\w*)", lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group(1)
        j = start - 1
        markers = []
        while j >= 0 and (MARKER.search(lines[j]) or not lines[j].strip()):
            markers += list(MARKER.finditer(lines[j]))
            j -= 1
        i += 1
        body = []
        while i < len(lines) and not lines[i].strip().startswith("```"):
            body.append(lines[i])
            i += 1
        out.append((start + 1, lang, body, markers))
        i += 1
    return out


def split_commands(line: str) -> list[list[str]]:
    """Simple commands of a shell line: split on &&, ||, |, ;, & (``eval "$(X)"`` gives X)."""
    lex = shlex.shlex(strip_comment(line), posix=True, punctuation_chars=True)
    lex.whitespace_split, lex.commenters = True, ""
    commands, current = [], []
    for word in lex:
        if word in ("&&", "||", "|", ";", "&", ";;"):
            commands.append(current)
            current = []
        else:
            current.append(word)
    commands.append(current)
    out = []
    for argv in commands:
        while argv and argv[0] in ("do", "then", "else"):
            argv = argv[1:]
        if argv[:1] == ["eval"] and len(argv) == 2 and argv[1].startswith("$(") and argv[1].endswith(")"):
            out += split_commands(argv[1][2:-1])
        elif argv:
            out.append(argv)
    return out


def doc_commands(text: str, name: str) -> tuple[list[Command], list[str]]:
    """Every simple command of a document's command blocks, and the problems with its markers."""
    commands, problems = [], []
    for fence_line, lang, body, markers in blocks(text):
        if lang not in COMMAND_LANGS:
            continue
        joined: list[tuple[int, str]] = []  # backslash continuations joined
        for k, raw in enumerate(body):
            if joined and joined[-1][1].endswith("\\"):
                joined[-1] = (joined[-1][0], joined[-1][1][:-1] + " " + raw.strip())
            else:
                joined.append((fence_line + 1 + k, raw))
        needs_for: list[tuple[set[str], list[str] | None]] = []
        for m in markers:
            needs = {n.strip() for n in m.group("needs").split(",") if n.strip()}
            if needs - NEEDS:
                problems.append(f"{name}:{fence_line}: unknown need {sorted(needs - NEEDS)} (known: {sorted(NEEDS)})")
            targets = re.findall(r'"([^"]+)"', m.group("for")) if m.group("for") else None
            for t in targets or []:
                if not any(t in line for _, line in joined):
                    problems.append(f"{name}:{fence_line}: marker for {t!r} matches no line of its block")
            needs_for.append((needs, targets))
        # A "$" + alternatives notation: `run_bot.py calls | tickets | ticket N` lists commands, not a pipe.
        for number, line in joined:
            if not strip_comment(line).strip():
                continue
            needs = set().union(*[n for n, targets in needs_for if targets is None or any(t in line for t in targets)])
            previous_run_bot = False
            for argv in split_commands(line):
                if previous_run_bot and argv[0] in RUN_BOT_COMMANDS:
                    argv = ["python", "run_bot.py", *argv]
                commands.append(Command(f"{name}:{number}", line.strip(), argv, needs))
                previous_run_bot = is_run_bot(argv)
    return commands, problems


def _load_run_bot():
    spec = importlib.util.spec_from_file_location("run_bot_for_docs", ROOT / "run_bot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RUN_BOT = _load_run_bot()
RUN_BOT_COMMANDS = set(next(a for a in RUN_BOT.build_parser()._actions
                            if isinstance(a, argparse._SubParsersAction)).choices)  # fmt: skip


def is_run_bot(argv: list[str]) -> bool:
    return run_bot_args(argv) is not None


def run_bot_args(argv: list[str]) -> list[str] | None:
    """The arguments after run_bot.py, however it is started (python, .venv/bin/python, run_bot.py)."""
    for i, word in enumerate(argv[:2]):
        if Path(word).name == "run_bot.py" and (i == 0 or Path(argv[0]).name.startswith("python")):
            return argv[i + 1:]
    return None


def fill(args: list[str]) -> list[str]:
    """Placeholders filled in, optional parts ``[--x]`` taken, ``[ENTRY ...]`` dropped."""
    out = []
    for word in args:
        if re.fullmatch(r"\[[A-Z]+", word) or word in ("...]", "…"):
            continue
        word = word.strip("[]") if word.startswith("[") or word.endswith("]") else word
        word = word.replace("$(hostname)", "host")
        if word in PLACEHOLDERS:
            if PLACEHOLDERS[word] is None:
                continue
            word = PLACEHOLDERS[word]
        out.append(word)
    return out


def visible_needs(argv: list[str]) -> set[str]:
    """What a command visibly needs beyond this machine (it must be marked so)."""
    needs = set()
    words = " ".join(argv)
    if "config.gpu.toml" in words or re.search(r"setup\.sh.*--gpu", words):
        needs.add("gpu")
    if re.search(r"setup\.sh.*--vllm", words):
        needs.add("vllm")
    args = run_bot_args(argv)
    if args and args[:1] == ["models"] and not ({"--verify", "--offline", "--mirror"} & set(args)):
        needs.add("hub")
    if args and args[:1] == ["callbacks"] and "--place" in " ".join(args):
        needs.add("twilio")  # it places calls through Twilio's REST API
    if argv[0] in ("docker", "kubectl", "helm"):
        needs.add("kubernetes" if argv[0] != "docker" else "docker")
    return needs


def _parse(parser: argparse.ArgumentParser, args: list[str]) -> tuple[argparse.Namespace | None, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            return parser.parse_args(args), ""
        except SystemExit:
            return None, err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else "refused"


def check_command(cmd: Command) -> list[str]:
    """Problems with one command, as its program would see them (nothing is run here)."""
    where = f"{cmd.where}: `{cmd.line}`"
    argv = cmd.argv
    missing = visible_needs(argv) - cmd.needs
    if missing:
        return [f"{where}: needs {sorted(missing)}: mark its block <!-- docs-test: needs ... -->"]
    args = run_bot_args(argv)
    if args is not None:
        args = fill(args)
        ns, err = _parse(RUN_BOT.build_parser(), args)
        if ns is None:
            return [f"{where}: run_bot.py {' '.join(args)}: {err}"]
        problems = _input_files(where, args)
        from bot.config import ConfigError, load_config

        overrides = list(ns.overrides) + ([f"llm.backend='{ns.llm}'"] if getattr(ns, "llm", None) else [])
        try:
            load_config(ns.config, overrides)
        except (ConfigError, OSError) as e:
            problems.append(f"{where}: its config: {e}")
        return problems
    program = argv[0]
    if Path(program).name.startswith("python") and argv[1:2] == ["-m"]:
        if argv[2] == "bot.testing.fake_llm":
            from bot.testing.fake_llm import build_parser

            ns, err = _parse(build_parser(), fill(argv[3:]))
            return _input_files(where, argv[3:]) if ns is not None else [f"{where}: {err}"]
        if argv[2] == "http.server":
            return []
    if Path(program).name.startswith("python") and argv[1:2] and argv[1].startswith("scripts/"):
        return _script_flags(where, argv[1], argv[2:])
    if program.startswith("scripts/") or program == ".ci/run":
        return _script_flags(where, program, argv[1:])
    if Path(program).name == "pytest":
        bad = [a for a in argv[1:] if a.startswith("-") and a not in PYTEST_FLAGS]
        return [f"{where}: pytest flags this test does not know: {bad}"] if bad else []
    if program in PLAIN or "=" in program:
        return []
    if cmd.needs:
        return []  # a marked command this file does not know how to parse: said so in the docs
    return [f"{where}: `{program}` is not a command this test can check: mark its block "
            "<!-- docs-test: needs ... --> with what it needs"]


def _input_files(where: str, args: list[str]) -> list[str]:
    problems = []
    for opt, value in zip(args, args[1:]):
        if opt in INPUT_FILES and not (ROOT / value).is_file():
            problems.append(f"{where}: {opt} {value}: no such file in the checkout")
    return problems


def _script_flags(where: str, script: str, args: list[str]) -> list[str]:
    path = ROOT / script
    if not path.is_file():
        return [f"{where}: {script}: no such file"]
    text = path.read_text(encoding="utf-8")
    problems = [f"{where}: {script} has no option {a}" for a in fill(args) if a.startswith("--")
                and not re.search(re.escape(a.split("=")[0]) + r"\b", text)]
    return problems + _input_files(where, args)


def all_commands() -> tuple[list[Command], list[str]]:
    commands, problems = [], []
    for doc in DOCS:
        found, bad = doc_commands(doc.read_text(encoding="utf-8"), str(doc.relative_to(ROOT)))
        commands += found
        problems += bad
    return commands, problems


# --- the checker itself fails on what it is for -------------------------------------------------------------

BAD_DOC = """
```bash
python run_bot.py bench --callz 8          # a renamed flag
.venv/bin/python run_bot.py say "안녕" --set tts.voicee=F1
python run_bot.py transcribe                # its file left out
kubectl apply -f deploy/k8s/               # needs a cluster, not marked
python run_bot.py check --config config.gpu.toml
```

<!-- docs-test: needs hub for "models --pinn" -->
```bash
python run_bot.py models --pin
```
"""

GOOD_DOC = """
<!-- docs-test: needs kubernetes -->
```bash
kubectl apply -f deploy/k8s/
```

<!-- docs-test: needs gpu for "config.gpu.toml" -->
<!-- docs-test: needs hub for "models --pin" -->
<!-- docs-test: needs twilio for "callbacks [--place]" -->
```bash
python run_bot.py calls | tickets | ticket N --status done | callbacks [--place]   # the records database
python run_bot.py check --config config.gpu.toml
python run_bot.py models --pin [ENTRY ...]         # with the hub
python run_bot.py call keys:20260001#              # keys: '#' inside a word is not a comment
```
"""


def test_the_checker_fails_a_renamed_flag_a_bad_key_a_missing_argument_and_an_unmarked_need():
    commands, problems = doc_commands(BAD_DOC, "bad.md")
    problems += [p for c in commands for p in check_command(c)]
    text = "\n".join(problems)
    assert "bad.md:3" in text and "--callz" in text
    assert "bad.md:4" in text and "tts.voicee" in text
    assert "bad.md:5" in text and "the following arguments are required: file" in text
    assert "bad.md:6" in text and "kubectl" in text
    assert "bad.md:7" in text and "needs ['gpu']" in text
    assert "marker for 'models --pinn' matches no line" in text
    assert "bad.md:12" in text and "needs ['hub']" in text
    assert len(problems) == 7, text


def test_the_checker_passes_marked_blocks_and_reads_alternatives_as_commands():
    commands, problems = doc_commands(GOOD_DOC, "good.md")
    assert problems == []
    assert [c.argv[2:] for c in commands if is_run_bot(c.argv)][:4] == [
        ["calls"], ["tickets"], ["ticket", "N", "--status", "done"], ["callbacks", "[--place]"]]
    assert [p for c in commands for p in check_command(c)] == []
    keys = next(c for c in commands if "keys:" in c.line)
    assert keys.argv[-1] == "keys:20260001#" and not keys.needs


# --- the docs --------------------------------------------------------------------------------------------


def test_every_command_in_the_readme_and_docs_parses_as_written():
    commands, problems = all_commands()
    assert len(commands) > 60  # the blocks were found
    problems += [p for c in commands for p in check_command(c)]
    assert problems == [], "\n".join(problems)


INLINE_RUN_BOT = re.compile(r"`((?:\.venv/bin/)?(?:python3? )?run_bot\.py[^`]*)`")


def _options(parser: argparse.ArgumentParser, words: list[str]) -> set[str]:
    """The options a command line may use: the parser's, and those of the subcommands its words name."""
    found = set(parser._option_string_actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            name = next((w for w in words if w in action.choices), None)
            if name is not None:
                found |= _options(action.choices[name], words[words.index(name) + 1:])
    return found


def prose_flags(text: str, name: str) -> list[str]:
    """Flags of ``run_bot.py`` named in inline code outside the command blocks (`run_bot.py bench --url`):
    each must be an option of the command it is written with. Values are not checked: prose names a
    command, it does not run it."""
    problems, fenced = [], False
    parser = RUN_BOT.build_parser()
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        for m in [] if fenced else INLINE_RUN_BOT.finditer(line):
            words = m.group(1).replace("…", " ").split()
            words = words[words.index(next(w for w in words if w.endswith("run_bot.py"))) + 1:]
            known = _options(parser, words)
            problems += [f"{name}:{number}: `{m.group(1)}`: run_bot.py has no {flag} there"
                         for flag in (w.split("=")[0] for w in words if w.startswith("--")) if flag not in known]
    return problems


def test_every_flag_the_docs_prose_names_exists():
    problems = [p for doc in DOCS for p in prose_flags(doc.read_text(encoding="utf-8"), str(doc.relative_to(ROOT)))]
    assert problems == [], "\n".join(problems)
    assert prose_flags("Run `run_bot.py bench --find-capacitee`.", "bad.md") == [
        "bad.md:1: `run_bot.py bench --find-capacitee`: run_bot.py has no --find-capacitee there"]


MEASURED_WITH = re.compile(r"<!--\s*docs-test:\s*measured with\s+(?:(?P<config>[\w.]+\.toml):\s*)?(?P<keys>.+?)\s*-->")


def stale_figures(text: str, name: str) -> list[str]:
    """Figures that depend on a setting say so (``<!-- docs-test: measured with stt.window_s = 10.0 -->``,
    ``config.gpu.toml:`` before the keys for that config): when the shipped setting changes, this fails until
    the figure is measured again and its marker moved with it."""
    import tomllib

    from bot.config import load_config

    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        for m in MEASURED_WITH.finditer(line):
            if line[:m.start()].endswith("`"):
                continue  # an example in prose, not a marker
            config = load_config(m.group("config") or None)
            for item in m.group("keys").split(","):
                key, _, literal = (x.strip() for x in item.partition("="))
                section, attr = key.split(".", 1)
                want = tomllib.loads(f"v = {literal}")["v"]
                now = getattr(getattr(config, section), attr)
                if now != want:
                    problems.append(f"{name}:{number}: the figure was measured with {key} = {literal}; "
                                    f"{m.group('config') or 'config.toml'} now has {now!r}: measure it again")
    return problems


def test_every_figure_that_depends_on_a_setting_was_measured_with_the_shipped_one():
    problems = [p for doc in DOCS for p in stale_figures(doc.read_text(encoding="utf-8"), str(doc.relative_to(ROOT)))]
    assert problems == [], "\n".join(problems)
    assert sum(len(MEASURED_WITH.findall(doc.read_text(encoding="utf-8"))) for doc in DOCS) >= 3
    assert stale_figures("<!-- docs-test: measured with stt.window_s = 30.0, stt.beam_size = 1 -->", "x.md") == [
        "x.md:1: the figure was measured with stt.window_s = 30.0; config.toml now has 10.0: measure it again"]


def _runnable(commands: list[Command]) -> dict[tuple[str, ...], Command]:
    """The docs' quick commands that need nothing beyond this machine, once each."""
    quick = {"say", "chat", "llm-command", "calls", "tickets", "callbacks", "transcribe", "report"}
    out = {}
    for c in commands:
        args = run_bot_args(c.argv)
        if c.needs or args is None or not args:
            continue
        args = fill(args)
        if args[0] in quick or args[:2] == ["models", "--verify"] or args[:2] == ["staff", "list"]:
            out.setdefault(tuple(args), c)
    return out


@pytest.mark.slow  # processes: each command as a user runs it
def test_the_quick_commands_of_the_docs_run_as_written(tmp_path):
    runnable = _runnable(all_commands()[0])
    assert {a[0] for a in runnable} >= {"say", "chat", "llm-command", "models", "calls", "tickets"}
    env = {**os.environ, "RECORDS_URL": f"sqlite:///{tmp_path / 'calls.db'}", "DESK_SECRET_KEY": "x" * 32}

    def run(args: tuple[str, ...]) -> tuple[tuple[str, ...], subprocess.CompletedProcess]:
        cwd = tmp_path / f"cwd-{abs(hash(args))}"  # `say --out out.wav` and its default write here
        cwd.mkdir()
        stdin = "*\n" if args[0] == "chat" else ""
        return args, subprocess.run([sys.executable, str(ROOT / "run_bot.py"), *args], cwd=cwd, env=env,
                                    input=stdin, capture_output=True, text=True, timeout=120)  # fmt: skip

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(run, runnable))
    failed = [f"{runnable[a].where}: run_bot.py {' '.join(a)}: exit {r.returncode}: {r.stderr[-600:]}"
              for a, r in results if r.returncode != 0]
    assert failed == [], "\n".join(failed)


def test_the_readme_fake_model_passes_checks_llm_rows():
    from bot.config import load_config
    from bot.ops.preflight import CheckReport, llm_rows

    # The README names it inline, among the three ways out of NO LLM SERVER: exactly those words.
    said = re.search(r"`(python -m bot\.testing\.fake_llm[^`]*)`", (ROOT / "README.md").read_text(encoding="utf-8"))
    assert said is not None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [sys.executable if Path(a).name.startswith("python") else a for a in shlex.split(said.group(1))]
    argv = [str(port) if prev == "--port" else a for prev, a in zip(["", *argv], argv)]
    proc = subprocess.Popen([*argv, "--first-token-delay", "0", "--log-level", "warning"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        config = load_config(overrides=[f"llm.base_url='http://127.0.0.1:{port}/v1'"])
        deadline = time.monotonic() + 30
        while True:
            report = CheckReport()
            llm_rows(report, config)
            if all(r.status != "FAIL" for r in report.rows) or time.monotonic() > deadline or proc.poll() is not None:
                break
            time.sleep(0.3)
        assert [(r.item, r.detail) for r in report.rows if r.status == "FAIL"] == []
    finally:
        proc.terminate()
        proc.wait(10)
