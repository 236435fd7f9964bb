"""The hook client: what Claude Code or Qwen Code runs for each hook event.

Run as ``python -I -S _client.py AGENT EVENT`` with the hook's JSON on standard input.
It is on the user's path (the agent waits for it before its request), so it imports
nothing but built-in modules (``_socket``, ``os``, ``sys``: no ``site``, no ``json``,
no ``socket``, whose imports cost several times the interpreter's own start), hands the
event to the per-user recall service over a Unix socket, and prints the service's
answer (the hook's JSON output, or nothing). When no service answers it starts one,
detached, and prints nothing: that prompt goes without memory, the next ones find the
service warm. Any failure prints nothing and exits 0: memory never stops the agent.

The request: a first line ``AGENT EVENT``, then ``NAME=VALUE`` lines for the settings'
environment variables (the agent's environment, which the service does not share), an
empty line, then the hook's input as it came.
"""

import _socket
import os
import sys

#: Environment variables forwarded to the service (the settings' own, and the endpoint's).
_PREFIXES = ("ASYNCRECALL_", "OPENAI_BASE_URL", "OPENAI_API_KEY", "CLAUDE_CONFIG_DIR")
#: How long the client waits for the service's answer, in seconds; the service answers
#: from memory it holds, so only a wedged service ever reaches this.
_ANSWER_S = 0.5
#: Events that start a service when none runs: the start, a prompt, and a turn's or a
#: session's end (its turns are still to be extracted). A tool's end has nothing to say
#: to a service that is not there.
_STARTING = ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd")
#: The largest request handed to a starting service in its environment, in bytes.
_FIRST_MAX = 65536


def socket_path(environ: dict[str, str]) -> str:
    home = environ.get("ASYNCRECALL_HOME") or os.path.join(
        environ.get("HOME") or os.path.expanduser("~"), ".asyncrecall"
    )
    return os.path.join(home, "run", "hooks.sock")


def _read_stdin() -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(0, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _request(agent: str, event: str, payload: bytes, environ: dict[str, str]) -> bytes:
    lines = [agent + " " + event]
    for name, value in environ.items():
        if name.startswith(_PREFIXES) and "\n" not in value and "\r" not in value:
            lines.append(name + "=" + value)
    return ("\n".join(lines) + "\n\n").encode("utf-8", "surrogateescape") + payload


def _ask(path: str, request: bytes) -> bytes:
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(_ANSWER_S)
        sock.connect(path)
        sock.sendall(request)
        sock.shutdown(_socket.SHUT_WR)
        chunks: list[bytes] = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        sock.close()


def _start_service(environ: dict[str, str], request: bytes) -> None:
    """Start the service detached (a new session, standard streams on ``/dev/null``: the
    agent waits for the hook's output to close, never for the service), handing it this
    event to handle once it listens (the project's folder read, the prompt's recall
    started: its block can still reach the tool results)."""
    package_root = os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    )
    env = dict(environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    if len(request) < _FIRST_MAX and b"\0" not in request:
        env["ASYNCRECALL_HOOKS_FIRST"] = request.decode("utf-8", "surrogateescape")
    argv = [sys.executable, "-m", "asyncrecall.cli.hooks._service"]
    child = os.fork()
    if child:
        os.waitpid(child, 0)  # the middle process exits at once: no zombie is left
        return
    try:
        os.setsid()
        if os.fork():
            os._exit(0)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, 1024)
        os.execve(sys.executable, argv, env)
    finally:
        os._exit(1)


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        sys.stderr.write("usage: _client.py AGENT EVENT < hook-input.json\n")
        return 2
    agent, event = argv[1], argv[2]
    environ = dict(os.environ)
    try:
        payload = _read_stdin()
        path = socket_path(environ)
        request = _request(agent, event, payload, environ)
        try:
            answer = _ask(path, request)
        except (FileNotFoundError, ConnectionRefusedError):
            if event in _STARTING:
                os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
                _start_service(environ, request)
            return 0
        if answer:
            os.write(1, answer)
    except Exception:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
