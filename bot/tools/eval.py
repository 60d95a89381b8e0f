"""``run_bot.py eval``: replay a Korean turn set through the real dialog code and score the answers.

Every dialog of ``bench/eval_turns.toml`` runs in a fresh ``DialogSession`` (the same
dialog stage as a call: shortcuts, then one structured-output call) against
``llm.base_url`` (or the local llama.cpp child with ``llm.backend = "local"``). Reported:

* intent, category and slot accuracy (slots: the model's value must contain the expected text);
* shortcut hit rate (turns answered without the model) against the expected routes;
* LLM calls per turn, reply length in characters (answer length is a latency setting), first token;
* with ``--judge``: a 1-5 score for each model answer, asked of the SAME server and model (no second
  engine or model anywhere);
* the bench's audio turns (``bench/turns.toml``) through Whisper, then the dialog: route agreement;
* TTS round-trip error: replies synthesized, transcribed by Whisper, character error rate. On the
  stand-in TTS model it says so instead of printing a number: the stand-in speaks noise.

An answer that is empty, cut off or not valid against the schema (including the reply's maxLength)
is never scored: it counts as a failure with its cause, and every accuracy counts it as wrong.
Exit status 1 when any turn failed or the server is unreachable, 2 for an unusable turn file.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from loguru import logger

from bot.config import Config, Secrets
from bot.core.datafile import DataFile

ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_TURNS = ROOT / "bench" / "eval_turns.toml"
AUDIO_TURNS = ROOT / "bench" / "turns.toml"
NO_MODEL_ROUTES = ("shortcut", "rule")
TURN_KEYS = {"text", "route", "intent", "category", "slots", "flow"}


class EvalError(ValueError):
    """An unusable turn file; the message names the entry."""


@dataclass(frozen=True)
class Expected:
    dialog: str
    index: int
    text: str
    route: str = "llm"
    intent: str | None = None
    category: str | None = None
    slots: dict[str, str] = field(default_factory=dict)
    flow: str | None = None


@dataclass
class Outcome:
    expected: Expected
    route: str = ""
    reply: str = ""
    intent: str | None = None
    category: str | None = None
    flow: str | None = None
    slots: dict[str, Any] = field(default_factory=dict)
    llm_calls: int = 0
    first_token_ms: float | None = None
    #: Why this answer cannot be scored ("cut_off: ...", "schema: ...", "empty_reply: ..."); None = scored.
    failure: str | None = None
    judge_score: int | None = None
    judge_failure: str | None = None

    @property
    def answered_by_model(self) -> bool:
        return self.route == "llm" and self.failure is None


def load_turns(path: Path, domain) -> list[list[Expected]]:
    """The dialogs of a turn file, checked against the domain."""
    source = DataFile.read(path, EvalError, "eval turn file")
    out: list[list[Expected]] = []
    for i, d in enumerate(source.tables(("dialogs",))):
        name = d.get("id", f"dialogs[{i}]")
        turns = source.value(("dialogs", i, "turns"), list, "a non-empty list of turns", ok=bool)
        dialog = []
        for j, t in enumerate(turns):
            key = ("dialogs", i, "turns", j)
            if not isinstance(t, dict):
                raise source.error(key, f"must be a table, not {t!r}")
            source.no_unknown(key, TURN_KEYS)
            text = source.text_value((*key, "text"))
            route = source.value((*key, "route"), str, "'llm', 'shortcut' or 'rule'", default="llm",
                                 ok=lambda v: v in ("llm", "shortcut", "rule"))
            for field_, allowed in (("intent", domain.intent_names), ("category", domain.category_names),
                                    ("flow", domain.flow_names)):  # fmt: skip
                if field_ in t and t[field_] not in allowed:
                    raise source.error((*key, field_), f"{t[field_]!r} is not one of {allowed} "
                                                       f"(dialog {name} turn {j + 1})")
            slots = source.value((*key, "slots"), dict, "a table of location/time strings", default={},
                                 ok=lambda v: not set(v) - {"location", "time"} and all(isinstance(s, str)
                                                                                         for s in v.values()))
            dialog.append(Expected(str(name), j, text.strip(), route, t.get("intent"), t.get("category"),
                                   dict(slots), t.get("flow")))  # fmt: skip
        out.append(dialog)
    return out


def _compact(s: str | None) -> str:
    return re.sub(r"\s+", "", s or "")


def slot_ok(expected: str, actual: Any) -> bool:
    """An expected "" wants an empty slot; otherwise the value must contain the expected text."""
    if expected == "":
        return actual in (None, "") or (isinstance(actual, str) and not actual.strip())
    return isinstance(actual, str) and _compact(expected) in _compact(actual)


# ---------------------------------------------------------------------------------------------
# Running the dialogs


async def run_dialog(config: Config, secrets: Secrets, turns: list[Expected], turn_timeout: float) -> list[Outcome]:
    """One dialog through a fresh ``DialogSession``; the model's parsed turn is read from the stage."""
    from bot.dialog.domain import load_domain
    from bot.tools.chat import DialogSession

    domain = load_domain(config.path(config.llm.domain_file))
    outcomes: list[Outcome] = []
    async with DialogSession(config, secrets) as session:
        llm = session.llm
        for exp in turns:
            llm.last_model_turn = None  # the validated JSON object of this turn's model call, if any
            out = Outcome(exp)
            outcomes.append(out)
            try:
                chat_turn = await asyncio.wait_for(session.turn(exp.text), turn_timeout)
            except TimeoutError:
                out.route, out.failure = "error", f"timeout: no complete answer in {turn_timeout:.0f} s"
                break  # the session is stuck; the rest of this dialog cannot run
            rec, result = chat_turn.record, llm.last_result
            out.route = rec.route if rec.route != "pending" else (result.route if result else "error")
            out.llm_calls = rec.llm_calls
            if rec.llm_request is not None and rec.llm_first_token is not None:
                out.first_token_ms = (rec.llm_first_token - rec.llm_request) * 1000
            out.reply = result.reply if result else chat_turn.reply
            out.intent = result.intent if result else None
            out.flow = result.flow if result else None
            if out.route in NO_MODEL_ROUTES:
                out.category = "none"
                continue
            if out.route == "error" or llm.last_model_turn is None:
                out.failure = (result.error if result and result.error else None) or "no answer from the model"
                continue
            turn = llm.last_model_turn
            out.reply = str(turn.get("reply", ""))
            out.intent, out.category, out.flow = turn.get("intent"), turn.get("category"), turn.get("flow")
            out.slots = {k: turn.get(k) for k in ("location", "time")}
            if not out.reply.strip():
                out.failure = "empty_reply: the reply is blank"
                continue
            errors = domain.validate(turn, config.llm.reply_max_chars)
            if errors:
                out.failure = "schema: " + "; ".join(errors)
    return outcomes


