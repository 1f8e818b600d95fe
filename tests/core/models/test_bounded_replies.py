"""Bounded replies: a 512 MB body or a gzip bomb from a provider is refused after max_reply_bytes, on the
lean client and on litellm, retried as a malformed reply, and the orchestrator's memory stays bounded
(peak RSS measured in a child process, against `envduels serve-sim --hostile`)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import pytest

from envduels_dagster.core.models import Gateway, LLMError, RetryPolicy
from envduels_dagster.core.models.registry import load_registry
from tests.helpers.sim_server import MESSAGES, SimServerProcess


@pytest.fixture(scope="module")
def huge():
    srv = SimServerProcess("--hostile", "huge")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def bomb():
    srv = SimServerProcess("--hostile", "gzip-bomb")
    yield srv
    srv.stop()


def registry_for(tmp_path, base: str, client: str):
    path = tmp_path / f"models-{client}.yaml"
    path.write_text(f"models:\n  - name: m\n    model: openai/novice\n    api_base: {base}\n    client: {client}\n"
                    "    max_reply_bytes: 1048576\n")
    return load_registry(path)


@pytest.mark.parametrize("client", ["fast", "litellm", "litellm-full"])
@pytest.mark.parametrize("which", ["huge", "bomb"])
def test_an_oversized_reply_is_refused_early_and_retried_as_malformed(which, client, request, tmp_path):
    srv = request.getfixturevalue(which)
    gateway = Gateway(registry_for(tmp_path, srv.base, client),
                      policy=RetryPolicy(max_attempts=2, base_delay_s=0.01))

    async def main():
        try:
            await gateway.chat("m", MESSAGES, seed=0)
        finally:
            await gateway.aclose()

    if client.startswith("litellm"):
        from envduels_dagster.core.models.litellm_backend import litellm_module

        litellm_module()  # its import (~5 s) is not the reply's time
    t0 = time.perf_counter()
    with pytest.raises(LLMError) as exc:
        asyncio.run(main())
    assert exc.value.error_class == "malformed_response" and exc.value.retried_errors == ["malformed_response"]
    assert "over max_reply_bytes = 1048576" in exc.value.message and "raise max_reply_bytes" in exc.value.message
    assert time.perf_counter() - t0 < 15  # two refusals, neither read 512 MB nor inflated 1 GiB


def test_a_declared_length_over_the_cap_is_refused_before_the_body():
    from envduels_dagster.core.models.fast_client import MalformedBody, inflate

    packed = __import__("zlib").compress(b"a" * 5000)
    assert inflate(packed, "deflate", 5000) == b"a" * 5000
    with pytest.raises(MalformedBody, match="over max_reply_bytes = 4999"):
        inflate(packed, "deflate", 4999)


PEAK = """
import asyncio, json, resource, sys
from envduels_dagster.core.play.episode import play_episode
from envduels_dagster.core.models import Gateway, RetryPolicy
from envduels_dagster.core.protocol import EnvironmentSpec
from envduels_dagster.core.models.registry import load_registry
from envduels_dagster.core.models.litellm_backend import litellm_module
from tests.helpers.environments import UNKNOWN

litellm_module()  # imported before the baseline: its own size is not the reply's
spec = EnvironmentSpec(env_id="crossroads", author="t", class_name="Crossroads", max_turns=6, source=UNKNOWN,
                       hint="h", benchmark_seeds=[0])
out = {}
async def main():
    for path in sys.argv[1:]:
        gateway = Gateway(load_registry(path), policy=RetryPolicy(max_attempts=3, base_delay_s=0.01))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        rec = await play_episode(gateway, "m", spec, 0, "cold")
        await gateway.aclose()
        out[path] = [rec.status, rec.stop_reason, rec.retry_errors, before,
                     resource.getrusage(resource.RUSAGE_SELF).ru_maxrss]
asyncio.run(main())
print(json.dumps(out))
"""


@pytest.mark.slow  # ~30 s on a loaded 2-core machine (a child process importing litellm, 12 hostile replies)
def test_hostile_replies_end_episodes_incomplete_with_bounded_memory(huge, bomb, tmp_path):
    paths = [registry_for(tmp_path / which, srv.base, client).path
             for which, srv in (("huge", huge), ("bomb", bomb)) for client in ("fast", "litellm", "litellm-full")
             if (tmp_path / which).mkdir(exist_ok=True) is None]
    proc = subprocess.run([sys.executable, "-c", PEAK, *map(str, paths)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(results) == 6
    for status, stop_reason, errors, before_kib, after_kib in results.values():
        assert (status, stop_reason) == ("incomplete", "llm_error")
        assert errors == ["malformed_response"] * 3
        # 3 attempts of a 512 MB body or a 1 GiB bomb each; main took 1.6-2.1 GB here. Bounded: < 64 MB more.
        assert after_kib - before_kib < 64 * 1024, (before_kib, after_kib)
