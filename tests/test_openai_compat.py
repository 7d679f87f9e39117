"""OpenAICompatBackend against scripted local HTTP servers (default tier: no model, no network).

A stdlib HTTP server on 127.0.0.1 answers ``/v1/completions`` and ``/v1/chat/completions``
with hand-written top-k logprobs (exact arithmetic in the comments), and injects faults:
dropped connections, 500s, 429s with ``Retry-After`` and permanent failures.
"""

from __future__ import annotations

import json
import math
import re
import socket
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from localjudge.backends import load_backend
from localjudge.backends.openai_compat import OpenAICompatBackend, normalize_token_text
from localjudge.errors import BackendError, ConfigError, LowMassError

TEMPLATE = ("{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}"
            "{% if add_generation_prompt %}<assistant>{% endif %}")
LN = math.log


def _completion_body(top: dict[str, float]) -> dict:
    return {"choices": [{"text": max(top, key=top.get), "index": 0,
                         "logprobs": {"tokens": [max(top, key=top.get)],
                                      "token_logprobs": [max(top.values())],
                                      "top_logprobs": [top], "text_offset": [0]}}]}


def _chat_body(positions: list[list[tuple[int | None, str, float]]]) -> dict:
    content = []
    for pos in positions:
        tops = [({"id": i} if i is not None else {}) | {"token": t, "logprob": lp}
                for i, t, lp in pos]
        content.append({**tops[0], "top_logprobs": tops})
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": "x"},
                         "logprobs": {"content": content}}]}


class _Server:
    """A scripted OpenAI-compatible server; ``handler(path, body, attempt) -> (status, obj)``
    where obj None with status 0 means: drop the connection without answering."""

    def __init__(self, handler):
        self.handler = handler
        self.attempts: Counter[str] = Counter()
        self.bodies: list[dict] = []
        lock = threading.Lock()
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_GET(self):
                self.send_response(404)
                self.end_headers()

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n))
                key = json.dumps(body, sort_keys=True)
                with lock:
                    outer.attempts[key] += 1
                    attempt = outer.attempts[key]
                    outer.bodies.append(body)
                status, obj, headers = outer.handler(self.path, body, attempt)
                if status == 0:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                data = json.dumps(obj).encode()
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def _backend(url: str, **kw) -> OpenAICompatBackend:
    kw.setdefault("chat_template", TEMPLATE)
    kw.setdefault("mode", "completion")
    kw.setdefault("backoff_s", 0.001)
    return OpenAICompatBackend(url, "m", **kw)


@pytest.mark.parametrize("text, norm", [("5", "5"), (" 5", "5"), ("▁5", "5"), ("Ġ5", "5"),
                                        ("  10", "10"), ("\n5", "\n5"), ("", "")])
def test_normalize_token_text(text, norm):
    assert normalize_token_text(text) == norm


def test_completion_text_match_is_lower_bound():
    # top-k: "4" .5, " 4" .2, "5" .1, "\n" .1 -> returned .9, not returned .1
    top = {"4": LN(.5), " 4": LN(.2), "5": LN(.1), "\n": LN(.1)}
    with _Server(lambda p, b, a: (200, _completion_body(top), None)) as s:
        d = _backend(s.url).score_distribution("Rate.", prefill="Score: ", min_mass=0.5)
        sent = s.bodies[-1]
    assert sent["prompt"] == "<user>Rate.\n<assistant>Score: " and sent["max_tokens"] == 1
    assert d.logprobs[3] == pytest.approx(LN(.7)) and d.logprobs[4] == pytest.approx(LN(.1))
    assert d.mass == pytest.approx(.8)                      # .5 + .2 + .1
    assert d.pruned_mass == pytest.approx(.1)               # 1 - .9 never returned
    assert d.expected == pytest.approx((4 * .7 + 5 * .1) / .8)   # 4.125
    assert d.signature.params["label_match"] == "text"
    assert d.signature.params["mass_bound"] == "lower"
    assert d.signature.backend == "openai"


