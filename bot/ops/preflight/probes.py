"""The LLM server: does it answer, does it serve ``llm.model``, does one structured request with the real dialog
schema come back schema-valid (and how fast); the ways out when there is no server."""

from __future__ import annotations

import json
import shlex
import time
from typing import Any

import httpx

from bot.config import Config
from bot.ops.preflight.report import FAIL, OK, SKIP, WARN, CheckReport, Probe
from bot.ops.preflight.vllm import _port, installed_vllm, llm_command_line

PROBE_CALLER_LINE = "집 앞 가로등이 어젯밤부터 꺼져 있어요."


def probe_llm(config: Config, api_key: str = "EMPTY", *, timeout_s: float | None = None) -> Probe:
    """GET /models, then one streamed structured request with the real dialog schema and prompt."""
    from bot.dialog.domain import load_domain, render_system_prompt
    from bot.dialog.reply_stream import TurnParseError, parse_turn

    llm = config.llm
    base = llm.base_url.rstrip("/")
    probe = Probe()
    read_timeout = timeout_s or max(30.0, llm.total_timeout_ms / 1000.0)
    headers = {"Authorization": f"Bearer {api_key}"}
    with httpx.Client(timeout=httpx.Timeout(read_timeout, connect=3.0), headers=headers) as client:
        try:
            r = client.get(f"{base}/models")
            r.raise_for_status()
            probe.models = [m.get("id", "") for m in r.json().get("data", [])]
            probe.reachable = True
        except (httpx.HTTPError, ValueError) as e:
            probe.error = f"{type(e).__name__}: {e}"
            return probe
        domain = load_domain(config.path(llm.domain_file))
        template = config.path(llm.prompt_file).read_text(encoding="utf-8")
        body: dict[str, Any] = {
            "model": llm.model,
            "messages": [{"role": "system", "content": render_system_prompt(template, domain, {})},
                         {"role": "user", "content": PROBE_CALLER_LINE}],
            "stream": True,
            "max_tokens": llm.max_tokens,
            "temperature": llm.temperature,
            "response_format": domain.response_format(llm.dialect, llm.reply_max_chars),
        }  # fmt: skip
        if llm.dialect == "openai":
            body["chat_template_kwargs"] = {"enable_thinking": llm.enable_thinking}
        text, finish = [], None
        t0 = time.monotonic()
        try:
            with client.stream("POST", f"{base}/chat/completions", json=body) as resp:
                if resp.status_code != 200:
                    probe.problem = f"HTTP {resp.status_code}: {resp.read().decode(errors='replace')[:300]}"
                    return probe
                for line in resp.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    chunk = json.loads(data)
                    for choice in chunk.get("choices") or []:
                        piece = (choice.get("delta") or {}).get("content")
                        if piece:
                            if probe.first_token_ms is None:
                                probe.first_token_ms = (time.monotonic() - t0) * 1000
                            text.append(piece)
                        finish = choice.get("finish_reason") or finish
        except (httpx.HTTPError, ValueError) as e:
            probe.problem = f"stream failed: {type(e).__name__}: {e}"
            return probe
        probe.total_ms = (time.monotonic() - t0) * 1000
    raw = "".join(text)
    if finish == "length":
        probe.problem = f"cut off (finish_reason=length after {len(raw)} chars; raise llm.max_tokens?)"
        return probe
    if not raw.strip():
        probe.problem = "empty answer"
        return probe
    try:
        turn = parse_turn(raw)
    except TurnParseError as e:
        probe.problem = f"invalid JSON: {e}: {raw[:120]!r}"
        return probe
    errors = domain.validate(turn, llm.reply_max_chars)
    if errors:
        probe.problem = "not schema-valid: " + "; ".join(errors)[:300]
        return probe
    probe.turn = turn
    return probe


def ways_out(config: Config) -> list[str]:
    """The three ways out of 'no LLM server', as commands."""
    vllm = llm_command_line(config)
    if installed_vllm() is None:
        vllm = f"scripts/setup.sh --vllm && {vllm}   (or: run_bot.py llm-command --docker)"
    return [
        f"  1. start vLLM (GPU):         {vllm}",
        f"  2. a fake for plumbing:       .venv/bin/python -m bot.testing.fake_llm --port {_port(config.llm.base_url)} "
        f"--model {shlex.quote(config.llm.model)}",
        "  3. the local 0.5B model (CPU): scripts/setup.sh --local-llm && .venv/bin/python run_bot.py --llm local",
    ]


def llm_rows(report: CheckReport, config: Config, api_key: str = "EMPTY", probe: Probe | None = None) -> Probe:
    llm = config.llm
    hatch = "llm.start_without_llm" if llm.start_without_llm else None
    probe = probe or probe_llm(config, api_key)
    where = f"{llm.base_url} (llm.base_url" + (", the local llama.cpp child" if llm.backend == "local" else "") + ")"
    if not probe.reachable:
        report.add("LLM", "server", FAIL, f"NO LLM SERVER at {where}: {probe.error}", hatch)
        report.add("LLM", "model", SKIP, "no server")
        report.add("LLM", "structured answer", SKIP, "no server")
        report.notes += [f"NO LLM SERVER at {llm.base_url} (llm.base_url): every model turn would be an apology.",
                         "Three ways out:", *ways_out(config)]  # fmt: skip
        if hatch:
            report.notes.append("llm.start_without_llm = true: `serve` starts anyway "
                                "(shortcuts answer, the rest apologises).")
        return probe
    report.add("LLM", "server", OK, f"{llm.base_url} answers /models")
    if llm.model in probe.models:
        report.add("LLM", "model", OK, f"{llm.model} listed")
    else:
        report.add("LLM", "model", FAIL, f"llm.model {llm.model!r} is not served there (it serves {probe.models})", hatch)
    if probe.turn is not None:
        ft = probe.first_token_ms or 0.0
        report.figures["llm_first_token_ms"] = ft
        slow = ft > llm.first_token_timeout_ms
        detail = (f"schema-valid turn (intent {probe.turn['intent']}, category {probe.turn['category']}); "
                  f"first token {ft:.0f} ms, whole answer {probe.total_ms:.0f} ms")  # fmt: skip
        if slow:
            detail += f": slower than llm.first_token_timeout_ms = {llm.first_token_timeout_ms} (cold cache?)"
        report.add("LLM", "structured answer", WARN if slow else OK, detail)
    else:
        report.add("LLM", "structured answer", FAIL, probe.problem or "no answer", hatch)
    return probe

