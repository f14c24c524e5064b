"""A private ``torch.distributed`` group that broadcasts a state dict in two collective calls.

Why in tests: no runner uses it -- rollout workers and drivers pull weights from
``learner.weights.WeightStore`` -- and the test that uses it keeps the flat-buffer broadcast
(one JSON header, then every tensor packed into one byte buffer, gloo on CPU, NCCL on GPU)
working for whoever wires a push path on it.
"""

from __future__ import annotations

import datetime
import json
import logging
import socket
from typing import Any

import torch

logger = logging.getLogger(__name__)
StateDict = dict[str, torch.Tensor]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago, for a rendezvous store."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


_ALIGN = 16  # byte alignment of each tensor inside the flat buffer, so dtype views are legal


def _layout(state_dict: StateDict) -> tuple[list[list], int]:
    """JSON-able ``[[name, dtype, shape, offset, nbytes], ...]`` and the flat buffer length."""
    entries, offset = [], 0
    for name, tensor in state_dict.items():
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(
                f"broadcast_state_dict: entry {name!r} is a {type(tensor).__name__}, not a tensor"
            )
        nbytes = tensor.numel() * tensor.element_size()
        dtype = str(tensor.dtype).removeprefix("torch.")
        entries.append([name, dtype, list(tensor.shape), offset, nbytes])
        offset += -(-nbytes // _ALIGN) * _ALIGN
    return entries, offset


def _flatten(state_dict: StateDict, entries: list[list], total: int, device: Any) -> torch.Tensor:
    flat = torch.empty(total, dtype=torch.uint8, device=device)
    for name, _, _, offset, nbytes in entries:
        tensor = state_dict[name].detach().to(device).contiguous().reshape(-1)
        flat[offset : offset + nbytes] = tensor.view(torch.uint8)
    return flat


def _unflatten(flat: torch.Tensor, entries: list[list]) -> StateDict:
    """Views into ``flat``: no copy; each receiving rank owns its buffer."""
    out = {}
    for name, dtype, shape, offset, nbytes in entries:
        piece = flat[offset : offset + nbytes].view(getattr(torch, dtype))
        out[name] = piece.reshape(shape)
    return out


class GlooBroadcast:
    """A private process group for broadcasting state dicts among ``world_size`` processes.

    Every rank constructs it with the same ``master_addr`` / ``master_port`` (rank 0 hosts the
    rendezvous store; pick the port with :func:`free_port` on rank 0's host) and then calls
    :meth:`broadcast_state_dict` collectively. ``backend`` defaults to NCCL when CUDA is present
    and gloo otherwise; the default ``torch.distributed`` group is left alone.
    """

    def __init__(
        self,
        rank: int,
        world_size: int,
        master_addr: str,
        master_port: int,
        backend: str | None = None,
        group_name: str = "weights",
        timeout_s: float = 300.0,
    ) -> None:
        import torch.distributed as dist

        if not 0 <= rank < world_size:
            raise ValueError(f"GlooBroadcast: rank {rank} is outside world_size {world_size}")
        self.rank, self.world_size = rank, world_size
        self.backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        timeout = datetime.timedelta(seconds=timeout_s)
        self._store = dist.TCPStore(
            master_addr, master_port, world_size, is_master=rank == 0, timeout=timeout
        )
        store = dist.PrefixStore(group_name, self._store)
        if self.backend == "gloo":
            self._pg = dist.ProcessGroupGloo(store, rank, world_size, timeout)
            self.device = torch.device("cpu")
        elif self.backend == "nccl":
            if not torch.cuda.is_available() or not hasattr(dist, "ProcessGroupNCCL"):
                raise RuntimeError(
                    "GlooBroadcast(backend='nccl') needs CUDA and a torch build with NCCL; "
                    "use backend='gloo' on CPU"
                )
            self._pg = dist.ProcessGroupNCCL(store, rank, world_size)
            self.device = torch.device("cuda", torch.cuda.current_device())
        else:
            raise ValueError(f"GlooBroadcast: backend must be 'gloo' or 'nccl', got {backend!r}")
        logger.debug("broadcast group %r: rank %d of %d", group_name, rank, world_size)

    def _broadcast(self, tensor: torch.Tensor, src: int) -> None:
        import torch.distributed as dist

        opts = dist.BroadcastOptions()
        opts.rootRank = src
        opts.rootTensor = 0
        self._pg.broadcast([tensor], opts).wait()

    def broadcast_state_dict(self, state_dict: StateDict | None, src: int = 0) -> StateDict:
        """Send ``state_dict`` from rank ``src`` to every rank; all ranks call it together.

        Non-source ranks pass None and get tensors on this group's device. Two messages go out:
        a small JSON header (names, dtypes, shapes, offsets) and one flat byte buffer.
        """
        is_src = self.rank == src
        if is_src:
            if not state_dict:
                raise ValueError(f"broadcast_state_dict: source rank {src} must pass a state dict")
            entries, total = _layout(state_dict)
            header = json.dumps([entries, total]).encode()
        length = torch.tensor([len(header) if is_src else 0], dtype=torch.int64, device=self.device)
        self._broadcast(length, src)
        if is_src:
            header_t = torch.frombuffer(bytearray(header), dtype=torch.uint8).to(self.device)
        else:
            header_t = torch.empty(int(length.item()), dtype=torch.uint8, device=self.device)
        self._broadcast(header_t, src)
        if not is_src:
            entries, total = json.loads(bytes(header_t.cpu().numpy()).decode())
        if is_src:
            flat = _flatten(state_dict, entries, total, self.device)
        else:
            flat = torch.empty(total, dtype=torch.uint8, device=self.device)
        self._broadcast(flat, src)
        return state_dict if is_src else _unflatten(flat, entries)

    def close(self) -> None:
        """Drop the group and its store connection."""
        self._pg = None
        self._store = None
