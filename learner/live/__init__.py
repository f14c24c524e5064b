"""A live view of a robot learning: a local web page and a console line, from the learner itself.

Why in the learner process: everything the page shows is already there -- the metrics rows the
loop logs (``learner.metrics``), the episodes and camera frames the ingest hands the replay
(``learner.offpolicy.remote``) -- so a page needs no second data path and no extra process.

Modules, one job each (imports point down this list):

* :mod:`learner.live.config` -- the ``live`` config section and its token rules;
* :mod:`learner.live.snapshot` -- the typed view model and the pure function that builds it from
  metrics rows and episode records (what the page, the JSON and the console line all show);
* :mod:`learner.live.frames` -- the newest camera frame per robot and camera, as PNG;
* :mod:`learner.live.page` -- the HTML of one snapshot (served live and written to the run dir);
* :mod:`learner.live.console` -- the one-line console summary, printed only when it changed;
* :mod:`learner.live.server` -- the HTTP endpoint (websockets' HTTP handling, bearer token);
* :mod:`learner.live.recorder` -- the wiring: taps, periodic snapshot files, console, server.
"""
