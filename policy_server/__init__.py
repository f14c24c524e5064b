"""Policy server: openpi-compatible WebSocket inference with batching and weight hot-swap.

Deliberately imports nothing: ``rlinf_contracts.wire`` / ``policy_server.messages`` (numpy +
msgpack only) must stay importable on a robot PC without torch. Modules:

- ``wire`` — the one msgpack+numpy codec; ``messages`` — typed metadata / weight-push frames
- ``server`` — routing (``/``, ``/weights``, ``/healthz``, ``/metrics``); ``batching`` — dynamic
  batches and ordered swaps; ``hotswap`` — double-buffered weights; ``observations`` — layout
  adapters and validation; ``metrics`` — Prometheus text; ``config`` — ``ServerConfig``
- ``client`` — sync/async clients; ``broker`` — action-chunk broker; ``push`` — learner weight push
- ``sim_eval`` — simulators as clients (``rlinf eval --policy-server``); ``background`` — run a
  server in a thread (tests, benchmarks, demos)
"""
