"""`python -m mcpgym.servers.echo [--http --port N]`: serve Echo over stdio or streamable HTTP."""

import mcpgym
from mcpgym.servers.echo import Echo


def main() -> None:
    mcpgym.run(Echo)


if __name__ == "__main__":
    main()
