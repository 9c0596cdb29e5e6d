"""Protocol adapters: turn a request spec into bytes on a socket and observations back; routing
across named targets."""
