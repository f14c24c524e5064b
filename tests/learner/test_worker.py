import os

import pytest

from learner.placement import parse_placement
from learner.worker import Worker, WorkerError, WorkerGroup

pytestmark = pytest.mark.ray


class Echo(Worker):
    def __init__(self, offset: int, tag: str = "") -> None:
        self.offset, self.tag = offset, tag

    def whoami(self):
        import torch

        return {
            "rank": self.rank,
            "world": self.world_size,
            "group": self.group_name,
            "slots": list(self.slots),
            "threads": torch.get_num_threads(),
            "tag": self.tag,
        }

    def niceness(self) -> int:
        return os.nice(0)

    def add(self, x: int) -> int:
        return x + self.offset + self.rank

    def fail_on(self, bad_rank: int) -> int:
        if self.rank == bad_rank:
            raise ValueError(f"bad value on rank {self.rank}")
        return self.rank


@pytest.fixture(scope="module")
def group(ray_cluster):
    p = parse_placement({"echo": "0-1:0-3"}, ray_cluster.num_slots)
    g = WorkerGroup.launch(
        Echo, "echo", ray_cluster, p["echo"], 10, per_rank_kwargs=[{"tag": "a"}, {"tag": "b"}]
    )
    yield g
    g.shutdown()


def test_ranks_slots_and_threads_follow_placement(group):
    info = group.call("whoami").wait(timeout=60)
    assert [i["rank"] for i in info] == [0, 1]
    assert all(i["world"] == 2 and i["group"] == "echo" for i in info)
    assert [i["slots"] for i in info] == [[0, 1], [2, 3]]
    assert [i["threads"] for i in info] == [2, 2]
    assert [i["tag"] for i in info] == ["a", "b"]


def test_call_all_execute_on_and_per_rank(group):
    assert group.call("add", 1).wait(timeout=60) == [11, 12]
    assert group.execute_on([1], "add", 5).wait(timeout=60) == [16]
    assert group.call_per_rank("add", [(0,), (100,)]).wait(timeout=60) == [10, 111]
    with pytest.raises(IndexError, match="ranks 0-1"):
        group.execute_on([2], "add", 1)
    with pytest.raises(AttributeError, match="has no method 'nope'"):
        group.call("nope")


def test_worker_exception_surfaces_with_group_rank_and_traceback(group):
    with pytest.raises(WorkerError) as err:
        group.call("fail_on", 1).wait(timeout=60)
    e = err.value
    assert (e.group, e.rank, e.method) == ("echo", 1, "fail_on")
    assert "worker 'echo' rank 1 failed in fail_on()" in str(e)
    assert "ValueError: bad value on rank 1" in e.remote_traceback
    assert "in fail_on" in e.remote_traceback  # the original traceback, not just the message
    assert group.call("add", 0).wait(timeout=60) == [10, 11]  # the group keeps working


def test_constructor_error_is_reported_at_launch(ray_cluster):
    class Broken(Worker):
        def __init__(self):
            raise RuntimeError("cannot open device")

    p = parse_placement({"b": "0"}, ray_cluster.num_slots)
    with pytest.raises(WorkerError, match="cannot open device"):
        WorkerGroup.launch(Broken, "broken", ray_cluster, p["b"])


def test_a_config_error_in_a_constructor_reaches_the_driver_as_itself(ray_cluster):
    """A missing demo store or weights file found inside a worker is the user's one-line
    error at the driver, not a worker's traceback."""
    from rlinf_contracts.config import ConfigError

    class NeedsFile(Worker):
        def __init__(self):
            raise ConfigError("key 'train.demos': no demos at /nowhere")

    p = parse_placement({"b": "0"}, ray_cluster.num_slots)
    with pytest.raises(ConfigError, match="^key 'train.demos': no demos at /nowhere$"):
        WorkerGroup.launch(NeedsFile, "needs_file", ray_cluster, p["b"])


def test_custom_resource_is_placeable(ray_cluster):
    assert ray_cluster.custom_resources.get("robot:franka0") == 1
    p = parse_placement({"robot": "0"}, ray_cluster.num_slots)
    g = WorkerGroup.launch(
        Echo, "robot", ray_cluster, p["robot"], 0, resources={"robot:franka0": 1}
    )
    try:
        assert g.call("add", 1).wait(timeout=60) == [1]
    finally:
        g.shutdown()


def test_cluster_slots(ray_cluster):
    assert ray_cluster.slot_kind == "cpu" and ray_cluster.num_slots == 4
    assert "4 CPU slots" in ray_cluster.describe()


def test_workers_run_at_the_drivers_priority(group):
    """Ray's default would start them at nice 15, behind every ordinary process on the machine."""
    assert group.call("niceness").wait(timeout=60) == [os.nice(0)] * 2
