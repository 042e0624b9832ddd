"""`python -m mcpgym.servers.blackjack [--http --port N]`: serve Blackjack over stdio or streamable HTTP."""

import mcpgym
from mcpgym.servers.blackjack import Blackjack


def main() -> None:
    mcpgym.run(Blackjack)


if __name__ == "__main__":
    main()
