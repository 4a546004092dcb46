"""slowwave in the agent frameworks' own memory hooks, each an extra of its own:

- ``slowwave_client.integrations.langgraph`` (``pip install 'slowwave-client[langgraph]'``):
  tools for search and record, and a LangGraph store whose ``search`` is slowwave's;
- ``slowwave_client.integrations.openai_agents`` (``'slowwave-client[openai-agents]'``):
  function tools, and a session that records a run's items as a conversation's messages.

Nothing here is imported by ``slowwave_client`` or by the server.
"""
