"""Jobs in, results out, from the command line: ``cpfleet judge`` (locally, on a process pool of
runners: :mod:`cpfleet.jobs.pool`), ``cpfleet submit`` (the same JSONL through the fleet) and
``cpfleet run`` (a program on given inputs, nothing judged); :mod:`cpfleet.jobs.files` reads the
JOBS files they share."""
