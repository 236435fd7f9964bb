"""The detached worker that runs extraction a command handed on at exit.

``run`` and ``chat`` never wait for background work: the session's scheduler hands
what it owes to :func:`hand_off`, which writes it to a hand-off file (see
:mod:`asyncrecall.agent._handoff`) and, unless a worker is already draining that
store's hand-offs (one at a time: it holds the store's drain lock), starts ``python -m
asyncrecall.cli._handoff_worker`` detached (a session of its own on POSIX, a process group
without a console on Windows: the terminal's Ctrl-C and hang-up do not reach it),
standard input a pipe, output to the hand-off folder's ``worker.log``. It holds the
drain lock from the command (the descriptor is inherited; on Windows, where a lock is
not, it takes the lock as the command lets go), reads its configuration from standard
input (the side model's endpoint and key, the store: nothing secret is written to disk
or put on a command line), runs every queued hand-off of the store, oldest first, and
exits when none is left. When the drain lock is held, the command only queues its
hand-off: the running worker takes it (so however many commands end at once, one
worker per store runs, with one process's memory). After a hand-off's extraction is
done, its session's cursor is dropped: that session has ended and will never extract
again (unless the hand-off says the session goes on: an agent's turn end, see
``asyncrecall hooks``).

A session that hands nothing on still looks at exit: when a stale hand-off is there,
it starts a worker for it. So a worker killed at any step costs a delay, not the work.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from asyncrecall import _platform
from asyncrecall._exceptions import AsyncRecallError
from asyncrecall.agent._extraction import is_preempted, maybe_consolidate
from asyncrecall.agent._handoff import Handoff, HandoffDir
from asyncrecall.memory import FolderStore, MemoryExtractor, Store
from asyncrecall.memory.extraction._consolidate import consolidation_gate
from asyncrecall.models import Model
from asyncrecall.models._traffic import background_requests

__all__ = ["MAX_ATTEMPTS", "WorkerConfig", "hand_off", "main", "release_workers", "start_worker"]

logger = logging.getLogger("asyncrecall.agent")

#: A hand-off whose extraction failed this many times (the endpoint down, say) is
#: given up, with a warning in the log; a worker that died does not count.
MAX_ATTEMPTS: Final = 3
MODULE: Final = "asyncrecall.cli._handoff_worker"
#: Times one worker asks again after its side query gave way to a main turn.
_GIVE_WAY_ROUNDS: Final = 5
# The worker starts at a low priority, before its imports (half a second of CPU): the
# command that started it is still ending, and the user's next one comes first.
_NICE: Final = _platform.low_priority()
#: How long a worker tries for the drain lock where the command cannot pass it on (it
#: lets go before the worker starts working; the system may take a moment).
_CLAIM_WAIT_S: Final = 5.0


class WorkerConfig(dict[str, Any]):
    """What a worker needs to rebuild the store and the side model (JSON, on stdin):
    ``store`` (``{"folder": path}`` or ``{"url": ..., "namespace": ...}``) and
    ``side`` (``{"base_url": ..., "model": ..., "api_key": ...}`` or ``{"local": true}``)."""


def hand_off(directory: HandoffDir, handoff: Handoff | None, config: WorkerConfig) -> bool:
    """Queue ``handoff`` (if any) and start a worker for the store's queue, unless one
    is draining it already (then it takes this one too).

    Returns whether a worker was started. With nothing owed and nothing queued, nothing
    happens (a look at one small folder). Never raises for a worker that cannot start:
    the hand-off stays, queued, for the next session.
    """
    try:
        if handoff is not None:
            directory.write(handoff)
        elif not directory.stale():
            return False
        drain = directory.take_drain()
    except OSError as exc:
        logger.warning("memory extraction hand-off failed, turns not extracted: %s", exc)
        return False
    if drain is None:
        return False  # a worker drains this store: it looks again before it exits
    try:
        return start_worker(directory, config, drain_fd=drain)
    finally:
        os.close(drain)  # the worker holds it now (or nobody: the next session starts one)


def start_worker(directory: HandoffDir, config: WorkerConfig, *, drain_fd: int) -> bool:
    """Start the worker process (detached), its configuration on its standard input,
    the store's drain lock (``drain_fd``) inherited.

    The worker reads its standard input to the end before it imports anything, and the
    end comes when this process ends (the pipe's write end is held until then, see
    :func:`release_workers`): its half second of imports never competes with this
    process's own exit for the CPU.
    """
    command = [*_NICE, sys.executable, "-c", _SHIM, "--dir", str(directory.root)]
    inherit = _platform.LOCK_INHERITED
    if inherit:
        command += ["--drain-fd", str(drain_fd)]
    try:
        log = directory.open_log()
    except OSError as exc:
        logger.warning("memory extraction hand-off: cannot open %s: %s", directory.log_path, exc)
        return False
    read_end, write_end = os.pipe()
    try:
        process = subprocess.Popen(
            command,
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=log,
            pass_fds=(drain_fd,) if inherit else (),
            **_platform.detached(),
        )
    except OSError as exc:
        os.close(write_end)
        logger.warning("memory extraction hand-off: cannot start a worker: %s", exc)
        return False
    finally:
        os.close(log)
        os.close(read_end)
    try:
        os.write(write_end, json.dumps(config).encode())  # a few hundred bytes: never blocks
    except OSError:  # it died at once: its hand-off is stale, the next session runs it
        os.close(write_end)
    else:
        _HELD.append(write_end)
    # The worker is not waited for: it outlives us. Forgetting the Popen would make
    # Python warn (ResourceWarning) that it still runs, so it is marked as reaped.
    process.returncode = 0
    return True


def release_workers() -> None:
    """Let the workers started here begin now rather than when this process ends (a
    process that goes on living after a hand-off: tests)."""
    while _HELD:
        os.close(_HELD.pop())


_HELD: list[int] = []
# Read the configuration (until this process's parent ends), then import the worker.
_SHIM: Final = (
    "import sys; config = sys.stdin.buffer.read(); "
    f"from {MODULE} import main; sys.exit(main(sys.argv[1:], config=config))"
)


# -- the worker ---------------------------------------------------------------------


def main(argv: Sequence[str] | None = None, *, config: bytes | None = None) -> int:
    """The worker: ``--dir`` the hand-off folder, ``--drain-fd`` its drain lock (held;
    without it, where a lock is not inherited, the worker takes the lock itself);
    the configuration as JSON (``config``, else standard input)."""
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}")
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--drain-fd", type=int)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s pid %(process)d %(name)s %(levelname)s: %(message)s",
    )
    try:
        raw = sys.stdin.buffer.read() if config is None else config
        parsed = json.loads(raw or b"null")
        if not isinstance(parsed, dict):
            raise ValueError("no configuration on standard input")
    except ValueError as exc:
        logger.warning("memory extraction worker: %s", exc)
        return 2
    drain = args.drain_fd
    if drain is None:  # the command could not pass its lock on: take it as it lets go
        drain = HandoffDir(args.dir).take_drain(wait=_CLAIM_WAIT_S)
        if drain is None:
            return 0  # another worker drains this store: it takes our hand-off too
    return asyncio.run(_work(HandoffDir(args.dir), WorkerConfig(parsed), drain))


async def _work(directory: HandoffDir, config: WorkerConfig, drain: int) -> int:
    try:
        store = _open_store(config["store"])
        model = _side_model(config["side"])
    except (AsyncRecallError, KeyError, TypeError, ValueError) as exc:
        logger.warning("memory extraction worker: cannot start: %s", exc)
        return 2
    try:
        extractor = MemoryExtractor(store, model)
        # Each session's hand-off file as this worker last saw it: a hand-off written
        # again since (an agent's next turn end) is run again, a failed one is not.
        tried: dict[str, _Version] = {}
        while True:
            claim = _next_stale(directory, tried)
            while claim is not None:
                session, fd = claim
                tried[session] = _version(directory, session)  # under its lock
                left = await _run_one(directory, extractor, session, fd)
                if left is not None:
                    tried[session] = left
                claim = _next_stale(directory, tried)
            # Let the drain lock go, then look once more: a command that found it held
            # queued its hand-off before it tried, so it is there now.
            os.close(drain)
            if not [s for s in directory.stale() if _new(directory, s, tried)]:
                break
            again = directory.take_drain()
            if again is None:
                break  # another worker drains now: it takes them
            drain = again
    finally:
        aclose = getattr(model, "aclose", None)
        if aclose is not None:
            await aclose()
        store.close()
    return 0


_Version = tuple[int, int] | None


def _version(directory: HandoffDir, session: str) -> _Version:
    """Which write of the session's hand-off file is there (an atomic replace makes a
    new file), ``None`` when there is none."""
    try:
        found = directory.path(session).stat()
    except OSError:
        return None
    return found.st_ino, found.st_mtime_ns


def _new(directory: HandoffDir, session: str, tried: dict[str, _Version]) -> bool:
    return session not in tried or _version(directory, session) != tried[session]


def _next_stale(directory: HandoffDir, tried: dict[str, _Version]) -> tuple[str, int] | None:
    for session in directory.pending():
        if not _new(directory, session, tried):
            continue
        fd = directory.claim(session)
        if fd is not None:
            return session, fd
    return None


async def _run_one(
    directory: HandoffDir, extractor: MemoryExtractor, session: str, fd: int
) -> _Version:
    """Run one claimed hand-off; remove it when done, keep it (stale) when it may work
    later; the lock is released either way. Returns the version of the file it kept
    (``None``: it kept none)."""
    handoff = directory.read(session)
    if handoff is None:
        logger.warning("memory extraction worker: unreadable hand-off %s", directory.path(session))
        directory.complete(session, fd)
        return None
    try:
        for round_ in range(_GIVE_WAY_ROUNDS):
            try:
                with background_requests():  # it waits while main turns of ours stream
                    await extractor.extract(
                        handoff.session_id,
                        handoff.turns,
                        end=handoff.end,
                        foreign=handoff.foreign,
                        partial=handoff.partial,
                        prefix=handoff.prefix,
                    )
                break
            except AsyncRecallError as exc:
                if not is_preempted(exc) or round_ == _GIVE_WAY_ROUNDS - 1:
                    raise
    except AsyncRecallError as exc:
        attempts = handoff.attempts + (0 if is_preempted(exc) else 1)
        if attempts >= MAX_ATTEMPTS:
            logger.warning(
                "memory extraction of session %s given up after %d attempts: %s",
                session,
                attempts,
                exc,
            )
            directory.complete(session, fd)
            if handoff.ended:
                await _end_session(extractor, session)
            return None
        logger.warning("memory extraction of session %s failed (kept for later): %s", session, exc)
        directory.update(handoff.with_attempts(attempts))
        kept = _version(directory, session)  # still under its lock
        os.close(fd)
        return kept
    except BaseException:
        os.close(fd)
        raise
    # The slice is extracted (the cursor says so): the hand-off is done, whatever the
    # consolidation does next.
    try:
        directory.complete(session, fd)
        if handoff.ended:  # a session that goes on keeps its cursor for its next turns
            await _end_session(extractor, session)
    finally:
        gate = _gate(extractor.store)
        if gate is not None:
            await maybe_consolidate(extractor, gate, note_session=not handoff.noted)
    return None


async def _end_session(extractor: MemoryExtractor, session: str) -> None:
    """The session ended when its command handed it on, and its hand-off is done: its
    cursor goes (a failure to remove it costs a file, nothing else)."""
    try:
        await asyncio.to_thread(extractor.end_session, session)
    except (AsyncRecallError, OSError, ValueError) as exc:
        logger.warning("memory extraction worker: cannot drop the cursor of %s: %s", session, exc)


def _gate(store: Store) -> Any:
    return consolidation_gate(store)


def _open_store(spec: Any) -> Store:
    if "folder" in spec:
        return FolderStore(Path(spec["folder"]))
    from asyncrecall.memory.postgres._store import PostgresStore

    return PostgresStore.open(str(spec["url"]), namespace=str(spec["namespace"]))


def _side_model(spec: Any) -> Model:
    if spec.get("local"):
        from asyncrecall.models import LocalModel

        local: Model = LocalModel()
        return local
    from asyncrecall.models import OpenAIModel
    from asyncrecall.models._traffic import enable_cross_process, traffic

    enable_cross_process()  # a main turn cut by our extraction is sent again (see there)

    if spec.get("interrupts"):  # the command saw it cut a stream for a second request
        traffic(str(spec["base_url"])).learn_interrupts()
    return OpenAIModel(
        model=str(spec["model"]), base_url=str(spec["base_url"]), api_key=spec.get("api_key")
    )


if __name__ == "__main__":
    sys.exit(main())
