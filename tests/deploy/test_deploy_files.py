"""The deployment files docs/DEPLOY.md sends people to exist and are current (issue 46).

What runs the container path for real is deploy/cluster-check (slow, needs root and podman: not part of the
suite; its last result is in docs/BENCHMARKS.md). These cases are the cheap part: the guide names only files
that exist, the profiles it names are the ones shipped, and the committed seccomp profiles are what their
generator writes. The container case at the end runs only where cluster-check has built the image.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

DEPLOY_MD = REPO / "docs" / "DEPLOY.md"
SECCOMP = REPO / "deploy" / "seccomp"
HEADER = Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
IMAGE = "localhost/envduels-dagster:0.1.0"
NAMESPACE_CALLS = {"unshare", "setns", "mount", "umount2", "pivot_root", "clone", "clone3"}


def test_the_guide_names_only_deployment_files_that_exist():
    text = DEPLOY_MD.read_text()
    named = set(re.findall(r"(?<![\w/.-])(deploy/[\w./-]*\w)", text))
    assert {"deploy/Dockerfile", "deploy/cluster-check", "deploy/seccomp/envduels-sandbox.json",
            "deploy/apparmor/envduels-sandbox"} <= named, sorted(named)
    missing = sorted(p for p in named if not (REPO / p).exists())
    assert not missing, f"docs/DEPLOY.md names deploy files that do not exist: {missing}"


def test_the_pool_launcher_blocks_load_in_place_of_the_shipped_launcher(tmp_path):
    """deploy/pool-launcher.yaml's blocks, put in dagster-postgres.yaml's place as DEPLOY.md and cluster-check do,
    give an instance whose launcher starts runs on the two named machines and retries a failed run."""
    import dagster as dg
    import yaml

    config = yaml.safe_load((REPO / "deploy" / "dagster-postgres.yaml").read_text())
    config.update(yaml.safe_load((REPO / "deploy" / "pool-launcher.yaml").read_text()))
    del config["storage"]  # Postgres is not the point here: the instance's own SQLite files in tmp_path
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(config))
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        launcher = instance.run_launcher
        assert type(launcher).__name__ == "WorkerPoolRunLauncher"
        assert [(w.name, w.address) for w in launcher.workers] == [("machine-a", "machine-a:4000"),
                                                                     ("machine-b", "machine-b:4000")]
        assert launcher.machine_silent_seconds == 120.0 and launcher.supports_check_run_worker_health
        assert instance.run_retries_enabled and instance.run_retries_max_retries == 2
        assert instance.run_monitoring_enabled


def test_the_profiles_the_guide_configures_are_the_shipped_ones():
    text = DEPLOY_MD.read_text()
    seccomp = re.findall(r"seccompProfile: \{type: Localhost, localhostProfile: ([\w./-]+)\}", text)
    apparmor = re.findall(r"appArmorProfile: \{type: Localhost, localhostProfile: ([\w./-]+)\}", text)
    assert seccomp and apparmor, "the guide's securityContext example is gone"
    for name in seccomp:
        assert (SECCOMP / Path(name).name).is_file(), f"seccomp profile {name} is not under deploy/seccomp/"
    for name in apparmor:
        profile = REPO / "deploy" / "apparmor" / name
        assert profile.is_file() and f"profile {name} " in profile.read_text(), name


@pytest.mark.skipif(not HEADER.exists(), reason=f"{HEADER} missing (Debian: linux-libc-dev): the generator reads it")
def test_the_committed_seccomp_profiles_are_what_the_generator_writes(tmp_path):
    subprocess.run([sys.executable, str(SECCOMP / "make-profiles"), str(tmp_path)], check=True, capture_output=True)
    for name in ("envduels-sandbox.json", "no-namespaces.json"):
        assert (tmp_path / name).read_text() == (SECCOMP / name).read_text(), (
            f"deploy/seccomp/{name} is stale: run deploy/seccomp/make-profiles and commit the result")


def _allowed(profile: dict) -> set[str]:
    return {n for rule in profile["syscalls"] if rule["action"] == "SCMP_ACT_ALLOW" and not rule.get("args")
            for n in rule["names"]}


def test_the_two_profiles_differ_exactly_in_the_sandbox_namespace_calls():
    """What the fail-closed contrast in cluster-check rests on: no-namespaces.json is the sandbox profile
    minus the namespace calls (clone kept only without namespace flags), nothing else."""
    sandbox = json.loads((SECCOMP / "envduels-sandbox.json").read_text())
    refusing = json.loads((SECCOMP / "no-namespaces.json").read_text())
    assert sandbox["defaultAction"] == refusing["defaultAction"] == "SCMP_ACT_ERRNO"
    assert _allowed(sandbox) - _allowed(refusing) == NAMESPACE_CALLS
    assert _allowed(refusing) <= _allowed(sandbox)
    clone = [r for r in refusing["syscalls"] if r["names"] == ["clone"]]
    assert clone and clone[0]["args"][0]["op"] == "SCMP_CMP_MASKED_EQ" and clone[0]["args"][0]["valueTwo"] == 0
    assert not {"bpf", "kexec_load", "init_module", "perf_event_open"} & _allowed(sandbox)


@functools.cache
def _image_missing() -> str | None:
    if shutil.which("podman") is None:
        return "podman is not installed (the container check runs where deploy/cluster-check runs)"
    if os.getuid() != 0:
        return "podman runs the check as root"
    probe = subprocess.run(["podman", "image", "exists", IMAGE], capture_output=True)
    return None if probe.returncode == 0 else f"image {IMAGE} not built here (deploy/cluster-check builds it)"


@pytest.mark.slow  # ~20 s: two containers
@pytest.mark.skipif(_image_missing() is not None, reason=str(_image_missing()))
def test_in_the_container_the_sandbox_holds_with_the_profile_and_fails_closed_without():
    podman = ["podman", "--runtime", "runc", "--cgroup-manager=cgroupfs", "run", "--rm", "-i", "--network", "none",
              "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096", "--user", "0",
              "--uidmap", "0:2147483648:2147483647", "--gidmap", "0:2147483648:2147483647",
              "--cap-add", "SYS_ADMIN", "--cap-add", "NET_ADMIN", "--init", "--security-opt", "unmask=/proc/sys"]
    probe = (REPO / "deploy" / "sandbox-probe").read_text()
    held = subprocess.run([*podman, "--security-opt", f"seccomp={SECCOMP / 'envduels-sandbox.json'}", IMAGE,
                           "python3", "-", "self-check"], input=probe, capture_output=True, text=True, timeout=600)
    assert held.returncode == 0 and "self-check: 0 of 45 not passed" in held.stdout, held.stdout + held.stderr
    refused = subprocess.run([*podman, "--security-opt", f"seccomp={SECCOMP / 'no-namespaces.json'}", IMAGE,
                              "python3", "-", "refused"], input=probe, capture_output=True, text=True, timeout=600)
    assert refused.returncode == 0, refused.stdout + refused.stderr
    assert "RAN" not in refused.stdout and "exec: sandbox_unavailable cannot isolate" in refused.stdout, refused.stdout
