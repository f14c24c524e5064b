"""The streamer's spool when it is full, when a frame can never fit, and when a renumbering is
killed halfway (the spool lives in ``rlinf_ros``; its durability is tested with the store's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlinf_ros.spool import HEADER, Spool


def _fill(s: Spool, size: int = 100) -> list[int]:
    seqs = []
    while (seq := s.append(b"x" * size)) is not None:
        seqs.append(seq)
    return seqs


def test_a_full_spool_refuses_until_acknowledgements_free_room(tmp_path: Path) -> None:
    s = Spool(tmp_path, max_bytes=2000)  # far below the default 4 MB segment
    seqs = _fill(s)
    assert seqs == list(range(len(seqs))) and s.bytes + HEADER.size + 100 > 2000
    assert s.append(b"x" * 100) is None and s.next_seq == len(seqs)  # refused: no seq spent
    s.ack(len(seqs) // 2)  # the learner holds the first half: their segments go
    more = _fill(s)
    assert more and more[0] == len(seqs)
    s.ack(s.next_seq - 1)  # everything acknowledged: the whole bound is free again
    assert len(_fill(s)) >= len(seqs) - 1
    s.close()


def test_a_frame_bigger_than_the_spool_is_an_error(tmp_path: Path) -> None:
    s = Spool(tmp_path, max_bytes=500)
    with pytest.raises(ValueError, match="can never fit its max_bytes=500"):
        s.append(b"x" * 600)
    s.close()


def test_a_renumbering_killed_halfway_never_goes_back(tmp_path: Path, monkeypatch) -> None:
    """``skip_to`` (the learner already holds lower seqs) killed right after deleting an old
    segment: the new numbering must already be on disk."""
    s = Spool(tmp_path, max_bytes=1 << 20)
    unlink = Path.unlink

    class Killed(BaseException):
        pass

    def unlink_then_die(self: Path, missing_ok: bool = False) -> None:
        unlink(self, missing_ok=missing_ok)
        raise Killed(str(self))

    monkeypatch.setattr(Path, "unlink", unlink_then_die)
    with pytest.raises(Killed):
        s.skip_to(100)
    monkeypatch.setattr(Path, "unlink", unlink)
    assert Spool(tmp_path, max_bytes=1 << 20).next_seq == 100
