"""End to end in a real browser: the WebRTC QA page against `python run_bot.py` in its own process.

Debian's headless Chromium (driven by Playwright's Python package, no downloaded browser) opens
the QA page, clicks 연결, and talks through a fake microphone fed from a WAV (leading silence, so
the greeting plays first, then "hello, how are you today"). The bot is the phone bot's serve path
(``bot.testing.lab_server``): real Silero VAD on the browser's audio, the structured LLM stage
against a fake vLLM, a stand-in Supertonic model, and the fixed-delay STT, which answers every
segment Silero accepts (250 ms of speech or more) with the clip's words after 300 ms. With real
Whisper, a loaded machine decided how the clip was cut into turns (a CI run under stress-ng: Whisper
at 1.2x real time, the second segment's transcript past the turn's STT wait, a turn of its own with
no speech marks, so no latency figure); real Whisper is the phone tests' (tests/call). We check that
the greeting arrives as audible audio, that the page shows the transcript, the reply, the route and
the latency, and that the hung-up call was recorded as a QA call.

Skipped locally when /usr/bin/chromium or playwright is missing; with CI_REQUIRE_BROWSER=1 (CI)
it never skips.
"""

from __future__ import annotations

import os
import re
import time
import wave
from pathlib import Path

import httpx
import pytest

from bot.testing.process import BotProcess
from bot.testing.responders import DEFAULT_TURN
from tests.conftest import FIXTURES, offline_bot_overrides

CHROMIUM = Path("/usr/bin/chromium")
REQUIRE_BROWSER = bool(os.environ.get("CI_REQUIRE_BROWSER"))
QA_TOKEN = "qa-test-token"
AUTH = {"X-QA-Token": QA_TOKEN}
if not REQUIRE_BROWSER:
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)", allow_module_level=True)
    pytest.importorskip("playwright.sync_api", reason="needs the playwright package (requirements-dev.txt)")
from playwright.sync_api import sync_playwright  # noqa: E402

pytestmark = pytest.mark.slow  # real bot processes over real sockets: not in the quick subset

HEARD = "Hello, how are you today?"  # en_hello.wav's words, as the fixed-delay STT answers them
LEAD_SILENCE_SECS = 8.0  # the greeting (~5.5 s with the stand-in voice) plays before the caller talks
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
    "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream",
]


@pytest.fixture(scope="module")
def bot(tmp_path_factory, whisper_dir, standin_tts_dir, fake_llm):
    tmp = tmp_path_factory.mktemp("qa_bot")
    proc = BotProcess(
        offline_bot_overrides(whisper_dir, standin_tts_dir, fake_llm.base_url, tmp / "records"),
        env={"QA_ACCESS_TOKEN": QA_TOKEN},
        log_path=tmp / "bot.log",
        entry=("-m", "bot.testing.lab_server", "--stt-text", HEARD, "--stt-delay-ms", "300"),
    )
    try:
        proc.wait_ready()
        yield proc
    finally:
        proc.stop()


def make_mic_wav(path: Path, lead_secs: float) -> Path:
    """en_hello.wav after `lead_secs` of silence, with a little silence after it."""
    with wave.open(str(FIXTURES / "en_hello.wav"), "rb") as src:
        rate, width, channels = src.getframerate(), src.getsampwidth(), src.getnchannels()
        speech = src.readframes(src.getnframes())
    silence = lambda secs: b"\x00" * (int(rate * secs) * width * channels)  # noqa: E731
    with wave.open(str(path), "wb") as out:
        out.setnchannels(channels)
        out.setsampwidth(width)
        out.setframerate(rate)
        out.writeframes(silence(lead_secs) + speech + silence(2.0))
    return path


def wait_for(get, ok, *, timeout: float, interval: float = 0.2):
    """Poll ``get()`` until ``ok(value)``; return the value (the last one in the assertion message)."""
    deadline = time.monotonic() + timeout
    while True:
        value = get()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s; last value: {value!r}")
        time.sleep(interval)


def wait_js(page, expression: str, timeout: int) -> None:
    """``page.wait_for_function`` without its ``eval`` in the page, which the page's CSP forbids
    (as it should): poll the expression from outside (``page.evaluate``); ``timeout`` in ms."""
    wait_for(lambda: page.evaluate(expression), bool, timeout=timeout / 1000, interval=0.1)


