"""``coevo chat``: a tool-calling agent over the registry, with slash commands and stored sessions.

* :mod:`agent.chat.loop`: the agent loop (LangChain chat model + the registry's tools).
* :mod:`agent.chat.commands`: slash commands (work without an LLM).
* :mod:`agent.chat.command_line`: the ``coevo`` command line the CLI hands to ``/search`` and ``/kb``.
* :mod:`agent.chat.store`: sessions and their events on disk.
* :mod:`agent.chat.repl`: the terminal session.
"""
