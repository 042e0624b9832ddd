"""`python -m servers.echo [--http --port N]`: serve Echo over stdio or streamable HTTP."""

import mcpgym
from servers.echo import Echo

if __name__ == "__main__":
    mcpgym.run(Echo)
