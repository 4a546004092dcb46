"""The REST API's routers, one per resource (FastAPI's "bigger applications" layout)."""
