"""``python -m service.cli``: the same as the ``llm-deploy-advisor`` command."""

from service.cli.main import main

main()
