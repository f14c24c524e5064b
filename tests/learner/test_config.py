from dataclasses import dataclass, field
from typing import Literal

import pytest

from rlinf_contracts.config import (
    ConfigError,
    from_dict,
    help_text,
    load_config,
    parse_overrides,
    to_dict,
)


@dataclass
class Actor:
    lr: float = field(default=1e-3, metadata={"help": "learning rate"})
    epochs: int = 4
    hidden: list[int] = field(default_factory=lambda: [64, 64])
    loss: Literal["ppo", "grpo"] = "ppo"

    def validate(self) -> None:
        if self.lr <= 0:
            raise ConfigError(f"key 'actor.lr' must be > 0, got {self.lr}")


@dataclass
class Top:
    name: str = "run"
    seed: int = 0
    resume: str | None = None
    actor: Actor = field(default_factory=Actor)


def test_yaml_plus_overrides(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("name: demo\nactor:\n  lr: 0.01\n  hidden: [8, 8]\n")
    cfg = from_dict(Top, load_config(f, ["actor.epochs=7", "seed=3", "actor.hidden=[4,4,4]"]))
    assert cfg == Top(name="demo", seed=3, actor=Actor(lr=0.01, epochs=7, hidden=[4, 4, 4]))
    assert to_dict(cfg)["actor"]["hidden"] == [4, 4, 4]


def test_int_is_accepted_for_float_but_not_the_reverse():
    assert from_dict(Actor, {"lr": 1}).lr == 1.0 and isinstance(
        from_dict(Actor, {"lr": 1}).lr, float
    )
    with pytest.raises(ConfigError, match=r"key 'epochs' expects int, got float 2.5"):
        from_dict(Actor, {"epochs": 2.5})


def test_unknown_key_suggests_nearest():
    with pytest.raises(
        ConfigError, match=r"unknown key 'actor.ephocs'. Did you mean 'actor.epochs'\?"
    ):
        from_dict(Top, {"actor": {"ephocs": 3}})
    with pytest.raises(ConfigError, match=r"unknown key 'sed'. Did you mean 'seed'\?"):
        from_dict(Top, load_config(None, ["sed=1"]))


def test_wrong_types_name_key_and_expected_type():
    with pytest.raises(ConfigError, match=r"key 'actor.hidden\[1\]' expects int, got str 'x'"):
        from_dict(Top, {"actor": {"hidden": [1, "x"]}})
    with pytest.raises(ConfigError, match=r"key 'actor' expects a mapping"):
        from_dict(Top, {"actor": 3})
    with pytest.raises(
        ConfigError,
        match=r"key 'actor.loss' must be one of 'ppo' \| 'grpo', got 'grpp'. Did you mean 'grpo'\?",
    ):
        from_dict(Top, {"actor": {"loss": "grpp"}})
    assert from_dict(Top, {"resume": None}).resume is None
    with pytest.raises(ConfigError, match=r"key 'resume' expects str, got int 5"):
        from_dict(Top, {"resume": 5})


def test_validate_hook_runs_once_per_section():
    with pytest.raises(ConfigError, match=r"actor.lr' must be > 0"):
        from_dict(Top, {"actor": {"lr": -1}})


def test_bad_files_and_overrides(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match="cannot parse"):
        load_config(bad)
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["actor.lr"])


def test_help_text_lists_leaf_keys_with_help():
    lines = help_text(Top)
    assert "actor.lr (float, default 0.001): learning rate" in lines
    assert any(line.startswith("resume (str | null") for line in lines)


@dataclass
class Cam:
    fps: int = 30


@dataclass
class WithList:
    cameras: list[Cam] = field(default_factory=lambda: [Cam(), Cam()])
    extra: Cam | None = None


def test_list_index_override_and_optional_section_errors(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("cameras:\n  - fps: 30\n  - fps: 15\n")
    cfg = from_dict(WithList, load_config(f, ["cameras.1.fps=60"]))
    assert [c.fps for c in cfg.cameras] == [30, 60]
    with pytest.raises(ConfigError, match="cannot apply override 'cameras.5.fps=1'"):
        load_config(f, ["cameras.5.fps=1"])
    # an optional section keeps the precise error of the key inside it
    with pytest.raises(ConfigError, match=r"unknown key 'extra.fsp'. Did you mean 'extra.fps'\?"):
        from_dict(WithList, {"extra": {"fsp": 3}})