# ---------------------------------------------------------------------------------------------
# The judge: the same server and model


JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "integer", "minimum": 1, "maximum": 5},
        "reason": {"type": "string", "maxLength": 120},
    },
    "required": ["score", "reason"],
    "additionalProperties": False,
}
JUDGE_PROMPT = (
    "당신은 시청 민원 안내 전화 상담원의 답변을 평가합니다. 발신자의 말과 상담원의 답변을 읽고 1~5점으로 "
    "매기십시오. 5: 발신자의 용건에 맞고 공손하며 짧고, 지어낸 정보가 없음. 3: 무난하지만 용건을 일부 놓침. "
    "1: 엉뚱하거나 틀린 정보를 지어냄. JSON 객체 하나만 출력하십시오: {\"score\": 정수, \"reason\": \"짧은 이유\"}"
)


def judge_request(config: Config, caller: str, reply: str, labels: str) -> dict[str, Any]:
    llm = config.llm
    if llm.dialect == "openai":
        rf = {"type": "json_schema", "json_schema": {"name": "judgement", "schema": JUDGE_SCHEMA, "strict": True}}
    else:
        rf = {"type": "json_object", "schema": JUDGE_SCHEMA}
    body: dict[str, Any] = {
        "model": llm.model,
        "messages": [{"role": "system", "content": JUDGE_PROMPT},
                     {"role": "user", "content": f"발신자: {caller}\n상담원 답변: {reply}\n기대한 용건: {labels}"}],
        "max_tokens": 96,
        "temperature": 0.0,
        "response_format": rf,
    }  # fmt: skip
    if llm.dialect == "openai":
        body["chat_template_kwargs"] = {"enable_thinking": False}
    return body


async def judge(client: httpx.AsyncClient, config: Config, out: Outcome, labels: str) -> None:
    """Ask the configured server to score one answer; an unusable judgement is a judge failure."""
    body = judge_request(config, out.expected.text, out.reply, labels)
    try:
        r = await client.post(f"{config.llm.base_url.rstrip('/')}/chat/completions", json=body)
        if r.status_code != 200:
            out.judge_failure = f"http_{r.status_code}: {r.text[:120]}"
            return
        choice = r.json()["choices"][0]
        if choice.get("finish_reason") == "length":
            out.judge_failure = "cut_off"
            return
        obj = json.loads(choice["message"]["content"])
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as e:
        out.judge_failure = f"{type(e).__name__}: {e}"[:160]
        return
    score = obj.get("score") if isinstance(obj, dict) else None
    if not isinstance(score, int) or isinstance(score, bool) or not 1 <= score <= 5:
        out.judge_failure = f"schema: score {score!r}"
        return
    out.judge_score = score


