"""The trainer's client: ``FleetClient`` and the batch publisher. Depends on ``cpfleet.core``
only, so a trainer process never imports the execution machinery or celery's worker."""
