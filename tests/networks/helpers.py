"""Real network pieces on loopback for the TLS, proxy, redirect and rate-limit tests.

``Pki`` is a test CA made by ``trustme`` and the certificates it signs, as PEM files (the
forward proxy is ``surgelab.testing.connect_proxy``). ``NginxTls`` is nginx terminating TLS in front of an HTTP upstream, on two ports: one
with a certificate for ``api.surgelab.test`` only, one that requires client certificates.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import trustme

HOST = "127.0.0.1"
OTHER_NAME = "api.surgelab.test"


@dataclass
class Pki:
    ca: Path  # the CA certificate to trust
    server: Path  # certificate chain and key for 127.0.0.1 and localhost
    other: Path  # certificate chain and key for api.surgelab.test only
    client_cert: Path
    client_key: Path

    @classmethod
    def make(cls, folder: Path) -> Pki:
        ca = trustme.CA()
        paths = cls(*(folder / n for n in ("ca.pem", "server.pem", "other.pem", "client.crt", "client.key")))
        ca.cert_pem.write_to_path(str(paths.ca))
        ca.issue_cert(HOST, "localhost").private_key_and_cert_chain_pem.write_to_path(str(paths.server))
        ca.issue_cert(OTHER_NAME).private_key_and_cert_chain_pem.write_to_path(str(paths.other))
        client = ca.issue_cert("client@surgelab.test")
        client.cert_chain_pems[0].write_to_path(str(paths.client_cert))
        client.private_key_pem.write_to_path(str(paths.client_key))
        return paths


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        socket.create_connection((HOST, port), timeout=0.5).close()
    except OSError:
        return False
    return True


def nginx_executable() -> str | None:
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None
    )


class NginxTls:
    """nginx in front of ``upstream`` (host:port): ``other_port`` serves api.surgelab.test's certificate,
    ``mtls_port`` the 127.0.0.1 one and requires a client certificate the test CA signed."""

    def __init__(self, pki: Pki, upstream: str, folder: Path) -> None:
        self.folder, self.other_port, self.mtls_port = folder, free_port(), free_port()
        temp = "".join(
            f"    {k}_temp_path {folder / k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        location = f"""        location / {{
            proxy_pass http://{upstream};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}"""
        (folder / "nginx.conf").write_text(f"""worker_processes 1;
pid {folder / "nginx.pid"};
error_log {folder / "error.log"} warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
{temp}    server {{
        listen {HOST}:{self.other_port} ssl;
        ssl_certificate {pki.other};
        ssl_certificate_key {pki.other};
{location}
    }}
    server {{
        listen {HOST}:{self.mtls_port} ssl;
        ssl_certificate {pki.server};
        ssl_certificate_key {pki.server};
        ssl_client_certificate {pki.ca};
        ssl_verify_client on;
{location}
    }}
}}
""")
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> NginxTls:
        nginx = nginx_executable()
        assert nginx, "nginx is not installed (apt-get install nginx)"
        log = open(self.folder / "stdout.log", "wb")  # noqa: SIM115 - the child writes it until stopped
        self.process = subprocess.Popen(
            [nginx, "-p", f"{self.folder}/", "-c", str(self.folder / "nginx.conf"), "-g", "daemon off;"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                log = self.folder / "error.log"
                raise AssertionError(f"nginx exited: {log.read_text() if log.exists() else ''}")
            if _listening(self.mtls_port) and _listening(self.other_port):
                return self
            time.sleep(0.05)
        self.__exit__()
        raise AssertionError("nginx did not listen within 10 s")

    def __exit__(self, *_exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # the master and its worker
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
