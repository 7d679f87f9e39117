"""``localjudge.serving`` argument checks and ``OpenAICompatBackend(extra_body=)`` (fast tier)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from localjudge.errors import BackendError, ConfigError
from localjudge.serving import LLAMA_SERVER_ENV, LlamaServer, free_port, llama_server_binary


@pytest.fixture
def fake_binary(tmp_path):
    p = tmp_path / "llama-server"
    p.write_text("#!/bin/sh\nexit 3\n")
    p.chmod(0o755)
    return p


@pytest.fixture
def gguf(tmp_path):
    p = tmp_path / "m.gguf"
    p.write_bytes(b"GGUF")
    return p


def test_binary_from_env(monkeypatch, fake_binary):
    monkeypatch.setenv(LLAMA_SERVER_ENV, str(fake_binary))
    assert llama_server_binary() == fake_binary


def test_binary_env_not_executable_is_refused(monkeypatch, tmp_path):
    p = tmp_path / "nope"
    p.write_text("x")
    monkeypatch.setenv(LLAMA_SERVER_ENV, str(p))
    with pytest.raises(ConfigError, match="not an executable"):
        llama_server_binary()


def test_command_line(fake_binary, gguf):
    s = LlamaServer(gguf, parallel=3, n_ctx=999, n_threads=1, n_batch=64, alias="j",
                    binary=fake_binary)
    s.port = 1234
    cmd = s.command()

    def val(flag):
        return cmd[cmd.index(flag) + 1]

    assert cmd[0] == str(fake_binary)
    assert val("--parallel") == "3" and val("--ctx-size") == "999"
    assert val("--flash-attn") == "off" and val("--cache-ram") == "0"
    assert "--no-cache-prompt" in cmd
    on = LlamaServer(gguf, binary=fake_binary, cache_prompt=True, flash_attn=True)
    on.port = 1
    assert "--no-cache-prompt" not in on.command()
    assert "on" == on.command()[on.command().index("--flash-attn") + 1]


@pytest.mark.parametrize("kw", [{"parallel": 0}, {"n_ctx": True}, {"n_threads": 1.5},
                                {"cache_ram_mib": -2}, {"timeout_s": 0}])
def test_bad_arguments(kw, fake_binary, gguf):
    with pytest.raises(ConfigError):
        LlamaServer(gguf, binary=fake_binary, **kw)


def test_missing_model_is_refused(fake_binary, tmp_path):
    with pytest.raises(ConfigError, match="model file not found"):
        LlamaServer(tmp_path / "absent.gguf", binary=fake_binary)


def test_server_that_exits_is_an_error_with_its_log(fake_binary, gguf, tmp_path):
    s = LlamaServer(gguf, binary=fake_binary, timeout_s=30, log=tmp_path / "srv.log")
    with pytest.raises(BackendError, match="exited with 3"):
        s.start()
    assert s._slot_dir is None  # cleaned up


def test_free_port_is_bindable():
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


# ---- extra_body ------------------------------------------------------------------------------
class _Echo(BaseHTTPRequestHandler):
    bodies: ClassVar[list[dict]] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Echo.bodies.append(body)
        out = {"choices": [{"text": "", "logprobs": {"top_logprobs": [{"5": -0.01}]}}]}
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_extra_body_is_sent_and_recorded():
    from localjudge.backends.openai_compat import OpenAICompatBackend

    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        b = OpenAICompatBackend(f"http://127.0.0.1:{srv.server_port}", "m",
                                chat_template="{{ messages[0]['content'] }}",
                                extra_body={"cache_prompt": False, "top_k": -1})
        d = b.score_distribution("hi", min_mass=0)
    finally:
        srv.shutdown()
    assert _Echo.bodies[-1]["cache_prompt"] is False and _Echo.bodies[-1]["top_k"] == -1
    assert d.signature.params["extra_body"] == {"cache_prompt": False, "top_k": -1}
    assert d.probs[d.labels.index("5")] == 1.0


@pytest.mark.parametrize("extra, match", [
    ({"max_tokens": 5}, "may not set"),
    ({"logprobs": 3}, "may not set"),
    ({"x": float("nan")}, "JSON"),
    ({"x": object()}, "JSON"),
    ("cache_prompt", "mapping"),
])
def test_bad_extra_body(extra, match):
    from localjudge.backends.openai_compat import OpenAICompatBackend

    with pytest.raises(ConfigError, match=match):
        OpenAICompatBackend("http://127.0.0.1:9", "m", mode="chat", extra_body=extra)


def test_missing_binary_is_a_config_error(gguf, tmp_path):
    with pytest.raises(ConfigError, match="not an executable"):
        LlamaServer(gguf, binary=tmp_path / "absent" / "llama-server")


def test_not_started_server_refuses_calls(fake_binary, gguf):
    s = LlamaServer(gguf, binary=fake_binary)
    with pytest.raises(BackendError, match="not running"):
        s.erase_slots()
    with pytest.raises(BackendError, match="not running"):
        s.get_json("/props")
    s.stop()
    s.stop()  # idempotent


def test_bad_health_answer_stops_the_process(tmp_path, gguf):
    """A binary that answers /health with garbage until the timeout: start() fails with a
    BackendError and the child process is gone afterwards (nothing leaks)."""
    script = tmp_path / "llama-server"
    script.write_text(
        "#!/usr/bin/env python3\n"
        "import socket, sys\n"
        "port = int(sys.argv[sys.argv.index('--port') + 1])\n"
        "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "s.bind(('127.0.0.1', port)); s.listen()\n"
        "while True:\n"
        "    c, _ = s.accept(); c.recv(1024); c.sendall(b'garbage\\r\\n\\r\\n'); c.close()\n")
    script.chmod(0o755)
    srv = LlamaServer(gguf, binary=script, timeout_s=2)
    with pytest.raises(BackendError, match="not ready"):
        srv.start()
    assert srv.proc is not None and srv.proc.poll() is not None
    assert not srv.running and srv._slot_dir is None
