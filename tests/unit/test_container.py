"""Container lifetime paths with a fake engine (the real-engine twins are tests/docker)."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from harness.errors import InfraError
from harness.runners.container import Container, LineSplitter


class FakeSdkContainer:
    def __init__(self, log: list[str], *, stop_error: Exception | None = None,
                 start_error: Exception | None = None) -> None:
        self.log, self.stop_error, self.start_error = log, stop_error, start_error
        self.status, self.id = "created", "c0ffee"

    def start(self) -> None:
        self.log.append("start")
        if self.start_error:
            raise self.start_error
        self.status = "running"

    def stop(self, timeout: int) -> None:
        self.log.append(f"stop({timeout})")
        if self.stop_error:
            raise self.stop_error
        self.status = "exited"

    def reload(self) -> None:
        pass

    def kill(self) -> None:
        self.log.append("kill")
        self.status = "exited"

    def remove(self, force: bool, v: bool) -> None:
        self.log.append("remove")


class FakeClient:
    def __init__(self, box: FakeSdkContainer) -> None:
        self.box = box
        self.containers = self
        self.created: dict[str, Any] = {}

    def create(self, image: str, command: list[str], **kwargs: Any) -> FakeSdkContainer:
        self.created = {"image": image, **kwargs}
        return self.box


def test_unique_name_and_run_label_then_removed() -> None:
    log: list[str] = []
    client = FakeClient(FakeSdkContainer(log))
    with Container(client, image="img", run_id="RUN1", options={}) as box:  # type: ignore[arg-type]
        assert box.name.startswith("harness-run1-")
    assert client.created["labels"]["org.harness.run"] == "RUN1"
    assert log == ["start", "stop(10)", "remove"]
    other = Container(client, image="img", run_id="RUN1", options={})  # type: ignore[arg-type]
    assert other.name != box.name


def test_start_failure_cleans_up_and_is_infra_error() -> None:
    import docker.errors

    log: list[str] = []
    box = FakeSdkContainer(log, start_error=docker.errors.APIError("no such device /dev/kfd"))
    c = Container(FakeClient(box), image="img", run_id="r", options={})  # type: ignore[arg-type]
    with pytest.raises(InfraError, match="cannot start container"):
        c.__enter__()
    assert log[-1] == "remove"


def test_stop_that_times_out_falls_through_to_kill_and_remove() -> None:
    log: list[str] = []
    box = FakeSdkContainer(log, stop_error=requests.exceptions.ConnectionError("read timeout"))
    box.status = "running"
    c = Container(FakeClient(box), image="img", run_id="r", options={})  # type: ignore[arg-type]
    c._container = box  # type: ignore[assignment]
    c.remove()
    assert log == ["stop(10)", "kill", "remove"]


def test_keep_env_var_keeps_the_container(monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HARNESS_KEEP_CONTAINER", "1")
    log: list[str] = []
    with Container(FakeClient(FakeSdkContainer(log)), image="i", run_id="r",  # type: ignore[arg-type]
                   options={}) as box:
        pass
    assert log == ["start"]
    assert f"docker rm -f {box.name}" in capsys.readouterr().err


def test_line_splitter_rebuilds_lines_across_chunks() -> None:
    lines: list[str] = []
    s = LineSplitter(lines.append)
    for chunk in (b"abc", b"def\nghi\n", b"\xe2\x82", b"\xac tail"):
        s.feed(chunk)
    s.close()
    assert lines == ["abcdef", "ghi", "\u20ac tail"]