def test_chat_ids_count_tokens_that_decode_alike_once_each():
    # ids 100 and 300 both decode to "4": keyed by id both count (.5 + .1), " 4" (.2) too;
    # id 100 repeated must not count twice.
    pos = [(100, "4", LN(.5)), (200, " 4", LN(.2)), (300, "4", LN(.1)), (5, "5", LN(.1)),
           (100, "4", LN(.5)), (9, "\n", LN(.05))]
    with _Server(lambda p, b, a: (200, _chat_body([pos]), None)) as s:
        d = _backend(s.url, mode="chat").score_distribution("Rate.", min_mass=0)
        sent = s.bodies[-1]
    assert sent["logprobs"] is True and sent["top_logprobs"] == 20
    assert sent["messages"] == [{"role": "user", "content": "Rate."}]
    assert d.signature.params["label_match"] == "id"
    assert math.exp(d.logprobs[3]) == pytest.approx(.8)     # .5 + .2 + .1
    assert d.mass == pytest.approx(.9)
    assert d.pruned_mass == pytest.approx(.05)              # 1 - (.5+.2+.1+.1+.05)
    assert d.signature.template_sha256 == "server"


def test_multi_token_label_chain_and_boundary_rule():
    # 0-10. Root: "1" .5, " 2" .3, "\n" .1 (.1 not returned). After "1": "0" .4, " " .5,
    # "\n" .1. P(10) = .5*.4 = .2; P(1) = .5*(1 - .4 - 0) = .3; P(2) = .3; mass .8;
    # expected = (1*.3 + 2*.3 + 10*.2)/.8 = 3.625.
    def h(path, body, attempt):
        if body["prompt"].endswith("S: 1"):
            return 200, _completion_body({"0": LN(.4), " ": LN(.5), "\n": LN(.1)}), None
        return 200, _completion_body({"1": LN(.5), " 2": LN(.3), "\n": LN(.1)}), None

    with _Server(h) as s:
        d = _backend(s.url).score_distribution("Rate.", range(11), prefill="S: ",
                                               min_mass=0)
        n = len(s.bodies)
    assert n == 2
    assert d.as_dict()["10"] == pytest.approx(.2 / .8)
    assert d.as_dict()["1"] == pytest.approx(.3 / .8)
    assert d.mass == pytest.approx(.8)
    assert d.expected == pytest.approx(3.625)


def test_chat_prefill_modes():
    pos = [[(1, "{", 0.0)], [(2, '"score": ', 0.0)], [(3, "4", LN(.6)), (4, "3", LN(.4))]]
    with _Server(lambda p, b, a: (200, _chat_body(pos), None)) as s:
        with pytest.raises(ConfigError, match="prefill"):
            _backend(s.url, mode="chat").score_distribution("Rate.", prefill="S: ")
        d = _backend(s.url, mode="chat", chat_prefill="scan").score_distribution(
            "Rate.", prefill="S: ", min_mass=0)
        assert d.signature.params["read_at"] == "first_label_token:2"
        assert d.as_dict()["4"] == pytest.approx(.6)
        _backend(s.url, mode="chat", chat_prefill="continue").score_distribution(
            "Rate.", prefill="S: ", min_mass=0)
        sent = s.bodies[-1]
    assert sent["continue_final_message"] is True and sent["add_generation_prompt"] is False
    assert sent["messages"][-1] == {"role": "assistant", "content": "S: "}


@pytest.mark.parametrize("kw, match", [
    ({"boundary": "all"}, "boundary"), ({"temperature": 0.5}, "temperature"),
    ({"min_mass": 2}, "min_mass")])
def test_refused_options(kw, match):
    b = _backend("http://127.0.0.1:9")
    with pytest.raises(ConfigError, match=match):
        b.score_distribution("Rate.", **kw)


@pytest.mark.parametrize("kw", [{"max_concurrency": 0}, {"timeout_s": 0}, {"max_retries": -1},
                                {"top_logprobs": 0}, {"mode": "grpc"}, {"chat_prefill": "x"}])
def test_bad_constructor_arguments(kw):
    with pytest.raises(ConfigError):
        _backend("http://127.0.0.1:9", **kw)


def test_completion_mode_needs_a_template():
    with pytest.raises(ConfigError, match="chat template"):
        OpenAICompatBackend("http://127.0.0.1:9", "m", mode="completion")


def test_registry_name():
    b = load_backend("openai", "http://127.0.0.1:9/v1", "m", mode="chat")
    assert isinstance(b, OpenAICompatBackend) and b.base_url == "http://127.0.0.1:9"


