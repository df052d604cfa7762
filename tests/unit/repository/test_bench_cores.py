"""bench/cores.py: a phase's control plane and clients on cores apart, and back after."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from bench import cores


def test_the_control_plane_gets_the_first_half_and_the_clients_the_rest() -> None:
    assert cores.split([1, 0]) == ([0], [1])
    assert cores.split([0, 1, 2, 3, 5]) == ([0, 1], [2, 3, 5])
    with pytest.raises(ValueError, match="2 cores"):
        cores.split([3])


def _tasks(pid: int) -> list[int]:
    return [int(t) for t in os.listdir(f"/proc/{pid}/task")]


@pytest.fixture
def child() -> Iterator[int]:
    """A process with a second thread: binding must reach every thread, not the main one."""
    code = (
        "import threading, time; "
        "threading.Thread(target=time.sleep, args=(60,)).start(); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        for _ in range(500):
            if len(_tasks(proc.pid)) >= 2:
                break
            time.sleep(0.01)
        assert len(_tasks(proc.pid)) >= 2, "the child's second thread never started"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_every_thread_is_bound_apart_then_back(child: int) -> None:
    everywhere = sorted(os.sched_getaffinity(0))
    server, clients = cores.split(everywhere)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with cores.Separated([child], [other.pid]) as sep:
            assert {tuple(cores.allowed(t)) for t in _tasks(child)} == {tuple(server)}
            assert cores.allowed(other.pid) == clients
            assert sep.describe()["control_plane_cpus"] == server
        for tid in [*_tasks(child), other.pid]:
            assert cores.allowed(tid) == everywhere
    finally:
        other.kill()
        other.wait()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_a_process_gone_meanwhile_is_no_error() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert cores.bind(gone.pid, [0]) == 0
    with cores.Separated([gone.pid], []):
        pass


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_separate_cores_is_refused_outside_the_fairness_phases() -> None:
    from bench import main

    with pytest.raises(SystemExit):
        main.parse_args(["--separate-cores"])
    assert main.parse_args(["--fairness", "--separate-cores"]).separate_cores
