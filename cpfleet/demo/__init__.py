"""``cpfleet demo``: the README's first command (:mod:`cpfleet.demo.command`), over the project's
own problem set (:mod:`cpfleet.demo.problems`, shipped as ``data/demo-problems.jsonl.gz``, with the
reference, wrong and slow programs in ``solutions/``)."""
