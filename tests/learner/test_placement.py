import pytest

from learner.placement import PlacementError, parse_placement


@pytest.mark.parametrize(
    "spec, slots, expected",
    [
        ({"actor": "all"}, 3, [[0], [1], [2]]),
        ({"actor": 2}, 3, [[2]]),
        ({"actor": "2"}, 3, [[2]]),
        ({"actor": "0-3"}, 4, [[0], [1], [2], [3]]),
        ({"actor": "0,2,5"}, 6, [[0], [2], [5]]),
        ({"actor": "0-1,4"}, 6, [[0], [1], [4]]),
        ({"actor": "0-3:0-7"}, 8, [[0, 1], [2, 3], [4, 5], [6, 7]]),
        ({"actor": "0:0-3"}, 4, [[0, 1, 2, 3]]),
    ],
)
def test_valid_forms(spec, slots, expected):
    assert parse_placement(spec, slots)["actor"].process_slots == expected


def test_shared_key_places_each_component():
    p = parse_placement({"env,rollout": "0-1", "actor": "all"}, 2)
    assert p["env"].process_slots == p["rollout"].process_slots == [[0], [1]]
    assert p.mode == "collocated"


@pytest.mark.parametrize(
    "spec, mode",
    [
        ({"env,rollout,actor": "all"}, "collocated"),
        ({"env": "0", "rollout": "1", "actor": "2-3"}, "disaggregated"),
        ({"env": "0-1", "rollout": "2-3", "actor": "0-3"}, "hybrid"),
        ({"actor": "0-3:0-7", "rollout": "0-7"}, "collocated"),
    ],
)
def test_mode_classification(spec, mode):
    assert parse_placement(spec, 8).mode == mode


@pytest.mark.parametrize(
    "spec, components, message",
    [
        ({"actor": "0-4"}, None, "slot 4 out of range; the cluster has 4 slots (0-3)"),
        ({"actor": "7"}, None, "slot 7 out of range"),
        ({"actor": "0,1,1"}, None, "duplicate rank(s) [1]"),
        ({"actor": "3-1"}, None, "empty or negative range '3-1'"),
        ({"actor": "0,,1"}, None, "empty rank"),
        ({"actor": ""}, None, "empty rank"),
        ({"actor": "two"}, None, "cannot parse 'two'"),
        ({"actor": "0-2:0-3"}, None, "4 slots cannot be split evenly over 3 processes"),
        ({"actor": "1-2:0-3"}, None, "process ranks must be 0..N-1"),
        (
            {"actr": "all"},
            ["env", "actor"],
            "unknown component 'actr'; known: env, actor. Did you mean 'actor'?",
        ),
        ({"actor": "all", "actor,env": "0"}, None, "component 'actor' is placed twice"),
        ({"actor": "all"}, ["env", "actor"], "missing component(s): env"),
        ({}, None, "placement is empty"),
    ],
)
def test_invalid_forms_name_the_problem(spec, components, message):
    with pytest.raises(PlacementError) as err:
        parse_placement(spec, 4, components)
    assert message in str(err.value)


def test_describe_is_readable():
    text = parse_placement({"env": "0", "actor": "0-1"}, 2).describe()
    assert text.startswith("hybrid") and "actor: 2 proc on slots 0-1" in text
