"""The pod network's stand-in for the API server: an HTTP CONNECT proxy on a Unix socket.

kube-apiserver reaches webhooks (and aggregated APIs) at a Service's cluster IP. Here no pod network exists: the
operators run as processes on 127.0.0.1, and Endpoints may not hold a loopback address. The API server's own egress
selector (`--egress-selector-config-file`, `cluster` over HTTPConnect on a Unix socket, k8s.io/apiserver v0.35.4
pkg/server/egressselector) sends those dials here, and this proxy connects each `<cluster IP>:<port>` to the local
port the harness routed it to (routes.json beside the socket, read on every dial). What travels is unchanged: the
Service, its cluster IP and the operator's own certificate for `<service>.<namespace>.svc`, as Pulumi applied them.

    python -m tests.cluster.egress_proxy <socket> <routes.json>
"""

import asyncio
import json
import sys
from pathlib import Path


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


def route(routes: Path, target: str) -> tuple[str, int] | None:
    """The local address `target` (cluster IP:port) is routed to, if any."""
    table = json.loads(routes.read_text()) if routes.exists() else {}
    local = table.get(target)
    if local is None:
        return None
    host, _, port = local.rpartition(":")
    return host, int(port)


async def _serve(routes: Path, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    method, target, _ = request.split("\r\n", 1)[0].split(" ", 2)
    local = route(routes, target) if method == "CONNECT" else None
    if local is None:
        writer.write(f"HTTP/1.1 503 Service Unavailable\r\n\r\nno route for {target}\n".encode())
        await writer.drain()
        writer.close()
        return
    try:
        upstream_reader, upstream_writer = await asyncio.open_connection(*local)
    except OSError as error:
        writer.write(f"HTTP/1.1 502 Bad Gateway\r\n\r\n{target} -> {local}: {error}\n".encode())
        await writer.drain()
        writer.close()
        return
    writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
    await writer.drain()
    await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))


async def serve(socket: Path, routes: Path) -> None:
    server = await asyncio.start_unix_server(lambda r, w: _serve(routes, r, w), path=str(socket))
    async with server:
        await server.serve_forever()


def egress_config(socket: Path) -> str:
    """kube-apiserver's EgressSelectorConfiguration: cluster traffic through the proxy on `socket`."""
    return (
        "apiVersion: apiserver.k8s.io/v1beta1\nkind: EgressSelectorConfiguration\negressSelections:\n"
        f"- name: cluster\n  connection:\n    proxyProtocol: HTTPConnect\n    transport:\n      uds:\n"
        f"        udsName: {socket}\n"
    )


def add_route(routes: Path, target: str, local: str) -> None:
    """Routes `target` (cluster IP:port) to `local` (127.0.0.1:port) from the next dial on."""
    table = json.loads(routes.read_text()) if routes.exists() else {}
    partial = routes.with_suffix(".partial")
    partial.write_text(json.dumps({**table, target: local}))
    partial.replace(routes)


if __name__ == "__main__":
    asyncio.run(serve(Path(sys.argv[1]), Path(sys.argv[2])))