def test_low_mass_keeps_distribution():
    top = {"\n": LN(.9), "4": LN(.05)}
    with (_Server(lambda p, b, a: (200, _completion_body(top), None)) as s,
          pytest.raises(LowMassError) as ei):
        _backend(s.url).score_distribution("Rate.")
    assert ei.value.distribution.mass == pytest.approx(.05)


def test_400_is_not_retried():
    with _Server(lambda p, b, a: (400, {"error": "context length"}, None)) as s:
        with pytest.raises(BackendError, match="HTTP 400"):
            _backend(s.url, max_retries=3).score_distribution("Rate.")
        assert len(s.bodies) == 1


def _faulty(path, body, attempt):
    """item-i: i%5==1 drop once; i%5==2 500 twice; i%5==3 429 once (Retry-After 0);
    i%7==6 always 500 (error after retries); else answer. Answer: "3" .5, "4" .5."""
    i = int(re.search(r"item-(\d+)", body["prompt"]).group(1))
    if i % 7 == 6:
        return 500, {"error": "boom"}, None
    if i % 5 == 1 and attempt == 1:
        return 0, None, None
    if i % 5 == 2 and attempt <= 2:
        return 500, {"error": "busy"}, None
    if i % 5 == 3 and attempt == 1:
        return 429, {"error": "slow down"}, {"Retry-After": "0"}
    return 200, _completion_body({"3": LN(.5), "4": LN(.5)}), None


def test_faulty_server_every_item_scored_or_errored_once(tmp_path):
    n = 30
    out = tmp_path / "items.jsonl"
    with _Server(_faulty) as s:
        b = _backend(s.url, max_retries=2, max_concurrency=4)
        recs = b.score_batch([f"Rate item-{i}." for i in range(n)], out=out, prefill="S: ")
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(r["index"] for r in lines) == list(range(n))          # none lost, none twice
    assert [r.index for r in recs] == list(range(n))
    for r in lines:
        i = r["index"]
        if i % 7 == 6:
            assert r["error"] == "backend_error" and r["distribution"] is None
            assert "3 attempts" in r["message"]
        else:
            assert r["error"] is None
            assert r["distribution"]["expected"] == pytest.approx(3.5)    # never 0
    assert b.n_retries > 0