def test_qa_page_call_in_a_real_browser(bot, fake_llm, tmp_path):
    fake_llm.reset()
    mic = make_mic_wav(tmp_path / "qa_mic.wav", LEAD_SILENCE_SECS)
    # %noloop: Chromium plays the file once, then silence (by default it loops it).
    args = CHROMIUM_ARGS + [f"--use-file-for-fake-audio-capture={mic}%noloop"]
    started = time.time()
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),  # a fresh --user-data-dir
            executable_path=str(CHROMIUM),
            headless=True,
            args=args,
        )
        try:
            page = context.pages[0] if context.pages else context.new_page()
            console: list[str] = []
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
            page.goto(f"{bot.base_url}/")  # the token is typed in, never in the URL
            assert page.title() == "민원 전화 QA"
            assert page.locator("#status").inner_text() == "대기 중"
            page.fill("#token", QA_TOKEN)
            page.click("#connect")
            try:
                wait_js(page, "window.qa.state === 'connected'", timeout=20_000)
                assert page.locator("#status").inner_text() == "통화 중"
                assert page.locator("#hangup").is_enabled()

                # The greeting: audible audio on the remote track, and its sentences on the page.
                wait_js(page, "window.qa.botPeakRms > 0.01", timeout=20_000)
                wait_js(page,
                    "window.qa.replies.some(t => t.includes('안녕하세요'))", timeout=20_000
                )
                assert page.locator("#call-id").inner_text().startswith("qa-")
                # WebRTC's own view: audio packets with energy (stats lag playout a little: poll).
                inbound = wait_for(lambda: page.evaluate("window.qa.inboundAudio()"),
                                   lambda s: s and s["totalAudioEnergy"] > 0, timeout=10)
                assert inbound["bytesReceived"] > 0, inbound

                # The spoken turn: transcript, reply, route and voice-to-voice latency.
                wait_js(page,
                    "window.qa.transcripts.some(t => t.toLowerCase().includes('hello'))", timeout=30_000
                )
                assert any("hello" in t.lower() for t in page.locator("#log .msg.caller .text").all_inner_texts())
                wait_js(page,
                    "Array.from(document.querySelectorAll('#log .msg.bot .text'))"
                    ".some(e => e.textContent.includes('네, 확인해 드릴게요.'))",
                    timeout=20_000,
                )
                # The first model turn heard has a figure.
                wait_js(page,
                    "Array.from(document.querySelectorAll('#turns tr[data-route=\"llm\"] td.v2v'))"
                    ".some(e => e.textContent.includes('ms'))",
                    timeout=20_000,
                )
                heard = page.locator('#turns tr[data-route="llm"]').filter(
                    has=page.locator("td.v2v", has_text=re.compile(r"\d ms$"))
                )
                cells = heard.first.locator("td").all_inner_texts()
                assert cells[1].split(" (")[0] == "LLM"
                assert cells[2] == DEFAULT_TURN["intent"] and cells[3] == DEFAULT_TURN["flow"]
                assert "category=roads" in cells[4]
                assert re.fullmatch(r"[\d,]+ ms", cells[5]), cells
                turn = page.evaluate(
                    "Object.values(window.qa.turns).find(t => t.route === 'llm' && t.voice_to_voice_ms)"
                )
                assert turn["voice_to_voice_ms"] > 0  # how long is the machine's (the bench)
                assert turn["slots"].get("category") == "roads"
                call_id = page.evaluate("window.qa.callId")

                page.click("#hangup")
                assert page.locator("#status").inner_text() == "통화 종료"
            except Exception:
                print("\n".join(console[-50:]))
                print("page turns:", page.evaluate("JSON.stringify(window.qa && window.qa.turns)"))
                print(bot.log()[-6000:])
                raise
        finally:
            context.close()

    # Hung up: the call finishes on the server and its turns are recorded as QA turns.
    wait_for(bot.healthz, lambda h: h["active_calls"] == 0, timeout=15)
    turns = bot.turns(since=started - 1)
    mine = [t for t in turns if t["call_id"] == call_id]
    assert mine and all(t["qa"] is True for t in mine)
    assert mine[0]["route"] == "greeting"
    llm_turns = [t for t in mine if t["route"] == "llm"]
    assert any("voice_to_voice" in t["stages_ms"] for t in llm_turns), llm_turns
    assert fake_llm.calls >= 1
    user_msgs = [m for m in fake_llm.requests[0]["messages"] if m["role"] == "user"]
    assert "hello" in user_msgs[-1]["content"].lower()
    assert f"QA call {call_id}: browser disconnected" in bot.log()
    assert time.time() - started < 60


def test_page_is_self_contained_and_signalling_refuses_bad_requests(bot):
    page = httpx.get(f"{bot.base_url}/", timeout=5)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for asset in ("/qa/static/qa.js", "/qa/static/qa.css"):
        resp = httpx.get(f"{bot.base_url}{asset}", timeout=5)
        assert resp.status_code == 200, asset
        assert not re.search(r"https?://", resp.text), f"{asset} must not load anything from the network"
    assert not re.search(r"(src|href)=\"(https?:)?//", page.text)
    # The desk's security headers (tests/app/test_abuse_capacity.py checks them in process too).
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY" and page.headers["referrer-policy"] == "no-referrer"
    offer = f"{bot.base_url}/api/offer"
    # Without the QA token (env QA_ACCESS_TOKEN on the server) nobody opens a call.
    assert httpx.post(offer, json={"sdp": "v=0\r\nm=audio", "type": "offer"}, timeout=5).status_code == 401
    assert httpx.post(offer, json={}, headers={"X-QA-Token": "wrong"}, timeout=5).status_code == 401
    assert httpx.post(f"{offer}?token={QA_TOKEN}", json={}, timeout=5).status_code == 401  # never from the URL
    assert httpx.patch(offer, json={"pc_id": "x", "candidates": []}, timeout=5).status_code == 401
    assert httpx.post(offer, content=b"not json", headers=AUTH, timeout=5).status_code == 400
    assert httpx.post(offer, json={"type": "offer"}, headers=AUTH, timeout=5).status_code == 400
    assert httpx.post(offer, json={"sdp": "v=0", "type": "offer"}, headers=AUTH, timeout=5).status_code == 400  # no audio
    assert httpx.patch(offer, json={"pc_id": "nope", "candidates": []}, headers=AUTH, timeout=5).status_code == 404
    assert "QA call rejected" not in bot.log()
