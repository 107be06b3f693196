"""Pure policy: plain data in, decisions out. No I/O, no asyncio, no globals; time is a parameter."""
