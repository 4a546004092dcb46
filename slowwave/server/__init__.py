"""`slowwave serve`: memory for agents in any process or language, over HTTP (REST and MCP)
and stdio (MCP). ``app.create_app`` builds the application;
``slowwave.service`` does the work."""
