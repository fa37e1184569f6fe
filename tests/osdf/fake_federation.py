"""A Pelican federation in miniature, on 127.0.0.1 only, for the ``pelican`` backend.

Two HTTPS servers, as in a real federation:

- the director: ``/.well-known/pelican-configuration`` (federation discovery), then for
  an object path the headers pelicanfs reads (``Link`` to the cache, ``Location``,
  ``X-Pelican-Namespace``), and ``/api/v1.0/director/origin/<path>`` for writes;
- a server that is both cache and origin over a directory: HEAD, GET, WebDAV PROPFIND
  (what pelicanfs's ``info`` sends) and PUT. It demands the bearer token on every request.

TLS uses a throw-away certificate for 127.0.0.1; clients trust it through SSL_CERT_FILE.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
import threading
from email.utils import formatdate
from pathlib import Path
from xml.sax.saxutils import escape

from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

NAMESPACE = "/ospool"


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, valid for a day (cryptography comes
    with pelicanfs's own dependencies)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


class FakeFederation:
    def __init__(self, origin: Path, token: str, cert: Path, key: Path):
        self.origin = origin
        self.token = token
        self.cert, self.key = cert, key
        self.requests: list[tuple[str, str]] = []
        self._loop = asyncio.new_event_loop()
        self._runners: list[web.AppRunner] = []
        self.director_url = self.data_url = ""

    # --- lifecycle -------------------------------------------------------------
    def start(self) -> "FakeFederation":
        started = threading.Event()
        threading.Thread(target=self._serve, args=(started,), daemon=True).start()
        if not started.wait(10):
            raise RuntimeError("fake federation did not start")
        return self

    def stop(self) -> None:
        future = asyncio.run_coroutine_threadsafe(self._cleanup(), self._loop)
        future.result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)

    @property
    def discovery_url(self) -> str:
        return self.director_url.replace("https://", "pelican://")

    def _serve(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start_sites())
        started.set()
        self._loop.run_forever()

    async def _start_sites(self) -> None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, self.key)
        director, data = web.Application(), web.Application()
        director.router.add_get("/.well-known/pelican-configuration", self._discovery)
        director.router.add_get("/api/v1.0/director/origin/{path:.*}", self._origin_redirect)
        director.router.add_get("/{path:.*}", self._cache_redirect)
        data.router.add_route("HEAD", "/{path:.*}", self._head)
        data.router.add_get("/{path:.*}", self._get, allow_head=False)
        data.router.add_route("PROPFIND", "/{path:.*}", self._propfind)
        data.router.add_put("/{path:.*}", self._put)
        urls = []
        for app in (director, data):
            runner = web.AppRunner(app)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
            await site.start()
            self._runners.append(runner)
            port = runner.addresses[0][1]
            urls.append(f"https://127.0.0.1:{port}")
        self.director_url, self.data_url = urls

    async def _cleanup(self) -> None:
        for runner in self._runners:
            await runner.cleanup()

    # --- director ----------------------------------------------------------------
    def _namespace_headers(self) -> dict[str, str]:
        return {
            "X-Pelican-Namespace": f"namespace={NAMESPACE}, require-token=true, "
            f"collections-url={self.data_url}",
        }

    async def _discovery(self, request: web.Request) -> web.Response:
        return web.json_response({"director_endpoint": self.director_url + "/"})

    async def _cache_redirect(self, request: web.Request) -> web.Response:
        target = f"{self.data_url}/{request.match_info['path']}"
        headers = {
            "Location": target,
            "Link": f'<{target}>; rel="duplicate"; pri=1; depth=1',
            **self._namespace_headers(),
        }
        return web.Response(status=307, headers=headers)

    async def _origin_redirect(self, request: web.Request) -> web.Response:
        target = f"{self.data_url}/{request.match_info['path']}"
        return web.Response(status=307, headers={"Location": target, **self._namespace_headers()})

    # --- cache + origin ----------------------------------------------------------
    def _file(self, request: web.Request) -> Path:
        return self.origin / request.match_info["path"]

    def _authorized(self, request: web.Request) -> bool:
        self.requests.append((request.method, request.path))
        return request.headers.get("Authorization") == f"Bearer {self.token}"

    def _readable(self, request: web.Request) -> Path | web.Response:
        """The object's file, or the error response a cache would give instead."""
        if not self._authorized(request):
            return web.Response(status=403)
        file = self._file(request)
        return file if file.is_file() else web.Response(status=404)

    async def _head(self, request: web.Request) -> web.Response:
        file = self._readable(request)
        if isinstance(file, web.Response):
            return file
        return web.Response(headers={"Content-Length": str(file.stat().st_size)})

    async def _get(self, request: web.Request) -> web.Response:
        file = self._readable(request)
        if isinstance(file, web.Response):
            return file
        return web.Response(body=file.read_bytes())

    async def _propfind(self, request: web.Request) -> web.Response:
        file = self._readable(request)
        if isinstance(file, web.Response):
            return file
        stat = file.stat()
        body = (
            '<?xml version="1.0" encoding="utf-8"?>'
            '<D:multistatus xmlns:D="DAV:"><D:response>'
            f"<D:href>{escape(request.path)}</D:href>"
            "<D:propstat><D:prop>"
            f"<D:displayname>{escape(file.name)}</D:displayname>"
            f"<D:getcontentlength>{stat.st_size}</D:getcontentlength>"
            f"<D:getlastmodified>{formatdate(stat.st_mtime, usegmt=True)}</D:getlastmodified>"
            "<D:resourcetype/>"
            "</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>"
            "</D:response></D:multistatus>"
        )
        return web.Response(status=207, body=body, content_type="application/xml")

    async def _put(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.Response(status=403, text="permission denied")
        file = self._file(request)
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(await request.read())
        return web.Response(status=201)
