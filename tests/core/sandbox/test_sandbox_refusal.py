"""Where namespaces are refused (a default Docker or Kubernetes pod), the sandbox fails closed and says
what the deployment must grant (docs/DEPLOY.md, "The sandbox in a container").

The refusal is real: a child process runs under a seccomp filter that fails ``unshare`` with EPERM,
as the default container profiles do, and starts a sandbox through the production code path
(``tests/helpers/deny_unshare.py``); the worker's namespace set-up meets the refusal and the
sandbox handle turns its report into the error a pair's episodes carry.
"""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from envduels_dagster.core.sandbox.refusal import namespaces_refused, refusal_message
from tests.helpers.paths import REPO


@pytest.mark.skipif(sys.platform != "linux" or platform.machine() != "x86_64", reason="an x86-64 seccomp filter")
@pytest.mark.parametrize("launcher", ["exec", "fork_server"])
def test_a_refused_unshare_fails_closed_with_the_fix_named(launcher):
    proc = subprocess.run([sys.executable, "-m", "tests.helpers.deny_unshare", launcher], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout
    assert "STARTED" not in out, "the sandbox ran environment code without its namespaces"
    assert "KIND sandbox_unavailable" in out, proc.stdout + proc.stderr
    message = out.split("MESSAGE ", 1)[1]
    assert "unshare: Operation not permitted" in message  # what failed
    for fix in ("seccomp", "AppArmor", "--cap-add SYS_ADMIN", "capabilities.add: [SYS_ADMIN]",
                "runtimeClassName: gvisor", "hostUsers: false", "bwrap"):
        assert fix in message, fix  # what to grant
    assert 'docs/DEPLOY.md, "5. The sandbox in a container"' in message
    assert (REPO / "docs/DEPLOY.md").read_text().count("## 5. The sandbox in a container") == 1  # the pointer holds


def test_other_set_up_failures_keep_the_plain_hint():
    assert namespaces_refused("[Errno 1] unshare: Operation not permitted")
    assert namespaces_refused("[Errno 28] unshare: No space left on device")  # user.max_user_namespaces = 0
    plain = refusal_message("isolate the network for environment code", "unknown reason", "isolate_network")
    assert "set isolate_network=False knowingly" in plain and "SYS_ADMIN" not in plain