def test_unreachable_server_is_a_per_item_error(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    b = _backend(f"http://127.0.0.1:{port}", max_retries=1, timeout_s=2)
    recs = b.score_batch(["a", "b"], out=tmp_path / "x.jsonl")
    assert [r.error for r in recs] == ["backend_error", "backend_error"]
    assert all(r.distribution is None for r in recs)


# ---- replicas: a list of base URLs ----------------------------------------------------------
def _ok(path, body, attempt):
    return 200, _completion_body({"3": LN(.25), "4": LN(.75)}), None


def test_replicas_share_the_load_and_agree(tmp_path):
    with _Server(_ok) as a, _Server(_ok) as b:
        be = _backend([a.url, b.url + "/v1/"], max_concurrency=2)
        assert be.base_urls == (a.url, b.url)
        recs = be.score_batch([f"item {i}" for i in range(12)], prefill="S: ")
    assert all(r.error is None and r.distribution.expected == pytest.approx(3.75)
               for r in recs)
    assert len(a.bodies) > 0 and len(b.bodies) > 0          # both replicas served
    assert len(a.bodies) + len(b.bodies) == 12                # one request per item


def test_dead_replica_requests_move_to_the_live_one(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    out = tmp_path / "items.jsonl"
    with _Server(_ok) as live:
        be = _backend([dead, live.url], max_retries=1, max_concurrency=1, timeout_s=5)
        recs = be.score_batch([f"item {i}" for i in range(6)], prefill="S: ", out=out)
    assert all(r.error is None for r in recs)                 # a retry avoids the replica
    assert len(live.bodies) == 6                              # that just failed
    assert sorted(json.loads(x)["index"] for x in out.read_text().splitlines()) == \
        list(range(6))


def test_all_replicas_failing_names_them():
    with socket.socket() as s1, socket.socket() as s2:
        s1.bind(("127.0.0.1", 0))
        s2.bind(("127.0.0.1", 0))
        urls = [f"http://127.0.0.1:{s.getsockname()[1]}" for s in (s1, s2)]
    be = _backend(urls, max_retries=1, timeout_s=2)
    with pytest.raises(BackendError, match="failed after 2 attempts"):
        be.score_distribution("x", prefill="S: ")


class _Props(_Server):
    def __init__(self, template):
        super().__init__(_ok)
        tmpl = template

        class H(self.httpd.RequestHandlerClass):
            def do_GET(self):
                data = json.dumps({"chat_template": tmpl, "bos_token": "", "eos_token": ""})
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data.encode())

        self.httpd.RequestHandlerClass = H


def test_replicas_with_different_templates_are_refused():
    with _Props(TEMPLATE) as a, _Props(TEMPLATE + " ") as b, _Props(TEMPLATE) as c:
        ok = OpenAICompatBackend([a.url, c.url], "m")
        assert ok.mode == "completion" and ok.chat_template == TEMPLATE
        with pytest.raises(ConfigError, match="different chat templates"):
            OpenAICompatBackend([a.url, b.url], "m")


@pytest.mark.parametrize("urls, match", [
    ([], "non-empty list"),
    (["http://127.0.0.1:1", "ftp://x"], "http"),
    (["http://127.0.0.1:1/v1", "http://127.0.0.1:1/"], "same server twice"),
    (("http://127.0.0.1:1", 5), "http"),
])
def test_bad_replica_lists(urls, match):
    with pytest.raises(ConfigError, match=match):
        OpenAICompatBackend(urls, "m", mode="chat")


# ---- malformed answers are errors, never a wrong score ---------------------------------------
def _raw(body_text: str, status: int = 200):
    """A server answering every POST with ``body_text`` verbatim."""
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            data = body_text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


def _completion_top(top_json: str) -> str:
    return '{"choices": [{"text": "", "logprobs": {"top_logprobs": [' + top_json + ']}}]}'


@pytest.mark.parametrize("body, match", [
    (_completion_top('{"4": NaN, "5": -0.3}'), "logprob nan"),
    (_completion_top('{"4": Infinity}'), "logprob inf"),
    (_completion_top('{"4": 0.5, "5": -0.3}'), "logprob 0.5"),
    (_completion_top('{"4": 1000.0}'), "logprob 1000"),
    (_completion_top('{"4": "abc"}'), "non-numeric"),
    (_completion_top('{"4": null}'), "non-numeric"),
    (_completion_top('{"4": -0.1, "5": -0.2, "3": -0.3}'), "sum to"),
    (_completion_top('[{"token": "4"}]'), "non-numeric"),
    (_completion_top('["4", -0.1]'), "unreadable"),
    ('{"choices": [{"logprobs": {"top_logprobs": {"4": -0.1}}}]}', "not a list"),
    ('{"choices": [{"logprobs": {"content": "abc"}}]}', "unreadable"),
    ('{"choices": [{"logprobs": {"content": [5]}}]}', "unreadable"),
    (('{"choices": [{"logprobs": {"content": [{"id": 1, "token": "4", "prob": 0.9, '
     '"top_probs": []}]}}]}'), "neither top_logprobs nor logprob"),
    ('{"choices": [{"logprobs": "x"}]}', "no logprobs object"),
    ("<html>oops</html>", "attempts"),
])
def test_malformed_logprobs_are_backend_errors(body, match):
    httpd, url = _raw(body)
    try:
        with pytest.raises(BackendError, match=match):
            _backend(url, max_retries=0).score_distribution("x", prefill="S: ", min_mass=0)
    finally:
        httpd.shutdown()


def test_tiny_positive_logprob_is_float_noise():
    httpd, url = _raw(_completion_top('{"4": 1e-9}'))
    try:
        d = _backend(url).score_distribution("x", prefill="S: ", min_mass=0)
    finally:
        httpd.shutdown()
    assert d.mass == 1.0 and d.expected == 4.0


def test_malformed_items_in_a_batch_are_per_item_errors(tmp_path):
    httpd, url = _raw(_completion_top('{"4": NaN}'))
    try:
        recs = _backend(url, max_retries=0).score_batch(["a", "b"], prefill="S: ",
                                                        out=tmp_path / "o.jsonl")
    finally:
        httpd.shutdown()
    assert [r.error for r in recs] == ["backend_error", "backend_error"]
    for line in (tmp_path / "o.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))


def test_extra_body_cannot_change_what_logprobs_mean_and_is_copied():
    for key in ("n_probs", "n_predict", "max_completion_tokens", "post_sampling_probs",
                "logit_bias"):
        with pytest.raises(ConfigError, match="may not set"):
            _backend("http://127.0.0.1:9", extra_body={key: 1})
    with pytest.raises(ConfigError, match="plain JSON"):
        _backend("http://127.0.0.1:9", extra_body={1: "x"})
    nested = {"o": {"k": 1}}
    b = _backend("http://127.0.0.1:9", extra_body=nested)
    nested["o"]["k"] = 5
    assert b.extra_body == {"o": {"k": 1}}


def test_api_key_must_fit_a_header():
    with pytest.raises(ConfigError, match="api_key"):
        _backend("http://127.0.0.1:9", api_key="kéy€")


def test_dead_replica_cools_down():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with _Server(_ok) as live:
        be = _backend([dead, live.url], max_retries=0, max_concurrency=2)
        recs = be.score_batch([f"item {i}" for i in range(20)], prefill="S: ")
    assert sum(r.error is not None for r in recs) <= 2      # the dead one is tried ~once
    assert be.n_requests <= 22


@pytest.mark.parametrize("status, match", [(401, "HTTP 401"), (500, "HTTP 500")])
def test_props_errors_are_not_a_silent_switch_to_chat(status, match):
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with pytest.raises(ConfigError, match=match):
            OpenAICompatBackend(f"http://127.0.0.1:{httpd.server_address[1]}", "m")
    finally:
        httpd.shutdown()


def test_score_batch_refuses_bad_prompts_and_kwargs():
    b = _backend("http://127.0.0.1:9")
    with pytest.raises(ConfigError, match="sequence of prompts"):
        b.score_batch("abc")
    with pytest.raises(ConfigError, match="sequence of prompts"):
        b.score_batch(p for p in ["a"])
    with pytest.raises(ConfigError, match="prefil"):
        b.score_batch(["a"], prefil="S: ")


def test_generate_checks_text_seed_and_stop():
    httpd, url = _raw('{"choices": [{"text": null}]}')
    try:
        with pytest.raises(BackendError, match="no generated text"):
            _backend(url).generate("x")
        with pytest.raises(ConfigError, match="seed"):
            _backend(url).generate("x", seed=1.7)
        with pytest.raises(ConfigError, match="stop"):
            _backend(url).generate("x", stop=["", "a"])
    finally:
        httpd.shutdown()


def test_retry_after_http_date():
    from localjudge.backends._http import _retry_after_s

    assert _retry_after_s("2") == 2.0
    assert _retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0    # in the past
    assert _retry_after_s("soon") is None and _retry_after_s(None) is None


# ---- G-Eval over HTTP with parallel workers --------------------------------------------------
def _by_item(path, body, attempt):
    """A distribution that depends on the item number in the prompt: item-k -> mass on 1..5
    with P(5) = (k % 5 + 1) / 10 and the rest on 3."""
    m = re.search(r"item-(\d+)", body.get("prompt", ""))
    k = int(m.group(1)) if m else 0
    p5 = (k % 5 + 1) / 10
    return 200, _completion_body({"5": LN(p5), "3": LN(1 - p5)}), None


def test_evaluate_in_parallel_equals_sequential(tmp_path):
    from localjudge.judges import GEval, LLMTestCase, LLMTestCaseParams, evaluate

    cases = [LLMTestCase(input=f"q{i}", actual_output=f"answer item-{i}") for i in range(12)]
    with _Server(_by_item) as s:
        def metric():
            return GEval("Coherence", evaluation_steps=["Read.", "Rate."], model=_backend(
                s.url, max_concurrency=4), evaluation_params=[LLMTestCaseParams.ACTUAL_OUTPUT])

        seq = evaluate(cases, [metric()], out=tmp_path / "seq.jsonl")
        par = evaluate(cases, [metric()], out=tmp_path / "par.jsonl", max_workers=4)
    assert [r.raw_score for r in par] == [r.raw_score for r in seq]
    assert [r.raw_score for r in seq] == pytest.approx(
        [3 + 2 * (i % 5 + 1) / 10 for i in range(12)])
    lines = [json.loads(x) for x in (tmp_path / "par.jsonl").read_text().splitlines()]
    assert sorted(d["case_id"] for d in lines) == sorted(c.case_id for c in cases)


def test_evaluate_in_parallel_needs_thread_safe_backends():
    from localjudge.backends.fake import FakeBackend
    from localjudge.judges import GEval, LLMTestCase, evaluate

    m = GEval("Coherence", evaluation_steps=["Rate."], model=FakeBackend({"5": 1.0}))
    with pytest.raises(ConfigError, match="thread-safe"):
        evaluate([LLMTestCase(input="q", actual_output="a")], [m], max_workers=2)
    with pytest.raises(ConfigError, match="max_workers"):
        evaluate([LLMTestCase(input="q", actual_output="a")], [m], max_workers=0)


# ---- second adversarial round -----------------------------------------------------------------
def test_props_503_is_waited_for_then_refused():
    import time

    calls = []

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            calls.append(1)
            ready = len(calls) > 2
            data = json.dumps({"chat_template": TEMPLATE}).encode() if ready else b"{}"
            self.send_response(200 if ready else 503)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        b = OpenAICompatBackend(url, "m", timeout_s=10)          # loading, then ready
        assert b.mode == "completion" and len(calls) == 3

        def always_503(self):
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        H.do_GET = always_503                                   # never ready
        t0 = time.monotonic()
        with pytest.raises(ConfigError, match="HTTP 503"):
            OpenAICompatBackend(url, "m", timeout_s=1.0)
        assert time.monotonic() - t0 < 5
    finally:
        httpd.shutdown()


@pytest.mark.parametrize("protocol, pad, delay_s, bound_s", [
    ("HTTP/1.0", 0, 0.1, 3.0),        # the whole body would take ~5 s
    ("HTTP/1.1", 400, 0.05, 2.0),     # Content-Length, ~7 s: cut per chunk (read1)
])
def test_trickling_server_hits_the_deadline(protocol, pad, delay_s, bound_s):
    import time

    class H(BaseHTTPRequestHandler):
        protocol_version = protocol

        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            data = _completion_top('{"4": -0.01}').encode() + b" " * pad
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            for i in range(0, len(data), 4):
                self.wfile.write(data[i:i + 4])
                self.wfile.flush()
                time.sleep(delay_s)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        b = _backend(f"http://127.0.0.1:{httpd.server_address[1]}", timeout_s=0.5,
                     max_retries=0)
        t0 = time.monotonic()
        with pytest.raises(BackendError, match="TimeoutError"):
            b.score_distribution("x", prefill="S: ")
        assert time.monotonic() - t0 < bound_s
    finally:
        httpd.shutdown()


@pytest.mark.parametrize("body", [
    _completion_top('{"5": -1' + "0" * 400 + "}"),
    "[" * 100000 + "]" * 100000,
])
def test_pathological_bodies_are_backend_errors(body):
    httpd, url = _raw(body)
    try:
        with pytest.raises(BackendError):
            _backend(url, max_retries=0).score_distribution("x", prefill="S: ", min_mass=0)
    finally:
        httpd.shutdown()


def test_a_4xx_does_not_cool_a_replica_down():
    httpd, url = _raw('{"error": "context overflow"}', status=400)
    try:
        b = _backend(url, max_retries=0)
        with pytest.raises(BackendError, match="HTTP 400"):
            b.score_distribution("x", prefill="S: ")
        assert b._http._cool_until == [0.0] and b._http._fails == [0]
    finally:
        httpd.shutdown()


@pytest.mark.parametrize("kw, match", [
    ({"seed": "x"}, "seed"), ({"model_sha256": 5}, "model_sha256"),
    ({"bos_token": 5}, "bos_token"),
])
def test_more_constructor_checks(kw, match):
    with pytest.raises(ConfigError, match=match):
        _backend("http://127.0.0.1:9", **kw)
    with pytest.raises(ConfigError, match="non-empty list"):
        OpenAICompatBackend(b"http://x", "m", mode="chat")


def test_score_batch_refuses_a_folder_and_a_bad_min_mass(tmp_path):
    b = _backend("http://127.0.0.1:9")
    with pytest.raises(ConfigError, match="folder"):
        b.score_batch(["a"], out=tmp_path)
    with pytest.raises(ConfigError, match="min_mass"):
        b.score_batch(["a"], min_mass=2)
    with pytest.raises(ConfigError, match="labels must be a sequence"):
        b.score_batch(["a"], 5)


def _steps_then(path, body, attempt):
    """Step generation (no prefill in the prompt) fails with 500 once, then answers steps
    that differ per call; scoring answers 4 with certainty."""
    _steps_then.n = getattr(_steps_then, "n", 0)
    if "Evaluation Steps" not in body.get("prompt", "") and "max_tokens" in body \
            and body.get("max_tokens", 0) > 1:
        _steps_then.n += 1
        if _steps_then.n == 1:
            return 500, {"error": "busy"}, None
        return 200, {"choices": [{"text": f"1. Step {_steps_then.n}.\n2. Rate."}]}, None
    return 200, _completion_body({"4": LN(1.0)}), None


def test_parallel_evaluate_generates_steps_once(tmp_path):
    from localjudge.judges import GEval, LLMTestCase, LLMTestCaseParams, evaluate

    _steps_then.n = 0
    cases = [LLMTestCase(input=f"q{i}", actual_output=f"a{i}") for i in range(12)]
    with _Server(_steps_then) as s:
        m = GEval("Coherence", criteria="Is it coherent?", model=_backend(s.url, max_retries=2),
                  evaluation_params=[LLMTestCaseParams.ACTUAL_OUTPUT])
        recs = evaluate(cases, [m], out=tmp_path / "o.jsonl", max_workers=6)
    assert all(r.error is None for r in recs)
    assert len({tuple(r.evaluation_steps) for r in recs}) == 1          # one set of steps
    assert all(r.signature["evaluation_steps"] == list(r.evaluation_steps) for r in recs)


def test_parallel_evaluate_step_failure_is_per_item_and_costs_one_generation(tmp_path):
    from localjudge.judges import GEval, LLMTestCase, LLMTestCaseParams, evaluate

    def no_steps(path, body, attempt):
        if body.get("max_tokens", 0) > 1:
            return 200, {"choices": [{"text": "I cannot."}]}, None
        return 200, _completion_body({"4": LN(1.0)}), None

    cases = [LLMTestCase(input=f"q{i}", actual_output=f"a{i}") for i in range(8)]
    with _Server(no_steps) as s:
        m = GEval("Coherence", criteria="Is it coherent?", model=_backend(s.url),
                  evaluation_params=[LLMTestCaseParams.ACTUAL_OUTPUT])
        recs = evaluate(cases, [m], out=tmp_path / "o.jsonl", max_workers=4)
        n_gen = sum(1 for b in s.bodies if b.get("max_tokens", 0) > 1)
    assert [r.error for r in recs] == ["parse_failure"] * 8
    assert n_gen == 1
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 8


def test_parallel_evaluate_keeps_finished_records_when_interrupted(tmp_path):
    import time

    from localjudge.judges import GEval, LLMTestCase, LLMTestCaseParams, evaluate

    def slow_first(path, body, attempt):
        if "a0" in body.get("prompt", ""):
            time.sleep(1.5)
        return 200, _completion_body({"4": LN(1.0)}), None

    cases = [LLMTestCase(input=f"q{i}", actual_output=f"a{i}") for i in range(10)]
    out = tmp_path / "o.jsonl"
    with _Server(slow_first) as s:
        m = GEval("Coherence", evaluation_steps=["Rate."], model=_backend(s.url),
                  evaluation_params=[LLMTestCaseParams.ACTUAL_OUTPUT])
        recs = evaluate(cases, [m], out=out, max_workers=3)
        assert all(r.error is None for r in recs)
        lines = out.read_text().splitlines()
    # completion order: the slow first item is written last, the others before it
    assert json.loads(lines[-1])["case_id"] == cases[0].case_id


def test_cli_geval_over_http_with_workers(tmp_path, capsys):
    from localjudge.cli import main

    inp = tmp_path / "cases.jsonl"
    inp.write_text("".join(json.dumps({"input": f"q{i}", "actual_output": f"answer item-{i}"})
                           + "\n" for i in range(6)))
    tmpl = tmp_path / "tmpl.jinja"
    tmpl.write_text(TEMPLATE)
    out = tmp_path / "out.jsonl"
    with _Server(_by_item) as a, _Server(_by_item) as b:
        rc = main(["geval", "--input", str(inp), "--out", str(out), "--backend", "openai",
                   "--url", f"{a.url},{b.url}", "--workers", "3", "--steps", "Read.|Rate.",
                   "--chat-template", str(tmpl), "--params", "input,actual_output"])
        served = len(a.bodies) + len(b.bodies)
    assert rc == 0 and served == 6
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    by_id = {r["case_id"]: r for r in recs}
    assert len(by_id) == 6 and all(r["error"] is None for r in recs)
    raw = sorted(r["raw_score"] for r in recs)
    assert raw == pytest.approx(sorted(3 + 2 * (i % 5 + 1) / 10 for i in range(6)))
    assert "6 scored" in capsys.readouterr().out


def test_cli_workers_need_a_server(tmp_path):
    from localjudge.cli import main

    inp = tmp_path / "cases.jsonl"
    inp.write_text(json.dumps({"input": "q", "actual_output": "a"}) + "\n")
    with pytest.raises(SystemExit, match="--workers > 1 needs --backend openai"):
        main(["geval", "--input", str(inp), "--out", str(tmp_path / "o.jsonl"),
              "--workers", "2"])
    with pytest.raises(SystemExit, match="needs --url"):
        main(["geval", "--input", str(inp), "--out", str(tmp_path / "o.jsonl"),
              "--backend", "openai"])


# ---- score_batch resume -------------------------------------------------------------------------
def test_score_batch_resumes_only_missing_and_failed(tmp_path):
    def flaky_once(path, body, attempt):
        if "item-3" in body["prompt"] and attempt == 1:
            return 400, {"error": "bad"}, None
        return _by_item(path, body, attempt)

    out = tmp_path / "o.jsonl"
    prompts = [f"Rate item-{i}." for i in range(6)]
    with _Server(flaky_once) as s:
        b = _backend(s.url, max_retries=0)
        first = b.score_batch(prompts, prefill="S: ", out=out)
        assert [r.error is None for r in first] == [True, True, True, False, True, True]
        n_after_first = len(s.bodies)
        again = b.score_batch(prompts, prefill="S: ", out=out, show_progress=True)
        assert len(s.bodies) == n_after_first + 1          # only item 3 was asked again
    assert all(r.error is None for r in again)
    assert [r.distribution.expected for r in again[:3]] == \
        [r.distribution.expected for r in first[:3]]
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 7 and [d["index"] for d in lines].count(3) == 2


def test_score_batch_resume_refuses_other_prompts_or_config(tmp_path):
    out = tmp_path / "o.jsonl"
    with _Server(_by_item) as s:
        b = _backend(s.url)
        b.score_batch(["Rate item-1.", "Rate item-2."], prefill="S: ", out=out)
        with pytest.raises(ConfigError, match="different prompt list"):
            b.score_batch(["Rate item-2.", "Rate item-1."], prefill="S: ", out=out)
        with pytest.raises(ConfigError, match="another configuration"):
            b.score_batch(["Rate item-1.", "Rate item-2."], prefill="Score: ", out=out)
        recs = b.score_batch(["Rate item-2."], prefill="Score: ", out=out, resume=False)
    assert len(recs) == 1 and len(out.read_text().splitlines()) == 1
    with pytest.raises(ConfigError, match="prompt 1 is not a prompt"):
        b.score_batch(["ok", 5], out=tmp_path / "x.jsonl")


def test_batch_runner_works_for_any_backend_one_at_a_time(tmp_path):
    from localjudge.backends._batch import score_batch
    from localjudge.backends.fake import FakeBackend

    fake = FakeBackend({"4": 0.75, "5": 0.25})
    recs = score_batch(fake, ["a", "b"], out=tmp_path / "o.jsonl")
    assert [r.distribution.expected for r in recs] == [4.25, 4.25]
    with pytest.raises(ConfigError, match="thread-safe"):
        score_batch(fake, ["a"], max_workers=2)
    with pytest.raises(ConfigError, match="max_workers"):
        score_batch(fake, ["a"], max_workers=0)
