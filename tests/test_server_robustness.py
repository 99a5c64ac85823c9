"""`ptlint server` under what an editor session throws at it: a rule that raises,
a huge or pathological file, a client that goes away, a missing extra."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from lsp_harness import WAIT, editor, env, uri

DP = "import torch\nm = torch.nn.DataParallel(model)\n"


@pytest.mark.asyncio
async def test_a_rule_that_raises_leaves_the_others_and_the_server_working(tmp_path):
    async with editor(tmp_path, options={"select": ["PTL990", "PTL102"]}, test_rules=True) as ed:
        doc = ed.open(tmp_path / "boom.py", DP + "x = boom\n")
        assert [d.code for d in await ed.diagnostics(doc)] == ["PTL102"]
        ed.change(doc, DP + "x = boom\ny = boom\n")
        assert [d.code for d in await ed.diagnostics(doc)] == ["PTL102"]
        shown = [m.message for m in ed.client.messages]
        # told once, not at every keystroke
        assert len([m for m in shown if "internal error in PTL990" in m]) == 1, shown
        assert "RuntimeError: injected failure" in shown[0]


@pytest.mark.asyncio
async def test_huge_and_pathological_files(tmp_path):
    huge = "import torch\n" + ("x = 1\n" * 99 + "m = torch.nn.DataParallel(model)\n") * 200
    deep = "x = " + "(" * 5000 + ")" * 5000 + "\n"
    async with editor(tmp_path) as ed:
        big = ed.open(tmp_path / "huge.py", huge)  # 20,001 lines
        nested = ed.open(tmp_path / "deep.py", deep)
        small = ed.open(tmp_path / "small.py", DP)
        assert len(await ed.diagnostics(small)) == 1
        diagnostics = await ed.diagnostics(big)
        assert [d.range.start.line for d in diagnostics] == [100 * k + 100 for k in range(200)]
        [syntax] = await ed.diagnostics(nested)  # CPython rejects it too: a PTL000, no crash
        assert syntax.code == "PTL000"
        ed.change(small, "# still here\n" + DP)
        assert len(await ed.diagnostics(small)) == 1


def _message(obj: dict) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def _start(tmp_path, process_id=None, stdin=subprocess.PIPE):
    proc = subprocess.Popen([sys.executable, "-m", "ptlint", "server"], stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(tmp_path))
    return proc, _message({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"processId": process_id, "capabilities": {}}}) + \
        _message({"jsonrpc": "2.0", "method": "initialized", "params": {}})


def _open(tmp_path, text: str) -> bytes:
    return _message({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": {"uri": uri(tmp_path / "a.py"), "languageId": "python",
                         "version": 1, "text": text}}})


def test_the_client_going_away_mid_lint_stops_the_server(tmp_path):
    proc, hello = _start(tmp_path)
    big = "import torch\n" + "m = torch.nn.DataParallel(model)\n" * 5000
    proc.stdin.write(hello + _open(tmp_path, big))
    proc.stdin.close()  # the editor is gone: no shutdown, no exit
    assert proc.wait(timeout=WAIT) == 1
    assert b"Traceback" not in proc.stderr.read()


def test_exit_codes_follow_the_protocol(tmp_path):
    for shutdown, code in ((True, 0), (False, 1)):
        proc, hello = _start(tmp_path)
        bye = _message({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}) if shutdown else b""
        bye += _message({"jsonrpc": "2.0", "method": "exit"})
        out, err = proc.communicate(hello + _open(tmp_path, DP) + bye, timeout=WAIT)
        assert proc.returncode == code
        assert b'"id": 1' in out.replace(b'"id":1', b'"id": 1')  # it answered initialize
        assert b"Traceback" not in err


def test_a_dead_client_that_left_the_pipe_open_stops_the_server(tmp_path):
    """The client's process id is watched: a client killed without closing the
    server's input still ends the server."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    read, write = os.pipe()
    proc, hello = _start(tmp_path, process_id=gone.pid, stdin=read)
    os.close(read)
    try:
        os.write(write, hello)
        started = time.monotonic()
        assert proc.wait(timeout=WAIT) == 1
        assert time.monotonic() - started < WAIT
    finally:
        os.close(write)


def test_without_the_server_extra_it_says_what_to_install(tmp_path):
    code = ("import sys; sys.modules['pygls'] = None; from ptlint.cli import main; "
            "sys.exit(main(['server']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env(tmp_path), timeout=WAIT)
    assert proc.returncode == 2
    assert proc.stderr == ('error: `ptlint server` needs the language server libraries: pip '
                           'install pygls lsprotocol, or install ptlint with its extra: pip '
                           'install "/path/to/ptlint[server]"\n')
    assert proc.stdout == ""


@pytest.mark.asyncio
async def test_a_library_printing_cannot_corrupt_the_protocol(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(
        "import ptlint.engine.lint as lint\n"
        "_lint = lint.lint_text\n"
        "def noisy(*a, **k):\n"
        "    print('chatty library output')\n"
        "    return _lint(*a, **k)\n"
        "lint.lint_text = noisy\n")
    async with editor(tmp_path, pythonpath=tmp_path) as ed:
        doc = ed.open(tmp_path / "a.py", DP)
        assert [d.code for d in await ed.diagnostics(doc)] == ["PTL102"]
        ed.change(doc, "#\n" + DP)
        assert [d.code for d in await ed.diagnostics(doc)] == ["PTL102"]