# ---------------------------------------------------------------------------------------------
# Audio turns and the TTS round trip


def edit_distance(ref, hyp) -> int:
    """Levenshtein distance between two sequences (characters or words; each edit costs 1)."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i]
        for j, h in enumerate(hyp, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h)))
        prev = cur
    return prev[-1]


def cer(reference: str, hypothesis: str) -> float:
    """Character error rate after removing spaces and punctuation (Levenshtein / reference length)."""
    ref = re.sub(r"[\W_]+", "", reference)
    hyp = re.sub(r"[\W_]+", "", hypothesis)
    if not ref:
        return 0.0 if not hyp else 1.0
    return edit_distance(ref, hyp) / len(ref)


def _whisper(config: Config):
    from bot.modelfiles.manifest import resolve_whisper_model
    from bot.stages.whisper import WhisperEngine

    return WhisperEngine(config.stt, resolve_whisper_model(config.stt, config.base_dir),
                         min_avg_logprob=config.stt.min_avg_logprob)  # fmt: skip


async def audio_turns(config: Config, secrets: Secrets, whisper, turn_timeout: float) -> list[dict[str, Any]]:
    """The bench's clips: Whisper, then one dialog turn each; route against the expected route."""
    from bot.tools.bench.turnset import load_turn_set  # the bench's own reader: checked, clips read

    rows = []
    for t in load_turn_set(AUDIO_TURNS).turns.values():
        res = await whisper.transcribe_async(t.pcm, t.rate, language=config.stt.language)
        row = {"id": t.id, "text": t.text, "expected_route": t.route, "transcript": res.text,
               "stt_cer": cer(t.text, res.text) if res.accepted else None, "route": None}  # fmt: skip
        if res.accepted and res.text.strip():
            outs = await run_dialog(config, secrets, [Expected("audio", 0, res.text.strip())], turn_timeout)
            row["route"] = "shortcut" if outs[0].route in NO_MODEL_ROUTES else outs[0].route
            row["failure"] = outs[0].failure
        else:
            row["route"] = f"no transcript ({res.rejected_reason})"
        rows.append(row)
    return rows


def tts_round_trip(config: Config, whisper, sentences: list[str]) -> dict[str, Any]:
    """Synthesize, transcribe, compare; the stand-in model gets a statement, not a number."""
    from bot import languages
    from bot.stages.supertonic import SupertonicEngine

    engine = SupertonicEngine(config.tts, base_dir=config.base_dir)
    if engine.is_standin:
        return {"standin": True, "model_dir": str(engine.model_dir)}
    rows = []
    for text in sentences:
        synth = engine.synthesize(text, 16000)
        res = whisper.transcribe(synth.pcm, synth.sample_rate, language=config.stt.language)
        heard = languages.get(languages.FIRST).normalize(res.text) if res.text else ""
        rows.append({"text": synth.normalized_text, "heard": res.text, "cer": cer(synth.normalized_text, heard)})
    return {"standin": False, "samples": rows, "cer_mean": statistics.fmean(r["cer"] for r in rows) if rows else None}


# ---------------------------------------------------------------------------------------------
# The report


def _pct(a: int, b: int) -> str:
    return f"{a}/{b} = {100 * a / b:.0f} %" if b else "n/a"


