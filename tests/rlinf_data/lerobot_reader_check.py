"""Run by test_lerobot.py in a subprocess: LeRobot's ``LeRobotDataset`` reads an export and every
value is compared with the episode store it came from. Usage: ``lerobot_reader_check.py ROOT
STORE``. See test_lerobot.py for why a subprocess and when the frame decoder is PyAV."""

from __future__ import annotations

import sys

import numpy as np

# every import of torch / lerobot happens inside main(): a test may import this
# file into its own process, where LeRobot and torchvision must not be loaded


def load_lerobot():
    import torch

    try:
        import torchvision  # noqa: F401
    except RuntimeError:
        # a CUDA torchvision next to a CPU torch: declare the ops its meta code needs
        lib = torch.library.Library("torchvision", "DEF")
        lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _keep.append(lib)
    from lerobot.datasets import lerobot_dataset

    return lerobot_dataset


_keep: list = []


def pyav_decode(video_path, timestamps, tolerance_s, backend=None):
    """LeRobot's ``decode_video_frames`` contract: float32 [N, C, H, W] in [0, 1] at
    ``timestamps``."""
    import av
    import torch

    with av.open(str(video_path)) as f:
        frames = {
            float(fr.pts * fr.time_base): fr.to_ndarray(format="rgb24") for fr in f.decode(video=0)
        }
    out = []
    for ts in timestamps:
        near = min(frames, key=lambda t: abs(t - ts))
        assert abs(near - ts) < tolerance_s, (ts, near)
        out.append(torch.from_numpy(frames[near]).permute(2, 0, 1).float() / 255.0)
    return torch.stack(out)


def backend(lerobot_dataset) -> str:
    try:
        from torchcodec.decoders import VideoDecoder  # noqa: F401

        return "torchcodec"
    except (ImportError, RuntimeError, OSError):
        lerobot_dataset.decode_video_frames = pyav_decode
        return "pyav"


def main(root: str, store_path: str) -> None:
    from rlinf_data.store import EpisodeStore

    lerobot_dataset = load_lerobot()
    originals = list(EpisodeStore(store_path, mode="r"))
    video = backend(lerobot_dataset)
    ds = lerobot_dataset.LeRobotDataset("local/rlinf_export", root=root, video_backend=video)
    assert ds.num_episodes == len(originals) and ds.num_frames == sum(len(e) for e in originals)
    assert ds.fps == int(originals[0].info.control_hz)
    cams = list(originals[0].info.layout.cameras)
    assert sorted(ds.meta.video_keys) == sorted(f"observation.images.{c}" for c in cams)
    assert list(ds.meta.tasks.index) == list(
        dict.fromkeys(e.info.instruction or e.info.task for e in originals)
    )
    i = 0
    for e, ep in enumerate(originals):
        s = ep.steps
        for t in range(len(ep)):
            item = ds[i]
            assert item["episode_index"].item() == e and item["frame_index"].item() == t
            assert np.array_equal(item["observation.state"].numpy(), s["state"][t])
            assert np.array_equal(item["action"].numpy(), s["action"][t])
            assert item["next.reward"].item() == s["reward"][t]
            assert item["next.done"].item() == bool(s["terminated"][t] or s["truncated"][t])
            for f in ("terminated", "truncated", "intervention", "policy_version"):
                assert item[f"rlinf.{f}"].item() == s[f][t], f
            # LeRobot hands float64 columns out as float32 tensors (our import keeps float64)
            assert item["rlinf.timestamp"].item() == np.float32(s["timestamp"][t])
            assert item["task"] == (ep.info.instruction or ep.info.task)
            for cam in cams:
                frame = (item[f"observation.images.{cam}"].permute(1, 2, 0).numpy() * 255.0).round()
                assert np.array_equal(frame.astype(np.uint8), s[f"images/{cam}"][t]), (
                    e,
                    t,
                    cam,
                )  # lossless
            i += 1
    state = np.concatenate([e.steps["state"] for e in originals])
    assert np.allclose(ds.meta.stats["observation.state"]["mean"], state.mean(0))
    import lerobot

    print(f"lerobot {lerobot.__version__} ({video} decoder): {i} frames match")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
