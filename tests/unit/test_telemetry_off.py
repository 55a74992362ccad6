"""Telemetry is off until the process configures an OpenTelemetry SDK: the store seam then makes no
span at all. Run in a fresh interpreter, since providers are process-wide and another test may
install one."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
from sgam.graph import telemetry
assert telemetry.read({"tenant": "t"}) is telemetry._OFF
assert telemetry.write_batch([], False) is telemetry._OFF
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
trace.set_tracer_provider(TracerProvider())
with telemetry.read({"tenant": "t"}) as span:
    assert span.is_recording()
print("ok")
"""


def test_no_span_until_an_sdk_is_configured() -> None:
    env = {"PATH": "/usr/bin:/bin", "OTEL_SDK_DISABLED": "false"}
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