def _q(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def summarize(outcomes: list[Outcome]) -> dict[str, Any]:
    n = len(outcomes)
    failed = [o for o in outcomes if o.failure]
    causes: dict[str, int] = {}
    for o in failed:
        kind = o.failure.split(":", 1)[0]
        causes[kind] = causes.get(kind, 0) + 1

    def acc(attr: str) -> tuple[int, int]:
        scored = [o for o in outcomes if getattr(o.expected, attr) is not None]
        return sum(1 for o in scored if not o.failure and getattr(o, attr) == getattr(o.expected, attr)), len(scored)

    slot_pairs = [(o, k, v) for o in outcomes for k, v in o.expected.slots.items()]
    slots_right = sum(1 for o, k, v in slot_pairs if not o.failure and o.route == "llm" and slot_ok(v, o.slots.get(k)))
    no_model = sum(1 for o in outcomes if o.route in NO_MODEL_ROUTES)
    expected_no_model = sum(1 for o in outcomes if o.expected.route in NO_MODEL_ROUTES)
    route_right = sum(1 for o in outcomes if (o.route in NO_MODEL_ROUTES) == (o.expected.route in NO_MODEL_ROUTES))
    model_replies = [len(o.reply) for o in outcomes if o.answered_by_model]
    all_replies = [len(o.reply) for o in outcomes if o.reply and not o.failure]
    first = [o.first_token_ms for o in outcomes if o.first_token_ms is not None]
    judged = [o.judge_score for o in outcomes if o.judge_score is not None]
    return {
        "turns": n, "failures": len(failed), "failure_causes": causes,
        "intent": acc("intent"), "category": acc("category"), "flow": acc("flow"),
        "slots": (slots_right, len(slot_pairs)),
        "shortcut_hits": no_model, "shortcut_expected": expected_no_model, "route_agreement": route_right,
        "llm_calls_per_turn": sum(o.llm_calls for o in outcomes) / n if n else 0.0,
        "reply_chars_model": model_replies, "reply_chars_all": all_replies, "first_token_ms": first,
        "judge_scores": judged, "judge_failures": sum(1 for o in outcomes if o.judge_failure),
    }  # fmt: skip


def render(config: Config, s: dict[str, Any], outcomes: list[Outcome], dialogs: int, audio, tts, judged: bool,
           elapsed: float) -> str:  # fmt: skip
    llm = config.llm
    lines = [f"eval: {s['turns']} turns in {dialogs} dialogs against {llm.base_url} (model {llm.model}, dialect "
             f"{llm.dialect}) in {elapsed:.0f} s"]  # fmt: skip
    causes = ", ".join(f"{k} {v}" for k, v in sorted(s["failure_causes"].items()))
    lines.append(f"  failed (not scored, counted wrong)  {s['failures']}" + (f"  ({causes})" if causes else ""))
    for o in outcomes:
        if o.failure:
            lines.append(f"    - {o.expected.dialog}#{o.expected.index + 1} {o.expected.text!r}: {o.failure[:160]}")
    lines.append(f"  intent accuracy      {_pct(*s['intent'])}")
    lines.append(f"  category accuracy    {_pct(*s['category'])}")
    lines.append(f"  slot accuracy        {_pct(*s['slots'])}")
    lines.append(f"  flow accuracy        {_pct(*s['flow'])}")
    lines.append(f"  shortcut hit rate    {_pct(s['shortcut_hits'], s['turns'])} answered with no model call (shortcut "
                 f"or rule; expected {s['shortcut_expected']}); route agreement {_pct(s['route_agreement'], s['turns'])}")
    lines.append(f"  LLM calls per turn   {s['llm_calls_per_turn']:.2f}")
    mr = s["reply_chars_model"]
    if mr:
        lines.append(f"  reply length (chars) model answers: mean {statistics.fmean(mr):.0f}, p50 {_q(mr, 50):.0f}, "
                     f"p90 {_q(mr, 90):.0f}, max {max(mr)} (llm.reply_max_chars {llm.reply_max_chars})")  # fmt: skip
    else:
        lines.append("  reply length (chars) no model answer to measure")
    ft = s["first_token_ms"]
    if ft:
        lines.append(f"  first token (ms)     p50 {_q(ft, 50):.0f}, p90 {_q(ft, 90):.0f}, max {max(ft):.0f}")
    if judged:
        js = s["judge_scores"]
        mean = f"mean {statistics.fmean(js):.2f}/5 over {len(js)} answers" if js else "no usable judgement"
        lines.append(f"  judge (same server)  {mean}; {s['judge_failures']} judge failures")
    if audio is not None:
        if isinstance(audio, str):
            lines.append(f"  audio turns          skipped: {audio}")
        else:
            agree = sum(1 for r in audio if r["route"] == r["expected_route"])
            lines.append(f"  audio turns          route agreement {_pct(agree, len(audio))} (bench/turns.toml through "
                         f"Whisper {Path(config.stt.model).name})")  # fmt: skip
            for r in audio:
                lines.append(f"    - {r['id']}: heard {r['transcript']!r} -> {r['route']} (expected {r['expected_route']})")
    if tts is not None:
        if isinstance(tts, str):
            lines.append(f"  TTS round trip       skipped: {tts}")
        elif tts["standin"]:
            lines.append(f"  TTS round trip       not measured: the TTS model in {tts['model_dir']} is a STAND-IN "
                         "(random weights, it speaks noise); run `run_bot.py models` for the real voice")  # fmt: skip
        elif tts["samples"]:
            lines.append(f"  TTS round trip CER   mean {tts['cer_mean']:.3f} over {len(tts['samples'])} replies "
                         "(synthesize -> Whisper -> character error rate)")  # fmt: skip
    return "\n".join(lines)


async def _run(config: Config, args, secrets: Secrets) -> int:
    from bot.dialog.domain import load_domain
    from bot.ops.preflight import CheckReport, llm_rows, probe_llm

    domain = load_domain(config.path(config.llm.domain_file))
    dialogs = load_turns(Path(args.turns) if args.turns else DEFAULT_TURNS, domain)
    if args.limit:
        dialogs = dialogs[: args.limit]
    probe = await asyncio.to_thread(probe_llm, config, secrets.llm_api_key)
    if not probe.reachable or probe.turn is None or config.llm.model not in probe.models:
        report = CheckReport()
        llm_rows(report, config, secrets.llm_api_key, probe)
        print(report.table() if report.notes else "\n".join(f"LLM {r.item}: {r.status} {r.detail}" for r in report.rows))
        if not probe.reachable:
            return 1
        if config.llm.model not in probe.models:
            print("eval: refusing to score answers from a model other than llm.model", file=sys.stderr)
            return 1
        logger.warning("the probe's structured answer failed ({}); evaluating anyway", probe.problem)
    turn_timeout = config.llm.total_timeout_ms / 1000.0 + 30.0
    t0 = time.monotonic()
    outcomes: list[Outcome] = []
    for i, dialog in enumerate(dialogs, 1):
        outs = await run_dialog(config, secrets, dialog, turn_timeout)
        outcomes += outs
        bad = sum(1 for o in outs if o.failure)
        logger.info("eval dialog {}/{} {}: {} turns{}", i, len(dialogs), dialog[0].dialog, len(outs),
                    f", {bad} failed" if bad else "")  # fmt: skip
    audio: Any = None
    tts: Any = None
    whisper = None
    if args.audio or args.tts_samples > 0:
        try:
            whisper = await asyncio.to_thread(_whisper, config)
        except Exception as e:  # noqa: BLE001 - a missing Whisper model skips these parts, loudly
            audio = tts = f"Whisper not available: {e}"
    if args.audio and whisper is not None:
        audio = await audio_turns(config, secrets, whisper, turn_timeout)
    if args.judge:
        labels = {c.name: c.label for c in (*domain.intents, *domain.categories)}
        async with httpx.AsyncClient(timeout=httpx.Timeout(config.llm.total_timeout_ms / 1000 + 30, connect=3),
                                     headers={"Authorization": f"Bearer {secrets.llm_api_key}"}) as client:  # fmt: skip
            for o in outcomes:
                if o.answered_by_model:
                    want = " / ".join(labels.get(x, x) for x in (o.expected.intent, o.expected.category) if x)
                    await judge(client, config, o, want or "알 수 없음")
    if args.tts_samples > 0 and whisper is not None:
        replies = list(dict.fromkeys(o.reply for o in outcomes if o.answered_by_model))[: args.tts_samples]
        try:
            tts = await asyncio.to_thread(tts_round_trip, config, whisper, replies)
        except Exception as e:  # noqa: BLE001
            tts = f"TTS not available: {type(e).__name__}: {e}"
    summary = summarize(outcomes)
    print(render(config, summary, outcomes, len(dialogs), audio if args.audio else None,
                 tts if args.tts_samples > 0 else None, args.judge, time.monotonic() - t0))  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(  # noqa: ASYNC240 - once, when the command ends
            {"summary": summary, "turns": [dataclasses.asdict(o) for o in outcomes], "audio": audio,
             "tts": tts}, ensure_ascii=False, indent=1, default=str))  # fmt: skip
    return 1 if summary["failures"] else 0


def run_eval(config: Config, args) -> int:
    """The command: local LLM child or in-process fake when asked, then the evaluation."""
    from bot.modelfiles.local_llm import serving_llm

    secrets = Secrets.from_env(config)
    try:
        if getattr(args, "fake_llm", False):
            from bot.testing.fake_llm import FakeLLM
            from bot.testing.keyword_llm import keyword_responder

            with FakeLLM(model=config.llm.model, responder=keyword_responder, first_token_delay=0.05,
                         token_delay=0.002) as fake:  # fmt: skip
                llm = dataclasses.replace(config.llm, base_url=fake.base_url, backend="server")
                return asyncio.run(_run(dataclasses.replace(config, llm=llm), args, secrets))
        with serving_llm(config) as llm_server:
            return asyncio.run(_run(llm_server.ready(), args, secrets))
    except EvalError as e:
        print(f"eval error: {e}", file=sys.stderr)
        return 2
