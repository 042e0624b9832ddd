"""The web page for people: play an environment next to `/mcp`, and review recorded runs.

Layer: a door beside the MCP transports. `/web` drives episodes through the server's own
`EpisodeRegistry` and `Episode` core (the code every MCP request runs), as explicit episodes of
its own; `mcpgym view` only reads recordings. Pages are plain HTML, CSS and a little JavaScript
shipped in `static/` and served by Starlette: no build step, nothing fetched at run time.
Design: rfcs/0012-web-page.md.
"""

from mcpgym.web._play import WEB_PATH, PlayPage
from mcpgym.web._view import VIEW_PATH, view_app

__all__ = ["VIEW_PATH", "WEB_PATH", "PlayPage", "view_app"]
