"""The bottom room: contracts every other room speaks, importing only numpy, msgpack and PyYAML.

A robot PC, a simulator bridge, the policy server and the learner all import from here and
from nothing above them (``tests/test_layering.py`` enforces it):

- ``registry`` — name -> implementation tables with "did you mean" errors
- ``config`` — YAML + ``key=value`` overrides into typed dataclasses, errors that name the key
- ``spec`` — the robot/task spec: state layout, action space, cameras (sim and robot alike)
- ``env`` / ``env_registry`` — the batched vector-env contract and ``make_env("family/task")``
- ``wire`` — the one msgpack + numpy codec (openpi-compatible, never pickle)
- ``rotations`` — the one rotation-math module
"""
