"""Where a run a key asks for starts (POST /v1/conversations/{id}/consolidate): a flow run of
the nightly deployment when a Prefect API is configured, so that it is watched and retried in
the Prefect UI like every other run; else the server's own worker (``slowwave.service``)."""

from __future__ import annotations

import os
from typing import cast

from slowwave.models.ids import conversation_ref
from slowwave.models.run import RunRequest
from slowwave.service.core import Launcher

NIGHTLY = "slowwave-nightly/nightly"


def prefect_launcher() -> Launcher | None:
    """Starts the run as a flow run of the nightly deployment, named by the conversation's
    reference (Prefect keeps parameters: never the id), when ``PREFECT_API_URL`` is set."""
    if not os.environ.get("PREFECT_API_URL"):
        return None

    def launch(request: RunRequest, key: str) -> str:
        from prefect.client.schemas.objects import FlowRun
        from prefect.deployments import run_deployment

        flow_run = run_deployment(
            NIGHTLY,
            parameters={
                "conversations": [conversation_ref(key)],
                "run_id": str(request.run_id),
                "requested_by": request.tenant,
            },
            timeout=0,  # started: the answer does not wait for it
            idempotency_key=str(request.run_id),  # one flow run per request, a retry included
        )
        return str(cast(FlowRun, flow_run).id)  # called from a thread: not a coroutine

    return launch
