"""rosbag2's ``metadata.yaml`` for a folder of MCAP files the recorder writes.

Why: ``ros2 bag info`` / ``ros2 bag play`` open a folder through this file (files, message
counts per topic, time span), and :func:`rlinf_data.bags.read.bag_files` takes a folder only
with it. The numbers come from each file's MCAP summary; a file cut off by a kill (no summary)
is counted front to back up to the cut. Written to a temporary name and renamed, so a reader
never sees half a file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VERSION = 5  # the rosbag2 metadata version whose fields are written (newer readers take it)


@dataclass
class FileStats:
    start: int = 0  # ns, first log time
    end: int = 0  # ns, last log time
    counts: dict[str, int] = field(default_factory=dict)  # topic -> messages
    types: dict[str, str] = field(default_factory=dict)  # topic -> message type

    @property
    def messages(self) -> int:
        return sum(self.counts.values())


def file_stats(path: Path) -> FileStats:
    """Message counts and time span of one MCAP file, complete or cut off."""
    from mcap.exceptions import McapError
    from mcap.reader import make_reader

    try:
        with open(path, "rb") as f:
            summary = make_reader(f).get_summary()
    except (McapError, ValueError, EOFError, OSError):
        summary = None
    if summary is None or summary.statistics is None:
        return _scan_stats(path)
    st, out = summary.statistics, FileStats(summary.statistics.message_start_time)
    out.end = st.message_end_time
    for cid, ch in summary.channels.items():
        schema = summary.schemas.get(ch.schema_id)
        out.types[ch.topic] = schema.name if schema is not None else ""
        out.counts[ch.topic] = out.counts.get(ch.topic, 0) + st.channel_message_counts.get(cid, 0)
    return out


def _scan_stats(path: Path) -> FileStats:
    from mcap.exceptions import McapError
    from mcap.records import Channel, Message, Schema
    from mcap.stream_reader import StreamReader

    out, schemas, channels = FileStats(), {}, {}
    with open(path, "rb") as f:
        try:
            for rec in StreamReader(f, skip_magic=False).records:
                if isinstance(rec, Schema):
                    schemas[rec.id] = rec.name
                elif isinstance(rec, Channel):
                    channels[rec.id] = rec.topic
                    out.types[rec.topic] = schemas.get(rec.schema_id, "")
                elif isinstance(rec, Message) and rec.channel_id in channels:
                    topic = channels[rec.channel_id]
                    out.counts[topic] = out.counts.get(topic, 0) + 1
                    out.start = min(out.start or rec.log_time, rec.log_time)
                    out.end = max(out.end, rec.log_time)
        except (McapError, ValueError, EOFError, OSError):
            pass  # cut off: counted up to the cut
    return out


def metadata(files: list[Path]) -> dict[str, Any]:
    """The ``rosbag2_bagfile_information`` of ``files`` (paths relative to their folder)."""
    stats = [file_stats(p) for p in files]
    used = [s for s in stats if s.messages]
    start = min((s.start for s in used), default=0)
    end = max((s.end for s in used), default=0)
    counts: dict[str, int] = {}
    types: dict[str, str] = {}
    for s in stats:
        types.update(s.types)
        for topic, n in s.counts.items():
            counts[topic] = counts.get(topic, 0) + n
    topics = [
        {
            "topic_metadata": {
                "name": topic,
                "type": types[topic],
                "serialization_format": "cdr",
                "offered_qos_profiles": "",
            },
            "message_count": counts.get(topic, 0),
        }
        for topic in sorted(types)
    ]
    return {
        "rosbag2_bagfile_information": {
            "version": VERSION,
            "storage_identifier": "mcap",
            "duration": {"nanoseconds": end - start},
            "starting_time": {"nanoseconds_since_epoch": start},
            "message_count": sum(counts.values()),
            "topics_with_message_count": topics,
            "compression_format": "",
            "compression_mode": "",
            "relative_file_paths": [p.name for p in files],
            "files": [
                {
                    "path": p.name,
                    "starting_time": {"nanoseconds_since_epoch": s.start},
                    "duration": {"nanoseconds": s.end - s.start},
                    "message_count": s.messages,
                }
                for p, s in zip(files, stats, strict=True)
            ],
        }
    }


def write_metadata(folder: Path, files: list[Path]) -> Path:
    """Write ``folder/metadata.yaml`` for ``files`` atomically; returns its path."""
    import yaml

    path = folder / "metadata.yaml"
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(yaml.safe_dump(metadata(files), sort_keys=False))
    tmp.replace(path)
    return path
