"""``llm-deploy-advisor``: the command-line client of the service (over HTTP, or the app in-process)."""
