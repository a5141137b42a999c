"""Optuna's gRPC storage proxy, for very many workers on one study.

Each worker on RDB storage holds its own database connections; hundreds of
workers exhaust PostgreSQL's `max_connections` and repeat the same queries.
Optuna's proxy server holds one cached storage and answers the workers over
gRPC: run `python -m search.sweep.grpc_storage postgresql://...` next to the
database and give every worker `hydra.sweeper.storage=grpc://host:13000`.
"""
from __future__ import annotations

import sys
from urllib.parse import urlsplit

from optuna.storages import BaseStorage

from search.errors import BadInput
from search.tracking.redact import redact

DEFAULT_PORT = 13000
_CONNECT_TIMEOUT_S = 10.0


def _host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError:
        port = -1
    if not parts.hostname or port < 1 or parts.path not in ("", "/"):
        raise BadInput(f"a gRPC study storage must be grpc://host:port; got {redact(url)}; "
                       f"fix: hydra.sweeper.storage=grpc://127.0.0.1:{DEFAULT_PORT}")
    return parts.hostname, port


def open_grpc(url: str) -> BaseStorage:
    host, port = _host_port(url)
    try:
        import grpc
        from optuna.storages import GrpcStorageProxy
    except ImportError:
        raise BadInput(f"the gRPC study storage needs grpcio; got {redact(url)}; "
                       f"fix: pip install 'search[grpc]'") from None
    proxy = GrpcStorageProxy(host=host, port=port)
    try:
        proxy.wait_server_ready(timeout=_CONNECT_TIMEOUT_S)
    except (grpc.FutureTimeoutError, ConnectionError) as err:
        raise BadInput(f"the gRPC storage proxy must be reachable; got {redact(url)} ({type(err).__name__}); "
                       f"fix: start it with python -m search.sweep.grpc_storage <database URL>") from None
    return proxy


def main(argv: list[str]) -> int:
    """`python -m search.sweep.grpc_storage DATABASE_URL [--host H] [--port P]`: serve one study storage."""
    import argparse

    import optuna

    parser = argparse.ArgumentParser(prog="python -m search.sweep.grpc_storage", description=main.__doc__)
    parser.add_argument("storage", help="the study storage to serve, e.g. postgresql://user:pw@db/search")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (insecure gRPC: a private network's address, never a public one)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    args = parser.parse_args(argv)
    storage = optuna.storages.get_storage(args.storage)  # cached: the point of the proxy
    print(f"serving {redact(args.storage)} on grpc://{args.host}:{args.port}", flush=True)
    optuna.storages.run_grpc_proxy_server(storage, host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
