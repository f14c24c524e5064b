"""The hybrid scheduler: profile components, predict an iteration per placement, pick one.

- :mod:`~learner.scheduling.curves`: cost curves over batch size, the profile cache, the
  reference kernel that tells how fast the machine runs now;
- :mod:`~learner.scheduling.profile` (embodied) / :mod:`~learner.scheduling.llm` (GRPO):
  per-component profiles; :mod:`~learner.scheduling.comm`: channel hops, weight fetch, start-up;
- :mod:`~learner.scheduling.cost`: the embodied cost model (GRPO's is in ``llm``);
- :mod:`~learner.scheduling.candidates`, :mod:`~learner.scheduling.plan`: candidates, ranking,
  measuring (``rlinf schedule``); :mod:`~learner.scheduling.auto`: the planning step that
  resolves ``placement: auto`` after validation;
- :mod:`~learner.scheduling.realloc`: slots lent from env / rollout to the actor per iteration;
- :mod:`~learner.scheduling.whatif`: the same laws on 8-1,024 GPUs.
"""
