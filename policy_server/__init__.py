"""Policy server: openpi-compatible WebSocket inference with batching and weight hot-swap.

Deliberately imports nothing, and nothing here imports torch or Ray: the client side
(``client``, ``messages``, ``spec_check``) runs on a robot PC, and the server serves any object
with a robot spec and ``infer`` (``policy`` — the protocol; a learner model goes through
``learner.serving.TorchPolicy``). The wire codec is ``rlinf_contracts.wire``. Modules:

- ``policy`` — the served-policy protocol; ``messages`` — typed metadata / weight-push frames;
  ``spec_check`` — the robot-spec handshake (``X-Rlinf-Robot-Spec``, 409 on mismatch)
- ``server`` — routing (``/``, ``/weights``, ``/healthz``, ``/metrics``); ``batching`` — dynamic
  batches and ordered swaps; ``hotswap`` — double-buffered weights; ``observations`` — layout
  adapters and validation; ``metrics`` — Prometheus text; ``config`` — ``ServerConfig``
- ``client`` — sync/async clients; ``broker`` — action-chunk broker; ``push`` — learner weight push
- ``sim_eval`` — simulators as clients (``rlinf eval --policy-server``); ``background`` — run a
  server in a thread (tests, benchmarks, demos)
"""
