"""`python -m servers.blackjack [--http --port N]`: serve Blackjack over stdio or streamable HTTP."""

import mcpgym
from servers.blackjack import Blackjack

if __name__ == "__main__":
    mcpgym.run(Blackjack)
