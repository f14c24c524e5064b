"""Learner ingest: ``ws://host:port/transitions`` -> episode store -> the replay buffer's feed.

Robots (the streamer node, ``rlinf_ros.streaming``) send
:class:`~rlinf_contracts.transitions.TransitionBatch` frames; every item is written to the
:class:`~rlinf_data.store.EpisodeStore` *before* the cumulative
:class:`~rlinf_contracts.transitions.TransitionAck` goes back, so a robot forgets only what is
durable. Items carry a per-robot sequence number; one already stored (sent again after a reconnect
or a learner restart) is acknowledged and not written twice. After each write the transition
(observation, action, reward, done flags, next observation) is offered to a consumer
(``on_transition`` callback and/or the bounded ``IngestServer.feed`` queue) -- the off-policy runner
reads it into its replay buffer; after a restart it restores the buffer from the store.

Where seqs live on disk: each store episode's ``info.extra`` holds ``robot_id``,
``robot_episode``, ``seq0`` (seq of its first step; steps of one episode have consecutive seqs)
and, once ended, ``seq_end``; the root attribute ``ingest_last_seq`` holds each robot's last
acknowledged seq (written after the steps, so it is never ahead of them). That is the whole
de-duplication state: it is rebuilt from the store on restart, each step's seq is committed with
the step itself (the steps of one episode in one turn are one batch, one atomic write:
:meth:`~rlinf_data.store.EpisodeWriter.append_steps`), so after a kill at any point the ledger
holds exactly the stored seqs -- a resent item is either stored or a duplicate, never both.
A learner killed with SIGKILL loses at most the batch in flight, which was not acknowledged and is
sent again. ``IngestConfig.fsync`` makes the same hold across a power cut. An episode interrupted
by a learner restart continues in a new store episode (``extra.continues``).

Many robots, one store writer: every connection takes turns at the single store-writer thread
(see :class:`IngestServer`), so a robot that floods cannot starve the others. A learner that knows
its step layout passes it (``IngestServer(layout=...)``) and a robot streaming another layout is
refused with the reason before anything of it is stored.

ROS-free and torch-free (numpy, zarr, websockets), so the learner imports it anywhere.
"""

from __future__ import annotations

import logging
import threading

from rlinf_data.ingest_config import TOKEN_ENV, IngestConfig, IngestedTransition
from rlinf_data.ingest_ledger import LAST_SEQ_ATTR, Ledger, layout_mismatch
from rlinf_data.ingest_server import IngestServer

__all__ = [
    "LAST_SEQ_ATTR",
    "TOKEN_ENV",
    "IngestConfig",
    "IngestServer",
    "IngestedTransition",
    "Ledger",
    "layout_mismatch",
    "main",
]


def main(argv: list[str] | None = None) -> int:
    """``python -m rlinf_data.ingest --store DIR [--host H] [--port P]``: ingest alone (token from
    env)."""
    import argparse
    import signal

    p = argparse.ArgumentParser(prog="python -m rlinf_data.ingest", description=main.__doc__)
    p.add_argument("--store", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8100)
    p.add_argument(
        "--fsync",
        action="store_true",
        help=IngestConfig.__dataclass_fields__["fsync"].metadata["help"],
    )
    a = p.parse_args(argv)
    logging.basicConfig(
        level="INFO", format="%(asctime)s ingest %(levelname)s %(name)s: %(message)s"
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with IngestServer(IngestConfig(store=a.store, host=a.host, port=a.port, fsync=a.fsync)) as srv:
        print(f"listening {srv.url}", flush=True)
        while not stop.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
