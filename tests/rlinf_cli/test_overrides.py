"""Override semantics: mappings are replaced, not merged; shared placement keys re-split."""

import pytest

from rlinf_contracts.config import ConfigError, apply_overrides, load_config


def test_placement_replaced_whole_and_one_component_resplit():
    cfg = load_config(
        "configs/sim_franka_reach_ppo.yaml", ["placement={env: 0, rollout: 1, actor: 1}"]
    )
    assert cfg["placement"] == {"env": 0, "rollout": 1, "actor": 1}
    cfg = load_config("configs/sim_franka_reach_ppo.yaml", ["placement.env,rollout=1"])
    assert cfg["placement"] == {"actor": "0", "env,rollout": 1}


def test_any_mapping_can_be_emptied_or_nulled():
    base = {"policy_client": {"cameras": {"wrist": "a", "front": "b"}}, "train": {"resume": "x"}}
    out = apply_overrides(base, ["policy_client.cameras={}", "train.resume=null"])
    assert out == {"policy_client": {"cameras": {}}, "train": {"resume": None}}
    assert apply_overrides(base, ["policy_client.cameras={top: c}"])["policy_client"][
        "cameras"
    ] == {"top": "c"}


def test_delete_and_bad_override():
    assert apply_overrides({"a": {"b": 1, "c": 2}}, ["~a.b"]) == {"a": {"c": 2}}
    with pytest.raises(ConfigError, match="key=value"):
        apply_overrides({}, ["novalue"])
