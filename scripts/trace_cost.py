"""What a call's end pays for its trace on the event loop: ``CallTracing.call_finished`` timed N times for a
call of 10 turns (about 80 spans) against a collector in this process that is live, slow (answers after 3 s)
or down (docs/production.md "Traces").

    .venv/bin/python scripts/trace_cost.py [live|slow|down ...] [--calls N]     # all three, 100 calls each
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.config import TelemetryConfig  # noqa: E402
from bot.telemetry.latency import TurnRecord  # noqa: E402
from bot.telemetry.tracing import CallTracing, resource_attributes  # noqa: E402
from bot.testing.otlp_receiver import OTLPReceiver  # noqa: E402


def call_records(call_id: str, t: float, turns: int = 10) -> list[TurnRecord]:
    """A greeting and ``turns`` model turns, 10 s apart, with every mark a real call sets."""
    out = [TurnRecord(call_id, 0, route="greeting", stream_start=t, first_sentence=t + 0.01, tts_first_audio=t + 0.05,
                      first_audio_out=t + 0.06)]
    for i in range(1, turns + 1):
        s = t + 10 * i
        out.append(TurnRecord(call_id, i, route="llm", llm_calls=1, speech_end=s, vad_stop=s + 0.2, stt_done=s + 0.41,
                              turn_end=s + 0.45, llm_request=s + 0.46, llm_first_token=s + 0.61,
                              first_sentence=s + 0.76, tts_first_audio=s + 0.79, first_audio_out=s + 0.8))
    return out


def measure(kind: str, calls: int) -> str:
    receiver = OTLPReceiver(delay_secs=3.0 if kind == "slow" else 0.0).start()
    if kind == "down":
        receiver.stop()  # the port, with nothing listening
    tracer = CallTracing.from_config(TelemetryConfig(otlp_endpoint=receiver.endpoint), resource_attributes(
        providers={"vocoder": ["CPUExecutionProvider"]}, hatches=[], worker="trace-cost"))
    assert tracer is not None
    t0 = time.time() - 200
    took = []
    for i in range(calls):
        records = call_records(f"CA{i:032d}", t0)
        began = time.perf_counter()
        tracer.call_finished(f"CA{i:032d}", records, started=t0, ended=t0 + 120)
        took.append((time.perf_counter() - began) * 1000)
        time.sleep(0.02)  # calls end apart, as on a line
    took.sort()
    if kind != "down":
        receiver.stop()
    return (f"{kind}: {calls} calls of 10 turns: call_finished p50 {took[len(took) // 2]:.2f} ms, "
            f"p90 {took[int(len(took) * 0.9)]:.2f} ms, max {took[-1]:.2f} ms")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kinds", nargs="*", help="live, slow or down (default: all three)")
    p.add_argument("--calls", type=int, default=100)
    args = p.parse_args()
    if set(args.kinds) - {"live", "slow", "down"}:
        p.error(f"not a collector: {sorted(set(args.kinds) - {'live', 'slow', 'down'})} (live, slow or down)")
    logging.disable(logging.CRITICAL)  # the exporter's retries and failures against the down collector
    for kind in args.kinds or ["live", "slow", "down"]:
        print(measure(kind, args.calls), flush=True)


if __name__ == "__main__":
    main()
