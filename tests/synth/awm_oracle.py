"""AWM's own MCP server for one scenario, the oracle of tests/synth/test_awm_oracle.py. It runs inside
.venv/awm-oracle (AWM's lock, mcpworld/synth/importers/awm-lock.txt: FastAPI 0.115.12, SQLAlchemy 2.0.41,
pydantic 2.12.5; and fastapi-mcp 0.4.0, mcp 1.26.0).

Usage: python awm_oracle.py SERVER_PY DB_FILE. It does to the generated code what AWM's server launcher does: each
line that calls `create_engine(` opens DB_FILE instead, and where the code would run uvicorn the app gets
`FastApiMCP(app).mount_http()` (AWM's defaults: streamable HTTP at /mcp) and uvicorn serves it. The socket is
bound and listening (on 127.0.0.1, a port the system picks) before its port is printed on stdout, so a client may
connect as soon as it reads the line. Only public APIs are used; nothing of AWM is copied.
"""

import socket
import sys
import types
import warnings

import uvicorn
from fastapi_mcp import FastApiMCP

warnings.filterwarnings("ignore", category=DeprecationWarning)


def main() -> None:
    """Run the scenario's app, its engines on DB_FILE, served as AWM serves it."""
    server, db = sys.argv[1:3]
    lines = []
    for line in open(server, encoding="utf-8").read().split("\n"):
        if "create_engine(" in line:
            line = line.split("create_engine(")[0] + f"create_engine('sqlite:///{db}', " \
                "connect_args={'check_same_thread': False})"
        lines.append(line)
    module = types.ModuleType("awm_server")  # not __main__: the generated `uvicorn.run` block stays off
    sys.modules["awm_server"] = module
    exec(compile("\n".join(lines), server, "exec"), module.__dict__)
    FastApiMCP(module.app).mount_http()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(sock.getsockname()[1], flush=True)
    uvicorn.Server(uvicorn.Config(module.app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    main()
