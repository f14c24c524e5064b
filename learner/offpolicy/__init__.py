"""Off-policy RL on the shared learner: config, networks, replay batches, env collection, the loop.

The runner (``learner/runners/offpolicy.py``, ``runner: offpolicy``) composes these pieces; the
losses and learners themselves are :mod:`learner.algorithms` (SAC, RLPD, CrossQ).
"""
